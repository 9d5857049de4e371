//! Backtests: an agent's record of a session (Claude Code's transcript, Codex's session file:
//! JSON Lines) turned back into the hook payloads the live hook would have been sent, in order,
//! each answered by the same code that answers the live hook ([`crate::answer`]'s handler), on
//! a session of its own. Codex's is read by `codex.rs`, Gemini CLI's by `gemini_cli.rs`;
//! Claude Code's here:
//!
//! | transcript line | hook payload |
//! | --- | --- |
//! | a prompt (`type: "user"`, text) | `Stop` for the turn before it, if it had none; `UserPromptSubmit` |
//! | a model call (`type: "assistant"`) with `tool_use` blocks | `PreToolUse` for each, its usage the call's |
//! | a model call that ends the agent's turn (`stop_reason: "end_turn"`) | `Stop` |
//! | a `tool_result` (`type: "user"`) | `PostToolUse`, or `PostToolUseFailure` when `is_error`; none for a call the rules refused |
//! | the end of the transcript | `Stop` if a turn is open, then `SessionEnd` |
//! | anything else (summaries, snapshots, meta lines, subagents' lines) | nothing |
//!
//! The usage a hook reads from the transcript is the usage of the lines read so far, as the
//! live hook reads the file as far as Claude Code has written it.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};
use warden_core::{ClaudeCodeConfig, Event, Hook, Outcome, SessionOptions, Warden};

use crate::agent::Agent;
use crate::event::HookEvent;
use crate::handler::{Handler, Options};
use crate::payload::Payload;
use crate::reply::Verdict;
use crate::transcript::{Line, Usage, Usages};

