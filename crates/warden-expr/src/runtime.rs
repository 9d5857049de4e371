//! The rhai engine conditions run in: limits, the `w_*` functions the emitter calls, and the
//! mapping of rhai errors to verdicts.
//!
//! Two kinds of failure are kept apart. *Undetermined*: the data a condition reads is missing
//! or of the wrong kind (`result.count` when the tool returned no count); the condition cannot
//! say true or false, and the rule does not fire. *Error*: the condition itself is broken or
//! ran away (division by zero, overflow, the operation limit).

use rhai::{Array, Dynamic, Engine, EvalAltResult, FLOAT, INT, ImmutableString, Map, Position};

use crate::Verdict;

/// Most rhai operations one evaluation may take before it is stopped.
pub const MAX_OPERATIONS: u64 = 100_000;

const UNDETERMINED: &str = "\u{1}undetermined\u{1}";

type Res<T> = Result<T, Box<EvalAltResult>>;

fn undetermined<T>(msg: String) -> Res<T> {
    Err(EvalAltResult::ErrorRuntime(format!("{UNDETERMINED}{msg}").into(), Position::NONE).into())
}

fn error<T>(msg: String) -> Res<T> {
    Err(EvalAltResult::ErrorRuntime(msg.into(), Position::NONE).into())
}

/// A short description of a value's kind, for messages.
pub(crate) fn kind_of(v: &Dynamic) -> &'static str {
    if v.is_unit() {
        "null"
    } else if v.is_bool() {
        "a boolean"
    } else if v.is_int() {
        "an integer"
    } else if v.is_float() {
        "a number"
    } else if v.is_string() {
        "a string"
    } else if v.is_array() {
        "a list"
    } else if v.is_map() {
        "a map"
    } else {
        "a value"
    }
}

enum Num {
    I(INT),
    F(FLOAT),
}

fn num(v: &Dynamic) -> Option<Num> {
    if let Ok(i) = v.as_int() {
        Some(Num::I(i))
    } else {
        v.as_float().ok().map(Num::F)
    }
}

fn as_f64(n: &Num) -> f64 {
    match n {
        Num::I(i) => *i as f64,
        Num::F(f) => *f,
    }
}

/// Equality as rhai's `==` has it: numbers by value across int and float, other kinds only
/// with their own kind.
pub(crate) fn dyn_eq(a: &Dynamic, b: &Dynamic) -> bool {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return match (x, y) {
            (Num::I(x), Num::I(y)) => x == y,
            (x, y) => as_f64(&x) == as_f64(&y),
        };
    }
    if a.is_unit() || b.is_unit() {
        return a.is_unit() && b.is_unit();
    }
    if let (Ok(x), Ok(y)) = (a.as_bool(), b.as_bool()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (
        a.read_lock::<ImmutableString>(),
        b.read_lock::<ImmutableString>(),
    ) {
        return *x == *y;
    }
    if let (Some(x), Some(y)) = (a.read_lock::<Array>(), b.read_lock::<Array>()) {
        return x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| dyn_eq(p, q));
    }
    if let (Some(x), Some(y)) = (a.read_lock::<Map>(), b.read_lock::<Map>()) {
        return x.len() == y.len()
            && x.iter()
                .all(|(k, v)| y.get(k).is_some_and(|w| dyn_eq(v, w)));
    }
    false
}

