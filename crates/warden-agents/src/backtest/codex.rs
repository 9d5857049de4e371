//! Backtests of Codex's session files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): the
//! lines Codex writes of a session turned back into the payloads its hooks would have been
//! sent.
//!
//! | session file line | hook payload |
//! | --- | --- |
//! | `session_meta`, `turn_context` | nothing (the folder and the model, for the payloads) |
//! | a user message (`response_item`, role `user`), not Codex's own context | `Stop` for the turn before it, if it had none; `UserPromptSubmit` |
//! | a tool call (`function_call`, `custom_tool_call`) | `PreToolUse`, once its response's usage is recorded (`token_usage_record`), as the live hook runs then: `exec_command` is `Bash` with its command, `apply_patch` its patch |
//! | its output (`function_call_output`, `custom_tool_call_output`) | `PostToolUse` (a failure when the command exited with another code than 0); none for a call the rules refused, or one refused when the session was recorded |
//! | the end of a turn (`task_complete`) | `Stop` |
//! | the end of the file | `Stop` if a turn is open, then `SessionEnd` |

use serde_json::{Map, Value, json};

use super::{Backtest, Call, Pending, Replayed};
use crate::codex;
use crate::event::HookEvent;
use crate::transcript::Usage;

impl Backtest<'_> {
    pub(super) fn codex_line(&mut self, line: usize, text: &[u8]) -> Vec<Replayed> {
        let parsed =
            serde_json::from_slice::<Value>(text).or_else(|e| match std::str::from_utf8(text) {
                Err(_) => serde_json::from_str::<Value>(&String::from_utf8_lossy(text)),
                Ok(_) => Err(e),
            });
        let Ok(v) = parsed else {
            self.unread += 1;
            return Vec::new();
        };
        let p = &v["payload"];
        let mut out = Vec::new();
        match v["type"].as_str() {
            Some("session_meta") => {
                self.main_seen = true;
                if let Some(cwd) = p["cwd"].as_str() {
                    self.cwd = Some(cwd.to_string());
                }
            }
            Some("turn_context") => {
                if let Some(model) = p["model"].as_str() {
                    self.model = Some(model.to_string());
                }
                if let Some(cwd) = p["cwd"].as_str() {
                    self.cwd = Some(cwd.to_string());
                }
            }
            Some("token_usage_record") => {
                self.main_seen = true;
                self.seen.last = Some(Usage {
                    model: self.model.clone().unwrap_or_default(),
                    ..codex::record_usage(p)
                });
                self.ask_pending(line, &mut out);
            }
            Some("response_item") => {
                self.main_seen = true;
                self.response_item(line, p, &mut out);
            }
            Some("event_msg") => match p["type"].as_str() {
                // A command Codex records as failed, before its output.
                Some("item_completed") => {
                    let item = &p["item"];
                    if let Some(id) = item["id"].as_str() {
                        let code = item["exit_code"].as_i64();
                        if item["status"] == "failed" || code.is_some_and(|c| c != 0) {
                            self.failed.insert(
                                id.to_string(),
                                match code {
                                    Some(c) => format!("the command exited with code {c}"),
                                    None => "the tool failed".to_string(),
                                },
                            );
                        }
                    }
                }
                Some("task_complete") => {
                    self.ask_pending(line, &mut out);
                    self.close_turn(line, &mut out);
                }
                // The user interrupted the turn: Codex runs no Stop hook for it.
                Some("turn_aborted") => {
                    self.asked.clear();
                    self.turn_open = false;
                    self.sent_back = false;
                }
                _ => {}
            },
            _ => {}
        }
        out
    }

    fn response_item(&mut self, line: usize, p: &Value, out: &mut Vec<Replayed>) {
        match p["type"].as_str() {
            Some("message") if p["role"] == "user" => {
                let text = message_text(p);
                // Codex's own context (`<environment_context>`, `<user_instructions>`), and a
                // Stop hook's reason sent on as `<hook_prompt ...>`, are not prompts.
                if text.is_empty() || text.trim_start().starts_with('<') {
                    return;
                }
                self.ask_pending(line, out);
                self.prompt(line, text, out);
            }
            Some("message") if p["role"] == "assistant" && !self.halted => {
                self.turn_open = true;
            }
            Some("function_call" | "custom_tool_call") => {
                let (Some(id), Some(name)) = (p["call_id"].as_str(), p["name"].as_str()) else {
                    return;
                };
                let (name, input) = tool(name, p);
                if !self.halted {
                    self.turn_open = true;
                }
                self.asked.push((
                    line,
                    Call {
                        id: id.to_string(),
                        name,
                        input,
                    },
                ));
            }
            Some("function_call_output" | "custom_tool_call_output") => {
                self.ask_pending(line, out);
                if let Some(id) = p["call_id"].as_str() {
                    self.output(line, id, &p["output"], out);
                }
            }
            _ => {}
        }
    }

    /// The `PreToolUse` of each call asked before its response's usage was recorded.
    pub(super) fn ask_pending(&mut self, _line: usize, out: &mut Vec<Replayed>) {
        for (line, call) in std::mem::take(&mut self.asked) {
            if self.halted {
                break;
            }
            let mut fields = Map::new();
            fields.insert("tool_name".into(), json!(call.name));
            fields.insert("tool_input".into(), call.input.clone());
            fields.insert("tool_use_id".into(), json!(call.id));
            let replayed = self.send(line, HookEvent::ToolCall, fields);
            if replayed.refused {
                self.refused.insert(call.id.clone());
            }
            self.pending.insert(
                call.id,
                Pending {
                    name: call.name,
                    input: call.input,
                },
            );
            out.push(replayed);
        }
    }

    fn output(&mut self, line: usize, id: &str, output: &Value, out: &mut Vec<Replayed>) {
        let Some(call) = self.pending.remove(id) else {
            return;
        };
        let failure = self.failed.remove(id);
        // Refused by the rules replayed: the call did not run, and no output was made.
        if self.refused.remove(id) || self.halted {
            return;
        }
        let text = match output {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        // Refused when the session was recorded (by a hook, or by Codex itself): it did not
        // run then.
        if text.starts_with("Command blocked by PreToolUse hook") || text.contains("Rejected(\"") {
            return;
        }
        let failure = failure.or_else(|| exit_failure(&text));
        let mut fields = Map::new();
        fields.insert("tool_name".into(), json!(call.name));
        fields.insert("tool_input".into(), call.input);
        fields.insert("tool_use_id".into(), json!(id));
        let event = match failure {
            Some(why) => {
                fields.insert("error".into(), json!(why));
                HookEvent::ToolFailed
            }
            None => {
                fields.insert("tool_response".into(), json!(text));
                HookEvent::ToolDone
            }
        };
        out.push(self.send(line, event, fields));
    }
}

