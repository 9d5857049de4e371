//! Warden's SQLite persistence: plugin-scoped JSON state and the rule execution log.
//!
//! A [`Store`] wraps one SQLite database (bundled SQLite, WAL journal, 5 s busy
//! timeout) whose schema is brought up to date by versioned migrations when it is
//! opened. Plugin state is a set of JSON values keyed by a [`StateScope`]
//! (user, project, plugin) and a key; writes arrive in groups that are each applied
//! atomically inside one transaction ([`Store::apply_writes`]). The execution log
//! records one [`ExecutionRecord`] per rule evaluation and reads them back newest
//! first through an [`ExecutionFilter`].
//!
//! Invariant: this crate never knows about rules, trees, scripts or templates. It
//! stores JSON values and rows; giving them meaning is the caller's business.
//!
//! ```
//! use serde_json::json;
//! use warden_store::{StateScope, StateWrite, Store};
//!
//! let store = Store::in_memory()?;
//! let scope = StateScope::new("alice", "my-project", "counter");
//! let results = store.apply_writes(&[vec![
//!     StateWrite::set(scope.clone(), "count", json!(3)),
//!     StateWrite::set(scope.clone(), "last", json!({"tool": "bash"})),
//! ]])?;
//! assert!(results.iter().all(Result::is_ok));
//! assert_eq!(store.state_get(&scope, "count")?, Some(json!(3)));
//!
//! store.apply_writes(&[vec![StateWrite::delete(scope.clone(), "count")]])?;
//! assert_eq!(store.state_get(&scope, "count")?, None);
//! # Ok::<(), warden_store::StoreError>(())
//! ```

#![warn(missing_docs)]

mod controls;
mod error;
mod migrations;
mod sessions;
mod tick;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

pub use controls::{ALL_PROJECTS, RuleToggle, SettingOverride};
pub use error::StoreError;
pub use sessions::{SessionSummary, SessionWrite, StoredSession};
pub use tick::TickTransaction;

/// How long a statement waits for another connection's lock before failing (SQLite retries
/// with a growing back-off meanwhile). A tick takes the lock once, so this bounds how long a
/// tick can wait; past it the tick fails visibly ([`StoreError::Busy`]) instead of hanging.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether SQLite gave up waiting for another connection's lock.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Number of rows [`Store::executions`] returns when the filter sets no limit.
pub const DEFAULT_EXECUTION_LIMIT: usize = 100;

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
    /// At most this many rows (default [`DEFAULT_EXECUTION_LIMIT`]).
    pub limit: Option<usize>,
}

/// A row read back: the record plus its id and created_at text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    /// The row id; larger ids were recorded later.
    pub id: i64,
    /// When the row was recorded, as SQLite `datetime('now')` text (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub created_at: String,
    /// The record as it was written.
    pub record: ExecutionRecord,
}

impl ExecutionRow {
    /// The row as JSON, as `warden log --json` prints it and the service serves it: `id`,
    /// `at`, `user`, `project`, `session`, `rule`, `hook`, `matched`, `acted`, `ms`, `error`,
    /// `decision`.
    pub fn to_json(&self) -> serde_json::Value {
        let r = &self.record;
        serde_json::json!({
            "id": self.id,
            "at": self.created_at,
            "user": r.user_id,
            "project": r.project_id,
            "session": r.session_id,
            "rule": r.rule_id,
            "hook": r.trigger,
            "matched": r.condition_result,
            "acted": r.action_executed,
            "ms": r.execution_time_ms,
            "error": r.error_message,
            "decision": r.decision,
        })
    }
}

/// A handle on one Warden database. Cheap to share: it is `Send + Sync` and
/// serializes access to its single connection with a mutex.
pub struct Store {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    /// How the database is named in error messages.
    label: String,
    /// How long a statement waits for another connection's lock.
    lock_timeout: Duration,
}

// `Store` is shared between threads by its callers.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
};

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("db", &self.label).finish()
    }
}

const UPSERT_STATE: &str = "
INSERT INTO plugin_state (user_id, project_id, plugin_id, key, value_json)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT(user_id, project_id, plugin_id, key)
DO UPDATE SET value_json = excluded.value_json, updated_at = datetime('now')";

