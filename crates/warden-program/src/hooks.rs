//! The trees of each hook: a rule compiles into one leaf, an exclusive group of rules into a
//! `Select` of their leaves (bonsai-bt), in priority order; with a tool-name index and the
//! threshold index, so a tick visits only the trees that can fire.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bonsai_bt::Behavior;
use warden_input::Diagnostic;
use warden_load::Hook;

use crate::index::ThresholdIndex;
use crate::rule::{CompiledRule, RuleCondition};

/// A leaf of a hook's trees. Small and `Copy`: bonsai clones leaves as it walks. (A saved
/// session does not hold it: a tree left running is saved as its running leaf's position.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    /// A rule: guard, then actions.
    Rule(u32),
}

/// One tree of a hook: a rule, or an exclusive group of rules.
pub struct Entry {
    /// How traces and reports name it: the rule's id, or the group's.
    pub name: Arc<str>,
    /// The tree bonsai ticks: a leaf per rule, a `Select` of them for a group.
    pub behavior: Behavior<Node>,
    /// The rules of its leaves, by number in the program, in priority order.
    pub rules: Vec<u32>,
}

#[derive(Default)]
/// The trees of one hook, in priority order, with what selects those that can fire.
pub struct HookTree {
    /// The trees, in priority order.
    pub entries: Vec<Entry>,
    /// Which entries can fire, by the thresholds their rules need (None: nothing to index).
    pub(crate) index: Option<ThresholdIndex>,
    /// Per entry: a lone rule whose condition is exactly the threshold it is indexed by, so
    /// that the index choosing it means the condition holds.
    exact: Vec<bool>,
    /// For tool hooks: the entries that apply to each named tool, in priority order.
    by_tool: HashMap<String, Vec<u32>>,
    /// The entries without a tool filter (all of them, for other hooks).
    untargeted: Vec<u32>,
}

impl HookTree {
    /// The entries to tick for an event concerning `tool` (if any), in priority order.
    pub(crate) fn entries_for(&self, tool: Option<&str>) -> &[u32] {
        match tool.and_then(|t| self.by_tool.get(t)) {
            Some(list) => list,
            None => &self.untargeted,
        }
    }

    /// The entries to tick, in priority order, into `out`: those for `tool`, less those the
    /// threshold index shows cannot fire (unless `every_rule`, which evaluates them all).
    /// True when the index chose them: then [`HookTree::holds_when_chosen`] applies.
    pub fn select(
        &self,
        tool: Option<&str>,
        facts: &dyn warden_expr::Facts,
        every_rule: bool,
        out: &mut Vec<u32>,
    ) -> bool {
        let base = self.entries_for(tool);
        match (&self.index, every_rule) {
            (Some(index), false) => {
                index.candidates(facts, out);
                if base.len() < self.entries.len() {
                    out.retain(|e| base.binary_search(e).is_ok());
                }
                true
            }
            _ => {
                out.clear();
                out.extend_from_slice(base);
                false
            }
        }
    }

    /// Whether entry `e`'s lone rule certainly has a true condition when the threshold index
    /// chose `e` (with the same facts): its condition is exactly the threshold the index found
    /// holding ([`warden_expr::Condition::exact_threshold`]), so it need not be evaluated.
    pub fn holds_when_chosen(&self, e: u32) -> bool {
        self.exact.get(e as usize).copied().unwrap_or(false)
    }
}

