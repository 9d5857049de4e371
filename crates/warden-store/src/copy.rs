//! Copying a store into another (`warden migrate`): every key of plugin state, toggle, setting
//! override and saved session, and the execution log a page at a time, written in one
//! transaction of the target, which must be empty unless it is to be emptied first.

use crate::error::StoreError;
use crate::types::{CopyReport, LOG_PAGE, describe};
use crate::{Inner, Store};

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
        let dump = match &self.backend {
            Inner::Sqlite(s) => s.dump()?,
            Inner::Postgres(s) => s.dump()?,
        };
        let mut after = 0;
        let mut next = || -> Result<_, StoreError> {
            let page = match &self.backend {
                Inner::Sqlite(s) => s.log_page(after, LOG_PAGE)?,
                Inner::Postgres(s) => s.log_page(after, LOG_PAGE)?,
            };
            if let Some(last) = page.last() {
                after = last.id;
            }
            Ok(page)
        };
        match &target.backend {
            Inner::Sqlite(t) => t.import(&dump, replace, &mut next),
            Inner::Postgres(t) => t.import(&dump, replace, &mut next),
        }
    }

    /// What this store holds, in words (`12 keys of plugin state, 3 saved sessions`), or
    /// `nothing`.
    pub fn contents(&self) -> Result<String, StoreError> {
        let counts = match &self.backend {
            Inner::Sqlite(s) => s.counts()?,
            Inner::Postgres(s) => s.counts()?,
        };
        Ok(describe(counts))
    }
}

#[cfg(test)]
impl Store {
    /// Every row but the execution log's (tests: compare two stores).
    pub(crate) fn dump(&self) -> crate::types::Dump {
        match &self.backend {
            Inner::Sqlite(s) => s.dump(),
            Inner::Postgres(s) => s.dump(),
        }
        .expect("dump")
    }
}
