//! The bridge to bonsai-bt: a hook's trees (a rule is one leaf, an exclusive group a `Select`
//! of leaves) are ticked through bonsai, and a tree left running is kept, with the hook that
//! wakes it, and resumed where it stands (the frame lock). bonsai drops an abandoned child
//! without telling anyone, so after each tree the scripts it no longer runs are halted here.
//!
//! Where a tree left running stands is also kept as Warden's own cursor, the position of its
//! running leaf in its entry's rules: that is what a saved session holds (never bonsai's value)
//! and what a reload carries over, and [`standing_at`] builds the bonsai state back from it.

use bonsai_bt::{BT, Behavior, Status};
use warden_load::Hook;

use crate::session::evaluate::Tick;
use crate::session::keys::{HookSet, IndexMap};
use warden_program::hooks::{Entry, Node};

/// A tree left running, and the hook that wakes it.
pub(crate) struct Running {
    pub(crate) bt: BT<Node, ()>,
    /// The position of its running leaf in its entry's rules: 0 for a tree of one leaf; in an
    /// exclusive group, the rule the `Select` stands at.
    pub(crate) at: u32,
    pub(crate) wake: HookSet,
}

/// The bonsai state of `entry` standing at its leaf `at` (a position in its rules), as it is
/// once that leaf returned `Running`: the whole tree for the first leaf; for a later leaf of an
/// exclusive group, a `Select` of the leaves from it on. The two behave alike from there: a
/// `Select` standing at child `i` ticks child `i` next, goes on to `i + 1` (in the same tick:
/// Warden's event carries a time step) when it fails, succeeds when one succeeds and fails
/// when the last fails; the leaves before `i` are never ticked again. `None` when `at` is not a
/// leaf of `entry`.
pub(crate) fn standing_at(entry: &Entry, at: u32) -> Option<BT<Node, ()>> {
    let at = usize::try_from(at).ok()?;
    let behavior = match at {
        _ if at >= entry.rules.len() => return None,
        0 => entry.behavior.clone(),
        _ => Behavior::Select(
            entry.rules[at..]
                .iter()
                .map(|&r| Behavior::Action(Node::Rule(r)))
                .collect(),
        ),
    };
    Some(BT::new(behavior, ()))
}

/// The position in `entry`'s rules of the leaf this tick left running (the last that returned
/// `Running`: a `Select` stops at it).
fn running_leaf(entry: &Entry, tick: &Tick<'_, '_>) -> Option<u32> {
    let rule = tick.running_leaves.last()?;
    let at = entry.rules.iter().position(|r| r == rule)?;
    u32::try_from(at).ok()
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
            (tick.run(*node) == Status::Running).then(|| (BT::new(entry.behavior.clone(), ()), 0))
        }
        (_, None) => {
            let mut bt = BT::new(entry.behavior.clone(), ());
            tick_bt(&mut bt, tick, bonsai_event)
                .then(|| (bt, running_leaf(entry, tick).unwrap_or(0)))
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
            } else if let Behavior::Action(node) = &entry.behavior {
                // A lone rule left running (a waiting script): its tree is that one action
                // (a reload builds it anew from this entry), so it is ticked as it was
                // started, without bonsai.
                tick.run(*node) == Status::Running
            } else {
                let still = tick_bt(&mut r.bt, tick, bonsai_event);
                if let Some(at) = running_leaf(entry, tick) {
                    r.at = at;
                }
                still
            };
            if still {
                r.wake = tick.wake_of(key.0);
            } else {
                running.remove(&key);
            }
            None
        }
    };
    if let Some((bt, at)) = started {
        let wake = tick.wake_of(key.0);
        running.insert(key, Running { bt, at, wake });
    }
    if !tick.scripts.tasks.is_empty() || !tick.scripts.trees.is_empty() {
        for &rule in &entry.rules {
            // The leaves left running first: a few inline, where `waiting` looks up two maps.
            if !tick.running_leaves.contains(&rule) && tick.scripts.waiting(rule) {
                tick.halted
                    .extend(tick.scripts.halt(rule, "its tree left it behind"));
            }
        }
    }
}

/// Ticks a tree through bonsai; true when it is left running.
fn tick_bt(
    bt: &mut BT<Node, ()>,
    tick: &mut Tick<'_, '_>,
    bonsai_event: &bonsai_bt::Event,
) -> bool {
    let status = bt.tick(bonsai_event, &mut |args, _| (tick.run(*args.action), 0.0));
    matches!(status, Some((Status::Running, _)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;

    fn entry(n: u32) -> Entry {
        let rules: Vec<u32> = (0..n).map(|i| 100 + i).collect();
        let leaf = |r: u32| Behavior::Action(Node::Rule(r));
        Entry {
            name: Arc::from("group"),
            behavior: match n {
                1 => leaf(100),
                _ => Behavior::Select(rules.iter().map(|&r| leaf(r)).collect()),
            },
            rules,
        }
    }

    /// Ticks `bt` once, leaf `r` answering `answers[r - 100]`; the leaves called, in order,
    /// and what the tree came to (`None`: it was done already).
    fn tick_with(bt: &mut BT<Node, ()>, answers: &[Status]) -> (Vec<u32>, Option<Status>) {
        let mut called = Vec::new();
        let status = bt.tick(&bonsai_bt::Event::zero_dt_args(), &mut |args, _| {
            let Node::Rule(r) = *args.action;
            called.push(r);
            (answers[(r - 100) as usize], 0.0)
        });
        (called, status.map(|(s, _)| s))
    }

    fn status() -> impl Strategy<Value = Status> {
        prop_oneof![
            Just(Status::Success),
            Just(Status::Failure),
            Just(Status::Running)
        ]
    }

    proptest! {
        /// The state built back from a cursor behaves as the tree that was left standing
        /// there, tick after tick, whatever its leaves answer: the same leaves called in the
        /// same order (the running one first, falling through to the next when it fails, never
        /// one before it), the same status, done at the same tick.
        #[test]
        fn a_tree_built_at_its_cursor_goes_on_as_the_tree_left_there(
            (n, at) in (1u32..6).prop_flat_map(|n| (Just(n), 0..n)),
            ticks in proptest::collection::vec(proptest::collection::vec(status(), 5), 1..8),
        ) {
            let e = entry(n);
            // The tree as a tick leaves it standing at leaf `at`: the leaves before it failed.
            let mut left = BT::new(e.behavior.clone(), ());
            let first: Vec<Status> = (0..5)
                .map(|i| match i.cmp(&at) {
                    std::cmp::Ordering::Less => Status::Failure,
                    std::cmp::Ordering::Equal => Status::Running,
                    std::cmp::Ordering::Greater => Status::Success,
                })
                .collect();
            let (called, status) = tick_with(&mut left, &first);
            prop_assert_eq!(status, Some(Status::Running));
            prop_assert_eq!(called.last(), Some(&(100 + at)));
            let mut built = standing_at(&e, at).unwrap();
            for answers in &ticks {
                let a = tick_with(&mut left, answers);
                let b = tick_with(&mut built, answers);
                prop_assert_eq!(&a, &b);
                if a.1 != Some(Status::Running) {
                    break;
                }
            }
        }
    }

    #[test]
    fn no_tree_stands_past_its_leaves() {
        assert!(standing_at(&entry(3), 3).is_none());
        assert!(standing_at(&entry(1), 1).is_none());
        assert!(standing_at(&entry(1), u32::MAX).is_none());
        assert!(standing_at(&entry(3), 2).is_some());
    }
}
