//! What an agent sends a hook: one JSON object on stdin (or in an `http` hook's body), with
//! common fields and the event's own. Claude Code, Codex and Gemini CLI name the fields Warden
//! reads alike. Read field by field, so a payload that is not what the agent sends is refused
//! with the field named, never half-read.

use serde_json::{Map, Value};

use crate::agent::Agent;
use crate::event::HookEvent;
use crate::transcript::Usage;

/// The most a payload may weigh (a tool's response can be large; a payload past this is not
/// an agent's).
pub const MAX_PAYLOAD: usize = 16 << 20;

/// A payload that is not what the agent sends.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the hook payload {what}")]
pub struct PayloadError {
    /// What is wrong, naming the field.
    pub what: String,
}

fn bad(what: impl Into<String>) -> PayloadError {
    PayloadError { what: what.into() }
}

/// A hook payload, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Payload {
    /// The agent that sent it.
    pub agent: Agent,
    /// The event (`None`: one Warden does not act on, named in `event_name`).
    pub event: Option<HookEvent>,
    /// The event's name as sent.
    pub event_name: String,
    /// The agent's session id.
    pub session_id: String,
    /// The session's transcript (JSON Lines), if given.
    pub transcript_path: Option<String>,
    /// The working folder.
    pub cwd: Option<String>,
    /// The prompt (`UserPromptSubmit`).
    pub prompt: Option<String>,
    /// The tool (tool events).
    pub tool_name: Option<String>,
    /// Its input (tool events).
    pub tool_input: Option<Value>,
    /// The model the agent runs, when the payload says (Codex's do).
    pub model: Option<String>,
    /// The id of the model's `tool_use` block that asked for the call (tool events).
    pub tool_use_id: Option<String>,
    /// What it returned (`PostToolUse`).
    pub tool_response: Option<Value>,
    /// Why it failed (`PostToolUseFailure`).
    pub error: Option<String>,
    /// Whether the agent is already continuing because a Stop hook sent it back (`Stop`).
    pub stop_hook_active: bool,
    /// The token usage of the model call that just returned (Gemini CLI's `AfterModel`).
    pub usage: Option<Usage>,
}

/// The longest session id accepted (the agents' are UUIDs).
const MAX_ID: usize = 256;

