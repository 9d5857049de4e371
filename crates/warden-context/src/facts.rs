//! What Warden knows about a session: the facts it keeps from the events it sees.
//!
//! An agent loop reports events; Warden updates these facts *before* the rules of the hook run,
//! so the third failure of a tool is seen as a failure count of 3 by `on_tool_failure` rules.
//! Turn, user and project values stay until an event changes them. The history is bounded
//! (the most recent messages and tool calls); counts and per-tool tallies are not.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::event::Event;
use warden_load::Hook;

/// How many recent messages and tool calls the history keeps, by default.
pub const DEFAULT_HISTORY_LIMIT: usize = 50;

/// Everything Warden knows about one session, as rules read it through `context`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionFacts {
    /// The current turn.
    pub turn: TurnState,
    /// What happened so far.
    pub history: History,
    /// The user.
    pub user: Identity,
    /// The project.
    pub project: Identity,
    /// The text of the latest user query (empty before the first).
    pub query: String,
    /// The active mode.
    pub mode: String,
    /// The session's own plugin state (`set_state` with `scope = "session"`), by plugin, then
    /// key: saved with the session, never seen by another. Rules read their plugin's as
    /// `context.session_state`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub session_state: BTreeMap<String, Map<String, Value>>,
    #[serde(skip)]
    turn_reported: bool,
    #[serde(skip)]
    limit: usize,
    #[serde(skip)]
    log: HistoryLog,
}

/// Which list of the history: the messages, or the tool calls.
pub const MESSAGES: usize = 0;
/// See [`MESSAGES`].
pub const TOOLS: usize = 1;

/// Where the history's two lists stand against the session's last save, so that a save writes
/// only the entries that changed ([`MESSAGES`], [`TOOLS`]). An entry's place counts every entry
/// the list ever had: the first place grows as old entries are dropped from the front. Rules do
/// not see it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryLog {
    /// The place of each list's first entry.
    pub first: [u64; 2],
    /// The first place of each list changed (or added) since the last save.
    pub changed: [Option<u64>; 2],
    /// Each list's first place as of the last save.
    pub saved_first: [u64; 2],
}

impl HistoryLog {
    fn changed(&mut self, list: usize, place: u64) {
        let mark = &mut self.changed[list];
        *mark = Some(mark.map_or(place, |m| m.min(place)));
    }
}

/// What the facts keep that rules do not read, for saving a session beside its facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactsPrivate {
    /// Whether the agent loop reports turn numbers (then Warden stops counting them).
    pub turn_reported: bool,
}

/// The current turn (`context.turn`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnState {
    /// Turn number, from 1 (0 before the first turn).
    pub number: u32,
    /// Share of the token budget used: 0.42 is 42%, above 1.0 over budget.
    pub token_usage: f64,
    /// Share of the context window used: 0.42 is 42%, above 1.0 past the window.
    pub context_usage: f64,
    /// Iterations so far in this query.
    pub iteration_count: u32,
    /// The iteration budget (0 when the agent loop has not said).
    pub max_iterations: u32,
    /// The model's context window in tokens (0 when the agent loop has not said).
    pub context_window: u64,
    /// The agent is about to stop: this turn gave its final answer. Reported by the agent
    /// loop; false again at the next turn or query.
    #[serde(rename = "final")]
    pub is_final: bool,
}

/// What happened so far (`context.history`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct History {
    /// Recent messages, oldest first.
    pub messages: VecDeque<MessageRecord>,
    /// Recent tool calls, oldest first.
    pub tools: VecDeque<ToolRecord>,
    /// Failures per tool name, over the whole session.
    pub failures: BTreeMap<String, u32>,
    /// Calls per tool name, over the whole session.
    pub calls: BTreeMap<String, u32>,
    /// Totals over the whole session.
    pub counts: Counts,
}

/// Totals over the whole session (`context.history.counts`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Turns started.
    pub turns: u32,
    /// Queries received.
    pub queries: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tool calls that failed.
    pub tool_failures: u32,
    /// Messages added to the history.
    pub messages: u32,
}

/// A message of the conversation, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRecord {
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
    /// The turn it arrived in.
    pub turn: u32,
}

