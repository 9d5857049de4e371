//! Reading the saves of formats 1 and 2. They held, for each tree left running, bonsai-bt's own
//! value (`BT<Node, ()>` as bonsai-bt 0.14's `serde` feature wrote it) beside the tree's rules,
//! and the hooks that wake it as a bit set. Here that value is read as plain JSON, by the shape
//! bonsai gave it, to find where the tree stands (the position of its running leaf in its
//! rules): the one place where a dependency's layout is known, and not through its types, so
//! that neither bonsai's `serde` feature nor its release of the day matters. The rest of those
//! snapshots is Warden's own data, read as format 3 reads it.
//!
//! The shape, for a hook's trees (a rule is one leaf, an exclusive group a `Select` of leaves):
//!
//! ```text
//! {"state": {"Action": {"Rule": 12}}, "finished": false, ...}
//! {"state": {"Select": {"behaviors": [{"Action": {"Rule": 6}}, {"Action": {"Rule": 8}}],
//!                       "current_index": 1, "current_state": {"Action": {"Rule": 8}}}}, ...}
//! ```
//!
//! The leaves hold the rule indices the tree was built with; the save's `leaves` says, for each,
//! its position in the tree's rules (a tree carried across a reload keeps its old indices).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use warden_load::Hook;

use crate::session::keys::RuleId;

/// Format 1: the history inside the snapshot (`Session::snapshot`, and saves before format 2).
pub(super) const WHOLE: u32 = 1;

/// Format 2: the history's entries beside the snapshot.
pub(super) const BESIDE: u32 = 2;

/// The hooks of a format-1 or format-2 wake set, by bit.
const WAKE_BITS: [Hook; 8] = [
    Hook::OnQueryStart,
    Hook::OnTurnStart,
    Hook::OnTurnEnd,
    Hook::OnToolCall,
    Hook::OnToolComplete,
    Hook::OnToolFailure,
    Hook::OnSessionEnd,
    Hook::OnModeChange,
];

/// A running tree as formats 1 and 2 saved it.
#[derive(Deserialize)]
struct OldTree {
    hook: Hook,
    entry: Arc<str>,
    rules: Vec<RuleId>,
    #[serde(default)]
    leaves: Value,
    #[serde(default)]
    bt: Value,
    #[serde(default)]
    wake: Value,
}

/// A running tree of an older save, upgraded: what format 3 saves of it.
#[derive(Debug)]
pub(super) struct Upgraded {
    pub hook: Hook,
    pub entry: Arc<str>,
    pub rules: Vec<RuleId>,
    /// The position of its running leaf in `rules`, and the hooks that wake it; or why they
    /// cannot be read (the tree is then halted).
    pub place: Result<(u32, Vec<Hook>), String>,
}

/// Takes the running trees out of a snapshot of format 1 or 2 (leaving its `running` empty, so
/// that the rest reads as format 3), upgraded. An error when a tree is not even a tree.
pub(super) fn running_trees(snapshot: &mut Value) -> Result<Vec<Upgraded>, String> {
    let Some(running) = snapshot.get_mut("running") else {
        // Reading the rest says what is missing.
        return Ok(Vec::new());
    };
    let Value::Array(items) = std::mem::replace(running, Value::Array(Vec::new())) else {
        return Err("the saved session is not readable: its running trees are not a list".into());
    };
    items
        .into_iter()
        .map(|item| {
            let old: OldTree = serde_json::from_value(item)
                .map_err(|e| format!("the saved session is not readable: a running tree: {e}"))?;
            Ok(upgrade(old))
        })
        .collect()
}

fn upgrade(old: OldTree) -> Upgraded {
    let place = cursor(&old.bt, &old.leaves)
        .and_then(|at| Ok((at, wake(&old.wake)?)))
        .map_err(|why| {
            format!("where its tree stood could not be read from the older save ({why})")
        });
    Upgraded {
        hook: old.hook,
        entry: old.entry,
        rules: old.rules,
        place,
    }
}

/// The position, in the tree's rules, of the leaf bonsai's value `bt` stands at, through
/// `leaves` (pairs of a leaf's rule index and its position).
fn cursor(bt: &Value, leaves: &Value) -> Result<u32, String> {
    if bt["finished"] != Value::Bool(false) {
        return Err("the tree is not marked running".into());
    }
    let state = &bt["state"];
    let leaf = match state.get("Select") {
        None => rule_of(state)?,
        Some(select) => {
            let leaf = rule_of(&select["current_state"])?;
            let listed = select["current_index"]
                .as_u64()
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| select["behaviors"].get(i))
                .map(rule_of);
            if listed != Some(Ok(leaf)) {
                return Err("its selector stands at a child it does not hold".into());
            }
            leaf
        }
    };
    let position = leaves
        .as_array()
        .into_iter()
        .flatten()
        .find(|pair| pair[0].as_u64() == Some(leaf))
        .and_then(|pair| pair[1].as_u64())
        .ok_or_else(|| format!("its leaf {leaf} is not among its rules"))?;
    u32::try_from(position).map_err(|_| format!("its leaf's position {position} is out of range"))
}

