//! The frame a tick reads: the bridge from a session's facts to the expression engine, to
//! templates and to Lua scripts. Each reads what it needs where it stands, and nothing else:
//! conditions the paths they name (`Facts::value`), templates through views that fetch a field
//! when it is read (`views.rs`), scripts one field at a time; plugin state by key.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use warden_expr::rhai::Dynamic;
use warden_expr::{MapId, ScalarId};
use warden_load::{Hook, SettingValue};

use crate::context::shell::{self, LazyShell, ShellView};
use crate::context::state::{Snapshot, StateReader, StateSource};
use crate::context::views;
use crate::event::{Event, TURN_FIELDS, ToolField, TurnField};
use crate::facts::{SessionFacts, ToolRecord};
use crate::schema::{
    SESSION_STATE_ROOT, SETTINGS_BASE, SETTINGS_ROOT, STATE_ROOT, field_names, id,
};
use crate::slots::SettingSlots;

/// The frozen frame of one tick, as conditions, templates and scripts read it. A tick builds
/// one: the session's facts after the event, the mode, the plugin state read by key, the
/// settings in force. The mode is set once detected; the hook and the event are those of the
/// step that runs (Warden's own `on_mode_change`, then the hook reported).
pub struct Frame<'a> {
    /// The session's facts after the event.
    pub facts: &'a Arc<SessionFacts>,
    hook: Cell<Hook>,
    event: Cell<&'a Arc<Event>>,
    mode: Cell<&'a Arc<str>>,
    /// The tick's time, in seconds.
    pub time: f64,
    /// Plugin state, read by key when a rule reads it.
    pub state: StateReader<'a>,
    /// The plugin whose state `context.state` shows (set before each rule; none before the
    /// first, when a mode's condition has no plugin).
    pub plugin: RefCell<Option<Arc<str>>>,
    /// A state read failure seen while evaluating, reported against the rule.
    pub state_error: Cell<bool>,
    /// The program's setting slots, and their values for this session.
    pub slots: &'a SettingSlots,
    pub(crate) settings: &'a [SettingValue],
    /// The values templates render with, for the plugin they were made for (made once per
    /// plugin per step: they are views, which read the frame when a template reads them).
    template: RefCell<Option<(Arc<str>, minijinja::Value)>>,
    /// The tools whose command `tool.shell` analyzes.
    shell_tools: &'a warden_load::ShellTools,
    /// `tool.shell` of the step's event, made when first read.
    shell: RefCell<Option<(*const Event, Arc<LazyShell>)>>,
}

/// `context` as a whole, for a condition that reads it whole.
#[derive(Serialize)]
struct ContextView<'a> {
    turn: &'a crate::facts::TurnState,
    history: HistoryView<'a>,
    user: &'a crate::facts::Identity,
    project: &'a crate::facts::Identity,
    query: &'a str,
    mode: &'a str,
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

/// The tool records alone, as rules read them.
struct ToolList<'a>(&'a std::collections::VecDeque<ToolRecord>);

impl Serialize for ToolList<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        tool_records(&self.0, s)
    }
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
    shell: ShellView<'a>,
}

static NULL: Value = Value::Null;

