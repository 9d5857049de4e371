//! The check of an event's fields as JSON, one field at a time, before serde reads them: a
//! mistake is named by its dotted path with what was expected (`` `turn.number` must be a whole
//! number from 0 to 4294967295, not 4294967296 ``), not in serde's terms; an array where an
//! object is expected is refused (serde would read it by position); a misspelt field gets a
//! suggestion.

use serde_json::{Map, Value};

use warden_context::event::{
    EVENT_FIELDS, MAX_SHARE, MAX_TIME, TOOL_FIELDS, TURN_FIELDS, ToolField, TurnField,
};

/// A field of an event that is not what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EventError {
    /// The field's dotted path (`turn.number`, `tool.name`), or the unknown field's name.
    pub field: String,
    /// What is wrong and what it must be (it names the field too).
    pub message: String,
}

pub(super) fn bad(field: &str, message: String) -> EventError {
    EventError {
        field: field.to_string(),
        message,
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => "a long string".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn unknown(path: &str, key: &str, known: &[&str]) -> EventError {
    let hint = warden_input::closest(key, known.iter().copied())
        .map(|c| format!("did you mean `{c}`?"))
        .unwrap_or_else(|| format!("the fields are {}", known.join(", ")));
    if path.is_empty() {
        bad(key, format!("unknown field `{key}`; {hint}"))
    } else {
        bad(
            &format!("{path}.{key}"),
            format!("unknown field `{key}` in `{path}`; {hint}"),
        )
    }
}

fn object<'v>(
    path: &str,
    v: &'v Value,
    example: &str,
) -> Result<&'v Map<String, Value>, EventError> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(bad(
            path,
            format!(
                "`{path}` must be an object such as {example}, not {}",
                describe(other)
            ),
        )),
    }
}

fn string(path: &str, v: &Value) -> Result<(), EventError> {
    match v {
        Value::String(_) => Ok(()),
        other => Err(bad(
            path,
            format!("`{path}` must be a string, not {}", describe(other)),
        )),
    }
}

fn whole(path: &str, v: &Value, max: u64) -> Result<(), EventError> {
    match v.as_u64() {
        Some(n) if n <= max => Ok(()),
        _ => Err(bad(
            path,
            format!(
                "`{path}` must be a whole number from 0 to {max}, not {}",
                describe(v)
            ),
        )),
    }
}

fn boolean(path: &str, v: &Value) -> Result<(), EventError> {
    match v {
        Value::Bool(_) => Ok(()),
        other => Err(bad(
            path,
            format!("`{path}` must be true or false, not {}", describe(other)),
        )),
    }
}

fn number(path: &str, v: &Value) -> Result<(), EventError> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x.abs() <= MAX_TIME => Ok(()),
        _ => Err(bad(
            path,
            format!("`{path}` must be a number, not {}", describe(v)),
        )),
    }
}

/// A share, as the turn's usages are: a number from 0 (1.0 is all of the budget; above it,
/// over budget).
fn share(path: &str, v: &Value) -> Result<(), EventError> {
    match v.as_f64() {
        Some(x) if (0.0..=MAX_SHARE).contains(&x) => Ok(()),
        _ => Err(bad(
            path,
            format!(
                "`{path}` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not {}",
                describe(v)
            ),
        )),
    }
}

/// Checks one field of a reported event by its key: `Ok` when its value has the documented type.
pub fn check_field(key: &str, v: &Value) -> Result<(), EventError> {
    // `null` is an absent value, as serde reads it (an agent loop may write `None` so).
    if v.is_null() {
        return Ok(());
    }
    match key {
        "turn" => {
            for (k, x) in object("turn", v, r#"{"number": 3, "token_usage": 0.42}"#)? {
                let path = format!("turn.{k}");
                let Some(field) = TurnField::named(k) else {
                    return Err(unknown("turn", k, &TURN_FIELDS));
                };
                if x.is_null() {
                    continue;
                }
                match field {
                    TurnField::ContextWindow => whole(&path, x, u64::MAX)?,
                    f if f.is_whole() => whole(&path, x, u64::from(u32::MAX))?,
                    TurnField::TokenUsage | TurnField::ContextUsage => share(&path, x)?,
                    _ => boolean(&path, x)?,
                }
            }
            Ok(())
        }
        "query" => match v {
            Value::String(_) => Ok(()),
            Value::Object(m) => match m.get("text") {
                Some(t) => string("query.text", t),
                None => Err(bad(
                    "query.text",
                    "`query` as an object needs `text` (the question itself)".into(),
                )),
            },
            other => Err(bad(
                "query",
                format!(
                    "`query` must be a string, or an object with `text`, not {}",
                    describe(other)
                ),
            )),
        },
        "tool" => {
            let m = object("tool", v, r#"{"name": "vault_search"}"#)?;
            match m.get("name") {
                Some(Value::String(s)) if !s.is_empty() => {}
                Some(other) => {
                    return Err(bad(
                        "tool.name",
                        format!(
                            "`tool.name` must be the tool's name, not {}",
                            describe(other)
                        ),
                    ));
                }
                None => return Err(bad("tool.name", "`tool` has no `name`".into())),
            }
            match m.keys().find(|k| ToolField::named(k).is_none()) {
                Some(k) => Err(unknown("tool", k, &TOOL_FIELDS)),
                None => Ok(()),
            }
        }
        "message" => {
            let m = object("message", v, r#"{"role": "assistant", "content": "..."}"#)?;
            for k in ["role", "content"] {
                match m.get(k) {
                    Some(x) => string(&format!("message.{k}"), x)?,
                    None => {
                        return Err(bad(
                            &format!("message.{k}"),
                            format!("`message` has no `{k}`"),
                        ));
                    }
                }
            }
            match m.keys().find(|k| !matches!(k.as_str(), "role" | "content")) {
                Some(k) => Err(unknown("message", k, &["role", "content"])),
                None => Ok(()),
            }
        }
        "user" | "project" => {
            let fields: &[&str] = if key == "project" {
                &["id", "settings", "root"]
            } else {
                &["id", "settings"]
            };
            for (k, x) in object(key, v, r#"{"id": "ada"}"#)? {
                if x.is_null() && fields.contains(&k.as_str()) {
                    continue;
                }
                match k.as_str() {
                    "id" => string(&format!("{key}.id"), x)?,
                    "settings" => {
                        object(&format!("{key}.settings"), x, r#"{"language": "en"}"#)?;
                    }
                    "root" if key == "project" => string("project.root", x)?,
                    _ => return Err(unknown(key, k, fields)),
                }
            }
            Ok(())
        }
        "error" => string("error", v),
        "time" => number("time", v),
        "result" | "data" => Ok(()),
        _ => Err(unknown("", key, EVENT_FIELDS)),
    }
}