/// What one tick of a replayed event did.
#[derive(Debug, Clone, PartialEq)]
pub struct TickReport {
    /// The hook ticked.
    pub hook: Hook,
    /// The rules that fired, in order.
    pub fired: Vec<String>,
    /// The merged decision (`deny`, `ask`, `allow`, `stop`, `continue`, `rewrite`), the rule
    /// that made it and its reason.
    pub decision: Option<(&'static str, String, String)>,
    /// Whether the tick ends the session (a `stop`).
    pub stops: bool,
    /// The notifications due, as text.
    pub notifications: Vec<String>,
    /// Rules that failed, and why.
    pub errors: Vec<String>,
    /// The rules in shadow that fired, each with what it would have decided (`deny`...) and
    /// why: none of it applied.
    pub shadow: Vec<(String, Option<(&'static str, String)>)>,
    /// The event ticked, when the backtest keeps them ([`Backtest::keep_events`]).
    pub event: Option<Event>,
}

impl TickReport {
    fn of(hook: Hook, event: Option<Event>, o: &Outcome) -> TickReport {
        TickReport {
            hook,
            event,
            fired: o.fired().into_iter().map(str::to_string).collect(),
            decision: o
                .ruling
                .as_ref()
                .map(|r| (r.name(), r.rule.to_string(), r.reason.to_string())),
            stops: o.ends_session().is_some(),
            notifications: o.injected().iter().map(|n| n.message.to_string()).collect(),
            errors: o
                .errors
                .iter()
                .map(|e| match &e.rule {
                    Some(r) => format!("{r}: {}", e.error),
                    None => e.error.clone(),
                })
                .collect(),
            shadow: o
                .shadow_fired()
                .into_iter()
                .map(|rule| {
                    let decided = o
                        .shadow_decisions()
                        .find(|(r, _, _)| *r == rule)
                        .map(|(_, d, why)| (d, why.to_string()));
                    (rule.to_string(), decided)
                })
                .collect(),
        }
    }
}

/// One hook payload replayed: where in the transcript it came from, what it was, and what the
/// rules did.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// The transcript line (1-based) that made the payload; for the payloads of the end, the
    /// number of lines.
    pub line: usize,
    /// The payload, as the live hook would have been sent it.
    pub payload: Payload,
    /// Each tick it ran.
    pub ticks: Vec<TickReport>,
    /// The answer the agent would have read (`None`: an empty answer).
    pub answer: Option<Value>,
    /// Whether the answer refuses the tool call (`PreToolUse`): it would not have run.
    pub refused: bool,
    /// Whether a person would have been asked about the tool call.
    pub asked: bool,
    /// Whether the answer refuses the prompt.
    pub prompt_refused: bool,
    /// Whether the answer ends the session.
    pub stopped: bool,
    /// Whether the answer sends the agent that wanted to stop back to work.
    pub sent_back: bool,
    /// Why the line could not be replayed as a payload (a field the live hook would refuse).
    pub error: Option<String>,
}

/// A call asked for and not yet answered by its result.
struct Pending {
    name: String,
    input: Value,
}

/// A tool call of a Codex model response being read.
struct Call {
    id: String,
    name: String,
    input: Value,
}

/// The model calls read so far: what the live hook reads from the file as written so far.
#[derive(Default)]
struct Seen {
    last: Option<Usage>,
    /// The usage of the call that asked for each tool call still waiting for its result.
    calls: HashMap<String, Usage>,
}

impl Usages for Seen {
    fn last(&mut self, _: &mut Vec<String>) -> Option<Usage> {
        self.last.clone()
    }

    fn of_call(&mut self, id: &str, log: &mut Vec<String>) -> Option<Usage> {
        match self.calls.get(id) {
            Some(u) => Some(u.clone()),
            None => self.last(log),
        }
    }
}

/// One transcript replayed as its hooks, a line at a time.
pub struct Backtest<'w> {
    agent: Agent,
    warden: &'w Warden,
    config: &'w ClaudeCodeConfig,
    opts: Options,
    session: warden_core::Session,
    session_id: String,
    cwd: Option<String>,
    seen: Seen,
    pending: HashMap<String, Pending>,
    refused: HashSet<String>,
    /// The agent has worked since the last `Stop` (a prompt, a model call): a `Stop` is due
    /// when it finishes.
    turn_open: bool,
    /// The model call whose end sent the last `Stop` (one per call, however many lines
    /// Claude Code writes of it).
    stopped_at: Option<String>,
    /// The last `Stop` sent the agent back to work (the next `Stop` has `stop_hook_active`).
    sent_back: bool,
    /// The rules stopped the session, or blocked the prompt: what the transcript holds until
    /// the next prompt would not have happened, and is not replayed.
    halted: bool,
    /// A line of the main conversation was read (a file of a subagent's lines alone is not a
    /// session: it gets no `SessionEnd`).
    main_seen: bool,
    /// Lines that hold a user or model line's words but could not be read as one.
    unread: usize,
    lines: usize,
    keep_events: bool,
    /// Told of every tick's outcome, whole (a rule test checks them).
    on_tick: Option<OnTick<'w>>,
    /// Codex's calls of the model response being read, asked before its usage is recorded:
    /// their `PreToolUse` waits for it, as the live hook runs after Codex records it.
    asked: Vec<(usize, Call)>,
    /// Codex's calls that failed, by id, as its session file records them before their output.
    failed: HashMap<String, String>,
    /// Gemini CLI's tool calls asked so far, by id.
    asked_ids: HashSet<String>,
    /// The model the agent ran (Codex's session file says it once per turn).
    model: Option<String>,
}

/// What [`Backtest::on_tick`] calls.
type OnTick<'w> = Box<dyn FnMut(Hook, &Outcome) + 'w>;

impl<'w> Backtest<'w> {
    /// A backtest of one transcript, whose session is `session_id` (the file's name, usually;
    /// the lines' own `sessionId` is not used, so that two files never share a session).
    pub fn new(
        warden: &'w Warden,
        config: &'w ClaudeCodeConfig,
        opts: Options,
        session_id: &str,
    ) -> Self {
        let session = warden.session_with(SessionOptions {
            id: Some(session_id.to_string()),
            user: Some(opts.user.clone()),
            project: Some(opts.project.clone()),
            ..SessionOptions::default()
        });
        Backtest::in_session(warden, config, opts, session)
    }