impl<'a> Frame<'a> {
    /// The frame of a tick at `hook`, on `event`, in `mode` until the mode is detected.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        facts: &'a Arc<SessionFacts>,
        hook: Hook,
        event: &'a Arc<Event>,
        mode: &'a Arc<str>,
        time: f64,
        store: &'a dyn StateSource,
        slots: &'a SettingSlots,
        settings: &'a [SettingValue],
        shell_tools: &'a warden_load::ShellTools,
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
            template: RefCell::new(None),
            shell_tools,
            shell: RefCell::new(None),
        }
    }

    /// The hook of the step that runs.
    pub fn hook(&self) -> Hook {
        self.hook.get()
    }

    /// The event of the step that runs.
    pub fn event(&self) -> &'a Event {
        self.event.get()
    }

    /// The active mode.
    pub fn mode(&self) -> &'a Arc<str> {
        self.mode.get()
    }

    /// The mode detected for this tick.
    pub fn set_mode(&self, mode: &'a Arc<str>) {
        self.mode.set(mode);
        self.template.take();
    }

    /// Runs what follows as the step of `hook` on `event` (Warden's own `on_mode_change`).
    pub fn set_step(&self, hook: Hook, event: &'a Arc<Event>) {
        self.hook.set(hook);
        self.event.set(event);
        self.template.take();
    }

    fn tool_name(&self) -> &str {
        self.event().tool.as_ref().map_or("", |t| t.name.as_str())
    }

    fn context_view(&self) -> ContextView<'_> {
        let f = &**self.facts;
        ContextView {
            turn: &f.turn,
            history: self.history_view(),
            user: &f.user,
            project: &f.project,
            query: &f.query,
            mode: self.mode(),
            token_usage: f.turn.token_usage,
        }
    }

    fn history_view(&self) -> HistoryView<'_> {
        let h = &self.facts.history;
        HistoryView {
            messages: &h.messages,
            tools: &h.tools,
            failures: &h.failures,
            calls: &h.calls,
            counts: &h.counts,
            tool_count: h.counts.tool_calls,
        }
    }

    fn event_view(&self) -> EventView<'_> {
        EventView {
            hook: self.hook().name(),
            tool_name: self.tool_name(),
            query: self.event().query.as_deref(),
            message: self.event().message.as_ref(),
            error: self.event().error.as_deref(),
            data: self.event().data.as_ref(),
            time: self.time,
        }
    }

    /// `tool.shell` of the step's event (made once per event; analyzed when first read).
    pub(crate) fn shell(&self) -> Arc<LazyShell> {
        let event: *const Event = self.event();
        let mut cell = self.shell.borrow_mut();
        match &*cell {
            Some((e, lazy)) if *e == event => lazy.clone(),
            _ => {
                let lazy = shell::lazy(
                    self.shell_tools,
                    self.tool_name(),
                    views::tool_arguments(self.facts, self.event()),
                    &self.facts.project.root,
                );
                *cell = Some((event, lazy.clone()));
                lazy
            }
        }
    }

    fn with_tool_view<R>(&self, f: impl FnOnce(&ToolView<'_>) -> R) -> R {
        let shell = self.shell();
        f(&ToolView {
            name: self.tool_name(),
            arguments: views::tool_arguments(self.facts, self.event()),
            shell: ShellView::of(shell.get()),
        })
    }

    /// The plugin of the rule being evaluated.
    fn current_plugin(&self) -> Option<Arc<str>> {
        self.plugin.borrow().clone()
    }

    /// Reads `key` of the current plugin's state into `f` (`None`: not set, or no plugin); a
    /// failure is remembered so the rule reports it, and reads as not set.
    fn state_key<R>(&self, key: &str, f: impl FnOnce(Option<&Value>) -> R) -> R {
        let Some(plugin) = self.current_plugin() else {
            return f(None);
        };
        self.state.key(&plugin, key, |read| match read {
            Ok(v) => f(v),
            Err(_) => {
                self.state_error.set(true);
                f(None)
            }
        })
    }

    /// Reads the whole of the current plugin's state into `f` (empty when there is no plugin,
    /// or when it could not be read: the failure is remembered so the rule reports it).
    fn state_all<R>(&self, f: impl FnOnce(&BTreeMap<String, Value>) -> R) -> R {
        static EMPTY: BTreeMap<String, Value> = BTreeMap::new();
        let Some(plugin) = self.current_plugin() else {
            return f(&EMPTY);
        };
        self.state.all(&plugin, |read| match read {
            Ok(all) => f(all),
            Err(_) => {
                self.state_error.set(true);
                f(&EMPTY)
            }
        })
    }

    /// The current plugin's state of this session (empty when it has none, or there is no
    /// plugin).
    fn session_state(&self) -> &serde_json::Map<String, Value> {
        static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> =
            std::sync::OnceLock::new();
        let plugin = self.plugin.borrow();
        plugin
            .as_deref()
            .and_then(|p| self.facts.session_state.get(p))
            .unwrap_or_else(|| EMPTY.get_or_init(serde_json::Map::new))
    }

    /// The current plugin's settings, by name.
    fn current_settings(&self) -> BTreeMap<&str, &SettingValue> {
        let plugin = self.plugin.borrow();
        self.slots
            .of(plugin.as_deref().unwrap_or_default())
            .filter_map(|i| Some((self.slots.slots[i].def.name.as_str(), self.settings.get(i)?)))
            .collect()
    }

    /// The current plugin's settings with their definitions, sorted by name.
    fn plugin_settings(&self) -> Vec<(Arc<warden_load::SettingDef>, SettingValue)> {
        let plugin = self.plugin.borrow();
        let mut settings: Vec<_> = self
            .slots
            .of(plugin.as_deref().unwrap_or_default())
            .filter_map(|i| {
                Some((
                    self.slots.slots[i].def.clone(),
                    self.settings.get(i)?.clone(),
                ))
            })
            .collect();
        settings.sort_by(|a, b| a.0.name.cmp(&b.0.name));
        settings
    }

    /// The values a template renders with: `context` (with `state`), `event`, `tool`,
    /// `result`, `settings`, as views that read the frame when the template reads them. Made
    /// once per plugin per step.
    pub(crate) fn template_values(&self) -> minijinja::Value {
        let plugin = self.current_plugin();
        let key: Arc<str> = plugin.clone().unwrap_or_else(|| Arc::from(""));
        if let Some((p, v)) = &*self.template.borrow()
            && *p == key
        {
            return v.clone();
        }
        let state = match &plugin {
            Some(p) => self.state.snapshot(p),
            None => Arc::new(Mutex::new(Snapshot::empty())),
        };
        let values = views::root(views::Root {
            plugin,
            facts: self.facts.clone(),
            event: self.event.get().clone(),
            hook: self.hook(),
            mode: self.mode().clone(),
            time: self.time,
            settings: self.plugin_settings(),
            state,
            shell: self.shell(),
        });
        *self.template.borrow_mut() = Some((key, values.clone()));
        values
    }

    /// What templates render with, in this frame (see [`crate::template::Values`]).
    pub fn template_context(&self) -> TemplateContext<'_, 'a> {
        TemplateContext { frame: self }
    }
}

