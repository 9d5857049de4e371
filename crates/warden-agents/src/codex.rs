//! Codex's table (`@openai/codex`): its events, its answer format, the files its
//! `apply_patch` writes, and the token usage it records in its session file.
//!
//! Codex reads a hook's answer strictly: a field its schema does not have, or one it does not
//! support at that event, makes it throw the whole answer away and run the call. So only what
//! it takes is written:
//! - at `PreToolUse`, a refusal (`deny` with its reason), new input with `allow` (only with
//!   `updatedInput`), context; never `continue: false` (there it would run the call: a session
//!   the rules stop has each call refused instead, and ends at the next prompt or stop);
//! - it cannot ask a person from a hook (`ask` is not supported, and also runs the call): an
//!   `ask` is answered as a refusal that says how to approve.
//!
//! Codex has no event for a failed tool: a `PostToolUse` whose command failed (its session file
//! records the exit code) is Warden's `on_tool_failure`.

use serde_json::{Map, Value, json};

use crate::claude_code;
use crate::event::HookEvent;
use crate::reply::{Reply, Verdict, ask_as_refusal};
use crate::transcript::{self, Usage, Usages};

/// Codex's events Warden acts on (its shell tool is `Bash`, its file edits `apply_patch`).
pub(crate) const EVENTS: &[(&str, HookEvent)] = &[
    ("SessionStart", HookEvent::SessionStart),
    ("UserPromptSubmit", HookEvent::Prompt),
    ("PreToolUse", HookEvent::ToolCall),
    ("PostToolUse", HookEvent::ToolDone),
    ("Stop", HookEvent::Stop),
    ("SubagentStop", HookEvent::SubagentStop),
    ("SessionEnd", HookEvent::SessionEnd),
];