    /// A backtest of one transcript in a session the caller opened (a rule test's, with its
    /// presets).
    pub fn in_session(
        warden: &'w Warden,
        config: &'w ClaudeCodeConfig,
        opts: Options,
        session: warden_core::Session,
    ) -> Self {
        let session_id = session.id().to_string();
        Backtest {
            agent: Agent::ClaudeCode,
            warden,
            config,
            opts,
            session,
            session_id,
            cwd: None,
            seen: Seen::default(),
            pending: HashMap::new(),
            refused: HashSet::new(),
            turn_open: false,
            stopped_at: None,
            sent_back: false,
            halted: false,
            main_seen: false,
            unread: 0,
            lines: 0,
            keep_events: false,
            on_tick: None,
            asked: Vec::new(),
            asked_ids: HashSet::new(),
            failed: HashMap::new(),
            model: None,
        }
    }

    /// Reads the record of `agent`: Claude Code's transcript (the default), Codex's session
    /// file, Gemini CLI's chat record.
    pub fn agent(mut self, agent: Agent) -> Self {
        self.agent = agent;
        self
    }

    /// Calls `f` with every tick's outcome, whole, as it is made.
    pub fn on_tick(mut self, f: impl FnMut(Hook, &Outcome) + 'w) -> Self {
        self.on_tick = Some(Box::new(f));
        self
    }

    /// Keeps each tick's event in its report ([`TickReport::event`]): what `warden replay
    /// --from ... --print-trace` prints.
    pub fn keep_events(mut self, keep: bool) -> Self {
        self.keep_events = keep;
        self
    }

    /// Replays one line of the transcript (its bytes, without the line's end): the payloads it
    /// makes, answered. A line that is not JSON, or of a kind Warden does not use, makes none.
    pub fn line(&mut self, text: &[u8]) -> Vec<Replayed> {
        self.lines += 1;
        let line = self.lines;
        match self.agent {
            Agent::ClaudeCode => {}
            Agent::Codex => return self.codex_line(line, text),
            Agent::GeminiCli => return self.gemini_line(line, text),
        }
        // Most of a transcript's bytes are lines of other kinds (file snapshots, attachments):
        // a line that does not even hold the words is passed over unread.
        let finder = |needle: &[u8]| memchr::memmem::find(text, needle).is_some();
        if !finder(br#""user""#) && !finder(br#""assistant""#) {
            return Vec::new();
        }
        let parsed =
            serde_json::from_slice::<Line>(text).or_else(|e| match std::str::from_utf8(text) {
                // A stray byte that is not UTF-8 (a tool's raw output) costs the line nothing else.
                Err(_) => serde_json::from_str::<Line>(&String::from_utf8_lossy(text)),
                Ok(_) => Err(e),
            });
        let Ok(mut v) = parsed else {
            self.unread += 1;
            return Vec::new();
        };
        if !matches!(v.kind.as_deref(), Some("user" | "assistant")) {
            return Vec::new();
        }
        if v.sidechain == Some(true)
            || v.meta == Some(true)
            || v.compact_summary == Some(true)
            || v.transcript_only == Some(true)
        {
            return Vec::new();
        }
        self.main_seen = true;
        if let Some(cwd) = v.cwd.take() {
            self.cwd = Some(cwd);
        }
        let mut out = Vec::new();
        match v.kind.as_deref() {
            Some("assistant") => self.model_call(line, v, &mut out),
            Some("user") => self.user(line, v, &mut out),
            _ => {}
        }
        out
    }

    /// Whether a line of the main conversation was read so far (a file with none is not a
    /// Claude Code transcript, or is a subagent's).
    pub fn is_conversation(&self) -> bool {
        self.main_seen
    }

    /// Lines that hold a user or model line's words but could not be read as one (not JSON,
    /// or fields of another shape): skipped, and counted here.
    pub fn unread(&self) -> usize {
        self.unread
    }

    /// The end of the transcript: the open turn's `Stop`, then `SessionEnd` (none for a
    /// transcript with no line of the main conversation, a subagent's file).
    pub fn finish(mut self) -> Vec<Replayed> {
        let mut out = Vec::new();
        if !self.main_seen {
            return out;
        }
        let line = self.lines;
        self.ask_pending(line, &mut out);
        self.close_turn(line, &mut out);
        self.halted = false;
        out.push(self.send(line, HookEvent::SessionEnd, Map::new()));
        out
    }

