//! Version 1 of the wire format: what the service (`/v1/...`), the CLI's `--json` output and
//! the Python package have spoken since the first release; what agent loops write (an event,
//! a trace line) and what a replay writes.

mod control;
pub mod event;
mod feed;
pub mod knowledge;
pub mod line;
mod outcome;
pub mod replay;
mod report;
mod service;
mod session;

pub use control::{
    ErrorBody, Plugin, PluginView, RuleInfo, RuleView, SettingDecl, SettingInfo, set_by,
    setting_value,
};
pub use event::{Event, EventError, read_event};
pub use feed::{FeedItem, FeedLagged, FeedReady};
pub use line::{TraceError, TraceEvent};
pub use outcome::{
    Effect, Halted, Lost, ModeChange, Notification, Outcome, Overridden, RuleError, Ruling,
    effects, notifications, proceed_word,
};
pub use report::{
    BenchFigure, BenchRun, Copied, Diagnostic, Reload, SavedSession, TestCase, TestFile, TestRun,
    Watching, diagnostics,
};
pub use service::{Health, LogRow, SettingProblem, TrialReport, TrialRequest, bound};
pub use session::{Facts, SessionView, facts, tool_status};
