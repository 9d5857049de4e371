//! Gemini CLI's table (`@google/gemini-cli`): its events, its answer format, and the token
//! usage its `AfterModel` hook reports exactly, call by call (no transcript is read).
//!
//! Gemini CLI cannot ask a person from a hook: an `ask` is answered as a refusal that says how
//! to approve.

use serde_json::{Map, Value, json};

use crate::event::HookEvent;
use crate::reply::{Reply, Verdict, ask_as_refusal};
use crate::transcript::Usage;

/// Gemini CLI's events Warden acts on (its shell tool is `run_shell_command`).
pub(crate) const EVENTS: &[(&str, HookEvent)] = &[
    ("SessionStart", HookEvent::SessionStart),
    ("BeforeAgent", HookEvent::Prompt),
    ("AfterModel", HookEvent::ModelResponse),
    ("BeforeTool", HookEvent::ToolCall),
    ("AfterTool", HookEvent::ToolDone),
    ("AfterAgent", HookEvent::Stop),
    ("SessionEnd", HookEvent::SessionEnd),
];

/// `reply`, in Gemini CLI's schema.
pub(crate) fn encode(event: HookEvent, event_name: &str, reply: &Reply) -> Option<Value> {
    let mut out = reply.head();
    match event {
        HookEvent::Prompt => {
            if let Some(reason) = &reply.refuse_prompt {
                out.insert("decision".into(), json!("deny"));
                out.insert("reason".into(), json!(reason));
            } else {
                context(&mut out, event_name, reply);
            }
        }
        HookEvent::ToolCall => {
            let refusal = match &reply.verdict {
                Some(Verdict::Deny(reason)) => Some(reason.clone()),
                // Gemini CLI's `ask` waits for a person forever when none is there (`-p`).
                Some(Verdict::Ask { reason, rule, .. }) => {
                    Some(ask_as_refusal(reason, rule.as_deref(), "Gemini CLI"))
                }
                // New input without a decision: Gemini CLI's own confirmation still applies.
                Some(Verdict::Rewrite { input, .. }) => {
                    out.insert(
                        "hookSpecificOutput".into(),
                        json!({ "hookEventName": event_name, "tool_input": input }),
                    );
                    None
                }
                Some(Verdict::Allow { .. }) | None => None,
            };
            // What the model should read goes with the refusal (a call that runs carries it
            // to its `AfterTool`: the handler keeps it until then).
            if let Some(mut reason) = refusal {
                if let Some(context) = &reply.context {
                    reason.push_str("\n\n");
                    reason.push_str(context);
                }
                out.insert("decision".into(), json!("deny"));
                out.insert("reason".into(), json!(reason));
            }
        }
        HookEvent::ToolDone | HookEvent::ToolFailed => context(&mut out, event_name, reply),
        // A refused answer sends the agent back, with the reason as its next prompt.
        HookEvent::Stop => {
            if let Some(why) = &reply.keep_working {
                out.insert("decision".into(), json!("deny"));
                out.insert("reason".into(), json!(why));
            }
        }
        HookEvent::SessionStart
        | HookEvent::SubagentStop
        | HookEvent::ModelResponse
        | HookEvent::SessionEnd => {}
    }
    reply.finish(out)
}

/// The model's context, as the event's `additionalContext`.
fn context(out: &mut Map<String, Value>, event_name: &str, reply: &Reply) {
    if let Some(context) = &reply.context {
        out.insert(
            "hookSpecificOutput".into(),
            json!({ "hookEventName": event_name, "additionalContext": context }),
        );
    }
}

/// Why a tool failed, from its `AfterTool` response: the tool's own error, or a shell
/// command's exit code other than 0 (`Exit Code: 1` in what the model reads: the last such
/// line, which the shell tool writes after the command's output; only for the shell tool).
pub(crate) fn failure(tool: &str, response: &Value) -> Option<String> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        return Some(match error {
            Value::String(s) => s.clone(),
            Value::Object(o) => o
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string),
            other => other.to_string(),
        });
    }
    if tool != "run_shell_command" {
        return None;
    }
    let text = response.get("llmContent")?.as_str()?;
    let code = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("Exit Code: "))?
        .trim();
    (code != "0").then(|| format!("the command exited with code {code}"))
}

