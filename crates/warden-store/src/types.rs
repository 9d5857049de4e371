//! What the store keeps, as values: plugin state and its writes, execution-log records, users'
//! choices, durable sessions. Both back ends read and write these same types.

use std::fmt;

/// Number of rows [`Store::executions`](crate::Store::executions) returns when the filter sets
/// no limit.
pub const DEFAULT_EXECUTION_LIMIT: usize = 100;

/// The project id of an override that applies to every project of the user.
pub const ALL_PROJECTS: &str = "*";

/// Where a piece of plugin state lives: (user, project, plugin).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateScope {
    /// The user the state belongs to.
    pub user: String,
    /// The project the state belongs to.
    pub project: String,
    /// The plugin that owns the state.
    pub plugin: String,
}

impl StateScope {
    /// Builds a scope from its three parts.
    pub fn new(
        user: impl Into<String>,
        project: impl Into<String>,
        plugin: impl Into<String>,
    ) -> Self {
        Self {
            user: user.into(),
            project: project.into(),
            plugin: plugin.into(),
        }
    }
}

impl fmt::Display for StateScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plugin {:?} (user {:?}, project {:?})",
            self.plugin, self.user, self.project
        )
    }
}

/// One write of plugin state. `value: None` deletes the key.
///
/// `Some(Value::Null)` stores a JSON `null`, which reads back as `Some(Value::Null)`;
/// only `None` removes the key.
#[derive(Debug, Clone, PartialEq)]
pub struct StateWrite {
    /// Where the key lives.
    pub scope: StateScope,
    /// The key within the scope.
    pub key: String,
    /// The new value, or `None` to delete the key.
    pub value: Option<serde_json::Value>,
}

impl StateWrite {
    /// A write that sets `key` to `value` (insert or update).
    pub fn set(scope: StateScope, key: impl Into<String>, value: serde_json::Value) -> Self {
        Self {
            scope,
            key: key.into(),
            value: Some(value),
        }
    }

    /// A write that deletes `key` (a no-op if it does not exist).
    pub fn delete(scope: StateScope, key: impl Into<String>) -> Self {
        Self {
            scope,
            key: key.into(),
            value: None,
        }
    }
}

/// One evaluation of one rule, as the execution log records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRecord {
    /// The user the evaluation ran for.
    pub user_id: String,
    /// The project the evaluation ran in.
    pub project_id: String,
    /// The agent session, when known.
    pub session_id: Option<String>,
    /// The rule that was evaluated.
    pub rule_id: String,
    /// What triggered the evaluation (e.g. a hook name).
    pub trigger: String,
    /// Whether the rule's condition held.
    pub condition_result: bool,
    /// Whether the rule's action ran.
    pub action_executed: bool,
    /// Wall-clock time of the evaluation, in milliseconds.
    pub execution_time_ms: f64,
    /// The error the evaluation ended with, if any; a record with one is a failure.
    pub error_message: Option<String>,
    /// What the rule decided about the event (`deny`, `rewrite`...), whether or not its
    /// decision won.
    pub decision: Option<String>,
    /// The rule ran in shadow: what it decided was recorded, never applied.
    pub shadow: bool,
    /// For a rule in shadow: what the live rules decided at the same event (`deny`,
    /// `allow`..., `none` when nothing was decided), to read beside what it would have.
    pub live_decision: Option<String>,
}

/// Filter for reading the execution log back (all fields optional; newest first;
/// `limit` default [`DEFAULT_EXECUTION_LIMIT`]).
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    /// Only records of this rule.
    pub rule_id: Option<String>,
    /// Only records of this session.
    pub session_id: Option<String>,
    /// Only records of this user.
    pub user_id: Option<String>,
    /// Only records whose `error_message` is set.
    pub failures_only: bool,
    /// Only the records of rules that ran in shadow.
    pub shadow_only: bool,
    /// At most this many rows (default [`DEFAULT_EXECUTION_LIMIT`]).
    pub limit: Option<usize>,
}

/// A row read back: the record plus its id and created_at text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// The row id; larger ids were recorded later.
    pub id: i64,
    /// When the row was recorded (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub created_at: String,
    /// The record as it was written.
    pub record: ExecutionRecord,
}

