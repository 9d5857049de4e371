//! Backtests of Gemini CLI's chat records (`~/.gemini/tmp/PROJECT/chats/session-*.jsonl`, the
//! `transcript_path` of its hooks): the messages Gemini CLI writes of a session turned back
//! into the payloads its hooks would have been sent.
//!
//! | chat record line | hook payload |
//! | --- | --- |
//! | the session's first line (`sessionId`) | nothing (it is a session) |
//! | a user message with text, not Gemini CLI's own context, not Warden's `[warden]` reason sent on | `AfterAgent` for the turn before it, if it had none; `BeforeAgent` |
//! | a model message (`type: "gemini"`) | its usage (`tokens`), for the turn it starts; `BeforeTool` for each tool call not seen yet (Gemini CLI rewrites the line when the call ran) |
//! | a model message with text and no tool call | `AfterAgent`: the agent's turn ends |
//! | a tool's response (`functionResponse` in a user message) | `AfterTool` (a failure when it reports an error or a shell command's exit code other than 0); none for a call the rules refused, or one refused when the session was recorded |
//! | `$set` lines (Gemini CLI's updates of the record) | nothing |
//! | the end of the file | `AfterAgent` if a turn is open, then `SessionEnd` |

use serde_json::{Map, Value, json};

use super::{Backtest, Pending, Replayed};
use crate::event::HookEvent;
use crate::gemini_cli;
use crate::transcript::Usage;

impl Backtest<'_> {
    pub(super) fn gemini_line(&mut self, line: usize, text: &[u8]) -> Vec<Replayed> {
        let parsed =
            serde_json::from_slice::<Value>(text).or_else(|e| match std::str::from_utf8(text) {
                Err(_) => serde_json::from_str::<Value>(&String::from_utf8_lossy(text)),
                Ok(_) => Err(e),
            });
        let Ok(v) = parsed else {
            self.unread += 1;
            return Vec::new();
        };
        let mut out = Vec::new();
        if v.get("sessionId").is_some() && v.get("kind").is_none_or(|k| k == "main") {
            self.main_seen = true;
            return out;
        }
        match v["type"].as_str() {
            Some("user") => {
                self.main_seen = true;
                self.gemini_user(line, &v, &mut out);
            }
            Some("gemini") => {
                self.main_seen = true;
                self.gemini_model(line, &v, &mut out);
            }
            _ => {}
        }
        out
    }

    fn gemini_user(&mut self, line: usize, v: &Value, out: &mut Vec<Replayed>) {
        let parts = v["content"].as_array().into_iter().flatten();
        let mut text = Vec::new();
        for part in parts {
            if let Some(r) = part.get("functionResponse") {
                self.gemini_response(line, r, out);
            } else if let Some(t) = part["text"].as_str() {
                text.push(t);
            }
        }
        let text = text.join("\n");
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with("<session_context>") {
            return;
        }
        // Warden's reason for sending the agent back, which Gemini CLI sends on as a prompt:
        // the agent goes on working.
        if trimmed.starts_with("[warden]") {
            if !self.halted {
                self.turn_open = true;
            }
            return;
        }
        self.prompt(line, text, out);
    }

    fn gemini_model(&mut self, line: usize, v: &Value, out: &mut Vec<Replayed>) {
        if let Some(tokens) = v.get("tokens") {
            let n = |k: &str| tokens[k].as_u64().unwrap_or(0);
            let cached = n("cached");
            self.seen.last = Some(Usage {
                message_id: v["id"].as_str().unwrap_or_default().to_string(),
                model: v["model"].as_str().unwrap_or_default().to_string(),
                input: n("input").saturating_sub(cached),
                cache_creation: 0,
                cache_read: cached,
                output: n("output").saturating_add(n("thoughts")),
                window: None,
            });
        }
        if self.halted {
            return;
        }
        self.turn_open = true;
        let calls: Vec<&Value> = v["toolCalls"].as_array().into_iter().flatten().collect();
        for call in &calls {
            let (Some(id), Some(name)) = (call["id"].as_str(), call["name"].as_str()) else {
                continue;
            };
            // Gemini CLI writes a model message again once its calls ran: each is asked once.
            if self.halted || !self.asked_ids.insert(id.to_string()) {
                continue;
            }
            let input = match &call["args"] {
                args @ Value::Object(_) => args.clone(),
                _ => json!({}),
            };
            let mut fields = Map::new();
            fields.insert("tool_name".into(), json!(name));
            fields.insert("tool_input".into(), input.clone());
            let replayed = self.send(line, HookEvent::ToolCall, fields);
            if replayed.refused {
                self.refused.insert(id.to_string());
            }
            self.pending.insert(
                id.to_string(),
                Pending {
                    name: name.to_string(),
                    input,
                },
            );
            out.push(replayed);
        }
        // A model message with words and no call ends the agent's turn.
        let words = v["content"].as_str().is_some_and(|c| !c.trim().is_empty());
        if calls.is_empty() && words {
            self.close_turn(line, out);
        }
    }

    fn gemini_response(&mut self, line: usize, r: &Value, out: &mut Vec<Replayed>) {
        let Some(id) = r["id"].as_str() else {
            return;
        };
        let Some(call) = self.pending.remove(id) else {
            return;
        };
        if self.refused.remove(id) || self.halted {
            return;
        }
        let response = &r["response"];
        // Refused when the session was recorded: it did not run then.
        if response["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Tool execution blocked"))
        {
            return;
        }
        // As Gemini CLI gives it to `AfterTool`.
        let tool_response = match (&response["output"], &response["error"]) {
            (Value::String(o), _) => json!({ "llmContent": o }),
            (_, error @ Value::String(_)) => json!({ "llmContent": "", "error": error }),
            _ => json!({ "llmContent": response.to_string() }),
        };
        let mut fields = Map::new();
        fields.insert("tool_name".into(), json!(call.name));
        fields.insert("tool_input".into(), call.input);
        let event = match gemini_cli::failure(&call.name, &tool_response) {
            Some(why) => {
                fields.insert("error".into(), json!(why));
                HookEvent::ToolFailed
            }
            None => HookEvent::ToolDone,
        };
        fields.insert("tool_response".into(), tool_response);
        out.push(self.send(line, event, fields));
    }
}

