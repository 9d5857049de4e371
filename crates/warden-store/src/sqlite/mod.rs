//! The SQLite back end: one file (bundled SQLite, WAL journal), or a private in-memory
//! database; one connection behind a mutex.
//!
//! - `mod.rs`: opening, plugin state, the execution log.
//! - `migrations.rs`: versioned schema migrations (`PRAGMA user_version`).
//! - `controls.rs`: users' toggles and setting overrides, `data_version`.
//! - `sessions.rs`: durable session rows.
//! - `tick.rs`: one tick's IMMEDIATE transaction.
//! - `batch.rs`: sessions saved in batches, on a thread of their own.
//! - `copy.rs`: every row out and in, for `warden migrate`.

pub(crate) mod batch;
pub(crate) mod controls;
pub(crate) mod copy;
pub(crate) mod migrations;
pub(crate) mod sessions;
pub(crate) mod tick;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{DbError, Named, StoreError};
use crate::sql::{self, execution_row};
use crate::types::{ExecutionFilter, ExecutionRecord, ExecutionRow, StateScope, StateWrite};

impl Named {
    /// A failed SQLite call, as this store reports it.
    pub(crate) fn sql_err(&self, cause: rusqlite::Error) -> StoreError {
        if is_busy(&cause) {
            return self.busy();
        }
        self.database(cause)
    }
}

/// Runs `f`, which uses the connection (and may wait for it, or for another process's lock),
/// so that it does not hold up a tokio runtime: on a worker of a multi-thread runtime it runs
/// through `block_in_place` (the runtime moves its other tasks to another thread meanwhile);
/// anywhere else (a plain thread, the blocking pool, a current-thread runtime, which waits as
/// its host chose) it just runs. A server ticks on its runtime's workers, and most ticks never
/// call the store (their save goes to the batching thread); those that do pay for the hand-over.
pub(crate) fn off_runtime<R>(f: impl FnOnce() -> R) -> R {
    if on_runtime_worker() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Whether this thread runs a multi-thread tokio runtime's tasks.
fn on_runtime_worker() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    matches!(
        Handle::try_current().map(|h| h.runtime_flavor()),
        Ok(RuntimeFlavor::MultiThread)
    )
}

/// Switches a database to WAL unless it is in WAL already (the mode is kept in the file; an
/// in-memory database stays in its own mode).
fn wal(conn: &Connection) -> rusqlite::Result<()> {
    let mode: String = conn.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
    if mode.eq_ignore_ascii_case("wal") || mode.eq_ignore_ascii_case("memory") {
        return Ok(());
    }
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
    Ok(())
}

/// Whether opening failed only because another connection held the database.
fn busy_opening(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Open { cause: DbError::Sqlite(c), .. }
            | StoreError::Migration { cause: DbError::Sqlite(c), .. } if is_busy(c)
    )
}

/// Whether SQLite gave up waiting for another connection's lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A SQLite database: one connection, serialized by a mutex.
pub(crate) struct SqliteStore {
    /// Shared with the thread that saves sessions in batches.
    pub(crate) conn: Arc<Mutex<Connection>>,
    /// A file's second connection, for reads made on a runtime worker (see
    /// [`SqliteStore::reader`]); opened at the first such read (`None` inside: it could not be).
    reader: std::sync::OnceLock<Option<Mutex<Connection>>>,
    path: Option<PathBuf>,
    /// How the database is named in errors.
    pub(crate) db: Named,
    /// The size of the write-ahead log past which it is checkpointed at close, when it is
    /// not checkpointed at every close ([`crate::Store::checkpoint_past`]).
    checkpoint_past: Option<(u64, PathBuf)>,
    /// The thread that checkpoints the write-ahead log on a connection of its own
    /// ([`crate::Store::checkpoint_in_background`]); it stops when its sender is dropped.
    checkpointer: Mutex<Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>>,
    /// How many rounds the checkpoint thread has finished (a test paces its commits by them).
    checkpoint_rounds: Arc<std::sync::atomic::AtomicU64>,
    /// The lock timeout in milliseconds, for the checkpoint thread to put back on the store's
    /// connection after a restart of the log (it may change after the thread starts).
    timeout_ms: Arc<std::sync::atomic::AtomicU64>,
    /// The schema is still to be made. A file's is made when it opens, where a migration's
    /// failure belongs; an in-memory database's at its first use
    /// ([`SqliteStore::conn`]): a replay, or a session whose rules never touch the store,
    /// does not pay for it (half of a replay's start-up). Read and cleared under the
    /// connection's lock.
    unmade: std::sync::atomic::AtomicBool,
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self
            .checkpointer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            drop(stop);
            let _ = thread.join();
        }
        self.checkpoint_if_past();
    }
}

