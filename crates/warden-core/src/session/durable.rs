//! Saving a session and reading it back, so that a session survives its process: the facts,
//! the mode and its hysteresis, decorator memory, queued notifications, trees left running and
//! behavior runs, as plain data (a [`Snapshot`], stored as JSON). What belongs to a program
//! (rules, entries) is saved by rule id and fingerprint, never by index, so a session saved
//! under one program is read back under another: decorator memory follows its rule's id, and a
//! running tree or behavior is kept only when its rules are unchanged (halted otherwise, as a
//! reload does). Waiting Lua scripts are saved as their replay journals (see `scripts.rs`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use bonsai_bt::BT;
use serde::{Deserialize, Serialize};
use warden_load::Hook;

use crate::behavior::run::TreeRun;
use crate::facts::{FactsPrivate, SessionFacts};
use crate::hooks::Node;
use crate::mode::ModeState;
use crate::outcome::{Halted, Notification};
use crate::program::Program;
use crate::session::bonsai::Running;
use crate::session::evaluate::RuleMemory;
use crate::session::keys::{HookSet, RuleId};
use crate::session::scripts::SavedScripts;
use crate::session::trees::Trees;

/// The version of the snapshot format. A snapshot of another format is not read (the session
/// starts afresh, and says so).
pub(crate) const FORMAT: u32 = 1;

/// A tree of a hook left running: the bonsai state, and the rules its leaves stand for.
#[derive(Serialize, Deserialize)]
struct SavedTree {
    hook: Hook,
    entry: Arc<str>,
    /// The entry's rules, in order.
    rules: Vec<RuleId>,
    /// Each leaf index the bonsai state holds, and the position of its rule in `rules`.
    leaves: Vec<(u32, u32)>,
    bt: BT<Node, ()>,
    wake: HookSet,
}

/// A behavior's run state.
#[derive(Serialize, Deserialize)]
struct SavedBehavior {
    rule: RuleId,
    run: TreeRun,
}

/// A session as saved. Taken, it borrows what the session holds (a tick saves without copying
/// its history); read back, it owns everything.
#[derive(Serialize, Deserialize)]
pub(crate) struct Snapshot<'a> {
    format: u32,
    pub facts: Cow<'a, SessionFacts>,
    private: FactsPrivate,
    mode: Arc<str>,
    mode_since: u32,
    pub mailbox: Cow<'a, [Notification]>,
    pub ended: bool,
    pub log_credit: f64,
    /// Events the session has seen.
    pub events: u64,
    /// Decorator memory, by rule id (only rules that have fired).
    memory: Vec<(Arc<str>, RuleMemory)>,
    running: Vec<SavedTree>,
    behaviors: Vec<SavedBehavior>,
    #[serde(default)]
    pub scripts: SavedScripts,
    /// What the embedding host keeps with the session.
    #[serde(default)]
    pub host: Cow<'a, serde_json::Map<String, serde_json::Value>>,
}

/// What a session is, for [`Snapshot::take`].
pub(crate) struct Parts<'a> {
    pub facts: &'a SessionFacts,
    pub mode: &'a ModeState,
    pub mailbox: &'a [Notification],
    pub ended: bool,
    pub log_credit: f64,
    pub events: u64,
    pub trees: &'a Trees,
    pub scripts: SavedScripts,
    pub host: &'a serde_json::Map<String, serde_json::Value>,
}

impl<'a> Snapshot<'a> {
    /// The snapshot of a session that last ran `program`.
    pub(crate) fn take(program: Option<&Program>, parts: Parts<'a>) -> Snapshot<'a> {
        let trees = parts.trees;
        let mut memory: Vec<(Arc<str>, RuleMemory)> = trees
            .memory_by_key()
            .filter(|(_, m)| **m != RuleMemory::default())
            .map(|(k, m)| (k.clone(), *m))
            .collect();
        memory.sort_by(|a, b| a.0.cmp(&b.0));
        let mut running = Vec::new();
        let mut behaviors = Vec::new();
        if let Some(program) = program {
            let mut keys: Vec<&(Hook, u32)> = trees.running.keys().collect();
            keys.sort();
            for key in keys {
                let r = &trees.running[key];
                if let Some(saved) = save_tree(program, *key, r) {
                    running.push(saved);
                }
            }
            let mut runs: Vec<(&u32, &TreeRun)> = trees.scripts.trees.iter().collect();
            runs.sort_by_key(|(ix, _)| **ix);
            for (&ix, run) in runs {
                if let Some(rule) = RuleId::of(program, ix) {
                    behaviors.push(SavedBehavior {
                        rule,
                        run: run.clone(),
                    });
                }
            }
        }
        Snapshot {
            format: FORMAT,
            facts: Cow::Borrowed(parts.facts),
            private: parts.facts.private(),
            mode: parts.mode.id.clone(),
            mode_since: parts.mode.since_turn,
            mailbox: Cow::Borrowed(parts.mailbox),
            ended: parts.ended,
            log_credit: parts.log_credit,
            events: parts.events,
            memory,
            running,
            behaviors,
            scripts: parts.scripts,
            host: Cow::Borrowed(parts.host),
        }
    }

    /// Reads a snapshot; an error says what is wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Snapshot<'static>, String> {
        #[derive(Deserialize)]
        struct Head {
            format: u32,
        }
        let head: Head = serde_json::from_str(text)
            .map_err(|e| format!("the saved session is not readable: {e}"))?;
        if head.format != FORMAT {
            return Err(format!(
                "the saved session is in format {}, which this Warden does not read (it reads {FORMAT})",
                head.format
            ));
        }
        serde_json::from_str(text).map_err(|e| format!("the saved session is not readable: {e}"))
    }

