//! The one error type of this crate, the database errors it carries, and how both back ends
//! make them ([`Named`]).

use std::time::Duration;

use crate::types::StateScope;

/// A database as its errors name it, and how long it waits for a lock: what both back ends make
/// their errors from.
#[derive(Debug, Clone)]
pub(crate) struct Named {
    /// Its path, `in-memory database`, or its URL without the password.
    pub(crate) label: String,
    /// How long a statement waits for another process's lock.
    pub(crate) lock_timeout: Duration,
}

impl Named {
    /// It could not be opened, configured or read as it opened.
    pub(crate) fn open(&self, cause: impl Into<DbError>) -> StoreError {
        StoreError::Open {
            db: self.label.clone(),
            cause: cause.into(),
        }
    }

    /// Migrating it to schema `version` failed.
    pub(crate) fn migration(&self, version: u32, cause: impl Into<DbError>) -> StoreError {
        StoreError::Migration {
            db: self.label.clone(),
            version,
            cause: cause.into(),
        }
    }

    /// Whether its schema, at version `found`, is to be migrated to `known` (the newest this
    /// build knows); one a newer build wrote is refused.
    pub(crate) fn to_migrate(&self, found: u32, known: u32) -> Result<bool, StoreError> {
        if found > known {
            return Err(StoreError::SchemaTooNew {
                db: self.label.clone(),
                found,
                known,
            });
        }
        Ok(found < known)
    }

    /// Any other failure of the open database.
    pub(crate) fn database(&self, cause: impl Into<DbError>) -> StoreError {
        StoreError::Database {
            db: self.label.clone(),
            cause: cause.into(),
        }
    }

    /// Writing `key` of `scope` failed (its group is rolled back).
    pub(crate) fn write(
        &self,
        scope: &StateScope,
        key: &str,
        cause: impl Into<DbError>,
    ) -> StoreError {
        StoreError::Write {
            db: self.label.clone(),
            scope: Box::new(scope.clone()),
            key: key.to_string(),
            cause: cause.into(),
        }
    }

    /// The lock is held elsewhere for longer than this store waits.
    pub(crate) fn busy(&self) -> StoreError {
        StoreError::Busy {
            db: self.label.clone(),
            waited: self.lock_timeout,
        }
    }

    /// A transaction ended by a write the database refused.
    pub(crate) fn refused(&self, reason: String) -> StoreError {
        StoreError::Refused {
            db: self.label.clone(),
            reason,
        }
    }

    /// The server cannot be reached (nothing was written).
    pub(crate) fn unreachable(&self, reason: String) -> StoreError {
        StoreError::Unreachable {
            db: self.label.clone(),
            reason,
        }
    }

    /// Another process saved session `id` since it was loaded.
    pub(crate) fn conflict(&self, id: &str) -> StoreError {
        StoreError::SessionConflict {
            db: self.label.clone(),
            id: id.to_string(),
        }
    }
}

/// What the database driver said: SQLite's, PostgreSQL's, or the connection pool's.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite (rusqlite).
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL (the `postgres` crate).
    #[error("{}", describe_pg(.0))]
    Postgres(#[from] postgres::Error),
    /// What the PostgreSQL server reported from inside one of Warden's functions (a group of
    /// state writes that failed on its own), or a failure described in words.
    #[error("{0}")]
    Server(String),
}

/// What a PostgreSQL error says in full: the server's message with its SQLSTATE, detail and
/// hint, or the driver's with its causes (the driver's own `Display` says only its kind).
pub(crate) fn describe_pg(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut out = format!("{}: {} ({})", db.severity(), db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            out.push_str(&format!("; {detail}"));
        }
        if let Some(hint) = db.hint() {
            out.push_str(&format!("; hint: {hint}"));
        }
        return out;
    }
    let mut out = e.to_string();
    for s in causes(e) {
        out.push_str(&format!(": {s}"));
    }
    out
}

/// What caused `e`, and what caused that, in turn.
pub(crate) fn causes<'e>(
    e: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(e.source(), |s| s.source())
}

