//! Durable sessions: a session's state, saved after each tick as one opaque document (the
//! engine's snapshot, JSON text) with a version that grows by one at every save, so that a
//! process that loaded an older version finds out before it overwrites a newer one.
//!
//! The store knows nothing of what a snapshot holds: it keeps the text, who the session is for,
//! how many events it saw, whether it ended, and when it was last touched (for retention).

use rusqlite::{Connection, OptionalExtension, params};

use crate::{Store, StoreError};

/// A session to save at the end of a tick (see [`crate::Commit::session`]).
#[derive(Debug, Clone)]
pub struct SessionWrite<'a> {
    /// The session id.
    pub id: &'a str,
    /// Its user.
    pub user: &'a str,
    /// Its project.
    pub project: &'a str,
    /// The version it was loaded at; `None` for a session that was never saved.
    pub loaded: Option<i64>,
    /// The engine's snapshot of the session.
    pub snapshot: &'a str,
    /// Events the session has seen.
    pub events: u64,
    /// Whether it ended (`on_session_end`).
    pub ended: bool,
    /// When it was touched, in seconds since the Unix epoch.
    pub updated_at: f64,
}

/// A saved session, as read back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredSession {
    /// What the listing shows.
    pub summary: SessionSummary,
    /// The engine's snapshot.
    pub snapshot: String,
}

/// A saved session, without its snapshot.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// Its user.
    pub user: String,
    /// Its project.
    pub project: String,
    /// Saves so far (1 after the first tick).
    pub version: i64,
    /// Events it has seen.
    pub events: u64,
    /// Whether it ended.
    pub ended: bool,
    /// When it was first saved (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub created_at: String,
    /// When it was last touched, in seconds since the Unix epoch.
    pub updated_at: f64,
    /// The size of its snapshot, in bytes.
    pub size: u64,
}

const SUMMARY_COLUMNS: &str =
    "id, user_id, project_id, version, events, ended, created_at, updated_at, length(snapshot)";

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
    store: &Store,
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
        Some(v) => conn
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
    }
    .map_err(|e| store.sql_err(e))?;
    if changed == 0 {
        return Err(StoreError::SessionConflict {
            db: store.label.clone(),
            id: s.id.to_string(),
        });
    }
    Ok(s.loaded.map_or(1, |v| v + 1))
}

pub(crate) fn load_session(
    store: &Store,
    conn: &Connection,
    id: &str,
) -> Result<Option<StoredSession>, StoreError> {
    conn.prepare_cached(&format!(
        "SELECT {SUMMARY_COLUMNS}, snapshot FROM session WHERE id = ?1"
    ))
    .and_then(|mut stmt| {
        stmt.query_row([id], |row| {
            Ok(StoredSession {
                summary: summary(row)?,
                snapshot: row.get(9)?,
            })
        })
        .optional()
    })
    .map_err(|e| store.sql_err(e))
}

pub(crate) fn session_version(
    store: &Store,
    conn: &Connection,
    id: &str,
) -> Result<Option<i64>, StoreError> {
    conn.prepare_cached("SELECT version FROM session WHERE id = ?1")
        .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
        .map_err(|e| store.sql_err(e))
}

impl Store {
    /// The saved session `id`, or `None` if it was never saved (or was deleted).
    pub fn load_session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        load_session(self, &self.lock(), id)
    }

    /// The version of the saved session `id` (cheap: to tell whether a copy in memory is
    /// still the latest).
    pub fn session_version(&self, id: &str) -> Result<Option<i64>, StoreError> {
        session_version(self, &self.lock(), id)
    }

    /// Saved sessions, most recently touched first, at most `limit`.
    pub fn sessions(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError> {
        let conn = self.lock();
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
    pub fn delete_session(&self, id: &str) -> Result<bool, StoreError> {
        let conn = self.lock();
        conn.execute("DELETE FROM session WHERE id = ?1", [id])
            .map(|n| n > 0)
            .map_err(|e| self.sql_err(e))
    }

    /// Deletes every saved session last touched before `before` (seconds since the Unix
    /// epoch); how many.
    pub fn prune_sessions(&self, before: f64) -> Result<usize, StoreError> {
        let conn = self.lock();
        conn.execute("DELETE FROM session WHERE updated_at < ?1", [before])
            .map_err(|e| self.sql_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write<'a>(id: &'a str, loaded: Option<i64>, snapshot: &'a str) -> SessionWrite<'a> {
        SessionWrite {
            id,
            user: "ann",
            project: "p",
            loaded,
            snapshot,
            events: 3,
            ended: false,
            updated_at: 100.0,
        }
    }

    fn save(store: &Store, w: SessionWrite<'_>) -> Result<i64, StoreError> {
        store.tick().commit(Some(w)).map(|v| v.unwrap_or(0))
    }

    #[test]
    fn a_session_round_trips_and_its_version_grows() {
        let store = Store::in_memory().unwrap();
        assert!(store.load_session("s1").unwrap().is_none());
        assert_eq!(save(&store, write("s1", None, "{\"a\":1}")).unwrap(), 1);
        assert_eq!(save(&store, write("s1", Some(1), "{\"a\":2}")).unwrap(), 2);
        let s = store.load_session("s1").unwrap().unwrap();
        assert_eq!(s.snapshot, "{\"a\":2}");
        assert_eq!(s.summary.version, 2);
        assert_eq!(s.summary.events, 3);
        assert_eq!(store.session_version("s1").unwrap(), Some(2));
        assert_eq!(store.sessions(10).unwrap().len(), 1);
    }

    #[test]
    fn a_stale_save_is_a_conflict_and_writes_nothing() {
        let store = Store::in_memory().unwrap();
        save(&store, write("s1", None, "one")).unwrap();
        save(&store, write("s1", Some(1), "two")).unwrap();
        // A process that loaded version 1 tries to save over version 2.
        let err = save(&store, write("s1", Some(1), "stale")).unwrap_err();
        assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
        // Two processes that both started a new session.
        let err = save(&store, write("s1", None, "new")).unwrap_err();
        assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
        assert_eq!(store.load_session("s1").unwrap().unwrap().snapshot, "two");
    }

    #[test]
    fn sessions_are_deleted_and_pruned() {
        let store = Store::in_memory().unwrap();
        save(&store, write("old", None, "x")).unwrap();
        let mut recent = write("new", None, "y");
        recent.updated_at = 200.0;
        save(&store, recent).unwrap();
        assert_eq!(store.prune_sessions(150.0).unwrap(), 1);
        assert!(store.load_session("old").unwrap().is_none());
        assert!(store.delete_session("new").unwrap());
        assert!(!store.delete_session("new").unwrap());
    }
}
