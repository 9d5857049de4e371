//! Saving a session and reading it back, so that a session survives its process: the facts,
//! the mode and its hysteresis, decorator memory, queued notifications, trees left running and
//! behavior runs, as plain data (a [`Snapshot`], stored as JSON). What belongs to a program
//! (rules, entries) is saved by rule id and fingerprint, never by index, so a session saved
//! under one program is read back under another: decorator memory follows its rule's id, and a
//! running tree or behavior is kept only when its rules are unchanged (halted otherwise, as a
//! reload does). Waiting Lua scripts are saved as their replay journals (see `scripts.rs`).
//!
//! The history's two lists are saved entry by entry, beside the snapshot ([`history_entries`]):
//! a save writes the entries that changed since the last one, and the snapshot keeps only each
//! list's first place and length, so a save's cost does not grow with the history
//! (`Session::snapshot` keeps the history inside, whole, for a host that wants one text).
//!
//! Format 3 holds Warden's own data only: a tree left running is its entry, its rules and the
//! position of its running leaf (built back into bonsai's state by `bonsai::standing_at`), the
//! hooks that wake it by name. Formats 1 (the history inside) and 2 (entries beside) held
//! bonsai-bt's own value for each running tree; they are read and upgraded (`upgrade.rs`), and
//! the session's next save writes format 3.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use warden_load::Hook;

use crate::session::bonsai::{Running, standing_at};
use crate::session::evaluate::RuleMemory;
use crate::session::keys::{HookSet, RuleId};
use crate::session::scripts::SavedScripts;
use crate::session::stop::Stopped;
use crate::session::trees::Trees;
use crate::session::upgrade;
use warden_context::facts::{
    FactsPrivate, HistoryLog, MESSAGES, MessageRecord, SessionFacts, TOOLS, ToolRecord,
};
use warden_program::behavior::run::TreeRun;
use warden_program::mode::ModeState;
use warden_program::outcome::{Halted, Notification};
use warden_program::program::Program;
use warden_store::SessionEntry;

/// The version of the snapshot format a save writes. Formats 1 and 2 are read too (and
/// upgraded); a snapshot of another format is not (the session starts afresh, and says so).
pub(crate) const FORMAT: u32 = 3;

/// A tree of a hook left running, as Warden's own cursor: the entry, its rules, and where in
/// them the tree stands.
#[derive(Serialize, Deserialize)]
struct SavedTree {
    hook: Hook,
    entry: Arc<str>,
    /// The entry's rules, in order.
    rules: Vec<RuleId>,
    /// The position in `rules` of the leaf that is running.
    at: u32,
    /// The hooks that wake it (none: its own hook).
    wake: Vec<Hook>,
}

/// A tree an older save left running whose place could not be read: halted when the session
/// is read back.
struct UnreadableTree {
    rules: Vec<RuleId>,
    reason: String,
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
    /// Read from an older format: its running trees that could not be read.
    #[serde(skip)]
    unreadable: Vec<UnreadableTree>,
    behaviors: Vec<SavedBehavior>,
    #[serde(default)]
    scripts: SavedScripts,
    /// What the embedding host keeps with the session.
    #[serde(default)]
    pub host: Cow<'a, serde_json::Map<String, serde_json::Value>>,
    /// Each list of the history's first place and length, its entries saved beside the
    /// snapshot; none when the history is inside (`Session::snapshot`; format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lists: Option<[(u64, u64); 2]>,
    /// The stop that holds until the next prompt, when a rule stopped the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
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
    pub stopped: Option<&'a Stopped>,
}