impl DbError {
    /// The SQLSTATE code of a PostgreSQL error (`55P03`...), if it is one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            DbError::Postgres(e) => e.code().map(postgres::error::SqlState::code),
            DbError::Sqlite(_) | DbError::Server(_) => None,
        }
    }
}

/// Everything that can go wrong while opening or using a [`Store`](crate::Store).
///
/// Every variant names the database (its path, or `in-memory database`) so a
/// message printed on its own is still actionable. The underlying cause is part
/// of the message and is also kept in a field for callers that want to inspect it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be created, opened or configured
    /// (missing permissions, not a SQLite file, a PostgreSQL server that refused the login, ...).
    #[error("cannot open database {db}: {cause}")]
    Open {
        /// The database that was being opened.
        db: String,
        /// What the database said.
        cause: DbError,
    },

    /// The directory that should contain the database could not be created.
    #[error("cannot create the directory for database {db}: {cause}")]
    CreateDir {
        /// The database that was being opened.
        db: String,
        /// What the operating system said.
        cause: std::io::Error,
    },

    /// Applying a schema migration failed; the database is left at its previous version.
    #[error("database {db}: migration to schema version {version} failed: {cause}")]
    Migration {
        /// The database that was being migrated.
        db: String,
        /// The schema version the failed migration would have produced.
        version: u32,
        /// What the database said.
        cause: DbError,
    },

    /// The database was written by a newer warden; this build refuses to touch it.
    #[error(
        "database {db}: database schema version {found} is newer than this build knows ({known}); upgrade warden"
    )]
    SchemaTooNew {
        /// The database that was being opened.
        db: String,
        /// The `user_version` found in the file.
        found: u32,
        /// The newest schema version this build knows.
        known: u32,
    },

    /// Writing one key of plugin state failed (the group it belonged to was rolled back).
    #[error("database {db}: cannot write key {key:?} of {scope}: {cause}")]
    Write {
        /// The database that was being written.
        db: String,
        /// Where the key lives (boxed to keep the error small).
        scope: Box<StateScope>,
        /// The key that could not be written.
        key: String,
        /// What the database said.
        cause: DbError,
    },

    /// A stored `value_json` is not valid JSON (or not text at all).
    #[error("database {db}: stored value of key {key:?} of {scope} is unreadable: {reason}")]
    CorruptValue {
        /// The database that was being read.
        db: String,
        /// Where the key lives (boxed to keep the error small).
        scope: Box<StateScope>,
        /// The key whose value is corrupt.
        key: String,
        /// Why the value could not be read.
        reason: String,
    },

    /// A stored setting override is not valid JSON (the file was edited by hand, or damaged).
    #[error(
        "database {db}: the value of {setting} is not valid JSON ({reason}); set it again or delete the row"
    )]
    CorruptSetting {
        /// The database that was being read.
        db: String,
        /// Which override: setting, plugin and user.
        setting: String,
        /// Why the value could not be read.
        reason: String,
    },

    /// Any other database failure while using an open database.
    #[error("database {db}: {cause}")]
    Database {
        /// The database that was being used.
        db: String,
        /// What the database said.
        cause: DbError,
    },

    /// Another process saved the session since this one loaded it: the tick must be run again
    /// on the newer session. Nothing was written.
    #[error("database {db}: session {id:?} was saved by another process meanwhile")]
    SessionConflict {
        /// The database.
        db: String,
        /// The session.
        id: String,
    },

    /// A write of a tick failed in a way that ends its transaction (the database is read-only,
    /// full, damaged, or the disk failed): the tick was rolled back, and nothing of it written.
    #[error(
        "database {db} refused this tick's writes ({reason}); nothing of this tick was written"
    )]
    Refused {
        /// The database.
        db: String,
        /// The first write that failed, and why.
        reason: String,
    },

    /// The database server could not be reached (or a connection to it broke) within the
    /// connection timeout. Nothing of the operation was written.
    #[error(
        "database {db} cannot be reached: {reason}; nothing of this was written (check that the server runs and the URL is right)"
    )]
    Unreachable {
        /// The database.
        db: String,
        /// What the driver or the pool said.
        reason: String,
    },

    /// A database URL that cannot be used.
    #[error("database URL {url}: {reason}")]
    BadUrl {
        /// The URL, without its password.
        url: String,
        /// What is wrong, and how to write it.
        reason: String,
    },

    /// `warden migrate` was asked to copy into a store that already holds data.
    #[error(
        "database {db} already holds data ({what}); copy into an empty database, or pass --replace to empty it first"
    )]
    NotEmpty {
        /// The target database.
        db: String,
        /// What it holds (`12 keys of plugin state, 3 sessions`).
        what: String,
    },

    /// The database could not be opened when the embedder started (it runs without it): what
    /// needs the store fails with why.
    #[error("the database is unavailable: {reason}")]
    Unavailable {
        /// Why it could not be opened.
        reason: String,
    },

    /// Another process held the database's write lock for longer than this one waits.
    #[error(
        "database {db} is locked by another process (waited {} ms); nothing of this tick was written: retry, or find the process that holds the lock",
        .waited.as_millis()
    )]
    Busy {
        /// The database.
        db: String,
        /// How long this process waited for the lock.
        waited: std::time::Duration,
    },
}

