//! The seven hook points of an agent loop (FR-2), and Warden's own `on_mode_change`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A point in the agent's lifecycle where Warden is called and rules can attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// A new user query was received.
    OnQueryStart,
    /// The agent is about to process a turn.
    OnTurnStart,
    /// The agent finished a turn.
    OnTurnEnd,
    /// A tool is about to be executed.
    OnToolCall,
    /// A tool returned.
    OnToolComplete,
    /// A tool failed or timed out.
    OnToolFailure,
    /// The session is closing.
    OnSessionEnd,
    /// Warden's own hook: the active mode changed (ticked by Warden, before the hook that
    /// caused the change; an agent loop never sends it).
    OnModeChange,
}

impl Hook {
    /// The names of every hook, in lifecycle order.
    pub const NAMES: &'static [&'static str] = &[
        "on_query_start",
        "on_turn_start",
        "on_turn_end",
        "on_tool_call",
        "on_tool_complete",
        "on_tool_failure",
        "on_session_end",
        "on_mode_change",
    ];

    /// Every hook, in lifecycle order.
    pub const ALL: [Hook; 8] = [
        Hook::OnQueryStart,
        Hook::OnTurnStart,
        Hook::OnTurnEnd,
        Hook::OnToolCall,
        Hook::OnToolComplete,
        Hook::OnToolFailure,
        Hook::OnSessionEnd,
        Hook::OnModeChange,
    ];

    /// Whether an agent loop reports it (every hook but Warden's own `on_mode_change`).
    pub fn is_reported(self) -> bool {
        self != Hook::OnModeChange
    }

    /// The name used in rule files and traces (`on_turn_start`).
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// Whether the hook concerns one tool call (and so has `tool`, and may filter by tool name).
    pub fn is_tool_hook(self) -> bool {
        matches!(
            self,
            Hook::OnToolCall | Hook::OnToolComplete | Hook::OnToolFailure
        )
    }

    /// A dense index, for per-hook tables.
    pub fn index(self) -> usize {
        self as usize
    }

    /// When it happens, in a sentence (for documentation and messages).
    pub fn describe(self) -> &'static str {
        match self {
            Hook::OnQueryStart => "when a new user query is received",
            Hook::OnTurnStart => "before the agent processes each turn",
            Hook::OnTurnEnd => "after the agent completes each turn",
            Hook::OnToolCall => "before a tool is executed",
            Hook::OnToolComplete => "after a tool returns",
            Hook::OnToolFailure => "when a tool fails or times out",
            Hook::OnSessionEnd => "when the session closes",
            Hook::OnModeChange => "when the active mode changes (raised by Warden)",
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown hook name, with the closest known one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown hook `{name}`{}", suggestion.map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
pub struct UnknownHook {
    /// What was written.
    pub name: String,
    /// The nearest valid hook name, if one is close.
    pub suggestion: Option<&'static str>,
}

impl FromStr for Hook {
    type Err = UnknownHook;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Hook::ALL
            .into_iter()
            .find(|h| h.name() == s)
            .ok_or_else(|| UnknownHook {
                name: s.to_string(),
                suggestion: warden_input::closest(s, Hook::NAMES.iter().copied()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_typos_get_suggestions() {
        for h in Hook::ALL {
            assert_eq!(h.name().parse::<Hook>().unwrap(), h);
            assert_eq!(serde_json::to_value(h).unwrap(), h.name());
        }
        let err = "on_tool_compelte".parse::<Hook>().unwrap_err();
        assert_eq!(err.suggestion, Some("on_tool_complete"));
        assert_eq!(
            "turn_start".parse::<Hook>().unwrap_err().suggestion,
            Some("on_turn_start")
        );
    }
}