    fn model_call(&mut self, line: usize, v: Line, out: &mut Vec<Replayed>) {
        let Some(message) = v.message else {
            return;
        };
        let usage = message.usage();
        if let Some(u) = &usage {
            self.seen.last = Some(u.clone());
        }
        let id = message.id.as_deref();
        // Another line of a model call whose end already sent its Stop: nothing new.
        if id.is_some() && id == self.stopped_at.as_deref() {
            return;
        }
        if self.halted {
            return;
        }
        self.turn_open = true;
        // The model ended its turn: Claude Code runs the Stop hooks now.
        if message.stop_reason.as_deref() == Some("end_turn") {
            self.stopped_at = id.map(str::to_string);
            self.close_turn(line, out);
            return;
        }
        let Some(Value::Array(blocks)) = &message.content else {
            return;
        };
        for block in blocks {
            if self.halted {
                break;
            }
            if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                continue;
            }
            let (Some(id), Some(name)) = (
                block.get("id").and_then(Value::as_str),
                block.get("name").and_then(Value::as_str),
            ) else {
                continue;
            };
            let input = block.get("input").cloned().unwrap_or(Value::Null);
            if let Some(u) = &usage {
                self.seen.calls.insert(id.to_string(), u.clone());
            }
            let mut fields = Map::new();
            fields.insert("tool_name".into(), json!(name));
            fields.insert("tool_input".into(), input.clone());
            fields.insert("tool_use_id".into(), json!(id));
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
    }

    fn user(&mut self, line: usize, mut v: Line, out: &mut Vec<Replayed>) {
        let Some(content) = v.message.take().and_then(|m| m.content) else {
            return;
        };
        let prompt = match content {
            Value::String(s) => Some(s),
            Value::Array(blocks) => {
                let mut text = Vec::new();
                for block in &blocks {
                    match block.get("type").and_then(Value::as_str) {
                        Some("tool_result") => {
                            self.tool_result(line, &mut v.tool_use_result, block, out)
                        }
                        Some("text") => {
                            if let Some(t) = block.get("text").and_then(Value::as_str) {
                                text.push(t.to_string());
                            }
                        }
                        _ => {}
                    }
                }
                (!text.is_empty()).then(|| text.join("\n"))
            }
            _ => None,
        };
        let Some(prompt) = prompt else { return };
        if prompt.starts_with("[Request interrupted by user") {
            // The user stopped the agent: Claude Code runs no Stop hook for it.
            self.turn_open = false;
            self.sent_back = false;
            return;
        }
        if is_local_command(&prompt) {
            return;
        }
        self.prompt(line, prompt, out);
    }

    /// A prompt of the user's.
    fn prompt(&mut self, line: usize, prompt: String, out: &mut Vec<Replayed>) {
        self.close_turn(line, out);
        self.halted = false;
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        let replayed = self.send(line, HookEvent::Prompt, fields);
        // A prompt the rules block never reaches the agent.
        if replayed.prompt_refused {
            self.halted = true;
        }
        out.push(replayed);
        self.turn_open = !self.halted;
        self.sent_back = false;
    }

    fn tool_result(
        &mut self,
        line: usize,
        tool_use_result: &mut Option<Value>,
        block: &Value,
        out: &mut Vec<Replayed>,
    ) {
        let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
            return;
        };
        let Some(call) = self.pending.remove(id) else {
            return;
        };
        self.seen.calls.remove(id);
        // Refused by the rules replayed: the call did not run, and Claude Code sends no result.
        if self.refused.remove(id) || self.halted {
            return;
        }
        let text = result_text(block.get("content"));
        let failed = block.get("is_error") == Some(&Value::Bool(true));
        // Refused when the session was recorded (by a hook, or by the person): the call did
        // not run then, so there is no result to replay.
        if failed && refused_when_recorded(&text) {
            return;
        }
        let mut fields = Map::new();
        fields.insert("tool_name".into(), json!(call.name));
        fields.insert("tool_input".into(), call.input);
        fields.insert("tool_use_id".into(), json!(id));
        let event = if failed {
            fields.insert("error".into(), json!(text));
            HookEvent::ToolFailed
        } else {
            // The structured result, as Claude Code gives it to PostToolUse (a line holds one).
            let response = tool_use_result.take().unwrap_or_else(|| json!(text));
            fields.insert("tool_response".into(), response);
            HookEvent::ToolDone
        };
        out.push(self.send(line, event, fields));
    }

