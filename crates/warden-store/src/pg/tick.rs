//! One tick's transaction on PostgreSQL (see [`crate::TickTransaction`]).
//!
//! It begins lazily, like SQLite's, at the first statement the tick needs, on one pooled
//! connection held to the end. What SQLite gets from its one write lock, PostgreSQL gets from
//! finer locks, each held to the end of the transaction:
//! - a durable session's row (`SELECT ... FOR UPDATE`, or an advisory lock on its id while
//!   it has no row), taken when the tick reads the session's version, and as the transaction
//!   begins when the tick named its session ([`PgTick::for_session`]): two nodes ticking one
//!   session take turns, and the second reads what the first saved;
//! - an advisory lock per (user, project), taken at the tick's first read or write of that
//!   scope's plugin state: a read-modify-write on two nodes loses no update.
//!
//! The session's lock is always the first: a tick that waits for its session's row while
//! holding a scope's lock, when the tick holding the row waits for that scope, would be a
//! deadlock (PostgreSQL ends one of the two after a second, and its tick is not saved).
//!
//! A statement that fails aborts a PostgreSQL transaction: the tick then commits nothing, and
//! its commit says why.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::conn::{Conn, blocking};
use super::{
    PgStore, Pooled, SELECT_SESSION, group_results, insert_executions, stored_session_with_entries,
    write_groups,
};
use crate::error::{DbError, StoreError};
use crate::sql::decode;
use crate::types::{ExecutionRecord, SessionWrite, StateScope, StateWrite, StoredSession};

/// Why a tick's transaction cannot go on: kept so that what follows fails at once, alike.
#[derive(Debug, Clone)]
enum Failure {
    Busy,
    Unreachable(String),
    Other(String),
}

/// One tick's transaction on a PostgreSQL store. Dropping it without [`PgTick::commit`] rolls
/// back whatever it began.
pub(crate) struct PgTick<'s> {
    store: &'s PgStore,
    /// The connection, from the transaction's first statement to its end.
    open: RefCell<Option<Pooled>>,
    /// The transaction could not begin, or a statement of it failed.
    failed: RefCell<Option<Failure>>,
    /// The durable session the tick is of: locked as the transaction begins.
    session: RefCell<Option<String>>,
}

impl<'s> PgTick<'s> {
    pub(crate) fn new(store: &'s PgStore) -> Self {
        PgTick {
            store,
            open: RefCell::new(None),
            failed: RefCell::new(None),
            session: RefCell::new(None),
        }
    }

    /// The tick is of the durable session `id`: its lock is taken as the transaction begins,
    /// before any scope's (see the module docs).
    pub(crate) fn for_session(&self, id: &str) {
        *self.session.borrow_mut() = Some(id.to_string());
    }

    fn failure_error(&self, f: &Failure) -> StoreError {
        match f {
            Failure::Busy => self.store.db.busy(),
            Failure::Unreachable(reason) => self.store.db.unreachable(reason.clone()),
            Failure::Other(reason) => self.store.db.database(DbError::Server(format!(
                "an earlier statement of this tick failed, so nothing of it is written: {reason}"
            ))),
        }
    }

    fn fail(&self, e: StoreError) -> StoreError {
        let f = match &e {
            StoreError::Busy { .. } => Failure::Busy,
            StoreError::Unreachable { reason, .. } => Failure::Unreachable(reason.clone()),
            other => Failure::Other(other.to_string()),
        };
        self.failed.borrow_mut().get_or_insert(f);
        e
    }

