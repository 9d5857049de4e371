//! The translation of one payload into ticks of a session and of their outcomes into a
//! [`Reply`], for every agent: the one mapping of the agents' protocols, used by the hook
//! (`answer`), the service and backtests. Token usage is read through
//! [`Usages`](crate::transcript::Usages): Claude Code's transcript as written so far (live),
//! the lines of a transcript read so far (a backtest), Codex's session file, or what Gemini CLI
//! reported at `AfterModel` ([`Reported`]).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_core::{ClaudeCodeConfig, Decision, Event, Hook, Outcome, Proceed, Session, Warden};

use crate::agent::Agent;
use crate::event::HookEvent;
use crate::payload::Payload;
use crate::reply::{Reply, Verdict};
use crate::transcript::{self, Usage, Usages, context_window, last_usage, usage_of_call};

/// Who the hook acts for, and where.
#[derive(Debug, Clone)]
pub struct Options {
    /// The user (for users' choices and plugin state).
    pub user: String,
    /// The project id.
    pub project: String,
    /// The project's folder (`$CLAUDE_PROJECT_DIR`, `$GEMINI_PROJECT_DIR`), else the
    /// payload's `cwd`.
    pub project_dir: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            user: warden_core::DEFAULT_ID.to_string(),
            project: warden_core::DEFAULT_ID.to_string(),
            project_dir: None,
        }
    }
}

/// How often a hook looks again for the model call of its tool call in the transcript.
pub(crate) const TRANSCRIPT_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// The session's memory of the agent, in its host data (the keys are Claude Code's, from
/// before there were other agents, so that saved sessions read on): the model call the current turn is
/// bound to (`null` after a prompt: the turn it started has no call yet), and how many times in
/// a row the agent was sent back to work.
const TURN_CALL: &str = "claude_code.turn_model_call";
const CONTINUES: &str = "claude_code.continues";

/// What Warden sent an agent back to work with (Gemini CLI sends it on as a new prompt, which
/// is not the user's: the count of continues goes on).
const SENT_BACK: &str = "agent.sent_back";

/// Context for the model from a tool call that ran, kept for its `AfterTool` (Gemini CLI reads
/// context from the hooks after a tool, not before).
const PENDING_CONTEXT: &str = "agent.pending_context";

/// The last model call an agent reported in a hook of its own (Gemini CLI's `AfterModel`):
/// its id, model and token usage.
const MODEL_CALL: &str = "agent.model_call";

/// The live transcript, read from its file.
pub(crate) struct TranscriptFile<'p> {
    pub(crate) path: Option<&'p str>,
    pub(crate) wait: std::time::Duration,
}

impl Usages for TranscriptFile<'_> {
    fn last(&mut self, log: &mut Vec<String>) -> Option<Usage> {
        let path = self.path?;
        transcript_read(path, last_usage(Path::new(path)), log)
    }

    /// Claude Code writes its transcript a little after it runs the call's hooks (it flushes
    /// every 100 ms), so the hook waits for that call to be written, at most `[claude_code]
    /// transcript_wait_ms`; then it goes on with the last call written, and says so in the
    /// log. So the same conversation gives the same turns every time.
    fn of_call(&mut self, id: &str, log: &mut Vec<String>) -> Option<Usage> {
        let path = self.path?;
        let deadline = std::time::Instant::now() + self.wait;
        loop {
            match usage_of_call(Path::new(path), id) {
                Ok(Some(u)) => return Some(u),
                // Not written yet (or the transcript not made yet: the first prompt's).
                Ok(None) | Err(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(TRANSCRIPT_POLL);
                }
                Ok(None) => {
                    log.push(format!(
                        "warden: the transcript did not show the model call of tool call {id} within {} ms; its turn is read from the last call written",
                        self.wait.as_millis()
                    ));
                    return self.last(log);
                }
                Err(e) => return transcript_read(path, Err(e), log),
            }
        }
    }
}

/// What a read of the transcript gave: a transcript that does not exist yet (Claude Code
/// makes it after the first prompt) is no news; any other failure is logged.
fn transcript_read(
    path: &str,
    read: std::io::Result<Option<Usage>>,
    log: &mut Vec<String>,
) -> Option<Usage> {
    match read {
        Ok(u) => u,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            log.push(format!(
                "warden: the transcript {path} could not be read: {e}"
            ));
            None
        }
    }
}

/// The model calls as the agent reported them to its hooks, kept in the session (Gemini CLI's
/// `AfterModel` gives each call's usage exactly, so no transcript is read).
pub(crate) struct Reported(pub(crate) Option<Usage>);

