//! The PostgreSQL back end, for many nodes on one database: a pool of connections (r2d2, the
//! synchronous `postgres` driver, no TLS), a listener for changed users' choices, and ticks
//! that lock what they read-modify-write.
//!
//! - `mod.rs`: opening, the pool, plugin state, the execution log, users' choices, sessions.
//! - `url.rs`: the database URL (with Warden's `pool_size` and `schema`).
//! - `conn.rs`: pooled connections with their prepared statements.
//! - `migrations.rs`: versioned schema migrations (`schema_version`), and the functions
//!   that lock.
//! - `listen.rs`: `LISTEN`ing for changed users' choices.
//! - `tick.rs`: one tick's transaction, its locks.
//! - `copy.rs`: every row out and in, for `warden migrate`.

pub(crate) mod conn;
pub(crate) mod copy;
pub(crate) mod listen;
pub(crate) mod migrations;
pub(crate) mod tick;
pub(crate) mod url;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use postgres::Row;
use postgres::error::SqlState;
use postgres::types::ToSql;
use r2d2::PooledConnection;

use crate::error::{DbError, Named, StoreError};
use crate::sql;
use crate::types::{
    ExecutionFilter, ExecutionRecord, ExecutionRow, RuleState, RuleToggle, SessionEntry,
    SessionSummary, SettingOverride, StateScope, StateWrite, StoredSession,
};
use conn::{Conn, Manager, blocking};
use url::PgUrl;

/// After the database could not be reached, what needs it fails at once for this long instead
/// of each waiting out the connection timeout again.
const DOWN_FOR: Duration = Duration::from_secs(1);

/// How PostgreSQL writes what the execution log's query needs.
const DIALECT: sql::Dialect = sql::Dialect {
    param: '$',
    ends_with: "right(rule_id, length({p}) + 1) = '/' || {p}",
    shadow: "shadow",
};

/// A pooled connection.
pub(crate) type Pooled = PooledConnection<Manager>;

/// A PostgreSQL database.
pub(crate) struct PgStore {
    /// Always there but while the store is dropped (see `Drop`).
    pool: Option<r2d2::Pool<Manager>>,
    url: PgUrl,
    /// How the database is named in messages (never with its password), and how long a
    /// statement waits for a lock.
    pub(crate) db: Named,
    /// The schema the tables are in (the payload of this installation's notifications).
    schema: String,
    /// Notifications of changed choices heard, and connections of the listener made.
    changes: Arc<AtomicI64>,
    listener: OnceLock<listen::Listener>,
    /// Until when (ms since `opened`) the database is taken to be unreachable; 0: it is not.
    down_until: AtomicU64,
    opened: Instant,
}

/// The pool of `db`'s connections, which waits `db`'s lock timeout for one.
fn pool(url: &PgUrl, db: &Named) -> Result<r2d2::Pool<Manager>, StoreError> {
    r2d2::Pool::builder()
        .max_size(url.pool_size)
        // Connections are opened as ticks need them: a hook process opens one.
        .min_idle(Some(0))
        // A connection that went stale in the pool is found by its first statement, which is
        // then run again on a fresh one (see `PgStore::run`), instead of a test per checkout.
        .test_on_check_out(false)
        .connection_timeout(db.lock_timeout.max(Duration::from_millis(100)))
        .error_handler(Box::new(r2d2::NopErrorHandler))
        .thread_pool(Arc::new(scheduled_thread_pool::ScheduledThreadPool::new(2)))
        .build(Manager {
            config: url.config.clone(),
        })
        .map_err(|e| db.unreachable(e.to_string()))
}

/// Whether the driver failed on the connection itself (not on what the server said).
fn is_io(e: &postgres::Error) -> bool {
    crate::error::causes(e).any(|s| s.is::<std::io::Error>())
}

