//! A session as the service shows it (`GET /v1/sessions/{id}`): its mode, its counts, what
//! Warden knows of it (the facts), the rules it has running and the notifications it holds.

use std::collections::{BTreeMap, VecDeque};

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use warden_context::facts::{
    Counts as EngineCounts, History as EngineHistory, Identity as EngineIdentity, MessageRecord,
    SessionFacts, ToolRecord, ToolStatus, TurnState,
};
use warden_context::notification::Notification;

/// The body of `GET /v1/sessions/{id}`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    /// Its id.
    pub id: String,
    /// The active mode.
    pub mode: String,
    /// Whether `on_session_end` was handled.
    pub ended: bool,
    /// Events ticked so far.
    pub events: u64,
    /// What Warden knows of it: turn, history, user, project, query.
    #[serde(serialize_with = "facts")]
    pub facts: SessionFacts,
    /// The rules with a script or behavior running (waiting for a later hook).
    pub running: Vec<String>,
    /// Notifications waiting for a later delivery point.
    #[serde(serialize_with = "super::outcome::notifications")]
    pub pending: Vec<Notification>,
}

/// Writes a session's facts as [`Facts`] (for a `serialize_with` field).
pub fn facts<S: Serializer>(f: &SessionFacts, s: S) -> Result<S::Ok, S::Error> {
    Facts::from(f).serialize(s)
}

/// What Warden knows of a session.
#[derive(Debug, Serialize)]
pub struct Facts<'a> {
    /// The turn.
    pub turn: Turn,
    /// Its bounded history and its tallies.
    pub history: History<'a>,
    /// The user.
    pub user: Identity<'a>,
    /// The project.
    pub project: Identity<'a>,
    /// The current query.
    pub query: &'a str,
    /// The active mode.
    pub mode: &'a str,
    /// State kept for the session by rules (`scope = "session"`), by plugin; absent when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub session_state: &'a BTreeMap<String, Map<String, Value>>,
}

impl<'a> From<&'a SessionFacts> for Facts<'a> {
    fn from(f: &'a SessionFacts) -> Self {
        Facts {
            turn: Turn::from(&f.turn),
            history: History::from(&f.history),
            user: Identity::from(&f.user),
            project: Identity::from(&f.project),
            query: &f.query,
            mode: &f.mode,
            session_state: &f.session_state,
        }
    }
}

/// The turn's values.
#[derive(Debug, Serialize)]
pub struct Turn {
    /// The turn number.
    pub number: u32,
    /// Share of the token budget used.
    pub token_usage: f64,
    /// Share of the context window used.
    pub context_usage: f64,
    /// Iterations so far in this query.
    pub iteration_count: u32,
    /// The iteration budget of this query.
    pub max_iterations: u32,
    /// The model's context window, in tokens.
    pub context_window: u64,
    /// This turn gave the final answer.
    #[serde(rename = "final")]
    pub is_final: bool,
}

impl From<&TurnState> for Turn {
    fn from(t: &TurnState) -> Self {
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

/// A session's history: the latest messages and tool calls, and tallies over all of it.
#[derive(Debug, Serialize)]
pub struct History<'a> {
    /// The latest messages, oldest first.
    #[serde(serialize_with = "messages")]
    pub messages: &'a VecDeque<MessageRecord>,
    /// The latest tool calls, oldest first.
    #[serde(serialize_with = "tools")]
    pub tools: &'a VecDeque<ToolRecord>,
    /// Failures per tool, over the whole session.
    pub failures: &'a BTreeMap<String, u32>,
    /// Calls per tool, over the whole session.
    pub calls: &'a BTreeMap<String, u32>,
    /// Counts over the whole session.
    pub counts: Counts,
}

impl<'a> From<&'a EngineHistory> for History<'a> {
    fn from(h: &'a EngineHistory) -> Self {
        History {
            messages: &h.messages,
            tools: &h.tools,
            failures: &h.failures,
            calls: &h.calls,
            counts: Counts::from(&h.counts),
        }
    }
}

/// Counts over a whole session.
#[derive(Debug, Serialize)]
pub struct Counts {
    /// Turns started.
    pub turns: u32,
    /// Queries.
    pub queries: u32,
    /// Tool calls.
    pub tool_calls: u32,
    /// Tool failures.
    pub tool_failures: u32,
    /// Messages.
    pub messages: u32,
}

impl From<&EngineCounts> for Counts {
    fn from(c: &EngineCounts) -> Self {
        Counts {
            turns: c.turns,
            queries: c.queries,
            tool_calls: c.tool_calls,
            tool_failures: c.tool_failures,
            messages: c.messages,
        }
    }
}

/// A message of the history.
#[derive(Debug, Serialize)]
pub struct Message<'a> {
    /// Its role.
    pub role: &'a str,
    /// Its text.
    pub content: &'a str,
    /// The turn it was added at.
    pub turn: u32,
}

fn messages<S: Serializer>(list: &&VecDeque<MessageRecord>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|m| Message {
        role: &m.role,
        content: &m.content,
        turn: m.turn,
    }))
}

/// A tool call of the history.
#[derive(Debug, Serialize)]
pub struct Tool<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its arguments.
    pub arguments: &'a Value,
    /// What it returned (`null` until it completes).
    pub result: &'a Value,
    /// Why it failed.
    pub error: Option<&'a str>,
    /// Whether it completed without failing.
    pub success: bool,
    /// `pending`, `ok` or `failed`.
    pub status: &'static str,
    /// The turn it was called at.
    pub turn: u32,
    /// When it was called, in seconds since the Unix epoch.
    pub time: f64,
}

/// The word a tool's status is written as.
pub fn tool_status(s: ToolStatus) -> &'static str {
    match s {
        ToolStatus::Pending => "pending",
        ToolStatus::Ok => "ok",
        ToolStatus::Failed => "failed",
    }
}

fn tools<S: Serializer>(list: &&VecDeque<ToolRecord>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|t| Tool {
        name: &t.name,
        arguments: &t.arguments,
        result: &t.result,
        error: t.error.as_deref(),
        success: t.success,
        status: tool_status(t.status),
        turn: t.turn,
        time: t.time,
    }))
}

/// A user or project.
#[derive(Debug, Serialize)]
pub struct Identity<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its settings.
    pub settings: &'a Map<String, Value>,
    /// A project's folder (empty for a user).
    pub root: &'a str,
}

impl<'a> From<&'a EngineIdentity> for Identity<'a> {
    fn from(i: &'a EngineIdentity) -> Self {
        Identity {
            id: &i.id,
            settings: &i.settings,
            root: &i.root,
        }
    }
}