/// Whether a rule runs, and whether what it decides applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleState {
    /// Evaluated, and what it decides applies.
    On,
    /// Not evaluated.
    Off,
    /// Evaluated, and what it would have decided recorded (the execution log, the metrics,
    /// the event stream), but nothing it decides applies and nothing it says is injected.
    Shadow,
}

impl RuleState {
    /// Every state, in the order a user meets them.
    pub const ALL: [RuleState; 3] = [RuleState::On, RuleState::Shadow, RuleState::Off];

    /// `on`, `off` or `shadow`.
    pub fn name(self) -> &'static str {
        match self {
            RuleState::On => "on",
            RuleState::Off => "off",
            RuleState::Shadow => "shadow",
        }
    }

    /// The state stored as its two columns, `enabled` and `shadow` (a store written before
    /// shadow existed has only `enabled`, and reads as on or off).
    pub fn from_columns(enabled: bool, shadow: bool) -> RuleState {
        match (enabled, shadow) {
            (false, _) => RuleState::Off,
            (true, false) => RuleState::On,
            (true, true) => RuleState::Shadow,
        }
    }

    /// The `enabled` and `shadow` columns of the state.
    pub fn columns(self) -> (bool, bool) {
        (self != RuleState::Off, self == RuleState::Shadow)
    }

    /// Whether the rule is evaluated (on or in shadow).
    pub fn runs(self) -> bool {
        self != RuleState::Off
    }
}

impl std::fmt::Display for RuleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for RuleState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        RuleState::ALL
            .into_iter()
            .find(|state| state.name() == s)
            .ok_or_else(|| format!("`{s}` is not a rule state: say `on`, `off` or `shadow`"))
    }
}

/// A user's choice to switch a rule on, off or to shadow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleToggle {
    /// The user.
    pub user_id: String,
    /// The rule, as its owner addresses it.
    pub rule_id: String,
    /// On, off or shadow.
    pub state: RuleState,
    /// When it was last changed (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub updated_at: String,
}

/// A user's value for a plugin setting.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingOverride {
    /// The user.
    pub user_id: String,
    /// The project it applies to, or [`ALL_PROJECTS`].
    pub project_id: String,
    /// The plugin that declares the setting.
    pub plugin_id: String,
    /// The setting's name.
    pub name: String,
    /// The value.
    pub value: serde_json::Value,
    /// When it was last changed (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub updated_at: String,
}

/// A session to save at the end of a tick (see
/// [`TickTransaction::commit`](crate::TickTransaction::commit)).
#[derive(Debug, Clone)]
pub struct SessionWrite<'a> {
    /// The session id.
    pub id: &'a str,
    /// Its user.
    pub user: &'a str,
    /// Its project.
    pub project: &'a str,
    /// The version it was loaded at; `None` for a session that was never saved.
    pub loaded: Option<i64>,
    /// The engine's snapshot of the session.
    pub snapshot: &'a str,
    /// Events the session has seen.
    pub events: u64,
    /// Whether it ended (`on_session_end`).
    pub ended: bool,
    /// When it was touched, in seconds since the Unix epoch.
    pub updated_at: f64,
    /// Whether to write `updated_at` into a row that exists. The engine leaves it as stored
    /// when it wrote it less than a second ago: listing and pruning need no finer time, and
    /// the index on it is then not rewritten at every tick. A new row always gets it.
    pub touch: bool,
    /// Entries of the session's lists to write (new or changed since the last save), each
    /// replacing what the store holds at its place.
    pub entries: &'a [SessionEntry],
    /// For a list whose front entries were dropped since the last save: the list, and the
    /// place of its first entry now. The store deletes the entries before it.
    pub firsts: &'a [(u8, i64)],
}

/// One entry of a saved session's lists, kept in a row of its own so that a save writes only
/// the entries that changed, not the whole list (the engine keeps its history this way). The
/// store gives the entries meaning no more than it gives the snapshot.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionEntry {
    /// Which list.
    pub list: u8,
    /// Its place in the list: from 0, growing; a place is never reused for another entry.
    pub n: i64,
    /// What it holds (JSON, for the engine).
    pub text: String,
}

