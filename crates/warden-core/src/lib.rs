//! Warden's engine: the context model, hooks, rule loading, the behavior-tree compiler,
//! sessions and actions.
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
//!     &*outcome.inject[0].message,
//!     "vault_search returned 9 results. Summarize the key findings before going on."
//! );
//! ```
//!
//! Invariants: a tick never panics on input and never fails as a whole; every rule of a tick
//! reads the same frozen facts, and effects are applied after all rules ran, in priority
//! order; a rule's effects apply together or not at all.

#![warn(missing_docs)]
#![warn(unreachable_pub)]

mod actions;
mod async_session;
mod behavior;
mod context;
mod control;
mod error;
mod event;
mod facts;
mod hooks;
mod index;
mod knowledge;
mod mode;
mod notification;
mod outcome;
mod program;
mod render;
mod rule;
mod schema;
mod session;
mod shared;
mod slots;
mod template;
pub mod trace;
mod warden;
mod watch;

pub use async_session::{AsyncSession, TickPanicked};
pub use behavior::NodeStatus;
pub use control::{ControlError, POLL_INTERVAL, RuleInfo, SetBy, SettingInfo, SettingProblem};
pub use error::Error;
pub use event::{Event, EventError, MAX_SHARE, Message, Party, Query, ToolCall, TurnUpdate};
pub use facts::{
    Counts, History, Identity, MessageRecord, SessionFacts, ToolRecord, ToolStatus, TurnState,
};
pub use outcome::{
    Effect, Evaluation, Halted, Lost, ModeChange, Notification, Outcome, Overridden, Proceed,
    RuleError, Ruling,
};
pub use program::{Compilation, Program};
pub use schema::schema;
pub use session::{
    PendingSave, Session, SessionOptions, Ticked, UnreadableSession, saved_snapshot,
};
pub use shared::{BusEvent, Reload};
pub use template::{TemplateCheckError, check_template};
pub use warden::{Warden, WardenBuilder};
pub use warden_input::{Diagnostic, Report, Severity, SourceFile};
pub use warden_knowledge as knowledge_pipeline;
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