impl<'a> Snapshot<'a> {
    /// The snapshot of a session that last ran `program`: whole, or, given where the history's
    /// lists stand (their entries taken out of `parts.facts`), without the history.
    pub(crate) fn take(
        program: Option<&Program>,
        parts: Parts<'a>,
        lists: Option<[(u64, u64); 2]>,
    ) -> Snapshot<'a> {
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
            unreadable: Vec::new(),
            behaviors,
            scripts: parts.scripts,
            host: Cow::Borrowed(parts.host),
            lists,
            stopped: parts.stopped.cloned(),
        }
    }

    /// Reads a snapshot, of this format or an older one (upgraded); an error says what is
    /// wrong with it.
    pub(crate) fn parse(text: &str) -> Result<Snapshot<'static>, String> {
        #[derive(Deserialize)]
        struct Head {
            format: u32,
        }
        let unreadable = |e: serde_json::Error| format!("the saved session is not readable: {e}");
        let head: Head = serde_json::from_str(text).map_err(unreadable)?;
        let snapshot: Snapshot<'static> = match head.format {
            FORMAT => serde_json::from_str(text).map_err(unreadable)?,
            upgrade::WHOLE | upgrade::BESIDE => {
                let mut old: serde_json::Value = serde_json::from_str(text).map_err(unreadable)?;
                let trees = upgrade::running_trees(&mut old)?;
                let mut snapshot: Snapshot<'static> =
                    serde_json::from_value(old).map_err(unreadable)?;
                for tree in trees {
                    match tree.place {
                        Ok((at, wake)) => snapshot.running.push(SavedTree {
                            hook: tree.hook,
                            entry: tree.entry,
                            rules: tree.rules,
                            at,
                            wake,
                        }),
                        Err(reason) => snapshot.unreadable.push(UnreadableTree {
                            rules: tree.rules,
                            reason,
                        }),
                    }
                }
                if head.format == upgrade::BESIDE && snapshot.lists.is_none() {
                    return Err(
                        "the saved session does not say where its history's entries are".into(),
                    );
                }
                snapshot
            }
            other => {
                return Err(format!(
                    "the saved session is in format {other}, which this Warden does not read (it reads {}, {} and {FORMAT})",
                    upgrade::WHOLE,
                    upgrade::BESIDE
                ));
            }
        };
        if let Some(lists) = snapshot.lists
            && lists
                .iter()
                .any(|(first, _)| i64::try_from(*first).is_err())
        {
            return Err("the saved session's history starts past the places a store keeps".into());
        }
        Ok(snapshot)
    }

    /// The facts, with what rules do not read and the host's history bound; the history's
    /// entries from `entries` (format 2), which must hold each list's places from its first.
    pub(crate) fn facts(
        &self,
        history_limit: usize,
        entries: &[SessionEntry],
    ) -> Result<SessionFacts, String> {
        let mut facts = self
            .facts
            .clone()
            .into_owned()
            .restored(self.private, history_limit);
        match self.lists {
            None => facts.history_unsaved(),
            Some(lists) => {
                let messages = list_entries::<MessageRecord>(entries, MESSAGES, lists[MESSAGES])?;
                let tools = list_entries::<ToolRecord>(entries, TOOLS, lists[TOOLS])?;
                facts.restore_history(lists.map(|(first, _)| first), messages, tools);
            }
        }
        Ok(facts)
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

    /// Puts the saved trees into `trees` under `program`: decorator memory by rule id; behavior
    /// runs, waiting scripts (see `Scripts::restore`) and running trees whose rules are
    /// unchanged. What cannot be put back is halted, and returned: a tree whose rules changed,
    /// and a tree whose saved place cannot be read (with its waiting scripts and behaviors,
    /// which would otherwise be left without their tree).
    pub(crate) fn restore_trees(&mut self, program: &Program, trees: &mut Trees) -> Vec<Halted> {
        let mut halted = Vec::new();
        let memory: HashMap<Arc<str>, RuleMemory> =
            std::mem::take(&mut self.memory).into_iter().collect();
        trees.set_memory(program, &memory);
        let mut unreadable = std::mem::take(&mut self.unreadable);
        for saved in std::mem::take(&mut self.running) {
            match restore_tree(program, &saved) {
                Ok((key, running)) => {
                    trees.running.insert(key, running);
                }
                Err(None) => {
                    if let Some(first) = saved.rules.first() {
                        halted.push(changed(&first.key));
                    }
                }
                Err(Some(reason)) => unreadable.push(UnreadableTree {
                    rules: saved.rules,
                    reason,
                }),
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
        trees
            .scripts
            .restore(std::mem::take(&mut self.scripts), program);
        // After the scripts are back: a tree that cannot be put back takes its waiting
        // scripts and behaviors with it.
        for tree in unreadable {
            let before = halted.len();
            for rule in &tree.rules {
                if let Some(ix) = rule.find(program) {
                    halted.extend(trees.scripts.halt(ix, &tree.reason));
                }
            }
            if halted.len() == before
                && let Some(first) = tree.rules.first()
            {
                halted.push(Halted {
                    rule: first.key.clone(),
                    reason: tree.reason,
                });
            }
        }
        halted
    }
}

/// A saved session as one JSON value, its history's entries put back inside the snapshot
/// (as `warden sessions show` prints it). An error says what cannot be read.
pub fn saved_snapshot(
    stored: &warden_store::StoredSession,
) -> Result<serde_json::Value, UnreadableSession> {
    read_whole(stored).map_err(|reason| UnreadableSession { reason })
}

/// Why a saved session cannot be read back ([`saved_snapshot`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UnreadableSession {
    /// What cannot be read, and why.
    pub reason: String,
}

fn read_whole(stored: &warden_store::StoredSession) -> Result<serde_json::Value, String> {
    let snapshot = Snapshot::parse(&stored.snapshot)?;
    let mut whole: serde_json::Value = serde_json::from_str(&stored.snapshot)
        .map_err(|e| format!("the saved session is not readable: {e}"))?;
    if let Some(lists) = snapshot.lists {
        let messages =
            list_entries::<serde_json::Value>(&stored.entries, MESSAGES, lists[MESSAGES])?;
        let tools = list_entries::<serde_json::Value>(&stored.entries, TOOLS, lists[TOOLS])?;
        let history = &mut whole["facts"]["history"];
        history["messages"] = messages.into_iter().collect();
        history["tools"] = tools.into_iter().collect();
    }
    Ok(whole)
}

/// The entries of list `list` at places `first..first + len`, read.
fn list_entries<T: serde::de::DeserializeOwned>(
    entries: &[SessionEntry],
    list: usize,
    (first, len): (u64, u64),
) -> Result<VecDeque<T>, String> {
    let name = if list == MESSAGES {
        "messages"
    } else {
        "tool calls"
    };
    let wanted = first..first.saturating_add(len);
    let mut out = VecDeque::new();
    for e in entries.iter().filter(|e| usize::from(e.list) == list) {
        let Ok(place) = u64::try_from(e.n) else {
            continue;
        };
        if !wanted.contains(&place) {
            continue;
        }
        if place != first + out.len() as u64 {
            break;
        }
        let record = serde_json::from_str(&e.text).map_err(|err| {
            format!("the saved session's history is not readable ({name}, entry {place}): {err}")
        })?;
        out.push_back(record);
    }
    if out.len() as u64 != len {
        return Err(format!(
            "the saved session's history is incomplete: {} of its {len} {name} were found",
            out.len()
        ));
    }
    Ok(out)
}

/// The entries of the history changed since the last save, to save beside the snapshot, and
/// for each list whose front was dropped since, its first place now.
pub(crate) fn history_entries(facts: &SessionFacts) -> (Vec<SessionEntry>, Vec<(u8, i64)>) {
    let log = facts.history_log();
    let mut entries = Vec::new();
    changed_entries(MESSAGES, &facts.history.messages, log, &mut entries);
    changed_entries(TOOLS, &facts.history.tools, log, &mut entries);
    let firsts = [MESSAGES, TOOLS]
        .into_iter()
        .filter(|&l| log.first[l] != log.saved_first[l])
        .map(|l| (l as u8, i64::try_from(log.first[l]).unwrap_or(i64::MAX)))
        .collect();
    (entries, firsts)
}

/// The entries of list `list` from its first place changed since the last save, into `out`.
fn changed_entries<T: Serialize>(
    list: usize,
    items: &VecDeque<T>,
    log: &HistoryLog,
    out: &mut Vec<SessionEntry>,
) {
    let Some(from) = log.changed[list] else {
        return;
    };
    let first = log.first[list];
    let skip = usize::try_from(from.saturating_sub(first)).unwrap_or(usize::MAX);
    for (i, item) in items.iter().enumerate().skip(skip) {
        out.push(SessionEntry {
            list: list as u8,
            n: i64::try_from(first.saturating_add(i as u64)).unwrap_or(i64::MAX),
            // Plain data: it always serializes.
            text: serde_json::to_string(item).unwrap_or_default(),
        });
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
    Some(SavedTree {
        hook,
        entry: entry.name.clone(),
        rules,
        at: r.at,
        wake: r.wake.hooks().collect(),
    })
}

/// The running tree `saved` under `program`: `Err(None)` when its rules changed (it is halted
/// as a reload halts it), `Err(Some(why))` when its saved place is not one of its leaves.
fn restore_tree(
    program: &Program,
    saved: &SavedTree,
) -> Result<((Hook, u32), Running), Option<String>> {
    let tree = program.hook(saved.hook);
    let at = tree
        .entries
        .iter()
        .position(|e| {
            e.name == saved.entry
                && e.rules.len() == saved.rules.len()
                && e.rules.iter().zip(&saved.rules).all(|(&ix, id)| {
                    let r = &program.rules[ix as usize];
                    r.key == id.key && r.fingerprint() == Some(id.fingerprint)
                })
        })
        .ok_or(None)?;
    let entry = &tree.entries[at];
    let bt = standing_at(entry, saved.at).ok_or_else(|| {
        Some(format!(
            "its saved place in its tree (leaf {}) is not one of its {} rules",
            saved.at,
            entry.rules.len()
        ))
    })?;
    let mut wake = HookSet::default();
    for &hook in &saved.wake {
        wake.insert(hook);
    }
    if wake.is_empty() {
        wake = HookSet::of(saved.hook);
    }
    Ok((
        (saved.hook, u32::try_from(at).map_err(|_| None)?),
        Running {
            bt,
            at: saved.at,
            wake,
        },
    ))
}
