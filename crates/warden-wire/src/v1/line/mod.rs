//! A session trace's line, and the body of a request that reports an event: a JSON object with
//! the event's fields (see [`super::event`]) and its `"hook"`. A line is read straight into its
//! event when it is an ordinary one (`fast.rs`), and checked field by field otherwise, so that
//! a mistake is named by its field. A key given twice in one object is refused (`unique.rs`).

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use warden_context::event::Event;
use warden_load::Hook;

mod fast;
mod unique;

use unique::Unique;

/// One event of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// The hook.
    pub hook: Hook,
    /// What the agent loop reported; shared as soon as it is read (a session ticks it with
    /// `Session::tick_shared`, and it is not copied again).
    pub event: Arc<Event>,
}

/// A trace line that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {}: {message}", .line + 1)]
pub struct TraceError {
    /// 0-based line number (the event index).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Reads an ordinary trace line straight into its hook and event, without a JSON value of the
/// whole line: `None` for anything else (a mistake, a `null`, a key given twice, text that is not
/// UTF-8), which the caller then reads its checked way to name what is wrong. What it reads, it
/// reads as [`parse_line`] does. For a host that has events as JSON text (the Python package's
/// `tick_json`).
pub fn parse_ordinary_line(line: &[u8]) -> Option<(Hook, Arc<Event>)> {
    fast::parse(std::str::from_utf8(line).ok()?)
}

/// [`read_json_value`], with serde_json's error (its line and column) for a host that reports
/// them (the service's request bodies).
pub fn read_json_unique(text: &[u8]) -> serde_json::Result<Value> {
    serde_json::from_slice::<Unique>(text).map(|u| u.0)
}

/// Reads JSON text as a value, refusing a key given twice in one object as a trace line's reader
/// does (JSON readers disagree on which one counts); the error says which, as a phrase for the
/// author.
pub fn read_json_value(text: &[u8]) -> Result<Value, JsonTextError> {
    read_json_unique(text).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => JsonTextError::KeyTwice(e.to_string()),
        _ => JsonTextError::NotJson(e.to_string()),
    })
}

/// Why JSON text was refused by [`read_json_value`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonTextError {
    /// Not JSON at all (with the parser's message, line and column).
    #[error("not valid JSON: {0}")]
    NotJson(String),
    /// An object names a key twice.
    #[error("{0}; give each field once")]
    KeyTwice(String),
}

/// Reads one trace line (not blank). A key given twice in one object is refused (JSON readers
/// disagree on which one counts; serde_json would silently keep the last).
pub fn parse_line(line_no: usize, line: &str) -> Result<TraceEvent, TraceError> {
    match fast::parse(line) {
        Some((hook, event)) => Ok(TraceEvent { hook, event }),
        None => parse_line_checked(line_no, line),
    }
}

/// Reads one trace line the checked way: as a JSON value, then field by field, so that a
/// mistake is named by its field.
fn parse_line_checked(line_no: usize, line: &str) -> Result<TraceEvent, TraceError> {
    let value = read_json_value(line.as_bytes()).map_err(|e| TraceError {
        line: line_no,
        message: e.to_string(),
    })?;
    parse_value(line_no, value)
}

/// Reads one event given as a JSON value (`{"hook": "on_turn_start", "turn": {...}}`).
pub fn parse_value(line_no: usize, value: Value) -> Result<TraceEvent, TraceError> {
    let err = |message: String| TraceError {
        line: line_no,
        message,
    };
    let mut value: Map<String, Value> = match value {
        Value::Object(m) => m,
        _ => return Err(err("each event must be a JSON object".into())),
    };
    let hook = match value.remove("hook") {
        Some(Value::String(h)) => h.parse::<Hook>().map_err(|e| err(e.to_string()))?,
        Some(_) => {
            return Err(err(
                "`hook` must be a string such as \"on_turn_start\"".into()
            ));
        }
        None => return Err(err("the line has no `hook`".into())),
    };
    let event = super::event::read_event(value).map_err(|e| err(e.message))?;
    Ok(TraceEvent {
        hook,
        event: Arc::new(event),
    })
}

/// A trace line as written: the hook, then the event's fields (what [`parse_line`] reads).
#[derive(Serialize)]
struct Written<'a> {
    hook: &'a str,
    #[serde(flatten)]
    event: super::event::Event,
}

/// `event` written as a trace line of `hook`, without its line break: `{"hook": ..., ...}`.
pub fn trace_line(hook: Hook, event: &Event) -> String {
    let line = Written {
        hook: hook.name(),
        event: super::event::Event::of(event),
    };
    // A line of strings, numbers and JSON values always serializes.
    serde_json::to_string(&line).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_written_reads_back_the_same() {
        let line = r#"{"hook":"on_query_start","turn":{"number":2,"final":true},"query":{"text":"hi","lang":"en"},"tool":{"name":"web","arguments":{"q":1}},"user":{"id":"ada"},"time":1.5}"#;
        let read = parse_line(0, line).unwrap();
        assert_eq!(trace_line(read.hook, &read.event), line);
        let plain = r#"{"hook":"on_query_start","query":"hi"}"#;
        let read = parse_line(0, plain).unwrap();
        assert_eq!(
            trace_line(read.hook, &read.event),
            r#"{"hook":"on_query_start","query":{"text":"hi"}}"#
        );
    }

    #[test]
    fn lines_parse_with_their_hook() {
        let e = parse_line(0, r#"{"hook": "on_tool_complete", "tool": {"name": "vault_search"}, "result": {"count": 7}}"#).unwrap();
        assert_eq!(e.hook, Hook::OnToolComplete);
        assert_eq!(e.event.result.as_ref().unwrap()["count"], 7);
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        for (line, key) in [
            (
                r#"{"hook": "on_turn_start", "turn": {}, "hook": "on_session_end"}"#,
                "hook",
            ),
            (
                r#"{"hook": "on_turn_start", "turn": {"number": 1, "number": 2}}"#,
                "number",
            ),
            (
                r#"{"hook": "on_tool_complete", "tool": {"name": "t"}, "result": [{"a": 1, "a": 1}]}"#,
                "a",
            ),
        ] {
            let e = parse_line(6, line).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("line 7: `{key}` is given twice at line 1 column"))
                    && e.ends_with("; give each field once"),
                "{e}"
            );
        }
        let same = r#"{"hook": "on_turn_start", "turn": {"number": 2, "token_usage": 0.5}, "data": {"a": [1, {"b": null}], "c": -1.5e3, "d": 18446744073709551615}}"#;
        assert_eq!(
            parse_line(0, same).unwrap(),
            parse_value(0, serde_json::from_str(same).unwrap()).unwrap()
        );
    }
}
