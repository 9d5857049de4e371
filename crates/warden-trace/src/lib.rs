//! Session traces: a session written as JSON Lines, one event per line (`{"hook": ...,
//! "turn": {...}, "tool": {...}, ...}`), and the replay output contract (`output.rs`): one line
//! per applied action and one per error, each naming the event (its 0-based line) it belongs
//! to. A line is read straight into its event when it is an ordinary one (`fast.rs`), and
//! checked field by field otherwise, so that a mistake is named by its field.

use std::io::{BufRead, Read};

use serde_json::{Map, Value};

use warden_context::event::Event;
use warden_load::Hook;

mod fast;
mod output;
mod unique;

use unique::Unique;

pub use output::{
    explain_lines, node_lines, outcome_lines, write_bad_line, write_explain_lines,
    write_node_lines, write_outcome_lines,
};

/// One event of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// The hook.
    pub hook: Hook,
    /// What the agent loop reported.
    pub event: Event,
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
pub fn parse_ordinary_line(line: &[u8]) -> Option<(Hook, Event)> {
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
    let event = Event::from_json(value).map_err(|e| err(e.message))?;
    Ok(TraceEvent { hook, event })
}

/// The longest trace line read, in bytes. A longer line is reported and skipped without being
/// kept in memory: no hook report is that large.
pub const MAX_TRACE_LINE_BYTES: usize = 1 << 20;

/// Reads a whole trace; blank lines and lines starting with `//` are skipped (they still count
/// for line numbers). Every bad line is returned, in order, next to the good events. The same
/// rules as [`read_trace`]: a leading byte order mark is ignored, and a line longer than
/// [`MAX_TRACE_LINE_BYTES`] is a bad line.
pub fn parse_trace(text: &str) -> Vec<(usize, Result<TraceEvent, TraceError>)> {
    read_trace(text.as_bytes()).collect()
}

/// Reads a trace from `reader` one line at a time, as it is replayed: only the line being read
/// is held in memory (at most [`MAX_TRACE_LINE_BYTES`] of it). Blank lines and lines starting
/// with `//` are skipped (they still count for line numbers); a UTF-8 byte order mark at the
/// start is ignored. A bad line (not UTF-8, too long, not a valid event) is returned as an
/// error naming its line, and reading goes on with the next. An error reading the input
/// itself is returned for the line it happened at, and ends the trace.
pub fn read_trace<R: BufRead>(reader: R) -> TraceLines<R> {
    TraceLines {
        reader,
        next: 0,
        buf: Vec::new(),
        ended: false,
    }
}

/// The events of a trace, read line by line: see [`read_trace`].
#[derive(Debug)]
pub struct TraceLines<R> {
    reader: R,
    /// The 0-based number of the next line.
    next: usize,
    buf: Vec<u8>,
    ended: bool,
}

impl<R: BufRead> Iterator for TraceLines<R> {
    type Item = (usize, Result<TraceEvent, TraceError>);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            let line_no = self.next;
            let err = |message: String| {
                Some((
                    line_no,
                    Err(TraceError {
                        line: line_no,
                        message,
                    }),
                ))
            };
            let cut = match read_line(&mut self.reader, &mut self.buf) {
                Ok(Some(cut)) => cut,
                Ok(None) => {
                    self.ended = true;
                    return None;
                }
                Err(e) => {
                    self.ended = true;
                    return err(format!("cannot read the trace: {e}"));
                }
            };
            self.next += 1;
            let mut line = self.buf.as_slice();
            if line_no == 0 {
                line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // What is kept of a line too long is enough to tell a comment.
            let comment = |l: &[u8]| l.trim_ascii_start().starts_with(b"//");
            if let Cut::Long { rest_blank } = cut {
                if comment(line) || (rest_blank && line.trim_ascii().is_empty()) {
                    continue;
                }
                return err(format!(
                    "longer than {} MiB; an event this large is not a hook report",
                    MAX_TRACE_LINE_BYTES >> 20
                ));
            }
            match std::str::from_utf8(line) {
                Ok(text) if text.trim().is_empty() || text.trim_start().starts_with("//") => {}
                Ok(text) => return Some((line_no, parse_line(line_no, text))),
                Err(_) if comment(line) => {}
                Err(e) => {
                    return err(format!(
                        "not UTF-8 text (byte {} of the line is not valid UTF-8)",
                        e.valid_up_to() + 1
                    ));
                }
            }
        }
        None
    }
}

/// How a line was read.
enum Cut {
    /// Whole.
    Whole,
    /// Longer than [`MAX_TRACE_LINE_BYTES`]: its start is kept, the rest was skipped (and was
    /// only whitespace, or not).
    Long { rest_blank: bool },
}

/// Reads one line into `buf` (without its `\n`), keeping at most [`MAX_TRACE_LINE_BYTES`] of
/// it; `None` at the end of the input.
fn read_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<Cut>> {
    buf.clear();
    // A line of the longest length, with its `\r` and its `\n`.
    let limit = MAX_TRACE_LINE_BYTES as u64 + 2;
    let n = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let ended = buf.last() == Some(&b'\n');
    if ended {
        buf.pop();
    }
    // The length is counted without a line break (`\n`, or `\r\n`, or a last `\r`).
    let content = buf.len() - usize::from(buf.last() == Some(&b'\r'));
    if content <= MAX_TRACE_LINE_BYTES {
        return Ok(Some(Cut::Whole));
    }
    // Too long: keep what is within the limit (enough to tell a comment), and skip to the end
    // of the line without keeping it.
    let mut rest_blank = buf[MAX_TRACE_LINE_BYTES..]
        .iter()
        .all(u8::is_ascii_whitespace);
    buf.truncate(MAX_TRACE_LINE_BYTES);
    if ended {
        return Ok(Some(Cut::Long { rest_blank }));
    }
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let (part, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        rest_blank &= part.iter().all(u8::is_ascii_whitespace);
        reader.consume(used);
        if done {
            break;
        }
    }
    Ok(Some(Cut::Long { rest_blank }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_their_hook() {
        let e = parse_line(0, r#"{"hook": "on_tool_complete", "tool": {"name": "vault_search"}, "result": {"count": 7}}"#).unwrap();
        assert_eq!(e.hook, Hook::OnToolComplete);
        assert_eq!(e.event.result.unwrap()["count"], 7);
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

    #[test]
    fn bad_lines_say_which_and_why() {
        let all = parse_trace(
            "{\"hook\": \"on_turn_start\"}\n\n{\"hook\": \"on_turn_strat\"}\n{\"turn\": 1}\nnot json\n{\"hook\": \"on_turn_end\", \"turn\": {\"tokens\": 3}}\n",
        );
        let errors: Vec<String> = all
            .iter()
            .filter_map(|(_, r)| r.as_ref().err())
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 4);
        assert!(
            errors[0].starts_with("line 3:") && errors[0].contains("did you mean `on_turn_start`"),
            "{}",
            errors[0]
        );
        assert!(errors[1].starts_with("line 4:") && errors[1].contains("no `hook`"));
        assert!(errors[2].starts_with("line 5:") && errors[2].contains("not valid JSON"));
        assert!(
            errors[3].starts_with("line 6:") && errors[3].contains("unknown field `tokens`"),
            "{}",
            errors[3]
        );
    }
}