const DELETE_STATE: &str = "
DELETE FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND key = ?4";

const SELECT_STATE: &str = "
SELECT value_json FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND key = ?4";

const SELECT_STATE_ALL: &str = "
SELECT key, value_json FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3";

/// Every key of `scope`, as stored.
fn select_state_all(
    conn: &Connection,
    scope: &StateScope,
) -> rusqlite::Result<Vec<(String, SqlValue)>> {
    let mut stmt = conn.prepare_cached(SELECT_STATE_ALL)?;
    let rows = stmt.query_map(params![scope.user, scope.project, scope.plugin], |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, SqlValue>(1)?))
    })?;
    rows.collect()
}

/// Applies one group of writes, in order, on `conn` (inside the caller's transaction).
fn write_group(store: &Store, conn: &Connection, group: &[StateWrite]) -> Result<(), StoreError> {
    for write in group {
        let StateWrite { scope, key, value } = write;
        let result = match value {
            Some(value) => conn.prepare_cached(UPSERT_STATE).and_then(|mut stmt| {
                stmt.execute(params![
                    scope.user,
                    scope.project,
                    scope.plugin,
                    key,
                    value.to_string()
                ])
            }),
            None => conn.prepare_cached(DELETE_STATE).and_then(|mut stmt| {
                stmt.execute(params![scope.user, scope.project, scope.plugin, key])
            }),
        };
        result.map_err(|cause| StoreError::Write {
            db: store.label.clone(),
            scope: Box::new(scope.clone()),
            key: key.clone(),
            cause,
        })?;
    }
    Ok(())
}

const INSERT_EXECUTION: &str = "
INSERT INTO rule_execution_log (user_id, project_id, session_id, rule_id, trigger,
    condition_result, action_executed, execution_time_ms, error_message, decision)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

