//! The context API: the schema conditions and templates are checked against, the helper
//! functions, and the bridge from a session's facts to the expression engine.
//!
//! The schema here *is* the documented context API; the book's reference is checked against
//! [`schema()`] by a test, so the two cannot drift apart.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;
use warden_expr::rhai::Dynamic;
use warden_expr::{FieldDef, MapId, ScalarId, Schema, Type};
use warden_store::{StateScope, Store};

use crate::event::Event;
use crate::facts::SessionFacts;
use warden_load::Hook;

mod id {
    use warden_expr::{MapId, ScalarId};
    pub const TURN_NUMBER: ScalarId = ScalarId(0);
    pub const TOKEN_USAGE: ScalarId = ScalarId(1);
    pub const CONTEXT_USAGE: ScalarId = ScalarId(2);
    pub const ITERATION_COUNT: ScalarId = ScalarId(3);
    pub const MAX_ITERATIONS: ScalarId = ScalarId(4);
    pub const COUNT_TURNS: ScalarId = ScalarId(5);
    pub const COUNT_QUERIES: ScalarId = ScalarId(6);
    pub const COUNT_TOOL_CALLS: ScalarId = ScalarId(7);
    pub const COUNT_TOOL_FAILURES: ScalarId = ScalarId(8);
    pub const COUNT_MESSAGES: ScalarId = ScalarId(9);
    pub const USER_ID: ScalarId = ScalarId(10);
    pub const PROJECT_ID: ScalarId = ScalarId(11);
    pub const QUERY: ScalarId = ScalarId(12);
    pub const MODE: ScalarId = ScalarId(13);
    pub const EVENT_HOOK: ScalarId = ScalarId(14);
    pub const EVENT_TOOL_NAME: ScalarId = ScalarId(15);
    pub const EVENT_TIME: ScalarId = ScalarId(16);
    pub const TOOL_NAME: ScalarId = ScalarId(17);
    pub const CONTEXT_WINDOW: ScalarId = ScalarId(18);
    pub const FAILURES: MapId = MapId(0);
    pub const CALLS: MapId = MapId(1);
}

/// The name of the hidden root that carries the reading plugin's state.
pub(crate) const STATE_ROOT: &str = "w_state";

/// The name of the root that holds the rule's plugin settings.
pub(crate) const SETTINGS_ROOT: &str = "settings";

/// The first scalar id of settings: setting `i` of a program is `ScalarId(SETTINGS_BASE + i)`.
pub(crate) const SETTINGS_BASE: u16 = 1024;

/// What `settings` says about itself in the documented schema.
const SETTINGS_DOC: &str = "The settings of the rule's plugin, as its manifest declares them (`settings.max_sources`): the manifest's default, or the value the user set. Rules outside a plugin have none.";

/// The context schema, as documented: the roots and helpers every rule can use, with
/// `settings` shown as the map it is for an unknown plugin. Each plugin's rules are checked
/// against this schema with `settings` narrowed to the settings that plugin declares.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut s = build_schema();
        s.root(SETTINGS_ROOT, Type::map(Type::Any), SETTINGS_DOC);
        s
    })
}

/// The schema the rules of one plugin are checked against: `settings` has exactly the
/// plugin's settings, each a typed scalar (so `token_usage > settings.threshold` takes the
/// fast path).
pub(crate) fn plugin_schema(settings: &[(ScalarId, &warden_load::SettingDef)]) -> Schema {
    use warden_load::SettingKind;
    static BASE: OnceLock<Schema> = OnceLock::new();
    let mut s = BASE.get_or_init(build_schema).clone();
    let fields = settings
        .iter()
        .map(|(id, def)| {
            let ty = match def.kind {
                SettingKind::Integer => Type::Int,
                SettingKind::Float => Type::Float,
                SettingKind::String => Type::Str,
                SettingKind::Boolean => Type::Bool,
            };
            let doc = if def.description.is_empty() {
                "A plugin setting."
            } else {
                def.description.as_str()
            };
            FieldDef::new(&def.name, ty, doc).scalar(*id)
        })
        .collect();
    let record = s.record(SETTINGS_ROOT, fields);
    s.root(SETTINGS_ROOT, Type::Record(record), SETTINGS_DOC);
    s
}