/// How a tool call ended, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Called, not yet returned.
    Pending,
    /// Returned.
    Ok,
    /// Failed or timed out.
    Failed,
}

/// A tool call, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// What it returned (null until it does, or if it failed).
    pub result: Value,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Whether it returned successfully.
    pub success: bool,
    /// `pending`, `ok` or `failed`.
    pub status: ToolStatus,
    /// The turn it was called in.
    pub turn: u32,
    /// When it was last updated, in seconds since the Unix epoch.
    pub time: f64,
}

/// A user or a project (`context.user`, `context.project`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// Its id.
    pub id: String,
    /// A snapshot of its settings.
    pub settings: Map<String, Value>,
    /// A project's folder, as the agent loop reported it (empty when it has not; always
    /// empty for a user).
    pub root: String,
}

impl Identity {
    fn named(id: &str) -> Self {
        Identity {
            id: id.to_string(),
            settings: Map::new(),
            root: String::new(),
        }
    }
}

impl SessionFacts {
    /// Facts of a session that has seen nothing yet.
    pub fn new(user: &str, project: &str, history_limit: usize) -> Self {
        SessionFacts {
            turn: TurnState::default(),
            history: History::default(),
            user: Identity::named(user),
            project: Identity::named(project),
            query: String::new(),
            mode: "default".to_string(),
            session_state: BTreeMap::new(),
            turn_reported: false,
            limit: history_limit.max(1),
            log: HistoryLog::default(),
        }
    }

    /// Where the history stands against the last save.
    pub fn history_log(&self) -> &HistoryLog {
        &self.log
    }

    /// The session was saved with the history as it is.
    pub fn history_saved(&mut self) {
        self.log.changed = [None; 2];
        self.log.saved_first = self.log.first;
    }

    /// Each list of the history's first place and length.
    pub fn history_lists(&self) -> [(u64, u64); 2] {
        [
            (self.log.first[MESSAGES], self.history.messages.len() as u64),
            (self.log.first[TOOLS], self.history.tools.len() as u64),
        ]
    }

    /// The history's lists, taken out (to save the rest without them); put them back with
    /// [`SessionFacts::put_back_history`].
    pub fn take_history(&mut self) -> (VecDeque<MessageRecord>, VecDeque<ToolRecord>) {
        (
            std::mem::take(&mut self.history.messages),
            std::mem::take(&mut self.history.tools),
        )
    }

    /// Puts back what [`SessionFacts::take_history`] took.
    pub fn put_back_history(
        &mut self,
        (messages, tools): (VecDeque<MessageRecord>, VecDeque<ToolRecord>),
    ) {
        self.history.messages = messages;
        self.history.tools = tools;
    }

    /// The history's lists read back from a save, with their first places: as saved.
    pub fn restore_history(
        &mut self,
        first: [u64; 2],
        messages: VecDeque<MessageRecord>,
        tools: VecDeque<ToolRecord>,
    ) {
        self.history.messages = messages;
        self.history.tools = tools;
        self.log = HistoryLog {
            first,
            changed: [None; 2],
            saved_first: first,
        };
    }

    /// Facts read back from a save that kept the history inside them (an older format): every
    /// entry is yet to be saved on its own.
    pub fn history_unsaved(&mut self) {
        self.log = HistoryLog {
            first: [0; 2],
            changed: [Some(0); 2],
            saved_first: [0; 2],
        };
    }

    /// What the facts keep that rules do not read.
    pub fn private(&self) -> FactsPrivate {
        FactsPrivate {
            turn_reported: self.turn_reported,
        }
    }

    /// Facts read back from a saved session, with what rules do not read and the history's
    /// bound (a setting of the host, not of the session).
    pub fn restored(mut self, private: FactsPrivate, history_limit: usize) -> Self {
        self.turn_reported = private.turn_reported;
        self.limit = history_limit.max(1);
        self
    }