/// What templates render with: the frame's views; after a render that read plugin state the
/// tick had not read yet, that state is read and the template rendered again.
pub struct TemplateContext<'f, 'a> {
    frame: &'f Frame<'a>,
}

impl crate::template::Values for TemplateContext<'_, '_> {
    fn values(&mut self) -> minijinja::Value {
        self.frame.template_values()
    }

    fn again(&mut self) -> bool {
        let Some(plugin) = self.frame.current_plugin() else {
            return false;
        };
        let again = self.frame.state.refetch(&plugin);
        if self.frame.state.take_failed_read(&plugin) {
            self.frame.state_error.set(true);
        }
        again
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

fn dynamic<T: Serialize + ?Sized>(value: &T) -> Dynamic {
    warden_expr::rhai::serde::to_dynamic(value).unwrap_or(Dynamic::UNIT)
}

impl warden_expr::Facts for Frame<'_> {
    fn scalar(&self, sid: ScalarId) -> warden_expr::Scalar<'_> {
        use warden_expr::Scalar as S;
        let f = &**self.facts;
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
            id::SHELL_DESTROYS => S::Bool(self.shell().get().destroys()),
            id::SHELL_DELETES_OUTSIDE => S::Bool(self.shell().get().deletes_outside_project()),
            id::SHELL_WRITES_OUTSIDE => S::Bool(self.shell().get().writes_outside_project()),
            id::SHELL_UNSEEN_CODE => S::Bool(self.shell().get().runs_unseen_code()),
            id::SHELL_BEYOND_PROJECT => S::Bool(self.shell().get().reaches_beyond_project()),
            id::SHELL_TOUCHES_WARDEN => S::Bool(self.shell().get().touches_warden()),
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
            "context" => dynamic(&self.context_view()),
            "event" => dynamic(&self.event_view()),
            "tool" => self.with_tool_view(|t| dynamic(t)),
            "result" => dynamic(self.event().result.as_ref().unwrap_or(&NULL)),
            STATE_ROOT => self.state_all(dynamic),
            SESSION_STATE_ROOT => dynamic(self.session_state()),
            SETTINGS_ROOT => dynamic(&self.current_settings()),
            _ => Dynamic::UNIT,
        }
    }

    /// The value a condition reads, converted where it stands: each part exactly as it is
    /// within the whole root (`root`), and maps read by key hold just those keys.
    fn value(&self, path: &[&str], keys: Option<&[&str]>) -> Dynamic {
        let f = &**self.facts;
        match path {
            ["context", "turn", field] => {
                let t = &f.turn;
                match TurnField::named(field) {
                    Some(TurnField::Number) => dynamic(&t.number),
                    Some(TurnField::TokenUsage) => dynamic(&t.token_usage),
                    Some(TurnField::ContextUsage) => dynamic(&t.context_usage),
                    Some(TurnField::IterationCount) => dynamic(&t.iteration_count),
                    Some(TurnField::MaxIterations) => dynamic(&t.max_iterations),
                    Some(TurnField::ContextWindow) => dynamic(&t.context_window),
                    Some(TurnField::Final) => dynamic(&t.is_final),
                    None => self.walk(path),
                }
            }
            ["context", "turn"] => dynamic(&f.turn),
            ["context", "history", "tools"] => dynamic(&ToolList(&f.history.tools)),
            ["context", "history", "messages"] => dynamic(&f.history.messages),
            ["context", "history", "failures"] => {
                keyed_map(&f.history.failures, |k| f.history.failures.get(k), keys)
            }
            ["context", "history", "calls"] => {
                keyed_map(&f.history.calls, |k| f.history.calls.get(k), keys)
            }
            ["context", "history", "counts", field] => {
                let c = &f.history.counts;
                match *field {
                    "turns" => dynamic(&c.turns),
                    "queries" => dynamic(&c.queries),
                    "tool_calls" => dynamic(&c.tool_calls),
                    "tool_failures" => dynamic(&c.tool_failures),
                    "messages" => dynamic(&c.messages),
                    _ => self.walk(path),
                }
            }
            ["context", "history", "counts"] => dynamic(&f.history.counts),
            ["context", "history"] => dynamic(&self.history_view()),
            ["context", who @ ("user" | "project"), rest @ ..] => {
                let who = if *who == "user" { &f.user } else { &f.project };
                match rest {
                    [] => dynamic(who),
                    ["id"] => dynamic(&who.id),
                    ["root"] => dynamic(&who.root),
                    ["settings"] => keyed_map(&who.settings, |k| who.settings.get(k), keys),
                    _ => self.walk(path),
                }
            }
            ["context", "query"] => dynamic(&f.query),
            ["context", "mode"] => dynamic(&**self.mode()),
            ["context"] => dynamic(&self.context_view()),
            ["event", field] => {
                let e = self.event_view();
                match *field {
                    "hook" => dynamic(&e.hook),
                    "tool_name" => dynamic(&e.tool_name),
                    "query" => dynamic(&e.query),
                    "message" => dynamic(&e.message),
                    "error" => dynamic(&e.error),
                    "data" => keyed(e.data.unwrap_or(&NULL), keys),
                    "time" => dynamic(&e.time),
                    _ => self.walk(path),
                }
            }
            ["tool", "name"] => dynamic(&self.tool_name()),
            ["tool", "arguments"] => keyed(views::tool_arguments(self.facts, self.event()), keys),
            ["tool", "shell", rest @ ..] => {
                let shell = self.shell();
                // Only the field read is converted, when one is named.
                let (mut v, rest) = match rest.split_first() {
                    Some((first, rest)) => (
                        ShellView::field(shell.get(), first).unwrap_or(Dynamic::UNIT),
                        rest,
                    ),
                    None => (dynamic(&ShellView::of(shell.get())), rest),
                };
                for f in rest {
                    let next = v
                        .read_lock::<warden_expr::rhai::Map>()
                        .and_then(|m| m.get(*f).cloned())
                        .unwrap_or(Dynamic::UNIT);
                    v = next;
                }
                v
            }
            ["result"] => keyed(self.event().result.as_ref().unwrap_or(&NULL), keys),
            [STATE_ROOT] => match keys {
                Some(keys) => {
                    let mut out = warden_expr::rhai::Map::new();
                    for k in keys {
                        if let Some(v) = self.state_key(k, |v| v.map(dynamic)) {
                            out.insert((*k).into(), v);
                        }
                    }
                    Dynamic::from_map(out)
                }
                None => self.state_all(dynamic),
            },
            [SESSION_STATE_ROOT] => {
                let m = self.session_state();
                keyed_map(m, |k| m.get(k), keys)
            }
            [SETTINGS_ROOT] => match keys {
                Some(keys) => {
                    let mut settings = self.current_settings();
                    settings.retain(|name, _| keys.contains(name));
                    dynamic(&settings)
                }
                None => dynamic(&self.current_settings()),
            },
            [SETTINGS_ROOT, name] => self
                .current_settings()
                .get(name)
                .map_or(Dynamic::UNIT, dynamic),
            _ => self.walk(path),
        }
    }

    /// Scalars of free-form data for the fast path: the tool result, the tool's arguments,
    /// the event's data, users' and projects' settings, plugin state.
    fn data(&self, path: &[&str], keys: &[&str]) -> warden_expr::Data<'_> {
        use warden_expr::Data;
        match path {
            ["result"] => json_data_at(self.event().result.as_ref().unwrap_or(&NULL), keys),
            ["tool", "arguments"] => {
                json_data_at(views::tool_arguments(self.facts, self.event()), keys)
            }
            ["event", "data"] => json_data_at(self.event().data.as_ref().unwrap_or(&NULL), keys),
            ["context", "user", "settings"] => map_data(&self.facts.user.settings, keys),
            ["context", "project", "settings"] => map_data(&self.facts.project.settings, keys),
            [SESSION_STATE_ROOT] => map_data(self.session_state(), keys),
            [STATE_ROOT] => {
                let Some((first, rest)) = keys.split_first() else {
                    return Data::Other;
                };
                // Read from the tick's snapshot, which cannot lend text out: numbers, booleans
                // and null take the fast path, text the script engine.
                self.state_key(first, |v| match v {
                    None if rest.is_empty() => Data::Missing,
                    None => Data::Other,
                    Some(v) => match (json_data_at(v, rest), rest.is_empty()) {
                        (Data::Scalar(s), _) => match s {
                            warden_expr::Scalar::Str(_) => Data::Other,
                            warden_expr::Scalar::Null => Data::Scalar(warden_expr::Scalar::Null),
                            warden_expr::Scalar::Bool(b) => {
                                Data::Scalar(warden_expr::Scalar::Bool(b))
                            }
                            warden_expr::Scalar::Int(n) => {
                                Data::Scalar(warden_expr::Scalar::Int(n))
                            }
                            warden_expr::Scalar::Float(x) => {
                                Data::Scalar(warden_expr::Scalar::Float(x))
                            }
                        },
                        (Data::Missing, false) => Data::Missing,
                        _ => Data::Other,
                    },
                })
            }
            _ => Data::Other,
        }
    }
}

