//! What an agent loop reports at a hook: an [`Event`]. Every field is optional; Warden keeps
//! turn, user and project values from earlier events until a later event changes them, and
//! keeps the session's history itself, so a loop reports what just happened and nothing more.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What happened at a hook. The same shape is one line of a session trace (plus `"hook"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Turn values that changed (turn number, token and context usage, iterations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<TurnUpdate>,
    /// The user's query, at `on_query_start`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Query>,
    /// The tool concerned, at the tool hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolCall>,
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

/// Turn values the agent loop reports; absent fields keep their previous value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnUpdate {
    /// The turn number, from 1. When never given, Warden counts `on_turn_start` hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u32>,
    /// Share of the token budget used: 0.42 is 42%, above 1.0 over budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<f64>,
    /// Share of the context window used: 0.42 is 42%, above 1.0 past the window.
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
    /// The agent is about to stop: this turn gave its final answer (`"final": true`).
    #[serde(default, rename = "final", skip_serializing_if = "Option::is_none")]
    pub is_final: Option<bool>,
}

/// A user query: its text, and anything else the loop knows about it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "QueryRepr")]
pub struct Query {
    /// What the user asked.
    pub text: String,
    /// Other fields, visible to rules as `event.query.<name>`.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum QueryRepr {
    Text(String),
    Full {
        text: String,
        #[serde(flatten)]
        extra: Map<String, Value>,
    },
}

impl From<QueryRepr> for Query {
    fn from(r: QueryRepr) -> Self {
        match r {
            QueryRepr::Text(text) => Query {
                text,
                extra: Map::new(),
            },
            QueryRepr::Full { text, extra } => Query { text, extra },
        }
    }
}

/// A tool call: which tool, with what arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
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
    /// Its settings, visible to rules as `context.user.settings` (or `project`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Map<String, Value>>,
    /// A project's folder, visible to rules as `context.project.root` (projects only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
}

impl Event {
    /// An empty event.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new user query.
    pub fn query(text: impl Into<String>) -> Self {
        Event {
            query: Some(Query {
                text: text.into(),
                extra: Map::new(),
            }),
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

    fn turn_mut(&mut self) -> &mut TurnUpdate {
        self.turn.get_or_insert_with(TurnUpdate::default)
    }

    /// Sets the turn number.
    pub fn with_turn(mut self, number: u32) -> Self {
        self.turn_mut().number = Some(number);
        self
    }

    /// Sets the share of the token budget used (0.42 is 42%; above 1.0, over budget).
    pub fn with_token_usage(mut self, usage: f64) -> Self {
        self.turn_mut().token_usage = Some(usage);
        self
    }

    /// Sets the model's context window, in tokens.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.turn_mut().context_window = Some(tokens);
        self
    }

    /// Sets the share of the context window used (0.42 is 42%; above 1.0, past the window).
    pub fn with_context_usage(mut self, usage: f64) -> Self {
        self.turn_mut().context_usage = Some(usage);
        self
    }

    /// Sets the iteration count and budget.
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
        self.user.get_or_insert_with(Party::default).id = Some(id.into());
        self
    }

    /// Sets the project id.
    pub fn with_project(mut self, id: impl Into<String>) -> Self {
        self.project.get_or_insert_with(Party::default).id = Some(id.into());
        self
    }

