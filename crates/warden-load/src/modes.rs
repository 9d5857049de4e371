//! Modes: the context-detection layer. A modes file lists modes in priority order, each with a
//! condition (`when`) and the rule sets it activates; at every tick the first mode whose
//! condition holds is active, and only its rules (and core rules) run. A game bot picks its
//! rotation the same way: in an instance, the instance rotation; in a battleground, the
//! battleground rotation; else solo.
//!
//! ```toml
//! [[mode]]
//! id = "unavailable"
//! when = "context.turn.context_window > 0 and context.turn.context_window < 30000"
//! rules = { plugins = ["builtin"] }
//!
//! [[mode]]
//! id = "reduced"
//! when = "context.turn.context_window > 0 and context.turn.context_window < 100000"
//! rules = { tags = ["core"], plugins = ["builtin"] }
//! min_turns = 2
//!
//! [[mode]]
//! id = "full"
//! rules = "all"
//! ```
//!
//! A change of mode is logged, reported in the outcome (`Outcome::mode_change`), visible as
//! `context.mode`, and ticks Warden's own `on_mode_change` hook, so rules can react to it.

use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;
use toml::de::DeValue;
use warden_input::{Diagnostic, Doc, Located, SourceFile, Table};

use crate::ids::is_kebab;
use crate::rule::RuleDef;

pub use crate::builtin::BUILTIN_MODES;

/// The mode in force before any mode file says otherwise, and when no mode's condition holds.
pub const DEFAULT_MODE: &str = "default";

/// The keys of a `[[mode]]` table.
pub const MODE_FIELDS: &[&str] = &["id", "description", "when", "rules", "min_turns"];

/// Where a program's modes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeSource {
    /// A modes file.
    File(std::path::PathBuf),
    /// One of Warden's built-in mode files, by name (`context-window`).
    Builtin(String),
}

/// Which rules a mode activates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RuleSets {
    /// Every rule.
    All,
    /// Rules of these plugins, with these tags, in these exclusive groups, or with these ids.
    Some {
        /// Plugin ids (`builtin`, `research-assistant`).
        plugins: Vec<String>,
        /// Rule tags.
        tags: Vec<String>,
        /// Exclusive group names.
        groups: Vec<String>,
        /// Rule ids as listed (`token-budget-warning`, `research-assistant/search-first`).
        rules: Vec<String>,
    },
}

impl RuleSets {
    /// Whether the sets include `rule`.
    pub fn contains(&self, rule: &RuleDef) -> bool {
        match self {
            RuleSets::All => true,
            RuleSets::Some {
                plugins,
                tags,
                groups,
                rules,
            } => {
                let d = rule;
                plugins.iter().any(|p| **p == *d.plugin)
                    || tags.iter().any(|t| d.tags.contains(t))
                    || d.exclusive
                        .as_ref()
                        .is_some_and(|g| groups.iter().any(|x| x == g))
                    || rules.iter().any(|r| **r == *rule.key())
            }
        }
    }
}

/// A mode as its file writes it.
#[derive(Debug, Clone)]
pub struct ModeDef {
    /// Its id: `context.mode` while it is active.
    pub id: String,
    /// What it is for.
    pub description: String,
    /// When it is active (always, when absent).
    pub when: Option<Located>,
    /// The rules it activates.
    pub rules: RuleSets,
    /// Once active, it stays for at least this many turns (0: it can change at any tick).
    pub min_turns: u32,
    /// Where its table is.
    pub span: Range<usize>,
}

