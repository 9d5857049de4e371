//! A scripted model on loopback: enough of Google's Gemini API
//! (`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`, `:generateContent`,
//! `:countTokens`) for a real Gemini CLI to run against it (`GOOGLE_GEMINI_BASE_URL`),
//! answering each model call with the next step of a script (a text, or a function call), and
//! keeping every request it received so that a test can read what the model was told.
//!
//! Calls without tools (Gemini CLI's own small calls, such as its model router's, which a
//! test avoids by naming the model) are answered with a short text and do not take a step of
//! the script. Anything else is a 404.

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
    /// A function call: the tool and its arguments.
    Call(String, Value),
}

/// A step with the prompt tokens the model reports for it (`usageMetadata.promptTokenCount`).
#[derive(Debug, Clone)]
pub struct Turn {
    pub step: Step,
    pub prompt_tokens: u64,
}

impl Turn {
    pub fn text(text: &str) -> Turn {
        Turn {
            step: Step::Text(text.into()),
            prompt_tokens: 1_000,
        }
    }

    pub fn call(name: &str, args: Value) -> Turn {
        Turn {
            step: Step::Call(name.into(), args),
            prompt_tokens: 1_000,
        }
    }

    /// A call of Gemini CLI's shell tool.
    pub fn shell(command: &str) -> Turn {
        Turn::call(
            "run_shell_command",
            json!({ "command": command, "description": "as scripted" }),
        )
    }

    /// The same, with the model reporting `tokens` of prompt.
    pub fn tokens(mut self, tokens: u64) -> Turn {
        self.prompt_tokens = tokens;
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

/// Every text the model was given in the last content of `request` (its text parts and the
/// function responses, output or error), joined.
pub fn last_content_text(request: &Value) -> String {
    let Some(last) = request["contents"].as_array().and_then(|c| c.last()) else {
        return String::new();
    };
    let mut out = String::new();
    for part in last["parts"].as_array().into_iter().flatten() {
        if let Some(text) = part["text"].as_str() {
            out.push_str(text);
            out.push('\n');
        }
        collect_text(&part["functionResponse"]["response"], &mut out);
    }
    out
}

fn collect_text(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|i| collect_text(i, out)),
        Value::Object(m) => m.values().for_each(|x| collect_text(x, out)),
        _ => {}
    }
}

/// The function responses the model was given in `request`'s last content, in order: each
/// its `output` or its `error`.
pub fn function_responses(request: &Value) -> Vec<String> {
    let Some(last) = request["contents"].as_array().and_then(|c| c.last()) else {
        return Vec::new();
    };
    last["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p.get("functionResponse").is_some())
        .map(|p| {
            let mut s = String::new();
            collect_text(&p["functionResponse"]["response"], &mut s);
            s
        })
        .collect()
}

fn serve(request: Request, out: &mut TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let body = request.body;
    let path = request.path.as_str();
    if !path.starts_with("/v1beta/models/") {
        return respond(out, "404 Not Found", "application/json", b"{}");
    }
    if path.contains(":countTokens") {
        return respond(out, "200 OK", "application/json", b"{\"totalTokens\":10}");
    }
    let streamed = path.contains(":streamGenerateContent");
    if !streamed && !path.contains(":generateContent") {
        return respond(out, "404 Not Found", "application/json", b"{}");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let scripted = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["functionDeclarations"].is_array()));
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
    let part = match &turn.step {
        Step::Text(t) => json!({ "text": t }),
        Step::Call(name, args) => json!({ "functionCall": { "name": name, "args": args } }),
    };
    let response = json!({
        "candidates": [{
            "content": { "role": "model", "parts": [part] },
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": turn.prompt_tokens,
            "candidatesTokenCount": 10,
            "totalTokenCount": turn.prompt_tokens + 10
        },
        "modelVersion": "gemini-2.5-pro",
        "responseId": format!("scripted_{n}_{}", std::process::id()),
    });
    if streamed {
        // One server-sent event holds the whole answer (a streamed answer may have one chunk).
        let events = format!("data: {response}\r\n\r\n");
        respond(out, "200 OK", "text/event-stream", events.as_bytes())
    } else {
        respond(
            out,
            "200 OK",
            "application/json",
            response.to_string().as_bytes(),
        )
    }
}