    /// The facts, with what rules do not read and the host's history bound.
    pub(crate) fn facts(&self, history_limit: usize) -> SessionFacts {
        self.facts
            .clone()
            .into_owned()
            .restored(self.private, history_limit)
    }

    /// The mode, under `program`'s modes.
    pub(crate) fn mode(&self, program: &Program) -> ModeState {
        let current = program
            .modes
            .as_ref()
            .and_then(|m| m.modes.iter().position(|x| x.id == self.mode));
        ModeState {
            current,
            id: self.mode.clone(),
            since_turn: self.mode_since,
        }
    }

    /// Puts the saved trees into `trees` under `program`: decorator memory by rule id; running
    /// trees and behavior runs whose rules are unchanged. What cannot be put back is halted,
    /// and returned.
    pub(crate) fn restore_trees(&mut self, program: &Program, trees: &mut Trees) -> Vec<Halted> {
        let mut halted = Vec::new();
        let memory: HashMap<Arc<str>, RuleMemory> =
            std::mem::take(&mut self.memory).into_iter().collect();
        trees.set_memory(program, &memory);
        for saved in std::mem::take(&mut self.running) {
            match restore_tree(program, &saved) {
                Some((key, running)) => {
                    trees.running.insert(key, running);
                }
                None => {
                    if let Some(first) = saved.rules.first() {
                        halted.push(changed(&first.key));
                    }
                }
            }
        }
        for saved in std::mem::take(&mut self.behaviors) {
            match saved.rule.find(program) {
                Some(ix) => {
                    trees.scripts.trees.insert(ix, saved.run);
                }
                None if saved.run.is_running() => halted.push(changed(&saved.rule.key)),
                None => {}
            }
        }
        halted
    }
}

/// Why a saved running tree was not put back.
pub(crate) fn changed(rule: &Arc<str>) -> Halted {
    Halted {
        rule: rule.clone(),
        reason: "its rule changed while the session was saved".to_string(),
    }
}

fn save_tree(program: &Program, (hook, e): (Hook, u32), r: &Running) -> Option<SavedTree> {
    let entry = program.hook(hook).entries.get(e as usize)?;
    let rules = entry
        .rules
        .iter()
        .map(|&ix| RuleId::of(program, ix))
        .collect::<Option<Vec<_>>>()?;
    let position = |ix: u32| entry.rules.iter().position(|&r| r == ix);
    // The bonsai state's leaves hold the indices the tree was built with; `remap` (after a
    // reload) says which rule each now stands for.
    let leaves = match &r.remap {
        Some(m) => m
            .iter()
            .map(|(&leaf, &now)| Some((leaf, u32::try_from(position(now)?).ok()?)))
            .collect::<Option<Vec<_>>>()?,
        None => entry
            .rules
            .iter()
            .enumerate()
            .map(|(at, &ix)| Some((ix, u32::try_from(at).ok()?)))
            .collect::<Option<Vec<_>>>()?,
    };
    Some(SavedTree {
        hook,
        entry: entry.name.clone(),
        rules,
        leaves,
        bt: r.bt.clone(),
        wake: r.wake,
    })
}

fn restore_tree(program: &Program, saved: &SavedTree) -> Option<((Hook, u32), Running)> {
    let tree = program.hook(saved.hook);
    let at = tree.entries.iter().position(|e| {
        e.name == saved.entry
            && e.rules.len() == saved.rules.len()
            && e.rules.iter().zip(&saved.rules).all(|(&ix, id)| {
                let r = &program.rules[ix as usize];
                r.key == id.key && r.fingerprint() == Some(id.fingerprint)
            })
    })?;
    let entry = &tree.entries[at];
    let remap: HashMap<u32, u32> = saved
        .leaves
        .iter()
        .map(|&(leaf, pos)| Some((leaf, *entry.rules.get(pos as usize)?)))
        .collect::<Option<_>>()?;
    let identity = remap.iter().all(|(a, b)| a == b);
    Some((
        (saved.hook, u32::try_from(at).ok()?),
        Running {
            bt: saved.bt.clone(),
            wake: saved.wake,
            remap: (!identity).then_some(remap),
        },
    ))
}