impl StoreError {
    /// The message with the database's state first when the error says it (`the disk is full:
    /// database ... refused ...`), for a user who must act on it.
    pub fn described(&self) -> String {
        match self.condition() {
            Some(c) => format!("{c}: {self}"),
            None => self.to_string(),
        }
    }

    /// What state the database is in, in a few words, when the error says (`the disk is
    /// full`, `the database is read-only`, `the database is locked by another process`...):
    /// for a message that must name the cause before the details.
    pub fn condition(&self) -> Option<&'static str> {
        use rusqlite::ErrorCode as C;
        let by_code = |code: Option<C>| {
            Some(match code? {
                C::DiskFull => "the disk is full",
                C::ReadOnly => "the database is read-only",
                C::DatabaseBusy | C::DatabaseLocked => "the database is locked by another process",
                C::CannotOpen => "the database file cannot be opened",
                C::PermissionDenied => "permission denied",
                C::SystemIoFailure => "the disk failed (I/O error)",
                C::DatabaseCorrupt | C::NotADatabase => "the database file is damaged",
                _ => return None,
            })
        };
        let by_text = |text: &str| {
            // SQLite's own messages for these codes (sqlite3_errstr), as a refused tick carries
            // them in words.
            [
                ("database or disk is full", C::DiskFull),
                ("readonly database", C::ReadOnly),
                ("disk I/O error", C::SystemIoFailure),
                ("database is locked", C::DatabaseLocked),
                ("malformed", C::DatabaseCorrupt),
                ("unable to open database file", C::CannotOpen),
            ]
            .into_iter()
            .find(|(said, _)| text.contains(said))
            .and_then(|(_, code)| by_code(Some(code)))
        };
        match self {
            StoreError::Busy { .. } => Some("the database is locked by another process"),
            StoreError::Unreachable { .. } => Some("the database server cannot be reached"),
            StoreError::CreateDir { cause, .. } => match cause.kind() {
                std::io::ErrorKind::PermissionDenied => Some("permission denied"),
                std::io::ErrorKind::StorageFull => Some("the disk is full"),
                std::io::ErrorKind::ReadOnlyFilesystem => Some("the file system is read-only"),
                _ => None,
            },
            StoreError::Open { cause, .. }
            | StoreError::Migration { cause, .. }
            | StoreError::Database { cause, .. }
            | StoreError::Write { cause, .. } => match cause {
                DbError::Sqlite(e) => {
                    by_code(e.sqlite_error_code()).or_else(|| by_text(&e.to_string()))
                }
                _ => None,
            },
            StoreError::Refused { reason, .. } | StoreError::Unavailable { reason } => {
                by_text(reason)
            }
            _ => None,
        }
    }
}
