//! Pooled connections (r2d2), each with its own cache of prepared statements: a statement
//! prepared once per connection costs one round trip per run instead of two (prepare, then
//! run), which is most of a tick's time on PostgreSQL.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

/// Runs `f`, which blocks on the database, where blocking is allowed. The synchronous driver
/// runs a small runtime of its own for each connection, which cannot run (nor be dropped) on a
/// thread that drives tokio tasks: an async host that calls the store from a task would panic.
/// There, `f` runs through `block_in_place` (a multi-thread runtime) or on a thread of its own
/// (a current-thread runtime); anywhere else (a plain thread, tokio's blocking pool) it just
/// runs.
pub(crate) fn blocking<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => f(),
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| match s.spawn(f).join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }),
    }
}

/// Why a connection could not be opened, in full (the pool keeps it as text).
#[derive(Debug)]
pub(crate) struct ConnectError(pub postgres::Error);

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::error::describe_pg(&self.0))
    }
}

impl std::error::Error for ConnectError {}

/// Opens connections for the pool.
pub(crate) struct Manager {
    pub config: postgres::Config,
}

/// One connection and its prepared statements.
pub(crate) struct Conn {
    pub client: Client,
    statements: HashMap<&'static str, Statement>,
    /// Statements that completed since the connection was checked out: a failure of the first
    /// one on a closed connection means the connection went stale in the pool, and nothing ran.
    pub completed: u32,
    /// Set when the connection may be left in a state another user must not inherit (a
    /// transaction that could not be rolled back): the pool then closes it.
    pub broken: bool,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = ConnectError;

    fn connect(&self) -> Result<Conn, ConnectError> {
        Ok(Conn {
            client: self.config.connect(NoTls).map_err(ConnectError)?,
            statements: HashMap::new(),
            completed: 0,
            broken: false,
        })
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), ConnectError> {
        conn.client
            .simple_query("")
            .map(|_| ())
            .map_err(ConnectError)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken || conn.client.is_closed()
    }
}

impl Conn {
    /// `sql`, prepared on this connection once.
    fn prepared(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql)?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    fn done<T>(&mut self, r: Result<T, postgres::Error>) -> Result<T, postgres::Error> {
        if r.is_ok() {
            self.completed += 1;
        }
        r
    }

    /// Runs a cached statement; its rows.
    pub(crate) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let r = self
            .prepared(sql)
            .and_then(|s| self.client.query(&s, params));
        self.done(r)
    }

    /// Runs a cached statement; at most one row.
    pub(crate) fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        let r = self
            .prepared(sql)
            .and_then(|s| self.client.query_opt(&s, params));
        self.done(r)
    }

    /// Runs a cached statement; the rows it changed.
    pub(crate) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let r = self
            .prepared(sql)
            .and_then(|s| self.client.execute(&s, params));
        self.done(r)
    }

    /// Ends whatever transaction is open (after a failure), or marks the connection broken.
    pub(crate) fn rollback(&mut self) {
        if !self.client.is_closed() && self.client.batch_execute("ROLLBACK").is_err() {
            self.broken = true;
        }
    }

    /// Runs statements without parameters (`BEGIN`, `COMMIT`...) in one round trip.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), postgres::Error> {
        let r = self.client.batch_execute(sql);
        self.done(r)
    }
}
