//! What the two back ends' SQL has in common: reading a row into this crate's types (both read
//! the same columns, in the same order), stored JSON text back into values, and the execution
//! log's query. What is each one's own stays in its module: how it numbers parameters (`?1`,
//! `$1`) and writes what the query needs ([`Dialect`]), its types (SQLite's integers for
//! booleans), its locks.

use std::collections::HashMap;

use crate::error::StoreError;
use crate::types::{
    DEFAULT_EXECUTION_LIMIT, ExecutionFilter, ExecutionRecord, ExecutionRow, RuleState, RuleToggle,
    SessionEntry, SessionSummary, SettingOverride, StateRow, StateScope, StoredSession,
};

/// A value both drivers read from a column: text, integers, floats, booleans (which SQLite
/// stores as integers, read as `!= 0`), and any of them or NULL (`Option`).
pub(crate) trait Cell:
    rusqlite::types::FromSql + for<'a> postgres::types::FromSql<'a>
{
}

impl<T: rusqlite::types::FromSql + for<'a> postgres::types::FromSql<'a>> Cell for T {}

/// A row of either driver, read a column at a time.
pub(crate) trait Row {
    /// The driver's error.
    type Error;
    /// Column `i` (from 0).
    fn col<T: Cell>(&self, i: usize) -> Result<T, Self::Error>;
}

impl Row for rusqlite::Row<'_> {
    type Error = rusqlite::Error;
    fn col<T: Cell>(&self, i: usize) -> rusqlite::Result<T> {
        self.get(i)
    }
}

impl Row for postgres::Row {
    type Error = postgres::Error;
    fn col<T: Cell>(&self, i: usize) -> Result<T, postgres::Error> {
        self.try_get(i)
    }
}

/// The execution log's columns, in the order [`execution_row`] reads them.
macro_rules! execution_columns {
    () => {
        "id, created_at, user_id, project_id, session_id, rule_id, trigger, condition_result, \
         action_executed, execution_time_ms, error_message, decision, shadow, live_decision"
    };
}
pub(crate) use execution_columns;

/// An execution-log row, from [`execution_columns`].
pub(crate) fn execution_row<R: Row>(r: &R) -> Result<ExecutionRow, R::Error> {
    Ok(ExecutionRow {
        id: r.col(0)?,
        created_at: r.col(1)?,
        record: ExecutionRecord {
            user_id: r.col(2)?,
            project_id: r.col(3)?,
            session_id: r.col(4)?,
            rule_id: r.col(5)?,
            trigger: r.col(6)?,
            condition_result: r.col(7)?,
            action_executed: r.col(8)?,
            execution_time_ms: r.col(9)?,
            error_message: r.col(10)?,
            decision: r.col(11)?,
            shadow: r.col(12)?,
            live_decision: r.col(13)?,
        },
    })
}

/// How a back end's SQL writes what the execution log's query needs.
pub(crate) struct Dialect {
    /// What comes before a parameter's number: `?` (SQLite) or `$` (PostgreSQL).
    pub param: char,
    /// Whether `rule_id` ends with `/` and the text of the parameter `{p}`.
    pub ends_with: &'static str,
    /// Whether the row is of a rule that ran in shadow.
    pub shadow: &'static str,
}

/// The query that reads the execution log through `filter`, newest first, and its parameters
/// in order: the texts it compares, then how many rows it reads at most.
pub(crate) fn executions_query<'f>(
    filter: &'f ExecutionFilter,
    d: &Dialect,
) -> (String, Vec<&'f str>, i64) {
    let mut texts: Vec<&str> = Vec::new();
    let mut conditions: Vec<String> = Vec::new();
    let mut param = |text: &'f str| {
        texts.push(text);
        format!("{}{}", d.param, texts.len())
    };
    if let Some(rule_id) = &filter.rule_id {
        let p = param(rule_id);
        conditions.push(if rule_id.contains('/') {
            format!("rule_id = {p}")
        } else {
            // A bare id matches the rule of that id in any plugin (`plugin/id`) too.
            format!("(rule_id = {p} OR {})", d.ends_with.replace("{p}", &p))
        });
    }
    for (column, value) in [
        ("session_id", &filter.session_id),
        ("user_id", &filter.user_id),
    ] {
        if let Some(value) = value {
            conditions.push(format!("{column} = {}", param(value)));
        }
    }
    if filter.failures_only {
        conditions.push("error_message IS NOT NULL".to_string());
    }
    if filter.shadow_only {
        conditions.push(d.shadow.to_string());
    }
    let mut query =
        concat!("SELECT ", execution_columns!(), " FROM rule_execution_log").to_string();
    if !conditions.is_empty() {
        query.push_str(" WHERE ");
        query.push_str(&conditions.join(" AND "));
    }
    // created_at has one-second resolution; id breaks ties in insertion order.
    let limit = format!("{}{}", d.param, texts.len() + 1);
    query.push_str(&format!(" ORDER BY created_at DESC, id DESC LIMIT {limit}"));
    let most = filter.limit.unwrap_or(DEFAULT_EXECUTION_LIMIT);
    (query, texts, i64::try_from(most).unwrap_or(i64::MAX))
}

