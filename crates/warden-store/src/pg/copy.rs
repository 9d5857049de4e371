//! Every row of a PostgreSQL store, out and in, as stored: what `warden migrate` copies.

use postgres::types::ToSql;

use super::conn::Conn;
use super::{PgStore, record_columns, summary_columns};
use crate::copy::{self, Pages};
use crate::error::StoreError;
use crate::sql;
use crate::types::{Dump, ExecutionRow};

/// How many rows each table holds.
fn counts(c: &mut Conn) -> Result<[usize; 5], postgres::Error> {
    copy::counts(|sql| Ok(c.client.query_one(sql, &[])?.get(0)))
}

impl PgStore {
    /// How many rows each table holds.
    pub(crate) fn counts(&self) -> Result<[usize; 5], StoreError> {
        self.run(counts)
    }

    /// Every row but the execution log's.
    pub(crate) fn dump(&self) -> Result<Dump, StoreError> {
        self.run(|c| {
            let mut dump = Dump::default();
            // One snapshot for all four tables.
            c.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let rows = c.client.query(
                "SELECT user_id, project_id, plugin_id, key, value_json, created_at, updated_at
                 FROM plugin_state ORDER BY id",
                &[],
            )?;
            dump.state = rows.iter().map(sql::state_row).collect::<Result<_, _>>()?;
            let rows = c.client.query(
                "SELECT user_id, rule_id, enabled, shadow, updated_at FROM rule_toggle
                 ORDER BY user_id COLLATE \"C\", rule_id COLLATE \"C\"",
                &[],
            )?;
            dump.toggles = rows
                .iter()
                .map(sql::rule_toggle)
                .collect::<Result<_, _>>()?;
            let rows = c.client.query(
                "SELECT user_id, project_id, plugin_id, name, value_json, updated_at
                 FROM setting_override ORDER BY user_id COLLATE \"C\",
                 project_id COLLATE \"C\", plugin_id COLLATE \"C\", name COLLATE \"C\"",
                &[],
            )?;
            dump.overrides = rows
                .iter()
                .map(sql::override_row)
                .collect::<Result<_, _>>()?;
            let rows = c.client.query(
                concat!(
                    "SELECT ",
                    summary_columns!(),
                    ", snapshot FROM session ORDER BY id COLLATE \"C\""
                ),
                &[],
            )?;
            dump.sessions = rows
                .iter()
                .map(sql::stored_session)
                .collect::<Result<_, _>>()?;
            // `list` widened to the integer SQLite's is read as.
            let rows = c.client.query(
                "SELECT session_id, list::bigint, n, entry FROM session_entry
                 ORDER BY session_id COLLATE \"C\", list, n",
                &[],
            )?;
            let entries = rows
                .iter()
                .map(sql::session_entry_of)
                .collect::<Result<_, _>>()?;
            let mut by_id = sql::entries_by_session(entries);
            for s in &mut dump.sessions {
                s.entries = by_id.remove(&s.summary.id).unwrap_or_default();
            }
            c.batch("COMMIT")?;
            Ok(dump)
        })
    }

