//! Name resolution and type checking: turns the parsed tree into a typed tree (`Ir`) against a
//! [`Schema`], expanding aliases and helpers, and rejects what can never work with a message
//! that says how to fix it.

use std::collections::HashMap;

use warden_input::closest;

use crate::error::{ErrorKind, ExprError, Span};
use crate::parser::{BinOp, Expr, ExprKind, Generator, UnOp, parse};
use crate::schema::{Binding, MapId, ScalarId, Schema, Type};

/// Deepest alias/helper expansion; deeper means a helper that refers to itself.
const MAX_EXPANSION: usize = 16;

mod calls;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Ir {
    pub kind: IrKind,
    pub ty: Type,
    /// The author's spelling of this sub-expression, for run-time messages.
    pub text: String,
    /// Where the author wrote it (the call site, for code inside a helper).
    pub span: Span,
}

#[derive(Debug, Clone)]
pub(crate) enum IrKind {
    Const(Lit),
    List(Vec<Ir>),
    Root(String),
    Var(String),
    /// A field the schema declares on a record: always present.
    Field {
        base: Box<Ir>,
        name: String,
        scalar: Option<ScalarId>,
    },
    /// A key of free-form data: may be missing at run time.
    Key {
        base: Box<Ir>,
        key: Box<Ir>,
    },
    /// `get(map, key, default)`: a missing key gives the default (null when not given).
    Get {
        base: Box<Ir>,
        key: Box<Ir>,
        default: Box<Ir>,
        direct: Option<MapId>,
    },
    Call(Builtin, Vec<Ir>),
    Gen {
        kind: GenKind,
        var: String,
        iter: Box<Ir>,
        elem: Box<Ir>,
        filter: Option<Box<Ir>>,
    },
    Unary(UnOp, Box<Ir>),
    Binary(BinOp, Box<Ir>, Box<Ir>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Len,
    Lower,
    Upper,
    Contains,
    StartsWith,
    EndsWith,
    Matches,
    Abs,
    Min,
    Max,
    ToInt,
    ToFloat,
    ToStr,
    Has,
    AnyOf,
    AllOf,
    SumOf,
    MinOf,
    MaxOf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GenKind {
    Any,
    All,
    Count,
    Sum,
    Min,
    Max,
}

/// The functions of the language itself (helpers declared by the schema come on top).
pub(crate) const BUILTINS: &[(&str, &str)] = &[
    (
        "len",
        "len(x): number of items of a list or map, or characters of a string",
    ),
    (
        "any",
        "any(list) or any(cond for x in list [if filter]): true if one is true",
    ),
    (
        "all",
        "all(list) or all(cond for x in list [if filter]): true if none is false",
    ),
    (
        "count",
        "count(cond for x in list [if filter]): how many are true",
    ),
    ("sum", "sum(list) or sum(value for x in list [if filter])"),
    (
        "min",
        "min(a, b, ...) or min(list) or min(value for x in list); null when empty",
    ),
    (
        "max",
        "max(a, b, ...) or max(list) or max(value for x in list); null when empty",
    ),
    ("abs", "abs(n): the absolute value"),
    ("lower", "lower(s): the string in lower case"),
    ("upper", "upper(s): the string in upper case"),
    (
        "contains",
        "contains(haystack, needle): substring, list item, or map key",
    ),
    ("starts_with", "starts_with(s, prefix)"),
    (
        "matches",
        "matches(s, 'regex'): whether the regular expression (a literal; Rust `regex` syntax, matched in linear time) finds a match in s",
    ),
    ("ends_with", "ends_with(s, suffix)"),
    (
        "get",
        "get(map, key) or get(map, key, default): a missing key gives the default (or null)",
    ),
    ("has", "has(map, key): whether the key is present"),
    ("int", "int(x): a number or numeric string as an integer"),
    ("float", "float(x): a number or numeric string as a float"),
    ("str", "str(x): any value as a string"),
];

pub(crate) struct Checker<'a> {
    schema: &'a Schema,
    src: &'a str,
    unavailable: &'a [(&'a str, &'a str)],
    vars: Vec<(String, String, Type)>,
    next_var: usize,
    expansion: usize,
    /// While expanding a helper or alias: its parameters, and the span of the call site.
    params: Vec<(HashMap<String, Ir>, Span)>,
}

impl<'a> Checker<'a> {
    pub(crate) fn new(
        schema: &'a Schema,
        src: &'a str,
        unavailable: &'a [(&'a str, &'a str)],
    ) -> Self {
        Checker {
            schema,
            src,
            unavailable,
            vars: Vec::new(),
            next_var: 0,
            expansion: 0,
            params: Vec::new(),
        }
    }