fn build_schema() -> Schema {
    use id::*;
    let mut s = Schema::new();
    let turn = s.record(
        "context.turn",
        vec![
            FieldDef::new("number", Type::Int, "Turn number, from 1 (0 before the first turn). Reported by the agent loop, or counted by Warden at each on_turn_start when it is not.").scalar(TURN_NUMBER),
            FieldDef::new("token_usage", Type::Float, "Share of the token budget used, 0.0 to 1.0.").scalar(TOKEN_USAGE),
            FieldDef::new("context_usage", Type::Float, "Share of the context window used, 0.0 to 1.0.").scalar(CONTEXT_USAGE),
            FieldDef::new("iteration_count", Type::Int, "Iterations (model calls) so far in this query.").scalar(ITERATION_COUNT),
            FieldDef::new("max_iterations", Type::Int, "The iteration budget; 0 when the agent loop has not reported one.").scalar(MAX_ITERATIONS),
            FieldDef::new("context_window", Type::Int, "The model's context window in tokens, as the agent loop reported it; 0 when it has not.").scalar(CONTEXT_WINDOW),
        ],
    );
    let message = s.record(
        "message",
        vec![
            FieldDef::new(
                "role",
                Type::Str,
                "`user`, `assistant`, `system` or `tool`.",
            ),
            FieldDef::new("content", Type::Str, "The message text."),
            FieldDef::new("turn", Type::Int, "The turn it arrived in."),
        ],
    );
    let tool_record = s.record(
        "tool record",
        vec![
            FieldDef::new("name", Type::Str, "The tool's name."),
            FieldDef::new(
                "arguments",
                Type::Any,
                "Its arguments, as the agent loop reported them.",
            ),
            FieldDef::new(
                "result",
                Type::Any,
                "What it returned (null while pending or if it failed).",
            ),
            FieldDef::new(
                "error",
                Type::nullable(Type::Str),
                "Why it failed, or null.",
            ),
            FieldDef::new("success", Type::Bool, "Whether it returned successfully."),
            FieldDef::new("status", Type::Str, "`pending`, `ok` or `failed`."),
            FieldDef::new("turn", Type::Int, "The turn it was called in."),
            FieldDef::new(
                "time",
                Type::Float,
                "When it was last updated, in seconds since the Unix epoch.",
            ),
        ],
    );
    let counts = s.record(
        "context.history.counts",
        vec![
            FieldDef::new("turns", Type::Int, "Turns started in this session.").scalar(COUNT_TURNS),
            FieldDef::new("queries", Type::Int, "Queries received.").scalar(COUNT_QUERIES),
            FieldDef::new("tool_calls", Type::Int, "Tool calls made.").scalar(COUNT_TOOL_CALLS),
            FieldDef::new("tool_failures", Type::Int, "Tool calls that failed.")
                .scalar(COUNT_TOOL_FAILURES),
            FieldDef::new("messages", Type::Int, "Messages added to the history.")
                .scalar(COUNT_MESSAGES),
        ],
    );
    let history = s.record(
        "context.history",
        vec![
            FieldDef::new("messages", Type::list(Type::Record(message)), "Recent messages, oldest first (the last 50 by default)."),
            FieldDef::new("tools", Type::list(Type::Record(tool_record)), "Recent tool calls, oldest first (the last 50 by default)."),
            FieldDef::new("failures", Type::map(Type::Int), "Failures per tool name over the session: `context.history.failures['web_search']`.").direct_map(FAILURES),
            FieldDef::new("calls", Type::map(Type::Int), "Calls per tool name over the session.").direct_map(CALLS),
            FieldDef::new("counts", Type::Record(counts), "Totals over the session."),
            FieldDef::alias("tool_count", "context.history.counts.tool_calls", "Tool calls made in this session (the specification's name for `counts.tool_calls`)."),
        ],
    );
    let identity = |s: &mut Schema, name: &str, id_scalar: ScalarId| {
        s.record(
            name,
            vec![
                FieldDef::new(
                    "id",
                    Type::Str,
                    "Its id (`default` until an event names it).",
                )
                .scalar(id_scalar),
                FieldDef::new(
                    "settings",
                    Type::map(Type::Any),
                    "A snapshot of its settings, as the agent loop reported them.",
                ),
            ],
        )
    };
    let user = identity(&mut s, "context.user", USER_ID);
    let project = identity(&mut s, "context.project", PROJECT_ID);
    let context = s.record(
        "context",
        vec![
            FieldDef::new("turn", Type::Record(turn), "The current turn."),
            FieldDef::new("history", Type::Record(history), "What happened so far in the session."),
            FieldDef::new("user", Type::Record(user), "The user."),
            FieldDef::new("project", Type::Record(project), "The project."),
            FieldDef::alias("state", STATE_ROOT, "The rule's plugin state, persistent across turns and sessions: `context.state.get('key')` or `context.state.get('key', default)`."),
            FieldDef::new("query", Type::Str, "The text of the latest user query (empty before the first).").scalar(QUERY),
            FieldDef::new("mode", Type::Str, "The active mode (`default` unless modes are configured).").scalar(MODE),
            FieldDef::alias("token_usage", "context.turn.token_usage", "Shorthand for `context.turn.token_usage`."),
        ],
    );
    let event = s.record(
        "event",
        vec![
            FieldDef::new("hook", Type::Str, "The hook being handled (`on_tool_complete`...).").scalar(EVENT_HOOK),
            FieldDef::new("tool_name", Type::Str, "The tool of this event, or an empty string.").scalar(EVENT_TOOL_NAME),
            FieldDef::new("query", Type::Any, "The query of an on_query_start event: `event.query.text` and any other fields the loop sent; null otherwise."),
            FieldDef::new("message", Type::Any, "The message the event carries (`role`, `content`), or null."),
            FieldDef::new("error", Type::nullable(Type::Str), "The error of an on_tool_failure event, or null."),
            FieldDef::new("data", Type::Any, "Free-form data the agent loop attached, or null."),
            FieldDef::new("time", Type::Float, "When it happened, in seconds since the Unix epoch.").scalar(EVENT_TIME),
        ],
    );
    let tool = s.record(
        "tool",
        vec![
            FieldDef::new("name", Type::Str, "The tool's name.").scalar(TOOL_NAME),
            FieldDef::new("arguments", Type::Any, "Its arguments."),
        ],
    );
    s.root(
        "context",
        Type::Record(context),
        "The session: turn, history, user, project, plugin state, mode.",
    );
    s.root("event", Type::Record(event), "The event being handled.");
    s.root(
        "tool",
        Type::Record(tool),
        "The tool of a tool hook (on_tool_call, on_tool_complete, on_tool_failure).",
    );
    s.root("result", Type::Any, "What the tool returned, at on_tool_complete. Free-form: a missing key makes the condition undetermined.");
    s.hidden_root(STATE_ROOT, Type::map(Type::Any));
    s.root_alias(
        "token_usage",
        "context.turn.token_usage",
        "Shorthand for `context.turn.token_usage`.",
    );
    s.root_alias(
        "turn_number",
        "context.turn.number",
        "Shorthand for `context.turn.number`.",
    );

    s.helper(
        "context_above_threshold",
        &["t"],
        "context.turn.token_usage >= t",
        "True when the share of the token budget used is at least `t`.",
    );
    s.helper("iterations_above_threshold", &["t"],
        "context.turn.max_iterations > 0 and context.turn.iteration_count >= t * context.turn.max_iterations",
        "True when at least the share `t` of the iteration budget is used (false while no budget is reported).");
    s.helper(
        "tool_completed",
        &["name"],
        "event.hook == 'on_tool_complete' and event.tool_name == name",
        "True while handling the successful completion of a call to `name`.",
    );
    s.helper(
        "tool_failed",
        &["name"],
        "event.hook == 'on_tool_failure' and event.tool_name == name",
        "True while handling a failure of `name`.",
    );
    s.helper(
        "failure_count",
        &["name"],
        "get(context.history.failures, name, 0)",
        "How many times `name` failed in this session.",
    );
    s.helper(
        "tool_calls",
        &["name"],
        "get(context.history.calls, name, 0)",
        "How many times `name` was called in this session.",
    );
    s.helper(
        "query_mentions",
        &["word"],
        "contains(lower(context.query), lower(word))",
        "True when the latest query contains `word`, ignoring case.",
    );
    s
}