    /// At most `limit` execution-log rows after `after` (by id), oldest first.
    pub(crate) fn log_page(
        &self,
        after: i64,
        limit: usize,
    ) -> Result<Vec<ExecutionRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|c| {
            let rows = c.query(
                concat!(
                    "SELECT ",
                    sql::execution_columns!(),
                    " FROM rule_execution_log WHERE id > $1 ORDER BY id LIMIT $2"
                ),
                &[&after, &limit],
            )?;
            rows.iter().map(sql::execution_row).collect()
        })
    }

    /// Writes `dump` and every page `log` gives in one transaction: the store must be empty,
    /// or is emptied first with `replace`.
    pub(crate) fn import(
        &self,
        dump: &Dump,
        replace: bool,
        log: Pages<'_>,
    ) -> Result<(), StoreError> {
        super::conn::blocking(|| {
            let mut conn = self.checkout()?;
            let result = self.import_on(&mut conn, dump, replace, log);
            if result.is_err() {
                conn.rollback();
            }
            result
        })
    }

    fn import_on(
        &self,
        c: &mut Conn,
        dump: &Dump,
        replace: bool,
        log: Pages<'_>,
    ) -> Result<(), StoreError> {
        let pg = |e| self.err(e);
        c.batch("BEGIN").map_err(pg)?;
        if replace {
            c.batch(&format!(
                "TRUNCATE session_entry, {}",
                copy::TABLES.join(", ")
            ))
            .map_err(pg)?;
        } else {
            copy::refuse_held(&self.db.label, counts(c).map_err(pg)?)?;
        }
        write_dump(c, dump).map_err(pg)?;
        while let Some(page) = log()? {
            insert_page(c, &page).map_err(pg)?;
        }
        // Rows recorded from now on continue after the ids copied.
        c.batch(
            "SELECT setval(pg_get_serial_sequence('rule_execution_log', 'id'),
                 coalesce((SELECT max(id) FROM rule_execution_log), 0) + 1, false);
             SELECT setval(pg_get_serial_sequence('plugin_state', 'id'),
                 coalesce((SELECT max(id) FROM plugin_state), 0) + 1, false);
             COMMIT",
        )
        .map_err(pg)
    }
}

/// Writes every row of `dump` as it was stored (inside the caller's transaction).
fn write_dump(c: &mut Conn, dump: &Dump) -> Result<(), postgres::Error> {
    for r in &dump.state {
        c.execute(
            "INSERT INTO plugin_state (user_id, project_id, plugin_id, key, value_json,
                 created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &r.scope.user,
                &r.scope.project,
                &r.scope.plugin,
                &r.key,
                &r.value_json,
                &r.created_at,
                &r.updated_at,
            ],
        )?;
    }
    for t in &dump.toggles {
        let (enabled, shadow) = t.state.columns();
        c.execute(
            "INSERT INTO rule_toggle (user_id, rule_id, enabled, shadow, updated_at)
             VALUES ($1, $2, $3, $4, $5)",
            &[&t.user_id, &t.rule_id, &enabled, &shadow, &t.updated_at],
        )?;
    }
    for o in &dump.overrides {
        c.execute(
            "INSERT INTO setting_override (user_id, project_id, plugin_id, name,
                 value_json, updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&o[0], &o[1], &o[2], &o[3], &o[4], &o[5]],
        )?;
    }
    for s in &dump.sessions {
        let m = &s.summary;
        let events = i64::try_from(m.events).unwrap_or(i64::MAX);
        c.execute(
            "INSERT INTO session (id, user_id, project_id, version, snapshot, events, ended,
                 created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &m.id,
                &m.user,
                &m.project,
                &m.version,
                &s.snapshot,
                &events,
                &m.ended,
                &m.created_at,
                &m.updated_at,
            ],
        )?;
        for e in &s.entries {
            c.execute(
                "INSERT INTO session_entry (session_id, list, n, entry)
                 VALUES ($1, $2, $3, $4)",
                &[&m.id, &i16::from(e.list), &e.n, &e.text],
            )?;
        }
    }
    Ok(())
}

/// Inserts a page of execution-log rows, ids and times kept, in one round trip.
fn insert_page(c: &mut Conn, page: &[ExecutionRow]) -> Result<(), postgres::Error> {
    let ids: Vec<i64> = page.iter().map(|r| r.id).collect();
    let created: Vec<&str> = page.iter().map(|r| r.created_at.as_str()).collect();
    let columns = record_columns(&page.iter().map(|r| &r.record).collect::<Vec<_>>());
    let mut args: Vec<&(dyn ToSql + Sync)> = vec![&ids, &created];
    args.extend(columns.iter().map(|c| &**c as &(dyn ToSql + Sync)));
    c.execute(
        concat!(
            "INSERT INTO rule_execution_log (",
            sql::execution_columns!(),
            ") SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[],
             $6::text[], $7::text[], $8::bool[], $9::bool[], $10::float8[], $11::text[],
             $12::text[], $13::bool[], $14::text[])"
        ),
        &args,
    )
    .map(|_| ())
}