impl PgStore {
    /// Connects to the database `url` names and brings its schema up to date.
    pub(crate) fn open(url: &str) -> Result<PgStore, StoreError> {
        let url = PgUrl::parse(url)?;
        let db = Named {
            label: url.label.clone(),
            lock_timeout: crate::DEFAULT_LOCK_TIMEOUT,
        };
        let mut store = PgStore {
            pool: Some(pool(&url, &db)?),
            db,
            schema: String::new(),
            changes: Arc::new(AtomicI64::new(0)),
            listener: OnceLock::new(),
            down_until: AtomicU64::new(0),
            opened: Instant::now(),
            url,
        };
        store.schema = blocking(|| {
            let mut conn = store.checkout()?;
            migrations::migrate(&mut conn.client, &store.db, store.url.schema.as_deref())?;
            let schema: String = conn
                .client
                .query_one("SELECT current_schema()", &[])
                .map_err(|e| store.err(e))?
                .get(0);
            Ok::<_, StoreError>(schema)
        })?;
        Ok(store)
    }

    /// A connection from the pool; fails at once while the database is known to be down.
    pub(crate) fn checkout(&self) -> Result<Pooled, StoreError> {
        let now = self.opened.elapsed().as_millis() as u64;
        let until = self.down_until.load(Ordering::Relaxed);
        if now < until {
            return Err(self.db.unreachable(format!(
                "it could not be reached {} ms ago; trying again in {} ms",
                (DOWN_FOR.as_millis() as u64).saturating_sub(until - now),
                until - now
            )));
        }
        let Some(pool) = &self.pool else {
            return Err(self.db.unreachable("the store is closing".into()));
        };
        match pool.get() {
            Ok(mut c) => {
                c.completed = 0;
                Ok(c)
            }
            Err(e) => {
                let later = self.opened.elapsed() + DOWN_FOR;
                self.down_until
                    .store(later.as_millis() as u64, Ordering::Relaxed);
                Err(self.db.unreachable(e.to_string()))
            }
        }
    }

    /// Runs `f` on a pooled connection (where blocking is allowed), and returns it.
    pub(crate) fn run<R: Send>(
        &self,
        f: impl FnMut(&mut Conn) -> Result<R, postgres::Error> + Send,
    ) -> Result<R, StoreError> {
        blocking(|| self.run_on(f).map(|(_, r)| r))
    }

    /// Runs `f` on a pooled connection, and returns both. A connection that went stale in the
    /// pool (the server restarted, a proxy dropped it) fails its first statement without
    /// running it: `f` is then run again on another, as many times as the pool holds
    /// connections.
    pub(crate) fn run_on<R>(
        &self,
        mut f: impl FnMut(&mut Conn) -> Result<R, postgres::Error>,
    ) -> Result<(Pooled, R), StoreError> {
        let mut tries = 0;
        loop {
            let mut conn = self.checkout()?;
            match f(&mut conn) {
                Ok(r) => return Ok((conn, r)),
                Err(e)
                    if conn.completed == 0
                        && conn.client.is_closed()
                        && tries <= self.url.pool_size =>
                {
                    tracing::debug!(db = %self.db.label, error = %e, "a pooled connection had gone stale; trying another");
                    tries += 1;
                }
                Err(e) => {
                    conn.rollback();
                    return Err(self.err(e));
                }
            }
        }
    }

