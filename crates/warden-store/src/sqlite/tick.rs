//! One tick's transaction in SQLite (see [`crate::TickTransaction`]).
//!
//! The transaction begins lazily: at the tick's first read of plugin state, or at its commit,
//! whichever comes first. It is an IMMEDIATE transaction (SQLite's write lock, taken up front),
//! so a read made inside it cannot be overtaken by another process's write before the commit.
//! A tick that reads no state holds the lock only while it commits.

use std::cell::RefCell;
use std::sync::MutexGuard;

use rusqlite::Connection;

use super::sessions::{load_session, save_session, session_version};
use super::{SqliteStore, insert_executions, read_scope, read_state, write_groups};
use crate::error::{DbError, StoreError};
use crate::types::{ExecutionRecord, SessionWrite, StateScope, StateWrite, StoredSession};

/// One tick's transaction on a SQLite store (see the module docs). Dropping it without
/// [`SqliteTick::commit`] rolls back whatever it began.
pub(crate) struct SqliteTick<'s> {
    store: &'s SqliteStore,
    /// The connection, held from the transaction's first statement to its end.
    open: RefCell<Option<MutexGuard<'s, Connection>>>,
    /// The transaction could not begin (the lock was held too long): what follows fails at
    /// once instead of waiting again.
    refused: std::cell::Cell<bool>,
    /// A write ended the transaction (the database cannot take writes now): why. What follows,
    /// the commit included, fails with it.
    failed: RefCell<Option<String>>,
}

/// Whether a failed write says the database cannot take writes at all now, rather than
/// something about this one write: then the whole tick fails, not only the rule that wrote.
fn ends_the_tick(e: &StoreError) -> bool {
    use rusqlite::ErrorCode::{
        CannotOpen, DatabaseCorrupt, DiskFull, NotADatabase, ReadOnly, SystemIoFailure,
    };
    matches!(e, StoreError::Write { cause: DbError::Sqlite(cause), .. } if matches!(
        cause.sqlite_error_code(),
        Some(ReadOnly | DiskFull | SystemIoFailure | DatabaseCorrupt | NotADatabase | CannotOpen)
    ))
}

impl<'s> SqliteTick<'s> {
    /// Starts a tick's transaction (nothing is locked until it first reads or commits).
    pub(crate) fn new(store: &'s SqliteStore) -> Self {
        SqliteTick {
            store,
            open: RefCell::new(None),
            refused: std::cell::Cell::new(false),
            failed: RefCell::new(None),
        }
    }

    /// Runs `f` on the connection inside the transaction, beginning it first if needed.
    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        if let Some(reason) = self.failed.borrow().clone() {
            return Err(self.store.db.refused(reason));
        }
        let mut open = self.open.borrow_mut();
        let conn = match &mut *open {
            Some(conn) => conn,
            None if self.refused.get() => return Err(self.store.db.busy()),
            None => {
                let conn = match self.store.conn() {
                    Ok(conn) => conn,
                    Err(e) => {
                        self.failed.replace(Some(format!("making its schema: {e}")));
                        return Err(e);
                    }
                };
                if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
                    // Held too long by another process, or refused outright (a read-only
                    // connection, a damaged file): either way, what follows fails at once, and
                    // the commit says which.
                    if super::is_busy(&e) {
                        self.refused.set(true);
                    } else {
                        self.failed
                            .replace(Some(format!("beginning its transaction: {e}")));
                    }
                    return Err(self.store.sql_err(e));
                }
                open.insert(conn)
            }
        };
        f(conn)
    }

    /// Whether the transaction has begun (the tick read plugin state).
    pub(crate) fn is_begun(&self) -> bool {
        self.open.borrow().is_some()
    }

    /// Whether the tick has not used the store at all (nothing begun, nothing refused).
    pub(crate) fn is_untouched(&self) -> bool {
        self.open.borrow().is_none() && !self.refused.get() && self.failed.borrow().is_none()
    }

    /// Reads one key of plugin state inside the transaction; `None` if it is not set.
    pub(crate) fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.with(|conn| read_state(&self.store.db, conn, scope, key))
    }

    /// Reads every key of plugin state in `scope` inside the transaction.
    pub(crate) fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<std::collections::BTreeMap<String, serde_json::Value>, StoreError> {
        self.with(|conn| read_scope(&self.store.db, conn, scope))
    }

    /// Begins the transaction now (taking the write lock), if it has not begun.
    pub(crate) fn begin(&self) -> Result<(), StoreError> {
        self.with(|_| Ok(()))
    }

    /// Applies groups of writes inside the transaction, each group in a savepoint: applied
    /// whole or not at all. One result per group, in order; an error of the outer result
    /// means the transaction itself failed (and will write nothing).
    pub(crate) fn write_groups(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        self.with(|conn| {
            write_groups(&self.store.db, conn, groups, ends_the_tick).inspect_err(|err| {
                if let StoreError::Write {
                    scope, key, cause, ..
                } = err
                    && (conn.is_autocommit() || ends_the_tick(err))
                {
                    // The failure ended the whole transaction (a full disk), or the database
                    // takes no writes now (read-only, damaged): nothing of the tick is
                    // written, and its commit fails visibly.
                    if !conn.is_autocommit() {
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    let reason = format!("writing key {key:?} of {scope}: {cause}");
                    self.failed.replace(Some(reason));
                }
            })
        })
    }

    /// Adds rows to the execution log inside the transaction.
    pub(crate) fn record_executions(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        let store = self.store;
        self.with(|conn| insert_executions(conn, records).map_err(|e| store.sql_err(e)))
    }

    /// The saved session `id`, read inside the transaction (so no other process can save it
    /// before this transaction ends).
    pub(crate) fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.with(|conn| load_session(self.store, conn, id))
    }

    /// The version of the saved session `id`, read inside the transaction.
    pub(crate) fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        self.with(|conn| session_version(self.store, conn, id))
    }

    /// Saves `session` (when given) and commits everything the transaction wrote; the
    /// session's new version. A session saved by another process since `session.loaded` is
    /// `StoreError::SessionConflict`, and then nothing is written.
    pub(crate) fn commit(
        self,
        session: Option<SessionWrite<'_>>,
    ) -> Result<Option<i64>, StoreError> {
        // A tick whose transaction could not begin, or was ended, fails here (`with`).
        let store = self.store;
        let version = self.with(|conn| {
            let version = match &session {
                Some(s) => Some(save_session(&store.db, conn, s)?),
                None => None,
            };
            conn.execute_batch("COMMIT").map_err(|e| store.sql_err(e))?;
            Ok(version)
        })?;
        // The transaction is over; `Drop` has nothing to roll back.
        self.open.borrow_mut().take();
        Ok(version)
    }
}

impl Drop for SqliteTick<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.open.get_mut().take()
            && !conn.is_autocommit()
            && let Err(e) = conn.execute_batch("ROLLBACK")
        {
            // The connection rolls back on its next use anyway.
            tracing::warn!(db = %self.store.db.label, error = %e, "a tick's transaction could not be rolled back");
        }
    }
}
