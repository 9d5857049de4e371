//! Users' choices in SQLite: `rule_toggle` and `setting_override` rows, and `data_version`,
//! which tells a process that another one committed.

use rusqlite::params;

use super::{SqliteStore, select};
use crate::error::StoreError;
use crate::sql;
use crate::types::{RuleState, RuleToggle, SettingOverride};

impl SqliteStore {
    /// Every rule toggle, ordered by user and rule.
    pub(crate) fn toggles(&self) -> Result<Vec<RuleToggle>, StoreError> {
        if self.is_unmade() {
            // Nothing was ever written: read at every start, this makes no schema.
            return Ok(Vec::new());
        }
        select(
            &*self.reader()?,
            "SELECT user_id, rule_id, enabled, shadow, updated_at FROM rule_toggle ORDER BY user_id, rule_id",
            [],
            |r| sql::rule_toggle(r),
        )
        .map_err(|e| self.sql_err(e))
    }

    /// Switches `rule_id` on, off or to shadow for `user_id`; `None` forgets the choice (the
    /// rule's own default applies again). Returns whether anything changed.
    pub(crate) fn set_toggle(
        &self,
        user_id: &str,
        rule_id: &str,
        state: Option<RuleState>,
    ) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let changed = match state.map(RuleState::columns) {
            // A row that already holds the value is left alone: no change to report.
            Some((on, shadow)) => conn.execute(
                "INSERT INTO rule_toggle (user_id, rule_id, enabled, shadow) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(user_id, rule_id)
                 DO UPDATE SET enabled = excluded.enabled, shadow = excluded.shadow,
                     updated_at = datetime('now')
                 WHERE rule_toggle.enabled <> excluded.enabled
                     OR rule_toggle.shadow <> excluded.shadow",
                params![user_id, rule_id, on, shadow],
            ),
            None => conn.execute(
                "DELETE FROM rule_toggle WHERE user_id = ?1 AND rule_id = ?2",
                params![user_id, rule_id],
            ),
        };
        changed.map(|n| n > 0).map_err(|e| self.sql_err(e))
    }

    /// Every setting override, ordered by user, project, plugin and name. A stored value that
    /// is not valid JSON is an error naming it.
    pub(crate) fn overrides(&self) -> Result<Vec<SettingOverride>, StoreError> {
        if self.is_unmade() {
            return Ok(Vec::new());
        }
        let rows = select(
            &*self.reader()?,
            "SELECT user_id, project_id, plugin_id, name, value_json, updated_at
             FROM setting_override ORDER BY user_id, project_id, plugin_id, name",
            [],
            |r| sql::override_row(r),
        )
        .map_err(|e| self.sql_err(e))?;
        rows.into_iter()
            .map(|row| sql::setting_override(&self.db.label, row))
            .collect()
    }

    /// Sets (a value) or removes (`None`) some of a user's values for one plugin's settings, in
    /// one transaction. Returns how many rows changed (a row that holds the value already
    /// counts: SQLite's upsert rewrites it).
    pub(crate) fn set_overrides(
        &self,
        user_id: &str,
        project_id: &str,
        plugin_id: &str,
        values: &[(&str, Option<&serde_json::Value>)],
    ) -> Result<usize, StoreError> {
        let mut conn = self.conn()?;
        (|| {
            let tx = conn.transaction()?;
            let mut changed = 0;
            for (name, value) in values {
                changed += match value {
                    Some(v) => tx.execute(
                        "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json)
                         VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT(user_id, project_id, plugin_id, name)
                         DO UPDATE SET value_json = excluded.value_json, updated_at = datetime('now')",
                        params![user_id, project_id, plugin_id, name, v.to_string()],
                    )?,
                    None => tx.execute(
                        "DELETE FROM setting_override
                         WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND name = ?4",
                        params![user_id, project_id, plugin_id, name],
                    )?,
                };
            }
            tx.commit()?;
            Ok(changed)
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// A number that changes whenever another connection (another process, or another
    /// [`Store`] on the same file) commits to the database (`PRAGMA data_version`). Cheap:
    /// poll it to notice changes made elsewhere, such as `warden rules disable` run while an
    /// agent is running. Changes made through this store do not change it.
    pub(crate) fn data_version(&self) -> Result<i64, StoreError> {
        let conn = self.lock();
        conn.pragma_query_value(None, "data_version", |row| row.get(0))
            .map_err(|e| self.sql_err(e))
    }
}