    /// A failed statement, as this store reports it: what it means for the caller.
    pub(crate) fn err(&self, e: postgres::Error) -> StoreError {
        if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) {
            return self.db.busy();
        }
        if e.is_closed() || (e.as_db_error().is_none() && is_io(&e)) {
            return self.db.unreachable(crate::error::describe_pg(&e));
        }
        self.db.database(e)
    }

    pub(crate) fn set_lock_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        self.url.set_lock_timeout(timeout);
        let db = Named {
            lock_timeout: timeout,
            ..self.db.clone()
        };
        let old = self.pool.replace(pool(&self.url, &db)?);
        blocking(move || drop(old));
        self.db = db;
        Ok(())
    }

    /// Whether the server makes each commit durable before it answers (`synchronous_commit`
    /// is not `off`).
    pub(crate) fn is_synchronous_full(&self) -> Result<bool, StoreError> {
        let setting: String = self.run(|c| {
            c.query_opt("SELECT current_setting('synchronous_commit')", &[])
                .map(|row| row.map(|r| r.get(0)).unwrap_or_default())
        })?;
        Ok(setting != "off")
    }

    /// The server decides how durable a commit is; asked for every commit to survive a power
    /// cut, this says so when the server has `synchronous_commit` off.
    pub(crate) fn set_synchronous_full(&self, full: bool) -> Result<(), StoreError> {
        if full && !self.is_synchronous_full()? {
            return Err(self.db.database(DbError::Server(
                "[database] synchronous = \"full\" asks every commit to survive a power cut, but this server has synchronous_commit = off: turn it on (postgresql.conf or ALTER SYSTEM), or leave synchronous at \"normal\"".into(),
            )));
        }
        Ok(())
    }

    pub(crate) fn schema_version(&self) -> Result<u32, StoreError> {
        self.run(|c| migrations::current(&mut c.client))
    }

    pub(crate) fn state_get(
        &self,
        scope: &StateScope,
        key: &str,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let row = self.run(|c| {
            c.query_opt(
                "SELECT value_json FROM plugin_state
                 WHERE user_id = $1 AND project_id = $2 AND plugin_id = $3 AND key = $4",
                &[&scope.user, &scope.project, &scope.plugin, &key],
            )
        })?;
        row.map(|r| sql::decode(&self.db.label, scope, key, &r.get::<_, String>(0)))
            .transpose()
    }

    pub(crate) fn state_all(
        &self,
        scope: &StateScope,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let rows = self.run(|c| {
            c.query(
                "SELECT key, value_json FROM plugin_state
                 WHERE user_id = $1 AND project_id = $2 AND plugin_id = $3",
                &[&scope.user, &scope.project, &scope.plugin],
            )
        })?;
        rows.iter()
            .map(|r| {
                let key: String = r.get(0);
                let value = sql::decode(&self.db.label, scope, &key, &r.get::<_, String>(1))?;
                Ok((key, value))
            })
            .collect()
    }

    pub(crate) fn apply_writes(
        &self,
        groups: &[Vec<StateWrite>],
    ) -> Result<Vec<Result<(), StoreError>>, StoreError> {
        let failed = self.run(|c| {
            c.batch("BEGIN")?;
            let failed = write_groups(c, groups)?;
            c.batch("COMMIT")?;
            Ok(failed)
        })?;
        Ok(group_results(&self.db, groups, failed))
    }

    pub(crate) fn executions(
        &self,
        filter: &ExecutionFilter,
    ) -> Result<Vec<ExecutionRow>, StoreError> {
        let (query, texts, limit) = sql::executions_query(filter, &DIALECT);
        let mut args: Vec<&(dyn ToSql + Sync)> = texts.iter().map(|t| t as _).collect();
        args.push(&limit);
        self.run(|c| {
            let rows = c.client.query(query.as_str(), &args)?;
            rows.iter().map(sql::execution_row).collect()
        })
    }

    pub(crate) fn toggles(&self) -> Result<Vec<RuleToggle>, StoreError> {
        self.run(|c| {
            let rows = c.query(
                "SELECT user_id, rule_id, enabled, shadow, updated_at FROM rule_toggle
                 ORDER BY user_id COLLATE \"C\", rule_id COLLATE \"C\"",
                &[],
            )?;
            rows.iter().map(sql::rule_toggle).collect()
        })
    }

    pub(crate) fn set_toggle(
        &self,
        user_id: &str,
        rule_id: &str,
        state: Option<RuleState>,
    ) -> Result<bool, StoreError> {
        let n = self.run(|c| {
            match state.map(RuleState::columns) {
            // A row that already holds the value is left alone: no change to report.
            Some((on, shadow)) => c.execute(
                "INSERT INTO rule_toggle (user_id, rule_id, enabled, shadow) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (user_id, rule_id)
                 DO UPDATE SET enabled = excluded.enabled, shadow = excluded.shadow,
                     updated_at = warden_now()
                 WHERE rule_toggle.enabled <> excluded.enabled
                     OR rule_toggle.shadow <> excluded.shadow",
                &[&user_id, &rule_id, &on, &shadow],
            ),
            None => c.execute(
                "DELETE FROM rule_toggle WHERE user_id = $1 AND rule_id = $2",
                &[&user_id, &rule_id],
            ),
        }
        })?;
        Ok(n > 0)
    }

    pub(crate) fn overrides(&self) -> Result<Vec<SettingOverride>, StoreError> {
        let rows = self.run(|c| {
            let rows = c.query(
                "SELECT user_id, project_id, plugin_id, name, value_json, updated_at
                 FROM setting_override ORDER BY user_id COLLATE \"C\",
                 project_id COLLATE \"C\", plugin_id COLLATE \"C\", name COLLATE \"C\"",
                &[],
            )?;
            rows.iter()
                .map(sql::override_row)
                .collect::<Result<Vec<_>, _>>()
        })?;
        rows.into_iter()
            .map(|row| sql::setting_override(&self.db.label, row))
            .collect()
    }

    /// Sets (a value) or removes (`None`) some of a user's values for one plugin's settings, in
    /// one transaction. Returns how many rows changed.
    pub(crate) fn set_overrides(
        &self,
        user_id: &str,
        project_id: &str,
        plugin_id: &str,
        values: &[(&str, Option<&serde_json::Value>)],
    ) -> Result<usize, StoreError> {
        self.run(|c| {
            let mut tx = c.client.transaction()?;
            let mut changed = 0;
            for (name, value) in values {
                changed += match value {
                    Some(v) => tx.execute(
                        "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (user_id, project_id, plugin_id, name)
                         DO UPDATE SET value_json = excluded.value_json, updated_at = warden_now()",
                        &[&user_id, &project_id, &plugin_id, name, &v.to_string()],
                    )?,
                    None => tx.execute(
                        "DELETE FROM setting_override
                         WHERE user_id = $1 AND project_id = $2 AND plugin_id = $3 AND name = $4",
                        &[&user_id, &project_id, &plugin_id, name],
                    )?,
                };
            }
            tx.commit()?;
            Ok(usize::try_from(changed).unwrap_or(usize::MAX))
        })
    }

    /// The count of changes to users' choices heard from the database (the listener starts at
    /// the first call).
    pub(crate) fn data_version(&self) -> i64 {
        self.listener.get_or_init(|| {
            listen::start(
                self.url.config.clone(),
                migrations::CHANNEL,
                self.schema.clone(),
                self.db.label.clone(),
                self.changes.clone(),
            )
        });
        self.changes.load(Ordering::Relaxed)
    }

    pub(crate) fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.run(|c| {
            let row = c.query_opt(SELECT_SESSION, &[&id])?;
            row.as_ref().map(stored_session_with_entries).transpose()
        })
    }

    pub(crate) fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        let row = self.run(|c| c.query_opt("SELECT version FROM session WHERE id = $1", &[&id]))?;
        Ok(row.map(|r| r.get(0)))
    }

    pub(crate) fn sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|c| {
            let rows = c.query(
                concat!(
                    "SELECT ",
                    summary_columns!(),
                    " FROM session ORDER BY updated_at DESC, id COLLATE \"C\" LIMIT $1"
                ),
                &[&limit],
            )?;
            rows.iter().map(sql::session_summary).collect()
        })
    }

    pub(crate) fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        // The row locked first (a save under way finishes, and its entries with it), then the
        // entries, then the row: nothing of the session is left behind.
        let n = self.run(|c| {
            c.batch("BEGIN")?;
            c.query("SELECT 1 FROM session WHERE id = $1 FOR UPDATE", &[&id])?;
            c.execute("DELETE FROM session_entry WHERE session_id = $1", &[&id])?;
            let n = c.execute("DELETE FROM session WHERE id = $1", &[&id])?;
            c.batch("COMMIT")?;
            Ok(n)
        })?;
        Ok(n > 0)
    }

    pub(crate) fn prune_sessions(&self, before: f64) -> Result<usize, StoreError> {
        // As a deletion: the rows locked first, so that no save under way leaves entries of a
        // session deleted behind.
        let rows = self.run(|c| {
            c.batch("BEGIN")?;
            c.query(
                "SELECT 1 FROM session WHERE updated_at < $1 FOR UPDATE",
                &[&before],
            )?;
            let rows = c.query(
                "WITH old AS (DELETE FROM session WHERE updated_at < $1 RETURNING id),
                      entries AS (DELETE FROM session_entry
                                  WHERE session_id IN (SELECT id FROM old))
                 SELECT count(*) FROM old",
                &[&before],
            )?;
            c.batch("COMMIT")?;
            Ok(rows)
        })?;
        let n = rows.first().map_or(0, |r| r.get::<_, i64>(0));
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Runs `sql` (tests: install triggers, poke at rows).
    #[cfg(test)]
    pub(crate) fn exec(&self, sql: &str) -> Result<(), StoreError> {
        self.run(|c| c.batch(sql))
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Closing a connection blocks on the driver's runtime: not on a tokio worker.
        if let Some(pool) = self.pool.take() {
            blocking(move || drop(pool));
        }
    }
}

