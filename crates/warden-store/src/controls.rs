//! What users control without touching rule files: rules switched on or off per user, and
//! setting overrides per user (for one project, or for all of them).
//!
//! The store keeps the raw choices; whether a rule may be switched off, and whether a value
//! fits its setting, is the caller's business (the store knows nothing of rules).

use rusqlite::params;

use crate::{Store, StoreError};

/// The project id of an override that applies to every project of the user.
pub const ALL_PROJECTS: &str = "*";

/// A user's choice to switch a rule on or off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleToggle {
    /// The user.
    pub user_id: String,
    /// The rule, as its owner addresses it.
    pub rule_id: String,
    /// On or off.
    pub enabled: bool,
    /// When it was last changed (SQLite `datetime('now')` text, UTC).
    pub updated_at: String,
}

/// A user's value for a plugin setting.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingOverride {
    /// The user.
    pub user_id: String,
    /// The project it applies to, or [`ALL_PROJECTS`].
    pub project_id: String,
    /// The plugin that declares the setting.
    pub plugin_id: String,
    /// The setting's name.
    pub name: String,
    /// The value.
    pub value: serde_json::Value,
    /// When it was last changed (SQLite `datetime('now')` text, UTC).
    pub updated_at: String,
}

impl Store {
    /// Every rule toggle, ordered by user and rule.
    pub fn toggles(&self) -> Result<Vec<RuleToggle>, StoreError> {
        let conn = self.lock();
        (|| {
            let mut stmt = conn.prepare_cached(
                "SELECT user_id, rule_id, enabled, updated_at FROM rule_toggle ORDER BY user_id, rule_id",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(RuleToggle {
                    user_id: row.get(0)?,
                    rule_id: row.get(1)?,
                    enabled: row.get::<_, i64>(2)? != 0,
                    updated_at: row.get(3)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| self.sql_err(e))
    }

    /// Switches `rule_id` on or off for `user_id`; `None` forgets the choice (the rule's
    /// own default applies again). Returns whether anything changed.
    pub fn set_toggle(
        &self,
        user_id: &str,
        rule_id: &str,
        enabled: Option<bool>,
    ) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = match enabled {
            // A row that already holds the value is left alone: no change to report.
            Some(on) => conn.execute(
                "INSERT INTO rule_toggle (user_id, rule_id, enabled) VALUES (?1, ?2, ?3)
                 ON CONFLICT(user_id, rule_id)
                 DO UPDATE SET enabled = excluded.enabled, updated_at = datetime('now')
                 WHERE rule_toggle.enabled <> excluded.enabled",
                params![user_id, rule_id, on],
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
    pub fn overrides(&self) -> Result<Vec<SettingOverride>, StoreError> {
        let conn = self.lock();
        let rows = (|| {
            let mut stmt = conn.prepare_cached(
                "SELECT user_id, project_id, plugin_id, name, value_json, updated_at
                 FROM setting_override ORDER BY user_id, project_id, plugin_id, name",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, String>(4)?,
                    row.get::<_, String>(5)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(|e| self.sql_err(e))?;
        drop(conn);
        rows.into_iter()
            .map(|(user_id, project_id, plugin_id, name, raw, updated_at)| {
                let value = serde_json::from_str(&raw).map_err(|e| StoreError::CorruptSetting {
                    db: self.label.clone(),
                    setting: format!(
                        "setting `{name}` of plugin `{plugin_id}` for user `{user_id}`"
                    ),
                    reason: e.to_string(),
                })?;
                Ok(SettingOverride {
                    user_id,
                    project_id,
                    plugin_id,
                    name,
                    value,
                    updated_at,
                })
            })
            .collect()
    }

    /// Sets (or with `None`, removes) a user's value for a setting, for `project_id` or
    /// [`ALL_PROJECTS`]. Returns whether anything changed.
    pub fn set_override(
        &self,
        user_id: &str,
        project_id: &str,
        plugin_id: &str,
        name: &str,
        value: Option<&serde_json::Value>,
    ) -> Result<bool, StoreError> {
        let conn = self.lock();
        let changed = match value {
            Some(v) => conn.execute(
                "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(user_id, project_id, plugin_id, name)
                 DO UPDATE SET value_json = excluded.value_json, updated_at = datetime('now')",
                params![user_id, project_id, plugin_id, name, v.to_string()],
            ),
            None => conn.execute(
                "DELETE FROM setting_override
                 WHERE user_id = ?1 AND project_id = ?2 AND plugin_id = ?3 AND name = ?4",
                params![user_id, project_id, plugin_id, name],
            ),
        };
        changed.map(|n| n > 0).map_err(|e| self.sql_err(e))
    }

    /// A number that changes whenever another connection (another process, or another
    /// [`Store`] on the same file) commits to the database (`PRAGMA data_version`). Cheap:
    /// poll it to notice changes made elsewhere, such as `warden rules disable` run while an
    /// agent is running. Changes made through this store do not change it.
    pub fn data_version(&self) -> Result<i64, StoreError> {
        let conn = self.lock();
        conn.pragma_query_value(None, "data_version", |row| row.get(0))
            .map_err(|e| self.sql_err(e))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn toggles_round_trip_and_report_changes() {
        let s = Store::in_memory().unwrap();
        assert!(s.toggles().unwrap().is_empty());
        assert!(s.set_toggle("ann", "research/cite", Some(false)).unwrap());
        assert!(!s.set_toggle("ann", "research/cite", Some(false)).unwrap());
        assert!(s.set_toggle("ann", "research/cite", Some(true)).unwrap());
        assert!(s.set_toggle("bob", "x", Some(false)).unwrap());
        let t = s.toggles().unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].user_id.as_str(), t[0].rule_id.as_str(), t[0].enabled),
            ("ann", "research/cite", true)
        );
        assert!(s.set_toggle("ann", "research/cite", None).unwrap());
        assert!(!s.set_toggle("ann", "research/cite", None).unwrap());
        assert_eq!(s.toggles().unwrap().len(), 1);
    }

    #[test]
    fn overrides_round_trip() {
        let s = Store::in_memory().unwrap();
        s.set_override(
            "ann",
            ALL_PROJECTS,
            "builtin",
            "token_threshold",
            Some(&json!(0.9)),
        )
        .unwrap();
        s.set_override("ann", "p1", "builtin", "token_threshold", Some(&json!(0.7)))
            .unwrap();
        s.set_override(
            "ann",
            "p1",
            "builtin",
            "token_threshold",
            Some(&json!(0.75)),
        )
        .unwrap();
        let o = s.overrides().unwrap();
        assert_eq!(o.len(), 2);
        assert_eq!(
            (o[0].project_id.as_str(), &o[0].value),
            (ALL_PROJECTS, &json!(0.9))
        );
        assert_eq!(
            (o[1].project_id.as_str(), &o[1].value),
            ("p1", &json!(0.75))
        );
        assert!(
            s.set_override("ann", "p1", "builtin", "token_threshold", None)
                .unwrap()
        );
        assert_eq!(s.overrides().unwrap().len(), 1);
    }

    #[test]
    fn a_corrupt_override_names_itself() {
        let s = Store::in_memory().unwrap();
        s.lock()
            .execute(
                "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json) VALUES ('ann', '*', 'p', 'limit', '{not json')",
                [],
            )
            .unwrap();
        let e = s.overrides().unwrap_err().to_string();
        assert!(
            e.contains("limit") && e.contains("ann") && e.contains("`p`"),
            "{e}"
        );
    }

    #[test]
    fn data_version_sees_other_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let a = Store::open(&path).unwrap();
        let b = Store::open(&path).unwrap();
        let before = a.data_version().unwrap();
        a.set_toggle("ann", "x", Some(false)).unwrap();
        assert_eq!(a.data_version().unwrap(), before, "own writes do not count");
        b.set_toggle("ann", "y", Some(false)).unwrap();
        assert_ne!(a.data_version().unwrap(), before);
        assert_eq!(a.toggles().unwrap().len(), 2);
    }
}
