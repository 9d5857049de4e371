//! The replay output contract: one JSON line per applied action, per ruling and per error
//! (`--explain` adds a line per rule evaluated, `--trace` one per behavior node), each naming
//! the event (its 0-based line) it belongs to. Written straight from the outcome to the output:
//! no value is built for a line.

use std::borrow::Cow;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Value, json};

use warden_program::outcome::{Effect, Evaluation, Outcome};

/// What a replay line says of an enrichment: the mode, the budget and what went in (the
/// section itself is for the agent; `warden enrich` shows it).
fn knowledge_summary(e: &warden_knowledge::Enrichment) -> Value {
    json!({
        "mode": super::knowledge::mode(e.mode),
        "context_window": e.context_window,
        "budget": e.budget,
        "tokens": e.tokens_used,
        "tags": e.classification.tags,
        "selected": e.selected_ids(),
        "truncated": e.selected.iter().filter(|s| s.truncated).map(|s| s.id.as_str()).collect::<Vec<_>>(),
    })
}

/// One replay line being written: a JSON object, its fields in the order they are given, then
/// a line break. Written straight to the output, without building a value first.
struct Line<'w, W: Write + ?Sized> {
    out: &'w mut W,
    empty: bool,
}

impl<'w, W: Write + ?Sized> Line<'w, W> {
    fn start(out: &'w mut W, event: usize) -> io::Result<Self> {
        out.write_all(b"{")?;
        let mut line = Line { out, empty: true };
        line.field("event", &event)?;
        Ok(line)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> io::Result<&mut Self> {
        if !self.empty {
            self.out.write_all(b",")?;
        }
        self.empty = false;
        serde_json::to_writer(&mut *self.out, key)?;
        self.out.write_all(b":")?;
        serde_json::to_writer(&mut *self.out, value)?;
        Ok(self)
    }

    fn end(&mut self) -> io::Result<()> {
        self.out.write_all(b"}\n")
    }
}

/// Writes the replay output of one event's outcome: a line per applied action (and one for the
/// query's knowledge enrichment), the ruling, then a line per error (see [`outcome_lines`]).
pub fn write_outcome_lines<W: Write + ?Sized>(
    out: &mut W,
    event: usize,
    outcome: &Outcome,
) -> io::Result<()> {
    if let Some(change) = &outcome.mode_change {
        #[derive(Serialize)]
        struct Mode<'a> {
            from: &'a str,
            to: &'a str,
        }
        Line::start(out, event)?
            .field("hook", "on_mode_change")?
            .field(
                "mode",
                &Mode {
                    from: &change.from,
                    to: &change.to,
                },
            )?
            .end()?;
        write_outcome_lines(out, event, &change.outcome)?;
    }
    let hook = outcome.hook.name();
    for effect in &outcome.effects {
        // Decisions and rewrites are printed once, merged (below); the overridden ones are in
        // `write_explain_lines`.
        if matches!(effect, Effect::Decide { .. } | Effect::Rewrite { .. }) {
            continue;
        }
        let mut line = Line::start(out, event)?;
        line.field("hook", hook)?
            .field("rule", effect.rule())?
            .field("action", effect.action())?;
        match effect {
            Effect::NotifySelf(n) => {
                line.field("message", &*n.message)?
                    .field("category", &*n.category)?
                    .field("priority", n.priority.name())?
                    .field("deliver_at", n.deliver_at.name())?;
            }
            Effect::Log { level, message, .. } => {
                line.field("level", level.name())?
                    .field("message", message)?;
            }
            Effect::SetState {
                key, value, scope, ..
            } => {
                line.field("key", key)?.field("value", value)?;
                // The shared scope is the default, and not said.
                if scope.is_session() {
                    line.field("scope", scope.name())?;
                }
            }
            Effect::EmitEvent {
                event_type,
                payload,
                ..
            } => {
                line.field("event_type", &**event_type)?
                    .field("payload", payload)?;
            }
            Effect::EnrichContext { enrichment, .. } => {
                line.field("knowledge", &knowledge_summary(enrichment))?;
            }
            Effect::Decide { .. } | Effect::Rewrite { .. } => {}
        }
        line.end()?;
    }
    // The built-in enrichment at on_query_start, when no rule's action made one.
    if let Some(e) = &outcome.enrichment
        && !outcome
            .effects
            .iter()
            .any(|x| matches!(x, Effect::EnrichContext { .. }))
    {
        Line::start(out, event)?
            .field("hook", hook)?
            .field("rule", &())?
            .field("action", "enrich_context")?
            .field("knowledge", &knowledge_summary(e))?
            .end()?;
    }
    if let Some(r) = &outcome.ruling {
        let mut line = Line::start(out, event)?;
        line.field("hook", hook)?
            .field("decision", r.name())?
            .field("rule", &*r.rule)?;
        if !r.reason.is_empty() || r.decision.is_some() {
            line.field("reason", &*r.reason)?;
        }
        if let Some(input) = &r.input {
            line.field("input", input)?;
        }
        line.end()?;
    }
    for e in &outcome.errors {
        let mut line = Line::start(out, event)?;
        line.field("rule", &e.rule)?.field("error", &e.error)?;
        // The store refused the tick's writes: the lines above were decided, not saved.
        if e.rule.is_none() && outcome.unsaved.as_deref() == Some(&*e.error) {
            line.field("unsaved", &true)?;
        }
        line.end()?;
    }
    // What the rules in shadow would have done, marked: none of it applied.
    for effect in &outcome.shadow {
        let mut line = Line::start(out, event)?;
        line.field("hook", hook)?
            .field("rule", effect.rule())?
            .field("shadow", &true)?
            .field("action", effect.action())?;
        match effect {
            Effect::Decide {
                decision, reason, ..
            } => {
                line.field("decision", decision.name())?
                    .field("reason", &**reason)?;
            }
            Effect::NotifySelf(n) => {
                line.field("message", &*n.message)?;
            }
            Effect::Log { message, .. } => {
                line.field("message", message)?;
            }
            Effect::SetState { key, value, .. } => {
                line.field("key", key)?.field("value", value)?;
            }
            Effect::Rewrite { set, .. } => {
                let set: serde_json::Map<String, serde_json::Value> = set
                    .iter()
                    .map(|(path, v)| (path.join("."), v.clone()))
                    .collect();
                line.field("set", &set)?;
            }
            Effect::EmitEvent { event_type, .. } => {
                line.field("event_type", &**event_type)?;
            }
            Effect::EnrichContext { .. } => {}
        }
        line.end()?;
    }
    for e in &outcome.shadow_errors {
        Line::start(out, event)?
            .field("rule", &e.rule)?
            .field("shadow", &true)?
            .field("error", &e.error)?
            .end()?;
    }
    Ok(())
}