/// A session's summary, in the order [`sql::session_summary`] reads it: its size is the
/// bytes of its snapshot and entries.
macro_rules! summary_columns {
    () => {
        "id, user_id, project_id, version, events, ended, created_at, updated_at,
         (octet_length(snapshot) + coalesce((SELECT sum(octet_length(entry))
             FROM session_entry e WHERE e.session_id = session.id), 0))::bigint"
    };
}
pub(crate) use summary_columns;

/// A stored session, with its snapshot and its entries, in one statement (so of one save):
/// columns of [`sql::stored_session`], then the entries' lists, places and texts as arrays.
pub(crate) const SELECT_SESSION: &str = concat!(
    "SELECT ",
    summary_columns!(),
    ", snapshot,
            ARRAY(SELECT list FROM session_entry e WHERE e.session_id = session.id
                  ORDER BY list, n),
            ARRAY(SELECT n FROM session_entry e WHERE e.session_id = session.id
                  ORDER BY list, n),
            ARRAY(SELECT entry FROM session_entry e WHERE e.session_id = session.id
                  ORDER BY list, n)
     FROM session WHERE id = $1"
);

/// A stored session read by [`SELECT_SESSION`], with its entries.
pub(crate) fn stored_session_with_entries(r: &Row) -> Result<StoredSession, postgres::Error> {
    let lists: Vec<i16> = r.try_get(10)?;
    let places: Vec<i64> = r.try_get(11)?;
    let texts: Vec<String> = r.try_get(12)?;
    let entries = lists
        .into_iter()
        .zip(places)
        .zip(texts)
        .map(|((list, n), text)| SessionEntry {
            // A list the engine does not know (negative, written by hand) is read as 255, which
            // it ignores.
            list: u8::try_from(list).unwrap_or(u8::MAX),
            n,
            text,
        })
        .collect();
    Ok(StoredSession {
        entries,
        ..sql::stored_session(r)?
    })
}

