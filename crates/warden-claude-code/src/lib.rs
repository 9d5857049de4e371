//! Warden for Claude Code: one hook payload in, Claude Code's answer out.
//!
//! Claude Code runs a hook at each event of its agent loop, as a new process (a `command`
//! hook) or as an HTTP request (an `http` hook), and reads its answer. This crate translates
//! one payload into [`Session::tick`]s of the session of the same id, opened from the store
//! and saved again by the tick ([`Warden::open_session`]), and the outcome back into Claude
//! Code's answer. It holds no rule logic: what is decided is the rules' business.
//!
//! | Claude Code event | Warden |
//! | --- | --- |
//! | `SessionStart` | opens (or resumes) the session; no rule hook |
//! | `UserPromptSubmit` | `on_query_start`, then `on_turn_start` |
//! | `PreToolUse` | `on_turn_start` when the transcript shows a new model call, then `on_tool_call` |
//! | `PostToolUse` / `PostToolUseFailure` | `on_tool_complete` / `on_tool_failure` |
//! | `Stop` | `on_turn_end` with `turn.final = true` |
//! | `SubagentStop` | a row in the execution log; not a turn of the main session |
//! | `SessionEnd` | `on_session_end` |
//! | any other event | nothing |
//!
//! ```
//! use warden_claude_code::{Options, answer};
//! use warden_core::{ClaudeCodeConfig, Warden};
//!
//! let warden = Warden::builder().builtin_rules().build().unwrap();
//! let payload = br#"{"session_id":"s1","hook_event_name":"PostToolUseFailure",
//!     "tool_name":"WebFetch","tool_input":{"url":"https://example.com"},"error":"timeout"}"#;
//! let opts = Options::default();
//! for _ in 0..2 {
//!     answer(&warden, &ClaudeCodeConfig::default(), &opts, payload);
//! }
//! let third = answer(&warden, &ClaudeCodeConfig::default(), &opts, payload);
//! let context = &third.json.unwrap()["hookSpecificOutput"]["additionalContext"];
//! assert!(context.as_str().unwrap().contains("WebFetch has failed 3 times"));
//! ```
//!
//! Failures of Warden itself (a broken configuration, a locked database, a payload that is
//! not Claude Code's) never break the user's session: the answer says what is wrong in a
//! `systemMessage` and lets the agent go on ([`fail`]), unless the configuration asks to fail
//! closed, in which case a tool call is denied with the reason.

#![warn(missing_docs)]

mod backtest;
mod handler;
mod init;
mod payload;
mod transcript;

use serde_json::{Map, Value, json};
use warden_core::{ClaudeCodeConfig, Session, SessionOptions, Warden};

use crate::handler::{Handler, TranscriptFile, with_message};

pub use backtest::{Backtest, Replayed, TickReport};
pub use handler::Options;
pub use init::{InitError, InitOptions, InitReport, init};
pub use payload::{HookEvent, MAX_PAYLOAD, Payload, PayloadError};
pub use transcript::{DEFAULT_WINDOW, Usage, context_window, last_usage, usage_of_call};

/// The answer to one hook: the JSON to print (nothing at all when `json` is `None`), and lines
/// for Claude Code's debug log (stderr).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The JSON answer.
    pub json: Option<Value>,
    /// Lines for stderr.
    pub log: Vec<String>,
}

/// Answers one hook payload (see the crate docs), in its session opened from the store and
/// saved by each tick. Never fails: a failure of Warden itself is answered by [`fail`].
pub fn answer(warden: &Warden, config: &ClaudeCodeConfig, opts: &Options, bytes: &[u8]) -> Answer {
    answer_with(warden, config, opts, bytes, |id, run| {
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
    warden: &Warden,
    config: &ClaudeCodeConfig,
    opts: &Options,
    bytes: &[u8],
    lend: impl FnOnce(&str, &mut dyn FnMut(&mut Session) -> Answer) -> Result<Answer, String>,
) -> Answer {
    let payload = match Payload::parse(bytes) {
        Ok(p) => p,
        Err(e) => {
            let event = serde_json::from_slice::<Value>(bytes)
                .ok()
                .and_then(|v| v.get("hook_event_name")?.as_str().map(str::to_string));
            return fail(config, event.as_deref(), &e.to_string());
        }
    };
    let Some(event) = payload.event else {
        return Answer::default();
    };
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
    let mut usages = TranscriptFile {
        path: payload.transcript_path.as_deref(),
        wait: config.transcript_wait,
    };
    let mut hook = Handler {
        session,
        warden,
        config,
        opts,
        payload,
        usages: &mut usages,
        observe: None,
        log: Vec::new(),
        unsaved: None,
    };
    let mut json = hook.run(event);
    let mut log = hook.log;
    if let Some(why) = store_failure.or(hook.unsaved) {
        let message = format!(
            "Warden could not use its database: {why}. The rules that need no stored state decided this event; nothing of it was saved."
        );
        log.push(message.clone());
        json = Some(with_message(json, &message));
        if config.fail_closed && event == HookEvent::PreToolUse {
            json = json.map(|j| deny_unless_refused(j, &message));
        }
    }
    Answer { json, log }
}

/// A `PreToolUse` answer that refuses the call, unless it does already (fail closed).
fn deny_unless_refused(mut answer: Value, reason: &str) -> Value {
    let specific = &answer["hookSpecificOutput"];
    if specific["permissionDecision"] == "deny" {
        return answer;
    }
    if let Some(map) = answer.as_object_mut() {
        let mut s = match map.remove("hookSpecificOutput") {
            Some(Value::Object(s)) => s,
            _ => Map::new(),
        };
        s.insert("hookEventName".into(), json!("PreToolUse"));
        s.insert("permissionDecision".into(), json!("deny"));
        s.insert(
            "permissionDecisionReason".into(),
            json!(format!("{reason} (Warden is set to fail closed)")),
        );
        s.remove("updatedInput");
        map.insert("hookSpecificOutput".into(), Value::Object(s));
    }
    answer
}

/// The answer when Warden itself failed: the agent goes on, and the user is told what is wrong
/// (`systemMessage`); with `on_failure = "closed"`, a tool call is denied with the reason.
pub fn fail(config: &ClaudeCodeConfig, event: Option<&str>, error: &str) -> Answer {
    let message = format!("Warden could not supervise this event: {error}");
    let json = if config.fail_closed && event == Some("PreToolUse") {
        json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": format!("{message} (Warden is set to fail closed)"),
            },
            "systemMessage": message,
        })
    } else {
        json!({ "systemMessage": message })
    };
    Answer {
        json: Some(json),
        log: vec![message],
    }
}
