//! A scripted model on loopback: enough of Anthropic's Messages API (`POST /v1/messages`,
//! streamed or not) for a real Claude Code to run against it, answering each model call with
//! the next step of a script (a text, or a tool call), and keeping every request it received
//! so that a test can read what the model was told.
//!
//! Calls without tools (Claude Code's own small calls, such as a title) are answered with a
//! short text and do not take a step of the script. Anything else is a 404.

#![allow(dead_code)] // each test file uses its own part

use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

#[path = "loopback.rs"]
mod loopback;

use loopback::{Loopback, Request, respond};

/// One answer of the scripted model.
#[derive(Debug, Clone)]
pub enum Step {
    /// A final answer.
    Text(String),
    /// A tool call: the tool and its input.
    Tool(String, Value),
}

/// A step with the input tokens the model reports for it.
#[derive(Debug, Clone)]
pub struct Turn {
    pub step: Step,
    pub input_tokens: u64,
}

impl Turn {
    pub fn text(text: &str) -> Turn {
        Turn {
            step: Step::Text(text.into()),
            input_tokens: 1_000,
        }
    }

    pub fn tool(name: &str, input: Value) -> Turn {
        Turn {
            step: Step::Tool(name.into(), input),
            input_tokens: 1_000,
        }
    }

    pub fn bash(command: &str) -> Turn {
        Turn::tool(
            "Bash",
            json!({ "command": command, "description": "as scripted" }),
        )
    }

    /// The same, with the model reporting `tokens` of input.
    pub fn tokens(mut self, tokens: u64) -> Turn {
        self.input_tokens = tokens;
        self
    }
}

#[derive(Default)]
struct State {
    script: Vec<Turn>,
    next: usize,
    /// Every model call's request body, in order (the scripted ones).
    requests: Vec<Value>,
}

/// The server: it runs until dropped.
pub struct ModelServer {
    pub url: String,
    state: Arc<Mutex<State>>,
    _server: Loopback,
}

impl ModelServer {
    /// Starts a server on a free loopback port with `script`.
    pub fn start(script: Vec<Turn>) -> ModelServer {
        let state = Arc::new(Mutex::new(State {
            script,
            ..State::default()
        }));
        let s = state.clone();
        let server = Loopback::start(move |request, out| serve(request, out, &s));
        ModelServer {
            url: server.url.clone(),
            state,
            _server: server,
        }
    }

    /// The scripted model calls received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many steps of the script were taken.
    pub fn taken(&self) -> usize {
        self.state.lock().unwrap().next
    }
}

/// Every text the model was given in the last message of `request` (tool results and the
/// text blocks beside them), joined.
pub fn last_message_text(request: &Value) -> String {
    let Some(last) = request["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    let mut out = String::new();
    collect_text(&last["content"], &mut out);
    out
}

fn collect_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        Value::Object(m) => {
            for key in ["text", "content"] {
                if let Some(x) = m.get(key) {
                    collect_text(x, out);
                }
            }
        }
        _ => {}
    }
}

/// The tool results the model was given in `request`'s last message, in order.
pub fn tool_results(request: &Value) -> Vec<String> {
    let Some(last) = request["messages"].as_array().and_then(|m| m.last()) else {
        return Vec::new();
    };
    last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let mut s = String::new();
            collect_text(&b["content"], &mut s);
            s
        })
        .collect()
}

fn serve(request: Request, out: &mut TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let body = request.body;
    let path = request.path.as_str();
    let is_messages = path.starts_with("/v1/messages") && !path.contains("count_tokens");
    if path.contains("count_tokens") {
        return respond(out, "200 OK", "application/json", b"{\"input_tokens\":10}");
    }
    if !is_messages {
        return respond(out, "404 Not Found", "application/json", b"{}");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let scripted = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let turn = {
        let mut s = state.lock().unwrap();
        if scripted {
            s.requests.push(body.clone());
            let i = s.next;
            s.next += 1;
            s.script
                .get(i)
                .cloned()
                .unwrap_or_else(|| Turn::text("Done."))
        } else {
            Turn::text("ok")
        }
    };
    let n = state.lock().unwrap().next;
    let id = format!("msg_scripted_{n}_{}", std::process::id());
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_string();
    let (content, stop) = match &turn.step {
        Step::Text(t) => (json!([{ "type": "text", "text": t }]), "end_turn"),
        Step::Tool(name, input) => (
            json!([{ "type": "tool_use", "id": format!("toolu_scripted_{n}"), "name": name, "input": input }]),
            "tool_use",
        ),
    };
    let usage = json!({
        "input_tokens": turn.input_tokens, "output_tokens": 10,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0
    });
    if body["stream"] == true {
        let mut events = String::new();
        let mut event = |name: &str, data: Value| {
            events.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        };
        let mut start_usage = usage.clone();
        start_usage["output_tokens"] = json!(1);
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": id, "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": start_usage}}),
        );
        for (i, block) in content.as_array().unwrap().iter().enumerate() {
            if block["type"] == "text" {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]}}),
                );
            } else {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "tool_use", "id": block["id"],
                            "name": block["name"], "input": {}}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta",
                            "partial_json": block["input"].to_string()}}),
                );
            }
            event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": i}),
            );
        }
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}),
        );
        event("message_stop", json!({"type": "message_stop"}));
        respond(out, "200 OK", "text/event-stream", events.as_bytes())
    } else {
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage});
        respond(
            out,
            "200 OK",
            "application/json",
            message.to_string().as_bytes(),
        )
    }
}
