//! Warden's moments of an agent's loop, whatever each agent calls them.

/// The moments of an agent's loop Warden acts on, whatever the agent calls them (each agent's
/// names are in its table: [`Agent::event`]); any other event is answered with nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    /// A session starts or resumes.
    SessionStart,
    /// The user submitted a prompt.
    Prompt,
    /// A tool is about to run.
    ToolCall,
    /// A tool returned.
    ToolDone,
    /// A tool failed.
    ToolFailed,
    /// The agent is about to stop.
    Stop,
    /// A subagent finished.
    SubagentStop,
    /// A model call returned, with its token usage (Gemini CLI's `AfterModel`).
    ModelResponse,
    /// The session ends.
    SessionEnd,
}

impl HookEvent {
    /// Whether the event is about one tool call (its payload names the tool).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::ToolCall | HookEvent::ToolDone | HookEvent::ToolFailed
        )
    }
}