/// Roots that rules of `hook` cannot read, each with the reason shown to the author.
pub(crate) fn unavailable(hook: Hook) -> &'static [(&'static str, &'static str)] {
    match hook {
        Hook::OnToolComplete => &[],
        Hook::OnToolCall => &[(
            "result",
            "on_tool_call runs before the tool returns; use on_tool_complete",
        )],
        Hook::OnToolFailure => &[("result", "a failed tool has no result; read `event.error`")],
        _ => &[
            (
                "tool",
                "only the tool hooks (on_tool_call, on_tool_complete, on_tool_failure) have a tool; `context.history.tools` holds past calls",
            ),
            (
                "result",
                "only on_tool_complete has a tool result; `context.history.tools` holds past results",
            ),
        ],
    }
}

/// One plugin's state, or why it could not be read.
type LoadedState = Result<Arc<BTreeMap<String, Value>>, String>;

/// Plugin state as one tick reads it: loaded from the store on first use, once per plugin.
pub(crate) struct StateReader<'a> {
    store: &'a Store,
    user: &'a str,
    project: &'a str,
    cache: RefCell<HashMap<Arc<str>, LoadedState>>,
}

impl<'a> StateReader<'a> {
    pub(crate) fn new(store: &'a Store, user: &'a str, project: &'a str) -> Self {
        StateReader {
            store,
            user,
            project,
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// The state of `plugin`, or why it could not be read.
    pub(crate) fn get(&self, plugin: &Arc<str>) -> LoadedState {
        if let Some(hit) = self.cache.borrow().get(plugin) {
            return hit.clone();
        }
        let scope = StateScope::new(self.user, self.project, plugin.as_ref());
        let loaded = self
            .store
            .state_all(&scope)
            .map(Arc::new)
            .map_err(|e| format!("plugin state could not be read: {e}"));
        self.cache
            .borrow_mut()
            .insert(plugin.clone(), loaded.clone());
        loaded
    }
}

/// The frozen frame of one tick, as conditions and templates read it.
pub(crate) struct TickFacts<'a> {
    pub facts: &'a SessionFacts,
    pub hook: Hook,
    pub event: &'a Event,
    pub time: f64,
    pub state: StateReader<'a>,
    /// The plugin whose state `context.state` shows (set before each rule).
    pub plugin: RefCell<Arc<str>>,
    /// A state read failure seen while evaluating, reported against the rule.
    pub state_error: Cell<bool>,
    /// The program's setting slots, and their values for this session.
    pub slots: &'a crate::program::SettingSlots,
    pub settings: &'a [warden_load::SettingValue],
}

#[derive(Serialize)]
struct ContextView<'a> {
    turn: &'a crate::facts::TurnState,
    history: HistoryView<'a>,
    user: &'a crate::facts::Identity,
    project: &'a crate::facts::Identity,
    query: &'a str,
    mode: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a BTreeMap<String, Value>>,
    /// The shorthand, so templates can read it as conditions do.
    token_usage: f64,
}

