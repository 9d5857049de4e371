//! Session traces: a session written as JSON Lines, one event per line (`{"hook": ...,
//! "turn": {...}, "tool": {...}, ...}`), and the replay output contract: one line per applied
//! action and one per error, each naming the event (its 0-based line) it belongs to.

use std::io::{BufRead, Read};

use serde_json::{Map, Value, json};

use crate::event::Event;
use crate::outcome::{Effect, Evaluation, Outcome};
use warden_load::Hook;

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

/// Reads one trace line (not blank). A key given twice in one object is refused (JSON readers
/// disagree on which one counts; serde_json would silently keep the last).
pub fn parse_line(line_no: usize, line: &str) -> Result<TraceEvent, TraceError> {
    let value = serde_json::from_str::<Unique>(line).map_err(|e| TraceError {
        line: line_no,
        message: match e.classify() {
            serde_json::error::Category::Data => format!("{e}; give each field once"),
            _ => format!("not valid JSON: {e}"),
        },
    })?;
    parse_value(line_no, value.0)
}

/// A JSON value whose objects name each key once.
struct Unique(Value);

impl<'de> serde::Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Unique(v) = map.next_value()?;
            match out.entry(key) {
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                serde_json::map::Entry::Occupied(e) => {
                    return Err(serde::de::Error::custom(format!(
                        "`{}` is given twice",
                        e.key()
                    )));
                }
            }
        }
        Ok(Value::Object(out))
    }
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

/// What a replay line says of an enrichment: the mode, the budget and what went in (the
/// section itself is for the agent; `warden enrich` shows it).
fn knowledge_summary(e: &warden_knowledge::Enrichment) -> Value {
    json!({
        "mode": e.mode,
        "context_window": e.context_window,
        "budget": e.budget,
        "tokens": e.tokens_used,
        "tags": e.classification.tags,
        "selected": e.selected_ids(),
        "truncated": e.selected.iter().filter(|s| s.truncated).map(|s| s.id.as_str()).collect::<Vec<_>>(),
    })
}

/// The replay output of one event's outcome: a line per applied action (and one for the
/// query's knowledge enrichment), then a line per error.
pub fn outcome_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(change) = &outcome.mode_change {
        out.push(json!({"event": event, "hook": "on_mode_change", "mode": {"from": &*change.from, "to": &*change.to}}));
        out.extend(outcome_lines(event, &change.outcome));
    }
    for effect in &outcome.effects {
        // Decisions and rewrites are printed once, merged (below); the overridden ones are in
        // `explain_lines`.
        if matches!(effect, Effect::Decide { .. } | Effect::Rewrite { .. }) {
            continue;
        }
        let mut line = json!({
            "event": event,
            "hook": outcome.hook.name(),
            "rule": effect.rule(),
            "action": effect.action(),
        });
        let fields = line.as_object_mut().expect("a json! object is an object");
        match effect {
            Effect::NotifySelf(n) => {
                fields.insert("message".into(), json!(n.message));
                fields.insert("category".into(), json!(n.category));
                fields.insert("priority".into(), json!(n.priority.name()));
                fields.insert("deliver_at".into(), json!(n.deliver_at.name()));
            }
            Effect::Log { level, message, .. } => {
                fields.insert("level".into(), json!(level.name()));
                fields.insert("message".into(), json!(message));
            }
            Effect::SetState { key, value, .. } => {
                fields.insert("key".into(), json!(key));
                fields.insert("value".into(), value.clone());
            }
            Effect::EmitEvent {
                event_type,
                payload,
                ..
            } => {
                fields.insert("event_type".into(), json!(event_type));
                fields.insert("payload".into(), payload.clone());
            }
            Effect::EnrichContext { enrichment, .. } => {
                fields.insert("knowledge".into(), knowledge_summary(enrichment));
            }
            Effect::Decide { .. } | Effect::Rewrite { .. } => {}
        }
        out.push(line);
    }
    // The built-in enrichment at on_query_start, when no rule's action made one.
    if let Some(e) = &outcome.enrichment
        && !outcome
            .effects
            .iter()
            .any(|x| matches!(x, Effect::EnrichContext { .. }))
    {
        out.push(json!({
            "event": event,
            "hook": outcome.hook.name(),
            "rule": null,
            "action": "enrich_context",
            "knowledge": knowledge_summary(e),
        }));
    }
    if let Some(r) = &outcome.ruling {
        let mut line = json!({
            "event": event,
            "hook": outcome.hook.name(),
            "decision": r.name(),
            "rule": &*r.rule,
        });
        if let Some(fields) = line.as_object_mut() {
            if !r.reason.is_empty() || r.decision.is_some() {
                fields.insert("reason".into(), json!(r.reason));
            }
            if let Some(input) = &r.input {
                fields.insert("input".into(), input.clone());
            }
        }
        out.push(line);
    }
    for e in &outcome.errors {
        out.push(json!({"event": event, "rule": e.rule, "error": e.error}));
    }
    out
}

/// Why each rule did or did not fire at one event (for `replay --explain`), and the scripts
/// halted at it.
pub fn explain_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    let before = outcome
        .mode_change
        .as_ref()
        .map(|c| explain_lines(event, &c.outcome))
        .unwrap_or_default();
    let halted = outcome
        .halted
        .iter()
        .map(|h| json!({"event": event, "hook": outcome.hook.name(), "rule": h.rule, "halted": h.reason}));
    let lines = outcome.trace().map(|(rule, evaluation)| {
        let (result, reason) = match evaluation {
            Evaluation::Fired => ("fired", None),
            Evaluation::NotMatched => ("not_matched", None),
            Evaluation::Undetermined(r) => ("undetermined", Some(r.clone())),
            Evaluation::Failed(r) => ("failed", Some(r.clone())),
            Evaluation::Suppressed(r) => ("suppressed", Some(r.to_string())),
            Evaluation::Running => ("running", None),
            Evaluation::Disabled => (
                "disabled",
                Some("switched off (by the user, or `enabled = false` in its file)".to_string()),
            ),
            Evaluation::Inactive(mode) => ("inactive", Some(format!("not active in mode `{mode}`"))),
        };
        let mut line = json!({"event": event, "hook": outcome.hook.name(), "rule": rule, "evaluation": result});
        if let (Some(reason), Some(fields)) = (reason, line.as_object_mut()) {
            fields.insert("reason".into(), json!(reason));
        }
        line
    });
    let overridden = outcome.overridden.iter().map(|o| {
        json!({"event": event, "hook": outcome.hook.name(), "rule": &*o.rule, "overridden": o.what(), "by": &*o.by, "why": o.why()})
    });
    before
        .into_iter()
        .chain(lines)
        .chain(overridden)
        .chain(halted)
        .collect()
}

/// The nodes of behaviors that ran at one event, one line each, in the order they finished
/// (children before their parents): what `warden replay --trace` prints.
pub fn node_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    let before = outcome
        .mode_change
        .as_ref()
        .map(|c| node_lines(event, &c.outcome))
        .unwrap_or_default();
    before
        .into_iter()
        .chain(outcome.node_trace().map(|(rule, node, status)| {
            json!({"event": event, "hook": outcome.hook.name(), "rule": rule, "node": node, "status": status.name()})
        }))
        .collect()
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
