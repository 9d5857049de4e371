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
use crate::{Facts, Scalar};

#[derive(Debug, Clone)]
pub(crate) enum Native {
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
}

/// Compiles `ir` to the fast path, or `None` if any part of it needs the script engine.
pub(crate) fn compile(ir: &Ir) -> Option<Native> {
    let scalar_type = |t: &Type| matches!(t, Type::Bool | Type::Int | Type::Float | Type::Str);
    if !scalar_type(&ir.ty) {
        return None;
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
                    Native::Cmp(*op, na, nb)
                }
                _ => return None,
            }
        }
        _ => return None,
    })
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
    pub(crate) fn eval<'a>(&'a self, facts: &'a dyn Facts) -> Result<Scalar<'a>, String> {
        Ok(match self {
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
                other => return Err(format!("cannot negate {other:?}")),
            },
            Native::Not(inner) => Scalar::Bool(!truth(inner.eval(facts)?)?),
            Native::And(a, b) => Scalar::Bool(truth(a.eval(facts)?)? && truth(b.eval(facts)?)?),
            Native::Or(a, b) => Scalar::Bool(truth(a.eval(facts)?)? || truth(b.eval(facts)?)?),
            Native::Arith(op, a, b, text) => arith(*op, a.eval(facts)?, b.eval(facts)?, text)?,
            Native::Div(a, b, text) => {
                let (x, y) = (float(a.eval(facts)?)?, float(b.eval(facts)?)?);
                Scalar::Float(divide(x, y, text)?)
            }
            Native::Cmp(op, a, b) => Scalar::Bool(compare(*op, &a.eval(facts)?, &b.eval(facts)?)),
        })
    }
}

fn truth(s: Scalar<'_>) -> Result<bool, String> {
    match s {
        Scalar::Bool(b) => Ok(b),
        other => Err(format!("expected true or false, got {other:?}")),
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
fn compare(op: BinOp, a: &Scalar<'_>, b: &Scalar<'_>) -> bool {
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
