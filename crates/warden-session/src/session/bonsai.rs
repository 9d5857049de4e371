//! The bridge to bonsai-bt: a hook's trees (a rule is one leaf, an exclusive group a `Select`
//! of leaves) are ticked through bonsai, and a tree left running is kept, with the hook that
//! wakes it, and resumed where it stands (the frame lock). bonsai drops an abandoned child
//! without telling anyone, so after each tree the scripts it no longer runs are halted here.

use std::collections::HashMap;

use bonsai_bt::{BT, Behavior, Status};
use warden_load::Hook;

use crate::session::evaluate::Tick;
use crate::session::keys::{HookSet, IndexMap};
use warden_program::hooks::{Entry, Node};

/// A tree left running, and the hook that wakes it.
pub(crate) struct Running {
    pub(crate) bt: BT<Node, ()>,
    pub(crate) wake: HookSet,
    /// For a tree carried across a reload: the rule index each of its leaves now stands for.
    pub(crate) remap: Option<HashMap<u32, u32>>,
}

/// Ticks one entry (a tree): a tree of one leaf is run by calling the leaf (bonsai's state
/// for a lone action is the action itself, and building one per rule per tick cost a quarter
/// of a tick); anything else, or a tree left running, goes through bonsai. Afterwards, any
/// script of the tree that its leaf did not keep running is halted (bonsai drops an abandoned
/// child without telling anyone).
pub(crate) fn tick_entry(
    running: &mut IndexMap<(Hook, u32), Running>,
    key: (Hook, u32),
    entry: &Entry,
    tick: &mut Tick<'_, '_>,
    bonsai_event: &bonsai_bt::Event,
) {
    tick.wake = HookSet::default();
    tick.entry_hook = key.0;
    tick.in_group = entry.rules.len() > 1;
    tick.running_leaves.clear();
    let foreign = key.0 != tick.facts.hook();
    // A tree left running is ticked where it is kept, and dropped once it is done.
    let resumed = match running.is_empty() {
        true => None,
        false => running.get_mut(&key),
    };
    let started = match (&entry.behavior, resumed) {
        (Behavior::Action(node), None) => {
            (tick.run(*node) == Status::Running).then(|| BT::new(entry.behavior.clone(), ()))
        }
        (_, None) => {
            let mut bt = BT::new(entry.behavior.clone(), ());
            tick_bt(&mut bt, None, tick, bonsai_event).then_some(bt)
        }
        (_, Some(r)) => {
            let still = if foreign {
                // Woken by another hook (a script's `wait_for`): only the waiting leaf runs.
                // The tree's other nodes belong to its own hook; if the leaf is done, so is
                // the tree (an exclusive group does not fall through to its next rule at a
                // foreign hook).
                let mut still = false;
                for &rule in &entry.rules {
                    if tick.scripts.waiting(rule) {
                        still |= tick.run(Node::Rule(rule)) == Status::Running;
                    }
                }
                still
            } else {
                tick_bt(&mut r.bt, r.remap.as_ref(), tick, bonsai_event)
            };
            if still {
                r.wake = tick.wake_of(key.0);
            } else {
                running.remove(&key);
            }
            None
        }
    };
    if let Some(bt) = started {
        let wake = tick.wake_of(key.0);
        running.insert(
            key,
            Running {
                bt,
                wake,
                remap: None,
            },
        );
    }
    if !tick.scripts.tasks.is_empty() || !tick.scripts.trees.is_empty() {
        for &rule in &entry.rules {
            if tick.scripts.waiting(rule) && !tick.running_leaves.contains(&rule) {
                tick.halted
                    .extend(tick.scripts.halt(rule, "its tree left it behind"));
            }
        }
    }
}

/// Ticks a tree through bonsai, its leaves mapped onward by `remap` (a tree carried across a
/// reload); true when it is left running.
fn tick_bt(
    bt: &mut BT<Node, ()>,
    remap: Option<&HashMap<u32, u32>>,
    tick: &mut Tick<'_, '_>,
    bonsai_event: &bonsai_bt::Event,
) -> bool {
    let status = bt.tick(bonsai_event, &mut |args, _| {
        let node = match (remap, *args.action) {
            (Some(m), Node::Rule(leaf)) => Node::Rule(m.get(&leaf).copied().unwrap_or(leaf)),
            (None, node) => node,
        };
        (tick.run(node), 0.0)
    });
    matches!(status, Some((Status::Running, _)))
}