/// The usage of the model call an `AfterModel` payload reports: its `llm_response`'s
/// `usageMetadata`, once the response is whole (a streamed response's last chunk has its
/// `finishReason`).
pub(crate) fn model_usage(payload: &Map<String, Value>) -> Option<Usage> {
    let response = payload.get("llm_response")?;
    let meta = response.get("usageMetadata")?;
    let unfinished = response
        .get("candidates")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty() && c.iter().all(|c| c.get("finishReason").is_none()));
    if unfinished {
        return None;
    }
    let n = |k: &str| meta.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cachedContentTokenCount");
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    Some(Usage {
        message_id: text(response.get("responseId")),
        model: text(payload.get("llm_request").and_then(|r| r.get("model"))),
        input: n("promptTokenCount").saturating_sub(cached),
        cache_creation: 0,
        cache_read: cached,
        output: n("candidatesTokenCount").saturating_add(n("thoughtsTokenCount")),
        window: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn after_model_gives_the_calls_usage_once_the_response_is_whole() {
        let done = map(json!({
            "llm_request": {"model": "gemini-2.5-pro"},
            "llm_response": {
                "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 170000, "cachedContentTokenCount": 1000,
                                  "candidatesTokenCount": 20, "totalTokenCount": 170020}
            }
        }));
        let u = model_usage(&done).unwrap();
        assert_eq!((u.input, u.cache_read, u.output), (169_000, 1000, 20));
        assert_eq!(u.model, "gemini-2.5-pro");
        assert_eq!(u.total(), 170_020);
        let chunk = map(json!({"llm_response": {
            "candidates": [{"content": {"role": "model", "parts": ["hi"]}}],
            "usageMetadata": {"promptTokenCount": 5}
        }}));
        assert_eq!(model_usage(&chunk), None);
        assert_eq!(model_usage(&map(json!({"llm_response": {}}))), None);
    }

    #[test]
    fn a_failed_tool_is_told_by_its_response() {
        let failed = json!({"llmContent": "<untrusted_context>\nOutput: 2 tests failed\nExit Code: 1\nProcess Group PGID: 8282\n</untrusted_context>", "returnDisplay": "2 tests failed"});
        let shell = "run_shell_command";
        assert_eq!(
            failure(shell, &failed).as_deref(),
            Some("the command exited with code 1")
        );
        let ok = json!({"llmContent": "Output: hi\nExit Code: 0\n"});
        assert_eq!(failure(shell, &ok), None);
        // The shell's line is the last: an output that prints one does not hide it.
        let printed = json!({"llmContent": "Output: Exit Code: 0\nExit Code: 1\n"});
        assert!(failure(shell, &printed).is_some());
        // Another tool's text is its content, not an exit code.
        assert_eq!(failure("read_file", &failed), None);
        assert_eq!(failure(shell, &json!({"llmContent": "fn main() {}"})), None);
        assert_eq!(
            failure(
                "read_file",
                &json!({"llmContent": "", "error": {"message": "no such file"}})
            )
            .as_deref(),
            Some("no such file")
        );
    }

    #[test]
    fn an_ask_is_a_refusal_that_says_how_to_approve() {
        let reply = Reply {
            verdict: Some(Verdict::Ask {
                reason: "Deleting needs a yes".into(),
                input: None,
                rule: Some("ask-before-deleting".into()),
            }),
            ..Reply::default()
        };
        let json = encode(HookEvent::ToolCall, "BeforeTool", &reply).unwrap();
        assert_eq!(json["decision"], "deny");
        let reason = json["reason"].as_str().unwrap();
        assert!(reason.starts_with("Deleting needs a yes"), "{reason}");
        assert!(
            reason.contains("rules disable ask-before-deleting"),
            "{reason}"
        );
    }
}