fn text(map: &Map<String, Value>, key: &str) -> Result<Option<String>, PayloadError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(format!(
            "field `{key}` must be a string, not {}",
            kind(other)
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Payload {
    /// A payload of `event` from `agent` with nothing but its session.
    pub fn empty(agent: Agent, event: HookEvent, session_id: &str) -> Payload {
        Payload {
            agent,
            event: Some(event),
            event_name: agent.event_name(event).to_string(),
            session_id: session_id.to_string(),
            transcript_path: None,
            cwd: None,
            prompt: None,
            tool_name: None,
            tool_input: None,
            model: None,
            tool_use_id: None,
            tool_response: None,
            error: None,
            stop_hook_active: false,
            usage: None,
        }
    }

    /// Reads a payload of `agent` from its bytes.
    pub fn parse(agent: Agent, bytes: &[u8]) -> Result<Payload, PayloadError> {
        if bytes.len() > MAX_PAYLOAD {
            return Err(bad(format!(
                "is {} bytes, more than the {} MiB a hook payload may be",
                bytes.len(),
                MAX_PAYLOAD >> 20
            )));
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("is not JSON: {e}")))?;
        Payload::from_value(agent, value)
    }

    /// Reads a payload of `agent` already parsed as JSON. The three agents name the fields
    /// Warden reads alike (`session_id`, `tool_name`, `tool_input`...); their events are named
    /// by each agent's table.
    pub fn from_value(agent: Agent, value: Value) -> Result<Payload, PayloadError> {
        let Value::Object(map) = value else {
            return Err(bad(format!("must be a JSON object, not {}", kind(&value))));
        };
        let event_name =
            text(&map, "hook_event_name")?.ok_or_else(|| bad("has no `hook_event_name`"))?;
        let event = agent.event(&event_name);
        let session_id = text(&map, "session_id")?.unwrap_or_default();
        if event.is_some() {
            if session_id.is_empty() {
                return Err(bad("has no `session_id`"));
            }
            if session_id.len() > MAX_ID || session_id.chars().any(char::is_control) {
                return Err(bad(format!(
                    "field `session_id` must be at most {MAX_ID} characters, without control characters"
                )));
            }
        }
        let tool_event = event.is_some_and(HookEvent::is_tool_event);
        let tool_name = text(&map, "tool_name")?;
        if tool_event && tool_name.as_deref().is_none_or(str::is_empty) {
            return Err(bad(format!("of {event_name} has no `tool_name`")));
        }
        let tool_input = match map.get("tool_input") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(other) => {
                return Err(bad(format!(
                    "field `tool_input` must be an object, not {}",
                    kind(other)
                )));
            }
        };
        let stop_hook_active = match map.get("stop_hook_active") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(bad(format!(
                    "field `stop_hook_active` must be a boolean, not {}",
                    kind(other)
                )));
            }
        };
        let usage = match event {
            Some(HookEvent::ModelResponse) => agent.model_usage(&map),
            _ => None,
        };
        let tool_input = tool_input.map(|mut input| {
            // Warden's own field, never the agent's (nor a model's, written into a tool's
            // arguments to hide a file it writes).
            if let Some(map) = input.as_object_mut() {
                map.remove(crate::codex::WRITES);
            }
            match event {
                Some(HookEvent::ToolCall | HookEvent::ToolDone) => {
                    agent.tool_input(tool_name.as_deref().unwrap_or_default(), input)
                }
                _ => input,
            }
        });
        Ok(Payload {
            agent,
            event,
            event_name,
            session_id,
            transcript_path: text(&map, "transcript_path")?,
            cwd: text(&map, "cwd")?,
            prompt: text(&map, "prompt")?,
            tool_name,
            tool_input,
            model: text(&map, "model")?,
            tool_use_id: text(&map, "tool_use_id")?,
            tool_response: map.get("tool_response").filter(|v| !v.is_null()).cloned(),
            error: text(&map, "error")?,
            stop_hook_active,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pre_tool_use_payload_reads() {
        let p = Payload::parse(
            Agent::ClaudeCode,
            br#"{"session_id":"abc","transcript_path":"/t.jsonl","cwd":"/p","hook_event_name":"PreToolUse","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"toolu_1"}"#,
        )
        .unwrap();
        assert_eq!(p.event, Some(HookEvent::ToolCall));
        assert_eq!(p.tool_name.as_deref(), Some("Bash"));
        assert_eq!(p.tool_input, Some(serde_json::json!({"command": "ls"})));
    }

    #[test]
    fn what_is_not_claude_codes_is_refused_by_field() {
        for (payload, want) in [
            ("[]", "must be a JSON object"),
            ("{", "is not JSON"),
            ("{}", "no `hook_event_name`"),
            (r#"{"hook_event_name":"Stop"}"#, "no `session_id`"),
            (
                r#"{"hook_event_name":"Stop","session_id":5}"#,
                "`session_id` must be a string",
            ),
            (
                r#"{"hook_event_name":"PreToolUse","session_id":"s"}"#,
                "no `tool_name`",
            ),
            (
                r#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"X","tool_input":"ls"}"#,
                "`tool_input` must be an object",
            ),
            (
                r#"{"hook_event_name":"Stop","session_id":"s","stop_hook_active":"yes"}"#,
                "`stop_hook_active` must be a boolean",
            ),
            (
                r#"{"hook_event_name":"Stop","session_id":"a\nb"}"#,
                "control characters",
            ),
        ] {
            let err = Payload::parse(Agent::ClaudeCode, payload.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{payload}: {err}");
        }
        let unknown =
            Payload::parse(Agent::ClaudeCode, br#"{"hook_event_name":"Notification"}"#).unwrap();
        assert_eq!(unknown.event, None);
    }
}