/// The trees of `hook`, from the rules that trigger on it and compile (compiling them, in a
/// program compiled on demand).
pub(crate) fn build_hook(
    hook: Hook,
    rules: &[CompiledRule],
    diagnostics: &mut Vec<Diagnostic>,
) -> HookTree {
    let mut members: Vec<u32> = (0..rules.len() as u32)
        .filter(|&i| {
            let r = &rules[i as usize];
            r.def.trigger == hook && r.body().is_some()
        })
        .collect();
    members.sort_by(|&a, &b| {
        let (ra, rb) = (&rules[a as usize].def, &rules[b as usize].def);
        rb.priority
            .cmp(&ra.priority)
            .then_with(|| ra.id.cmp(&rb.id))
            .then_with(|| ra.plugin.cmp(&rb.plugin))
    });
    let mut entries: Vec<Entry> = Vec::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for ix in members {
        let def = &rules[ix as usize].def;
        match &def.exclusive {
            Some(group) => {
                if let Some(&e) = groups.get(group) {
                    entries[e].rules.push(ix);
                } else {
                    groups.insert(group.clone(), entries.len());
                    entries.push(Entry {
                        name: Arc::from(group.as_str()),
                        behavior: Behavior::Action(Node::Rule(ix)),
                        rules: vec![ix],
                    });
                }
            }
            None => entries.push(Entry {
                name: rules[ix as usize].key.clone(),
                behavior: Behavior::Action(Node::Rule(ix)),
                rules: vec![ix],
            }),
        }
    }
    for entry in &mut entries {
        if entry.rules.len() > 1 {
            entry.behavior = Behavior::Select(
                entry
                    .rules
                    .iter()
                    .map(|&r| Behavior::Action(Node::Rule(r)))
                    .collect(),
            );
        }
    }
    // In an exclusive group, a rule after one that always matches is never evaluated (unless
    // that one is in shadow, where it never holds the group).
    for entry in &entries {
        let always = entry.rules.iter().position(|&r| {
            let c = &rules[r as usize];
            let unconditional = c.body().is_some_and(
                |b| matches!(&b.condition, RuleCondition::Expr(e) if e.source().trim() == "true"),
            );
            let gated = c.def.cooldown_turns.is_some()
                || c.def.once_per_session
                || c.def.max_fires.is_some()
                || !c.def.tools.is_empty()
                || c.def.shadow;
            unconditional && !gated
        });
        if let Some(at) = always {
            let first = &rules[entry.rules[at] as usize];
            for &r in &entry.rules[at + 1..] {
                let d = &rules[r as usize].def;
                diagnostics.push(
                    Diagnostic::warning(
                        &d.source,
                        Some(d.span.clone()),
                        Some("rule.exclusive"),
                        format!(
                            "`{}` is never evaluated: `{}`, before it in exclusive group `{}`, always matches",
                            rules[r as usize].key, first.key, entry.name
                        ),
                    )
                    .with_help(format!(
                        "give `{}` a real condition or a lower priority, or take one of them out of the group",
                        first.key
                    )),
                );
            }
        }
    }
    // Exclusive groups only exclude within one hook; say so if a group spans hooks.
    for (group, &e) in &groups {
        let first = &rules[entries[e].rules[0] as usize].def;
        if let Some(other) = rules.iter().find(|r| {
            r.def.exclusive.as_deref() == Some(group)
                && r.def.trigger != hook
                && r.def.trigger < hook
                && r.body().is_some()
        }) {
            diagnostics.push(Diagnostic::warning(
                &first.source,
                Some(first.span.clone()),
                Some("rule.exclusive"),
                format!(
                    "exclusive group `{group}` has rules on {hook} and on {}; exclusivity applies within one hook only",
                    other.def.trigger
                ),
            ));
        }
    }
    let mut tree = HookTree {
        entries,
        ..HookTree::default()
    };
    let filters: Vec<Option<Vec<&str>>> = tree
        .entries
        .iter()
        .map(|e| {
            let mut tools = Vec::new();
            for &r in &e.rules {
                let def = &rules[r as usize].def;
                if def.tools.is_empty() {
                    return None;
                }
                tools.extend(def.tools.iter().map(String::as_str));
            }
            Some(tools)
        })
        .collect();
    let names: Vec<&str> = filters.iter().flatten().flatten().copied().collect();
    for name in names {
        let list: Vec<u32> = (0..tree.entries.len() as u32)
            .filter(|&e| {
                filters[e as usize]
                    .as_ref()
                    .is_none_or(|f| f.contains(&name))
            })
            .collect();
        tree.by_tool.insert(name.to_string(), list);
    }
    tree.untargeted = (0..tree.entries.len() as u32)
        .filter(|&e| filters[e as usize].is_none())
        .collect();
    let thresholds: Vec<Vec<_>> = tree
        .entries
        .iter()
        .map(|e| {
            e.rules
                .iter()
                .map(|&r| {
                    let body = rules[r as usize].body();
                    body.and_then(|b| b.condition.necessary_threshold())
                })
                .collect()
        })
        .collect();
    tree.index = ThresholdIndex::build(&thresholds);
    if tree.index.is_some() {
        tree.exact = tree
            .entries
            .iter()
            .map(|e| {
                match e.rules[..] {
                [r] => rules[r as usize].body().is_some_and(|b| {
                    matches!(&b.condition, RuleCondition::Expr(c) if c.exact_threshold().is_some())
                }),
                _ => false,
            }
            })
            .collect();
    }
    tree
}
