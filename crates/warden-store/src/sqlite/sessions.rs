//! Durable sessions in SQLite: one row each, with a version that grows by one at every save,
//! so that a process that loaded an older version finds out before it overwrites a newer one;
//! and the entries of its lists, a row each (`session_entry`), written when they change.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Named, SqliteStore};
use crate::error::StoreError;
use crate::types::{SessionEntry, SessionSummary, SessionWrite, StoredSession};

pub(crate) const SUMMARY_COLUMNS: &str =
    "id, user_id, project_id, version, events, ended, created_at, updated_at,
     length(CAST(snapshot AS BLOB)) + (SELECT coalesce(sum(length(CAST(entry AS BLOB))), 0)
         FROM session_entry WHERE session_id = session.id)";

fn summary(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id: row.get(0)?,
        user: row.get(1)?,
        project: row.get(2)?,
        version: row.get(3)?,
        events: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        ended: row.get::<_, i64>(5)? != 0,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
        size: u64::try_from(row.get::<_, i64>(8)?).unwrap_or(0),
    })
}

/// Saves `s` inside the caller's transaction; the new version.
pub(crate) fn save_session(
    db: &Named,
    conn: &Connection,
    s: &SessionWrite<'_>,
) -> Result<i64, StoreError> {
    let events = i64::try_from(s.events).unwrap_or(i64::MAX);
    let changed = match s.loaded {
        None => conn.prepare_cached(
            "INSERT INTO session (id, user_id, project_id, version, snapshot, events, ended, updated_at)
             VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO NOTHING",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![s.id, s.user, s.project, s.snapshot, events, s.ended, s.updated_at])
        }),
        Some(v) if s.touch => conn
            .prepare_cached(
                "UPDATE session SET user_id = ?2, project_id = ?3, version = version + 1,
                 snapshot = ?4, events = ?5, ended = ?6, updated_at = ?7
                 WHERE id = ?1 AND version = ?8",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    s.id, s.user, s.project, s.snapshot, events, s.ended, s.updated_at, v
                ])
            }),
        // Without `updated_at` in the statement: SQLite rewrites an index whose column is
        // set, even to the value it holds.
        Some(v) => conn
            .prepare_cached(
                "UPDATE session SET user_id = ?2, project_id = ?3, version = version + 1,
                 snapshot = ?4, events = ?5, ended = ?6
                 WHERE id = ?1 AND version = ?7",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![s.id, s.user, s.project, s.snapshot, events, s.ended, v])
            }),
    }
    .map_err(|e| db.sql_err(e))?;
    if changed == 0 {
        return Err(StoreError::SessionConflict {
            db: db.label.clone(),
            id: s.id.to_string(),
        });
    }
    write_entries(conn, s).map_err(|e| db.sql_err(e))?;
    Ok(s.loaded.map_or(1, |v| v + 1))
}

/// Writes a save's entries, and drops those before each list's first.
fn write_entries(conn: &Connection, s: &SessionWrite<'_>) -> rusqlite::Result<()> {
    if !s.entries.is_empty() {
        let mut put = conn.prepare_cached(
            "INSERT INTO session_entry (session_id, list, n, entry) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (session_id, list, n) DO UPDATE SET entry = excluded.entry",
        )?;
        for e in s.entries {
            put.execute(params![s.id, e.list, e.n, e.text])?;
        }
    }
    if !s.firsts.is_empty() {
        let mut drop = conn.prepare_cached(
            "DELETE FROM session_entry WHERE session_id = ?1 AND list = ?2 AND n < ?3",
        )?;
        for (list, first) in s.firsts {
            drop.execute(params![s.id, list, first])?;
        }
    }
    Ok(())
}

/// The entries of session `id`, by list and place.
fn entries(conn: &Connection, id: &str) -> rusqlite::Result<Vec<SessionEntry>> {
    let mut stmt = conn.prepare_cached(
        "SELECT list, n, entry FROM session_entry WHERE session_id = ?1 ORDER BY list, n",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(SessionEntry {
            // A list the engine does not know (past 255, written by hand) is read as 255, which
            // it ignores, as PostgreSQL's reading does.
            list: u8::try_from(r.get::<_, i64>(0)?).unwrap_or(u8::MAX),
            n: r.get(1)?,
            text: r.get(2)?,
        })
    })?;
    rows.collect()
}

/// The session `id` with its entries, read on `conn` (inside a transaction, so that the row
/// and the entries are of one save).
pub(crate) fn load_session(
    store: &SqliteStore,
    conn: &Connection,
    id: &str,
) -> Result<Option<StoredSession>, StoreError> {
    (|| {
        let found = conn
            .prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS}, snapshot FROM session WHERE id = ?1"
            ))?
            .query_row([id], |row| {
                Ok(StoredSession {
                    summary: summary(row)?,
                    snapshot: row.get(9)?,
                    entries: Vec::new(),
                })
            })
            .optional()?;
        found
            .map(|mut s| {
                s.entries = entries(conn, id)?;
                Ok(s)
            })
            .transpose()
    })()
    .map_err(|e| store.sql_err(e))
}

/// The version of the session `id`, read on `conn`.
pub(crate) fn session_version(
    store: &SqliteStore,
    conn: &Connection,
    id: &str,
) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached("SELECT version FROM session WHERE id = ?1")
        .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
        .map_err(|e| store.sql_err(e))
}

impl SqliteStore {
    /// The saved session `id`, or `None` if it was never saved (or was deleted).
    pub(crate) fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        let conn = self.reader();
        // A read transaction: the row and its entries from one snapshot of the database.
        let tx = conn.unchecked_transaction().map_err(|e| self.sql_err(e))?;
        let found = load_session(self, &tx, id)?;
        tx.finish().map_err(|e| self.sql_err(e))?;
        Ok(found)
    }

    /// The version of the saved session `id` (cheap: to tell whether a copy in memory is
    /// still the latest).
    pub(crate) fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        session_version(self, &self.reader(), id)
    }

    /// Saved sessions, most recently touched first, at most `limit`.
    pub(crate) fn sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let conn = self.reader();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        (|| {
            let mut stmt = conn.prepare_cached(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM session ORDER BY updated_at DESC, id LIMIT ?1"
            ))?;
            let rows = stmt.query_map([limit], summary)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// Deletes the saved session `id`; whether there was one.
    pub(crate) fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        (|| {
            let tx = conn.unchecked_transaction()?;
            tx.execute("DELETE FROM session_entry WHERE session_id = ?1", [id])?;
            let n = tx.execute("DELETE FROM session WHERE id = ?1", [id])?;
            tx.commit()?;
            Ok(n > 0)
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// Deletes every saved session last touched before `before` (seconds since the Unix
    /// epoch); how many.
    pub(crate) fn prune_sessions(&self, before: f64) -> Result<usize, StoreError> {
        let conn = self.lock();
        (|| {
            let tx = conn.unchecked_transaction()?;
            tx.execute(
                "DELETE FROM session_entry WHERE session_id IN
                     (SELECT id FROM session WHERE updated_at < ?1)",
                [before],
            )?;
            let n = tx.execute("DELETE FROM session WHERE updated_at < ?1", [before])?;
            tx.commit()?;
            Ok(n)
        })()
        .map_err(|e| self.sql_err(e))
    }
}