/// Reads a modes file.
pub fn parse_modes(file: Arc<SourceFile>) -> (Vec<ModeDef>, Vec<Diagnostic>) {
    let mut doc = Doc::new(file.clone());
    let mut modes = Vec::new();
    if let Some(root) = doc.parse(file.text()) {
        let root = root.get_ref();
        let mut top = Table::new(root, "", 0..0);
        match top.raw("mode").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Array(items), _)) => {
                for (i, item) in items.iter().enumerate() {
                    let field = format!("mode[{i}]");
                    let DeValue::Table(t) = item.get_ref() else {
                        doc.error(
                            item.span(),
                            &field,
                            "each mode is a table: write [[mode]]",
                            None,
                        );
                        continue;
                    };
                    let Some(m) = read_mode(&mut doc, t, item.span(), &field) else {
                        continue;
                    };
                    match modes.iter().find(|x: &&ModeDef| x.id == m.id) {
                        Some(first) => {
                            let (line, _) = file.line_col(first.span.start);
                            doc.error(
                                m.span.clone(),
                                &format!("{field}.id"),
                                format!("duplicate mode `{}`", m.id),
                                Some(format!("it is already defined at line {line}")),
                            );
                        }
                        None => modes.push(m),
                    }
                }
            }
            Some((_, span)) => doc.error(span, "mode", "write each mode as a [[mode]] table", None),
            None => doc.error(
                0..0,
                "mode",
                "this modes file has no [[mode]]",
                Some(
                    "list modes in priority order, each a [[mode]] with `id`, `when` and `rules`"
                        .into(),
                ),
            ),
        }
        top.finish(&mut doc, &["mode"]);
    }
    (modes, doc.diagnostics)
}

fn strings(doc: &mut Doc, t: &mut Table<'_>, key: &'static str) -> Vec<String> {
    t.strings(doc, key).map(|a| a.value).unwrap_or_default()
}

fn read_mode(
    doc: &mut Doc,
    table: &toml::de::DeTable<'_>,
    span: Range<usize>,
    field: &str,
) -> Option<ModeDef> {
    let mut t = Table::new(table, field.to_string(), span.clone());
    let id = match t.string(doc, "id") {
        Some(at) if at.value == DEFAULT_MODE => {
            doc.error(
                at.span,
                &format!("{field}.id"),
                "the mode id `default` is reserved: it is the mode before any mode holds",
                Some("choose another id".into()),
            );
            None
        }
        Some(at) if is_kebab(&at.value) => Some(at.value),
        Some(at) => {
            doc.error(
                at.span,
                &format!("{field}.id"),
                format!("mode id `{}` is not kebab-case", at.value),
                Some("use lowercase letters, digits and hyphens".into()),
            );
            None
        }
        None => {
            if !t.has("id") {
                doc.error(
                    span.clone(),
                    &format!("{field}.id"),
                    "the mode has no `id`",
                    Some("add `id = \"reduced\"`".into()),
                );
            }
            None
        }
    };
    let description = t
        .string(doc, "description")
        .map(|a| a.value)
        .unwrap_or_default();
    let when = t.string(doc, "when").map(|at| Located {
        text: at.value,
        span: at.span,
        field: format!("{field}.when"),
    });
    let min_turns = match t.integer(doc, "min_turns") {
        Some(at) => match u32::try_from(at.value) {
            Ok(n) if n <= 10_000 => n,
            _ => {
                doc.error(
                    at.span,
                    &format!("{field}.min_turns"),
                    "`min_turns` must be a whole number from 0 to 10000",
                    None,
                );
                0
            }
        },
        None => 0,
    };
    let rules = match t.raw("rules").map(|v| (v.get_ref(), v.span())) {
        Some((DeValue::String(s), _)) if s == "all" => Some(RuleSets::All),
        Some((DeValue::Table(sets), s)) => {
            let mut st = Table::new(sets, format!("{field}.rules"), s.clone());
            let r = RuleSets::Some {
                plugins: strings(doc, &mut st, "plugins"),
                tags: strings(doc, &mut st, "tags"),
                groups: strings(doc, &mut st, "groups"),
                rules: strings(doc, &mut st, "rules"),
            };
            st.finish(doc, &["plugins", "tags", "groups", "rules"]);
            Some(r)
        }
        Some((_, s)) => {
            doc.error(
                s,
                &format!("{field}.rules"),
                "`rules` is \"all\", or a table of rule sets",
                Some("write `rules = { plugins = [\"builtin\"], tags = [\"core\"] }`, or `rules = \"all\"`".into()),
            );
            None
        }
        None => {
            doc.error(
                span.clone(),
                &format!("{field}.rules"),
                "the mode has no `rules`: which rules does it activate?",
                Some("write `rules = \"all\"`, or `rules = { plugins = [...], tags = [...], groups = [...], rules = [...] }`".into()),
            );
            None
        }
    };
    t.finish(doc, MODE_FIELDS);
    Some(ModeDef {
        id: id?,
        description,
        when,
        rules: rules?,
        min_turns,
        span,
    })
}
