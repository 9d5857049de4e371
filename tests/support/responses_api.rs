//! A scripted model on loopback: enough of OpenAI's Responses API (`POST /v1/responses`,
//! streamed) for a real Codex CLI to run against it as a custom model provider, answering each
//! model call with the next step of a script (a text, a shell command, a patch, any tool call),
//! and keeping every request it received so that a test can read what the model was told.
//!
//! Calls without tools (Codex's own small calls, such as the summary of a compaction) and the
//! calls of Codex's sub-agents (an `x-openai-subagent` header: the automatic approval reviewer)
//! are answered with a short text and do not take a step of the script. Anything else is a 404.

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
    /// A function tool call: the tool and its arguments.
    Function(String, Value),
    /// A freeform tool call (Codex's `apply_patch`): the tool and its input text.
    Custom(String, String),
    /// Several tool calls in one answer, which Codex runs side by side.
    Parallel(Vec<Step>),
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

    pub fn function(name: &str, arguments: Value) -> Turn {
        Turn {
            step: Step::Function(name.into(), arguments),
            input_tokens: 1_000,
        }
    }

    /// A shell command: Codex's `exec_command` tool.
    pub fn shell(command: &str) -> Turn {
        Turn::function("exec_command", json!({ "cmd": command }))
    }

    /// A file edit: Codex's `apply_patch` tool, given `patch` (`*** Begin Patch` ...).
    pub fn patch(patch: &str) -> Turn {
        Turn {
            step: Step::Custom("apply_patch".into(), patch.into()),
            input_tokens: 1_000,
        }
    }

    /// The tool calls of `turns` in one answer.
    pub fn parallel(turns: Vec<Turn>) -> Turn {
        Turn {
            step: Step::Parallel(turns.into_iter().map(|t| t.step).collect()),
            input_tokens: 1_000,
        }
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
    /// The provider's base URL (`.../v1`), as Codex's `base_url` takes it.
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
            url: format!("{}/v1", server.url),
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

/// The items of `request`'s input that came after the model last spoke (its last tool call or
/// answer): the results of its calls and what Codex added beside them (hook context, a hook's
/// prompt to go on working).
fn new_items(request: &Value) -> &[Value] {
    let Some(items) = request["input"].as_array() else {
        return &[];
    };
    let from_model = |i: &Value| {
        matches!(
            i["type"].as_str(),
            Some("function_call" | "custom_tool_call")
        ) || (i["type"] == "message" && i["role"] == "assistant")
    };
    let start = items.iter().rposition(from_model).map_or(0, |p| p + 1);
    &items[start..]
}

/// Every text the model was given since it last spoke in `request` (tool results, and the
/// messages Codex added beside them), joined.
pub fn last_message_text(request: &Value) -> String {
    let mut out = String::new();
    for item in new_items(request) {
        collect_text(item, &mut out);
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
        Value::Object(m) => {
            for key in ["text", "content", "output"] {
                if let Some(x) = m.get(key) {
                    collect_text(x, out);
                }
            }
        }
        _ => {}
    }
}

/// The results of the tool calls the model was given in `request`, since it last spoke, in
/// order.
pub fn tool_results(request: &Value) -> Vec<String> {
    new_items(request)
        .iter()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .map(|i| {
            let mut s = String::new();
            collect_text(&i["output"], &mut s);
            s
        })
        .collect()
}

fn serve(request: Request, out: &mut TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let subagent = request.has_header("x-openai-subagent");
    let body = request.body;
    let (method, path) = (request.method.as_str(), request.path.as_str());
    if method != "POST" || !path.trim_end_matches('/').ends_with("/responses") {
        return respond(out, "404 Not Found", "application/json", b"{}");
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let scripted = !subagent && body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let (turn, n) = {
        let mut s = state.lock().unwrap();
        if scripted {
            s.requests.push(body.clone());
            let i = s.next;
            s.next += 1;
            let turn = s
                .script
                .get(i)
                .cloned()
                .unwrap_or_else(|| Turn::text("Done."));
            (turn, i)
        } else {
            (Turn::text("ok"), s.next)
        }
    };
    let id = format!("resp_scripted_{n}_{}", std::process::id());
    let items = match &turn.step {
        Step::Parallel(steps) => steps
            .iter()
            .enumerate()
            .map(|(k, step)| output_item(step, &format!("{n}_{k}")))
            .collect(),
        step => vec![output_item(step, &n.to_string())],
    };
    let usage = json!({
        "input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + 10
    });
    let mut events = String::new();
    let mut event = |data: Value| {
        let name = data["type"].as_str().unwrap_or_default().to_string();
        events.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(json!({"type": "response.created", "response": {"id": id, "status": "in_progress"}}));
    for (k, item) in items.iter().enumerate() {
        event(json!({"type": "response.output_item.added", "output_index": k, "item": item}));
        event(json!({"type": "response.output_item.done", "output_index": k, "item": item}));
    }
    event(
        json!({"type": "response.completed", "response": {"id": id, "status": "completed",
        "output": items, "usage": usage}}),
    );
    respond(out, "200 OK", "text/event-stream", events.as_bytes())
}

/// The output item of one step; `n` names its ids.
fn output_item(step: &Step, n: &str) -> Value {
    match step {
        Step::Text(t) => json!({"type": "message", "role": "assistant",
            "id": format!("msg_scripted_{n}"), "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Step::Function(name, arguments) => json!({"type": "function_call",
            "id": format!("fc_scripted_{n}"), "call_id": format!("call_scripted_{n}"),
            "name": name, "arguments": arguments.to_string(), "status": "completed"}),
        Step::Custom(name, input) => json!({"type": "custom_tool_call",
            "id": format!("ctc_scripted_{n}"), "call_id": format!("call_scripted_{n}"),
            "name": name, "input": input, "status": "completed"}),
        Step::Parallel(_) => unreachable!("a parallel step holds tool calls"),
    }
}