impl SqliteStore {
    /// Checkpoints and empties the write-ahead log if it is past the size given to
    /// [`crate::Store::checkpoint_past`] (what closing the store does).
    pub(crate) fn checkpoint_if_past(&self) {
        let Some((limit, wal)) = &self.checkpoint_past else {
            return;
        };
        if std::fs::metadata(wal).is_ok_and(|m| m.len() > *limit) {
            let conn = self.lock();
            // Briefly: another process's transaction makes it wait, and the next process to
            // close will try again.
            let _ = conn.busy_timeout(CHECKPOINT_WAIT);
            // A checkpoint that other connections hold up answers busy (1), not an error.
            match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            }) {
                Ok(0) => {}
                Ok(_) => {
                    tracing::warn!(db = %self.db.label, "the write-ahead log was not checkpointed at close: other connections were using it (the next process to close tries again)")
                }
                Err(e) => {
                    tracing::warn!(db = %self.db.label, error = %e, "the write-ahead log was not checkpointed at close")
                }
            }
            let _ = conn.busy_timeout(self.db.lock_timeout);
        }
    }
}

/// Copies the rest of the write-ahead log into the file and makes the next commit write it
/// from its start (RESTART), on the store's own connection: this process's commits wait on
/// its mutex meanwhile (briefly: PASSIVE checkpoints copied most of the log already), not in
/// SQLite's busy handler, which sleeps in steps of milliseconds. It does not wait for other
/// processes: one holding the database or reading the log makes it give up at once (holding
/// the connection while it waited would hold this process's ticks up), and the next round
/// tries again.
fn restart_log(main: &Mutex<Connection>, label: &str, waited: Duration) {
    let conn = main.lock().unwrap_or_else(PoisonError::into_inner);
    let _ = conn.busy_timeout(Duration::ZERO);
    match conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0)) {
        Ok(0) => {}
        Ok(_) => {
            tracing::debug!(db = %label, "the write-ahead log could not start over yet: another process is reading it")
        }
        Err(e) => {
            tracing::warn!(db = %label, error = %e, "the write-ahead log could not be restarted")
        }
    }
    let _ = conn.busy_timeout(waited);
}

/// How long a store that closes waits for other processes to checkpoint the write-ahead log
/// ([`crate::Store::checkpoint_past`]).
const CHECKPOINT_WAIT: Duration = Duration::from_millis(200);

/// How SQLite writes what the execution log's query needs.
const DIALECT: sql::Dialect = sql::Dialect {
    param: '?',
    ends_with: "substr(rule_id, -length({p}) - 1) = '/' || {p}",
    shadow: "shadow <> 0",
};

pub(crate) const UPSERT_STATE: &str = "
INSERT INTO plugin_state (user_id, project_id, plugin_id, key, value_json)
VALUES (?1, ?2, ?3, ?4, ?5)
ON CONFLICT(user_id, project_id, plugin_id, key)
DO UPDATE SET value_json = excluded.value_json, updated_at = datetime('now')";

pub(crate) const DELETE_STATE: &str = "
DELETE FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND key = ?4";

const SELECT_STATE: &str = "
SELECT value_json FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND key = ?4";

