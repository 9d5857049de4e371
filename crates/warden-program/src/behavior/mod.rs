//! Behaviors: trees of nodes that authors compose in TOML, for what one rule cannot say (a
//! research workflow across several hooks and turns, a fallback chain, a step that must not
//! repeat). A behavior file has the header of a rule (`[behavior]`: id, trigger, priority,
//! decorators) and a `[tree]` instead of a condition and actions; it compiles into a rule
//! whose condition is the tree, so ordering, exclusive groups, users' choices, modes and the
//! execution log treat behaviors and rules alike.
//!
//! ```toml
//! [behavior]
//! id = "search-then-summarize"
//! trigger = "on_query_start"
//!
//! [tree]
//! type = "sequence"
//! children = [
//!   { type = "condition", expression = "query_mentions('research')" },
//!   { type = "notify_self", message = "Search the vault first." },
//!   { type = "wait_for", hook = "on_tool_complete", tool = "vault_search" },
//!   { type = "notify_self", message = "Summarize what you found.", deliver_at = "immediate" },
//! ]
//! ```
//!
//! The TOML of a tree is read into `NodeDef`s by `warden-load`.
//! - `compile.rs`: a tree flattened into an arena of nodes, subtrees inlined (cycles refused),
//!   conditions and actions compiled.
//! - `run.rs`: the executor: ticks, halts, and what each node kind does (see the book's node
//!   reference for the exact semantics).

mod compile;
pub mod run;

pub use compile::Tree;
pub(crate) use compile::{CKind, TreeContext, compile_tree, turns_label};
pub use run::NodeStatus;