/// The history, with the specification's `tool_count` shorthand.
#[derive(Serialize)]
struct HistoryView<'a> {
    #[serde(flatten)]
    history: &'a crate::facts::History,
    tool_count: u32,
}

#[derive(Serialize)]
struct EventView<'a> {
    hook: &'static str,
    tool_name: &'a str,
    query: Option<&'a crate::event::Query>,
    message: Option<&'a crate::event::Message>,
    error: Option<&'a str>,
    data: Option<&'a Value>,
    time: f64,
}

#[derive(Serialize)]
struct ToolView<'a> {
    name: &'a str,
    arguments: &'a Value,
}

static NULL: Value = Value::Null;

impl<'a> TickFacts<'a> {
    fn tool_name(&self) -> &str {
        self.event.tool.as_ref().map_or("", |t| t.name.as_str())
    }

    fn context_view<'s>(&'s self, state: Option<&'s BTreeMap<String, Value>>) -> ContextView<'s> {
        let f = self.facts;
        ContextView {
            turn: &f.turn,
            history: HistoryView {
                history: &f.history,
                tool_count: f.history.counts.tool_calls,
            },
            user: &f.user,
            project: &f.project,
            query: &f.query,
            mode: &f.mode,
            state,
            token_usage: f.turn.token_usage,
        }
    }