/// A group that failed inside `warden_write_groups`: its index, the key, why.
pub(crate) type GroupFailure = (usize, String, String);

/// Applies groups of writes in one round trip (inside the caller's transaction), each group
/// in a subtransaction of its own, every scope written locked first; the groups that failed.
pub(crate) fn write_groups(
    c: &mut Conn,
    groups: &[Vec<StateWrite>],
) -> Result<Vec<GroupFailure>, postgres::Error> {
    let n: usize = groups.iter().map(Vec::len).sum();
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut group = Vec::with_capacity(n);
    let (mut user, mut project, mut plugin, mut key, mut value) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (g, writes) in groups.iter().enumerate() {
        for w in writes {
            group.push(i32::try_from(g).unwrap_or(i32::MAX));
            user.push(w.scope.user.as_str());
            project.push(w.scope.project.as_str());
            plugin.push(w.scope.plugin.as_str());
            key.push(w.key.as_str());
            value.push(w.value.as_ref().map(serde_json::Value::to_string));
        }
    }
    let rows = c.query(
        "SELECT failed_group, failed_key, failure FROM warden_write_groups($1, $2, $3, $4, $5, $6)",
        &[&group, &user, &project, &plugin, &key, &value],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let g: i32 = r.get(0);
            (
                usize::try_from(g).unwrap_or(usize::MAX),
                r.get::<_, Option<String>>(1).unwrap_or_default(),
                r.get::<_, Option<String>>(2).unwrap_or_default(),
            )
        })
        .collect())
}