    /// Folds one event into the facts. Returns a complaint if the event lacks what its hook
    /// needs (a tool hook without a tool); the facts are still updated as far as they can be.
    pub fn update(&mut self, hook: Hook, event: &Event, now: f64) -> Option<String> {
        let mut complaint = None;
        if let Some(user) = &event.user {
            apply_party(&mut self.user, user);
        }
        if let Some(project) = &event.project {
            apply_party(&mut self.project, project);
        }
        if matches!(hook, Hook::OnTurnStart | Hook::OnQueryStart) {
            self.turn.is_final = false;
        }
        if let Some(t) = &event.turn {
            if let Some(n) = t.number {
                self.turn.number = n;
                self.turn_reported = true;
            }
            set(&mut self.turn.token_usage, t.token_usage);
            set(&mut self.turn.context_usage, t.context_usage);
            set(&mut self.turn.iteration_count, t.iteration_count);
            set(&mut self.turn.max_iterations, t.max_iterations);
            set(&mut self.turn.context_window, t.context_window);
            set(&mut self.turn.is_final, t.is_final);
        }
        match hook {
            Hook::OnQueryStart => {
                self.history.counts.queries += 1;
                if let Some(q) = &event.query {
                    self.query.clone_from(&q.text);
                    self.push_message("user", &q.text);
                }
            }
            Hook::OnTurnStart => {
                self.history.counts.turns += 1;
                let given = event.turn.as_ref().and_then(|t| t.number).is_some();
                if !given && !self.turn_reported {
                    self.turn.number += 1;
                }
            }
            Hook::OnToolCall | Hook::OnToolComplete | Hook::OnToolFailure => match &event.tool {
                Some(tool) => self.record_tool(hook, event, &tool.name, &tool.arguments, now),
                None => {
                    complaint = Some(format!(
                        "{hook} was reported without a tool; add \"tool\": {{\"name\": ...}} to the event"
                    ));
                }
            },
            Hook::OnTurnEnd | Hook::OnSessionEnd => {}
            Hook::OnModeChange => {
                complaint = Some(
                    "on_mode_change is raised by Warden itself when the mode changes; an agent loop does not send it".into(),
                );
            }
        }
        if let Some(m) = &event.message {
            self.push_message(&m.role, &m.content);
        }
        complaint
    }

    fn push_message(&mut self, role: &str, content: &str) {
        let place = self.log.first[MESSAGES].saturating_add(self.history.messages.len() as u64);
        self.log.changed(MESSAGES, place);
        self.history.counts.messages += 1;
        self.history.messages.push_back(MessageRecord {
            role: role.to_string(),
            content: content.to_string(),
            turn: self.turn.number,
        });
        while self.history.messages.len() > self.limit {
            self.history.messages.pop_front();
            self.log.first[MESSAGES] = self.log.first[MESSAGES].saturating_add(1);
        }
    }

    fn record_tool(&mut self, hook: Hook, event: &Event, name: &str, arguments: &Value, now: f64) {
        let h = &mut self.history;
        // A call always starts a record: only a completion or a failure looks for its call.
        // The status is read before the name, which is a string elsewhere in memory: a call
        // that finds nothing pending (every earlier call answered) reads no name at all.
        let pending = match hook {
            Hook::OnToolCall => None,
            _ => h
                .tools
                .iter()
                .rposition(|t| t.status == ToolStatus::Pending && t.name == name),
        };
        let index = match pending {
            None => {
                h.counts.tool_calls += 1;
                tally(&mut h.calls, name);
                h.tools.push_back(ToolRecord {
                    name: name.to_string(),
                    arguments: arguments.clone(),
                    result: Value::Null,
                    error: None,
                    success: false,
                    status: ToolStatus::Pending,
                    turn: self.turn.number,
                    time: now,
                });
                h.tools.len() - 1
            }
            Some(i) => i,
        };
        self.log
            .changed(TOOLS, self.log.first[TOOLS].saturating_add(index as u64));
        let record = &mut h.tools[index];
        record.time = now;
        match hook {
            Hook::OnToolComplete => {
                record.status = ToolStatus::Ok;
                record.success = true;
                record.result = event.result.clone().unwrap_or(Value::Null);
            }
            Hook::OnToolFailure => {
                record.status = ToolStatus::Failed;
                record.success = false;
                record.error = Some(event.error.clone().unwrap_or_default());
                h.counts.tool_failures += 1;
                tally(&mut h.failures, name);
            }
            _ => {}
        }
        if record.arguments.is_null() && !arguments.is_null() {
            record.arguments = arguments.clone();
        }
        while h.tools.len() > self.limit {
            h.tools.pop_front();
            self.log.first[TOOLS] = self.log.first[TOOLS].saturating_add(1);
        }
    }
}

