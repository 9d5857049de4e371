//! A scripted model on loopback: enough of Anthropic's Messages API (`POST /v1/messages`,
//! streamed or not) for a real Claude Code to run against it, answering each model call with
//! the next step of a script (a text, or a tool call), and keeping every request it received
//! so that a test can read what the model was told.
//!
//! Calls without tools (Claude Code's own small calls, such as a title) are answered with a
//! short text and do not take a step of the script. Anything else is a 404.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

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
    stop: Arc<std::sync::atomic::AtomicBool>,
    port: u16,
}

impl ModelServer {
    /// Starts a server on a free loopback port with `script`.
    pub fn start(script: Vec<Turn>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            script,
            ..State::default()
        }));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &s);
                });
            }
        });
        ModelServer {
            url: format!("http://127.0.0.1:{port}"),
            state,
            stop,
            port,
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

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
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

fn serve(conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    let is_messages = path.starts_with("/v1/messages") && !path.contains("count_tokens");
    if path.contains("count_tokens") {
        return respond(
            &mut out,
            "200 OK",
            "application/json",
            b"{\"input_tokens\":10}",
        );
    }
    if !is_messages {
        return respond(&mut out, "404 Not Found", "application/json", b"{}");
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
        respond(&mut out, "200 OK", "text/event-stream", events.as_bytes())
    } else {
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage});
        respond(
            &mut out,
            "200 OK",
            "application/json",
            message.to_string().as_bytes(),
        )
    }
}

fn respond(out: &mut TcpStream, status: &str, kind: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}
