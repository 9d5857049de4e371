//! The engine's own error: what stops a `Warden` from being built or a saved
//! session from being read back. Problems in rule files are diagnostics, not errors; a rule
//! that fails at run time is reported in its tick's outcome.

use warden_input::Diagnostic;

/// Why a `Warden` could not be built, or a saved session read back. Problems in rule files are not errors here: they are
/// [`Diagnostic`]s, and the rules without problems load.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] warden_store::StoreError),
    /// A saved session could not be read back.
    #[error("session {id:?}: {reason}")]
    Session {
        /// The session.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// A rule folder, plugins folder or modes file the installation names does not exist: a
    /// supervisor without the rules it was given would let through what they refuse.
    #[error("the {what} {} does not exist: create it, or correct the path that names it", .path.display())]
    Missing {
        /// `rule folder`, `plugins folder` or `modes file`.
        what: &'static str,
        /// The path, as given.
        path: std::path::PathBuf,
    },
    /// A setting of the installation is wrong (`[render] template`...).
    #[error("{0}")]
    Config(String),
    /// `strict` was asked for and some rule did not load.
    #[error("{} rule file problem(s); the first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
    Rules(Vec<Diagnostic>),
}
