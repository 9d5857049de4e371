//! One tick's transaction: everything a tick reads from the store and everything it writes
//! (plugin state, the execution log, the session itself) in one transaction, so that after a
//! crash at any moment the store holds the tick whole or not at all, and so that two processes
//! (or two nodes) running the same read-modify-write never lose an update.
//!
//! How each back end makes that so is in its own `tick.rs`: SQLite takes its one write lock
//! (`BEGIN IMMEDIATE`) at the transaction's first statement; PostgreSQL takes, at the first read
//! or write of a (user, project)'s plugin state, an advisory lock of that scope. A durable
//! session is saved with the version it was read at: a save over a newer version is refused
//! ([`StoreError::SessionConflict`]), and the engine runs the tick again on the newer session,
//! this time with the session locked first (`session_version` inside the transaction locks it,
//! on both back ends), so that a session ticked by many nodes at once loses no tick to a race.

use std::collections::BTreeMap;

use crate::error::StoreError;
use crate::pg::tick::PgTick;
use crate::sqlite::tick::SqliteTick;
use crate::types::{ExecutionRecord, SessionWrite, StateScope, StateWrite, StoredSession};
use crate::{Inner, Store};

/// One tick's transaction on a [`Store`](crate::Store) (see the module docs). It begins
/// lazily: at the tick's first read of plugin state, at [`TickTransaction::begin`], or at its
/// commit. Dropping it without [`TickTransaction::commit`] rolls back whatever it began.
pub struct TickTransaction<'s> {
    inner: Tick<'s>,
}

// PostgreSQL's variant holds its pooled connection inline: a tick lives on the stack for one
// tick, where boxing it would cost an allocation per tick for nothing.
#[allow(clippy::large_enum_variant)]
enum Tick<'s> {
    Sqlite(SqliteTick<'s>),
    Postgres(PgTick<'s>),
}

macro_rules! each {
    ($tx:expr, $t:ident => $e:expr) => {
        match &$tx.inner {
            Tick::Sqlite($t) => $e,
            Tick::Postgres($t) => $e,
        }
    };
}

/// [`each!`] for a call that uses the database: SQLite's does not hold up a tokio runtime
/// (`sqlite::off_runtime`).
macro_rules! db {
    ($tx:expr, $t:ident => $e:expr) => {
        match &$tx.inner {
            Tick::Sqlite($t) => crate::sqlite::off_runtime(|| $e),
            Tick::Postgres($t) => $e,
        }
    };
}

impl std::fmt::Debug for TickTransaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TickTransaction")
            .field("begun", &self.is_begun())
            .finish()
    }
}

impl Store {
    /// Starts a tick's transaction (nothing is locked until it first reads or commits).
    pub fn tick(&self) -> TickTransaction<'_> {
        let inner = match &self.backend {
            Inner::Sqlite(s) => Tick::Sqlite(SqliteTick::new(s)),
            Inner::Postgres(s) => Tick::Postgres(PgTick::new(s)),
        };
        TickTransaction { inner }
    }
}

impl TickTransaction<'_> {
    /// The tick is of the durable session `id`. PostgreSQL takes the session's lock as the
    /// transaction begins, before any plugin state's: ticks of one session on two nodes then
    /// take their locks in one order and never wait for each other in a circle. (SQLite's one
    /// write lock needs no order.) Nothing is begun by this call.
    pub fn for_session(&self, id: &str) {
        if let Tick::Postgres(t) = &self.inner {
            t.for_session(id);
        }
    }

    /// Whether the transaction has begun.
    pub fn is_begun(&self) -> bool {
        each!(self, t => t.is_begun())
    }

    /// Whether the tick has not used the store at all: nothing read or written, nothing
    /// refused. Its commit would then only save the session, which
    /// [`Store::save_in_batch`](crate::Store::save_in_batch) can do instead.
    pub fn is_untouched(&self) -> bool {
        each!(self, t => t.is_untouched())
    }

    /// Begins the transaction now, if it has not begun (SQLite: takes the write lock).
    pub fn begin(&self) -> Result<(), StoreError> {
        db!(self, t => t.begin())
    }

    /// Reads one key of plugin state inside the transaction; `None` if it is not set.
    /// PostgreSQL: under the lock of the scope's (user, project), held to the end.
    pub fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        db!(self, t => t.state_get(scope, key))
    }

    /// Reads every key of plugin state in `scope` inside the transaction. PostgreSQL: under
    /// the lock of the scope's (user, project), held to the end.
    pub fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        db!(self, t => t.state_all(scope))
    }

    /// Applies groups of writes inside the transaction, each group applied whole or not at
    /// all. One result per group, in order; an error of the outer result means the
    /// transaction itself failed (and will write nothing).
    pub fn write_groups(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        db!(self, t => t.write_groups(groups))
    }

    /// Adds rows to the execution log inside the transaction.
    pub fn record_executions(&self, records: &[ExecutionRecord]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        db!(self, t => t.record_executions(records))
    }

    /// The saved session `id`, read inside the transaction (so no other process can save it
    /// before this transaction ends).
    pub fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        db!(self, t => t.load_session(id))
    }

    /// The version of the saved session `id`, read inside the transaction. PostgreSQL: locks
    /// the session (its row, or its id while it has none) to the end of the transaction.
    pub fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        db!(self, t => t.session_version(id))
    }

    /// Saves `session` (when given) and commits everything the transaction wrote; the
    /// session's new version. A session saved by another process since `session.loaded` is
    /// [`StoreError::SessionConflict`], and then nothing is written.
    pub fn commit(self, session: Option<SessionWrite<'_>>) -> Result<Option<i64>, StoreError> {
        if session.is_none() && self.is_untouched() {
            return Ok(None);
        }
        match self.inner {
            // A tick that used the database for nothing has nothing to commit: no hand-over.
            Tick::Sqlite(t) if session.is_none() && !t.is_begun() => t.commit(None),
            Tick::Sqlite(t) => crate::sqlite::off_runtime(|| t.commit(session)),
            Tick::Postgres(t) => t.commit(session),
        }
    }
}
