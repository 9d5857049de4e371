//! Claude Code's table: its events, and its answer format (`hookSpecificOutput` with a
//! `permissionDecision` for a tool call, `additionalContext` for the model).

use serde_json::{Map, Value, json};

use crate::payload::HookEvent;
use crate::reply::{Reply, Verdict};

/// Claude Code's events Warden acts on.
pub(crate) const EVENTS: &[(&str, HookEvent)] = &[
    ("SessionStart", HookEvent::SessionStart),
    ("UserPromptSubmit", HookEvent::Prompt),
    ("PreToolUse", HookEvent::ToolCall),
    ("PostToolUse", HookEvent::ToolDone),
    ("PostToolUseFailure", HookEvent::ToolFailed),
    ("Stop", HookEvent::Stop),
    ("SubagentStop", HookEvent::SubagentStop),
    ("SessionEnd", HookEvent::SessionEnd),
];

/// `reply`, as Claude Code reads it.
pub(crate) fn encode(event: HookEvent, event_name: &str, reply: &Reply) -> Option<Value> {
    let mut out = reply.head();
    match event {
        HookEvent::Prompt => {
            if let Some(reason) = &reply.refuse_prompt {
                out.insert("decision".into(), json!("block"));
                out.insert("reason".into(), json!(reason));
            } else {
                context(&mut out, event_name, reply);
            }
        }
        HookEvent::ToolCall => {
            let mut specific = Map::new();
            specific.insert("hookEventName".into(), json!(event_name));
            permission(&mut specific, reply.verdict.as_ref());
            if let Some(context) = &reply.context {
                specific.insert("additionalContext".into(), json!(context));
            }
            if specific.len() > 1 {
                out.insert("hookSpecificOutput".into(), Value::Object(specific));
            }
        }
        HookEvent::ToolDone | HookEvent::ToolFailed => context(&mut out, event_name, reply),
        // Context for the model at Stop sends it back to work (Claude Code's current schema),
        // as non-error feedback rather than a blocking error.
        HookEvent::Stop => {
            if let Some(why) = &reply.keep_working {
                out.insert(
                    "hookSpecificOutput".into(),
                    json!({ "hookEventName": event_name, "additionalContext": why }),
                );
            }
        }
        HookEvent::SessionStart
        | HookEvent::SubagentStop
        | HookEvent::ModelResponse
        | HookEvent::SessionEnd => {}
    }
    reply.finish(out)
}

/// The model's context, as `additionalContext` of the event.
pub(crate) fn context(out: &mut Map<String, Value>, event_name: &str, reply: &Reply) {
    if let Some(context) = &reply.context {
        out.insert(
            "hookSpecificOutput".into(),
            json!({ "hookEventName": event_name, "additionalContext": context }),
        );
    }
}

/// A tool call's verdict as `permissionDecision` (Claude Code and Codex).
pub(crate) fn permission(specific: &mut Map<String, Value>, verdict: Option<&Verdict>) {
    match verdict {
        Some(Verdict::Deny(reason)) => {
            specific.insert("permissionDecision".into(), json!("deny"));
            specific.insert("permissionDecisionReason".into(), json!(reason));
        }
        Some(Verdict::Ask { reason, input, .. }) => {
            specific.insert("permissionDecision".into(), json!("ask"));
            specific.insert("permissionDecisionReason".into(), json!(reason));
            if let Some(input) = input {
                specific.insert("updatedInput".into(), input.clone());
            }
        }
        Some(Verdict::Allow { reason }) => {
            specific.insert("permissionDecision".into(), json!("allow"));
            specific.insert("permissionDecisionReason".into(), json!(reason));
        }
        // An agent applies new input only with a decision: `ask` shows the person the
        // rewritten call (their own permission prompt is never skipped), unless the operator
        // let Warden allow.
        Some(Verdict::Rewrite {
            reason,
            input,
            allow,
        }) => {
            let decision = if *allow { "allow" } else { "ask" };
            specific.insert("permissionDecision".into(), json!(decision));
            specific.insert("permissionDecisionReason".into(), json!(reason));
            specific.insert("updatedInput".into(), input.clone());
        }
        None => {}
    }
}
