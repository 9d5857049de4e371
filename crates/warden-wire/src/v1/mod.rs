//! Version 1 of the wire format: what the service (`/v1/...`), the CLI's `--json` output and
//! the Python package have spoken since the first release.

mod control;
mod feed;
mod outcome;

pub use control::{ErrorBody, PluginView, RuleInfo, RuleView, SettingInfo, set_by};
pub use feed::FeedItem;
pub use outcome::{
    Effect, Halted, Lost, ModeChange, Notification, Outcome, Overridden, RuleError, Ruling,
    effects, notifications, proceed_word,
};