/// The order of two numbers or two strings; `None` when a float is NaN (IEEE: unordered, so
/// every ordering comparison is false). Other kinds cannot be ordered: undetermined.
fn order(a: &Dynamic, b: &Dynamic, text: &str) -> Res<Option<std::cmp::Ordering>> {
    if let (Some(x), Some(y)) = (num(a), num(b)) {
        return Ok(match (x, y) {
            (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
            (x, y) => as_f64(&x).partial_cmp(&as_f64(&y)),
        });
    }
    if let (Some(x), Some(y)) = (
        a.read_lock::<ImmutableString>(),
        b.read_lock::<ImmutableString>(),
    ) {
        return Ok(Some(x.as_str().cmp(y.as_str())));
    }
    undetermined(format!(
        "`{text}` cannot compare {} with {}",
        kind_of(a),
        kind_of(b)
    ))
}

fn arith(a: &Dynamic, b: &Dynamic, op: char, text: &str) -> Res<Dynamic> {
    match (num(a), num(b)) {
        (Some(Num::I(x)), Some(Num::I(y))) => {
            let r = match op {
                '+' => x.checked_add(y),
                '-' => x.checked_sub(y),
                _ => x.checked_mul(y),
            };
            match r {
                Some(r) => Ok(r.into()),
                None => error(format!("`{text}` overflows a 64-bit integer")),
            }
        }
        (Some(x), Some(y)) => {
            let (x, y) = (as_f64(&x), as_f64(&y));
            Ok(match op {
                '+' => x + y,
                '-' => x - y,
                _ => x * y,
            }
            .into())
        }
        _ => {
            if op == '+'
                && let (Some(x), Some(y)) = (
                    a.read_lock::<ImmutableString>(),
                    b.read_lock::<ImmutableString>(),
                )
            {
                return Ok(format!("{}{}", x.as_str(), y.as_str()).into());
            }
            undetermined(format!(
                "`{text}` cannot apply `{op}` to {} and {}",
                kind_of(a),
                kind_of(b)
            ))
        }
    }
}

/// Float division, the same on both evaluation paths.
pub(crate) fn divide(x: f64, y: f64, text: &str) -> Result<f64, String> {
    if y == 0.0 {
        Err(format!("`{text}` divides by zero"))
    } else {
        Ok(x / y)
    }
}

fn key(base: Dynamic, key: Dynamic, text: &str) -> Res<Dynamic> {
    if let Some(map) = base.read_lock::<Map>() {
        let Some(k) = key.read_lock::<ImmutableString>() else {
            return undetermined(format!(
                "`{text}`: a map key must be a string, not {}",
                kind_of(&key)
            ));
        };
        return match map.get(k.as_str()) {
            Some(v) => Ok(v.clone()),
            None => undetermined(format!("`{text}` is missing")),
        };
    }
    if let Some(list) = base.read_lock::<Array>() {
        let Ok(i) = key.as_int() else {
            return undetermined(format!(
                "`{text}`: a list index must be an integer, not {}",
                kind_of(&key)
            ));
        };
        let idx = if i < 0 { list.len() as i64 + i } else { i };
        return match usize::try_from(idx).ok().and_then(|i| list.get(i)) {
            Some(v) => Ok(v.clone()),
            None => undetermined(format!(
                "`{text}` is missing (the list has {} items)",
                list.len()
            )),
        };
    }
    undetermined(format!(
        "`{text}` is missing (its parent is {})",
        kind_of(&base)
    ))
}

fn get(base: Dynamic, k: Dynamic, default: Dynamic, text: &str) -> Res<Dynamic> {
    if base.is_unit() {
        return Ok(default);
    }
    if let Some(map) = base.read_lock::<Map>() {
        let Some(k) = k.read_lock::<ImmutableString>() else {
            return undetermined(format!(
                "`{text}`: a map key must be a string, not {}",
                kind_of(&k)
            ));
        };
        return Ok(map.get(k.as_str()).cloned().unwrap_or(default));
    }
    undetermined(format!("`{text}` reads a map, but got {}", kind_of(&base)))
}

fn contains(hay: Dynamic, needle: Dynamic, text: &str) -> Res<bool> {
    if let Some(s) = hay.read_lock::<ImmutableString>() {
        return match needle.read_lock::<ImmutableString>() {
            Some(n) => Ok(s.contains(n.as_str())),
            None => undetermined(format!(
                "`{text}`: a string can only contain a string, not {}",
                kind_of(&needle)
            )),
        };
    }
    if let Some(list) = hay.read_lock::<Array>() {
        return Ok(list.iter().any(|item| dyn_eq(item, &needle)));
    }
    if let Some(map) = hay.read_lock::<Map>() {
        return Ok(needle
            .read_lock::<ImmutableString>()
            .is_some_and(|k| map.contains_key(k.as_str())));
    }
    undetermined(format!("`{text}`: cannot look inside {}", kind_of(&hay)))
}

fn string_arg(v: &Dynamic, text: &str) -> Res<ImmutableString> {
    match v.read_lock::<ImmutableString>() {
        Some(s) => Ok(s.clone()),
        None => undetermined(format!("`{text}` needs a string, got {}", kind_of(v))),
    }
}

fn extreme(list: Array, want: std::cmp::Ordering, text: &str) -> Res<Dynamic> {
    let mut best: Option<Dynamic> = None;
    for item in list {
        if item.is_unit() {
            continue;
        }
        best = Some(match best {
            None => item,
            Some(b) => {
                if order(&item, &b, text)? == Some(want) {
                    item
                } else {
                    b
                }
            }
        });
    }
    Ok(best.unwrap_or(Dynamic::UNIT))
}

fn bools(list: &Array, text: &str) -> Res<Vec<bool>> {
    list.iter()
        .map(|v| match v.as_bool() {
            Ok(b) => Ok(b),
            Err(_) => undetermined(format!(
                "`{text}` needs true/false items, found {}",
                kind_of(v)
            )),
        })
        .collect()
}

/// Builds the engine every condition of a program shares.
pub(crate) fn engine() -> Engine {
    let mut e = Engine::new();
    e.set_max_operations(MAX_OPERATIONS)
        .set_max_expr_depths(1024, 256)
        .set_max_call_levels(16)
        .set_max_string_size(1 << 20)
        .set_max_array_size(1 << 16)
        .set_max_map_size(1 << 16)
        .set_fail_on_invalid_map_property(true)
        .set_strict_variables(false);
    // Conditions are emitted by Warden, never raw author text; still, print goes nowhere.
    e.on_print(|_| {}).on_debug(|_, _, _| {});

    e.register_fn("w_key", |b: Dynamic, k: Dynamic, t: &str| key(b, k, t));
    e.register_fn("w_get", |b: Dynamic, k: Dynamic, d: Dynamic, t: &str| {
        get(b, k, d, t)
    });
    e.register_fn("w_iter", |v: Dynamic, t: &str| -> Res<Array> {
        match v.into_array() {
            Ok(a) => Ok(a),
            Err(kind) => undetermined(format!("`{t}` is {}, not a list", describe_type(kind))),
        }
    });
    e.register_fn("w_bool", |v: Dynamic, t: &str| -> Res<bool> {
        match v.as_bool() {
            Ok(b) => Ok(b),
            Err(_) => undetermined(format!("`{t}` is {}, not true or false", kind_of(&v))),
        }
    });
    e.register_fn("w_div", |a: Dynamic, b: Dynamic, t: &str| -> Res<FLOAT> {
        match (num(&a), num(&b)) {
            (Some(x), Some(y)) => divide(as_f64(&x), as_f64(&y), t).or_else(error),
            _ => undetermined(format!(
                "`{t}` cannot divide {} by {}",
                kind_of(&a),
                kind_of(&b)
            )),
        }
    });
    e.register_fn("w_add", |a: Dynamic, b: Dynamic, t: &str| {
        arith(&a, &b, '+', t)
    });
    e.register_fn("w_sub", |a: Dynamic, b: Dynamic, t: &str| {
        arith(&a, &b, '-', t)
    });
    e.register_fn("w_mul", |a: Dynamic, b: Dynamic, t: &str| {
        arith(&a, &b, '*', t)
    });
    e.register_fn("w_lt", |a: Dynamic, b: Dynamic, t: &str| {
        order(&a, &b, t).map(|o| o.is_some_and(|o| o.is_lt()))
    });
    e.register_fn("w_le", |a: Dynamic, b: Dynamic, t: &str| {
        order(&a, &b, t).map(|o| o.is_some_and(|o| o.is_le()))
    });
    e.register_fn("w_gt", |a: Dynamic, b: Dynamic, t: &str| {
        order(&a, &b, t).map(|o| o.is_some_and(|o| o.is_gt()))
    });
    e.register_fn("w_ge", |a: Dynamic, b: Dynamic, t: &str| {
        order(&a, &b, t).map(|o| o.is_some_and(|o| o.is_ge()))
    });
    e.register_fn("w_eq", |a: Dynamic, b: Dynamic, _t: &str| dyn_eq(&a, &b));
    e.register_fn("w_ne", |a: Dynamic, b: Dynamic, _t: &str| !dyn_eq(&a, &b));
    e.register_fn("w_contains", |h: Dynamic, n: Dynamic, t: &str| {
        contains(h, n, t)
    });
    e.register_fn("w_len", |v: Dynamic, t: &str| -> Res<INT> {
        if let Some(s) = v.read_lock::<ImmutableString>() {
            return Ok(s.chars().count() as INT);
        }
        if let Some(a) = v.read_lock::<Array>() {
            return Ok(a.len() as INT);
        }
        if let Some(m) = v.read_lock::<Map>() {
            return Ok(m.len() as INT);
        }
        undetermined(format!("`{t}`: {} has no length", kind_of(&v)))
    });
    e.register_fn("w_lower", |v: Dynamic, t: &str| -> Res<ImmutableString> {
        Ok(string_arg(&v, t)?.to_lowercase().into())
    });
    e.register_fn("w_upper", |v: Dynamic, t: &str| -> Res<ImmutableString> {
        Ok(string_arg(&v, t)?.to_uppercase().into())
    });
    e.register_fn(
        "w_starts_with",
        |a: Dynamic, b: Dynamic, t: &str| -> Res<bool> {
            Ok(string_arg(&a, t)?.starts_with(string_arg(&b, t)?.as_str()))
        },
    );
    e.register_fn(
        "w_ends_with",
        |a: Dynamic, b: Dynamic, t: &str| -> Res<bool> {
            Ok(string_arg(&a, t)?.ends_with(string_arg(&b, t)?.as_str()))
        },
    );
    e.register_fn(
        "w_matches",
        |a: Dynamic, p: Dynamic, t: &str| -> Res<bool> {
            let pattern = string_arg(&p, t)?;
            let re =
                crate::regex::compile(&pattern).or_else(|e| undetermined(format!("`{t}`: {e}")))?;
            Ok(re.is_match(&string_arg(&a, t)?))
        },
    );
    e.register_fn("w_abs", |v: Dynamic, t: &str| -> Res<Dynamic> {
        match num(&v) {
            Some(Num::I(i)) => match i.checked_abs() {
                Some(a) => Ok(a.into()),
                None => error(format!("`{t}` overflows a 64-bit integer")),
            },
            Some(Num::F(f)) => Ok(f.abs().into()),
            None => undetermined(format!("`{t}` needs a number, got {}", kind_of(&v))),
        }
    });
    e.register_fn("w_int", |v: Dynamic, t: &str| -> Res<INT> {
        if let Ok(i) = v.as_int() {
            return Ok(i);
        }
        if let Ok(b) = v.as_bool() {
            return Ok(b as INT);
        }
        if let Ok(f) = v.as_float() {
            if f.is_finite() && f.trunc() >= i64::MIN as f64 && f.trunc() < i64::MAX as f64 {
                return Ok(f.trunc() as INT);
            }
            return undetermined(format!("`{t}`: {f} does not fit in an integer"));
        }
        if let Some(s) = v.read_lock::<ImmutableString>() {
            return match s.trim().parse::<INT>() {
                Ok(i) => Ok(i),
                Err(_) => undetermined(format!("`{t}`: '{}' is not an integer", s.as_str())),
            };
        }
        undetermined(format!("`{t}`: {} is not a number", kind_of(&v)))
    });
    e.register_fn("w_float", |v: Dynamic, t: &str| -> Res<FLOAT> {
        if let Some(n) = num(&v) {
            return Ok(as_f64(&n));
        }
        if let Some(s) = v.read_lock::<ImmutableString>() {
            return match s.trim().parse::<FLOAT>() {
                Ok(f) if f.is_finite() => Ok(f),
                _ => undetermined(format!("`{t}`: '{}' is not a number", s.as_str())),
            };
        }
        undetermined(format!("`{t}`: {} is not a number", kind_of(&v)))
    });
    e.register_fn("w_str", |v: Dynamic, _t: &str| -> ImmutableString {
        if v.is_unit() {
            "null".into()
        } else if let Some(s) = v.read_lock::<ImmutableString>() {
            s.clone()
        } else {
            v.to_string().into()
        }
    });
    e.register_fn("w_has", |m: Dynamic, k: Dynamic, t: &str| -> Res<bool> {
        if m.is_unit() {
            return Ok(false);
        }
        match (m.read_lock::<Map>(), k.read_lock::<ImmutableString>()) {
            (Some(map), Some(k)) => Ok(map.contains_key(k.as_str())),
            _ => undetermined(format!("`{t}` needs a map and a string key")),
        }
    });
    e.register_fn("w_any", |l: Dynamic, t: &str| -> Res<bool> {
        Ok(bools(&list(l, t)?, t)?.into_iter().any(|b| b))
    });
    e.register_fn("w_all", |l: Dynamic, t: &str| -> Res<bool> {
        Ok(bools(&list(l, t)?, t)?.into_iter().all(|b| b))
    });
    e.register_fn("w_sum", |l: Dynamic, t: &str| -> Res<Dynamic> {
        let mut acc = Dynamic::from(0 as INT);
        for item in &list(l, t)? {
            acc = arith(&acc, item, '+', t)?;
        }
        Ok(acc)
    });
    e.register_fn("w_min_of", |l: Dynamic, t: &str| -> Res<Dynamic> {
        extreme(list(l, t)?, std::cmp::Ordering::Less, t)
    });
    e.register_fn("w_max_of", |l: Dynamic, t: &str| -> Res<Dynamic> {
        extreme(list(l, t)?, std::cmp::Ordering::Greater, t)
    });
    e
}

/// `l` as a list, or undetermined.
fn list(l: Dynamic, t: &str) -> Res<Array> {
    l.into_array()
        .or_else(|k| undetermined(format!("`{t}` needs a list, got {}", describe_type(k))))
}

fn describe_type(rhai_type: &str) -> &'static str {
    match rhai_type {
        "()" => "null",
        "bool" => "a boolean",
        "i64" => "an integer",
        "f64" => "a number",
        "string" | "ImmutableString" => "a string",
        "map" | "Map" => "a map",
        _ => "a value",
    }
}

/// What an evaluation error means for the rule.
pub(crate) fn classify(err: &EvalAltResult) -> Verdict {
    match err {
        EvalAltResult::ErrorInFunctionCall(_, _, inner, _) => classify(inner),
        EvalAltResult::ErrorRuntime(v, _) => {
            let msg = v.to_string();
            match msg.strip_prefix(UNDETERMINED) {
                Some(rest) => Verdict::Undetermined(rest.to_string()),
                None => Verdict::Error(msg),
            }
        }
        EvalAltResult::ErrorArithmetic(msg, _) => Verdict::Error(msg.clone()),
        EvalAltResult::ErrorTooManyOperations(_) => Verdict::Error(format!(
            "stopped after {MAX_OPERATIONS} operations; simplify the condition or move it to a script"
        )),
        EvalAltResult::ErrorDataTooLarge(what, _) => {
            Verdict::Error(format!("stopped: {what} grew past its limit"))
        }
        EvalAltResult::ErrorStackOverflow(_) => Verdict::Error("stopped: nested too deeply".into()),
        other => Verdict::Error(other.to_string()),
    }
}