/// `reply`, in Codex's schema.
pub(crate) fn encode(event: HookEvent, event_name: &str, reply: &Reply) -> Option<Value> {
    // At `PreToolUse` Codex takes no stop: the stop is the refusal.
    let mut out = if event == HookEvent::ToolCall {
        reply.notes_head()
    } else {
        reply.head()
    };
    match event {
        HookEvent::Prompt => {
            if let Some(reason) = &reply.refuse_prompt {
                out.insert("decision".into(), json!("block"));
                out.insert("reason".into(), json!(reason));
            } else {
                claude_code::context(&mut out, event_name, reply);
            }
        }
        HookEvent::ToolCall => {
            let mut specific = Map::new();
            specific.insert("hookEventName".into(), json!(event_name));
            let verdict = match &reply.verdict {
                // Codex cannot ask, and a rewritten input is a call Codex cannot be made to
                // run: the call is refused, saying what a person may do.
                Some(Verdict::Ask { reason, rule, .. }) => Some(Verdict::Deny(ask_as_refusal(
                    reason,
                    rule.as_deref(),
                    "Codex",
                ))),
                // Codex takes new input only with `allow`, which skips its own approval: that
                // is for the operator to let Warden do; else the model is told what to run.
                Some(rewrite @ Verdict::Rewrite { allow: true, .. }) => Some(rewrite.clone()),
                Some(Verdict::Rewrite { reason, input, .. }) => Some(Verdict::Deny(format!(
                    "{reason}: Codex applies a hook's new input only by skipping its own approval, which Warden is not set to do (`[claude_code] allow`), so the call was refused; run it as {input} instead"
                ))),
                // Codex's own approval decides the rest (an `allow` without new input is not
                // one Codex takes).
                Some(Verdict::Allow { .. }) | None => None,
                // Codex writes "blocked by PreToolUse hook: {reason}. Command: ...": the
                // reason's own full stop is dropped.
                Some(Verdict::Deny(reason)) => Some(Verdict::Deny(
                    reason
                        .strip_suffix('.')
                        .filter(|r| !r.trim().is_empty())
                        .unwrap_or(reason)
                        .to_string(),
                )),
            };
            claude_code::permission(&mut specific, verdict.as_ref());
            if let Some(context) = &reply.context {
                specific.insert("additionalContext".into(), json!(context));
            }
            if specific.len() > 1 {
                out.insert("hookSpecificOutput".into(), Value::Object(specific));
            }
        }
        HookEvent::ToolDone | HookEvent::ToolFailed => {
            claude_code::context(&mut out, event_name, reply);
        }
        // Codex sends the agent back with a block and its reason (as a prompt to the model),
        // every time: the cap is Warden's.
        HookEvent::Stop => {
            if let Some(why) = &reply.keep_working {
                out.insert("decision".into(), json!("block"));
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

/// The input of a call that applies a patch with the files its patch writes
/// ([`WRITES`], as the patch names them), for the rules on writing files: `apply_patch`, and a
/// shell command that runs `apply_patch` (Codex applies that patch itself).
pub(crate) fn tool_input(tool: &str, mut input: Value) -> Value {
    let Some(map) = input.as_object_mut() else {
        return input;
    };
    let patch = match tool {
        "apply_patch" => map
            .values()
            .filter_map(Value::as_str)
            .find(|s| s.contains("*** Begin Patch")),
        "Bash" => map
            .get("command")
            .and_then(Value::as_str)
            .filter(|c| c.contains("apply_patch") && c.contains("*** Begin Patch")),
        _ => return input,
    };
    let Some(paths) = patch.map(patch_paths) else {
        if tool == "apply_patch" {
            map.insert(WRITES.into(), Value::Array(Vec::new()));
        }
        return input;
    };
    map.insert(
        WRITES.into(),
        Value::Array(paths.into_iter().map(Value::from).collect()),
    );
    input
}

/// The field of a tool call's input where Warden names the files a patch writes. Warden's
/// alone: it is taken out of every call's input as the agent sends it (a model could write it
/// into a tool's arguments to hide the file it writes), and set only from a patch.
pub const WRITES: &str = "warden_writes";

/// The files a patch in Codex's format adds, updates, deletes or moves to.
pub(crate) fn patch_paths(patch: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in patch.lines() {
        // Codex reads a header with the spaces around it trimmed.
        let line = line.trim();
        let path = [
            "*** Add File: ",
            "*** Update File: ",
            "*** Delete File: ",
            "*** Move to: ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p));
        if let Some(path) = path.map(str::trim).filter(|p| !p.is_empty()) {
            paths.push(path.to_string());
        }
    }
    paths.sort_unstable();
    paths.dedup();
    paths
}

/// The token usage Codex records in its session file (the payload's `transcript_path`): a
/// `token_usage_record` line per model response, written before the hooks of its tool calls
/// run, and `token_count` events with the model's context window.
pub(crate) struct Rollout<'p> {
    pub(crate) path: Option<&'p str>,
    pub(crate) model: Option<&'p str>,
}

impl Usages for Rollout<'_> {
    fn last(&mut self, log: &mut Vec<String>) -> Option<Usage> {
        let path = self.path?;
        let read = transcript::open(std::path::Path::new(path)).map(|(file, len)| {
            let usage = transcript::scan(&file, len, usage_record);
            let window = transcript::scan(&file, len, context_window);
            usage.map(|u| Usage {
                model: self.model.unwrap_or_default().to_string(),
                window,
                ..u
            })
        });
        match read {
            Ok(u) => u,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                log.push(format!(
                    "warden: Codex's session file {path} could not be read: {e}"
                ));
                None
            }
        }
    }

    /// Codex writes a response's usage before the hooks of its calls run: the last is the
    /// call's.
    fn of_call(&mut self, _: &str, log: &mut Vec<String>) -> Option<Usage> {
        self.last(log)
    }
}

/// Why the tool call `tool_use_id` failed, if Codex's session file (at `path`) records it as
/// failed (`item_completed` with a failed status or a non-zero exit code, written before the
/// call's `PostToolUse` hook runs).
pub(crate) fn failure(path: &str, tool_use_id: &str) -> Option<String> {
    let (file, len) = transcript::open(std::path::Path::new(path)).ok()?;
    // The id as the file writes it: JSON-escaped.
    let id = format!("\"id\":{}", Value::from(tool_use_id));
    transcript::scan(&file, len, |line| {
        if !contains(line, b"\"item_completed\"") || !contains(line, id.as_bytes()) {
            return None;
        }
        let v: Value = serde_json::from_slice(line).ok()?;
        let item = &v["payload"]["item"];
        if item["id"] != tool_use_id {
            return None;
        }
        let code = item["exit_code"].as_i64();
        let failed = item["status"] == "failed" || code.is_some_and(|c| c != 0);
        // Found: failed or not, the search ends here.
        Some(failed.then(|| match code {
            Some(code) => format!("the command exited with code {code}"),
            None => "the tool failed".to_string(),
        }))
    })
    .flatten()
}

/// The usage of a `token_usage_record` line.
fn usage_record(line: &[u8]) -> Option<Usage> {
    if !contains(line, b"\"token_usage_record\"") {
        return None;
    }
    let v: Value = serde_json::from_slice(line).ok()?;
    if v["type"] != "token_usage_record" {
        return None;
    }
    Some(record_usage(&v["payload"]))
}

/// The usage a `token_usage_record` line's payload holds (its model is not in it).
pub(crate) fn record_usage(p: &Value) -> Usage {
    let u = &p["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    let cached = n("cached_input_tokens");
    Usage {
        message_id: p["response_id"].as_str().unwrap_or_default().to_string(),
        model: String::new(),
        input: n("input_tokens").saturating_sub(cached),
        cache_creation: n("cache_write_input_tokens"),
        cache_read: cached,
        output: n("output_tokens"),
        window: None,
    }
}

/// The context window of a `token_count` event.
fn context_window(line: &[u8]) -> Option<u64> {
    if !contains(line, b"\"model_context_window\"") {
        return None;
    }
    let v: Value = serde_json::from_slice(line).ok()?;
    v["payload"]["info"]["model_context_window"]
        .as_u64()
        .filter(|w| *w > 0)
}

fn contains(line: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(line, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_names_every_file_it_writes_once() {
        let patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** Update File: src/b.rs\n*** Move to: src/c.rs\n@@\n-x\n+y\n*** Delete File: /etc/passwd\n*** Update File: a.txt\n*** End Patch\n";
        assert_eq!(
            patch_paths(patch),
            ["/etc/passwd", "a.txt", "src/b.rs", "src/c.rs"]
        );
        let input = tool_input("apply_patch", json!({ "command": patch }));
        assert_eq!(input[WRITES].as_array().unwrap().len(), 4);
        // Headers Codex reads after trimming them; a patch run through the shell.
        let indented =
            "*** Begin Patch\n  *** Update File: .codex/hooks.json\n@@\n-x\n+y\n*** End Patch";
        assert_eq!(patch_paths(indented), [".codex/hooks.json"]);
        let shell = format!("apply_patch <<'EOF'\n{indented}\nEOF");
        assert_eq!(
            tool_input("Bash", json!({ "command": shell }))[WRITES],
            json!([".codex/hooks.json"])
        );
        // Another tool's input is as it came; a patch that names nothing names no path.
        assert_eq!(
            tool_input("Bash", json!({"command": "ls"})),
            json!({"command": "ls"})
        );
        assert_eq!(
            tool_input("apply_patch", json!({"command": "nothing"}))[WRITES],
            json!([])
        );
    }

    #[test]
    fn a_failed_command_is_read_from_the_session_file() {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for (id, status, code) in [("call_0", "completed", 0), ("call_1", "failed", 1)] {
            writeln!(
                f,
                "{{\"type\":\"event_msg\",\"payload\":{{\"type\":\"item_completed\",\"item\":{{\"type\":\"CommandExecution\",\"id\":\"{id}\",\"status\":\"{status}\",\"exit_code\":{code}}}}}}}"
            )
            .unwrap();
        }
        let path = f.path().to_str().unwrap();
        assert_eq!(failure(path, "call_0"), None);
        assert_eq!(
            failure(path, "call_1").as_deref(),
            Some("the command exited with code 1")
        );
        assert_eq!(failure(path, "call_9"), None);
        assert_eq!(failure("/nonexistent", "call_1"), None);
    }

    #[test]
    fn the_last_response_usage_and_the_window_are_read_from_the_session_file() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let rec = |id: &str, input: u64| {
            format!(
                "{{\"type\":\"token_usage_record\",\"payload\":{{\"response_id\":\"{id}\",\"usage\":{{\"input_tokens\":{input},\"cached_input_tokens\":100,\"cache_write_input_tokens\":0,\"output_tokens\":10,\"total_tokens\":{}}}}}}}\n",
                input + 10
            )
        };
        use std::io::Write;
        f.write_all(rec("resp_0", 1000).as_bytes()).unwrap();
        f.write_all(b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"token_count\",\"info\":{\"model_context_window\":258400}}}\n").unwrap();
        f.write_all(rec("resp_1", 5000).as_bytes()).unwrap();
        let path = f.path().to_str().unwrap().to_string();
        let mut r = Rollout {
            path: Some(&path),
            model: Some("gpt-5.1-codex"),
        };
        let u = r.last(&mut Vec::new()).unwrap();
        assert_eq!(u.message_id, "resp_1");
        assert_eq!((u.input, u.cache_read, u.output), (4900, 100, 10));
        assert_eq!(u.window, Some(258_400));
        assert_eq!(u.model, "gpt-5.1-codex");
        let mut none = Rollout {
            path: Some("/nonexistent/rollout.jsonl"),
            model: None,
        };
        let mut log = Vec::new();
        assert_eq!(none.last(&mut log), None);
        assert!(log.is_empty());
    }
}
