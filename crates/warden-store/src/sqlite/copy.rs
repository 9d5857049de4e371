//! Every row of a SQLite store, out and in, as stored: what `warden migrate` copies.

use rusqlite::{Connection, TransactionBehavior, params};

use super::sessions::{Recent, SUMMARY_COLUMNS};
use super::{SqliteStore, record_values, select};
use crate::copy::{self, Pages};
use crate::error::StoreError;
use crate::sql;
use crate::types::{Dump, ExecutionRow};

/// How many rows each table holds.
fn counts(conn: &Connection) -> rusqlite::Result<[usize; 5]> {
    copy::counts(|sql| conn.query_row(sql, [], |r| r.get(0)))
}

impl SqliteStore {
    /// How many rows each table holds (in the order of a [`CopyReport`]).
    pub(crate) fn counts(&self) -> Result<[usize; 5], StoreError> {
        counts(&*self.conn()?).map_err(|e| self.sql_err(e))
    }

    /// Every row but the execution log's.
    pub(crate) fn dump(&self) -> Result<Dump, StoreError> {
        let conn = self.conn()?;
        (|| {
            let mut dump = Dump {
                state: select(
                    &conn,
                    "SELECT user_id, project_id, plugin_id, key, value_json, created_at, updated_at
                     FROM plugin_state ORDER BY id",
                    [],
                    |r| sql::state_row(r),
                )?,
                toggles: select(
                    &conn,
                    "SELECT user_id, rule_id, enabled, shadow, updated_at FROM rule_toggle
                     ORDER BY user_id, rule_id",
                    [],
                    |r| sql::rule_toggle(r),
                )?,
                overrides: select(
                    &conn,
                    "SELECT user_id, project_id, plugin_id, name, value_json, updated_at
                     FROM setting_override ORDER BY user_id, project_id, plugin_id, name",
                    [],
                    |r| sql::override_row(r),
                )?,
                sessions: Vec::new(),
            };
            let mut recent = std::collections::HashMap::new();
            let query =
                format!("SELECT {SUMMARY_COLUMNS}, snapshot, recent FROM session ORDER BY id");
            dump.sessions = select(&conn, &query, [], |r| {
                let session = sql::stored_session(r)?;
                let newest = Recent::in_row(r, 10, &session.summary.id)?;
                recent.insert(session.summary.id.clone(), newest);
                Ok(session)
            })?;
            let query =
                "SELECT session_id, list, n, entry FROM session_entry ORDER BY session_id, list, n";
            let entries = select(&conn, query, [], |r| sql::session_entry_of(r))?;
            let mut by_id = sql::entries_by_session(entries);
            for s in &mut dump.sessions {
                let table = by_id.remove(&s.summary.id).unwrap_or_default();
                s.entries = recent.remove(&s.summary.id).unwrap_or_default().over(table);
            }
            Ok(dump)
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// At most `limit` execution-log rows after `after` (by id), oldest first.
    pub(crate) fn log_page(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let query = concat!(
            "SELECT ",
            sql::execution_columns!(),
            " FROM rule_execution_log WHERE id > ?1 ORDER BY id LIMIT ?2"
        );
        select(&*self.conn()?, query, params![after, limit], |r| {
            sql::execution_row(r)
        })
        .map_err(|e| self.sql_err(e))
    }

    /// Writes `dump` and every page `log` gives in one transaction: the store must be empty,
    /// or is emptied first with `replace`.
    pub(crate) fn import(
        &self,
        dump: &Dump,
        replace: bool,
        log: Pages<'_>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql_err(e))?;
        let sql = |e| self.sql_err(e);
        if replace {
            for table in copy::TABLES {
                tx.execute(&format!("DELETE FROM {table}"), [])
                    .map_err(sql)?;
            }
            tx.execute("DELETE FROM session_entry", []).map_err(sql)?;
        } else {
            copy::refuse_held(&self.db.label, counts(&tx).map_err(sql)?)?;
        }
        write_dump(&tx, dump).map_err(sql)?;
        let mut stmt = tx
            .prepare(concat!(
                "INSERT INTO rule_execution_log (",
                sql::execution_columns!(),
                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            ))
            .map_err(sql)?;
        while let Some(page) = log()? {
            for row in &page {
                let mut values: Vec<&dyn rusqlite::ToSql> = vec![&row.id, &row.created_at];
                values.extend(record_values(&row.record));
                stmt.execute(values.as_slice()).map_err(sql)?;
            }
        }
        drop(stmt);
        tx.commit().map_err(sql)
    }
}

/// Writes every row of `dump` as it was stored (inside the caller's transaction).
fn write_dump(tx: &Connection, dump: &Dump) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare(
        "INSERT INTO plugin_state (user_id, project_id, plugin_id, key, value_json, created_at,
         updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for r in &dump.state {
        stmt.execute(params![
            r.scope.user,
            r.scope.project,
            r.scope.plugin,
            r.key,
            r.value_json,
            r.created_at,
            r.updated_at
        ])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO rule_toggle (user_id, rule_id, enabled, shadow, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for t in &dump.toggles {
        let (enabled, shadow) = t.state.columns();
        stmt.execute(params![t.user_id, t.rule_id, enabled, shadow, t.updated_at])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json,
         updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for o in &dump.overrides {
        stmt.execute(params![o[0], o[1], o[2], o[3], o[4], o[5]])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO session (id, user_id, project_id, version, snapshot, events, ended,
         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    let mut entry = tx.prepare(
        "INSERT INTO session_entry (session_id, list, n, entry) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for s in &dump.sessions {
        let m = &s.summary;
        let events = i64::try_from(m.events).unwrap_or(i64::MAX);
        stmt.execute(params![
            m.id,
            m.user,
            m.project,
            m.version,
            s.snapshot,
            events,
            m.ended,
            m.created_at,
            m.updated_at
        ])?;
        for e in &s.entries {
            entry.execute(params![m.id, e.list, e.n, e.text])?;
        }
    }
    Ok(())
}