#[cfg(test)]
mod tests {
    use warden_core::{ClaudeCodeConfig, Warden};

    use super::*;
    use crate::agent::Agent;
    use crate::handler::Options;

    #[test]
    fn the_recorded_chat_replays_as_gemini_cli_hooks() {
        let text = include_str!("../../../../tests/data/gemini-cli/chat.jsonl");
        let warden = Warden::builder()
            .builtin_rules()
            .plugins_dir("builtin:guardrails")
            .build()
            .unwrap();
        let config = ClaudeCodeConfig::default();
        let mut b =
            Backtest::new(&warden, &config, Options::default(), "s").agent(Agent::GeminiCli);
        let mut out = Vec::new();
        for l in text.lines() {
            out.extend(b.line(l.as_bytes()));
        }
        out.extend(b.finish());
        let events: Vec<&str> = out.iter().map(|r| &*r.payload.event_name).collect();
        assert_eq!(
            events,
            [
                "BeforeAgent",
                "BeforeTool",
                "AfterTool",
                "AfterAgent",
                "SessionEnd"
            ]
        );
        assert_eq!(out[0].payload.prompt.as_deref(), Some("Test"));
        assert_eq!(
            out[1].payload.tool_name.as_deref(),
            Some("run_shell_command")
        );
        // `exit 1`: a failure (not of a test command: the agent is not sent back).
        assert_eq!(out[2].payload.event, Some(HookEvent::ToolFailed));
        assert_eq!(
            out[2].payload.error.as_deref(),
            Some("the command exited with code 1")
        );
        assert!(!out[3].sent_back, "{:?}", out[3].answer);
    }
}