    /// The `Stop` of the open turn, if one is open.
    fn close_turn(&mut self, line: usize, out: &mut Vec<Replayed>) {
        if !self.turn_open || self.halted {
            return;
        }
        self.turn_open = false;
        let mut fields = Map::new();
        fields.insert("stop_hook_active".into(), json!(self.sent_back));
        let replayed = self.send(line, HookEvent::Stop, fields);
        self.sent_back = replayed.sent_back;
        out.push(replayed);
    }

    /// Answers one payload as the live hook does, on this transcript's session.
    fn send(&mut self, line: usize, event: HookEvent, mut fields: Map<String, Value>) -> Replayed {
        fields.insert("session_id".into(), json!(self.session_id));
        fields.insert(
            "hook_event_name".into(),
            json!(self.agent.event_name(event)),
        );
        if let Some(cwd) = &self.cwd {
            fields.insert("cwd".into(), json!(cwd));
        }
        if let Some(model) = &self.model {
            fields.entry("model").or_insert_with(|| json!(model));
        }
        let payload = match Payload::from_value(self.agent, Value::Object(fields)) {
            // (A failure is the agent's returned tool where it has no failure event.)
            Ok(p) => Payload {
                event: Some(event),
                ..p
            },
            Err(e) => {
                return Replayed {
                    line,
                    payload: Payload::empty(self.agent, event, &self.session_id),
                    ticks: Vec::new(),
                    answer: None,
                    refused: false,
                    asked: false,
                    prompt_refused: false,
                    stopped: false,
                    sent_back: false,
                    error: Some(e.to_string()),
                };
            }
        };
        let mut ticks = Vec::new();
        let on_tick = &mut self.on_tick;
        let mut observe = |hook: Hook, e: Option<Event>, o: &Outcome| {
            if let Some(f) = on_tick.as_mut() {
                f(hook, o);
            }
            ticks.push(TickReport::of(hook, e, o));
        };
        let mut hook = Handler {
            session: &mut self.session,
            warden: self.warden,
            config: self.config,
            opts: &self.opts,
            payload: &payload,
            usages: &mut self.seen,
            observe: Some((&mut observe, self.keep_events)),
            log: Vec::new(),
            unsaved: None,
        };
        let reply = hook.run(event);
        // The rules ended the session: the agent stops here.
        if reply.stop.is_some() {
            self.halted = true;
        }
        let refused = event == HookEvent::ToolCall && self.agent.refuses(&reply);
        let asked = event == HookEvent::ToolCall
            && !refused
            && matches!(
                reply.verdict,
                Some(Verdict::Ask { .. } | Verdict::Rewrite { allow: false, .. })
            );
        let answer = self.agent.encode(event, &payload.event_name, &reply);
        Replayed {
            line,
            payload,
            ticks,
            answer,
            refused,
            asked,
            prompt_refused: reply.refuse_prompt.is_some(),
            stopped: reply.stop.is_some(),
            sent_back: reply.keep_working.is_some(),
            error: None,
        }
    }
}

/// The text of a tool result's content: a string, or the text of its blocks.
fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Whether a failed result says the call was refused before it ran (by a hook, or by the
/// person asked), as Claude Code words it.
fn refused_when_recorded(text: &str) -> bool {
    // "PreToolUse:Bash hook error: ..." (a hook's refusal).
    text.starts_with("PreToolUse:")
        || text.starts_with("The user doesn't want to proceed with this tool use")
        || text.starts_with("Permission to use ")
}

/// A prompt line that is Claude Code's own bookkeeping of a slash command (`/clear`,
/// `/model`...), not a prompt the `UserPromptSubmit` hook sees.
fn is_local_command(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<local-command-stderr>",
        "<bash-input>",
        "<bash-stdout>",
        "<bash-stderr>",
        "<task-notification>",
        "<user-memory-input>",
    ]
    .iter()
    .any(|tag| t.starts_with(tag))
        || t.starts_with(
            "Caveat: The messages below were generated by the user while running local commands",
        )
}

#[cfg(test)]
mod tests;

mod codex;
mod gemini_cli;
