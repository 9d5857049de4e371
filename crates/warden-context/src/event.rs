//! What an agent loop reports at a hook: an [`Event`]. Every field is optional; Warden keeps
//! turn, user and project values from earlier events until a later event changes them, and
//! keeps the session's history itself, so a loop reports what just happened and nothing more.
//!
//! These are the engine's types. How an event is written as JSON (a trace line, a request's
//! body) and checked field by field is the wire's: `warden_wire::v1::event`.

use serde::Serialize;
use serde_json::{Map, Value};

/// What happened at a hook. Written as JSON, it is one line of a session trace (plus `"hook"`):
/// `warden_wire::v1::Event`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    /// Turn values that changed (turn number, token and context usage, iterations).
    pub turn: Option<TurnUpdate>,
    /// The user's query, at `on_query_start`. (Boxed, as are the rarely given user and
    /// project: an event is moved by value from its reading to its tick several times, and is
    /// smaller for it.)
    pub query: Option<Box<Query>>,
    /// The tool concerned, at the tool hooks.
    pub tool: Option<ToolCall>,
    /// What the tool returned, at `on_tool_complete`. Free-form JSON.
    pub result: Option<Value>,
    /// Why the tool failed, at `on_tool_failure`.
    pub error: Option<String>,
    /// A message to add to the history (the agent's reply at `on_turn_end`, say).
    pub message: Option<Message>,
    /// The user, when it is first known or changes.
    pub user: Option<Box<Party>>,
    /// The project, when it is first known or changes.
    pub project: Option<Box<Party>>,
    /// Anything else the agent loop wants rules to see, as `event.data`.
    pub data: Option<Value>,
    /// When it happened, in seconds since the Unix epoch (now, when absent).
    pub time: Option<f64>,
}

/// Turn values the agent loop reports; absent fields keep their previous value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnUpdate {
    /// The turn number, from 1. When never given, Warden counts `on_turn_start` hooks.
    pub number: Option<u32>,
    /// Share of the token budget used: 0.42 is 42%, above 1.0 over budget.
    pub token_usage: Option<f64>,
    /// Share of the context window used: 0.42 is 42%, above 1.0 past the window.
    pub context_usage: Option<f64>,
    /// Iterations (model calls) so far in this query.
    pub iteration_count: Option<u32>,
    /// The iteration budget of this query.
    pub max_iterations: Option<u32>,
    /// The model's context window, in tokens.
    pub context_window: Option<u64>,
    /// The agent is about to stop: this turn gave its final answer (`"final": true`).
    pub is_final: Option<bool>,
}

/// A user query: its text, and anything else the loop knows about it. Its `Serialize` is the
/// value rules read as `event.query` (`text` beside the other fields), not a wire shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Query {
    /// What the user asked.
    pub text: String,
    /// Other fields, visible to rules as `event.query.<name>`.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call: which tool, with what arguments.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object, usually).
    pub arguments: Value,
}

/// A message of the conversation. Its `Serialize` is the value rules read as `event.message`,
/// not a wire shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// A user or project: an id and a snapshot of its settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Party {
    /// Its id.
    pub id: Option<String>,
    /// Its settings, visible to rules as `context.user.settings` (or `project`).
    pub settings: Option<Map<String, Value>>,
    /// A project's folder, visible to rules as `context.project.root` (projects only).
    pub root: Option<String>,
}

impl Event {
    /// An empty event.
    #[inline]
    pub fn new() -> Self {
        Self::default()
    }

    /// A new user query.
    pub fn query(text: impl Into<String>) -> Self {
        Event {
            query: Some(Box::new(Query {
                text: text.into(),
                extra: Map::new(),
            })),
            ..Self::default()
        }
    }

    /// A call of `tool` with `arguments`, about to run.
    pub fn tool_call(tool: impl Into<String>, arguments: Value) -> Self {
        Event {
            tool: Some(ToolCall {
                name: tool.into(),
                arguments,
            }),
            ..Self::default()
        }
    }

    /// `tool` returned `result`.
    pub fn tool_complete(tool: impl Into<String>, result: Value) -> Self {
        Event {
            result: Some(result),
            ..Self::tool_call(tool, Value::Null)
        }
    }

    /// `tool` failed with `error`.
    pub fn tool_failure(tool: impl Into<String>, error: impl Into<String>) -> Self {
        Event {
            error: Some(error.into()),
            ..Self::tool_call(tool, Value::Null)
        }
    }

    #[inline]
    fn turn_mut(&mut self) -> &mut TurnUpdate {
        self.turn.get_or_insert_with(TurnUpdate::default)
    }

    /// Sets the turn number.
    #[inline]
    pub fn with_turn(mut self, number: u32) -> Self {
        self.turn_mut().number = Some(number);
        self
    }

    /// Sets the share of the token budget used (0.42 is 42%; above 1.0, over budget).
    #[inline]
    pub fn with_token_usage(mut self, usage: f64) -> Self {
        self.turn_mut().token_usage = Some(usage);
        self
    }