impl Frame<'_> {
    /// The value at `path`, walked down from its whole root (for paths `value` does not know).
    fn walk(&self, path: &[&str]) -> Dynamic {
        let Some((root, fields)) = path.split_first() else {
            return Dynamic::UNIT;
        };
        let mut v = warden_expr::Facts::root(self, root);
        for f in fields {
            let next = v
                .read_lock::<warden_expr::rhai::Map>()
                .and_then(|m| m.get(*f).cloned())
                .unwrap_or(Dynamic::UNIT);
            v = next;
        }
        v
    }
}

/// A free-form value for a condition that reads `keys` of it (all when `None`).
fn keyed(v: &Value, keys: Option<&[&str]>) -> Dynamic {
    match (keys, v) {
        (Some(keys), Value::Object(m)) => keyed_map(m, |k| m.get(k), Some(keys)),
        _ => dynamic(v),
    }
}

/// A map for a condition that reads `keys` of it (all when `None`): a map with many entries
/// (a session that has seen many tools, many settings) costs such a condition nothing more.
fn keyed_map<'m, M: Serialize + ?Sized, V: Serialize + 'm>(
    m: &'m M,
    get: impl Fn(&str) -> Option<&'m V>,
    keys: Option<&[&str]>,
) -> Dynamic {
    let Some(keys) = keys else {
        return dynamic(m);
    };
    let mut out = warden_expr::rhai::Map::new();
    for k in keys {
        if let Some(v) = get(k) {
            out.insert((*k).into(), dynamic(v));
        }
    }
    Dynamic::from_map(out)
}