    pub(crate) fn check(&mut self, e: &Expr) -> Result<Ir, ExprError> {
        let r = self.check_inner(e);
        // Errors inside an expansion are reported at the call site: the author wrote that.
        match (r, self.params.last()) {
            (Err(err), Some((_, call))) => Err(err.at(*call)),
            (r, _) => r,
        }
    }

    /// The span the author sees: inside a helper or alias, the call site.
    fn author_span(&self, span: Span) -> Span {
        self.params.last().map_or(span, |(_, call)| *call)
    }

    fn ir(&self, kind: IrKind, ty: Type, span: Span) -> Ir {
        let span = self.author_span(span);
        Ir {
            kind,
            ty,
            text: self
                .src
                .get(span.start..span.end)
                .unwrap_or_default()
                .to_string(),
            span,
        }
    }

    fn type_name(&self, ty: &Type) -> String {
        ty.name(self.schema)
    }

    fn type_error(&self, span: Span, msg: String, help: Option<&str>) -> ExprError {
        ExprError::new(ErrorKind::Type, span, msg, help)
    }

    fn check_inner(&mut self, e: &Expr) -> Result<Ir, ExprError> {
        let span = e.span;
        match &e.kind {
            ExprKind::Null => Ok(self.ir(IrKind::Const(Lit::Null), Type::Null, span)),
            ExprKind::Bool(b) => Ok(self.ir(IrKind::Const(Lit::Bool(*b)), Type::Bool, span)),
            ExprKind::Int(n) => Ok(self.ir(IrKind::Const(Lit::Int(*n)), Type::Int, span)),
            ExprKind::Float(f) => Ok(self.ir(IrKind::Const(Lit::Float(*f)), Type::Float, span)),
            ExprKind::Str(s) => Ok(self.ir(IrKind::Const(Lit::Str(s.clone())), Type::Str, span)),
            ExprKind::List(items) => {
                let items = items
                    .iter()
                    .map(|i| self.check(i))
                    .collect::<Result<Vec<_>, _>>()?;
                let item_ty = unify(items.iter().map(|i| &i.ty));
                Ok(self.ir(IrKind::List(items), Type::list(item_ty), span))
            }
            ExprKind::Name(name) => self.name(name, span),
            ExprKind::Field(base, name, name_span) => {
                let base = self.check(base)?;
                self.field(base, name, *name_span, span)
            }
            ExprKind::Index(base, index) => {
                let base = self.check(base)?;
                let index = self.check(index)?;
                self.index(base, index, span)
            }
            ExprKind::Call(name, name_span, args) => self.call(name, *name_span, args, span),
            ExprKind::Gen(_) => Err(ExprError::syntax(
                span,
                "a `for` generator can only be the argument of any, all, count, sum, min or max",
                Some("write `any(t.success for t in context.history.tools)`"),
            )),
            ExprKind::Unary(op, inner) => {
                let inner = self.check(inner)?;
                self.unary(*op, inner, span)
            }
            ExprKind::Binary(op, a, b) => {
                let a = self.check(a)?;
                let b = self.check(b)?;
                self.binary(*op, a, b, span)
            }
        }
    }