    fn event_view(&self) -> EventView<'_> {
        EventView {
            hook: self.hook.name(),
            tool_name: self.tool_name(),
            query: self.event.query.as_ref(),
            message: self.event.message.as_ref(),
            error: self.event.error.as_deref(),
            data: self.event.data.as_ref(),
            time: self.time,
        }
    }

    /// The tool of this event. Its arguments are the event's, or, when this event did not
    /// repeat them (a completion reported after its call), those of the call it completes.
    fn tool_view(&self) -> ToolView<'_> {
        let name = self.tool_name();
        let arguments = match self.event.tool.as_ref().map(|t| &t.arguments) {
            Some(args) if !args.is_null() => args,
            _ => self
                .facts
                .history
                .tools
                .iter()
                .rev()
                .find(|t| t.name == name)
                .map_or(&NULL, |t| &t.arguments),
        };
        ToolView { name, arguments }
    }

    /// The current plugin's state, or an empty map when it could not be read (the failure is
    /// remembered so the rule reports it).
    fn current_state(&self) -> Arc<BTreeMap<String, Value>> {
        let plugin = self.plugin.borrow().clone();
        match self.state.get(&plugin) {
            Ok(s) => s,
            Err(_) => {
                self.state_error.set(true);
                Arc::default()
            }
        }
    }

    /// The current plugin's settings, by name.
    fn current_settings(&self) -> BTreeMap<&str, &warden_load::SettingValue> {
        let plugin = self.plugin.borrow();
        self.slots
            .of(&plugin)
            .filter_map(|i| Some((self.slots.slots[i].def.name.as_str(), self.settings.get(i)?)))
            .collect()
    }

    /// The values a template renders with: `context` (with `state`), `event`, `tool`,
    /// `result`, `settings`.
    pub(crate) fn template_values(&self) -> minijinja::Value {
        let state = self.current_state();
        use minijinja::value::Serde;
        minijinja::context! {
            settings => minijinja::Value::from(Serde(self.current_settings())),
            context => minijinja::Value::from(Serde(self.context_view(Some(&state)))),
            event => minijinja::Value::from(Serde(self.event_view())),
            tool => minijinja::Value::from(Serde(self.tool_view())),
            result => minijinja::Value::from(Serde(self.event.result.as_ref().unwrap_or(&NULL))),
            token_usage => self.facts.turn.token_usage,
            turn_number => self.facts.turn.number,
        }
    }
}

/// A setting's value as the expression engine reads it.
fn setting_scalar(value: &warden_load::SettingValue) -> warden_expr::Scalar<'_> {
    use warden_expr::Scalar as S;
    use warden_load::SettingValue as V;
    match value {
        V::Integer(n) => S::Int(*n),
        V::Float(f) => S::Float(*f),
        V::String(s) => S::Str(s),
        V::Boolean(b) => S::Bool(*b),
    }
}

fn dynamic<T: Serialize>(value: &T) -> Dynamic {
    warden_expr::rhai::serde::to_dynamic(value).unwrap_or(Dynamic::UNIT)
}

