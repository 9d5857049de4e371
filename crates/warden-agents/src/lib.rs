//! Warden for coding agents with command hooks (Claude Code, Codex, Gemini CLI): one hook
//! payload in, the agent's answer out.
//!
//! An agent runs a hook at each event of its loop, as a new process (a `command` hook) or as an
//! HTTP request (Claude Code's `http` hook), and reads its answer. This crate translates one
//! payload into [`Session::tick`]s of the session of the same id, opened from the store and
//! saved again by the tick ([`Warden::open_session`]), and the outcome back into the agent's
//! answer. It holds no rule logic: what is decided is the rules' business.
//!
//! Each agent is a table ([`Agent::events`]) and an answer format; the rest is written once:
//!
//! | Warden's moment | Claude Code | Codex | Gemini CLI | ticks |
//! | --- | --- | --- | --- | --- |
//! | session start | `SessionStart` | `SessionStart` | `SessionStart` | opens (or resumes) the session; no rule hook |
//! | prompt | `UserPromptSubmit` | `UserPromptSubmit` | `BeforeAgent` | `on_query_start`, then `on_turn_start` |
//! | model call | (transcript) | (session file) | `AfterModel` | its usage kept; the next event starts its turn |
//! | tool call | `PreToolUse` | `PreToolUse` | `BeforeTool` | `on_turn_start` when a new model call asked for it, then `on_tool_call` |
//! | tool done / failed | `PostToolUse` / `PostToolUseFailure` | `PostToolUse` | `AfterTool` | `on_tool_complete` / `on_tool_failure` |
//! | stop | `Stop` | `Stop` | `AfterAgent` | `on_turn_end` with `turn.final = true` |
//! | subagent stop | `SubagentStop` | `SubagentStop` | | a row in the execution log |
//! | session end | `SessionEnd` | | `SessionEnd` | `on_session_end` |
//!
//! Any other event is answered with nothing.
//!
//! ```
//! use warden_agents::{Agent, Options, answer};
//! use warden_core::{ClaudeCodeConfig, Warden};
//!
//! let warden = Warden::builder().builtin_rules().build().unwrap();
//! let payload = br#"{"session_id":"s1","hook_event_name":"PostToolUseFailure",
//!     "tool_name":"WebFetch","tool_input":{"url":"https://example.com"},"error":"timeout"}"#;
//! let opts = Options::default();
//! let config = ClaudeCodeConfig::default();
//! for _ in 0..2 {
//!     answer(Agent::ClaudeCode, &warden, &config, &opts, payload);
//! }
//! let third = answer(Agent::ClaudeCode, &warden, &config, &opts, payload);
//! let context = &third.json.unwrap()["hookSpecificOutput"]["additionalContext"];
//! assert!(context.as_str().unwrap().contains("WebFetch has failed 3 times"));
//! ```
//!
//! Failures of Warden itself (a broken configuration, a locked database, a payload that is
//! not the agent's) never break the user's session: the answer says what is wrong in a
//! `systemMessage` and lets the agent go on ([`fail`]), unless the configuration asks to fail
//! closed, in which case a tool call is denied with the reason.

#![warn(missing_docs)]

mod agent;
mod backtest;
mod claude_code;
mod codex;
mod event;
mod gemini_cli;
mod handler;
mod init;
mod payload;
mod reply;
mod transcript;

use serde_json::Value;
use warden_core::{ClaudeCodeConfig, Session, SessionOptions, Warden};

use crate::handler::{Handler, Reported, TranscriptFile};
use crate::reply::Reply;
use crate::transcript::Usages;

pub use agent::Agent;

pub use backtest::{Backtest, Replayed, TickReport};
pub use codex::WRITES;
pub use event::HookEvent;
pub use handler::Options;
pub use init::{InitError, InitOptions, InitReport, hook_file, init};
pub use payload::{MAX_PAYLOAD, Payload, PayloadError};
pub use transcript::{DEFAULT_WINDOW, Usage, context_window, last_usage, usage_of_call};

/// The answer to one hook: the JSON to print (nothing at all when `json` is `None`), and lines
/// for the agent's debug log (stderr).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The JSON answer.
    pub json: Option<Value>,
    /// Lines for stderr.
    pub log: Vec<String>,
}

/// Answers one hook payload of `agent` (see the crate docs), in its session opened from the
/// store and saved by each tick. Never fails: a failure of Warden itself is answered by
/// [`fail`].
pub fn answer(
    agent: Agent,
    warden: &Warden,
    config: &ClaudeCodeConfig,
    opts: &Options,
    bytes: &[u8],
) -> Answer {
    answer_with(agent, warden, config, opts, bytes, |id, run| {
        let mut session =
            warden
                .open_session(id, SessionOptions::default())
                .map_err(|e| match &e {
                    warden_core::Error::Store(s) => s.described(),
                    other => other.to_string(),
                })?;
        Ok(run(&mut session))
    })
}

