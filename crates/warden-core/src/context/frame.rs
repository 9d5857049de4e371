//! The frame a tick reads: the bridge from a session's facts to the expression engine, to
//! templates and to Lua scripts.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use warden_expr::rhai::Dynamic;
use warden_expr::{MapId, ScalarId};
use warden_load::{Hook, SettingValue};

use crate::context::schema::{SETTINGS_BASE, SETTINGS_ROOT, STATE_ROOT, field_names, id};
use crate::context::state::{StateReader, StateSource};
use crate::event::Event;
use crate::facts::{SessionFacts, ToolRecord};
use crate::slots::SettingSlots;

/// The frozen frame of one tick, as conditions, templates and scripts read it. A tick builds
/// one: the session's facts after the event, the mode, the plugin state read once per plugin,
/// the settings in force. The mode is set once detected; the hook and the event are those of
/// the step that runs (Warden's own `on_mode_change`, then the hook reported).
pub(crate) struct Frame<'a> {
    pub facts: &'a SessionFacts,
    hook: Cell<Hook>,
    event: Cell<&'a Event>,
    mode: Cell<&'a Arc<str>>,
    pub time: f64,
    pub state: StateReader<'a>,
    /// The plugin whose state `context.state` shows (set before each rule; none before the
    /// first, when a mode's condition has no plugin).
    pub plugin: RefCell<Option<Arc<str>>>,
    /// A state read failure seen while evaluating, reported against the rule.
    pub state_error: Cell<bool>,
    /// The program's setting slots, and their values for this session.
    pub slots: &'a SettingSlots,
    pub settings: &'a [SettingValue],
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

/// The history, with the specification's `tool_count` shorthand, and each tool record with
/// `timestamp`, the data model's name for its `time`.
#[derive(Serialize)]
struct HistoryView<'a> {
    messages: &'a std::collections::VecDeque<crate::facts::MessageRecord>,
    #[serde(serialize_with = "tool_records")]
    tools: &'a std::collections::VecDeque<ToolRecord>,
    failures: &'a BTreeMap<String, u32>,
    calls: &'a BTreeMap<String, u32>,
    counts: &'a crate::facts::Counts,
    tool_count: u32,
}

/// A tool record as rules read it: its fields, and `timestamp` (the same as `time`).
#[derive(Serialize)]
struct ToolRecordView<'a> {
    #[serde(flatten)]
    record: &'a ToolRecord,
    timestamp: f64,
}

fn tool_records<S: serde::Serializer>(
    tools: &&std::collections::VecDeque<ToolRecord>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(tools.iter().map(|record| ToolRecordView {
        record,
        timestamp: record.time,
    }))
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

impl<'a> Frame<'a> {
    /// The frame of a tick at `hook`, on `event`, in `mode` until the mode is detected.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        facts: &'a SessionFacts,
        hook: Hook,
        event: &'a Event,
        mode: &'a Arc<str>,
        time: f64,
        store: &'a dyn StateSource,
        slots: &'a SettingSlots,
        settings: &'a [SettingValue],
    ) -> Self {
        Frame {
            facts,
            hook: Cell::new(hook),
            event: Cell::new(event),
            mode: Cell::new(mode),
            time,
            state: StateReader::new(store, &facts.user.id, &facts.project.id),
            plugin: RefCell::new(None),
            state_error: Cell::new(false),
            slots,
            settings,
        }
    }

    /// The hook of the step that runs.
    pub(crate) fn hook(&self) -> Hook {
        self.hook.get()
    }

    /// The event of the step that runs.
    pub(crate) fn event(&self) -> &'a Event {
        self.event.get()
    }

    /// The active mode.
    pub(crate) fn mode(&self) -> &'a Arc<str> {
        self.mode.get()
    }

    /// The mode detected for this tick.
    pub(crate) fn set_mode(&self, mode: &'a Arc<str>) {
        self.mode.set(mode);
    }

    /// Runs what follows as the step of `hook` on `event` (Warden's own `on_mode_change`).
    pub(crate) fn set_step(&self, hook: Hook, event: &'a Event) {
        self.hook.set(hook);
        self.event.set(event);
    }

    fn tool_name(&self) -> &str {
        self.event().tool.as_ref().map_or("", |t| t.name.as_str())
    }

    fn context_view<'s>(&'s self, state: Option<&'s BTreeMap<String, Value>>) -> ContextView<'s> {
        let f = self.facts;
        ContextView {
            turn: &f.turn,
            history: HistoryView {
                messages: &f.history.messages,
                tools: &f.history.tools,
                failures: &f.history.failures,
                calls: &f.history.calls,
                counts: &f.history.counts,
                tool_count: f.history.counts.tool_calls,
            },
            user: &f.user,
            project: &f.project,
            query: &f.query,
            mode: self.mode(),
            state,
            token_usage: f.turn.token_usage,
        }
    }

    fn event_view(&self) -> EventView<'_> {
        EventView {
            hook: self.hook().name(),
            tool_name: self.tool_name(),
            query: self.event().query.as_ref(),
            message: self.event().message.as_ref(),
            error: self.event().error.as_deref(),
            data: self.event().data.as_ref(),
            time: self.time,
        }
    }

    /// The tool of this event. Its arguments are the event's, or, when this event did not
    /// repeat them (a completion reported after its call), those of the call it completes.
    fn tool_view(&self) -> ToolView<'_> {
        let name = self.tool_name();
        let arguments = match self.event().tool.as_ref().map(|t| &t.arguments) {
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
        let Some(plugin) = self.plugin.borrow().clone() else {
            return Arc::default();
        };
        match self.state.get(&plugin) {
            Ok(s) => s,
            Err(_) => {
                self.state_error.set(true);
                Arc::default()
            }
        }
    }

    /// The current plugin's settings, by name.
    fn current_settings(&self) -> BTreeMap<&str, &SettingValue> {
        let plugin = self.plugin.borrow();
        self.slots
            .of(plugin.as_deref().unwrap_or_default())
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
            result => minijinja::Value::from(Serde(self.event().result.as_ref().unwrap_or(&NULL))),
            token_usage => self.facts.turn.token_usage,
            turn_number => self.facts.turn.number,
        }
    }
}

