//! What Warden answers one hook event, before it is written in an agent's format: the
//! handler decides a [`Reply`] once for every agent, and each agent's module writes it in its
//! own schema (`claude_code`, `codex`, `gemini_cli`).

use serde_json::{Map, Value, json};

/// Warden's answer to one event, in no agent's format.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reply {
    /// The rules ended the session, for this reason: the agent stops.
    pub(crate) stop: Option<String>,
    /// Failures of Warden itself the user should know of (said first).
    pub(crate) notes: Vec<String>,
    /// What the user is told after the event's own answer, line by line.
    pub(crate) messages: Vec<String>,
    /// Context for the model (the rendered notifications).
    pub(crate) context: Option<String>,
    /// The verdict on a tool call.
    pub(crate) verdict: Option<Verdict>,
    /// The prompt is refused, for this reason.
    pub(crate) refuse_prompt: Option<String>,
    /// The agent that wants to stop is sent back to work, with this for the model.
    pub(crate) keep_working: Option<String>,
}

/// What happens to a tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// It does not run; the model is told why.
    Deny(String),
    /// A person is asked, with the call's new input if a rule rewrote it.
    Ask {
        reason: String,
        input: Option<Value>,
        /// The rule that asks.
        rule: Option<String>,
    },
    /// It runs without the agent's own permission prompt (the operator let Warden allow).
    Allow { reason: Option<String> },
    /// A rule rewrote its input: it runs as `input`, through the agent's own permission
    /// prompt unless the operator let Warden allow (`allow`).
    Rewrite {
        reason: String,
        input: Value,
        allow: bool,
    },
}

impl Reply {
    /// Whether the tool call is refused (denied, or the session stopped).
    pub(crate) fn refuses_call(&self) -> bool {
        matches!(self.verdict, Some(Verdict::Deny(_)))
    }

    /// Fails closed: a tool call not refused already is refused, for `reason`.
    pub(crate) fn deny_unless_refused(&mut self, reason: &str) {
        if !self.refuses_call() {
            self.verdict = Some(Verdict::Deny(format!(
                "{reason} (Warden is set to fail closed)"
            )));
        }
    }

    /// The answer's head, as every agent writes it: `continue: false` with `stopReason` when
    /// the session stops, and Warden's own failures in `systemMessage`.
    pub(crate) fn head(&self) -> Map<String, Value> {
        let mut out = Map::new();
        if let Some(reason) = &self.stop {
            out.insert("continue".into(), json!(false));
            out.insert("stopReason".into(), json!(reason));
        }
        out.extend(self.notes_head());
        out
    }

    /// The answer's head without the stop: Warden's own failures in `systemMessage` alone.
    pub(crate) fn notes_head(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for note in &self.notes {
            append_message(&mut out, note);
        }
        out
    }

    /// Adds the lines for the user to the answer and returns it, unless it is empty.
    pub(crate) fn finish(&self, mut out: Map<String, Value>) -> Option<Value> {
        for line in &self.messages {
            append_message(&mut out, line);
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }
}

/// Adds a line to the answer's `systemMessage` (what the user sees).
pub(crate) fn append_message(out: &mut Map<String, Value>, text: &str) {
    let message = match out.get("systemMessage").and_then(Value::as_str) {
        Some(before) => format!("{before}\n{text}"),
        None => text.to_string(),
    };
    out.insert("systemMessage".into(), json!(message));
}

/// An `ask` for an agent whose hooks cannot ask a person: a refusal that says how to approve.
pub(crate) fn ask_as_refusal(reason: &str, rule: Option<&str>, agent: &str) -> String {
    let how = match rule {
        Some(rule) => format!(
            "if the user approves, they can run it themselves, or switch the rule off for their user with `warden --config .warden/warden.toml rules disable {rule}` in the project and ask again"
        ),
        None => "if the user approves, they can run it themselves".to_string(),
    };
    format!(
        "{reason} (Warden asks a person to approve this call, and {agent} cannot ask from a hook, so it was refused: {how})"
    )
}