impl Reported {
    /// The last call the session's host data holds.
    pub(crate) fn of(session: &Session) -> Reported {
        let u = session.host_data().get(MODEL_CALL);
        let field = |k: &str| u.and_then(|u| u.get(k));
        let text = |k: &str| {
            field(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let count = |k: &str| field(k).and_then(Value::as_u64).unwrap_or(0);
        Reported(u.map(|_| Usage {
            message_id: text("id"),
            model: text("model"),
            input: count("input"),
            cache_creation: 0,
            cache_read: count("cache_read"),
            output: count("output"),
            window: None,
        }))
    }
}

impl Usages for Reported {
    fn last(&mut self, _: &mut Vec<String>) -> Option<Usage> {
        self.0.clone()
    }

    fn of_call(&mut self, _: &str, log: &mut Vec<String>) -> Option<Usage> {
        self.last(log)
    }
}

impl Reply {
    /// The reply with the context kept from its tool call before its own.
    fn with_pending(mut self, hook: &mut Handler<'_>) -> Reply {
        if let Some(pending) = hook.take_pending() {
            self.context = Some(match self.context {
                Some(own) => format!("{pending}\n\n{own}"),
                None => pending,
            });
        }
        self
    }
}

/// What a backtest is told of each tick: the hook, the event (when it keeps them), the outcome.
pub(crate) type Observer<'a> = &'a mut dyn FnMut(Hook, Option<Event>, &Outcome);

pub(crate) struct Handler<'a> {
    pub(crate) session: &'a mut Session,
    pub(crate) warden: &'a Warden,
    pub(crate) config: &'a ClaudeCodeConfig,
    pub(crate) opts: &'a Options,
    pub(crate) payload: &'a Payload,
    /// Where the model calls' usage is read.
    pub(crate) usages: &'a mut dyn Usages,
    /// Told of every tick, its event (when asked for) and its outcome (a backtest reports
    /// them).
    pub(crate) observe: Option<(Observer<'a>, bool)>,
    pub(crate) log: Vec<String>,
    /// Why a tick of this event could not be saved, if one could not.
    pub(crate) unsaved: Option<String>,
}

impl Handler<'_> {
    /// Ticks the session for `event` and decides Warden's reply (in no agent's format yet).
    pub(crate) fn run(&mut self, event: HookEvent) -> Reply {
        let p = self.payload;
        match event {
            HookEvent::SessionStart => Reply::default(),
            HookEvent::Prompt if p.agent == Agent::GeminiCli && self.is_sent_back() => {
                self.session.host_data_mut().remove(SENT_BACK);
                self.save();
                Reply::default()
            }
            HookEvent::Prompt => {
                let host = self.session.host_data_mut();
                host.remove(SENT_BACK);
                host.insert(CONTINUES.into(), json!(0));
                host.insert(TURN_CALL.into(), Value::Null);
                let usage = self.usage();
                let query = self.tick(
                    Hook::OnQueryStart,
                    Event::query(p.prompt.clone().unwrap_or_default()),
                );
                let turn = query
                    .refused()
                    .is_none()
                    .then(|| self.tick(Hook::OnTurnStart, self.turn_event(usage.as_ref())));
                let outcomes: Vec<&Outcome> =
                    std::iter::once(&query).chain(turn.as_ref()).collect();
                let mut reply = self.prompt_reply(&outcomes);
                // A rule file that does not load is worth saying once per prompt, not at every
                // tool call (this compiles every rule, to find them all).
                if let Some(note) = broken_rules(self.warden) {
                    self.log.push(note.clone());
                    reply.messages.push(note);
                }
                reply
            }
            HookEvent::ToolCall => {
                let usage = self.usage_of_call();
                let turn = self.enter_turn(usage.as_ref());
                let mut event = Event::tool_call(
                    p.tool_name.clone().unwrap_or_default(),
                    p.tool_input.clone().unwrap_or(Value::Null),
                );
                // The call sees the context as the model call that made it left it.
                event.turn = self.turn_event(usage.as_ref()).turn;
                let call = self.tick(Hook::OnToolCall, event);
                let mut reply = self.tool_call_reply(turn.as_ref(), &call);
                if p.agent == Agent::GeminiCli
                    && !p.agent.refuses(&reply)
                    && let Some(context) = reply.context.take()
                {
                    // Calls made side by side: each one's context is kept.
                    let host = self.session.host_data_mut();
                    let context = match host.get(PENDING_CONTEXT).and_then(Value::as_str) {
                        Some(before) => format!("{before}\n\n{context}"),
                        None => context,
                    };
                    host.insert(PENDING_CONTEXT.into(), json!(context));
                    self.save();
                }
                reply
            }
            HookEvent::ToolDone => {
                let mut e = Event::tool_complete(
                    p.tool_name.clone().unwrap_or_default(),
                    p.tool_response.clone().unwrap_or(Value::Null),
                );
                if let (Some(tool), Some(input)) = (&mut e.tool, &p.tool_input) {
                    tool.arguments = input.clone();
                }
                let o = self.tick(Hook::OnToolComplete, e);
                self.context_reply(&[&o]).with_pending(self)
            }
            HookEvent::ToolFailed => {
                let mut e = Event::tool_failure(
                    p.tool_name.clone().unwrap_or_default(),
                    p.error.clone().unwrap_or_else(|| "the tool failed".into()),
                );
                if let (Some(tool), Some(input)) = (&mut e.tool, &p.tool_input) {
                    tool.arguments = input.clone();
                }
                let o = self.tick(Hook::OnToolFailure, e);
                self.context_reply(&[&o]).with_pending(self)
            }
            HookEvent::Stop => {
                let usage = self.usage();
                let turn = self.enter_turn(usage.as_ref());
                let o = self.tick(
                    Hook::OnTurnEnd,
                    self.turn_event(usage.as_ref()).final_turn(),
                );
                let reply = self.stop_reply(turn.as_ref(), &o);
                // How many times in a row the agent was sent back changed after the tick.
                if let Err(e) = self.session.save() {
                    self.log
                        .push(format!("warden: the session could not be saved: {e}"));
                }
                reply
            }
            HookEvent::SubagentStop => {
                self.record_subagent();
                Reply::default()
            }
            HookEvent::ModelResponse => {
                self.record_model_call();
                Reply::default()
            }
            HookEvent::SessionEnd => {
                let o = self.tick(Hook::OnSessionEnd, Event::new());
                let mut reply = Reply::default();
                self.common(&[&o], &mut reply);
                if let Some(text) = o.rendered() {
                    reply.messages.push(text.to_string());
                }
                reply
            }
        }
    }

    /// Ticks the session, with the user and project of the hook.
    fn tick(&mut self, hook: Hook, mut event: Event) -> Outcome {
        let root = self
            .opts
            .project_dir
            .as_ref()
            .map(|p| p.display().to_string())
            .or_else(|| self.payload.cwd.clone());
        event = event
            .with_user(self.opts.user.clone())
            .with_project(self.opts.project.clone());
        if let Some(root) = root {
            event = event.with_project_root(root);
        }
        let kept = match &self.observe {
            Some((_, true)) => Some(event.clone()),
            _ => None,
        };
        let outcome = self.session.tick(hook, event);
        if let Some((observe, _)) = self.observe.as_mut() {
            observe(hook, kept, &outcome);
        }
        if let Some(why) = &outcome.unsaved {
            self.unsaved.get_or_insert_with(|| why.clone());
        }
        // (A tick that was not saved is logged once, by `answer`.)
        for e in outcome
            .errors
            .iter()
            .filter(|e| outcome.unsaved.as_deref() != Some(e.error.as_str()))
        {
            let rule = e.rule.as_deref().unwrap_or("warden");
            self.log.push(format!("warden: {rule}: {}", e.error));
        }
        outcome
    }

    /// The last model call's usage.
    fn usage(&mut self) -> Option<transcript::Usage> {
        self.usages.last(&mut self.log)
    }

    /// The usage of the model call that asked for this tool call (the last call's when the
    /// payload does not say which).
    fn usage_of_call(&mut self) -> Option<transcript::Usage> {
        match self
            .payload
            .tool_use_id
            .as_deref()
            .filter(|id| !id.is_empty())
        {
            Some(id) => self.usages.of_call(id, &mut self.log),
            None => self.usages.last(&mut self.log),
        }
    }

    /// A model call the transcript shows and no turn was bound to yet starts a turn
    /// (`on_turn_start`), unless the turn a prompt started has no call yet: then the call is
    /// that turn's. Parallel tool calls of one model call are one turn.
    fn enter_turn(&mut self, usage: Option<&transcript::Usage>) -> Option<Outcome> {
        let id = usage
            .map(|u| u.message_id.as_str())
            .filter(|id| !id.is_empty())?;
        let bound = self.session.host_data().get(TURN_CALL).cloned();
        self.session
            .host_data_mut()
            .insert(TURN_CALL.into(), json!(id));
        match bound {
            Some(Value::String(prev)) if prev == id => None,
            // The turn the prompt started: this is its model call.
            Some(Value::Null) => None,
            _ => Some(self.tick(Hook::OnTurnStart, self.turn_event(usage))),
        }
    }

    /// A turn event carrying the token usage of the last model call, against its model's
    /// context window.
    fn turn_event(&self, usage: Option<&transcript::Usage>) -> Event {
        let Some(u) = usage else {
            return Event::new();
        };
        let window = u
            .window
            .unwrap_or_else(|| context_window(&u.model, &self.config.context_windows));
        // Past the window is a fact to report (the window table may be behind the model).
        let share = (u.total() as f64 / window as f64).min(warden_core::MAX_SHARE);
        Event::new()
            .with_token_usage(share)
            .with_context_usage(share)
            .with_context_window(window)
    }

    /// What every answer carries: the session stops (`continue: false`), and failures of
    /// Warden itself the user should know of.
    fn common(&self, outcomes: &[&Outcome], reply: &mut Reply) {
        for o in outcomes {
            if let Proceed::Stop { reason } = o.proceed() {
                reply.stop = Some(reason.to_string());
            }
            // (A tick that was not saved is said once, by `answer`.)
            for e in o
                .errors
                .iter()
                .filter(|e| e.rule.is_none() && o.unsaved.as_deref() != Some(e.error.as_str()))
            {
                reply.notes.push(format!("Warden: {}", e.error));
            }
        }
    }

    /// The notifications of an event's ticks, written as one block.
    fn context_of(&self, outcomes: &[&Outcome]) -> Option<String> {
        match outcomes {
            [one] => one.rendered().map(str::to_string),
            _ => self
                .warden
                .render(outcomes.iter().flat_map(|o| o.injected())),
        }
    }

    fn context_reply(&self, outcomes: &[&Outcome]) -> Reply {
        let mut reply = Reply::default();
        self.common(outcomes, &mut reply);
        reply.context = self.context_of(outcomes);
        reply
    }

    fn prompt_reply(&self, outcomes: &[&Outcome]) -> Reply {
        let mut reply = Reply::default();
        self.common(outcomes, &mut reply);
        if let Some(reason) = outcomes[0].refused() {
            reply.refuse_prompt = Some(said(reason, outcomes[0].ruling.as_ref()));
        } else {
            reply.context = self.context_of(outcomes);
        }
        reply
    }

    fn tool_call_reply(&self, turn: Option<&Outcome>, call: &Outcome) -> Reply {
        let all: Vec<&Outcome> = turn.into_iter().chain(std::iter::once(call)).collect();
        let mut reply = Reply::default();
        self.common(&all, &mut reply);
        let rule = call.ruling.as_ref().map(|r| r.rule.to_string());
        reply.verdict = match call.proceed() {
            // A stop refuses the call too (`common` ends the session): an agent runs a call
            // whose hook only says `continue: false`.
            Proceed::No { reason } | Proceed::Stop { reason } => {
                Some(Verdict::Deny(said(reason, call.ruling.as_ref())))
            }
            Proceed::Ask { reason, input } => Some(Verdict::Ask {
                reason: reason.to_string(),
                input: input.cloned(),
                rule,
            }),
            Proceed::WithInput(input) => Some(Verdict::Rewrite {
                reason: format!(
                    "Warden ({}) rewrote this call's input",
                    rule.as_deref().unwrap_or("a rule")
                ),
                input: input.clone(),
                allow: self.config.allow,
            }),
            Proceed::Yes
                if self.config.allow
                    && call
                        .ruling
                        .as_ref()
                        .is_some_and(|r| r.decision == Some(Decision::Allow)) =>
            {
                Some(Verdict::Allow {
                    reason: call.ruling.as_ref().map(|r| r.reason.to_string()),
                })
            }
            Proceed::Yes | Proceed::KeepWorking { .. } => None,
        };
        reply.context = self.context_of(&all);
        reply
    }

    fn stop_reply(&mut self, turn: Option<&Outcome>, o: &Outcome) -> Reply {
        let mut reply = Reply::default();
        let all: Vec<&Outcome> = turn.into_iter().chain(std::iter::once(o)).collect();
        self.common(&all, &mut reply);
        let context = self.context_of(&all);
        let continues = self
            .session
            .host_data()
            .get(CONTINUES)
            .and_then(Value::as_u64)
            .unwrap_or(0);
        match o.proceed() {
            Proceed::KeepWorking { reason } => {
                // Sent back this many times in a row, by the session's count; Claude Code also
                // says the agent is continuing (`stop_hook_active`), so a count left over
                // from a turn whose prompt hook did not run does not let it stop early.
                let continuing =
                    self.payload.stop_hook_active || self.payload.agent != Agent::ClaudeCode;
                let spent = continuing && continues >= u64::from(self.config.max_continues);
                if spent {
                    reply.messages.push(format!(
                        "Warden let the agent stop: it had sent it back {continues} times in a row (`[claude_code] max_continues`). It asked: {reason}"
                    ));
                    reply.messages.extend(context);
                    let host = self.session.host_data_mut();
                    host.insert(CONTINUES.into(), json!(0));
                    host.remove(SENT_BACK);
                } else {
                    let mut why = format!("[warden] {reason}");
                    if let Some(context) = &context {
                        why.push_str("\n\n");
                        why.push_str(context);
                    }
                    // Only Gemini CLI sends the reason on as a prompt.
                    if self.payload.agent == Agent::GeminiCli {
                        self.session
                            .host_data_mut()
                            .insert(SENT_BACK.into(), json!(why));
                    }
                    reply.keep_working = Some(why);
                    self.session
                        .host_data_mut()
                        .insert(CONTINUES.into(), json!(continues + 1));
                }
            }
            _ => {
                let host = self.session.host_data_mut();
                host.insert(CONTINUES.into(), json!(0));
                host.remove(SENT_BACK);
                reply.messages.extend(context);
            }
        }
        reply
    }

    /// Whether the prompt is what Warden sent the agent back to work with, not the user's.
    fn is_sent_back(&self) -> bool {
        let sent = self
            .session
            .host_data()
            .get(SENT_BACK)
            .and_then(Value::as_str);
        sent.is_some_and(|s| self.payload.prompt.as_deref().map(str::trim) == Some(s.trim()))
    }

    /// Saves what changed in the session after its ticks.
    fn save(&mut self) {
        if let Err(e) = self.session.save() {
            self.log
                .push(format!("warden: the session could not be saved: {e}"));
        }
    }

    /// The context kept from the tool call (see [`PENDING_CONTEXT`]), taken.
    fn take_pending(&mut self) -> Option<String> {
        let pending = self.session.host_data_mut().remove(PENDING_CONTEXT)?;
        self.save();
        pending.as_str().map(str::to_string)
    }

    /// A model call returned: its usage is kept in the session, for the turn it starts (at
    /// the next tool call or stop) and the context it fills.
    fn record_model_call(&mut self) {
        let Some(u) = &self.payload.usage else {
            return;
        };
        // A call without an id of its own is told from the one before by a count.
        let id = if u.message_id.is_empty() {
            let before = Reported::of(self.session).0.map(|u| u.message_id);
            let n = before
                .and_then(|id| id.strip_prefix("call-")?.parse::<u64>().ok())
                .unwrap_or(0);
            format!("call-{}", n.wrapping_add(1))
        } else {
            u.message_id.clone()
        };
        self.session.host_data_mut().insert(
            MODEL_CALL.into(),
            json!({
                "id": id,
                "model": u.model,
                "input": u.input,
                "cache_read": u.cache_read,
                "output": u.output,
            }),
        );
        if let Err(e) = self.session.save() {
            self.log
                .push(format!("warden: the session could not be saved: {e}"));
        }
    }

    /// A subagent finished: a row in the execution log, not a turn of the main session.
    fn record_subagent(&mut self) {
        let record = warden_core::ExecutionRecord {
            user_id: self.opts.user.clone(),
            project_id: self.opts.project.clone(),
            session_id: Some(self.payload.session_id.clone()),
            rule_id: format!("{}/subagent", self.payload.agent.name()),
            trigger: "SubagentStop".into(),
            condition_result: false,
            action_executed: false,
            execution_time_ms: 0.0,
            error_message: None,
            decision: None,
            shadow: false,
            live_decision: None,
        };
        if let Err(e) = self.warden.store().record_executions(&[record]) {
            self.log.push(format!(
                "warden: the execution log could not be written: {e}"
            ));
        }
    }
}

/// A refusal's reason as the agent is told it: never empty (Codex ignores a refusal without a
/// reason, and runs the call).
fn said(reason: &str, ruling: Option<&warden_core::Ruling>) -> String {
    if reason.trim().trim_matches('.').is_empty() {
        match ruling {
            Some(r) => format!("refused by Warden (rule `{}`)", r.rule),
            None => "refused by Warden".to_string(),
        }
    } else {
        reason.to_string()
    }
}

/// What to tell the user when rule files do not load, if they do not.
fn broken_rules(warden: &Warden) -> Option<String> {
    let broken = warden.diagnostics().iter().filter(|d| d.is_error()).count();
    (broken > 0).then(|| {
        format!(
            "Warden: {broken} problem(s) in the rule files; those rules are not loaded (run `warden --config .warden/warden.toml check` in the project)"
        )
    })
}
