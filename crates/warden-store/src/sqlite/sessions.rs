//! Durable sessions in SQLite: one row each, with a version that grows by one at every save,
//! so that a process that loaded an older version finds out before it overwrites a newer one;
//! and the entries of its lists, a row each (`session_entry`). The newest entries stay in the
//! session's row (`recent`) until they pass [`RECENT_MAX_BYTES`], and then move to their table
//! together: most saves write one page of the write-ahead log, not two.

use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, execute, select};
use crate::error::Named;
use crate::error::StoreError;
use crate::sql;
use crate::types::{SessionEntry, SessionSummary, SessionWrite, StoredSession};

/// A session's summary; its size is the bytes of its snapshot and of its entries' text, where
/// they are kept (the row's newest over the table's, the table's before a list's first not
/// counted), as PostgreSQL counts them. The table's rows are summed once; what the row's newest
/// entries change is found from their side (a few entries), not row by row. Elements of
/// `recent` that are not what Warden writes are left out, so one damaged row does not stop the
/// listing (loading it says what is wrong).
pub(crate) const SUMMARY_COLUMNS: &str =
    "id, user_id, project_id, version, events, ended, created_at, updated_at,
     length(CAST(snapshot AS BLOB))
     + (SELECT coalesce(sum(length(CAST(entry AS BLOB))), 0)
         FROM session_entry WHERE session_id = session.id)
     + CASE WHEN recent IS NOT NULL AND json_valid(recent) THEN
         (SELECT coalesce(sum(length(CAST(r.value ->> 2 AS BLOB))), 0)
             FROM json_each(recent, '$.e') r WHERE r.type = 'array')
         - (SELECT coalesce(sum(length(CAST(t.entry AS BLOB))), 0)
             FROM json_each(recent, '$.f') f JOIN session_entry t
             ON t.session_id = session.id AND t.list = f.value ->> 0 AND t.n < f.value ->> 1
             WHERE f.type = 'array')
         - (SELECT coalesce(sum(length(CAST(t.entry AS BLOB))), 0)
             FROM json_each(recent, '$.e') r JOIN session_entry t
             ON t.session_id = session.id AND t.list = r.value ->> 0 AND t.n = r.value ->> 1
             WHERE r.type = 'array' AND NOT EXISTS (SELECT 1 FROM json_each(recent, '$.f') f
                 WHERE f.type = 'array' AND f.value ->> 0 = t.list AND t.n < f.value ->> 1))
       ELSE 0 END";

/// How many bytes of entries (their JSON) a session's row holds (`session.recent`) before they
/// move to `session_entry`. A save then writes the row's page alone; every few saves, the
/// entries' page too. (Under the service's load, a save that wrote both pages each time spent
/// about half the bytes it wrote on the entries' page.)
pub(crate) const RECENT_MAX_BYTES: usize = 1024;

/// A session's newest entries, kept in its row (`session.recent`, JSON) until they pass
/// [`RECENT_MAX_BYTES`]; and, per list, the place of its first entry if its front was dropped
/// since they last moved: the rows of `session_entry` before it are deleted when the entries
/// move, and are not read meanwhile.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Recent {
    #[serde(rename = "e", default)]
    entries: Vec<(u8, i64, String)>,
    #[serde(rename = "f", default)]
    firsts: Vec<(u8, i64)>,
}

impl Recent {
    /// The entries column `column` of `row` holds, session `id`'s `recent` (none for NULL).
    /// A column that is not what Warden writes is the error of reading the row, naming it.
    pub(crate) fn in_row(
        row: &rusqlite::Row<'_>,
        column: usize,
        id: &str,
    ) -> rusqlite::Result<Recent> {
        let Some(text) = row.get_ref(column)?.as_str_or_null()? else {
            return Ok(Recent::default());
        };
        serde_json::from_str(text).map_err(|e| {
            let why = format!(
                "session {id:?}: its newest entries (column `recent` of table `session`) are not \
                 what Warden writes ({e}); `warden sessions delete {id}` removes the session"
            );
            rusqlite::Error::FromSqlConversionFailure(
                column,
                rusqlite::types::Type::Text,
                why.into(),
            )
        })
    }

