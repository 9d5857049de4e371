//! Version 1 of the wire format: what the service (`/v1/...`), the CLI's `--json` output and
//! the Python package have spoken since the first release; what agent loops write (an event,
//! a trace line) and what a replay writes.

mod control;
pub mod event;
mod feed;
pub mod line;
mod outcome;
pub mod replay;

pub use control::{ErrorBody, PluginView, RuleInfo, RuleView, SettingInfo, set_by};
pub use event::{Event, EventError, read_event};
pub use feed::FeedItem;
pub use line::{TraceError, TraceEvent};
pub use outcome::{
    Effect, Halted, Lost, ModeChange, Notification, Outcome, Overridden, RuleError, Ruling,
    effects, notifications, proceed_word,
};
