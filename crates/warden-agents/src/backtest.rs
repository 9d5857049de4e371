//! Backtests: a Claude Code transcript (the JSON Lines file Claude Code keeps of a session)
//! turned back into the hook payloads the live hook would have been sent, in order, each
//! answered by the same code that answers the live hook ([`crate::answer`]'s handler), on a
//! session of its own.
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
use crate::handler::{Handler, Options, Usages};
use crate::payload::{HookEvent, Payload};
use crate::transcript::{Line, Usage};

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
            notifications: o.inject.iter().map(|n| n.message.to_string()).collect(),
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
    /// The answer Claude Code would have read (`None`: an empty answer).
    pub answer: Option<Value>,
    /// Whether the answer refuses the tool call (`PreToolUse`): it would not have run.
    pub refused: bool,
    /// Why the line could not be replayed as a payload (a field the live hook would refuse).
    pub error: Option<String>,
}

/// A call asked for and not yet answered by its result.
struct Pending {
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
        }
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
        self.close_turn(line, out);
        self.halted = false;
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        let replayed = self.send(line, HookEvent::Prompt, fields);
        // A prompt the rules block never reaches the agent.
        if replayed
            .answer
            .as_ref()
            .is_some_and(|a| a["decision"] == "block")
        {
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
        self.sent_back = replayed
            .answer
            .as_ref()
            .is_some_and(|a| a["hookSpecificOutput"]["hookEventName"] == "Stop");
        out.push(replayed);
    }

    /// Answers one payload as the live hook does, on this transcript's session.
    fn send(&mut self, line: usize, event: HookEvent, mut fields: Map<String, Value>) -> Replayed {
        fields.insert("session_id".into(), json!(self.session_id));
        fields.insert(
            "hook_event_name".into(),
            json!(Agent::ClaudeCode.event_name(event)),
        );
        if let Some(cwd) = &self.cwd {
            fields.insert("cwd".into(), json!(cwd));
        }
        let payload = match Payload::from_value(Agent::ClaudeCode, Value::Object(fields)) {
            Ok(p) => p,
            Err(e) => {
                return Replayed {
                    line,
                    payload: Payload::empty(Agent::ClaudeCode, event, &self.session_id),
                    ticks: Vec::new(),
                    answer: None,
                    refused: false,
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
        // The rules ended the session: Claude Code stops the agent here.
        if reply.stop.is_some() {
            self.halted = true;
        }
        let refused = event == HookEvent::ToolCall && reply.refuses_call();
        let answer = Agent::ClaudeCode.encode(event, &payload.event_name, &reply);
        Replayed {
            line,
            payload,
            ticks,
            answer,
            refused,
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
mod tests {
    use super::*;

    fn assistant(id: &str, stop: &str, blocks: Value, tokens: u64) -> String {
        json!({"type": "assistant", "cwd": "/home/ada/app", "message": {
            "id": id, "model": "claude-sonnet-4-5", "role": "assistant", "content": blocks,
            "stop_reason": stop,
            "usage": {"input_tokens": tokens, "output_tokens": 10}}})
        .to_string()
    }

    fn tool_use(id: &str, command: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}})
    }

    fn result(id: &str, content: &str, is_error: bool) -> String {
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": content, "is_error": is_error}]}})
        .to_string()
    }

    fn prompt(text: &str) -> String {
        json!({"type": "user", "cwd": "/home/ada/app", "message": {"role": "user", "content": text}})
            .to_string()
    }

    /// A supervisor with one rule, written from `toml` into a folder of its own.
    fn one_rule(toml: &str) -> Warden {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rule.toml"), toml).unwrap();
        Warden::builder().rules_dir(dir.path()).build().unwrap()
    }

    fn replay(warden: &Warden, lines: &[String]) -> Vec<Replayed> {
        let config = ClaudeCodeConfig::default();
        let mut b = Backtest::new(warden, &config, Options::default(), "s1");
        let mut out: Vec<Replayed> = lines.iter().flat_map(|l| b.line(l.as_bytes())).collect();
        out.extend(b.finish());
        out
    }

    fn events(r: &[Replayed]) -> Vec<String> {
        r.iter()
            .map(|r| match &r.payload.tool_name {
                Some(t) => format!("{} {t}", r.payload.event_name),
                None => r.payload.event_name.clone(),
            })
            .collect()
    }

    #[test]
    fn a_transcript_becomes_the_live_hooks_payloads_in_order() {
        let warden = Warden::builder().builtin_rules().build().unwrap();
        let lines = [
            r#"{"type":"summary","summary":"old"}"#.to_string(),
            prompt("fix it"),
            // Two parallel calls of one model call, then their results.
            assistant(
                "m1",
                "tool_use",
                json!([tool_use("t1", "ls"), tool_use("t2", "cat x")]),
                1000,
            ),
            result("t1", "a b", false),
            result("t2", "no such file", true),
            // A subagent's line, a meta line, a slash command: not the main session's hooks.
            json!({"type": "assistant", "isSidechain": true, "message": {"id": "s", "content": [tool_use("t9", "ls")]}}).to_string(),
            json!({"type": "user", "isMeta": true, "message": {"content": "meta"}}).to_string(),
            prompt("<command-name>/clear</command-name>"),
            assistant("m2", "end_turn", json!([{"type": "text", "text": "done"}]), 1200),
            "not json".to_string(),
            prompt("and again"),
            prompt("[Request interrupted by user]"),
        ];
        let r = replay(&warden, &lines);
        assert_eq!(
            events(&r),
            [
                "UserPromptSubmit",
                "PreToolUse Bash",
                "PreToolUse Bash",
                "PostToolUse Bash",
                "PostToolUseFailure Bash",
                "Stop",
                "UserPromptSubmit",
                "SessionEnd",
            ]
        );
        assert_eq!(r[1].line, 3);
        assert_eq!(r[4].payload.error.as_deref(), Some("no such file"));
        assert_eq!(r[1].payload.cwd.as_deref(), Some("/home/ada/app"));
        // The first tool call's model call is the prompt's turn: no new turn. Each tick is
        // reported.
        assert_eq!(
            r[1].ticks.iter().map(|t| t.hook).collect::<Vec<_>>(),
            [Hook::OnToolCall]
        );
    }

    #[test]
    fn a_refused_call_has_no_result_and_a_call_refused_when_recorded_neither() {
        let warden = one_rule(
            "[rule]\nid = \"no-curl\"\ntrigger = \"on_tool_call\"\ntool = [\"Bash\"]\n\
             [condition]\nexpression = \"'curl' in tool.shell.programs\"\n\
             [action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"no downloads\"\n",
        );
        let lines = [
            prompt("go"),
            assistant(
                "m1",
                "tool_use",
                json!([tool_use("t1", "curl example.com")]),
                10,
            ),
            result("t1", "<html>", false),
            assistant("m2", "tool_use", json!([tool_use("t2", "rm -rf /")]), 20),
            result("t2", "PreToolUse:Bash hook error: no", true),
        ];
        let r = replay(&warden, &lines);
        assert_eq!(
            events(&r),
            // The transcript ends in the turn: its Stop comes at the end.
            [
                "UserPromptSubmit",
                "PreToolUse Bash",
                "PreToolUse Bash",
                "Stop",
                "SessionEnd"
            ]
        );
        assert!(r[1].refused);
        assert_eq!(
            r[1].ticks.last().unwrap().decision,
            Some(("deny", "no-curl".to_string(), "no downloads".to_string()))
        );
        assert!(!r[2].refused);
    }

    #[test]
    fn claude_codes_own_lines_are_not_prompts_and_a_call_written_twice_stops_once() {
        let warden = Warden::builder().build().unwrap();
        let summary = json!({"type": "user", "isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued..."}}).to_string();
        let lines = [
            prompt("go"),
            // One model call written as two lines (thinking, then text), both ending the turn.
            assistant(
                "m1",
                "end_turn",
                json!([{"type": "thinking", "thinking": "hm"}]),
                10,
            ),
            assistant(
                "m1",
                "end_turn",
                json!([{"type": "text", "text": "done"}]),
                10,
            ),
            summary,
            prompt("<bash-input>ls</bash-input>"),
            prompt("<task-notification>done</task-notification>"),
            // A prompt, then one with a byte that is not UTF-8.
            "{\"type\":\"user\",\"message\":{\"content\":\"caf\u{e9}\"}}".to_string(),
        ];
        let mut raw: Vec<Vec<u8>> = lines.iter().map(|l| l.clone().into_bytes()).collect();
        let mut bad = prompt("ok").into_bytes();
        let at = bad.windows(2).position(|w| w == b"ok").unwrap();
        bad[at] = 0xff;
        raw.push(bad);
        let config = ClaudeCodeConfig::default();
        let mut b = Backtest::new(&warden, &config, Options::default(), "s1");
        let mut r: Vec<Replayed> = raw.iter().flat_map(|l| b.line(l)).collect();
        assert_eq!(b.unread(), 0);
        r.extend(b.finish());
        assert_eq!(
            events(&r),
            [
                "UserPromptSubmit",
                "Stop",
                "UserPromptSubmit",
                "Stop",
                "UserPromptSubmit",
                "Stop",
                "SessionEnd"
            ]
        );
        assert_eq!(r[2].payload.prompt.as_deref(), Some("caf\u{e9}"));
        assert_eq!(r[4].payload.prompt.as_deref(), Some("\u{fffd}k"));
    }

    #[test]
    fn after_a_stop_nothing_is_replayed_until_the_next_prompt() {
        let warden = one_rule(
            "[rule]\nid = \"stop-on-cat\"\ntrigger = \"on_tool_call\"\n\
             [condition]\nexpression = \"'cat' in tool.shell.programs\"\n\
             [action]\ntype = \"decide\"\ndecision = \"stop\"\nreason = \"enough\"\n",
        );
        let lines = [
            prompt("go"),
            assistant(
                "m1",
                "tool_use",
                json!([tool_use("t1", "cat x"), tool_use("t2", "ls")]),
                10,
            ),
            result("t1", "x", false),
            result("t2", "a", false),
            assistant("m2", "tool_use", json!([tool_use("t3", "cat y")]), 20),
            result("t3", "y", false),
            assistant(
                "m3",
                "end_turn",
                json!([{"type": "text", "text": "done"}]),
                30,
            ),
            prompt("again"),
            assistant("m4", "tool_use", json!([tool_use("t4", "ls")]), 40),
        ];
        let r = replay(&warden, &lines);
        assert_eq!(
            events(&r),
            [
                "UserPromptSubmit",
                "PreToolUse Bash",
                "UserPromptSubmit",
                "PreToolUse Bash",
                "Stop",
                "SessionEnd"
            ]
        );
        assert!(r[1].refused);
        assert_eq!(r[1].answer.as_ref().unwrap()["continue"], false);
    }

    #[test]
    fn a_subagents_file_is_not_a_session() {
        let warden = Warden::builder().build().unwrap();
        let line = json!({"type": "assistant", "isSidechain": true, "message": {"id": "s", "content": [tool_use("t9", "ls")]}}).to_string();
        assert!(replay(&warden, &[line]).is_empty());
    }

    #[test]
    fn each_call_sees_the_usage_of_its_own_model_call() {
        let warden = Warden::builder().build().unwrap();
        let lines = [
            prompt("go"),
            assistant("m1", "tool_use", json!([tool_use("t1", "ls")]), 100_000),
            assistant("m2", "tool_use", json!([tool_use("t2", "ls")]), 150_000),
        ];
        let config = ClaudeCodeConfig::default();
        let mut b = Backtest::new(&warden, &config, Options::default(), "s1");
        for l in &lines {
            b.line(l.as_bytes());
        }
        // The second model call started a turn of its own.
        let turns = b.session.facts().turn.number;
        assert_eq!(turns, 2);
        let usage = b.session.facts().turn.token_usage;
        assert!((usage - 150_010.0 / 200_000.0).abs() < 1e-9, "{usage}");
    }
}
