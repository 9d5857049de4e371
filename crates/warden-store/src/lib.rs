//! Warden's persistence: plugin-scoped JSON state, the rule execution log, users' choices and
//! durable sessions, in SQLite (the default: one file, or memory) or PostgreSQL (one database
//! for many nodes).
//!
//! A [`Store`] is one database, opened from a path or a URL ([`Store::open`]: a
//! `postgres://` or `postgresql://` URL is PostgreSQL, anything else a SQLite file) and brought
//! up to date by versioned migrations. Plugin state is a set of JSON values keyed by a
//! [`StateScope`] (user, project, plugin) and a key; writes arrive in groups that are each
//! applied atomically ([`Store::apply_writes`]). The execution log records one
//! [`ExecutionRecord`] per rule evaluation and reads them back newest first through an
//! [`ExecutionFilter`]. A tick reads and writes through one [`TickTransaction`], which makes a
//! read-modify-write exact across processes and nodes.
//!
//! Both back ends answer the same API and pass the same test suite; where they differ (how
//! another process's changes are noticed, how a tick locks) the method says so.
//!
//! Invariant: this crate never knows about rules, trees, scripts or templates. It stores JSON
//! values and rows; giving them meaning is the caller's business.
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

/// Runs the same expression on whichever back end `$store` holds, with no hand-over: for a read
/// that SQLite makes on its reading connection when on a runtime worker (`SqliteStore::reader`),
/// or a copy's.
macro_rules! read {
    ($store:expr, $s:ident => $e:expr) => {
        match &$store.backend {
            $crate::Inner::Sqlite($s) => $e,
            $crate::Inner::Postgres($s) => $e,
        }
    };
}

mod copy;
mod error;
mod pg;
mod sql;
mod sqlite;
#[cfg(test)]
mod testdb;
mod tick;
mod types;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

pub use error::{DbError, StoreError};
pub use tick::TickTransaction;
pub use types::{
    ALL_PROJECTS, CopyReport, DEFAULT_EXECUTION_LIMIT, ExecutionFilter, ExecutionRecord,
    ExecutionRow, RuleState, RuleToggle, SessionEntry, SessionSave, SessionSummary, SessionWrite,
    SettingOverride, StateScope, StateWrite, StoredSession,
};

use pg::PgStore;
use sqlite::SqliteStore;
use sqlite::batch::Batcher;

/// How long a tick waits for another process's lock before failing (SQLite's busy timeout;
/// PostgreSQL's `lock_timeout`, and how long it waits for a pooled connection). A tick takes
/// its locks once, so this bounds how long a tick can wait; past it the tick fails visibly
/// ([`StoreError::Busy`], [`StoreError::Unreachable`]) instead of hanging.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// How many pages the SQLite write-ahead log may hold before a background checkpoint makes it
/// start over ([`Store::checkpoint_in_background`]): 64 MiB of 4 KiB pages.
pub const RESTART_PAST_PAGES: u32 = 16384;

/// Which database a [`Store`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file, or memory.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

/// A handle on one Warden database. Cheap to share: it is `Send + Sync`; SQLite serializes
/// access to its one connection (a server's threads read on a second one, which writers never
/// hold up), PostgreSQL lends each caller a connection of its pool. Calls that may wait for
/// the database, made on a worker of a multi-thread tokio runtime, hand the thread over to the
/// runtime first (`block_in_place`), on both back ends.
pub struct Store {
    backend: Inner,
    /// SQLite: the thread that saves sessions in batches ([`Store::save_in_batch`]), started
    /// at the first such save.
    batcher: Mutex<Option<Batcher>>,
}

/// The back ends. A closed set, matched in each method: adding a method to one back end
/// without the other does not compile, and a tick costs no allocation or indirect call. (A
/// store is made once per process: the size of the larger variant does not matter.)
#[allow(clippy::large_enum_variant)]
enum Inner {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

// `Store` is shared between threads by its callers.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
};

impl Drop for Store {
    fn drop(&mut self) {
        // The saves still queued are committed before the database closes.
        self.stop_batcher();
    }
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store").field("db", &self.label()).finish()
    }
}