impl warden_expr::Facts for TickFacts<'_> {
    fn scalar(&self, sid: ScalarId) -> warden_expr::Scalar<'_> {
        use warden_expr::Scalar as S;
        let f = self.facts;
        match sid {
            id::TURN_NUMBER => S::Int(f.turn.number.into()),
            id::TOKEN_USAGE => S::Float(f.turn.token_usage),
            id::CONTEXT_USAGE => S::Float(f.turn.context_usage),
            id::ITERATION_COUNT => S::Int(f.turn.iteration_count.into()),
            id::MAX_ITERATIONS => S::Int(f.turn.max_iterations.into()),
            id::CONTEXT_WINDOW => S::Int(i64::try_from(f.turn.context_window).unwrap_or(i64::MAX)),
            id::COUNT_TURNS => S::Int(f.history.counts.turns.into()),
            id::COUNT_QUERIES => S::Int(f.history.counts.queries.into()),
            id::COUNT_TOOL_CALLS => S::Int(f.history.counts.tool_calls.into()),
            id::COUNT_TOOL_FAILURES => S::Int(f.history.counts.tool_failures.into()),
            id::COUNT_MESSAGES => S::Int(f.history.counts.messages.into()),
            id::USER_ID => S::Str(&f.user.id),
            id::PROJECT_ID => S::Str(&f.project.id),
            id::QUERY => S::Str(&f.query),
            id::MODE => S::Str(&f.mode),
            id::EVENT_HOOK => S::Str(self.hook.name()),
            id::EVENT_TOOL_NAME | id::TOOL_NAME => S::Str(self.tool_name()),
            id::EVENT_TIME => S::Float(self.time),
            ScalarId(n) if n >= SETTINGS_BASE => self
                .settings
                .get(usize::from(n - SETTINGS_BASE))
                .map_or(S::Null, setting_scalar),
            _ => S::Null,
        }
    }

    fn map_get(&self, map: MapId, key: &str) -> Option<warden_expr::Scalar<'_>> {
        let table = match map {
            id::FAILURES => &self.facts.history.failures,
            id::CALLS => &self.facts.history.calls,
            _ => return None,
        };
        table
            .get(key)
            .map(|n| warden_expr::Scalar::Int((*n).into()))
    }

    fn root(&self, name: &str) -> Dynamic {
        match name {
            "context" => dynamic(&self.context_view(None)),
            "event" => dynamic(&self.event_view()),
            "tool" => dynamic(&self.tool_view()),
            "result" => dynamic(self.event.result.as_ref().unwrap_or(&NULL)),
            STATE_ROOT => dynamic(&*self.current_state()),
            SETTINGS_ROOT => dynamic(&self.current_settings()),
            _ => Dynamic::UNIT,
        }
    }
}