    /// Adds a save's entries (each replacing what is at its place), then drops what is before
    /// each list's new first entry.
    fn add(&mut self, s: &SessionWrite<'_>) {
        for e in s.entries {
            match self
                .entries
                .iter_mut()
                .find(|(l, n, _)| *l == e.list && *n == e.n)
            {
                Some(held) => held.2.clone_from(&e.text),
                None => self.entries.push((e.list, e.n, e.text.clone())),
            }
        }
        for &(list, first) in s.firsts {
            self.entries.retain(|(l, n, _)| *l != list || *n >= first);
            match self.firsts.iter_mut().find(|(l, _)| *l == list) {
                Some(held) => held.1 = held.1.max(first),
                None => self.firsts.push((list, first)),
            }
        }
    }

    /// A session's entries: those of `session_entry` (`table`, by list and place) not before
    /// their list's first, with these over them.
    pub(crate) fn over(self, table: Vec<SessionEntry>) -> Vec<SessionEntry> {
        let first = |list: u8| {
            self.firsts
                .iter()
                .find(|(l, _)| *l == list)
                .map_or(i64::MIN, |(_, f)| *f)
        };
        let mut all: Vec<SessionEntry> =
            table.into_iter().filter(|e| e.n >= first(e.list)).collect();
        // In order already, but for a list past 255 written by hand (read as 255).
        all.sort_by_key(|e| (e.list, e.n));
        for (list, n, text) in self.entries {
            match all.binary_search_by(|e| (e.list, e.n).cmp(&(list, n))) {
                Ok(i) => all[i].text = text,
                Err(i) => all.insert(i, SessionEntry { list, n, text }),
            }
        }
        all
    }
}

/// Saves `s` inside the caller's transaction; the new version.
pub(crate) fn save_session(
    db: &Named,
    conn: &Connection,
    s: &SessionWrite<'_>,
) -> Result<i64, StoreError> {
    let writes_entries = !s.entries.is_empty() || !s.firsts.is_empty();
    if !writes_entries {
        return write_row(db, conn, s, Newest::Keep);
    }
    let mut recent = match s.loaded {
        None => Recent::default(),
        Some(_) => conn
            .prepare_cached("SELECT recent FROM session WHERE id = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([s.id], |r| Recent::in_row(r, 0, s.id))
                    .optional()
            })
            .map_err(|e| db.sql_err(e))?
            // No row: the versioned write below finds the conflict.
            .unwrap_or_default(),
    };
    recent.add(s);
    let column = serde_json::to_string(&recent)
        .map_err(|e| db.refused(format!("cannot write the session's newest entries: {e}")))?;
    if column.len() <= RECENT_MAX_BYTES {
        return write_row(db, conn, s, Newest::Set(&column));
    }
    // The entries move to their table, with the row, or neither.
    in_savepoint(conn, db, || {
        let version = write_row(db, conn, s, Newest::Clear)?;
        move_entries(conn, s.id, &recent).map_err(|e| db.sql_err(e))?;
        Ok(version)
    })
}

/// What a write of a session's row does with its newest entries (`session.recent`).
#[derive(Clone, Copy)]
enum Newest<'a> {
    /// Leaves them as they are (the save has no entries).
    Keep,
    /// Empties them (they moved to `session_entry`).
    Clear,
    /// Sets them to this JSON.
    Set(&'a str),
}

/// Writes the session's row, and its newest entries as `newest` says.
fn write_row(
    db: &Named,
    conn: &Connection,
    s: &SessionWrite<'_>,
    newest: Newest<'_>,
) -> Result<i64, StoreError> {
    let events = i64::try_from(s.events).unwrap_or(i64::MAX);
    let (set_recent, recent) = match newest {
        Newest::Keep => (false, None),
        Newest::Clear => (true, None),
        Newest::Set(json) => (true, Some(json)),
    };
    let changed = match s.loaded {
        None => execute(
            conn,
            "INSERT INTO session (id, user_id, project_id, version, snapshot, events, ended, updated_at, recent)
             VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(id) DO NOTHING",
            params![s.id, s.user, s.project, s.snapshot, events, s.ended, s.updated_at, recent],
        ),
        Some(v) if s.touch => execute(
            conn,
            "UPDATE session SET user_id = ?2, project_id = ?3, version = version + 1,
             snapshot = ?4, events = ?5, ended = ?6, updated_at = ?7,
             recent = CASE WHEN ?9 THEN ?10 ELSE recent END
             WHERE id = ?1 AND version = ?8",
            params![
                s.id, s.user, s.project, s.snapshot, events, s.ended, s.updated_at, v,
                set_recent, recent
            ],
        ),
        // Without `updated_at` in the statement: SQLite rewrites an index whose column is
        // set, even to the value it holds. (`recent` has no index.)
        Some(v) => execute(
            conn,
            "UPDATE session SET user_id = ?2, project_id = ?3, version = version + 1,
             snapshot = ?4, events = ?5, ended = ?6,
             recent = CASE WHEN ?8 THEN ?9 ELSE recent END
             WHERE id = ?1 AND version = ?7",
            params![s.id, s.user, s.project, s.snapshot, events, s.ended, v, set_recent, recent],
        ),
    }
    .map_err(|e| db.sql_err(e))?;
    if changed == 0 {
        return Err(db.conflict(s.id));
    }
    Ok(s.loaded.map_or(1, |v| v + 1))
}