const SELECT_STATE_ALL: &str = "
SELECT key, value_json FROM plugin_state
WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3";

pub(crate) const INSERT_EXECUTION: &str = "
INSERT INTO rule_execution_log (user_id, project_id, session_id, rule_id, trigger,
    condition_result, action_executed, execution_time_ms, error_message, decision, shadow,
    live_decision)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

/// Every row `sql` selects with `params`, each read by `f` (the statement is kept prepared).
pub(crate) fn select<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params, f)?;
    rows.collect()
}

/// Runs `sql` with `params` (the statement is kept prepared); how many rows it changed.
pub(crate) fn execute(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// The value of `key` in `scope`, read on `conn` (the store's, or a tick's).
pub(crate) fn read_state(
    db: &Named,
    conn: &Connection,
    scope: &StateScope,
    key: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let raw = conn
        .prepare_cached(SELECT_STATE)
        .and_then(|mut stmt| {
            let args = params![scope.user, scope.project, scope.plugin, key];
            stmt.query_row(args, |row| row.get::<_, SqlValue>(0))
                .optional()
        })
        .map_err(|e| db.sql_err(e))?;
    raw.map(|raw| decode(&db.label, scope, key, raw))
        .transpose()
}

/// Every key of `scope` and its value, read on `conn` (the store's, or a tick's).
pub(crate) fn read_scope(
    db: &Named,
    conn: &Connection,
    scope: &StateScope,
) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
    let args = params![scope.user, scope.project, scope.plugin];
    let rows = select(conn, SELECT_STATE_ALL, args, |row| {
        Ok((row.get::<_, String>(0)?, row.get::<_, SqlValue>(1)?))
    })
    .map_err(|e| db.sql_err(e))?;
    rows.into_iter()
        .map(|(key, raw)| {
            let value = decode(&db.label, scope, &key, raw)?;
            Ok((key, value))
        })
        .collect()
}

/// Applies groups of writes on `conn`, inside the caller's transaction, each in a savepoint:
/// whole or not at all. One result per group; the failure of a group that rolled the whole
/// transaction back (a full disk), or that `ends` says ends it, is the outer error instead.
pub(crate) fn write_groups(
    db: &Named,
    conn: &Connection,
    groups: &[Vec<StateWrite>],
    ends: impl Fn(&StoreError) -> bool,
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let step = |sql: &str| conn.execute_batch(sql).map_err(|e| db.sql_err(e));
    let mut results = Vec::with_capacity(groups.len());
    for group in groups {
        if group.is_empty() {
            results.push(Ok(()));
            continue;
        }
        step("SAVEPOINT write_group")?;
        match write_group(db, conn, group) {
            Ok(()) => {
                step("RELEASE write_group")?;
                results.push(Ok(()));
            }
            Err(err) if conn.is_autocommit() || ends(&err) => return Err(err),
            Err(err) => {
                step("ROLLBACK TO write_group; RELEASE write_group")?;
                results.push(Err(err));
            }
        }
    }
    Ok(results)
}

/// Applies one group of writes, in order, on `conn` (inside the caller's transaction).
fn write_group(db: &Named, conn: &Connection, group: &[StateWrite]) -> Result<(), StoreError> {
    for write in group {
        let StateWrite { scope, key, value } = write;
        let result = match value {
            Some(value) => {
                let value = value.to_string();
                let args = params![scope.user, scope.project, scope.plugin, key, value];
                execute(conn, UPSERT_STATE, args)
            }
            None => {
                let args = params![scope.user, scope.project, scope.plugin, key];
                execute(conn, DELETE_STATE, args)
            }
        };
        result.map_err(|e| db.write(scope, key, e))?;
    }
    Ok(())
}

/// Inserts execution-log rows on `conn` (inside the caller's transaction).
pub(crate) fn insert_executions(
    conn: &Connection,
    records: &[ExecutionRecord],
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(INSERT_EXECUTION)?;
    for r in records {
        stmt.execute(record_values(r).as_slice())?;
    }
    Ok(())
}