/// A tool call as Codex's hooks name it: its shell (`exec_command`, `shell`) is `Bash` with
/// the command, `apply_patch` takes its patch as `command`; others keep their arguments.
fn tool(name: &str, p: &Value) -> (String, Value) {
    let args = match &p["arguments"] {
        Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(Value::Null),
        other => other.clone(),
    };
    match name {
        "exec_command" | "shell" | "local_shell" => {
            let command = match (&args["cmd"], &args["command"]) {
                (Value::String(c), _) | (_, Value::String(c)) => c.clone(),
                // `["bash", "-lc", "ls"]`: the script.
                (_, Value::Array(words)) => words
                    .last()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                _ => String::new(),
            };
            ("Bash".to_string(), json!({ "command": command }))
        }
        "apply_patch" => {
            let patch = p["input"]
                .as_str()
                .map(str::to_string)
                .or_else(|| args["input"].as_str().map(str::to_string))
                .unwrap_or_default();
            ("apply_patch".to_string(), json!({ "command": patch }))
        }
        _ => (
            name.to_string(),
            if args.is_object() { args } else { json!({}) },
        ),
    }
}

/// The text of a message's content items.
fn message_text(p: &Value) -> String {
    p["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A failure the output of a command says: `Process exited with code N`, N other than 0.
fn exit_failure(text: &str) -> Option<String> {
    let code = text
        .lines()
        .take(8)
        .find_map(|l| l.trim().strip_prefix("Process exited with code "))?
        .trim();
    (code != "0").then(|| format!("the command exited with code {code}"))
}

#[cfg(test)]
mod tests {
    use warden_core::{ClaudeCodeConfig, Warden};

    use super::*;
    use crate::agent::Agent;
    use crate::handler::Options;

    fn replay(warden: &Warden, lines: &[Value]) -> Vec<Replayed> {
        let config = ClaudeCodeConfig::default();
        let mut b = Backtest::new(warden, &config, Options::default(), "s").agent(Agent::Codex);
        let mut out = Vec::new();
        for l in lines {
            out.extend(b.line(l.to_string().as_bytes()));
        }
        out.extend(b.finish());
        out
    }

    fn guardrails() -> Warden {
        Warden::builder()
            .builtin_rules()
            .plugins_dir("builtin:guardrails")
            .build()
            .unwrap()
    }

    #[test]
    fn the_recorded_session_file_replays_as_codex_hooks() {
        let text = include_str!("../../../../tests/data/codex/rollout.jsonl");
        let warden = guardrails();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let out = replay(&warden, &lines);
        let events: Vec<&str> = out.iter().map(|r| &*r.payload.event_name).collect();
        assert_eq!(
            events,
            [
                "UserPromptSubmit",
                "PreToolUse",
                "PostToolUse",
                "Stop",
                "SessionEnd"
            ]
        );
        // `pytest` exited with 1: a failure, and the failing tests send the agent back.
        assert_eq!(out[1].payload.tool_name.as_deref(), Some("Bash"));
        assert_eq!(
            out[1].payload.tool_input,
            Some(json!({"command": "pytest"}))
        );
        assert_eq!(
            out[2].payload.error.as_deref(),
            Some("the command exited with code 1")
        );
        let stop = out[3].answer.as_ref().unwrap();
        assert_eq!(stop["decision"], "block", "{stop}");
        assert_eq!(out[1].payload.model.as_deref(), Some("gpt-5.5"));
    }

    #[test]
    fn a_refused_call_gets_no_output_and_a_patch_is_judged_by_its_files() {
        let warden = guardrails();
        let call = |id: &str, name: &str, item: Value| {
            let mut p = json!({"type": name, "call_id": id, "name": item["name"]});
            if let Some(o) = p.as_object_mut() {
                for (k, v) in item.as_object().unwrap() {
                    o.insert(k.clone(), v.clone());
                }
            }
            json!({"type": "response_item", "payload": p})
        };
        let lines = [
            json!({"type": "session_meta", "payload": {"cwd": "/home/ada/app"}}),
            json!({"type": "response_item", "payload": {"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Clean up."}]}}),
            call(
                "c1",
                "function_call",
                json!({"name": "exec_command",
                "arguments": "{\"cmd\": \"rm -rf /home/ada/other\"}"}),
            ),
            call(
                "c2",
                "custom_tool_call",
                json!({"name": "apply_patch",
                "input": "*** Begin Patch\n*** Update File: /home/ada/app/.codex/hooks.json\n*** End Patch\n"}),
            ),
            json!({"type": "token_usage_record", "payload": {"response_id": "resp_0",
                "usage": {"input_tokens": 100, "output_tokens": 5}}}),
            json!({"type": "response_item", "payload": {"type": "function_call_output",
                "call_id": "c1", "output": "done"}}),
            json!({"type": "event_msg", "payload": {"type": "task_complete"}}),
        ];
        let out = replay(&warden, &lines);
        let calls: Vec<&Replayed> = out
            .iter()
            .filter(|r| r.payload.event_name == "PreToolUse")
            .collect();
        assert_eq!(calls.len(), 2);
        assert!(calls.iter().all(|r| r.refused), "{calls:?}");
        assert_eq!(
            calls[1].payload.tool_input.as_ref().unwrap()[crate::codex::WRITES],
            json!(["/home/ada/app/.codex/hooks.json"])
        );
        // The refused rm's output is not replayed: it would not have run.
        assert!(out.iter().all(|r| r.payload.event_name != "PostToolUse"));
    }
}
