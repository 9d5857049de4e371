//! What a session's trees keep between ticks: decorator memory per rule, trees left running
//! with the hook that wakes them, waiting scripts and behavior runs; and how that moves onto a
//! new program after a reload.

use std::collections::HashMap;
use std::sync::Arc;

use warden_load::Hook;

use crate::session::bonsai::{Running, standing_at};
use crate::session::evaluate::{Fired, RuleMemory};
use crate::session::keys::IndexMap;
use crate::session::scripts::Scripts;
use warden_control::Resolved;
use warden_program::hooks::Entry;
use warden_program::mode::Mode;
use warden_program::outcome::Halted;
use warden_program::program::Program;

/// What a session's trees keep between ticks.
pub(crate) struct Trees {
    /// Decorator memory per rule of the program, and the rule each entry belongs to.
    pub(crate) memory: Vec<RuleMemory>,
    /// The program's own list (shared, not copied per session).
    memory_keys: Arc<[Arc<str>]>,
    /// Trees left running, by (hook, entry), with the hook that wakes them.
    pub(crate) running: IndexMap<(Hook, u32), Running>,
    /// Waiting scripts and behavior runs.
    pub(crate) scripts: Scripts,
    /// Reused between ticks: the entries selected for the current step.
    pub(crate) selected: Vec<u32>,
    /// Reused between ticks: the rules that acted in the current step (empty between steps).
    pub(crate) fired: Vec<Fired>,
    /// Rules on for the user and in the current mode (when the program has modes), and what
    /// it was computed for.
    pub(crate) active: Vec<bool>,
    active_key: Option<(u64, u64, Option<usize>)>,
}

impl Trees {
    pub(crate) fn new(limits: warden_lua::Limits) -> Self {
        Trees {
            memory: Vec::new(),
            memory_keys: Arc::new([]),
            running: IndexMap::default(),
            scripts: Scripts::new(limits),
            selected: Vec::new(),
            fired: Vec::new(),
            active: Vec::new(),
            active_key: None,
        }
    }

    /// Moves onto `new` from `old` (the program the session last ran, if any): decorator
    /// memory is kept by rule id; a running tree is kept if its rules did not change (same
    /// rules, same files, same scripts), and halted otherwise.
    pub(crate) fn adopt(&mut self, old: Option<&Program>, new: &Program, halted: &mut Vec<Halted>) {
        if let Some(old) = old {
            self.carry_over(old, new, halted);
        }
        let memory: HashMap<Arc<str>, RuleMemory> = self
            .memory_keys
            .iter()
            .cloned()
            .zip(self.memory.drain(..))
            .collect();
        self.memory_keys = new.rule_keys.clone();
        self.memory = self
            .memory_keys
            .iter()
            .map(|k| memory.get(k).copied().unwrap_or_default())
            .collect();
    }

    /// Decorator memory, by rule id.
    pub(crate) fn memory_by_key(&self) -> impl Iterator<Item = (&Arc<str>, &RuleMemory)> {
        self.memory_keys.iter().zip(&self.memory)
    }

    /// Sets decorator memory for `program`'s rules from memory by rule id (a saved session).
    pub(crate) fn set_memory(&mut self, program: &Program, memory: &HashMap<Arc<str>, RuleMemory>) {
        self.memory_keys = program.rule_keys.clone();
        self.memory = self
            .memory_keys
            .iter()
            .map(|k| memory.get(k).copied().unwrap_or_default())
            .collect();
    }