/// A record's values, in the log's column order from `user_id` on (after `id`, `created_at`).
pub(crate) fn record_values(r: &ExecutionRecord) -> [&dyn rusqlite::ToSql; 12] {
    [
        &r.user_id,
        &r.project_id,
        &r.session_id,
        &r.rule_id,
        &r.trigger,
        &r.condition_result,
        &r.action_executed,
        &r.execution_time_ms,
        &r.error_message,
        &r.decision,
        &r.shadow,
        &r.live_decision,
    ]
}

/// Turns a stored `value_json` cell into a JSON value (SQLite's cell may hold another type).
pub(crate) fn decode(
    label: &str,
    scope: &StateScope,
    key: &str,
    raw: SqlValue,
) -> Result<serde_json::Value, StoreError> {
    match raw {
        SqlValue::Text(text) => sql::decode(label, scope, key, &text),
        other => {
            let found = format!("expected JSON text, found {}", other.data_type());
            Err(sql::corrupt_value(label, scope, key, found))
        }
    }
}

impl SqliteStore {
    /// Opens (creating it and its parent directories if missing) the database at `path`,
    /// waiting at most `timeout` for other connections that hold it meanwhile.
    pub(crate) fn open(path: &Path, timeout: Duration) -> Result<SqliteStore, StoreError> {
        let db = Named {
            label: path.display().to_string(),
            lock_timeout: timeout,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|cause| StoreError::CreateDir {
                db: db.label.clone(),
                cause,
            })?;
        }
        let conn = Connection::open(path).map_err(|e| db.open(e))?;
        Self::setup(conn, Some(path.to_path_buf()), db)
    }

    /// Opens a private in-memory database with the same schema.
    pub(crate) fn in_memory() -> Result<SqliteStore, StoreError> {
        let db = Named {
            label: "in-memory database".to_owned(),
            lock_timeout: crate::DEFAULT_LOCK_TIMEOUT,
        };
        let conn = Connection::open_in_memory().map_err(|e| db.open(e))?;
        Self::setup(conn, None, db)
    }

    fn setup(
        mut conn: Connection,
        path: Option<PathBuf>,
        db: Named,
    ) -> Result<SqliteStore, StoreError> {
        let timeout = db.lock_timeout;
        let open_err = |e: rusqlite::Error| db.open(e);
        conn.busy_timeout(timeout).map_err(open_err)?;
        // NORMAL is the recommended pairing for WAL: no corruption on power loss,
        // at worst the last commits are lost; FULL would fsync on every commit.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        // Processes that open a database nobody made yet all at once (Claude Code runs the
        // hooks of parallel tool calls together) meet here. Switching to WAL needs the
        // database alone, and SQLite answers busy at once rather than wait for it: the switch
        // (and the migrations after it) are tried again until `timeout`, like any write.
        let deadline = std::time::Instant::now() + timeout;
        let mut pause = Duration::from_millis(1);
        let in_memory = path.is_none();
        loop {
            let setup = wal(&conn).map_err(open_err).and_then(|()| {
                if in_memory {
                    Ok(())
                } else {
                    migrations::migrate(&mut conn, &db)
                }
            });
            match setup {
                Ok(()) => break,
                Err(e) if busy_opening(&e) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(db.busy());
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
        // A process that closes the database checkpoints the write-ahead log (SQLite's
        // default): the next process then opens a database with an empty log. A process of one
        // event leaves it instead, up to a size (`checkpoint_past`): the next one rebuilds the
        // log's index in proportion to the log, which is cheaper than four fsyncs while the log
        // is small.
        conn.set_prepared_statement_cache_capacity(32);
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            reader: std::sync::OnceLock::new(),
            path,
            db,
            checkpoint_past: None,
            checkpointer: Mutex::new(None),
            checkpoint_rounds: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            timeout_ms: Arc::new(std::sync::atomic::AtomicU64::new(
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            )),
            unmade: std::sync::atomic::AtomicBool::new(in_memory),
        })
    }

    pub(crate) fn checkpoint_in_background(
        &self,
        every: Duration,
        restart_past: u32,
    ) -> Result<(), StoreError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let mut checkpointer = self
            .checkpointer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if checkpointer.is_some() {
            return Ok(());
        }
        let own = Connection::open(&path).map_err(|e| self.db.open(e))?;
        // Briefly: a checkpoint that finds the log busy copies what it can, and the next one
        // goes on.
        own.busy_timeout(CHECKPOINT_WAIT)
            .map_err(|e| self.sql_err(e))?;
        self.lock()
            .pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| self.sql_err(e))?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let label = self.db.label.clone();
        let main = self.conn.clone();
        let timeout_ms = self.timeout_ms.clone();
        let rounds = self.checkpoint_rounds.clone();
        let thread = std::thread::Builder::new()
            .name("warden-checkpoint".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(every)
                {
                    // PASSIVE: copies what no reader still needs and never waits for a writer.
                    // Under a steady load it never catches up with the commits, so the log
                    // would never start over: past `restart_past` pages it is restarted.
                    let frames = match own.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                        r.get::<_, i64>(1)
                    }) {
                        Ok(frames) => frames,
                        Err(e) => {
                            tracing::warn!(db = %label, error = %e, "a background checkpoint failed");
                            continue;
                        }
                    };
                    if frames >= i64::from(restart_past) {
                        let waited = Duration::from_millis(
                            timeout_ms.load(std::sync::atomic::Ordering::Relaxed),
                        );
                        restart_log(&main, &label, waited);
                    }
                    rounds.fetch_add(1, std::sync::atomic::Ordering::Release);
                }
            })
            .map_err(|e| {
                self.db.open(DbError::Server(format!("cannot start the checkpoint thread: {e}")))
            })?;
        *checkpointer = Some((stop, thread));
        Ok(())
    }

    /// How many rounds the checkpoint thread has finished (a checkpoint, and the log's restart
    /// when it was past its bound).
    #[cfg(test)]
    pub(crate) fn checkpoint_rounds(&self) -> u64 {
        self.checkpoint_rounds
            .load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn checkpoint_past(&mut self, pages: u32) -> Result<(), StoreError> {
        let conn = self.lock();
        // Where SQLite keeps the log: beside the file it opened (none for a memory database).
        let Some(db) = conn.path().filter(|p| !p.is_empty()) else {
            return Ok(());
        };
        let wal = PathBuf::from(format!("{db}-wal"));
        let page_size: i64 = conn
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .map_err(|e| self.sql_err(e))?;
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(|e| self.sql_err(e))?;
        // The log's own checkpoints (at 1,000 pages) copy it without emptying it; a process
        // that reads a log left by another cannot tell what was copied already, and would copy
        // it all again at every such checkpoint while it kept growing.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(|e| self.sql_err(e))?;
        drop(conn);
        // The log's header, and a header and a checksum per page.
        let page = u64::try_from(page_size).unwrap_or(4096) + 24;
        self.checkpoint_past = Some((32 + u64::from(pages) * page, wal));
        Ok(())
    }

    pub(crate) fn set_lock_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        self.lock()
            .busy_timeout(timeout)
            .map_err(|e| self.db.database(e))?;
        self.db.lock_timeout = timeout;
        self.timeout_ms.store(
            u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    pub(crate) fn set_synchronous_full(&self, full: bool) -> Result<(), StoreError> {
        let conn = self.lock();
        conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
            .map_err(|e| self.sql_err(e))
    }

    pub(crate) fn is_synchronous_full(&self) -> Result<bool, StoreError> {
        let conn = self.lock();
        let level: i64 = conn
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .map_err(|e| self.sql_err(e))?;
        Ok(level >= 2)
    }

    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub(crate) fn schema_version(&self) -> Result<u32, StoreError> {
        let conn = self.conn()?;
        migrations::user_version(&conn).map_err(|e| self.sql_err(e))
    }

    pub(crate) fn check_integrity(&self) -> Result<Vec<String>, StoreError> {
        let rows = select(&*self.conn()?, "PRAGMA integrity_check", [], |row| {
            row.get(0)
        })
        .map_err(|e| self.sql_err(e))?;
        Ok(rows.into_iter().filter(|r: &String| r != "ok").collect())
    }

    pub(crate) fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        read_state(&self.db, &*self.reader()?, scope, key)
    }

    pub(crate) fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        read_scope(&self.db, &*self.reader()?, scope)
    }

    pub(crate) fn apply_writes(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let mut conn = self.conn()?;
        // IMMEDIATE takes the write lock up front, so the busy timeout applies here
        // instead of failing later when a read transaction tries to upgrade.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql_err(e))?;
        let results = write_groups(&self.db, &tx, groups, |_| false)?;
        tx.commit().map_err(|e| self.sql_err(e))?;
        Ok(results)
    }

    pub(crate) fn executions(
        &self,
        filter: &ExecutionFilter,
    ) -> Result<Vec<ExecutionRow>, StoreError> {
        let (query, texts, limit) = sql::executions_query(filter, &DIALECT);
        let mut args: Vec<&dyn rusqlite::ToSql> = texts.iter().map(|t| t as _).collect();
        args.push(&limit);
        select(&*self.reader()?, &query, args.as_slice(), |r| {
            execution_row(r)
        })
        .map_err(|e| self.sql_err(e))
    }

    /// The connection a read outside a tick uses. On a runtime worker (a server's thread), a
    /// connection of its own for reads: in WAL mode a reader never waits for a writer, so
    /// neither this store's batching thread nor another process's write lock holds the
    /// server's threads up (they would wait for the store's connection otherwise). Anywhere
    /// else (a hook process, a command, the blocking pool), the store's connection, and no
    /// second one is opened.
    pub(crate) fn reader(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        if let Some(path) = self.path.as_ref().filter(|_| on_runtime_worker()) {
            let reader = self.reader.get_or_init(|| {
                let conn = Connection::open(path).ok()?;
                conn.busy_timeout(self.db.lock_timeout).ok()?;
                conn.set_prepared_statement_cache_capacity(32);
                Some(Mutex::new(conn))
            });
            if let Some(reader) = reader {
                return Ok(reader.lock().unwrap_or_else(PoisonError::into_inner));
            }
        }
        self.conn()
    }

    /// Locks the connection, whose schema may not be made yet: for what does not read or
    /// write the tables (pragmas, checkpoints). A poisoned mutex is recovered: rusqlite rolls
    /// back any open transaction when a panic unwinds through it, so the connection is usable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks the connection, its schema made first if it is not yet (an in-memory database's,
    /// at its first use: see [`SqliteStore::unmade`]).
    pub(crate) fn conn(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        let mut conn = self.lock();
        self.make_schema(&mut conn)?;
        Ok(conn)
    }

    /// Whether the schema is still to be made: then nothing was ever written, and every table
    /// is empty.
    pub(crate) fn is_unmade(&self) -> bool {
        self.unmade.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Makes the schema on `conn` (this store's, locked) if it is not made yet.
    pub(crate) fn make_schema(&self, conn: &mut Connection) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering::{Acquire, Release};
        if self.unmade.load(Acquire) {
            migrations::migrate(conn, &self.db)?;
            self.unmade.store(false, Release);
        }
        Ok(())
    }

    pub(crate) fn sql_err(&self, cause: rusqlite::Error) -> StoreError {
        self.db.sql_err(cause)
    }

    /// Runs `sql` (tests: install triggers, poke at rows).
    #[cfg(test)]
    pub(crate) fn exec(&self, sql: &str) -> Result<(), StoreError> {
        self.conn()?.execute_batch(sql).map_err(|e| self.sql_err(e))
    }
}

#[cfg(test)]
mod tests;
