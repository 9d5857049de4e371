//! What the command line prints with `--json` for scripts: a problem in an operator's file
//! (`warden check --json`, `warden watch --json`), a saved session listed
//! (`warden sessions list --json`), and what `warden migrate --json` copied.

use serde::Serialize;

use warden_input::Diagnostic as EngineDiagnostic;
use warden_store::{CopyReport, SessionSummary};

/// A problem in an operator's file: where, what, and how to fix it.
#[derive(Debug, Serialize)]
pub struct Diagnostic<'a> {
    /// `error` or `warning`.
    pub severity: &'static str,
    /// The file.
    pub file: String,
    /// Its line, from 1, when known.
    pub line: Option<usize>,
    /// Its column, from 1, when known.
    pub column: Option<usize>,
    /// The field, when the problem is one field's.
    pub field: Option<&'a str>,
    /// What is wrong.
    pub message: &'a str,
    /// How to fix it.
    pub help: Option<&'a str>,
}

impl<'a> From<&'a EngineDiagnostic> for Diagnostic<'a> {
    fn from(d: &'a EngineDiagnostic) -> Self {
        Diagnostic {
            severity: if d.is_error() { "error" } else { "warning" },
            file: d.path().display().to_string(),
            line: d.line(),
            column: d.location().map(|(_, c)| c),
            field: d.field(),
            message: d.message(),
            help: d.help(),
        }
    }
}

/// Problems, as a list of [`Diagnostic`].
pub fn diagnostics(list: &[EngineDiagnostic]) -> Vec<Diagnostic<'_>> {
    list.iter().map(Diagnostic::from).collect()
}

/// A saved session, without what it saved.
#[derive(Debug, Serialize)]
pub struct SavedSession<'a> {
    /// The session id.
    pub id: &'a str,
    /// Its user.
    pub user: &'a str,
    /// Its project.
    pub project: &'a str,
    /// Saves so far.
    pub version: i64,
    /// Events it has seen.
    pub events: u64,
    /// Whether it ended.
    pub ended: bool,
    /// When it was first saved (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub created_at: &'a str,
    /// When it was last touched, in seconds since the Unix epoch.
    pub updated_at: f64,
    /// The size of what it saved, in bytes.
    pub size: u64,
}

impl<'a> From<&'a SessionSummary> for SavedSession<'a> {
    fn from(s: &'a SessionSummary) -> Self {
        SavedSession {
            id: &s.id,
            user: &s.user,
            project: &s.project,
            version: s.version,
            events: s.events,
            ended: s.ended,
            created_at: &s.created_at,
            updated_at: s.updated_at,
            size: s.size,
        }
    }
}

/// What `warden migrate` copied, by kind.
#[derive(Debug, Serialize)]
pub struct Copied {
    /// Keys of plugin state.
    pub state: usize,
    /// Rule toggles.
    pub toggles: usize,
    /// Setting overrides.
    pub overrides: usize,
    /// Saved sessions.
    pub sessions: usize,
    /// Execution-log rows.
    pub executions: usize,
}

impl From<&CopyReport> for Copied {
    fn from(r: &CopyReport) -> Self {
        Copied {
            state: r.state,
            toggles: r.toggles,
            overrides: r.overrides,
            sessions: r.sessions,
            executions: r.executions,
        }
    }
}