/// Answers one hook payload as [`answer`] does, in the session `lend` gives: `lend(id, run)`
/// calls `run` with the session of that id (a server lends the one it keeps in memory, so
/// that an event costs no read of the session from the store), or says why it cannot (then,
/// as when the database cannot be opened, the rules that need no stored state decide, in a
/// session of this event alone).
pub fn answer_with(
    agent: Agent,
    warden: &Warden,
    config: &ClaudeCodeConfig,
    opts: &Options,
    bytes: &[u8],
    lend: impl FnOnce(&str, &mut dyn FnMut(&mut Session) -> Answer) -> Result<Answer, String>,
) -> Answer {
    let mut payload = match Payload::parse(agent, bytes) {
        Ok(p) => p,
        Err(e) => {
            let event = serde_json::from_slice::<Value>(bytes)
                .ok()
                .and_then(|v| v.get("hook_event_name")?.as_str().map(str::to_string));
            return fail(agent, config, event.as_deref(), &e.to_string());
        }
    };
    let Some(mut event) = payload.event else {
        return Answer::default();
    };
    // Codex and Gemini CLI have no event for a failed tool: a returned call that failed is
    // told by what the agent recorded of it.
    if event == HookEvent::ToolDone
        && let Some(why) = agent.failure(
            payload.transcript_path.as_deref(),
            payload.tool_use_id.as_deref(),
            payload.tool_name.as_deref().unwrap_or_default(),
            payload.tool_response.as_ref(),
        )
    {
        event = HookEvent::ToolFailed;
        payload.error = Some(why);
    }
    // Without its database Warden still decides on every rule that needs no stored state, in
    // a session of this event alone; then the failure policy applies.
    let store_failure = warden.store_unavailable().map(str::to_string);
    let mut run = |session: &mut Session| {
        answer_in(
            warden,
            config,
            opts,
            &payload,
            event,
            session,
            store_failure.clone(),
        )
    };
    match lend(&payload.session_id, &mut run) {
        Ok(answer) => answer,
        Err(why) => {
            let mut alone = warden.session_with(SessionOptions {
                id: Some(payload.session_id.clone()),
                ..SessionOptions::default()
            });
            answer_in(warden, config, opts, &payload, event, &mut alone, Some(why))
        }
    }
}

/// Answers `event` of `payload` in `session`; `store_failure` says why the database could not
/// be used, if it could not.
fn answer_in(
    warden: &Warden,
    config: &ClaudeCodeConfig,
    opts: &Options,
    payload: &Payload,
    event: HookEvent,
    session: &mut Session,
    store_failure: Option<String>,
) -> Answer {
    // Where the model calls' token usage is read: the transcript Claude Code writes, the
    // session file Codex writes, or what Gemini CLI reported at `AfterModel`.
    let mut transcript = TranscriptFile {
        path: payload.transcript_path.as_deref(),
        wait: config.transcript_wait,
    };
    let mut rollout = codex::Rollout {
        path: payload.transcript_path.as_deref(),
        model: payload.model.as_deref(),
    };
    let mut reported = Reported::of(session);
    let usages: &mut dyn Usages = match payload.agent {
        Agent::ClaudeCode => &mut transcript,
        Agent::Codex => &mut rollout,
        Agent::GeminiCli => &mut reported,
    };
    let mut hook = Handler {
        session,
        warden,
        config,
        opts,
        payload,
        usages,
        observe: None,
        log: Vec::new(),
        unsaved: None,
    };
    let mut reply = hook.run(event);
    let mut log = hook.log;
    if let Some(why) = store_failure.or(hook.unsaved) {
        let message = format!(
            "Warden could not use its database: {why}. The rules that need no stored state decided this event; nothing of it was saved."
        );
        log.push(message.clone());
        reply.messages.push(message.clone());
        if config.fail_closed && event == HookEvent::ToolCall {
            reply.deny_unless_refused(&message);
        }
    }
    Answer {
        json: payload.agent.encode(event, &payload.event_name, &reply),
        log,
    }
}

/// The answer when Warden itself failed: the agent goes on, and the user is told what is wrong
/// (`systemMessage`); with `on_failure = "closed"`, a tool call is denied with the reason.
/// `event` is the agent's name of the event, if the payload said it.
pub fn fail(agent: Agent, config: &ClaudeCodeConfig, event: Option<&str>, error: &str) -> Answer {
    let message = format!("Warden could not supervise this event: {error}");
    let mut reply = Reply {
        messages: vec![message.clone()],
        ..Reply::default()
    };
    let moment = event.and_then(|name| agent.event(name));
    if config.fail_closed && moment == Some(HookEvent::ToolCall) {
        reply.deny_unless_refused(&message);
    }
    // An event Warden does not act on (or none named) is told only the message.
    let moment = moment.unwrap_or(HookEvent::SessionStart);
    Answer {
        json: agent.encode(moment, event.unwrap_or_default(), &reply),
        log: vec![message],
    }
}
