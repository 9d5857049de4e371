//! Emits rhai source for a checked tree. The output is fully parenthesised, uses only the
//! operators and the `w_*` functions registered in [`crate::runtime`], and never assigns to
//! anything but its own block-local variables: an author's text never reaches rhai unparsed.

use std::fmt::Write;

use crate::check::{Builtin, GenKind, Ir, IrKind, Lit};
use crate::parser::{BinOp, UnOp};
use crate::schema::Type;

pub(crate) fn emit(ir: &Ir) -> String {
    let mut e = Emitter {
        out: String::new(),
        next: 0,
    };
    e.expr(ir);
    e.out
}

struct Emitter {
    out: String,
    next: usize,
}

impl Emitter {
    fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn lit(&mut self, lit: &Lit) {
        match lit {
            Lit::Null => self.push("()"),
            Lit::Bool(b) => self.push(if *b { "true" } else { "false" }),
            Lit::Int(i64::MIN) => self.push("(-9223372036854775807 - 1)"),
            Lit::Int(n) if *n < 0 => {
                let _ = write!(self.out, "({n})");
            }
            Lit::Int(n) => {
                let _ = write!(self.out, "{n}");
            }
            Lit::Float(f) => {
                let s = float_literal(*f);
                let _ = if *f < 0.0 {
                    write!(self.out, "({s})")
                } else {
                    write!(self.out, "{s}")
                };
            }
            Lit::Str(s) => {
                let quoted = string_literal(s);
                self.push(&quoted);
            }
        }
    }

    fn string(&mut self, s: &str) {
        let quoted = string_literal(s);
        self.push(&quoted);
    }

