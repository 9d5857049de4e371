//! Versioned schema migrations, tracked with `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` turns a schema of version `i` into version `i + 1`. To change
//! the schema, append one entry; never edit an entry that has shipped.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{Named, StoreError};

/// Migration 1: the seed schema (plugin state and the rule execution log), plus a
/// nullable `session_id` on the log so it can be filtered by agent session.
const MIGRATION_1: &str = "
CREATE TABLE IF NOT EXISTS plugin_state (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    plugin_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value_json TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (datetime('now')),
    updated_at TEXT NOT NULL DEFAULT (datetime('now')),
    UNIQUE(user_id, project_id, plugin_id, key)
);
CREATE INDEX IF NOT EXISTS idx_plugin_state_lookup
    ON plugin_state(user_id, project_id, plugin_id);
CREATE TABLE IF NOT EXISTS rule_execution_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    session_id TEXT,
    rule_id TEXT NOT NULL,
    trigger TEXT NOT NULL,
    condition_result INTEGER NOT NULL,  -- 0 = false, 1 = true
    action_executed INTEGER NOT NULL,   -- 0 = no, 1 = yes
    execution_time_ms REAL NOT NULL,
    error_message TEXT,
    created_at TEXT NOT NULL DEFAULT (datetime('now'))
);
CREATE INDEX IF NOT EXISTS idx_rule_log_lookup
    ON rule_execution_log(user_id, project_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_rule_log_session
    ON rule_execution_log(session_id, created_at DESC);
";

/// Migration 2: what users control without touching rule files (the data model's "user
/// settings extension", normalized): rules turned on or off per user, and setting overrides
/// per user, for one project or (`project_id = '*'`) for all of them.
const MIGRATION_2: &str = "
CREATE TABLE IF NOT EXISTS rule_toggle (
    user_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    enabled INTEGER NOT NULL,           -- 0 = off, 1 = on
    updated_at TEXT NOT NULL DEFAULT (datetime('now')),
    PRIMARY KEY (user_id, rule_id)
);
CREATE TABLE IF NOT EXISTS setting_override (
    user_id TEXT NOT NULL,
    project_id TEXT NOT NULL,           -- '*' = every project
    plugin_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value_json TEXT NOT NULL,
    updated_at TEXT NOT NULL DEFAULT (datetime('now')),
    PRIMARY KEY (user_id, project_id, plugin_id, name)
);
";

/// Migration 3: the decision a rule made, in the execution log (`deny`, `rewrite`...).
const MIGRATION_3: &str = "
ALTER TABLE rule_execution_log ADD COLUMN decision TEXT;
";

/// Migration 4: durable sessions, one row each: the engine's snapshot (opaque JSON text) and a
/// version that grows at every save, so a stale copy cannot overwrite a newer one.
const MIGRATION_4: &str = "
CREATE TABLE IF NOT EXISTS session (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    snapshot TEXT NOT NULL,
    events INTEGER NOT NULL,
    ended INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (datetime('now')),
    updated_at REAL NOT NULL            -- seconds since the Unix epoch
);
CREATE INDEX IF NOT EXISTS idx_session_updated ON session(updated_at);
";

/// Migration 5: the entries of a session's lists, a row each, so that a save writes the ones
/// that changed rather than the whole history (clustered by session: one session's entries
/// share pages).
const MIGRATION_5: &str = "
CREATE TABLE IF NOT EXISTS session_entry (
    session_id TEXT NOT NULL,
    list INTEGER NOT NULL,
    n INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (session_id, list, n)
) WITHOUT ROWID;
";

/// Migration 6: a session's newest entries in its row, until they are enough to move to
/// `session_entry` together (a save then writes one page, not two).
const MIGRATION_6: &str = "
ALTER TABLE session ADD COLUMN recent TEXT;
";

/// All migrations, in order. The schema version of a fully migrated database is `MIGRATIONS.len()`.
/// Migration 7: shadow rules. A user's choice may put a rule in shadow (evaluated, never
/// applied), and the execution log marks the evaluations of rules in shadow, with what the
/// live rules decided at the same event.
const MIGRATION_7: &str = "
ALTER TABLE rule_toggle ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rule_execution_log ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0;
ALTER TABLE rule_execution_log ADD COLUMN live_decision TEXT;
";

pub(crate) const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
];

/// The newest schema version this build knows.
pub(crate) fn latest_version() -> u32 {
    u32::try_from(MIGRATIONS.len()).unwrap_or(u32::MAX)
}

/// Reads `PRAGMA user_version`.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    let v: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    // user_version is a signed 32-bit integer in the file header; a negative one is
    // certainly not something this build wrote, so treat it as "too new".
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// Brings the schema up to [`latest_version`], or refuses a newer database.
///
/// All pending migrations run in one IMMEDIATE transaction together with the
/// `user_version` bump, so a failure leaves the database untouched and two
/// processes opening the same fresh file cannot both migrate it.
pub(crate) fn migrate(conn: &mut Connection, db: &Named) -> Result<(), StoreError> {
    let known = latest_version();
    let open_err = |e: rusqlite::Error| db.open(e);

    // Cheap check without a write lock: the common case is "already current".
    if !db.to_migrate(user_version(conn).map_err(open_err)?, known)? {
        return Ok(());
    }

    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(open_err)?;
    // Re-read under the lock: another process may have migrated meanwhile.
    let found = user_version(&tx).map_err(open_err)?;
    db.to_migrate(found, known)?;
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let mig_err = |e: rusqlite::Error| db.migration(version, e);
        tx.execute_batch(sql).map_err(mig_err)?;
        tx.pragma_update(None, "user_version", version)
            .map_err(mig_err)?;
    }
    tx.commit().map_err(|e| db.migration(known, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_db() -> Named {
        Named {
            label: "test".into(),
            lock_timeout: crate::DEFAULT_LOCK_TIMEOUT,
        }
    }

    #[test]
    fn fresh_database_reaches_latest_version_and_reopen_is_idempotent() {
        let mut conn = Connection::open_in_memory().expect("open");
        migrate(&mut conn, &test_db()).expect("first migrate");
        assert_eq!(user_version(&conn).expect("version"), latest_version());
        migrate(&mut conn, &test_db()).expect("second migrate");
        assert_eq!(user_version(&conn).expect("version"), latest_version());
    }

    #[test]
    fn newer_database_is_refused_untouched() {
        let mut conn = Connection::open_in_memory().expect("open");
        conn.pragma_update(None, "user_version", latest_version() + 1)
            .expect("set version");
        let err = migrate(&mut conn, &test_db()).expect_err("must refuse");
        assert!(
            matches!(err, StoreError::SchemaTooNew { found, known, .. }
                if found == latest_version() + 1 && known == latest_version()),
            "{err}"
        );
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .expect("count");
        assert_eq!(tables, 0);
    }

    #[test]
    fn failing_migration_leaves_version_unchanged() {
        let mut conn = Connection::open_in_memory().expect("open");
        // A conflicting object named like one of migration 1's indexes, but as a table.
        conn.execute_batch("CREATE TABLE idx_rule_log_session (x);")
            .expect("setup");
        let err = migrate(&mut conn, &test_db()).expect_err("must fail");
        assert!(
            matches!(err, StoreError::Migration { version: 1, .. }),
            "{err}"
        );
        assert_eq!(user_version(&conn).expect("version"), 0);
        let has_state: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'plugin_state'",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(has_state, 0, "the whole migration is rolled back");
    }
}