/// The rule index of a leaf's state (`{"Action": {"Rule": n}}`).
fn rule_of(state: &Value) -> Result<u64, String> {
    state["Action"]["Rule"]
        .as_u64()
        .ok_or_else(|| "it is neither a leaf nor a selector of leaves".into())
}

/// The hooks of a wake set saved as bits.
fn wake(bits: &Value) -> Result<Vec<Hook>, String> {
    let bits = bits
        .as_u64()
        .and_then(|b| u8::try_from(b).ok())
        .ok_or("its waking hooks are not a set of hooks")?;
    Ok(WAKE_BITS
        .iter()
        .enumerate()
        .filter(|(i, _)| bits & (1 << i) != 0)
        .map(|(_, &h)| h)
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree(bt: Value, leaves: Value, wake: Value) -> Value {
        json!({
            "hook": "on_turn_start",
            "entry": "triage",
            "rules": [
                {"key": "a", "fingerprint": 1},
                {"key": "b", "fingerprint": 2},
                {"key": "c", "fingerprint": 3},
            ],
            "leaves": leaves,
            "bt": bt,
            "wake": wake,
        })
    }

    fn select(current: u64, leaves: [u64; 3]) -> Value {
        let leaf = |r: u64| json!({"Action": {"Rule": r}});
        json!({
            "state": {"Select": {
                "behaviors": leaves.map(leaf),
                "current_index": current,
                "current_state": leaf(leaves[current as usize]),
            }},
            "initial_behavior": {"Select": leaves.map(leaf)},
            "bb": null,
            "finished": false,
            "tick_count": 1,
        })
    }

    fn read(trees: Vec<Value>) -> Result<Vec<Upgraded>, String> {
        let mut snapshot = json!({"format": 2, "running": trees});
        let out = running_trees(&mut snapshot);
        assert_eq!(snapshot["running"], json!([]));
        out
    }

    #[test]
    fn a_selector_is_read_as_the_position_of_its_running_leaf() {
        // Built as rules 6, 8, 7, since carried across a reload: `leaves` maps them.
        let got = read(vec![tree(
            select(1, [6, 8, 7]),
            json!([[7, 2], [8, 1], [6, 0]]),
            json!(2 | 16),
        )])
        .unwrap();
        let [t] = &got[..] else { panic!("{got:?}") };
        assert_eq!(
            t.place,
            Ok((1, vec![Hook::OnTurnStart, Hook::OnToolComplete]))
        );
        assert_eq!(&*t.entry, "triage");
        assert_eq!(t.rules.len(), 3);
    }

    #[test]
    fn a_lone_leaf_is_read_at_its_place() {
        let bt = json!({"state": {"Action": {"Rule": 4}}, "finished": false});
        let got = read(vec![tree(bt, json!([[4, 0]]), json!(1))]).unwrap();
        assert_eq!(got[0].place, Ok((0, vec![Hook::OnQueryStart])));
    }

    /// A value of another shape is a tree to halt, with why; a tree without its rules, or
    /// running trees that are not a list, make the save unreadable. Never a panic.
    #[test]
    fn what_cannot_be_read_is_halted_or_refused_with_a_reason() {
        let leaves = json!([[6, 0], [8, 1], [7, 2]]);
        let mut inconsistent = select(1, [6, 8, 7]);
        inconsistent["state"]["Select"]["current_index"] = json!(2);
        let mut finished = select(1, [6, 8, 7]);
        finished["finished"] = json!(true);
        let cases = [
            (
                select(1, [6, 8, 7]),
                json!([[6, 0]]),
                json!(2),
                "leaf 8 is not",
            ),
            (inconsistent, leaves.clone(), json!(2), "does not hold"),
            (finished, leaves.clone(), json!(2), "not marked running"),
            (
                json!({"state": {"Sequence": {}}, "finished": false}),
                leaves.clone(),
                json!(2),
                "neither a leaf",
            ),
            (json!("garbage"), leaves.clone(), json!(2), "not marked"),
            (
                select(0, [6, 8, 7]),
                leaves.clone(),
                json!(256),
                "waking hooks",
            ),
            (
                select(0, [6, 8, 7]),
                json!([[6, 4294967296u64]]),
                json!(2),
                "out of range",
            ),
        ];
        for (bt, leaves, wake, why) in cases {
            let got = read(vec![tree(bt, leaves, wake)]).unwrap();
            let [t] = &got[..] else {
                panic!("{why}: {got:?}")
            };
            let reason = t.place.as_ref().unwrap_err();
            assert!(reason.contains(why), "{why}: {reason}");
            assert_eq!(t.rules.len(), 3);
        }
        let err = read(vec![json!({"hook": "on_turn_start", "bt": {}})]).unwrap_err();
        assert!(err.contains("missing field"), "{err}");
        let mut not_a_list = json!({"format": 2, "running": {"a": 1}});
        let err = running_trees(&mut not_a_list).unwrap_err();
        assert!(err.contains("not a list"), "{err}");
    }
}
