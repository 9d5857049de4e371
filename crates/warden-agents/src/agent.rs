//! The agents Warden supervises through their hooks, each a small table and a few functions:
//! its event names and Warden's moment for each, what its payloads hold that the others' do
//! not, and how it is answered. Everything else (sessions by id, the durable tick, token usage
//! and turns, the rendered block, the continue cap, the failure policy) is written once, in
//! the handler.

use serde_json::{Map, Value};

use crate::event::HookEvent;
use crate::reply::Reply;
use crate::transcript::Usage;
use crate::{claude_code, codex, gemini_cli};

/// An agent with command hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Agent {
    /// Anthropic's Claude Code (`@anthropic-ai/claude-code`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`@openai/codex`).
    Codex,
    /// Google's Gemini CLI (`@google/gemini-cli`).
    GeminiCli,
}

impl Agent {
    /// Every agent, in the order the book lists them.
    pub const ALL: [Agent; 3] = [Agent::ClaudeCode, Agent::Codex, Agent::GeminiCli];

    /// Its name on the command line (`warden hook claude-code`) and in URLs.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
            Agent::GeminiCli => "gemini-cli",
        }
    }

    /// Its name for people.
    pub fn title(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::GeminiCli => "Gemini CLI",
        }
    }

    /// The agent named `name` on the command line.
    pub fn parse(name: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Its events Warden acts on, with Warden's moment for each (the rest are answered with
    /// nothing).
    pub fn events(self) -> &'static [(&'static str, HookEvent)] {
        match self {
            Agent::ClaudeCode => claude_code::EVENTS,
            Agent::Codex => codex::EVENTS,
            Agent::GeminiCli => gemini_cli::EVENTS,
        }
    }

    /// Warden's moment for the agent's event `name`, if Warden acts on it.
    pub fn event(self, name: &str) -> Option<HookEvent> {
        self.events()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, e)| *e)
    }

    /// The agent's name for Warden's moment `event` (its first, where it has several; a
    /// failed tool is a returned one to an agent without a failure event).
    pub fn event_name(self, event: HookEvent) -> &'static str {
        let named = |event: HookEvent| {
            self.events()
                .iter()
                .find(|(_, e)| *e == event)
                .map(|(n, _)| *n)
        };
        match (named(event), event) {
            (Some(name), _) => name,
            (None, HookEvent::ToolFailed) => named(HookEvent::ToolDone).unwrap_or_default(),
            (None, _) => "",
        }
    }

    /// The token usage of a model call, from the payload of the event that reports it.
    pub(crate) fn model_usage(self, payload: &Map<String, Value>) -> Option<Usage> {
        match self {
            Agent::GeminiCli => gemini_cli::model_usage(payload),
            Agent::ClaudeCode | Agent::Codex => None,
        }
    }

    /// A tool call's input as the rules see it: Codex's `apply_patch` also names the files its
    /// patch writes (`paths`), so that the rules on writing files see them.
    pub(crate) fn tool_input(self, tool: &str, input: Value) -> Value {
        match self {
            Agent::Codex => codex::tool_input(tool, input),
            Agent::ClaudeCode | Agent::GeminiCli => input,
        }
    }

    /// Why a tool call that returned failed, when the agent has no event of its own for a
    /// failure and records it elsewhere: Codex in its session file (the exit code), Gemini CLI
    /// in the tool's response.
    /// `record` is where the agent wrote down the call (its session file), `id` the call's id,
    /// `tool` its tool, `response` what the tool returned.
    pub(crate) fn failure(
        self,
        record: Option<&str>,
        id: Option<&str>,
        tool: &str,
        response: Option<&Value>,
    ) -> Option<String> {
        match self {
            Agent::Codex => codex::failure(record?, id?),
            Agent::GeminiCli => gemini_cli::failure(tool, response?),
            Agent::ClaudeCode => None,
        }
    }

    /// Whether the agent does not run the tool call `reply` answers: a refusal, and where the
    /// agent cannot ask, an `ask` (and, for Codex, new input it is not let take).
    pub(crate) fn refuses(self, reply: &Reply) -> bool {
        use crate::reply::Verdict;
        matches!(
            (&reply.verdict, self),
            (Some(Verdict::Deny(_)), _)
                | (Some(Verdict::Ask { .. }), Agent::Codex | Agent::GeminiCli)
                | (Some(Verdict::Rewrite { allow: false, .. }), Agent::Codex)
        )
    }

    /// Whether the agent's hooks can ask a person about a tool call (`ask`). Where they
    /// cannot, an `ask` is answered as a refusal that says how to approve.
    pub fn can_ask(self) -> bool {
        matches!(self, Agent::ClaudeCode)
    }

    /// `reply` to `event` (the agent's `event_name`), in the agent's own schema: nothing but
    /// fields the agent reads (Codex refuses an answer with a field it does not know, and then
    /// runs the call).
    pub(crate) fn encode(self, event: HookEvent, event_name: &str, reply: &Reply) -> Option<Value> {
        match self {
            Agent::ClaudeCode => claude_code::encode(event, event_name, reply),
            Agent::Codex => codex::encode(event, event_name, reply),
            Agent::GeminiCli => gemini_cli::encode(event, event_name, reply),
        }
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.title())
    }
}
