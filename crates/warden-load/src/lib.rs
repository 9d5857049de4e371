//! Warden's operator files, read into definitions: what a rule, behavior, plugin manifest,
//! modes file or `warden.toml` says, with every problem reported as a [`Diagnostic`] at its
//! file, line and field. Nothing here runs or compiles anything: conditions, templates and
//! scripts are read as text with where they were written ([`Located`]), for the engine to
//! compile and to report against.
//!
//! ```
//! use std::sync::Arc;
//! use warden_load::{Hook, SourceFile, parse_rule_file};
//!
//! let file = SourceFile::new(
//!     "rules/budget.toml",
//!     "[rule]\nid = \"budget\"\ntrigger = \"on_turn_strat\"\ncondition = \"true\"\n\
//!      [action]\ntype = \"log\"\nmessage = \"hi\"\n",
//! );
//! let parsed = parse_rule_file(file, &Arc::from("local"));
//! assert_eq!(
//!     parsed.diagnostics[0].to_string(),
//!     "rules/budget.toml:3:11: error: rule.trigger: unknown hook `on_turn_strat`\n  help: did you mean `on_turn_start`?"
//! );
//! # let _ = Hook::OnTurnStart;
//! ```
//!
//! - `hook`: the hook points rules attach to.
//! - `rule`, `action`, `tree`: rule and behavior files (`[rule]`, `[condition]`, `[action]`;
//!   `[behavior]` and `[tree]`, whose node types are one table, [`NODE_TYPES`]).
//! - `manifest`: plugin manifests and their typed settings.
//! - `modes`: modes files. `config`: `warden.toml`.
//! - `load`: finding and reading rule folders and plugins; `scripts`: finding a rule's script.
//! - `builtin`: Warden's own rules, scripts and modes, compiled in. `ids`: ids and display ids.
//!
//! Invariants: a broken file never stops the others; every key nobody reads is reported; a
//! file is read through `warden_input::read_text` (confined, bounded, never blocking).

#![warn(missing_docs)]

mod action;
mod builtin;
mod config;
mod hook;
mod ids;
mod load;
mod manifest;
mod modes;
mod rule;
pub mod scripts;
mod tree;

pub use action::{
    ACTION_TYPES, ActionDef, Decision, DeliverAt, LogLevel, OnError, Priority, RewriteSet, Scope,
    rewrite_misplaced_at,
};
pub use builtin::{
    BUILTIN_MANIFEST, BUILTIN_MODES, BUILTIN_PLUGINS, BUILTIN_PREFIX, BUILTIN_RULES,
    BUILTIN_SCRIPTS, EmbeddedPlugin, builtin_plugin,
};
pub use config::{
    CONFIG_FIELDS, CONFIG_FILE, ClaudeCodeConfig, Config, DEFAULT_SHELL_TOOLS, ShellTools,
    is_database_url,
};
pub use hook::{Hook, UnknownHook};
pub use ids::{BUILTIN_PLUGIN, DEFAULT_ID, LOCAL_PLUGIN, is_kebab, kebab_id, rule_key, to_kebab};
pub use load::{Capabilities, Loaded, PluginDef, RuleSource, load, load_modes};
pub use manifest::{
    DEFAULT_INCLUDE, InvalidSetting, MANIFEST_FILE, Manifest, PluginInfo, SettingDef, SettingKind,
    SettingValue, parse_manifest,
};
pub use modes::{DEFAULT_MODE, MODE_FIELDS, ModeDef, ModeSource, RuleSets, parse_modes};
pub use rule::{
    BEHAVIOR_FIELDS, ConditionDef, DEFAULT_PRIORITY, Parsed, RULE_FIELDS, RuleDef, parse_rule_file,
};
pub use tree::{Abort, COMMON, MAX_DEPTH, NODE_TYPES, NodeDef, NodeKind, NodeType, Policy};
pub use warden_input::{Diagnostic, Located, SourceFile};