/// Runs the same expression on whichever back end `$store` holds.
/// (SQLite's calls do not hold up a tokio runtime: see `sqlite::off_runtime`; PostgreSQL's
/// go through `pg::conn::blocking`.)
macro_rules! each {
    ($store:expr, $s:ident => $e:expr) => {
        match &$store.backend {
            Inner::Sqlite($s) => sqlite::off_runtime(|| $e),
            Inner::Postgres($s) => $e,
        }
    };
}

impl Store {
    /// Opens the database `db` names: a PostgreSQL URL (`postgres://USER:PASSWORD@HOST:PORT/DB`,
    /// or `postgresql://`; see [`Store::open_postgres`]), or else a SQLite file, created with
    /// its folders if missing (see [`Store::open_sqlite`]). Runs pending migrations.
    ///
    /// Fails with [`StoreError::SchemaTooNew`] if the database was written by a newer warden.
    pub fn open(db: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with_lock_timeout(db, DEFAULT_LOCK_TIMEOUT)
    }

    /// Opens `db` as [`Store::open`] does, waiting at most `timeout` for other processes that
    /// hold the database (one creating or migrating it, many opening it at once) while it
    /// opens, and afterwards ([`Store::set_lock_timeout`]).
    pub fn open_with_lock_timeout(
        db: impl AsRef<Path>,
        timeout: Duration,
    ) -> Result<Store, StoreError> {
        let db = db.as_ref();
        match db.to_str() {
            Some(url) if pg::url::is_postgres_url(url) => {
                let mut store = Store::open_postgres(url)?;
                if timeout != DEFAULT_LOCK_TIMEOUT {
                    store.set_lock_timeout(timeout)?;
                }
                Ok(store)
            }
            _ => Ok(Store::of(Inner::Sqlite(SqliteStore::open(db, timeout)?))),
        }
    }

    fn of(backend: Inner) -> Store {
        Store {
            backend,
            batcher: Mutex::new(None),
        }
    }

    /// Opens (creating it and its parent directories if missing) the SQLite database at
    /// `path`, switches it to WAL, sets a busy timeout of [`DEFAULT_LOCK_TIMEOUT`], turns
    /// foreign keys on and runs pending migrations (`PRAGMA user_version`).
    pub fn open_sqlite(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        let store = SqliteStore::open(path.as_ref(), DEFAULT_LOCK_TIMEOUT)?;
        Ok(Store::of(Inner::Sqlite(store)))
    }

    /// Connects to the PostgreSQL database `url` names and runs pending migrations (a
    /// `schema_version` table). The URL takes the driver's settings (`connect_timeout`,
    /// `application_name`, `options`, `sslmode=disable|prefer`: connections are not encrypted,
    /// so use a trusted network or a local proxy) and two of Warden's: `pool_size=N`, the most
    /// connections kept open (8 by default; opened as needed), and `schema=NAME`, a schema of
    /// the database to keep Warden's tables in (created if missing).
    ///
    /// Needs PostgreSQL 11 or newer. An unreachable server is [`StoreError::Unreachable`]
    /// after the connection timeout; messages never show the password.
    pub fn open_postgres(url: &str) -> Result<Store, StoreError> {
        Ok(Store::of(Inner::Postgres(PgStore::open(url)?)))
    }

    /// Opens a private in-memory SQLite database with the same schema (for tests and dry runs).
    pub fn in_memory() -> Result<Store, StoreError> {
        Ok(Store::of(Inner::Sqlite(SqliteStore::in_memory()?)))
    }

    /// Which back end this store uses.
    pub fn backend(&self) -> Backend {
        match &self.backend {
            Inner::Sqlite(_) => Backend::Sqlite,
            Inner::Postgres(_) => Backend::Postgres,
        }
    }

    /// How the database is named in messages: its path, `in-memory database`, or its URL
    /// without the password.
    pub fn label(&self) -> &str {
        match &self.backend {
            Inner::Sqlite(s) => &s.db.label,
            Inner::Postgres(s) => &s.db.label,
        }
    }