    /// Runs `f` inside the transaction, beginning it first if needed.
    fn with<R: Send>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<R, postgres::Error> + Send,
    ) -> Result<R, StoreError> {
        if let Some(failure) = &*self.failed.borrow() {
            return Err(self.failure_error(failure));
        }
        let mut open = self.open.borrow_mut();
        let conn = match &mut *open {
            Some(conn) => conn,
            None => {
                let store = self.store;
                let session = self.session.borrow();
                let session = session.as_deref();
                open.insert(blocking(|| begin_on(store, session)).map_err(|e| self.fail(e))?)
            }
        };
        blocking(|| f(conn)).map_err(|e| self.fail(self.store.err(e)))
    }

    pub(crate) fn is_begun(&self) -> bool {
        self.open.borrow().is_some()
    }

    /// Whether the tick has not used the store at all (nothing begun, nothing failed).
    pub(crate) fn is_untouched(&self) -> bool {
        self.open.borrow().is_none() && self.failed.borrow().is_none()
    }

    pub(crate) fn begin(&self) -> Result<(), StoreError> {
        self.with(|_| Ok(()))
    }

    pub(crate) fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let row = self.with(|c| {
            c.query_opt(
                "SELECT state_value FROM warden_state_locked($1, $2, $3) WHERE state_key = $4",
                &[&scope.user, &scope.project, &scope.plugin, &key],
            )
        })?;
        row.map(|r| decode(&self.store.db.label, scope, key, &r.get::<_, String>(0)))
            .transpose()
    }

    pub(crate) fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let rows = self.with(|c| {
            c.query(
                "SELECT state_key, state_value FROM warden_state_locked($1, $2, $3)",
                &[&scope.user, &scope.project, &scope.plugin],
            )
        })?;
        rows.iter()
            .map(|r| {
                let key: String = r.get(0);
                let value = decode(&self.store.db.label, scope, &key, &r.get::<_, String>(1))?;
                Ok((key, value))
            })
            .collect()
    }

    pub(crate) fn write_groups(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        if groups.iter().all(Vec::is_empty) {
            return Ok(groups.iter().map(|_| Ok(())).collect());
        }
        let failed = self.with(|c| write_groups(c, groups))?;
        Ok(group_results(&self.store.db, groups, failed))
    }

    pub(crate) fn record_executions(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        self.with(|c| insert_executions(c, records))
    }

    pub(crate) fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        // The lock is taken here too, for a tick that reads the session before its version.
        self.session_version(id)?;
        self.with(|c| {
            let row = c.query_opt(SELECT_SESSION, &[&id])?;
            row.as_ref().map(stored_session_with_entries).transpose()
        })
    }

    pub(crate) fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let row = self.with(|c| c.query_opt("SELECT warden_session_lock($1)", &[&id]))?;
        Ok(row.and_then(|r| r.get::<_, Option<i64>>(0)))
    }

    pub(crate) fn commit(
        self,
        session: Option<SessionWrite<'_>>,
    ) -> Result<Option<i64>, StoreError> {
        // A tick whose transaction could not begin, or failed, fails here (`with`).
        if !self.is_begun() {
            // Only the session's save is left: its `UPDATE` locks the row, and nothing after.
            self.session.borrow_mut().take();
        }
        // The session's new version; `Some(None)`: another node saved it meanwhile.
        let saved = self.with(|c| {
            let saved = session.as_ref().map(|s| save_session(c, s)).transpose()?;
            if saved != Some(None) {
                c.batch("COMMIT")?;
            }
            Ok(saved)
        })?;
        if let (Some(None), Some(s)) = (saved, &session) {
            // Drop rolls back.
            return Err(self.store.db.conflict(s.id));
        }
        // The transaction is over; `Drop` has nothing to roll back.
        let conn = self.open.borrow_mut().take();
        blocking(move || drop(conn));
        Ok(saved.flatten())
    }
}

/// A pooled connection with a transaction begun on it, holding `session`'s lock if given.
fn begin_on(store: &PgStore, session: Option<&str>) -> Result<Pooled, StoreError> {
    let (mut conn, ()) = store.run_on(|c| c.batch("BEGIN"))?;
    if let Some(id) = session
        && let Err(e) = conn.query_opt("SELECT warden_session_lock($1)", &[&id])
    {
        // Back to the pool with no transaction open.
        conn.rollback();
        return Err(store.err(e));
    }
    Ok(conn)
}

/// Saves `s` inside the transaction; its new version, or `None` when another node saved it
/// since `s.loaded` (nothing was written).
fn save_session(c: &mut Conn, s: &SessionWrite<'_>) -> Result<Option<i64>, postgres::Error> {
    let events = i64::try_from(s.events).unwrap_or(i64::MAX);
    let changed = match s.loaded {
        None => c.execute(
            "INSERT INTO session (id, user_id, project_id, version, snapshot, events, ended,
                 updated_at)
             VALUES ($1, $2, $3, 1, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING",
            &[
                &s.id,
                &s.user,
                &s.project,
                &s.snapshot,
                &events,
                &s.ended,
                &s.updated_at,
            ],
        )?,
        Some(v) => c.execute(
            "UPDATE session SET user_id = $2, project_id = $3, version = version + 1,
                 snapshot = $4, events = $5, ended = $6,
                 updated_at = CASE WHEN $9 THEN $7 ELSE updated_at END
             WHERE id = $1 AND version = $8",
            &[
                &s.id,
                &s.user,
                &s.project,
                &s.snapshot,
                &events,
                &s.ended,
                &s.updated_at,
                &v,
                &s.touch,
            ],
        )?,
    };
    if changed == 0 {
        return Ok(None);
    }
    if !s.entries.is_empty() {
        let lists: Vec<i16> = s.entries.iter().map(|e| i16::from(e.list)).collect();
        let places: Vec<i64> = s.entries.iter().map(|e| e.n).collect();
        let texts: Vec<&str> = s.entries.iter().map(|e| e.text.as_str()).collect();
        c.execute(
            "INSERT INTO session_entry (session_id, list, n, entry)
             SELECT $1, * FROM unnest($2::smallint[], $3::bigint[], $4::text[])
             ON CONFLICT (session_id, list, n) DO UPDATE SET entry = EXCLUDED.entry",
            &[&s.id, &lists, &places, &texts],
        )?;
    }
    if !s.firsts.is_empty() {
        let lists: Vec<i16> = s.firsts.iter().map(|(l, _)| i16::from(*l)).collect();
        let firsts: Vec<i64> = s.firsts.iter().map(|(_, n)| *n).collect();
        c.execute(
            "DELETE FROM session_entry e USING unnest($2::smallint[], $3::bigint[]) AS f(list, n)
             WHERE e.session_id = $1 AND e.list = f.list AND e.n < f.n",
            &[&s.id, &lists, &firsts],
        )?;
    }
    Ok(Some(s.loaded.map_or(1, |v| v + 1)))
}

impl Drop for PgTick<'_> {
    fn drop(&mut self) {
        if let Some(mut conn) = self.open.get_mut().take() {
            blocking(move || {
                conn.rollback();
                drop(conn);
            });
        }
    }
}