    /// Sets the project's folder, which rules read as `context.project.root`.
    pub fn with_project_root(mut self, root: impl Into<String>) -> Self {
        self.project.get_or_insert_with(Party::default).root = Some(root.into());
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
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// Sets when it happened (seconds since the Unix epoch).
    pub fn at(mut self, time: f64) -> Self {
        self.time = Some(time);
        self
    }
}

/// The fields of an event, for messages and suggestions.
const EVENT_FIELDS: &[&str] = &[
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

/// A field of an event that is not what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EventError {
    /// The field's dotted path (`turn.number`, `tool.name`), or the unknown field's name.
    pub field: String,
    /// What is wrong and what it must be (it names the field too).
    pub message: String,
}

fn bad(field: &str, message: String) -> EventError {
    EventError {
        field: field.to_string(),
        message,
    }
}

impl Event {
    /// Reads an event from a JSON object (a trace line without its `hook`, the body of a
    /// request), checking each field first so that a mistake is named by its path with what
    /// was expected (``` `turn.number` must be a whole number from 0 to 4294967295, not
    /// 4294967296 ```), not in serde's terms; and refusing an array where an object is
    /// expected (serde would read it by position).
    pub fn from_json(mut map: Map<String, Value>) -> Result<Event, EventError> {
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
        serde_json::from_value(Value::Object(map)).map_err(|e| bad("", e.to_string()))
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.chars().count() > 40 => "a long string".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn unknown(path: &str, key: &str, known: &[&str]) -> EventError {
    let hint = warden_input::closest(key, known.iter().copied())
        .map(|c| format!("did you mean `{c}`?"))
        .unwrap_or_else(|| format!("the fields are {}", known.join(", ")));
    if path.is_empty() {
        bad(key, format!("unknown field `{key}`; {hint}"))
    } else {
        bad(
            &format!("{path}.{key}"),
            format!("unknown field `{key}` in `{path}`; {hint}"),
        )
    }
}

fn object<'v>(
    path: &str,
    v: &'v Value,
    example: &str,
) -> Result<&'v Map<String, Value>, EventError> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(bad(
            path,
            format!(
                "`{path}` must be an object such as {example}, not {}",
                describe(other)
            ),
        )),
    }
}

fn string(path: &str, v: &Value) -> Result<(), EventError> {
    match v {
        Value::String(_) => Ok(()),
        other => Err(bad(
            path,
            format!("`{path}` must be a string, not {}", describe(other)),
        )),
    }
}

fn whole(path: &str, v: &Value, max: u64) -> Result<(), EventError> {
    match v.as_u64() {
        Some(n) if n <= max => Ok(()),
        _ => Err(bad(
            path,
            format!(
                "`{path}` must be a whole number from 0 to {max}, not {}",
                describe(v)
            ),
        )),
    }
}

fn boolean(path: &str, v: &Value) -> Result<(), EventError> {
    match v {
        Value::Bool(_) => Ok(()),
        other => Err(bad(
            path,
            format!("`{path}` must be true or false, not {}", describe(other)),
        )),
    }
}

/// The largest size of an event's `time` (seconds): the OpenAPI document's bounds too.
pub const MAX_TIME: f64 = 1e15;

/// The largest share a usage may be: a million times its budget. Above 1.0 is a fact (the
/// agent went over its budget, which is when a supervisor is needed most), not an error; past
/// this bound the number is broken, not an agent's.
pub const MAX_SHARE: f64 = 1e6;

fn number(path: &str, v: &Value) -> Result<(), EventError> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x.abs() <= MAX_TIME => Ok(()),
        _ => Err(bad(
            path,
            format!("`{path}` must be a number, not {}", describe(v)),
        )),
    }
}

/// A share, as the turn's usages are: a number from 0 (1.0 is all of the budget; above it,
/// over budget).
fn share(path: &str, v: &Value) -> Result<(), EventError> {
    match v.as_f64() {
        Some(x) if (0.0..=MAX_SHARE).contains(&x) => Ok(()),
        _ => Err(bad(
            path,
            format!(
                "`{path}` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not {}",
                describe(v)
            ),
        )),
    }
}