/// One result per group, from the failures `write_groups` returned.
pub(crate) fn group_results(
    db: &Named,
    groups: &[Vec<StateWrite>],
    failed: Vec<GroupFailure>,
) -> Vec<Result<(), StoreError>> {
    let mut results: Vec<Result<(), StoreError>> = groups.iter().map(|_| Ok(())).collect();
    for (g, key, why) in failed {
        let Some(writes) = groups.get(g) else {
            continue;
        };
        let scope = writes
            .iter()
            .find(|w| w.key == key)
            .or(writes.first())
            .map(|w| w.scope.clone())
            .unwrap_or_else(|| StateScope::new("", "", ""));
        results[g] = Err(db.write(&scope, &key, DbError::Server(why)));
    }
    results
}

/// The columns of execution-log `records` from `user_id` on (in the log's order, after `id`
/// and `created_at`), as the arrays `unnest` takes: one round trip inserts them all.
pub(crate) fn record_columns<'a>(
    records: &[&'a ExecutionRecord],
) -> Vec<Box<dyn ToSql + Sync + 'a>> {
    fn column<'a, T: ToSql + Sync + 'a>(
        records: &[&'a ExecutionRecord],
        f: impl Fn(&'a ExecutionRecord) -> T,
    ) -> Box<dyn ToSql + Sync + 'a> {
        Box::new(records.iter().map(|r| f(r)).collect::<Vec<T>>())
    }
    vec![
        column(records, |r| r.user_id.as_str()),
        column(records, |r| r.project_id.as_str()),
        column(records, |r| r.session_id.as_deref()),
        column(records, |r| r.rule_id.as_str()),
        column(records, |r| r.trigger.as_str()),
        column(records, |r| r.condition_result),
        column(records, |r| r.action_executed),
        column(records, |r| r.execution_time_ms),
        column(records, |r| r.error_message.as_deref()),
        column(records, |r| r.decision.as_deref()),
        column(records, |r| r.shadow),
        column(records, |r| r.live_decision.as_deref()),
    ]
}

/// Appends execution-log rows in one round trip (inside the caller's transaction).
pub(crate) fn insert_executions(
    c: &mut Conn,
    records: &[ExecutionRecord],
) -> Result<(), postgres::Error> {
    let columns = record_columns(&records.iter().collect::<Vec<_>>());
    let args: Vec<&(dyn ToSql + Sync)> = columns.iter().map(|c| &**c as _).collect();
    c.execute(
        "INSERT INTO rule_execution_log (user_id, project_id, session_id, rule_id, trigger,
             condition_result, action_executed, execution_time_ms, error_message, decision,
             shadow, live_decision)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
             $6::bool[], $7::bool[], $8::float8[], $9::text[], $10::text[], $11::bool[],
             $12::text[])",
        &args,
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests;
