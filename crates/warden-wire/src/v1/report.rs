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

/// What `warden test --json` prints: each test file, with its cases.
#[derive(Debug, Serialize)]
pub struct TestRun<'a> {
    /// Per file, in order.
    pub files: Vec<TestFile<'a>>,
}

/// A test file's results.
#[derive(Debug, Serialize)]
pub struct TestFile<'a> {
    /// The file.
    pub file: &'a std::path::Path,
    /// Its cases, in order.
    pub cases: Vec<TestCase<'a>>,
}

/// A case's result.
#[derive(Debug, Serialize)]
pub struct TestCase<'a> {
    /// The case's name.
    pub name: &'a str,
    /// Whether every expectation held.
    pub passed: bool,
    /// What did not hold, with what happened instead.
    pub failures: &'a [String],
}

/// A line of `warden watch --json` when the rules' files changed: whether the change was
/// applied, every problem in the files now, and which of them the change introduced.
#[derive(Debug, Serialize)]
pub struct Reload<'a> {
    /// Whether the new rules are in force.
    pub reloaded: bool,
    /// The generation in force.
    pub generation: u64,
    /// Rules loaded.
    pub rules: usize,
    /// Every problem in the files as they are now.
    pub diagnostics: Vec<Diagnostic<'a>>,
    /// The problems the change introduced (why it was not applied).
    pub introduced: Vec<Diagnostic<'a>>,
}

/// The first line of `warden watch --json`: what is watched, once the watcher is in place.
#[derive(Debug, Serialize)]
pub struct Watching<'a> {
    /// The folders watched.
    pub watching: Vec<String>,
    /// Rules loaded.
    pub rules: usize,
    /// Problems in the files.
    pub diagnostics: Vec<Diagnostic<'a>>,
}

/// What `warden bench --json` prints: each figure with its id, and the ratio to its floor.
#[derive(Debug, Serialize)]
pub struct BenchRun<'a> {
    /// Ticks per round.
    pub ticks: u32,
    /// Rounds.
    pub rounds: u32,
    /// The figures, in the order measured.
    pub figures: Vec<BenchFigure<'a>>,
}

/// One figure of `warden bench`.
#[derive(Debug, Serialize)]
pub struct BenchFigure<'a> {
    /// A stable id.
    pub id: &'a str,
    /// The figure; `null` when it could not be measured.
    pub value: Option<f64>,
    /// Its unit.
    pub unit: &'a str,
    /// The id of the figure it is compared with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a str>,
    /// This figure over its baseline (`null` when either could not be measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Option<f64>>,
}
