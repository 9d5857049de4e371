//! Copying a store into another (`warden migrate`): every key of plugin state, toggle, setting
//! override and saved session, and the execution log a page at a time, written in one
//! transaction of the target, which must be empty unless it is to be emptied first.

use crate::error::StoreError;
use crate::types::{CopyReport, ExecutionRow, LOG_PAGE, describe};
use crate::{Inner, Store};

/// The tables a copy fills, children of nothing, in the order of a [`CopyReport`] (and of
/// `--replace` emptying them).
pub(crate) const TABLES: [&str; 5] = [
    "plugin_state",
    "rule_toggle",
    "setting_override",
    "session",
    "rule_execution_log",
];

/// The execution log's pages to copy, oldest first, one at a time; `None` after the last.
pub(crate) type Pages<'a> =
    &'a mut (dyn FnMut() -> Result<Option<Vec<ExecutionRow>>, StoreError> + Send);

/// How many rows each of [`TABLES`] holds, by `count`, which runs a `SELECT count(*)`.
pub(crate) fn counts<E>(mut count: impl FnMut(&str) -> Result<i64, E>) -> Result<[usize; 5], E> {
    let mut out = [0; 5];
    for (n, table) in out.iter_mut().zip(TABLES) {
        *n = usize::try_from(count(&format!("SELECT count(*) FROM {table}"))?).unwrap_or(0);
    }
    Ok(out)
}

/// Refuses a target `db` that holds rows (`held`, per table of [`TABLES`]).
pub(crate) fn refuse_held(db: &str, held: [usize; 5]) -> Result<(), StoreError> {
    if held.iter().all(|n| *n == 0) {
        return Ok(());
    }
    Err(StoreError::NotEmpty {
        db: db.to_owned(),
        what: describe(held),
    })
}

impl Store {
    /// Copies everything this store holds into `target` (any back end into any other), rows
    /// as they are stored: values, times, session versions and execution-log ids. The copy is
    /// written in one transaction of the target: all of it, or (on any error) nothing.
    ///
    /// A target that holds anything is refused ([`StoreError::NotEmpty`]) unless `replace`,
    /// which empties it first (in the same transaction). Nothing should write to either store
    /// meanwhile: what the source gains during the copy may be left out.
    pub fn copy_to(&self, target: &Store, replace: bool) -> Result<CopyReport, StoreError> {
        if std::ptr::eq(self, target) || self.label() == target.label() {
            return Err(StoreError::BadUrl {
                url: target.label().to_string(),
                reason: "the source and the target are the same database".into(),
            });
        }
        let dump = read!(self, s => s.dump())?;
        let (mut after, mut executions) = (0, 0);
        let mut next = || -> Result<_, StoreError> {
            let page = read!(self, s => s.log_page(after, LOG_PAGE))?;
            let Some(last) = page.last() else {
                return Ok(None);
            };
            after = last.id;
            executions += page.len();
            Ok(Some(page))
        };
        match &target.backend {
            Inner::Sqlite(t) => t.import(&dump, replace, &mut next)?,
            Inner::Postgres(t) => t.import(&dump, replace, &mut next)?,
        }
        Ok(CopyReport {
            state: dump.state.len(),
            toggles: dump.toggles.len(),
            overrides: dump.overrides.len(),
            sessions: dump.sessions.len(),
            executions,
        })
    }

    /// What this store holds, in words (`12 keys of plugin state, 3 saved sessions`), or
    /// `nothing`.
    pub fn contents(&self) -> Result<String, StoreError> {
        Ok(describe(read!(self, s => s.counts())?))
    }
}

#[cfg(test)]
impl Store {
    /// Every row but the execution log's (tests: compare two stores).
    pub(crate) fn dump(&self) -> crate::types::Dump {
        read!(self, s => s.dump()).expect("dump")
    }
}