/// Checks one field of a reported event by its key: `Ok` when its value has the documented type.
pub fn check_field(key: &str, v: &Value) -> Result<(), EventError> {
    // `null` is an absent value, as serde reads it (an agent loop may write `None` so).
    if v.is_null() {
        return Ok(());
    }
    match key {
        "turn" => {
            for (k, x) in object("turn", v, r#"{"number": 3, "token_usage": 0.42}"#)? {
                let path = format!("turn.{k}");
                let Some(field) = TurnField::named(k) else {
                    return Err(unknown("turn", k, &TURN_FIELDS));
                };
                if x.is_null() {
                    continue;
                }
                match field {
                    TurnField::ContextWindow => whole(&path, x, u64::MAX)?,
                    f if f.is_whole() => whole(&path, x, u64::from(u32::MAX))?,
                    TurnField::TokenUsage | TurnField::ContextUsage => share(&path, x)?,
                    _ => boolean(&path, x)?,
                }
            }
            Ok(())
        }
        "query" => match v {
            Value::String(_) => Ok(()),
            Value::Object(m) => match m.get("text") {
                Some(t) => string("query.text", t),
                None => Err(bad(
                    "query.text",
                    "`query` as an object needs `text` (the question itself)".into(),
                )),
            },
            other => Err(bad(
                "query",
                format!(
                    "`query` must be a string, or an object with `text`, not {}",
                    describe(other)
                ),
            )),
        },
        "tool" => {
            let m = object("tool", v, r#"{"name": "vault_search"}"#)?;
            match m.get("name") {
                Some(Value::String(s)) if !s.is_empty() => {}
                Some(other) => {
                    return Err(bad(
                        "tool.name",
                        format!(
                            "`tool.name` must be the tool's name, not {}",
                            describe(other)
                        ),
                    ));
                }
                None => return Err(bad("tool.name", "`tool` has no `name`".into())),
            }
            match m.keys().find(|k| ToolField::named(k).is_none()) {
                Some(k) => Err(unknown("tool", k, &TOOL_FIELDS)),
                None => Ok(()),
            }
        }
        "message" => {
            let m = object("message", v, r#"{"role": "assistant", "content": "..."}"#)?;
            for k in ["role", "content"] {
                match m.get(k) {
                    Some(x) => string(&format!("message.{k}"), x)?,
                    None => {
                        return Err(bad(
                            &format!("message.{k}"),
                            format!("`message` has no `{k}`"),
                        ));
                    }
                }
            }
            match m.keys().find(|k| !matches!(k.as_str(), "role" | "content")) {
                Some(k) => Err(unknown("message", k, &["role", "content"])),
                None => Ok(()),
            }
        }
        "user" | "project" => {
            let fields: &[&str] = if key == "project" {
                &["id", "settings", "root"]
            } else {
                &["id", "settings"]
            };
            for (k, x) in object(key, v, r#"{"id": "ada"}"#)? {
                if x.is_null() && fields.contains(&k.as_str()) {
                    continue;
                }
                match k.as_str() {
                    "id" => string(&format!("{key}.id"), x)?,
                    "settings" => {
                        object(&format!("{key}.settings"), x, r#"{"language": "en"}"#)?;
                    }
                    "root" if key == "project" => string("project.root", x)?,
                    _ => return Err(unknown(key, k, fields)),
                }
            }
            Ok(())
        }
        "error" => string("error", v),
        "time" => number("time", v),
        "result" | "data" => Ok(()),
        _ => Err(unknown("", key, EVENT_FIELDS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Result<Event, String> {
        match v {
            Value::Object(m) => Event::from_json(m).map_err(|e| e.message),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_whole_number_written_with_a_point_is_that_number() {
        let e =
            read(json!({"turn": {"number": 3.0, "iteration_count": 756.0, "context_window": 2e5}}))
                .unwrap();
        let turn = e.turn.unwrap();
        assert_eq!(turn.number, Some(3));
        assert_eq!(turn.iteration_count, Some(756));
        assert_eq!(turn.context_window, Some(200_000));
        assert!(read(json!({"turn": {"number": 3.5}})).is_err());
        assert!(read(json!({"turn": {"number": -3.0}})).is_err());
    }

    #[test]
    fn a_bad_field_is_named_by_its_path_with_what_was_expected() {
        for (event, want) in [
            (
                json!({"turn": {"number": 4294967296u64}}),
                "`turn.number` must be a whole number from 0 to 4294967295, not 4294967296",
            ),
            (
                json!({"turn": {"token_usage": "high"}}),
                "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not \"high\"",
            ),
            (
                json!({"turn": {"token_usage": 1e308}}),
                "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not 1e+308",
            ),
            (
                json!({"turn": {"token_usage": -5}}),
                "`turn.token_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not -5",
            ),
            (
                json!({"turn": {"context_usage": 2e6}}),
                "`turn.context_usage` must be a share from 0.0 to 1000000 (0.42 is 42%, 1.5 is 50% over), not 2000000.0",
            ),
            (
                json!({"turn": {"iteration_count": -1}}),
                "`turn.iteration_count` must be a whole number from 0 to 4294967295, not -1",
            ),
            (
                json!({"turn": {"context_window": 1.5}}),
                "`turn.context_window` must be a whole number from 0 to 18446744073709551615, not 1.5",
            ),
            (
                json!({"turn": [7, 0.9]}),
                "`turn` must be an object such as",
            ),
            (json!({"user": ["bob"]}), "`user` must be an object such as"),
            (
                json!({"turn": {"tokens": 1}}),
                "unknown field `tokens` in `turn`",
            ),
            (json!({"tool": {"arguments": {}}}), "`tool` has no `name`"),
            (
                json!({"tool": {"name": ""}}),
                "`tool.name` must be the tool's name",
            ),
            (
                json!({"tool": "vault_search"}),
                "`tool` must be an object such as",
            ),
            (
                json!({"query": 5}),
                "`query` must be a string, or an object with `text`, not 5",
            ),
            (
                json!({"message": {"role": "assistant"}}),
                "`message` has no `content`",
            ),
            (
                json!({"time": "now"}),
                "`time` must be a number, not \"now\"",
            ),
            (
                json!({"reslut": {}}),
                "unknown field `reslut`; did you mean `result`?",
            ),
        ] {
            let e = read(event.clone()).unwrap_err();
            assert!(e.contains(want), "{event}: {e}");
        }
        // `null` is an absent value, as serde reads it.
        let nulls = read(json!({
            "tool": null, "error": null, "time": null, "message": null,
            "turn": {"token_usage": null, "number": 2}, "user": {"id": null, "settings": null}
        }))
        .unwrap();
        assert!(nulls.tool.is_none() && nulls.time.is_none());
        assert_eq!(nulls.turn.unwrap().token_usage, None);
        let ok = read(json!({
            "turn": {"number": 3, "token_usage": 0.5, "context_window": 128000},
            "query": {"text": "hi", "lang": "en"},
            "tool": {"name": "vault_search", "arguments": {"q": "wal"}},
            "result": [1, 2], "data": null, "time": 1.5,
            "user": {"id": "ada", "settings": {}}, "message": {"role": "user", "content": "x"}
        }))
        .unwrap();
        assert_eq!(ok.turn.unwrap().number, Some(3));
    }

    #[test]
    fn query_is_a_string_or_an_object() {
        let e: Event = serde_json::from_value(json!({"query": "what is rust?"})).unwrap();
        assert_eq!(e.query.unwrap().text, "what is rust?");
        let e: Event =
            serde_json::from_value(json!({"query": {"text": "hi", "lang": "en"}})).unwrap();
        let q = e.query.unwrap();
        assert_eq!(
            (q.text.as_str(), q.extra["lang"].as_str()),
            ("hi", Some("en"))
        );
    }

    #[test]
    fn events_read_and_write_a_turn_and_a_tool_by_the_one_list_of_their_fields() {
        let turn = json!({"number": 3, "token_usage": 0.5, "context_usage": 0.25,
            "iteration_count": 2, "max_iterations": 9, "context_window": 1000, "final": true});
        let read: TurnUpdate = serde_json::from_value(turn.clone()).unwrap();
        let written = serde_json::to_value(&read).unwrap();
        let keys: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, TURN_FIELDS);
        for field in TurnField::ALL {
            assert_eq!(TurnField::named(field.name()), Some(field));
            assert!(check_field("turn", &json!({ field.name(): turn[field.name()] })).is_ok());
        }
        let tool = serde_json::to_value(ToolCall {
            name: "search".into(),
            arguments: json!({"q": 1}),
        })
        .unwrap();
        let keys: Vec<&str> = tool
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, TOOL_FIELDS);
        assert!(check_field("tool", &tool).is_ok());
        let err = check_field("turn", &json!({"tokne_usage": 0.1})).unwrap_err();
        assert!(err.message.contains("did you mean `token_usage`"), "{err}");
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<Event>(json!({"turn": {"tokens": 1}})).unwrap_err();
        assert!(err.to_string().contains("unknown field `tokens`"), "{err}");
    }

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