    /// Keeps the running trees (and their scripts) whose rules are unchanged in `new`, under
    /// their new positions; halts the others.
    fn carry_over(&mut self, old: &Program, new: &Program, halted: &mut Vec<Halted>) {
        let mut moved: HashMap<u32, u32> = HashMap::new();
        let mut running = std::mem::take(&mut self.running)
            .into_iter()
            .collect::<Vec<_>>();
        running.sort_by_key(|(k, _)| *k);
        for ((hook, e), r) in running {
            let old_entry = &old.hook(hook).entries[e as usize];
            let same = |ne: &Entry| {
                ne.name == old_entry.name
                    && ne.rules.len() == old_entry.rules.len()
                    && ne.rules.iter().zip(&old_entry.rules).all(|(&n, &o)| {
                        let (n, o) = (&new.rules[n as usize], &old.rules[o as usize]);
                        n.key == o.key && n.fingerprint() == o.fingerprint()
                    })
            };
            let Some(at) = new.hook(hook).entries.iter().position(same) else {
                continue;
            };
            let new_entry = &new.hook(hook).entries[at];
            // The same rules in the same order: the tree stands at the same leaf, built anew
            // over the rules' new indices.
            let Some(bt) = standing_at(new_entry, r.at) else {
                continue;
            };
            moved.extend(
                old_entry
                    .rules
                    .iter()
                    .copied()
                    .zip(new_entry.rules.iter().copied()),
            );
            self.running.insert(
                (hook, at as u32),
                Running {
                    bt,
                    at: r.at,
                    wake: r.wake,
                },
            );
        }
        let reason = |key: &Arc<str>| {
            if new.rules.iter().any(|r| r.key == *key) {
                "its rule changed in a reload"
            } else {
                "its rule was removed in a reload"
            }
        };
        let tasks = std::mem::take(&mut self.scripts.tasks);
        let mut stopped: Vec<_> = Vec::new();
        for ((ix, node), task) in tasks {
            match moved.get(&ix) {
                Some(&n) => {
                    self.scripts.tasks.insert((n, node), task);
                }
                None => stopped.push(((ix, node), task)),
            }
        }
        stopped.sort_by_key(|(k, _)| *k);
        for (_, (task, key)) in stopped {
            let why = reason(&key);
            halted.push(self.scripts.halt_task(task, key, why));
        }
        // Behavior runs move with their rules (their decorator memory too); a running one
        // whose rule changed is halted.
        let trees = std::mem::take(&mut self.scripts.trees);
        let mut dropped: Vec<(u32, bool)> = Vec::new();
        for (ix, run) in trees {
            match moved.get(&ix) {
                Some(&n) => {
                    self.scripts.trees.insert(n, run);
                }
                None => dropped.push((ix, run.is_running())),
            }
        }
        dropped.sort_unstable();
        for (ix, was_running) in dropped {
            if was_running {
                let key = old.rules[ix as usize].key.clone();
                let why = reason(&key);
                halted.push(Halted {
                    rule: key,
                    reason: why.to_string(),
                });
            }
        }
        if let Some(rt) = &mut self.scripts.runtime {
            rt.forget_scripts();
        }
    }

    /// Brings `active` up to date: the rules on for the user and in `mode` (an index into
    /// the program's modes). Without modes, the user's choices alone apply (`active` is not
    /// used). Checked inline at every step; made again only when something changed.
    #[inline]
    pub(crate) fn refresh_active(
        &mut self,
        program: &Program,
        resolved: &Resolved,
        mode: Option<usize>,
    ) {
        if program.modes.is_some()
            && self.active_key != Some((resolved.version(), program.generation, mode))
        {
            self.make_active(program, resolved, mode);
        }
    }

    #[cold]
    #[inline(never)]
    fn make_active(&mut self, program: &Program, resolved: &Resolved, mode: Option<usize>) {
        let key = (resolved.version(), program.generation, mode);
        let modes = program.modes.as_ref().map_or(&[][..], |m| &m.modes[..]);
        let m: Option<&Mode> = mode.and_then(|i| modes.get(i));
        self.active = resolved
            .enabled()
            .iter()
            .enumerate()
            .map(|(i, on)| *on && m.is_none_or(|m| m.active.get(i).copied().unwrap_or(true)))
            .collect();
        self.active_key = Some(key);
    }

    /// The session ends: nothing runs any more, and every waiting script is halted.
    pub(crate) fn end(&mut self) -> Vec<Halted> {
        self.running.clear();
        self.scripts.halt_all("the session ended")
    }
}
