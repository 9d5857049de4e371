//! Warden's engine: sessions that tick a compiled program at each hook, with their durable
//! state, and the host services around them (the builder, hot reload, the operator's
//! controls).
//!
//! It sits on two layers: `warden-context` (the events, facts and context rules read) and
//! `warden-program` (rules, behaviors and modes compiled into per-hook trees, and the
//! [`Outcome`]); this crate re-exports what its interface hands out, so a host needs only it.
//!
//! An agent loop builds a [`Warden`] from rule folders (and Warden's built-in rules), opens a
//! [`Session`] per conversation, and calls [`Session::tick`] at each of the seven [`Hook`]s
//! with what just happened ([`Event`]). Warden updates the session's facts, ticks the hook's
//! behavior trees (one per rule, or per exclusive group of rules) in priority order, applies
//! the effects of the rules that fired, and returns an [`Outcome`]: notifications to inject
//! into the agent's context, log lines, state writes, emitted events, and errors isolated to
//! the rule that caused them.
//!
//! ```
//! use serde_json::json;
//! use warden_core::{Event, Hook, Warden};
//!
//! let warden = Warden::builder().builtin_rules().build().unwrap();
//! let mut session = warden.session();
//! let outcome = session.tick(
//!     Hook::OnToolComplete,
//!     Event::tool_complete("vault_search", json!({"count": 9})),
//! );
//! assert_eq!(outcome.fired(), ["large-result-summary"]);
//! assert_eq!(
//!     &*outcome.injected().first().unwrap().message,
//!     "vault_search returned 9 results. Summarize the key findings before going on."
//! );
//! ```
//!
//! After a tool call's tick, a host answers the one question [`Outcome::proceed`] asks: may
//! the call run, and how.
//!
//! ```
//! use serde_json::json;
//! use warden_core::{Event, Hook, Proceed, Warden};
//!
//! let plugins = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/plugins");
//! let warden = Warden::builder().plugins_dir(plugins).build()?;
//! let mut session = warden.session();
//! let outcome = session.tick(
//!     Hook::OnToolCall,
//!     Event::tool_call("Bash", json!({ "command": "rm -rf /" })),
//! );
//! match outcome.proceed() {
//!     Proceed::Yes => { /* run the call as the agent wrote it */ }
//!     Proceed::WithInput(arguments) => { /* run it with these arguments */ let _ = arguments; }
//!     Proceed::Ask { reason, input } => { /* ask a person; run it only on yes */ let _ = (reason, input); }
//!     Proceed::No { reason } => {
//!         // Do not run it: the agent reads the reason as the call's result.
//!         assert!(reason.contains("outside the project"));
//!     }
//!     Proceed::KeepWorking { reason } => { /* at a final turn: give the agent this instruction */ let _ = reason; }
//!     Proceed::Stop { reason } => { /* end the session */ let _ = reason; }
//! }
//! # assert!(matches!(outcome.proceed(), Proceed::No { .. }));
//! # Ok::<(), warden_core::Error>(())
//! ```
//!
//! Invariants: a tick never panics on input and never fails as a whole; every rule of a tick
//! reads the same frozen facts, and effects are applied after all rules ran, in priority
//! order; a rule's effects apply together or not at all.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod async_session;
mod warden;
mod watch;

pub use async_session::{AsyncSession, TickPanicked};
pub use warden::{Warden, WardenBuilder};
pub use warden_context::event::{Event, MAX_SHARE, Message, Party, Query, ToolCall, TurnUpdate};
pub use warden_context::facts::{
    Counts, History, Identity, MessageRecord, SessionFacts, ToolRecord, ToolStatus, TurnState,
};
pub use warden_context::schema::schema;
pub use warden_context::template::{TemplateCheckError, check_template};
pub use warden_control::{
    ControlError, POLL_INTERVAL, RuleInfo, SetBy, SettingInfo, SettingProblem,
};
pub use warden_input::{Diagnostic, Report, Severity, SourceFile};
pub use warden_knowledge as knowledge_pipeline;
pub use warden_program::behavior::NodeStatus;
pub use warden_program::outcome::{
    Effect, Evaluation, Halted, Inject, Injected, InjectedIter, Lost, ModeChange, Notification,
    Outcome, Overridden, Proceed, RuleError, Ruling,
};
pub use warden_program::program::{Compilation, Program};
pub use warden_session::error::Error;
pub use warden_session::session::{
    PendingSave, Session, SessionOptions, Ticked, UnreadableSession, saved_snapshot,
};
pub use warden_session::shared::{BusEvent, Reload};
// The definitions the engine's interface hands out or takes.
pub use warden_load::{
    BUILTIN_PLUGIN, Capabilities, ClaudeCodeConfig, ConditionDef, Config, DEFAULT_ID, Decision,
    DeliverAt, Hook, Loaded, LogLevel, MANIFEST_FILE, ModeDef, ModeSource, PluginInfo, Priority,
    RuleDef, RuleSource, SettingDef, SettingKind, SettingValue, UnknownHook, load,
};
pub use warden_lua::Limits as ScriptLimits;
pub use warden_store::{
    ExecutionFilter, ExecutionRecord, RuleState, SessionSummary, StateScope, Store, StoreError,
};
pub use watch::{Watch, WatchError};