/// A session to save in the store's next batch ([`Store::save_in_batch`](crate::Store::save_in_batch)):
/// a [`SessionWrite`] that owns its data.
#[derive(Debug, Clone, Default)]
pub struct SessionSave {
    /// The session id.
    pub id: String,
    /// Its user.
    pub user: String,
    /// Its project.
    pub project: String,
    /// The version it was loaded at; `None` for a session that was never saved.
    pub loaded: Option<i64>,
    /// The engine's snapshot of the session.
    pub snapshot: String,
    /// Events the session has seen.
    pub events: u64,
    /// Whether it ended (`on_session_end`).
    pub ended: bool,
    /// When it was touched, in seconds since the Unix epoch.
    pub updated_at: f64,
    /// Whether to write `updated_at` into a row that exists (see [`SessionWrite::touch`]).
    pub touch: bool,
    /// Entries to write (see [`SessionWrite::entries`]).
    pub entries: Vec<SessionEntry>,
    /// Lists whose front was dropped (see [`SessionWrite::firsts`]).
    pub firsts: Vec<(u8, i64)>,
}

impl SessionSave {
    /// The same save, borrowed.
    pub fn as_write(&self) -> SessionWrite<'_> {
        SessionWrite {
            id: &self.id,
            user: &self.user,
            project: &self.project,
            loaded: self.loaded,
            snapshot: &self.snapshot,
            events: self.events,
            ended: self.ended,
            updated_at: self.updated_at,
            touch: self.touch,
            entries: &self.entries,
            firsts: &self.firsts,
        }
    }
}

/// A saved session, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// What the listing shows.
    pub summary: SessionSummary,
    /// The engine's snapshot.
    pub snapshot: String,
    /// The entries of its lists, by list and place.
    pub entries: Vec<SessionEntry>,
}

/// A saved session, without its snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// Its user.
    pub user: String,
    /// Its project.
    pub project: String,
    /// Saves so far (1 after the first tick).
    pub version: i64,
    /// Events it has seen.
    pub events: u64,
    /// Whether it ended.
    pub ended: bool,
    /// When it was first saved (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub created_at: String,
    /// When it was last touched, in seconds since the Unix epoch.
    pub updated_at: f64,
    /// The size of its snapshot, in bytes.
    pub size: u64,
}

/// Everything a store holds but the execution log, row by row as stored (values as their JSON
/// text, times as their text): what `warden migrate` copies from one store to another. The
/// execution log is copied a page at a time instead ([`LOG_PAGE`]), as it can be large.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Dump {
    /// Plugin state: scope, key, value JSON text, created_at, updated_at.
    pub state: Vec<StateRow>,
    /// Rule toggles.
    pub toggles: Vec<RuleToggle>,
    /// Setting overrides: user, project, plugin, name, value JSON text, updated_at.
    pub overrides: Vec<[String; 6]>,
    /// Saved sessions.
    pub sessions: Vec<StoredSession>,
}

/// One row of plugin state as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateRow {
    pub scope: StateScope,
    pub key: String,
    pub value_json: String,
    pub created_at: String,
    pub updated_at: String,
}

/// How many execution-log rows `warden migrate` reads and writes at a time.
pub(crate) const LOG_PAGE: usize = 2000;

/// How many rows a copy moved, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Keys of plugin state.
    pub state: usize,
    /// Rule toggles.
    pub toggles: usize,
    /// Setting overrides.
    pub overrides: usize,
    /// Saved sessions.
    pub sessions: usize,
    /// Execution-log rows.
    pub executions: usize,
}

/// What a store holds, in words, from its row counts (in the order of a [`CopyReport`]):
/// `12 keys of plugin state, 3 saved sessions`.
pub(crate) fn describe(counts: [usize; 5]) -> String {
    let names = [
        ("key of plugin state", "keys of plugin state"),
        ("rule toggle", "rule toggles"),
        ("setting override", "setting overrides"),
        ("saved session", "saved sessions"),
        ("execution-log row", "execution-log rows"),
    ];
    let parts: Vec<String> = counts
        .iter()
        .zip(names)
        .filter(|(n, _)| **n > 0)
        .map(|(n, (one, many))| format!("{n} {}", if *n == 1 { one } else { many }))
        .collect();
    if parts.is_empty() {
        "nothing".to_string()
    } else {
        parts.join(", ")
    }
}