impl Store {
    /// Opens (creating it and its parent directories if missing) the database at
    /// `path`, switches it to WAL, sets a 5 s busy timeout, turns foreign keys on and
    /// runs pending migrations.
    ///
    /// Fails with [`StoreError::SchemaTooNew`] if the file was written by a newer warden.
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let path = path.as_ref();
        let label = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|cause| StoreError::CreateDir {
                db: label.clone(),
                cause,
            })?;
        }
        let conn = Connection::open(path).map_err(|cause| StoreError::Open {
            db: label.clone(),
            cause,
        })?;
        Self::setup(conn, Some(path.to_path_buf()), label)
    }

    /// Opens a private in-memory database with the same schema (for tests and dry runs).
    pub fn in_memory() -> Result<Store, StoreError> {
        let label = "in-memory database".to_owned();
        let conn = Connection::open_in_memory().map_err(|cause| StoreError::Open {
            db: label.clone(),
            cause,
        })?;
        Self::setup(conn, None, label)
    }

    fn setup(
        mut conn: Connection,
        path: Option<PathBuf>,
        label: String,
    ) -> Result<Store, StoreError> {
        let open_err = |cause| StoreError::Open {
            db: label.clone(),
            cause,
        };
        conn.busy_timeout(DEFAULT_LOCK_TIMEOUT).map_err(open_err)?;
        // Returns the resulting mode; in-memory databases stay "memory", which is fine.
        let _mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(open_err)?;
        // NORMAL is the recommended pairing for WAL: no corruption on power loss,
        // at worst the last commits are lost; FULL would fsync on every commit.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        // A process that closes the database checkpoints the write-ahead log (SQLite's
        // default): the next process then opens a database with an empty log. Leaving the log
        // for the next process would save the closing one two fsyncs, but cost every opening
        // one the rebuilding of the log's index, in proportion to the log (a hook process opens
        // the database at every event).
        conn.set_prepared_statement_cache_capacity(32);
        migrations::migrate(&mut conn, &label)?;
        Ok(Store {
            conn: Mutex::new(conn),
            path,
            label,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        })
    }

    /// Sets how long a statement waits for another process's lock on the database before it
    /// fails with [`StoreError::Busy`] (default [`DEFAULT_LOCK_TIMEOUT`]).
    pub fn set_lock_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        let conn = self.conn.get_mut().unwrap_or_else(PoisonError::into_inner);
        conn.busy_timeout(timeout)
            .map_err(|cause| StoreError::Sqlite {
                db: self.label.clone(),
                cause,
            })?;
        self.lock_timeout = timeout;
        Ok(())
    }

    /// Makes every commit durable on power loss (`true`: SQLite's `synchronous = FULL`, an
    /// fsync of the write-ahead log at each commit) or only on a crash of the process (`false`,
    /// the default: `NORMAL`, where a power cut may lose the last commits but never damages the
    /// file).
    pub fn set_synchronous_full(&self, full: bool) -> Result<(), StoreError> {
        let conn = self.lock();
        conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
            .map_err(|e| self.sql_err(e))
    }

    /// Whether every commit is made durable on power loss ([`Store::set_synchronous_full`]).
    pub fn is_synchronous_full(&self) -> Result<bool, StoreError> {
        let conn = self.lock();
        let level: i64 = conn
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .map_err(|e| self.sql_err(e))?;
        Ok(level >= 2)
    }

    /// The file this store was opened from; `None` for [`Store::in_memory`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The schema version of the database (`PRAGMA user_version`).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        let conn = self.lock();
        migrations::user_version(&conn).map_err(|e| self.sql_err(e))
    }

    /// The newest schema version this build knows; an opened store is always at it.
    pub fn latest_schema_version() -> u32 {
        migrations::latest_version()
    }

    /// What SQLite's `PRAGMA integrity_check` finds wrong in the database file (empty: nothing).
    pub fn check_integrity(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let rows = (|| {
            let mut stmt = conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| self.sql_err(e))?;
        Ok(rows.into_iter().filter(|r| r != "ok").collect())
    }

    /// Reads one key of plugin state; `None` if it is not set.
    pub fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let conn = self.lock();
        let raw = (|| {
            conn.prepare_cached(SELECT_STATE)?
                .query_row(
                    params![scope.user, scope.project, scope.plugin, key],
                    |row| row.get::<_, SqlValue>(0),
                )
                .optional()
        })()
        .map_err(|e| self.sql_err(e))?;
        drop(conn);
        raw.map(|raw| self.decode(scope, key, raw)).transpose()
    }

    /// Reads every key of plugin state in `scope`.
    pub fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let conn = self.lock();
        let rows = select_state_all(&conn, scope).map_err(|e| self.sql_err(e))?;
        drop(conn);
        rows.into_iter()
            .map(|(key, raw)| {
                let value = self.decode(scope, &key, raw)?;
                Ok((key, value))
            })
            .collect()
    }

    /// Applies groups of writes in ONE transaction; each group is applied completely
    /// or not at all (a SAVEPOINT per group: if any write of a group fails, that group
    /// is rolled back and the others still commit). Returns one Result per group, in
    /// order. An Err of the outer Result means the transaction itself could not begin
    /// or commit (then nothing was written).
    ///
    /// Upsert keeps `created_at` and updates `updated_at`. Within a group, writes are
    /// applied in order, so a later write of the same key wins.
    pub fn apply_writes(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let mut conn = self.lock();
        // IMMEDIATE takes the write lock up front, so the busy timeout applies here
        // instead of failing later when a read transaction tries to upgrade.
        let mut tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql_err(e))?;
        let mut results = Vec::with_capacity(groups.len());
        for group in groups {
            let sp = tx.savepoint().map_err(|e| self.sql_err(e))?;
            match write_group(self, &sp, group) {
                Ok(()) => {
                    sp.commit().map_err(|e| self.sql_err(e))?;
                    results.push(Ok(()));
                }
                Err(err) => {
                    if sp.is_autocommit() {
                        // The failure rolled back the whole transaction (e.g. disk full):
                        // nothing was written, so report it as the outer error.
                        return Err(err);
                    }
                    // Drop behavior is Rollback: ROLLBACK TO + RELEASE.
                    sp.finish().map_err(|e| self.sql_err(e))?;
                    results.push(Err(err));
                }
            }
        }
        tx.commit().map_err(|e| self.sql_err(e))?;
        Ok(results)
    }

    /// Appends records to the execution log, all in one transaction.
    pub fn record_executions(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let tx = self.tick();
        tx.record_executions(records)?;
        tx.commit(None).map(|_| ())
    }

    /// Reads the execution log back, newest first, filtered by `filter`.
    pub fn executions(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRow>, StoreError> {
        let mut sql = String::from(
            "SELECT id, created_at, user_id, project_id, session_id, rule_id, trigger, \
             condition_result, action_executed, execution_time_ms, error_message, decision \
             FROM rule_execution_log",
        );
        let mut conditions: Vec<&str> = Vec::new();
        let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
        if let Some(rule_id) = &filter.rule_id {
            if rule_id.contains('/') {
                conditions.push("rule_id = ?");
                args.push(rule_id);
            } else {
                // A bare id matches the rule of that id in any plugin (`plugin/id`) too.
                conditions.push("(rule_id = ? OR substr(rule_id, -length(?) - 1) = '/' || ?)");
                args.push(rule_id);
                args.push(rule_id);
                args.push(rule_id);
            }
        }
        if let Some(session_id) = &filter.session_id {
            conditions.push("session_id = ?");
            args.push(session_id);
        }
        if let Some(user_id) = &filter.user_id {
            conditions.push("user_id = ?");
            args.push(user_id);
        }
        if filter.failures_only {
            conditions.push("error_message IS NOT NULL");
        }
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        // created_at has one-second resolution; id breaks ties in insertion order.
        sql.push_str(" ORDER BY created_at DESC, id DESC LIMIT ?");
        let limit =
            i64::try_from(filter.limit.unwrap_or(DEFAULT_EXECUTION_LIMIT)).unwrap_or(i64::MAX);
        args.push(&limit);

        let conn = self.lock();
        (|| {
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(args.as_slice(), |row| {
                Ok(ExecutionRow {
                    id: row.get(0)?,
                    created_at: row.get(1)?,
                    record: ExecutionRecord {
                        user_id: row.get(2)?,
                        project_id: row.get(3)?,
                        session_id: row.get(4)?,
                        rule_id: row.get(5)?,
                        trigger: row.get(6)?,
                        condition_result: row.get::<_, i64>(7)? != 0,
                        action_executed: row.get::<_, i64>(8)? != 0,
                        execution_time_ms: row.get(9)?,
                        error_message: row.get(10)?,
                        decision: row.get(11)?,
                    },
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// Locks the connection. A poisoned mutex is recovered: rusqlite rolls back any
    /// open transaction when a panic unwinds through it, so the connection is usable.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sql_err(&self, cause: rusqlite::Error) -> StoreError {
        if is_busy(&cause) {
            return self.busy();
        }
        StoreError::Sqlite {
            db: self.label.clone(),
            cause,
        }
    }

    /// A tick's transaction ended by a write the database refused.
    fn refused(&self, reason: String) -> StoreError {
        StoreError::Refused {
            db: self.label.clone(),
            reason,
        }
    }

    /// The lock is held elsewhere for longer than this store waits.
    fn busy(&self) -> StoreError {
        StoreError::Busy {
            db: self.label.clone(),
            waited: self.lock_timeout,
        }
    }

    /// Turns a stored `value_json` cell into a JSON value.
    fn decode(
        &self,
        scope: &StateScope,
        key: &str,
        raw: SqlValue,
    ) -> Result<serde_json::Value, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptValue {
            db: self.label.clone(),
            scope: Box::new(scope.clone()),
            key: key.to_owned(),
            reason,
        };
        match raw {
            SqlValue::Text(text) => {
                serde_json::from_str(&text).map_err(|e| corrupt(format!("invalid JSON: {e}")))
            }
            other => Err(corrupt(format!(
                "expected JSON text, found {}",
                other.data_type()
            ))),
        }
    }

    /// Runs `f` on the raw connection (tests only: install triggers, poke at rows).
    #[cfg(test)]
    fn with_conn<R>(&self, f: impl FnOnce(&Connection) -> R) -> R {
        f(&self.lock())
    }
}

#[cfg(test)]
mod tests;