fn map_data<'v>(m: &'v serde_json::Map<String, Value>, keys: &[&str]) -> warden_expr::Data<'v> {
    use warden_expr::Data;
    match keys.split_first() {
        Some((first, rest)) => match m.get(*first) {
            Some(v) => json_data_at(v, rest),
            None if rest.is_empty() => Data::Missing,
            None => Data::Other,
        },
        None => Data::Other,
    }
}

/// The scalar at `keys` within `v` (see [`warden_expr::Facts::data`]).
fn json_data_at<'v>(mut v: &'v Value, keys: &[&str]) -> warden_expr::Data<'v> {
    use warden_expr::{Data, Scalar as S};
    if let Some((last, init)) = keys.split_last() {
        for k in init {
            match v.as_object().and_then(|m| m.get(*k)) {
                Some(x) => v = x,
                None => return Data::Other,
            }
        }
        v = match v.as_object() {
            Some(m) => match m.get(*last) {
                Some(x) => x,
                None => return Data::Missing,
            },
            None => return Data::Other,
        };
    }
    // As the script engine converts JSON: integers beyond i64 become floats.
    Data::Scalar(match v {
        Value::Null => S::Null,
        Value::Bool(b) => S::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => S::Int(i),
            (None, Some(u), _) => S::Float(u as f64),
            (_, _, Some(x)) => S::Float(x),
            _ => return Data::Other,
        },
        Value::String(s) => S::Str(s),
        Value::Array(_) | Value::Object(_) => return Data::Other,
    })
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
        let f = &**self.facts;
        match root {
            "context" => match key {
                "turn" => out.record(
                    &TURN_FIELDS,
                    &TurnField::ALL.map(|field| match field {
                        TurnField::Number => Value::Integer(f.turn.number.into()),
                        TurnField::TokenUsage => Value::Number(f.turn.token_usage),
                        TurnField::ContextUsage => Value::Number(f.turn.context_usage),
                        TurnField::IterationCount => Value::Integer(f.turn.iteration_count.into()),
                        TurnField::MaxIterations => Value::Integer(f.turn.max_iterations.into()),
                        TurnField::ContextWindow => {
                            Value::Integer(i64::try_from(f.turn.context_window).unwrap_or(i64::MAX))
                        }
                        TurnField::Final => Value::Boolean(f.turn.is_final),
                    }),
                ),
                "history" => out.serialize(&self.history_view()),
                "user" => out.serialize(&f.user),
                "project" => out.serialize(&f.project),
                "state" => self.state_all(|all| out.serialize(all)),
                "session_state" => out.serialize(self.session_state()),
                "query" => out.text(f.query.as_str()),
                "mode" => out.text(self.mode()),
                "token_usage" => out.value(f.turn.token_usage),
                _ => unknown(&field_names("context")),
            },
            "event" => {
                let e = self.event_view();
                match key {
                    "hook" => out.text(e.hook),
                    "tool_name" => out.text(e.tool_name),
                    "query" => out.serialize(&e.query),
                    "message" => out.serialize(&e.message),
                    "error" => out.serialize(&e.error),
                    "data" => out.serialize(&e.data),
                    "time" => out.value(e.time),
                    _ => unknown(&field_names("event")),
                }
            }
            "tool" => match ToolField::named(key) {
                Some(ToolField::Name) => out.text(self.tool_name()),
                Some(ToolField::Arguments) => {
                    out.serialize(views::tool_arguments(self.facts, self.event()))
                }
                None if key == "shell" => out.serialize(&ShellView::of(self.shell().get())),
                None => unknown(&field_names("tool")),
            },
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

    fn shape(&self) -> warden_lua::Shape {
        let event = self.event();
        warden_lua::Shape {
            tool: self.hook().is_tool_hook() && event.tool.is_some(),
            result: match &event.result {
                None => warden_lua::ResultShape::None,
                Some(r) if r.is_object() => warden_lua::ResultShape::Table,
                Some(_) => warden_lua::ResultShape::Plain,
            },
        }
    }
}
