//! Warden: a behavior-tree supervisor for LLM agents.
//!
//! An agent loop calls Warden at each hook point (query start, turn start and end, tool call,
//! tool complete, tool failure, session end). Operators write rules in TOML (a trigger, a
//! condition, an action); Warden compiles them into behavior trees and ticks the hook's trees
//! at each call, answering with what the supervisor decided: notifications to inject into the
//! agent's context, log lines, plugin state writes and events.
//!
//! This crate is the facade: it re-exports [`warden_core`] (the engine), and the condition
//! language ([`expr`]), store ([`store`]) and trace ([`trace`]) crates.
//!
//! ```
//! use warden::{Event, Hook, Warden};
//!
//! let warden = Warden::builder().builtin_rules().build()?;
//! let mut session = warden.session();
//! for _ in 0..2 {
//!     session.tick(Hook::OnToolFailure, Event::tool_failure("web_search", "timeout"));
//! }
//! let outcome = session.tick(Hook::OnToolFailure, Event::tool_failure("web_search", "timeout"));
//! assert_eq!(outcome.fired(), ["repeated-failure-warning"]);
//! # Ok::<(), warden::Error>(())
//! ```

pub use warden_core::*;
/// The condition language.
pub use warden_expr as expr;
/// Reading operator input: files, TOML with spans, diagnostics.
pub use warden_input as input;
/// Operator files read into definitions: rules, behaviors, manifests, modes, `warden.toml`.
pub use warden_load as defs;
/// Lua scripts: the sandbox and the script runtime.
pub use warden_lua as lua;
/// SQLite persistence.
pub use warden_store as store;
/// Session traces: a file of JSON Lines read one event at a time.
pub use warden_trace as trace;
/// Every JSON shape Warden speaks, versioned: events and trace lines read, outcomes and replay
/// lines written, the service's bodies.
pub use warden_wire as wire;
