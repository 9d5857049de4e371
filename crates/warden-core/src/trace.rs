//! Session traces: a session written as JSON Lines, one event per line (`{"hook": ...,
//! "turn": {...}, "tool": {...}, ...}`), and the replay output contract: one line per applied
//! action and one per error, each naming the event (its 0-based line) it belongs to.

use serde_json::{Map, Value, json};

use crate::event::Event;
use crate::hook::Hook;
use crate::outcome::{Effect, Evaluation, Outcome};

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

/// Reads one trace line (not blank).
pub fn parse_line(line_no: usize, line: &str) -> Result<TraceEvent, TraceError> {
    let err = |message: String| TraceError {
        line: line_no,
        message,
    };
    match serde_json::from_str(line) {
        Ok(value) => parse_value(line_no, value),
        Err(e) => Err(err(format!("not valid JSON: {e}"))),
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
    let event: Event =
        serde_json::from_value(Value::Object(value)).map_err(|e| err(e.to_string()))?;
    Ok(TraceEvent { hook, event })
}

/// Reads a whole trace; blank lines and lines starting with `//` are skipped (they still count
/// for line numbers). Every bad line is returned, in order, next to the good events.
pub fn parse_trace(text: &str) -> Vec<(usize, Result<TraceEvent, TraceError>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with("//"))
        .map(|(i, l)| (i, parse_line(i, l)))
        .collect()
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
    outcome
        .trace()
        .map(|(rule, evaluation)| {
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
                Evaluation::Inactive(mode) => {
                    ("inactive", Some(format!("not active in mode `{mode}`")))
                }
            };
            let mut line = json!({"event": event, "hook": outcome.hook.name(), "rule": rule, "evaluation": result});
            if let (Some(reason), Some(fields)) = (reason, line.as_object_mut()) {
                fields.insert("reason".into(), json!(reason));
            }
            line
        })
        .chain(halted)
        .fold(before, |mut v, l| {
            v.push(l);
            v
        })
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