    /// Sets the model's context window, in tokens.
    #[inline]
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.turn_mut().context_window = Some(tokens);
        self
    }

    /// Sets the share of the context window used (0.42 is 42%; above 1.0, past the window).
    #[inline]
    pub fn with_context_usage(mut self, usage: f64) -> Self {
        self.turn_mut().context_usage = Some(usage);
        self
    }

    /// Sets the iteration count and budget.
    #[inline]
    pub fn with_iterations(mut self, count: u32, max: u32) -> Self {
        let t = self.turn_mut();
        t.iteration_count = Some(count);
        t.max_iterations = Some(max);
        self
    }

    /// Marks the turn final: the agent gave its final answer and is about to stop (at
    /// `on_turn_end`; a `continue` decision then keeps it working).
    pub fn final_turn(mut self) -> Self {
        self.turn_mut().is_final = Some(true);
        self
    }

    /// Sets the user id.
    pub fn with_user(mut self, id: impl Into<String>) -> Self {
        self.user.get_or_insert_default().id = Some(id.into());
        self
    }

    /// Sets the project id.
    pub fn with_project(mut self, id: impl Into<String>) -> Self {
        self.project.get_or_insert_default().id = Some(id.into());
        self
    }

    /// Sets the project's folder, which rules read as `context.project.root`.
    pub fn with_project_root(mut self, root: impl Into<String>) -> Self {
        self.project.get_or_insert_default().root = Some(root.into());
        self
    }

    /// Adds a message to the history.
    pub fn with_message(mut self, role: impl Into<String>, content: impl Into<String>) -> Self {
        self.message = Some(Message {
            role: role.into(),
            content: content.into(),
        });
        self
    }

    /// Attaches free-form data, visible as `event.data`.
    #[inline]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Sets when it happened (seconds since the Unix epoch).
    #[inline]
    pub fn at(mut self, time: f64) -> Self {
        self.time = Some(time);
        self
    }
}

/// The fields of an event, for messages and suggestions.
pub const EVENT_FIELDS: &[&str] = &[
    "turn", "query", "tool", "result", "error", "message", "user", "project", "data", "time",
];
/// A field of a turn: of `turn` in an event, and of `context.turn`. This enum is the one list
/// of their names; events, traces, templates, Lua and the documented schema read by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnField {
    /// `number`: the turn's number.
    Number,
    /// `token_usage`: the share of the token budget used.
    TokenUsage,
    /// `context_usage`: the share of the context window used.
    ContextUsage,
    /// `iteration_count`: model calls so far in this query.
    IterationCount,
    /// `max_iterations`: the iteration budget.
    MaxIterations,
    /// `context_window`: the model's context window, in tokens.
    ContextWindow,
    /// `final`: the agent is about to stop.
    Final,
}

impl TurnField {
    /// Every field, in the order the script API's `context.turn` lists them.
    pub const ALL: [TurnField; 7] = [
        TurnField::Number,
        TurnField::TokenUsage,
        TurnField::ContextUsage,
        TurnField::IterationCount,
        TurnField::MaxIterations,
        TurnField::ContextWindow,
        TurnField::Final,
    ];

    /// The field's name.
    pub const fn name(self) -> &'static str {
        match self {
            TurnField::Number => "number",
            TurnField::TokenUsage => "token_usage",
            TurnField::ContextUsage => "context_usage",
            TurnField::IterationCount => "iteration_count",
            TurnField::MaxIterations => "max_iterations",
            TurnField::ContextWindow => "context_window",
            TurnField::Final => "final",
        }
    }

    /// The field called `name`.
    pub fn named(name: &str) -> Option<TurnField> {
        TurnField::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether its value is a whole number (the others are a share, or a flag).
    pub const fn is_whole(self) -> bool {
        matches!(
            self,
            TurnField::Number
                | TurnField::IterationCount
                | TurnField::MaxIterations
                | TurnField::ContextWindow
        )
    }
}

/// The names of a turn's fields, in [`TurnField::ALL`]'s order.
pub const TURN_FIELDS: [&str; 7] = {
    let mut names = [""; 7];
    let mut i = 0;
    while i < names.len() {
        names[i] = TurnField::ALL[i].name();
        i += 1;
    }
    names
};

/// A field of `tool` in an event: the tool a call is for. This enum is the one list of their
/// names (the context's `tool` adds `shell`, Warden's own analysis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolField {
    /// `name`: the tool's name.
    Name,
    /// `arguments`: its input, free-form.
    Arguments,
}

impl ToolField {
    /// Every field.
    pub const ALL: [ToolField; 2] = [ToolField::Name, ToolField::Arguments];

    /// The field's name.
    pub const fn name(self) -> &'static str {
        match self {
            ToolField::Name => "name",
            ToolField::Arguments => "arguments",
        }
    }

    /// The field called `name`.
    pub fn named(name: &str) -> Option<ToolField> {
        ToolField::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The names of a tool's fields, in [`ToolField::ALL`]'s order.
pub const TOOL_FIELDS: [&str; 2] = [ToolField::Name.name(), ToolField::Arguments.name()];

/// The largest size of an event's `time` (seconds): the OpenAPI document's bounds too.
pub const MAX_TIME: f64 = 1e15;

/// The largest share a usage may be: a million times its budget. Above 1.0 is a fact (the
/// agent went over its budget, which is when a supervisor is needed most), not an error; past
/// this bound the number is broken, not an agent's.
pub const MAX_SHARE: f64 = 1e6;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builders_compose() {
        let e = Event::tool_complete("vault_search", json!({"count": 7}))
            .with_turn(3)
            .with_token_usage(0.5);
        assert_eq!(e.tool.as_ref().unwrap().name, "vault_search");
        assert_eq!(e.turn.as_ref().unwrap().number, Some(3));
        assert_eq!(e.result.unwrap()["count"], 7);
    }
}
