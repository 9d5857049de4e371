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

/// Where a value is, written out only when something is wrong with it: building the dotted
/// path of every value read would cost an allocation per key.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    /// The value itself (the event, for a tick).
    Root,
    /// A field of an object.
    Key(&'a At<'a>, &'a str),
    /// An item of a list.
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    /// The dotted path: `tool.arguments.ids[1]`, or `""` for the root.
    pub(crate) fn path(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Key(parent, key) => match parent.path() {
                p if p.is_empty() => (*key).to_string(),
                p => format!("{p}.{key}"),
            },
            At::Index(parent, i) => format!("{}[{i}]", parent.path()),
        }
    }
}

/// Reads a Python value as JSON: `None`, `bool`, `int`, `float`, `str`, and dicts (string keys)
/// and lists or tuples of those. `at` names the value in errors.
pub(crate) fn to_json(v: &Bound<'_, PyAny>, at: &At<'_>, depth: usize) -> Result<Value, NotJson> {
    let fail = |message: &dyn Fn(&str) -> String| {
        let field = at.path();
        NotJson {
            message: message(&field),
            field,
        }
    };
    if depth > MAX_DEPTH {
        return Err(fail(&|p| {
            format!("`{p}` nests more than {MAX_DEPTH} levels deep (does it contain itself?)")
        }));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_string()))
            .map_err(|_| fail(&|p| format!("`{p}` is not valid Unicode text")));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return dict_to_map(d, at, depth).map(Value::Object);
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
        return Err(fail(&|p| {
            format!("`{p}` is an integer too large for JSON (at most 64 bits)")
        }));
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| fail(&|p| format!("`{p}` must be a finite number, not {x}")));
    }
    if let Ok(l) = v.cast::<PyList>() {
        return l
            .iter()
            .enumerate()
            .map(|(i, item)| to_json(&item, &At::Index(at, i), depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return t
            .iter()
            .enumerate()
            .map(|(i, item)| to_json(&item, &At::Index(at, i), depth + 1))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Ok(m) = v.cast::<PyMapping>() {
        let unreadable = |e: PyErr| fail(&|p| format!("`{p}` could not be read: {e}"));
        let d = PyDict::new(v.py());
        for item in m.items().map_err(unreadable)?.iter() {
            let (k, x): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                item.extract().map_err(unreadable)?;
            d.set_item(k, x).map_err(unreadable)?;
        }
        return dict_to_map(&d, at, depth).map(Value::Object);
    }
    let kind = describe(v);
    Err(fail(&|p| {
        format!("`{p}` must be JSON-like (a dict, list, str, int, float, bool or None), not {kind}")
    }))
}

/// Reads a dict as a JSON object's fields; every key must be a string.
pub(crate) fn dict_to_map(
    d: &Bound<'_, PyDict>,
    at: &At<'_>,
    depth: usize,
) -> Result<Map<String, Value>, NotJson> {
    let mut map = Map::with_capacity(d.len());
    for (k, x) in d.iter() {
        let key = k.cast::<PyString>().ok().and_then(|k| k.to_str().ok());
        let Some(key) = key else {
            let path = at.path();
            let shown = k.repr().map_or_else(|_| "?".to_string(), |r| r.to_string());
            let of = if path.is_empty() { "the event" } else { &path };
            return Err(NotJson {
                message: format!("the keys of `{of}` must be strings (valid Unicode), not {shown}"),
                field: path,
            });
        };
        let value = to_json(&x, &At::Key(at, key), depth + 1)?;
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