    fn name(&mut self, name: &str, span: Span) -> Result<Ir, ExprError> {
        if let Some((params, _)) = self.params.last()
            && let Some(arg) = params.get(name)
        {
            return Ok(arg.clone());
        }
        if let Some((_, rhai_name, ty)) = self.vars.iter().rev().find(|(n, _, _)| n == name) {
            return Ok(self.ir(IrKind::Var(rhai_name.clone()), ty.clone(), span));
        }
        let expanding = !self.params.is_empty();
        let root = self
            .schema
            .root_def(name)
            .filter(|r| expanding || !r.hidden);
        let Some(root) = root else {
            let visible = self
                .schema
                .roots
                .iter()
                .filter(|r| !r.hidden)
                .map(|r| r.name.as_str())
                .chain(self.vars.iter().map(|(n, _, _)| n.as_str()));
            let help = closest(name, visible)
                .map(|c| format!("did you mean `{c}`?"))
                .or_else(|| {
                    // A field written without its root (`error` for `event.error`).
                    let paths = self.schema.paths();
                    let fields: Vec<&str> = paths
                        .iter()
                        .map(|(p, _)| p.as_str())
                        .filter(|p| p.split_once('.').is_some_and(|(_, rest)| rest == name))
                        .collect();
                    (!fields.is_empty()).then(|| {
                        let ticked: Vec<String> = fields.iter().map(|f| format!("`{f}`")).collect();
                        format!("did you mean {}?", ticked.join(" or "))
                    })
                });
            let roots: Vec<_> = self
                .schema
                .roots
                .iter()
                .filter(|r| !r.hidden && matches!(r.binding, Binding::Stored))
                .map(|r| r.name.as_str())
                .collect();
            let help =
                help.unwrap_or_else(|| format!("expressions start from {}", roots.join(", ")));
            return Err(ExprError::new(
                ErrorKind::UnknownName,
                span,
                format!("unknown name `{name}`"),
                Some(&help),
            ));
        };
        if let Some((_, why)) = self.unavailable.iter().find(|(n, _)| *n == name) {
            return Err(ExprError::new(
                ErrorKind::Unavailable,
                span,
                format!("`{name}` is not available here: {why}"),
                None,
            ));
        }
        match &root.binding {
            Binding::Alias(target) => {
                let target = target.clone();
                self.expand(&target, HashMap::new(), span)
            }
            Binding::Stored => Ok(self.ir(IrKind::Root(root.name.clone()), root.ty.clone(), span)),
        }
    }

    /// Parses and checks `body` with `params` bound, reporting errors at `call`.
    fn expand(
        &mut self,
        body: &str,
        params: HashMap<String, Ir>,
        call: Span,
    ) -> Result<Ir, ExprError> {
        if self.expansion >= MAX_EXPANSION {
            return Err(ExprError::new(
                ErrorKind::Limit,
                call,
                "helpers and aliases expand into each other too deeply",
                Some("a helper probably refers to itself"),
            ));
        }
        let parsed = parse(body).map_err(|e| {
            ExprError::new(
                e.kind(),
                call,
                format!("helper definition `{body}` is invalid: {}", e.message()),
                None,
            )
        })?;
        // Spans inside the body mean nothing to the author: while expanding, every node and
        // error takes the call site's span, so messages quote what the author wrote.
        self.expansion += 1;
        self.params.push((params, call));
        let vars = std::mem::take(&mut self.vars);
        let r = self.check_inner(&parsed);
        self.vars = vars;
        self.params.pop();
        self.expansion -= 1;
        r.map_err(|e| e.at(call))
    }

    fn field(
        &mut self,
        base: Ir,
        name: &str,
        name_span: Span,
        span: Span,
    ) -> Result<Ir, ExprError> {
        match base.ty.clone() {
            Type::Record(id) => {
                let rec = self.schema.record_def(id);
                let Some(field) = rec.field(name) else {
                    let help = closest(name, rec.fields.iter().map(|f| f.name.as_str()))
                        .map(|c| format!("did you mean `{}.{c}`?", base.text))
                        .unwrap_or_else(|| {
                            let names: Vec<_> =
                                rec.fields.iter().map(|f| f.name.as_str()).collect();
                            format!("`{}` has {}", base.text, names.join(", "))
                        });
                    return Err(ExprError::new(
                        ErrorKind::UnknownField,
                        name_span,
                        format!("`{}` has no field `{name}`", base.text),
                        Some(&help),
                    ));
                };
                match &field.binding {
                    Binding::Alias(target) => {
                        let target = target.clone();
                        self.expand(&target, HashMap::new(), span)
                    }
                    Binding::Stored => {
                        let (ty, scalar) = (field.ty.clone(), field.scalar);
                        Ok(self.ir(
                            IrKind::Field {
                                base: Box::new(base),
                                name: name.to_string(),
                                scalar,
                            },
                            ty,
                            span,
                        ))
                    }
                }
            }
            Type::Nullable(inner) if matches!(*inner, Type::Record(_)) => {
                // Reading a field of something that may be null: treat it as free-form data.
                let key = self.ir(
                    IrKind::Const(Lit::Str(name.to_string())),
                    Type::Str,
                    name_span,
                );
                let ty = match *inner {
                    Type::Record(id) => self
                        .schema
                        .record_def(id)
                        .field(name)
                        .map(|f| f.ty.clone())
                        .unwrap_or(Type::Any),
                    _ => Type::Any,
                };
                Ok(self.ir(
                    IrKind::Key {
                        base: Box::new(base),
                        key: Box::new(key),
                    },
                    ty,
                    span,
                ))
            }
            Type::Any | Type::Map(_) | Type::Nullable(_)
                if matches!(base.ty.strip_null(), Type::Any | Type::Map(_)) =>
            {
                let ty = match base.ty.strip_null() {
                    Type::Map(v) => (**v).clone(),
                    _ => Type::Any,
                };
                let key = self.ir(
                    IrKind::Const(Lit::Str(name.to_string())),
                    Type::Str,
                    name_span,
                );
                Ok(self.ir(
                    IrKind::Key {
                        base: Box::new(base),
                        key: Box::new(key),
                    },
                    ty,
                    span,
                ))
            }
            other => {
                let help = match other {
                    Type::List(_) => Some(
                        "a list has no fields: take an item with `[0]`, or use len(), any(), all()",
                    ),
                    _ => None,
                };
                Err(self.type_error(
                    name_span,
                    format!(
                        "`{}` is {}, which has no field `{name}`",
                        base.text,
                        self.type_name(&other)
                    ),
                    help,
                ))
            }
        }
    }