/// A setting's value as the expression engine reads it.
fn setting_scalar(value: &SettingValue) -> warden_expr::Scalar<'_> {
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

impl warden_expr::Facts for Frame<'_> {
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
            id::TURN_FINAL => S::Bool(f.turn.is_final),
            id::PROJECT_ROOT => S::Str(&f.project.root),
            id::COUNT_TURNS => S::Int(f.history.counts.turns.into()),
            id::COUNT_QUERIES => S::Int(f.history.counts.queries.into()),
            id::COUNT_TOOL_CALLS => S::Int(f.history.counts.tool_calls.into()),
            id::COUNT_TOOL_FAILURES => S::Int(f.history.counts.tool_failures.into()),
            id::COUNT_MESSAGES => S::Int(f.history.counts.messages.into()),
            id::USER_ID => S::Str(&f.user.id),
            id::PROJECT_ID => S::Str(&f.project.id),
            id::QUERY => S::Str(&f.query),
            id::MODE => S::Str(self.mode()),
            id::EVENT_HOOK => S::Str(self.hook().name()),
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
            "result" => dynamic(self.event().result.as_ref().unwrap_or(&NULL)),
            STATE_ROOT => dynamic(&*self.current_state()),
            SETTINGS_ROOT => dynamic(&self.current_settings()),
            _ => Dynamic::UNIT,
        }
    }
}

/// What a script reads: the same frame, handed to Lua one field at a time.
impl warden_lua::Host for Frame<'_> {
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
                        Value::Boolean(f.turn.is_final),
                    ],
                ),
                "history" => out.serialize(&self.context_view(None).history),
                "user" => out.serialize(&f.user),
                "project" => out.serialize(&f.project),
                "state" => out.serialize(&*self.current_state()),
                "query" => out.value(f.query.as_str()),
                "mode" => out.value(&**self.mode()),
                "token_usage" => out.value(f.turn.token_usage),
                _ => unknown(&field_names("context")),
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
                    _ => unknown(&field_names("event")),
                }
            }
            "tool" => {
                let t = self.tool_view();
                match key {
                    "name" => out.value(t.name),
                    "arguments" => out.serialize(t.arguments),
                    _ => unknown(&field_names("tool")),
                }
            }
            "result" => match self.event().result.as_ref().and_then(|r| r.get(key)) {
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
        match &self.event().result {
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
        self.event().result.as_ref().is_some_and(|r| r.is_object())
    }

    fn has_tool(&self) -> bool {
        self.hook().is_tool_hook() && self.event().tool.is_some()
    }
}