/// Writes why each rule did or did not fire at one event (for `replay --explain`), the
/// decisions that lost, and the scripts halted at it (see [`explain_lines`]).
pub fn write_explain_lines<W: Write + ?Sized>(
    out: &mut W,
    event: usize,
    outcome: &Outcome,
) -> io::Result<()> {
    if let Some(change) = &outcome.mode_change {
        write_explain_lines(out, event, &change.outcome)?;
    }
    let hook = outcome.hook.name();
    let live = outcome.trace().map(|(r, e)| (r, e, false));
    for (rule, evaluation, shadow) in live.chain(outcome.shadow_trace().map(|(r, e)| (r, e, true)))
    {
        let (result, reason) = match evaluation {
            Evaluation::Fired => ("fired", None),
            Evaluation::NotMatched => ("not_matched", None),
            Evaluation::Undetermined(r) => ("undetermined", Some(Cow::from(r.as_str()))),
            Evaluation::Failed(r) => ("failed", Some(Cow::from(r.as_str()))),
            Evaluation::Suppressed(r) => ("suppressed", Some(Cow::from(*r))),
            Evaluation::Running => ("running", None),
            Evaluation::Disabled => (
                "disabled",
                Some(Cow::from(
                    "switched off (by the user, or `enabled = false` in its file)",
                )),
            ),
            Evaluation::Inactive(mode) => (
                "inactive",
                Some(Cow::from(format!("not active in mode `{mode}`"))),
            ),
        };
        let mut line = Line::start(out, event)?;
        line.field("hook", hook)?.field("rule", rule)?;
        if shadow {
            line.field("shadow", &true)?;
        }
        line.field("evaluation", result)?;
        if let Some(reason) = reason {
            line.field("reason", &*reason)?;
        }
        line.end()?;
    }
    for o in &outcome.overridden {
        Line::start(out, event)?
            .field("hook", hook)?
            .field("rule", &*o.rule)?
            .field("overridden", &o.what())?
            .field("by", &*o.by)?
            .field("why", &o.why())?
            .end()?;
    }
    for h in &outcome.halted {
        Line::start(out, event)?
            .field("hook", hook)?
            .field("rule", &*h.rule)?
            .field("halted", &h.reason)?
            .end()?;
    }
    Ok(())
}

/// Writes the nodes of behaviors that ran at one event, one line each, in the order they
/// finished (children before their parents): what `warden replay --trace` prints.
pub fn write_node_lines<W: Write + ?Sized>(
    out: &mut W,
    event: usize,
    outcome: &Outcome,
) -> io::Result<()> {
    if let Some(change) = &outcome.mode_change {
        write_node_lines(out, event, &change.outcome)?;
    }
    let hook = outcome.hook.name();
    for (rule, node, status) in outcome.node_trace() {
        Line::start(out, event)?
            .field("hook", hook)?
            .field("rule", rule)?
            .field("node", &node)?
            .field("status", status.name())?
            .end()?;
    }
    Ok(())
}

/// Writes the line of a trace line that could not be read: `error` says why (and where).
pub fn write_bad_line<W: Write + ?Sized>(out: &mut W, event: usize, error: &str) -> io::Result<()> {
    Line::start(out, event)?
        .field("rule", &())?
        .field("error", error)?
        .end()
}

/// Lines written by one of the writers above, as values.
fn lines_of(write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> Vec<Value> {
    let mut buf = Vec::new();
    // Writing to memory does not fail, and every line written is a JSON object.
    let _ = write(&mut buf);
    buf.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// The replay output of one event's outcome, as values: a line per applied action (and one
/// for the query's knowledge enrichment), then a line per error.
pub fn outcome_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    lines_of(|buf| write_outcome_lines(buf, event, outcome))
}

/// Why each rule did or did not fire at one event (for `replay --explain`), and the scripts
/// halted at it, as values.
pub fn explain_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    lines_of(|buf| write_explain_lines(buf, event, outcome))
}

/// The nodes of behaviors that ran at one event, as values (see [`write_node_lines`]).
pub fn node_lines(event: usize, outcome: &Outcome) -> Vec<Value> {
    lines_of(|buf| write_node_lines(buf, event, outcome))
}
