//! Python values to JSON and back: what an agent loop reports becomes the JSON an [`Event`] is
//! read from, and the JSON of an outcome (rewritten arguments, state values, payloads) becomes
//! plain Python values.
//!
//! [`Event`]: warden_core::Event

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyMapping, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// How deep a value may nest. Events nest a few levels; a structure that contains itself stops
/// here instead of recursing until the stack runs out.
pub(crate) const MAX_DEPTH: usize = 64;

/// A value that is not JSON: where it is (`tool.arguments.when`) and what is wrong with it.
#[derive(Debug)]
pub(crate) struct NotJson {
    /// The dotted path of the value, `[i]` for a list item.
    pub field: String,
    /// What is wrong, naming the field.
    pub message: String,
}

/// The type of `v`, with its article: `a datetime`, `an object`.
pub(crate) fn describe(v: &Bound<'_, PyAny>) -> String {
    let name = v
        .get_type()
        .name()
        .map_or_else(|_| "object".to_string(), |n| n.to_string());
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Reads a Python value as JSON: `None`, `bool`, `int`, `float`, `str`, and dicts (string keys)
/// and lists or tuples of those. `path` names the value in errors.
pub(crate) fn to_json(v: &Bound<'_, PyAny>, path: &str, depth: usize) -> Result<Value, NotJson> {
    let fail = |message: String| NotJson {
        field: path.to_string(),
        message,
    };
    if depth > MAX_DEPTH {
        return Err(fail(format!(
            "`{path}` nests more than {MAX_DEPTH} levels deep (does it contain itself?)"
        )));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| fail(format!("`{path}` is not valid Unicode text")));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return dict_to_json(d, path, depth);
    }
    if v.is_none() {
        return Ok(Value::Null);
    }
    // `bool` is a subclass of `int`: ask first.
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.cast::<PyInt>().is_ok() {
        if let Ok(i) = v.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = v.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        return Err(fail(format!(
            "`{path}` is an integer too large for JSON (at most 64 bits)"
        )));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| fail(format!("`{path}` must be a finite number, not {x}")));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return l
            .iter()
            .enumerate()
            .map(|(i, item)| to_json(&item, &format!("{path}[{i}]"), depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t
            .iter()
            .enumerate()
            .map(|(i, item)| to_json(&item, &format!("{path}[{i}]"), depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Ok(m) = v.cast::<PyMapping>() {
        let d = PyDict::new(v.py());
        let items = m
            .items()
            .map_err(|e| fail(format!("`{path}` could not be read: {e}")))?;
        for item in items.iter() {
            let (k, x): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item
                .extract()
                .map_err(|e| fail(format!("`{path}` could not be read: {e}")))?;
            d.set_item(k, x)
                .map_err(|e| fail(format!("`{path}` could not be read: {e}")))?;
        }
        return dict_to_json(&d, path, depth);
    }
    Err(fail(format!(
        "`{path}` must be JSON-like (a dict, list, str, int, float, bool or None), not {}",
        describe(v)
    )))
}

/// Reads a dict as a JSON object; every key must be a string.
pub(crate) fn dict_to_json(
    d: &Bound<'_, PyDict>,
    path: &str,
    depth: usize,
) -> Result<Value, NotJson> {
    dict_to_map(d, path, depth).map(Value::Object)
}

/// Reads a dict as a JSON object's fields.
pub(crate) fn dict_to_map(
    d: &Bound<'_, PyDict>,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, NotJson> {
    let mut map = Map::with_capacity(d.len());
    for (k, x) in d.iter() {
        let Ok(key) = k.cast::<PyString>() else {
            let shown = k.repr().map_or_else(|_| "?".to_string(), |r| r.to_string());
            let at = if path.is_empty() { "the event" } else { path };
            return Err(NotJson {
                field: path.to_string(),
                message: format!("the keys of `{at}` must be strings, not {shown}"),
            });
        };
        let key = key.to_str().map_err(|_| NotJson {
            field: path.to_string(),
            message: format!("a key of `{path}` is not valid Unicode text"),
        })?;
        let value = to_json(&x, &child(path, key), depth + 1)?;
        map.insert(key.to_string(), value);
    }
    Ok(map)
}

/// A JSON value as a plain Python value (`dict`, `list`, `str`, `int`, `float`, `bool`,
/// `None`).
pub(crate) fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let d = PyDict::new(py);
            for (k, x) in map {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}