/// Drops the rows of `session_entry` before each list's first, then moves the session's newest
/// entries there. In that order: an entry the row holds was written after the first it keeps
/// (`Recent::add` dropped those before), so it stays, as it would have in the table.
fn move_entries(conn: &Connection, id: &str, recent: &Recent) -> rusqlite::Result<()> {
    let mut drop = conn.prepare_cached(
        "DELETE FROM session_entry WHERE session_id = ?1 AND list = ?2 AND n < ?3",
    )?;
    for (list, first) in &recent.firsts {
        drop.execute(params![id, list, first])?;
    }
    let mut put = conn.prepare_cached(
        "INSERT INTO session_entry (session_id, list, n, entry) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session_id, list, n) DO UPDATE SET entry = excluded.entry",
    )?;
    for (list, n, text) in &recent.entries {
        put.execute(params![id, list, n, text])?;
    }
    Ok(())
}

/// Runs `f` in a savepoint: undone whole if it fails.
pub(crate) fn in_savepoint<R>(
    conn: &Connection,
    db: &Named,
    f: impl FnOnce() -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let step = |sql: &str| execute(conn, sql, []);
    if let Err(e) = step("SAVEPOINT save") {
        return Err(db.sql_err(e));
    }
    let result = f();
    if conn.is_autocommit() {
        return result;
    }
    if result.is_err() && step("ROLLBACK TO save").is_err() {
        // What the save wrote cannot be undone alone: the whole transaction is (its caller
        // finds it ended), rather than keep half of this save.
        let _ = conn.execute_batch("ROLLBACK");
        return result;
    }
    let _ = step("RELEASE save");
    result
}

/// The entries of session `id`, by list and place.
fn entries(conn: &Connection, id: &str) -> rusqlite::Result<Vec<SessionEntry>> {
    let query = "SELECT list, n, entry FROM session_entry WHERE session_id = ?1 ORDER BY list, n";
    select(conn, query, [id], |r| sql::session_entry(r, 0))
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
                "SELECT {SUMMARY_COLUMNS}, snapshot, recent FROM session WHERE id = ?1"
            ))?
            .query_row([id], |row| {
                let recent = Recent::in_row(row, 10, id)?;
                Ok((sql::stored_session(row)?, recent))
            })
            .optional()?;
        found
            .map(|(mut s, recent)| {
                s.entries = recent.over(entries(conn, id)?);
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
        let conn = self.reader()?;
        // A read transaction: the row and its entries from one snapshot of the database.
        let tx = conn.unchecked_transaction().map_err(|e| self.sql_err(e))?;
        let found = load_session(self, &tx, id)?;
        tx.finish().map_err(|e| self.sql_err(e))?;
        Ok(found)
    }

    /// The version of the saved session `id` (cheap: to tell whether a copy in memory is
    /// still the latest).
    pub(crate) fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        session_version(self, &*self.reader()?, id)
    }

    /// Saved sessions, most recently touched first, at most `limit`.
    pub(crate) fn sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let query =
            format!("SELECT {SUMMARY_COLUMNS} FROM session ORDER BY updated_at DESC, id LIMIT ?1");
        select(&*self.reader()?, &query, [limit], |r| {
            sql::session_summary(r)
        })
        .map_err(|e| self.sql_err(e))
    }

    /// Deletes the saved session `id`; whether there was one.
    pub(crate) fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let conn = self.conn()?;
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
        let conn = self.conn()?;
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