/// What a script reads: the same frame, handed to Lua one field at a time.
impl warden_lua::Host for TickFacts<'_> {
    fn field(&self, out: &mut warden_lua::Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        use mlua::Value;
        let unknown = |fields: &[&str]| {
            let help = warden_input::closest(key, fields.iter().copied())
                .map(|c| format!("; did you mean `{root}.{c}`?"))
                .unwrap_or_else(|| format!("; it has {}", fields.join(", ")));
            Err(mlua::Error::RuntimeError(format!(
                "`{root}` has no field `{key}`{help}"
            )))
        };
        let f = self.facts;
        match root {
            "context" => match key {
                "turn" => out.record(
                    crate::event::TURN_FIELDS,
                    &[
                        Value::Integer(f.turn.number.into()),
                        Value::Number(f.turn.token_usage),
                        Value::Number(f.turn.context_usage),
                        Value::Integer(f.turn.iteration_count.into()),
                        Value::Integer(f.turn.max_iterations.into()),
                        Value::Integer(i64::try_from(f.turn.context_window).unwrap_or(i64::MAX)),
                    ],
                ),
                "history" => out.serialize(&self.context_view(None).history),
                "user" => out.serialize(&f.user),
                "project" => out.serialize(&f.project),
                "state" => out.serialize(&*self.current_state()),
                "query" => out.value(f.query.as_str()),
                "mode" => out.value(f.mode.as_str()),
                "token_usage" => out.value(f.turn.token_usage),
                _ => unknown(&[
                    "turn",
                    "history",
                    "user",
                    "project",
                    "state",
                    "query",
                    "mode",
                    "token_usage",
                ]),
            },
            "event" => {
                let e = self.event_view();
                match key {
                    "hook" => out.value(e.hook),
                    "tool_name" => out.value(e.tool_name),
                    "query" => out.serialize(&e.query),
                    "message" => out.serialize(&e.message),
                    "error" => out.serialize(&e.error),
                    "data" => out.serialize(&e.data),
                    "time" => out.value(e.time),
                    _ => unknown(&[
                        "hook",
                        "tool_name",
                        "query",
                        "message",
                        "error",
                        "data",
                        "time",
                    ]),
                }
            }
            "tool" => {
                let t = self.tool_view();
                match key {
                    "name" => out.value(t.name),
                    "arguments" => out.serialize(t.arguments),
                    _ => unknown(&["name", "arguments"]),
                }
            }
            "result" => match self.event.result.as_ref().and_then(|r| r.get(key)) {
                Some(v) => out.serialize(v),
                None => Ok(()),
            },
            SETTINGS_ROOT => {
                let settings = self.current_settings();
                match settings.get(key) {
                    Some(v) => out.serialize(v),
                    None if settings.is_empty() => Err(mlua::Error::RuntimeError(format!(
                        "`settings.{key}`: this rule's plugin declares no settings"
                    ))),
                    None => {
                        let names: Vec<&str> = settings.keys().copied().collect();
                        unknown(&names)
                    }
                }
            }
            _ => Ok(()),
        }
    }

    fn result_value(&self, lua: &mlua::Lua) -> mlua::Result<Option<mlua::Value>> {
        use mlua::LuaSerdeExt;
        match &self.event.result {
            // Only objects are read lazily; a list or a plain value is converted whole.
            Some(r) if !r.is_object() => lua
                .to_value_with(
                    r,
                    mlua::serde::SerializeOptions::new()
                        .serialize_none_to_null(false)
                        .serialize_unit_to_null(false)
                        .set_array_metatable(false),
                )
                .map(Some),
            _ => Ok(None),
        }
    }

    fn has_result(&self) -> bool {
        self.event.result.as_ref().is_some_and(|r| r.is_object())
    }

    fn has_tool(&self) -> bool {
        self.hook.is_tool_hook() && self.event.tool.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_expr::{CompileOptions, Compiler};

    #[test]
    fn the_schema_is_consistent() {
        let compiler = Compiler::new(schema().clone());
        // Every documented path checks, and every helper body compiles.
        for (path, doc) in schema().paths() {
            assert!(!doc.is_empty(), "{path} has no documentation");
            compiler
                .check(&path, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        for h in schema().helpers() {
            let args = h.params().iter().map(|_| "'x'").collect::<Vec<_>>();
            let args = if h.name().ends_with("threshold") {
                vec!["0.5"]
            } else {
                args
            };
            let call = format!("{}({})", h.name(), args.join(", "));
            let ty = compiler.check(&call, &CompileOptions::default());
            assert!(ty.is_ok(), "{call}: {ty:?}");
        }
    }

    #[test]
    fn hook_availability_is_explained() {
        let compiler = Compiler::new(schema().clone());
        let opts = CompileOptions {
            unavailable: unavailable(Hook::OnTurnStart),
            force_script: false,
        };
        let err = compiler.compile("tool.name == 'x'", &opts).unwrap_err();
        assert!(err.message().contains("only the tool hooks"), "{err}");
        // tool_completed works on any hook: it reads the event, not `tool`.
        compiler
            .compile("tool_completed('vault_search')", &opts)
            .unwrap();
    }
}
