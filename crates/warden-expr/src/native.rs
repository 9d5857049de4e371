//! The fast path: conditions made only of typed scalar facts, constants, arithmetic,
//! comparisons and `and`/`or`/`not` (threshold rules, the common case) are compiled to a small
//! tree evaluated directly against [`Facts`], without building script values.
//!
//! It must agree with the rhai path on every input; a property test checks exactly that. So
//! every operation here mirrors [`crate::runtime`]: checked integer arithmetic, `/` always a
//! float division that refuses zero, integers and floats compared by value.

use std::cmp::Ordering;

use crate::check::{Ir, IrKind, Lit};
use crate::parser::{BinOp, UnOp};
use crate::runtime::divide;
use crate::schema::{MapId, ScalarId, Type};
use crate::{Bound, Comparison, Data, Facts, Scalar, Threshold};

/// Why the fast path did not give an answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fail {
    /// The condition is broken (the verdict is an error).
    Error(String),
    /// Free-form data was not what the fast path mirrors (missing, a list or map, values of
    /// kinds that do not compare): the script engine evaluates the condition and says why.
    Script,
}

impl From<String> for Fail {
    fn from(e: String) -> Self {
        Fail::Error(e)
    }
}

impl From<&str> for Fail {
    fn from(e: &str) -> Self {
        Fail::Error(e.to_string())
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Native {
    /// `float scalar <op> number`, the threshold rule, tested without recursion.
    FloatThreshold(ScalarId, BinOp, f64),
    /// `integer scalar <op> integer`.
    IntThreshold(ScalarId, BinOp, i64),
    Const(Lit),
    Scalar(ScalarId),
    MapGet(MapId, Box<Native>, Box<Native>),
    Neg(Box<Native>),
    Not(Box<Native>),
    And(Box<Native>, Box<Native>),
    Or(Box<Native>, Box<Native>),
    Arith(BinOp, Box<Native>, Box<Native>, Box<str>),
    Div(Box<Native>, Box<Native>, Box<str>),
    Cmp(BinOp, Box<Native>, Box<Native>),
    /// A scalar inside free-form data (`result.count`, `get(context.state, 'n', 0)`): the value
    /// at `path` (a root, then fields the schema declares), then its map `keys`; with a default
    /// when the last key is absent (`get`). Anything else ends the fast path ([`Fail::Script`]).
    Data {
        path: Box<[String]>,
        keys: Box<[String]>,
        default: Option<Box<Native>>,
    },
    /// `a op b` where one side is free-form, with the script engine's rules (`w_lt`...): two
    /// numbers or two strings compare; `==` and `!=` also take any two scalars; anything else
    /// ends the fast path.
    DynCmp(BinOp, Box<Native>, Box<Native>),
}

/// Compiles `ir` to the fast path, or `None` if any part of it needs the script engine.
pub(crate) fn compile(ir: &Ir) -> Option<Native> {
    let scalar_type = |t: &Type| matches!(t, Type::Bool | Type::Int | Type::Float | Type::Str);
    if !scalar_type(&ir.ty) {
        return None;
    }
    if let Some(n) = dynamic_comparison(ir) {
        return Some(n);
    }
    Some(match &ir.kind {
        IrKind::Const(lit) => Native::Const(lit.clone()),
        IrKind::Field {
            base,
            scalar: Some(id),
            ..
        } if static_path(base) => Native::Scalar(*id),
        IrKind::Get {
            key,
            default,
            direct: Some(map),
            ..
        } => Native::MapGet(*map, Box::new(compile(key)?), Box::new(compile(default)?)),
        IrKind::Unary(UnOp::Neg, inner) if inner.ty.is_numeric() => {
            Native::Neg(Box::new(compile(inner)?))
        }
        IrKind::Unary(UnOp::Not, inner) => Native::Not(Box::new(compile(inner)?)),
        IrKind::Binary(op, a, b) => {
            let (na, nb) = (Box::new(compile(a)?), Box::new(compile(b)?));
            let numeric = a.ty.is_numeric() && b.ty.is_numeric();
            match op {
                BinOp::And => Native::And(na, nb),
                BinOp::Or => Native::Or(na, nb),
                BinOp::Add | BinOp::Sub | BinOp::Mul if numeric => {
                    Native::Arith(*op, na, nb, ir.text.clone().into())
                }
                BinOp::Div if numeric => Native::Div(na, nb, ir.text.clone().into()),
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
                    if numeric || a.ty == b.ty =>
                {
                    threshold(*op, &na, &nb, a, b).unwrap_or(Native::Cmp(*op, na, nb))
                }
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// `a op b` with a side that is free-form data read by keys (see [`Native::Data`]); `None` when
/// it is not that, or a side is not on the fast path.
fn dynamic_comparison(ir: &Ir) -> Option<Native> {
    let IrKind::Binary(
        op @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge),
        a,
        b,
    ) = &ir.kind
    else {
        return None;
    };
    let free = |t: &Type| matches!(t, Type::Any);
    if !free(&a.ty) && !free(&b.ty) {
        return None;
    }
    let operand = |x: &Ir| data(x).or_else(|| compile(x));
    Some(Native::DynCmp(
        *op,
        Box::new(operand(a)?),
        Box::new(operand(b)?),
    ))
}

/// A read of free-form data by constant keys (`result.count`, `result['a'].b`,
/// `get(context.state, 'n', 0)`) below a chain of declared fields.
fn data(ir: &Ir) -> Option<Native> {
    let (mut base, mut keys, default) = match &ir.kind {
        IrKind::Key { base, key } => (base, vec![const_key(key)?], None),
        IrKind::Get {
            base,
            key,
            default,
            direct: None,
        } => (
            base,
            vec![const_key(key)?],
            Some(Box::new(compile(default)?)),
        ),
        _ => return None,
    };
    while let IrKind::Key { base: inner, key } = &base.kind {
        keys.push(const_key(key)?);
        base = inner;
    }
    if !matches!(base.ty.strip_null(), Type::Any | Type::Map(_)) {
        return None;
    }
    keys.reverse();
    let mut path = Vec::new();
    let mut at = &**base;
    loop {
        match &at.kind {
            IrKind::Root(name) => {
                path.push(name.clone());
                break;
            }
            IrKind::Field { base, name, .. } => {
                path.push(name.clone());
                at = base;
            }
            _ => return None,
        }
    }
    path.reverse();
    Some(Native::Data {
        path: path.into(),
        keys: keys.into(),
        default,
    })
}

fn const_key(key: &Ir) -> Option<String> {
    match &key.kind {
        IrKind::Const(Lit::Str(k)) => Some(k.clone()),
        _ => None,
    }
}

/// The threshold form of `a op b`, when one side is a scalar fact and the other a number.
fn threshold(op: BinOp, na: &Native, nb: &Native, a: &Ir, b: &Ir) -> Option<Native> {
    let flipped = |op: BinOp| match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    };
    let (id, scalar_ty, op, k) = match (na, nb) {
        (Native::Scalar(id), Native::Const(k)) => (*id, &a.ty, op, k),
        (Native::Const(k), Native::Scalar(id)) => (*id, &b.ty, flipped(op), k),
        _ => return None,
    };
    match (scalar_ty, k) {
        (Type::Float, Lit::Float(k)) => Some(Native::FloatThreshold(id, op, *k)),
        (Type::Float, Lit::Int(k)) => Some(Native::FloatThreshold(id, op, *k as f64)),
        (Type::Int, Lit::Int(k)) => Some(Native::IntThreshold(id, op, *k)),
        _ => None,
    }
}

/// Whether `ir` is a chain of declared record fields from a root (no variables, no free keys).
fn static_path(ir: &Ir) -> bool {
    match &ir.kind {
        IrKind::Root(_) => true,
        IrKind::Field { base, .. } => static_path(base),
        _ => false,
    }
}

impl Native {
    /// A threshold that must hold for this boolean tree to be true: the tree itself, or the
    /// first threshold of an `and` chain (`!=` is not offered: it excludes a single value).
    pub(crate) fn necessary_threshold(&self) -> Option<Threshold> {
        let (fact, op, bound) = match self {
            Native::FloatThreshold(id, op, k) => (*id, *op, Bound::Float(*k)),
            Native::IntThreshold(id, op, k) => (*id, *op, Bound::Int(*k)),
            Native::And(a, b) => {
                return a.necessary_threshold().or_else(|| b.necessary_threshold());
            }
            _ => return None,
        };
        let comparison = match op {
            BinOp::Lt => Comparison::Lt,
            BinOp::Le => Comparison::Le,
            BinOp::Gt => Comparison::Gt,
            BinOp::Ge => Comparison::Ge,
            BinOp::Eq => Comparison::Eq,
            _ => return None,
        };
        Some(Threshold {
            fact,
            comparison,
            bound,
        })
    }

    /// Whether it reads free-form data (so it may need the script engine after all).
    pub(crate) fn reads_data(&self) -> bool {
        match self {
            Native::Data { .. } | Native::DynCmp(..) => true,
            Native::MapGet(_, a, b)
            | Native::And(a, b)
            | Native::Or(a, b)
            | Native::Arith(_, a, b, _)
            | Native::Div(a, b, _)
            | Native::Cmp(_, a, b) => a.reads_data() || b.reads_data(),
            Native::Neg(a) | Native::Not(a) => a.reads_data(),
            Native::FloatThreshold(..)
            | Native::IntThreshold(..)
            | Native::Const(_)
            | Native::Scalar(_) => false,
        }
    }

    /// Evaluates a boolean tree (the root of a fast-path condition).
    pub(crate) fn test(&self, facts: &dyn Facts) -> Result<bool, Fail> {
        match self {
            Native::FloatThreshold(id, op, k) => Ok(match facts.scalar(*id) {
                Scalar::Float(x) => ordered(*op, x.partial_cmp(k)),
                Scalar::Int(x) => ordered(*op, (x as f64).partial_cmp(k)),
                other => compare(*op, &other, &Scalar::Float(*k)),
            }),
            Native::IntThreshold(id, op, k) => Ok(match facts.scalar(*id) {
                Scalar::Int(x) => ordered(*op, Some(x.cmp(k))),
                other => compare(*op, &other, &Scalar::Int(*k)),
            }),
            Native::Not(inner) => Ok(!inner.test(facts)?),
            Native::And(a, b) => Ok(a.test(facts)? && b.test(facts)?),
            Native::Or(a, b) => Ok(a.test(facts)? || b.test(facts)?),
            other => truth(other.eval(facts)?),
        }
    }

    pub(crate) fn eval<'a>(&'a self, facts: &'a dyn Facts) -> Result<Scalar<'a>, Fail> {
        Ok(match self {
            Native::FloatThreshold(..) | Native::IntThreshold(..) => {
                Scalar::Bool(self.test(facts)?)
            }
            Native::Const(lit) => match lit {
                Lit::Null => Scalar::Null,
                Lit::Bool(b) => Scalar::Bool(*b),
                Lit::Int(n) => Scalar::Int(*n),
                Lit::Float(f) => Scalar::Float(*f),
                Lit::Str(s) => Scalar::Str(s),
            },
            Native::Scalar(id) => facts.scalar(*id),
            Native::MapGet(map, key, default) => {
                let Scalar::Str(k) = key.eval(facts)? else {
                    return Err("a map key must be a string".into());
                };
                match facts.map_get(*map, k) {
                    Some(v) => v,
                    None => default.eval(facts)?,
                }
            }
            Native::Neg(inner) => match inner.eval(facts)? {
                Scalar::Int(n) => Scalar::Int(
                    0i64.checked_sub(n)
                        .ok_or("negation overflows a 64-bit integer")?,
                ),
                Scalar::Float(f) => Scalar::Float(0.0 - f),
                other => return Err(format!("cannot negate {other:?}").into()),
            },
            Native::Not(_) | Native::And(..) | Native::Or(..) => Scalar::Bool(self.test(facts)?),
            Native::Arith(op, a, b, text) => arith(*op, a.eval(facts)?, b.eval(facts)?, text)?,
            Native::Div(a, b, text) => {
                let (x, y) = (float(a.eval(facts)?)?, float(b.eval(facts)?)?);
                Scalar::Float(divide(x, y, text)?)
            }
            Native::Cmp(op, a, b) => Scalar::Bool(compare(*op, &a.eval(facts)?, &b.eval(facts)?)),
            Native::Data {
                path,
                keys,
                default,
            } => {
                let found = strs(path, |path| strs(keys, |keys| facts.data(path, keys)));
                match (found, default) {
                    (Data::Scalar(s), _) => s,
                    (Data::Missing, Some(d)) => d.eval(facts)?,
                    _ => return Err(Fail::Script),
                }
            }
            Native::DynCmp(op, a, b) => {
                let (x, y) = (a.eval(facts)?, b.eval(facts)?);
                let comparable = match (&x, &y) {
                    (Scalar::Int(_) | Scalar::Float(_), Scalar::Int(_) | Scalar::Float(_))
                    | (Scalar::Str(_), Scalar::Str(_)) => true,
                    _ => matches!(op, BinOp::Eq | BinOp::Ne),
                };
                if !comparable {
                    return Err(Fail::Script);
                }
                Scalar::Bool(compare(*op, &x, &y))
            }
        })
    }
}

/// `items` as `&str`s, without allocating for a short list (paths and keys are short).
fn strs<R>(items: &[String], f: impl FnOnce(&[&str]) -> R) -> R {
    const SHORT: usize = 8;
    if items.len() <= SHORT {
        let mut buf = [""; SHORT];
        for (b, s) in buf.iter_mut().zip(items) {
            *b = s;
        }
        f(&buf[..items.len()])
    } else {
        f(&items.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

fn truth(s: Scalar<'_>) -> Result<bool, Fail> {
    match s {
        Scalar::Bool(b) => Ok(b),
        other => Err(format!("expected true or false, got {other:?}").into()),
    }
}

fn float(s: Scalar<'_>) -> Result<f64, String> {
    match s {
        Scalar::Int(n) => Ok(n as f64),
        Scalar::Float(f) => Ok(f),
        other => Err(format!("expected a number, got {other:?}")),
    }
}

fn arith<'a>(op: BinOp, a: Scalar<'a>, b: Scalar<'a>, text: &str) -> Result<Scalar<'a>, String> {
    if let (Scalar::Int(x), Scalar::Int(y)) = (&a, &b) {
        let r = match op {
            BinOp::Add => x.checked_add(*y),
            BinOp::Sub => x.checked_sub(*y),
            _ => x.checked_mul(*y),
        };
        return r
            .map(Scalar::Int)
            .ok_or_else(|| format!("`{text}` overflows a 64-bit integer"));
    }
    let (x, y) = (float(a)?, float(b)?);
    Ok(Scalar::Float(match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        _ => x * y,
    }))
}

/// Comparison with rhai's semantics: numbers by value across int and float; strings
/// lexicographically; values of different kinds are unequal and unordered (false).
pub(crate) fn compare(op: BinOp, a: &Scalar<'_>, b: &Scalar<'_>) -> bool {
    let ord = match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(y)),
        (Scalar::Int(_) | Scalar::Float(_), Scalar::Int(_) | Scalar::Float(_)) => float(*a)
            .ok()
            .and_then(|x| float(*b).ok().and_then(|y| x.partial_cmp(&y))),
        (Scalar::Str(x), Scalar::Str(y)) => Some(x.cmp(y)),
        (Scalar::Bool(x), Scalar::Bool(y)) if matches!(op, BinOp::Eq | BinOp::Ne) => Some(x.cmp(y)),
        (Scalar::Null, Scalar::Null) if matches!(op, BinOp::Eq | BinOp::Ne) => {
            Some(Ordering::Equal)
        }
        _ => None,
    };
    ordered(op, ord)
}

/// The comparison's answer given the operands' order (`None`: unordered or unequal kinds).
fn ordered(op: BinOp, ord: Option<Ordering>) -> bool {
    match (op, ord) {
        (BinOp::Ne, None) => true,
        (_, None) => false,
        (BinOp::Eq, Some(o)) => o.is_eq(),
        (BinOp::Ne, Some(o)) => o.is_ne(),
        (BinOp::Lt, Some(o)) => o.is_lt(),
        (BinOp::Le, Some(o)) => o.is_le(),
        (BinOp::Gt, Some(o)) => o.is_gt(),
        (_, Some(o)) => o.is_ge(),
    }
}