    /// Sets how long a statement waits for another process's lock on the database before it
    /// fails with [`StoreError::Busy`] (default [`DEFAULT_LOCK_TIMEOUT`]). On PostgreSQL it
    /// also bounds the wait for a pooled connection, and the pool is opened anew.
    pub fn set_lock_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        // The batching thread names the old timeout in its errors: the next save starts another.
        self.stop_batcher();
        match &mut self.backend {
            Inner::Sqlite(s) => s.set_lock_timeout(timeout),
            Inner::Postgres(s) => s.set_lock_timeout(timeout),
        }
    }

    /// For a process that makes a transaction or two and exits (a Claude Code hook, one process
    /// per event): the SQLite write-ahead log is left to the next process when the store
    /// closes, instead of being copied into the database file there (SQLite's checkpoint on
    /// close: four fsyncs, which were a fifth of such a process's time), until it has grown past
    /// `pages` pages; the store that closes then checkpoints it and empties it. A crash of a
    /// process loses nothing by it (the log is the database's own, read by every process); a
    /// power cut may lose the commits still in the log under `synchronous = NORMAL` (all of
    /// them since the last checkpoint, rather than the last process's), none under `FULL`.
    /// Each process that opens the database first reads the log left (about `pages` pages; a
    /// checkpoint that other connections hold up leaves it for the next). A copy of the
    /// database file alone may miss the last commits: back it up with SQLite's `.backup`. No
    /// effect on PostgreSQL, or an in-memory store.
    pub fn checkpoint_past(&mut self, pages: u32) -> Result<(), StoreError> {
        match &mut self.backend {
            Inner::Sqlite(s) => s.checkpoint_past(pages),
            Inner::Postgres(_) => Ok(()),
        }
    }

    /// For a long-running server: checkpoints the SQLite write-ahead log every `every` on a
    /// connection and a thread of its own, instead of in the commit that makes it pass 1,000
    /// pages (SQLite's default), which then held every other tick up while it copied the log
    /// and synced the file. Those checkpoints never wait for a writer, so under a steady load
    /// they never catch up, and the log would grow without end: once it holds
    /// [`RESTART_PAST_PAGES`] pages, the thread copies the rest and makes the next commit
    /// write it from its start (this process's commits wait meanwhile, a few milliseconds).
    /// Stops when the store is dropped. No effect on PostgreSQL, or an in-memory store.
    pub fn checkpoint_in_background(&self, every: Duration) -> Result<(), StoreError> {
        self.checkpoint_in_background_past(every, RESTART_PAST_PAGES)
    }

    /// [`Store::checkpoint_in_background`], restarting the log past `pages` pages (tests).
    pub(crate) fn checkpoint_in_background_past(
        &self,
        every: Duration,
        pages: u32,
    ) -> Result<(), StoreError> {
        match &self.backend {
            Inner::Sqlite(s) => s.checkpoint_in_background(every, pages),
            Inner::Postgres(_) => Ok(()),
        }
    }

    /// Does now what closing a store does with a log left to the next process
    /// ([`Store::checkpoint_past`]): checkpoints and empties it if it is past its size. For a
    /// process that exits without dropping the store (a hook leaves its memory to the system).
    pub fn checkpoint_if_past(&self) {
        if let Inner::Sqlite(s) = &self.backend {
            s.checkpoint_if_past();
        }
    }

    /// The file this store was opened from; `None` for [`Store::in_memory`] and PostgreSQL.
    pub fn path(&self) -> Option<&Path> {
        match &self.backend {
            Inner::Sqlite(s) => s.path(),
            Inner::Postgres(_) => None,
        }
    }

    /// Makes every commit durable on power loss (`true`: SQLite's `synchronous = FULL`, an
    /// fsync of the write-ahead log at each commit) or only on a crash of the process (`false`,
    /// the default: `NORMAL`, where a power cut may lose the last commits but never damages the
    /// file). On PostgreSQL the server's `synchronous_commit` decides: `true` is refused, with
    /// what to do, when the server has it off; `false` changes nothing.
    pub fn set_synchronous_full(&self, full: bool) -> Result<(), StoreError> {
        each!(self, s => s.set_synchronous_full(full))
    }

    /// Whether every commit is made durable on power loss ([`Store::set_synchronous_full`]).
    pub fn is_synchronous_full(&self) -> Result<bool, StoreError> {
        each!(self, s => s.is_synchronous_full())
    }

    /// The schema version of the database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        each!(self, s => s.schema_version())
    }

    /// The newest schema version this build knows for `backend`; an opened store is always at
    /// it.
    pub fn latest_schema_version_of(backend: Backend) -> u32 {
        match backend {
            Backend::Sqlite => sqlite::migrations::latest_version(),
            Backend::Postgres => pg::migrations::latest_version(),
        }
    }

    /// The newest SQLite schema version this build knows.
    pub fn latest_schema_version() -> u32 {
        Store::latest_schema_version_of(Backend::Sqlite)
    }

    /// What SQLite's `PRAGMA integrity_check` finds wrong in the database file (empty:
    /// nothing). PostgreSQL checks its own pages: always empty there.
    pub fn check_integrity(&self) -> Result<Vec<String>, StoreError> {
        match &self.backend {
            Inner::Sqlite(s) => s.check_integrity(),
            Inner::Postgres(_) => Ok(Vec::new()),
        }
    }

    /// Reads one key of plugin state; `None` if it is not set.
    pub fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        read!(self, s => s.state_get(scope, key))
    }

    /// Reads every key of plugin state in `scope`.
    pub fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        read!(self, s => s.state_all(scope))
    }

    /// Applies groups of writes in ONE transaction; each group is applied completely
    /// or not at all (if any write of a group fails, that group is rolled back and the others
    /// still commit). Returns one Result per group, in order. An Err of the outer Result means
    /// the transaction itself could not begin or commit (then nothing was written).
    ///
    /// Upsert keeps `created_at` and updates `updated_at`. Within a group, writes are
    /// applied in order, so a later write of the same key wins.
    pub fn apply_writes(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        each!(self, s => s.apply_writes(groups))
    }

    /// Appends records to the execution log, all in one transaction (a tick's, which commits
    /// nothing else).
    pub fn record_executions(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        let tx = self.tick();
        tx.record_executions(records)?;
        tx.commit(None).map(|_| ())
    }

    /// Reads the execution log back, newest first, filtered by `filter`.
    pub fn executions(&self, filter: &ExecutionFilter) -> Result<Vec<ExecutionRow>, StoreError> {
        read!(self, s => s.executions(filter))
    }

    /// Every rule toggle, ordered by user and rule.
    pub fn toggles(&self) -> Result<Vec<RuleToggle>, StoreError> {
        read!(self, s => s.toggles())
    }

    /// Switches `rule_id` on, off or to shadow for `user_id`; `None` forgets the choice (the
    /// rule's own default applies again). Returns whether anything changed.
    pub fn set_toggle(
        &self,
        user_id: &str,
        rule_id: &str,
        state: Option<RuleState>,
    ) -> Result<bool, StoreError> {
        each!(self, s => s.set_toggle(user_id, rule_id, state))
    }

    /// Every setting override, ordered by user, project, plugin and name. A stored value that
    /// is not valid JSON is an error naming it.
    pub fn overrides(&self) -> Result<Vec<SettingOverride>, StoreError> {
        read!(self, s => s.overrides())
    }

    /// Sets (or with `None`, removes) a user's value for a setting, for `project_id` or
    /// [`ALL_PROJECTS`]. Returns whether anything changed.
    pub fn set_override(
        &self,
        user_id: &str,
        project_id: &str,
        plugin_id: &str,
        name: &str,
        value: Option<&serde_json::Value>,
    ) -> Result<bool, StoreError> {
        self.set_overrides(user_id, project_id, plugin_id, &[(name, value)])
            .map(|changed| changed > 0)
    }

    /// Sets (a value) or removes (`None`) several of a user's values for one plugin's settings,
    /// in `project_id` or [`ALL_PROJECTS`], in one transaction: all of them, or none. Returns
    /// how many rows changed.
    pub fn set_overrides(
        &self,
        user_id: &str,
        project_id: &str,
        plugin_id: &str,
        values: &[(&str, Option<&serde_json::Value>)],
    ) -> Result<usize, StoreError> {
        each!(self, s => s.set_overrides(user_id, project_id, plugin_id, values))
    }

    /// A number that changes when another process changed the database: poll it to notice
    /// changes made elsewhere, such as `warden rules disable` run while an agent is running.
    /// Cheap on both back ends.
    ///
    /// - SQLite: `PRAGMA data_version`, which changes whenever another connection commits
    ///   (changes made through this store do not change it).
    /// - PostgreSQL: how many notifications of changed toggles or settings a listener
    ///   connection has heard (`LISTEN`), plus one each time it (re)connects, as changes made
    ///   while it was not listening were not heard. The listener starts at the first call and
    ///   connects 200 ms later (a process that is gone by then never opens it). Changes made
    ///   through this store count too.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        match &self.backend {
            Inner::Sqlite(s) => sqlite::off_runtime(|| s.data_version()),
            Inner::Postgres(s) => Ok(s.data_version()),
        }
    }

    /// The saved session `id`, or `None` if it was never saved (or was deleted).
    pub fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        read!(self, s => s.load_session(id))
    }

    /// The version of the saved session `id` (cheap: to tell whether a copy in memory is
    /// still the latest).
    pub fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        read!(self, s => s.session_version(id))
    }

    /// Saved sessions, most recently touched first, at most `limit`.
    pub fn sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        read!(self, s => s.sessions(limit))
    }

    /// Deletes the saved session `id`; whether there was one.
    pub fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        each!(self, s => s.delete_session(id))
    }

    /// Deletes every saved session last touched before `before` (seconds since the Unix
    /// epoch); how many.
    pub fn prune_sessions(&self, before: f64) -> Result<usize, StoreError> {
        each!(self, s => s.prune_sessions(before))
    }

    /// Saves a session in the store's next batch, and calls `done` with its new version or
    /// why it was not saved (a session saved by another process since `save.loaded` is
    /// [`StoreError::SessionConflict`], and then nothing is written), exactly once.
    ///
    /// SQLite: a thread of the store's own writes every save waiting in one transaction on
    /// the store's connection, while the next ones queue up: under load, one commit serves many
    /// sessions, and the caller's thread never waits for the database. `done` runs on that
    /// thread, after the commit: it should only hand the result on (to a channel); a `done`
    /// that panics is caught there. The saves still queued when the store is dropped are
    /// committed first. (Should that thread not start, the save is made at once, and `done`
    /// called, on the caller's thread.)
    ///
    /// PostgreSQL: saved at once, on the caller's thread, in a transaction of its own (see
    /// [`Store::batches_saves`]).
    pub fn save_in_batch(
        &self,
        save: SessionSave,
        done: impl FnOnce(Result<i64, StoreError>) + Send + 'static,
    ) {
        match &self.backend {
            Inner::Sqlite(s) => {
                // The saving thread locks the connection itself: an in-memory store's schema is
                // made first (a file's was made when it opened: no lock taken here, which would
                // wait for the batch being committed).
                if s.is_unmade()
                    && let Err(e) = s.conn()
                {
                    done(Err(e));
                    return;
                }
                let done: sqlite::batch::Done = Box::new(done);
                let mut batcher = self.batcher.lock().unwrap_or_else(PoisonError::into_inner);
                if batcher.is_none() {
                    match Batcher::start(s.conn.clone(), s.db.clone()) {
                        Ok(started) => *batcher = Some(started),
                        Err(e) => {
                            tracing::warn!(db = %s.db.label, error = %e, "sessions are saved one by one")
                        }
                    }
                }
                let back = match batcher.as_ref() {
                    Some(b) => b.submit(save, done).err(),
                    None => Some(Box::new((save, done))),
                };
                if let Some(back) = back {
                    // No thread (it could not start, or is gone: the next save starts one
                    // again): this save is made here, outside the lock, `done` called here.
                    let gone = batcher.take();
                    drop(batcher);
                    if let Some(gone) = gone {
                        tracing::error!(db = %s.db.label, "the thread that saves sessions had stopped");
                        gone.stop();
                    }
                    let (save, done) = *back;
                    sqlite::batch::save_now(&s.conn, &s.db, save, done);
                }
            }
            Inner::Postgres(_) => {
                let next = save.loaded.map_or(1, |v| v + 1);
                let saved = self.tick().commit(Some(save.as_write()));
                done(saved.map(|v| v.unwrap_or(next)));
            }
        }
    }

    /// Commits the saves still queued and stops the batching thread, if it runs.
    fn stop_batcher(&mut self) {
        let batcher = self
            .batcher
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(b) = batcher {
            b.stop();
        }
    }

    /// Whether [`Store::save_in_batch`] saves on a thread of its own (SQLite), rather than on
    /// the caller's (PostgreSQL).
    pub fn batches_saves(&self) -> bool {
        matches!(self.backend, Inner::Sqlite(_))
    }

    /// Runs `sql` on the database (tests: install triggers, poke at rows).
    #[cfg(test)]
    fn exec(&self, sql: &str) -> Result<(), StoreError> {
        each!(self, s => s.exec(sql))
    }
}

#[cfg(test)]
mod tests;