/// Counts one more for `name` (its key is allocated only the first time).
fn tally(counts: &mut BTreeMap<String, u32>, name: &str) {
    match counts.get_mut(name) {
        Some(n) => *n += 1,
        None => {
            counts.insert(name.to_string(), 1);
        }
    }
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn apply_party(target: &mut Identity, update: &crate::event::Party) {
    if let Some(id) = &update.id {
        target.id.clone_from(id);
    }
    if let Some(settings) = &update.settings {
        target.settings.clone_from(settings);
    }
    if let Some(root) = &update.root {
        target.root.clone_from(root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts() -> SessionFacts {
        SessionFacts::new(warden_load::DEFAULT_ID, warden_load::DEFAULT_ID, 3)
    }

    #[test]
    fn tool_calls_are_paired_with_their_outcome() {
        let mut f = facts();
        f.update(
            Hook::OnToolCall,
            &Event::tool_call("search", json!({"q": "x"})),
            1.0,
        );
        f.update(
            Hook::OnToolComplete,
            &Event::tool_complete("search", json!({"count": 2})),
            2.0,
        );
        assert_eq!(f.history.tools.len(), 1);
        let t = &f.history.tools[0];
        assert_eq!((t.status, t.success, t.time), (ToolStatus::Ok, true, 2.0));
        assert_eq!(t.arguments, json!({"q": "x"}));
        assert_eq!(t.result, json!({"count": 2}));
        assert_eq!(f.history.counts.tool_calls, 1);
        assert_eq!(f.history.calls["search"], 1);
    }

    #[test]
    fn a_completion_without_a_call_still_counts_as_a_call() {
        let mut f = facts();
        f.update(
            Hook::OnToolFailure,
            &Event::tool_failure("web", "timeout"),
            1.0,
        );
        f.update(
            Hook::OnToolFailure,
            &Event::tool_failure("web", "timeout"),
            2.0,
        );
        assert_eq!(f.history.failures["web"], 2);
        assert_eq!(f.history.counts.tool_calls, 2);
        assert_eq!(f.history.tools[1].error.as_deref(), Some("timeout"));
    }

    #[test]
    fn turn_numbers_are_counted_unless_reported() {
        let mut f = facts();
        f.update(Hook::OnTurnStart, &Event::new(), 0.0);
        f.update(Hook::OnTurnStart, &Event::new(), 0.0);
        assert_eq!(f.turn.number, 2);
        f.update(Hook::OnTurnStart, &Event::new().with_turn(7), 0.0);
        f.update(Hook::OnTurnStart, &Event::new(), 0.0);
        assert_eq!(
            f.turn.number, 7,
            "once the loop reports numbers, Warden stops counting"
        );
    }

    #[test]
    fn values_are_kept_until_changed() {
        let mut f = facts();
        f.update(
            Hook::OnTurnStart,
            &Event::new().with_token_usage(0.4).with_user("ada"),
            0.0,
        );
        f.update(Hook::OnTurnEnd, &Event::new(), 0.0);
        assert_eq!(f.turn.token_usage, 0.4);
        assert_eq!(f.user.id, "ada");
    }

    #[test]
    fn history_is_bounded_but_tallies_are_not() {
        let mut f = facts();
        for i in 0..5 {
            f.update(
                Hook::OnToolFailure,
                &Event::tool_failure(format!("t{i}"), "x"),
                0.0,
            );
            f.update(Hook::OnQueryStart, &Event::query(format!("q{i}")), 0.0);
        }
        assert_eq!(f.history.tools.len(), 3);
        assert_eq!(f.history.messages.len(), 3);
        assert_eq!(f.history.counts.tool_failures, 5);
        assert_eq!(f.history.failures.len(), 5);
        assert_eq!(f.query, "q4");
    }

    #[test]
    fn tool_hooks_without_a_tool_are_reported() {
        let mut f = facts();
        let complaint = f.update(Hook::OnToolComplete, &Event::new(), 0.0);
        assert!(complaint.unwrap().contains("without a tool"));
    }
}