    fn index(&mut self, base: Ir, index: Ir, span: Span) -> Result<Ir, ExprError> {
        let ty = match (&base.ty, &index.ty) {
            (Type::List(item), Type::Int | Type::Any) => (**item).clone(),
            (Type::Map(v), Type::Str | Type::Any) => (**v).clone(),
            (Type::Any, Type::Int | Type::Str | Type::Any) => Type::Any,
            (Type::Record(_), Type::Str) => {
                if let IrKind::Const(Lit::Str(name)) = &index.kind {
                    let name = name.clone();
                    return self.field(base, &name, span, span);
                }
                return Err(self.type_error(
                    span,
                    format!(
                        "`{}` can only be indexed with a fixed field name",
                        base.text
                    ),
                    Some("write the field with a dot: `context.turn.number`"),
                ));
            }
            (b, i) => {
                return Err(self.type_error(
                    span,
                    format!(
                        "cannot index {} with {}",
                        self.type_name(b),
                        self.type_name(i)
                    ),
                    Some("lists take an integer index, maps a string key"),
                ));
            }
        };
        Ok(self.ir(
            IrKind::Key {
                base: Box::new(base),
                key: Box::new(index),
            },
            ty,
            span,
        ))
    }

    fn expect(
        &self,
        arg: &Ir,
        wanted: &[&str],
        ok: impl Fn(&Type) -> bool,
    ) -> Result<(), ExprError> {
        if ok(arg.ty.strip_null()) || arg.ty == Type::Any {
            return Ok(());
        }
        Err(self.type_error(
            arg.span,
            format!(
                "`{}` is {}, but {} is needed here",
                arg.text,
                self.type_name(&arg.ty),
                wanted
                    .iter()
                    .map(|w| article(w))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
            None,
        ))
    }

    fn expect_bool(&self, e: &Ir, what: &str) -> Result<(), ExprError> {
        match e.ty.strip_null() {
            Type::Bool | Type::Any => Ok(()),
            other => Err(self.type_error(
                e.span,
                format!(
                    "{what} must be true or false, but `{}` is {}",
                    e.text,
                    self.type_name(other)
                ),
                bool_hint(other),
            )),
        }
    }

    fn unary(&mut self, op: UnOp, inner: Ir, span: Span) -> Result<Ir, ExprError> {
        let ty = match op {
            UnOp::Neg => {
                if !(inner.ty.is_numeric() || inner.ty == Type::Any) {
                    return Err(self.type_error(
                        span,
                        format!(
                            "cannot negate `{}`, {}",
                            inner.text,
                            self.type_name(&inner.ty)
                        ),
                        None,
                    ));
                }
                inner.ty.clone()
            }
            UnOp::Not => {
                self.expect_bool(&inner, "the operand of `not`")
                    .map_err(|e| e.at(span))?;
                Type::Bool
            }
        };
        Ok(self.ir(IrKind::Unary(op, Box::new(inner)), ty, span))
    }

    fn binary(&mut self, op: BinOp, a: Ir, b: Ir, span: Span) -> Result<Ir, ExprError> {
        let (ta, tb) = (a.ty.strip_null().clone(), b.ty.strip_null().clone());
        let any = ta == Type::Any || tb == Type::Any;
        let mismatch = |this: &Self, help: Option<&str>| {
            Err(this.type_error(
                span,
                format!(
                    "`{}` cannot be applied to `{}` ({}) and `{}` ({})",
                    op.symbol(),
                    a.text,
                    this.type_name(&a.ty),
                    b.text,
                    this.type_name(&b.ty)
                ),
                help,
            ))
        };
        let ty = match op {
            BinOp::And | BinOp::Or => {
                self.expect_bool(&a, &format!("each side of `{}`", op.symbol()))
                    .and_then(|_| self.expect_bool(&b, &format!("each side of `{}`", op.symbol())))
                    .map_err(|e| e.at(span))?;
                Type::Bool
            }
            BinOp::Add if ta == Type::Str && tb == Type::Str => Type::Str,
            BinOp::Add | BinOp::Sub | BinOp::Mul => match (&ta, &tb) {
                (Type::Int, Type::Int) => Type::Int,
                (x, y) if x.is_numeric() && y.is_numeric() => Type::Float,
                _ if any && (ta.is_numeric() || tb.is_numeric() || ta == tb) => Type::Any,
                _ => return mismatch(self, None),
            },
            BinOp::Div => match (&ta, &tb) {
                (x, y)
                    if (x.is_numeric() || *x == Type::Any)
                        && (y.is_numeric() || *y == Type::Any) =>
                {
                    Type::Float
                }
                _ => return mismatch(self, None),
            },
            BinOp::Eq | BinOp::Ne => {
                let comparable = any
                    || ta == tb
                    || (ta.is_numeric() && tb.is_numeric())
                    || ta == Type::Null
                    || tb == Type::Null
                    || a.ty != ta
                    || b.ty != tb;
                if !comparable {
                    return mismatch(
                        self,
                        Some(
                            "values of different kinds are never equal; check the field you meant",
                        ),
                    );
                }
                Type::Bool
            }
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let ordered = |t: &Type| t.is_numeric() || matches!(t, Type::Str | Type::Any);
                let ok = ordered(&ta)
                    && ordered(&tb)
                    && (any || (ta.is_numeric() && tb.is_numeric()) || ta == tb);
                if !ok {
                    return mismatch(
                        self,
                        Some("only numbers with numbers, or strings with strings, can be ordered"),
                    );
                }
                Type::Bool
            }
            BinOp::In | BinOp::NotIn => {
                let ok = match &tb {
                    Type::Str => matches!(ta, Type::Str | Type::Any),
                    Type::Map(_) | Type::Record(_) => matches!(ta, Type::Str | Type::Any),
                    Type::List(_) | Type::Any => true,
                    _ => false,
                };
                if !ok {
                    return mismatch(
                        self,
                        Some(
                            "`x in y` needs a list, a map (keys) or a string (substring) on the right",
                        ),
                    );
                }
                Type::Bool
            }
        };
        Ok(self.ir(IrKind::Binary(op, Box::new(a), Box::new(b)), ty, span))
    }
}

fn article(word: &str) -> String {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        format!("an {word}")
    } else {
        format!("a {word}")
    }
}

fn numeric_or_any(t: &Type) -> Type {
    match t {
        Type::Int => Type::Int,
        Type::Float => Type::Float,
        _ => Type::Any,
    }
}

/// The common type of several values: the type if they agree, else Any.
fn unify<'t>(mut types: impl Iterator<Item = &'t Type>) -> Type {
    let Some(first) = types.next() else {
        return Type::Any;
    };
    let mut acc = first.clone();
    for t in types {
        acc = match (&acc, t) {
            (x, y) if x == y => acc,
            (x, y) if x.is_numeric() && y.is_numeric() => Type::Float,
            _ => return Type::Any,
        };
    }
    acc
}

pub(crate) fn bool_hint(t: &Type) -> Option<&'static str> {
    match t {
        Type::Int | Type::Float => Some("compare it: `x > 0`"),
        Type::Str => Some("compare it: `x == 'value'`"),
        Type::List(_) | Type::Map(_) => Some("test its size: `len(x) > 0`"),
        _ => None,
    }
}