/// A session's summary, from `id, user_id, project_id, version, events, ended, created_at,
/// updated_at` and its size (which each back end counts its own way).
pub(crate) fn session_summary<R: Row>(r: &R) -> Result<SessionSummary, R::Error> {
    Ok(SessionSummary {
        id: r.col(0)?,
        user: r.col(1)?,
        project: r.col(2)?,
        version: r.col(3)?,
        events: u64::try_from(r.col::<i64>(4)?).unwrap_or(0),
        ended: r.col(5)?,
        created_at: r.col(6)?,
        updated_at: r.col(7)?,
        size: u64::try_from(r.col::<i64>(8)?).unwrap_or(0),
    })
}

/// A stored session without its entries (read apart): its summary's columns, then `snapshot`.
pub(crate) fn stored_session<R: Row>(r: &R) -> Result<StoredSession, R::Error> {
    Ok(StoredSession {
        summary: session_summary(r)?,
        snapshot: r.col(9)?,
        entries: Vec::new(),
    })
}

/// An entry of a session's list, from `list, n, entry` starting at column `at`. A list the
/// engine does not know (past 255 or negative, written by hand) is read as 255, which it
/// ignores.
pub(crate) fn session_entry<R: Row>(r: &R, at: usize) -> Result<SessionEntry, R::Error> {
    Ok(SessionEntry {
        list: u8::try_from(r.col::<i64>(at)?).unwrap_or(u8::MAX),
        n: r.col(at + 1)?,
        text: r.col(at + 2)?,
    })
}

/// Sessions' entries by session, from rows of `session_id, list, n, entry` read by
/// [`session_entry_of`].
pub(crate) fn entries_by_session(
    rows: Vec<(String, SessionEntry)>,
) -> HashMap<String, Vec<SessionEntry>> {
    let mut by_id: HashMap<String, Vec<SessionEntry>> = HashMap::new();
    for (id, entry) in rows {
        by_id.entry(id).or_default().push(entry);
    }
    by_id
}

/// A session's id and one of its entries, from `session_id, list, n, entry`.
pub(crate) fn session_entry_of<R: Row>(r: &R) -> Result<(String, SessionEntry), R::Error> {
    Ok((r.col(0)?, session_entry(r, 1)?))
}

/// A rule toggle, from `user_id, rule_id, enabled, shadow, updated_at`.
pub(crate) fn rule_toggle<R: Row>(r: &R) -> Result<RuleToggle, R::Error> {
    Ok(RuleToggle {
        user_id: r.col(0)?,
        rule_id: r.col(1)?,
        state: RuleState::from_columns(r.col(2)?, r.col(3)?),
        updated_at: r.col(4)?,
    })
}

/// A key of plugin state as stored, from `user_id, project_id, plugin_id, key, value_json,
/// created_at, updated_at`.
pub(crate) fn state_row<R: Row>(r: &R) -> Result<StateRow, R::Error> {
    Ok(StateRow {
        scope: StateScope::new(
            r.col::<String>(0)?,
            r.col::<String>(1)?,
            r.col::<String>(2)?,
        ),
        key: r.col(3)?,
        value_json: r.col(4)?,
        created_at: r.col(5)?,
        updated_at: r.col(6)?,
    })
}

/// A setting override as stored, from `user_id, project_id, plugin_id, name, value_json,
/// updated_at`.
pub(crate) fn override_row<R: Row>(r: &R) -> Result<[String; 6], R::Error> {
    Ok([
        r.col(0)?,
        r.col(1)?,
        r.col(2)?,
        r.col(3)?,
        r.col(4)?,
        r.col(5)?,
    ])
}

/// A setting override from its stored columns ([`override_row`]); a value that is not valid
/// JSON is an error naming the setting.
pub(crate) fn setting_override(
    label: &str,
    [user_id, project_id, plugin_id, name, raw, updated_at]: [String; 6],
) -> Result<SettingOverride, StoreError> {
    let value = serde_json::from_str(&raw).map_err(|e| StoreError::CorruptSetting {
        db: label.to_owned(),
        setting: format!("setting `{name}` of plugin `{plugin_id}` for user `{user_id}`"),
        reason: e.to_string(),
    })?;
    Ok(SettingOverride {
        user_id,
        project_id,
        plugin_id,
        name,
        value,
        updated_at,
    })
}

/// A stored `value_json` text as a JSON value.
pub(crate) fn decode(
    label: &str,
    scope: &StateScope,
    key: &str,
    text: &str,
) -> Result<serde_json::Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| corrupt_value(label, scope, key, format!("invalid JSON: {e}")))
}

/// The stored value of `key` in `scope` cannot be read, for `reason`.
pub(crate) fn corrupt_value(
    label: &str,
    scope: &StateScope,
    key: &str,
    reason: String,
) -> StoreError {
    StoreError::CorruptValue {
        db: label.to_owned(),
        scope: Box::new(scope.clone()),
        key: key.to_owned(),
        reason,
    }
}