    fn call(&mut self, name: &str, args: &[&Ir], trailing_text: Option<&str>) {
        self.push(name);
        self.push("(");
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.expr(a);
        }
        if let Some(t) = trailing_text {
            if !args.is_empty() {
                self.push(", ");
            }
            self.string(t);
        }
        self.push(")");
    }

    fn expr(&mut self, ir: &Ir) {
        match &ir.kind {
            IrKind::Const(lit) => self.lit(lit),
            IrKind::List(items) => {
                self.push("[");
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.push(", ");
                    }
                    self.expr(item);
                }
                self.push("]");
            }
            IrKind::Root(name) | IrKind::Var(name) => self.push(name),
            IrKind::Field { base, name, .. } => {
                self.push("(");
                self.expr(base);
                self.push(").");
                self.push(name);
            }
            IrKind::Key { base, key } => self.call("w_key", &[base, key], Some(&ir.text)),
            IrKind::Get {
                base, key, default, ..
            } => self.call("w_get", &[base, key, default], Some(&ir.text)),
            IrKind::Call(builtin, args) => {
                let args: Vec<&Ir> = args.iter().collect();
                let name = match builtin {
                    Builtin::Len => "w_len",
                    Builtin::Lower => "w_lower",
                    Builtin::Upper => "w_upper",
                    Builtin::Contains => "w_contains",
                    Builtin::StartsWith => "w_starts_with",
                    Builtin::EndsWith => "w_ends_with",
                    Builtin::Matches => "w_matches",
                    Builtin::Abs => "w_abs",
                    Builtin::ToInt => "w_int",
                    Builtin::ToFloat => "w_float",
                    Builtin::ToStr => "w_str",
                    Builtin::Has => "w_has",
                    Builtin::AnyOf => "w_any",
                    Builtin::AllOf => "w_all",
                    Builtin::SumOf => "w_sum",
                    Builtin::MinOf => "w_min_of",
                    Builtin::MaxOf => "w_max_of",
                    Builtin::Min | Builtin::Max => {
                        // min(a, b, c) is min_of([a, b, c]).
                        self.push(if *builtin == Builtin::Min {
                            "w_min_of(["
                        } else {
                            "w_max_of(["
                        });
                        for (i, a) in args.iter().enumerate() {
                            if i > 0 {
                                self.push(", ");
                            }
                            self.expr(a);
                        }
                        self.push("], ");
                        self.string(&ir.text);
                        self.push(")");
                        return;
                    }
                };
                self.call(name, &args, Some(&ir.text));
            }
            IrKind::Gen {
                kind,
                var,
                iter,
                elem,
                filter,
            } => self.generator(*kind, var, iter, elem, filter.as_deref(), &ir.text),
            IrKind::Unary(UnOp::Neg, inner) => {
                self.push("(0 - ");
                self.expr(inner);
                self.push(")");
            }
            IrKind::Unary(UnOp::Not, inner) => {
                self.push("(!");
                self.bool_operand(inner);
                self.push(")");
            }
            IrKind::Binary(op, a, b) => self.binary(*op, a, b, &ir.text),
        }
    }

    /// A value used as a boolean: checked at run time when its type is not known.
    fn bool_operand(&mut self, ir: &Ir) {
        if ir.ty.strip_null() == &Type::Bool && !matches!(ir.ty, Type::Nullable(_)) {
            self.expr(ir);
        } else {
            self.call("w_bool", &[ir], Some(&ir.text));
        }
    }

    fn binary(&mut self, op: BinOp, a: &Ir, b: &Ir, text: &str) {
        let dynamic = is_dynamic(&a.ty) || is_dynamic(&b.ty);
        // rhai compares floats with a relative epsilon (`0.0 >= 1e-19` is true there); Warden
        // compares numbers exactly, as Python and the fast path do, so anything that may be a
        // float goes through the exact `w_*` comparisons.
        let exact = dynamic
            || !matches!(
                (a.ty.strip_null(), b.ty.strip_null()),
                (
                    Type::Int | Type::Str | Type::Bool,
                    Type::Int | Type::Str | Type::Bool
                )
            );
        match op {
            BinOp::And | BinOp::Or => {
                self.push("(");
                self.bool_operand(a);
                self.push(if op == BinOp::And { " && " } else { " || " });
                self.bool_operand(b);
                self.push(")");
            }
            BinOp::Div => self.call("w_div", &[a, b], Some(text)),
            BinOp::Add | BinOp::Sub | BinOp::Mul if dynamic => {
                let f = match op {
                    BinOp::Add => "w_add",
                    BinOp::Sub => "w_sub",
                    _ => "w_mul",
                };
                self.call(f, &[a, b], Some(text));
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne if exact => {
                let f = match op {
                    BinOp::Lt => "w_lt",
                    BinOp::Le => "w_le",
                    BinOp::Gt => "w_gt",
                    BinOp::Ge => "w_ge",
                    BinOp::Eq => "w_eq",
                    _ => "w_ne",
                };
                self.call(f, &[a, b], Some(text));
            }
            BinOp::In => self.call("w_contains", &[b, a], Some(text)),
            BinOp::NotIn => {
                self.push("(!");
                self.call("w_contains", &[b, a], Some(text));
                self.push(")");
            }
            _ => {
                self.push("(");
                self.expr(a);
                self.push(" ");
                self.push(op.symbol());
                self.push(" ");
                self.expr(b);
                self.push(")");
            }
        }
    }

    fn generator(
        &mut self,
        kind: GenKind,
        var: &str,
        iter: &Ir,
        elem: &Ir,
        filter: Option<&Ir>,
        text: &str,
    ) {
        let r = format!("w_r{}", self.next);
        self.next += 1;
        let init = match kind {
            GenKind::Any => "false",
            GenKind::All => "true",
            GenKind::Count | GenKind::Sum => "0",
            GenKind::Min | GenKind::Max => "()",
        };
        // Parenthesised: rhai reads `if {` as the start of the if's body.
        let _ = write!(self.out, "({{ let {r} = {init}; for {var} in ");
        self.call("w_iter", &[iter], Some(&iter.text));
        self.push(" { ");
        if let Some(f) = filter {
            self.push("if ");
            self.bool_operand(f);
            self.push(" { ");
        }
        match kind {
            GenKind::Any => {
                self.push("if ");
                self.bool_operand(elem);
                let _ = write!(self.out, " {{ {r} = true; break; }}");
            }
            GenKind::All => {
                self.push("if !");
                self.bool_operand(elem);
                let _ = write!(self.out, " {{ {r} = false; break; }}");
            }
            GenKind::Count => {
                self.push("if ");
                self.bool_operand(elem);
                let _ = write!(self.out, " {{ {r} += 1; }}");
            }
            GenKind::Sum => {
                let _ = write!(self.out, "{r} = w_add({r}, ");
                self.expr(elem);
                self.push(", ");
                self.string(text);
                self.push(");");
            }
            GenKind::Min | GenKind::Max => {
                let f = if kind == GenKind::Min {
                    "w_min_of"
                } else {
                    "w_max_of"
                };
                let _ = write!(self.out, "{r} = {f}([{r}, ");
                self.expr(elem);
                self.push("], ");
                self.string(text);
                self.push(");");
            }
        }
        if filter.is_some() {
            self.push(" }");
        }
        let _ = write!(self.out, " }} {r} }})");
    }
}

fn is_dynamic(t: &Type) -> bool {
    matches!(t, Type::Any | Type::Nullable(_))
}

fn float_literal(f: f64) -> String {
    let s = format!("{:?}", f.abs());
    let s = if s.contains('e') && !s.contains('.') {
        s.replacen('e', ".0e", 1)
    } else {
        s
    };
    if f < 0.0 { format!("-{s}") } else { s }
}

pub(crate) fn string_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        assert_eq!(float_literal(1e300), "1.0e300");
        assert_eq!(float_literal(-0.5), "-0.5");
        assert_eq!(float_literal(2.0), "2.0");
        assert_eq!(
            string_literal("a\"b\\c\n\u{1}é"),
            "\"a\\\"b\\\\c\\n\\x01é\""
        );
    }
}
