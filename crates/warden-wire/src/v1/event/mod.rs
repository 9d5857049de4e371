//! An event as an agent loop writes it: the body of `POST /v1/sessions/{id}/events`, a line of a
//! session trace (with its `"hook"`, see [`super::line`]), the dict a Python host passes to
//! `tick`. Every field is optional.
//!
//! [`Event`] and its parts are the wire's own types with their own serde: the engine's
//! [`warden_context::event::Event`] is built from one ([`Event::into_engine`], moving every
//! field) and written as one ([`Event::of`]), so the engine may change its types without
//! changing what agent loops write. [`read_event`] is the checked way in: each field is checked
//! first ([`check_field`]), so that a mistake is named by its path.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use warden_context::event as engine;
use warden_context::event::TurnField;

mod check;

pub use check::{EventError, check_field};

/// What happened at a hook, as JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Turn values that changed (turn number, token and context usage, iterations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Turn>,
    /// The user's query, at `on_query_start`: its text, or an object with `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Query>,
    /// The tool concerned, at the tool hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Tool>,
    /// What the tool returned, at `on_tool_complete`. Free-form JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why the tool failed, at `on_tool_failure`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A message to add to the history (the agent's reply at `on_turn_end`, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// The user, when it is first known or changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Party>,
    /// The project, when it is first known or changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Party>,
    /// Anything else the agent loop wants rules to see, as `event.data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// When it happened, in seconds since the Unix epoch (now, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<f64>,
}

/// Turn values that changed; absent fields keep their previous value. Its fields are
/// [`warden_context::event::TURN_FIELDS`], in that order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The turn number, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// Share of the token budget used: 0.42 is 42%, above 1.0 over budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<f64>,
    /// Share of the context window used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_usage: Option<f64>,
    /// Iterations (model calls) so far in this query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_count: Option<u32>,
    /// The iteration budget of this query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// The model's context window, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// This turn gave the final answer.
    #[serde(default, rename = "final", skip_serializing_if = "Option::is_none")]
    pub is_final: Option<bool>,
}

/// A user query: written as its text alone, or as an object with `text` and other fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "QueryForm")]
pub struct Query {
    /// What the user asked.
    pub text: String,
    /// Other fields, visible to rules as `event.query.<name>`.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The two ways a query is written.
#[derive(Deserialize)]
#[serde(untagged)]
enum QueryForm {
    Text(String),
    Full {
        text: String,
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl From<QueryForm> for Query {
    fn from(form: QueryForm) -> Self {
        match form {
            QueryForm::Text(text) => Query {
                text,
                extra: Map::new(),
            },
            QueryForm::Full { text, extra } => Query { text, extra },
        }
    }
}

/// A tool call: which tool, with what arguments. Its fields are
/// [`warden_context::event::TOOL_FIELDS`], in that order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// Its arguments (a JSON object, usually).
    #[serde(default)]
    pub arguments: Value,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// Its text.
    pub content: String,
}

/// A user or project: an id and a snapshot of its settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Party {
    /// Its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Map<String, Value>>,
    /// A project's folder (projects only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

impl Event {
    /// The engine's event, every field moved (nothing is copied).
    pub fn into_engine(self) -> engine::Event {
        engine::Event {
            turn: self.turn.map(Turn::into_engine),
            query: self.query.map(|q| Box::new(q.into_engine())),
            tool: self.tool.map(Tool::into_engine),
            result: self.result,
            error: self.error,
            message: self.message.map(Message::into_engine),
            user: self.user.map(|p| Box::new(p.into_engine())),
            project: self.project.map(|p| Box::new(p.into_engine())),
            data: self.data,
            time: self.time,
        }
    }

    /// An engine's event as written on the wire (a trace line's fields, say).
    pub fn of(e: &engine::Event) -> Event {
        Event {
            turn: e.turn.as_ref().map(Turn::of),
            query: e.query.as_ref().map(|q| Query {
                text: q.text.clone(),
                extra: q.extra.clone(),
            }),
            tool: e.tool.as_ref().map(|t| Tool {
                name: t.name.clone(),
                arguments: t.arguments.clone(),
            }),
            result: e.result.clone(),
            error: e.error.clone(),
            message: e.message.as_ref().map(|m| Message {
                role: m.role.clone(),
                content: m.content.clone(),
            }),
            user: e.user.as_deref().map(Party::of),
            project: e.project.as_deref().map(Party::of),
            data: e.data.clone(),
            time: e.time,
        }
    }
}

impl From<Event> for engine::Event {
    fn from(e: Event) -> Self {
        e.into_engine()
    }
}

impl Turn {
    /// The engine's turn update.
    pub fn into_engine(self) -> engine::TurnUpdate {
        engine::TurnUpdate {
            number: self.number,
            token_usage: self.token_usage,
            context_usage: self.context_usage,
            iteration_count: self.iteration_count,
            max_iterations: self.max_iterations,
            context_window: self.context_window,
            is_final: self.is_final,
        }
    }

    fn of(t: &engine::TurnUpdate) -> Turn {
        Turn {
            number: t.number,
            token_usage: t.token_usage,
            context_usage: t.context_usage,
            iteration_count: t.iteration_count,
            max_iterations: t.max_iterations,
            context_window: t.context_window,
            is_final: t.is_final,
        }
    }
}

impl Query {
    /// The engine's query.
    pub fn into_engine(self) -> engine::Query {
        engine::Query {
            text: self.text,
            extra: self.extra,
        }
    }
}

impl Tool {
    /// The engine's tool call.
    pub fn into_engine(self) -> engine::ToolCall {
        engine::ToolCall {
            name: self.name,
            arguments: self.arguments,
        }
    }
}

impl Message {
    /// The engine's message.
    pub fn into_engine(self) -> engine::Message {
        engine::Message {
            role: self.role,
            content: self.content,
        }
    }
}

impl Party {
    /// The engine's user or project.
    pub fn into_engine(self) -> engine::Party {
        engine::Party {
            id: self.id,
            settings: self.settings,
            root: self.root,
        }
    }

    fn of(p: &engine::Party) -> Party {
        Party {
            id: p.id.clone(),
            settings: p.settings.clone(),
            root: p.root.clone(),
        }
    }
}

/// Reads an event from a JSON object (a trace line without its `hook`, the body of a request),
/// checking each field first so that a mistake is named by its path with what was expected
/// (``` `turn.number` must be a whole number from 0 to 4294967295, not 4294967296 ```), not in
/// serde's terms; and refusing an array where an object is expected (serde would read it by
/// position).
pub fn read_event(mut map: Map<String, Value>) -> Result<engine::Event, EventError> {
    // A whole number written with a point (`3.0`) is that number, as JSON Schema (and the
    // service's OpenAPI document) counts it.
    if let Some(Value::Object(turn)) = map.get_mut("turn") {
        for field in TurnField::ALL.into_iter().filter(|f| f.is_whole()) {
            if let Some(v) = turn.get_mut(field.name())
                && v.is_f64()
                && let Some(x) = v.as_f64()
                && x.fract() == 0.0
                // (`u64::MAX as f64` is 2^64, one past the largest.)
                && (0.0..u64::MAX as f64).contains(&x)
            {
                *v = Value::from(x as u64);
            }
        }
    }
    for (key, value) in &map {
        check_field(key, value)?;
    }
    serde_json::from_value::<Event>(Value::Object(map))
        .map(Event::into_engine)
        .map_err(|e| check::bad("", e.to_string()))
}

#[cfg(test)]
mod tests;
