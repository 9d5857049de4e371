//! What templates read: the frame seen through minijinja objects that fetch a field when the
//! template reads it. Nothing is converted until it is read, and reading the history (even
//! iterating it) copies nothing of it: a view holds the session's facts (`Arc<SessionFacts>`)
//! and the event (`Arc<Event>`), and answers from them.
//!
//! The views answer exactly as the values they replace did (serde's conversion of the same
//! structs into minijinja values): a struct's fields enumerate in their declared order; a map
//! (the history, counts per tool, JSON objects, plugin state) enumerates its keys sorted; a leaf
//! is converted by `Value::from_serialize`, as before. A test renders templates both ways.

use std::fmt;
use std::sync::{Arc, Mutex};

use minijinja::value::{Enumerator, Object, ObjectExt, ObjectRepr, Serde, Value};
use serde_json::Value as Json;
use warden_load::{Hook, SettingDef, SettingValue};

use crate::context::shell::{LazyShell, ShellView};
use crate::context::state::{Known, Snapshot, lock};
use crate::event::{Event, TOOL_FIELDS, TURN_FIELDS, ToolField, TurnField};
use crate::facts::SessionFacts;

/// The fields of a record view, and how it reads one.
trait Fields: Send + Sync + 'static {
    /// The keys in the order the record enumerates them.
    const KEYS: &'static [&'static str];
    /// What the record calls itself in debug output.
    const NAME: &'static str;
    fn field(&self, key: &str) -> Option<Value>;
}

/// A record view: a fixed set of fields, enumerated in [`Fields::KEYS`] order.
struct Record<T>(T);

impl<T: Fields> fmt::Debug for Record<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::NAME)
    }
}

impl<T: Fields> Object for Record<T> {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.0.field(key.as_str()?)
    }

    fn get_value_by_str(self: &Arc<Self>, key: &str) -> Option<Value> {
        self.0.field(key)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(T::KEYS)
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(T::KEYS.len())
    }
}

fn record<T: Fields>(fields: T) -> Value {
    Value::from_object(Record(fields))
}

/// A value converted as serde converts it (how the values the views replace were made).
fn ser<T: serde::Serialize>(v: T) -> Value {
    Value::from(Serde(v))
}

fn json(v: &Json) -> Value {
    ser(v)
}

fn uint(n: impl Into<u64>) -> Value {
    Value::from(n.into())
}

/// The values a template renders with (see [`crate::context::Frame::template_values`]).
pub(crate) struct Root {
    /// The rule's plugin (none for a mode's condition).
    pub plugin: Option<Arc<str>>,
    pub facts: Arc<SessionFacts>,
    pub event: Arc<Event>,
    pub hook: Hook,
    pub mode: Arc<str>,
    pub time: f64,
    /// The rule's plugin settings: each one's definition and value, sorted by name.
    pub settings: Vec<(Arc<SettingDef>, SettingValue)>,
    /// The rule's plugin state, as the tick has read it.
    pub state: Arc<Mutex<Snapshot>>,
    /// `tool.shell`, analyzed when first read.
    pub shell: Arc<LazyShell>,
}

impl Root {
    fn tool_name(&self) -> &str {
        self.event.tool.as_ref().map_or("", |t| t.name.as_str())
    }
}

impl Fields for Arc<Root> {
    const KEYS: &'static [&'static str] = &[
        "settings",
        "context",
        "event",
        "tool",
        "result",
        "token_usage",
        "turn_number",
    ];
    const NAME: &'static str = "template values";

    fn field(&self, key: &str) -> Option<Value> {
        Some(match key {
            "settings" => Value::from_object(Settings(self.clone())),
            "context" => record(Context(self.clone())),
            "event" => record(EventView(self.clone())),
            "tool" => record(ToolView(self.clone())),
            "result" => match &self.event.result {
                Some(Json::Object(_)) => Value::from_object(ResultView(self.event.clone())),
                Some(other) => json(other),
                None => Value::from(()),
            },
            "token_usage" => Value::from(self.facts.turn.token_usage),
            "turn_number" => uint(self.facts.turn.number),
            _ => return None,
        })
    }
}

/// Builds the root value of a template render.
pub(crate) fn root(root: Root) -> Value {
    record(Arc::new(root))
}

/// `settings`: the rule's plugin settings, by name (a map, its keys sorted).
struct Settings(Arc<Root>);

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("settings")
    }
}

impl Object for Settings {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        let (_, value) = self.0.settings.iter().find(|(def, _)| def.name == key)?;
        Some(ser(value))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_enumerator(|this| {
            Box::new(
                this.0
                    .settings
                    .iter()
                    .map(|(def, _)| Value::from(def.name.as_str())),
            )
        })
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.0.settings.len())
    }
}

/// `context`.
struct Context(Arc<Root>);

impl Fields for Context {
    const KEYS: &'static [&'static str] = &[
        "turn",
        "history",
        "user",
        "project",
        "query",
        "mode",
        "state",
        "session_state",
        "token_usage",
    ];
    const NAME: &'static str = "context";

    fn field(&self, key: &str) -> Option<Value> {
        let f = &self.0.facts;
        Some(match key {
            "turn" => record(Turn(f.clone())),
            "history" => record(HistoryView(f.clone())),
            "user" => record(IdentityView(f.clone(), Party::User)),
            "project" => record(IdentityView(f.clone(), Party::Project)),
            "query" => Value::from(f.query.as_str()),
            "mode" => Value::from(&*self.0.mode),
            "state" => Value::from_object(StateView(self.0.state.clone())),
            "session_state" => match self
                .0
                .plugin
                .as_deref()
                .and_then(|p| f.session_state.get(p))
            {
                Some(m) => ser(m),
                None => ser(serde_json::Map::new()),
            },
            "token_usage" => Value::from(f.turn.token_usage),
            _ => return None,
        })
    }
}

/// `context.turn`.
struct Turn(Arc<SessionFacts>);

impl Fields for Turn {
    const KEYS: &'static [&'static str] = &TURN_FIELDS;
    const NAME: &'static str = "context.turn";

    fn field(&self, key: &str) -> Option<Value> {
        let t = &self.0.turn;
        Some(match TurnField::named(key)? {
            TurnField::Number => uint(t.number),
            TurnField::TokenUsage => Value::from(t.token_usage),
            TurnField::ContextUsage => Value::from(t.context_usage),
            TurnField::IterationCount => uint(t.iteration_count),
            TurnField::MaxIterations => uint(t.max_iterations),
            TurnField::ContextWindow => uint(t.context_window),
            TurnField::Final => Value::from(t.is_final),
        })
    }
}

/// `context.history`.
struct HistoryView(Arc<SessionFacts>);

impl Fields for HistoryView {
    const KEYS: &'static [&'static str] = &[
        "messages",
        "tools",
        "failures",
        "calls",
        "counts",
        "tool_count",
    ];
    const NAME: &'static str = "context.history";

    fn field(&self, key: &str) -> Option<Value> {
        let h = &self.0.history;
        Some(match key {
            "calls" => Value::from_object(Tally(self.0.clone(), TallyOf::Calls)),
            "counts" => record(CountsView(self.0.clone())),
            "failures" => Value::from_object(Tally(self.0.clone(), TallyOf::Failures)),
            "messages" => Value::from_object(Messages(self.0.clone())),
            "tool_count" => uint(h.counts.tool_calls),
            "tools" => Value::from_object(Tools(self.0.clone())),
            _ => return None,
        })
    }
}

/// `context.history.counts`.
struct CountsView(Arc<SessionFacts>);

impl Fields for CountsView {
    const KEYS: &'static [&'static str] = &[
        "turns",
        "queries",
        "tool_calls",
        "tool_failures",
        "messages",
    ];
    const NAME: &'static str = "context.history.counts";

    fn field(&self, key: &str) -> Option<Value> {
        let c = &self.0.history.counts;
        Some(uint(match key {
            "turns" => c.turns,
            "queries" => c.queries,
            "tool_calls" => c.tool_calls,
            "tool_failures" => c.tool_failures,
            "messages" => c.messages,
            _ => return None,
        }))
    }
}

#[derive(Clone, Copy)]
enum TallyOf {
    Calls,
    Failures,
}

/// `context.history.calls` and `failures`: counts per tool name, keys sorted.
struct Tally(Arc<SessionFacts>, TallyOf);

impl Tally {
    fn map(&self) -> &std::collections::BTreeMap<String, u32> {
        match self.1 {
            TallyOf::Calls => &self.0.history.calls,
            TallyOf::Failures => &self.0.history.failures,
        }
    }
}

impl fmt::Debug for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.map()).finish()
    }
}

impl Object for Tally {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.map().get(key.as_str()?).map(|n| uint(*n))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        self.mapped_enumerator(|this| Box::new(this.map().keys().map(|k| Value::from(k.as_str()))))
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.map().len())
    }
}

/// `context.history.messages`: a list.
struct Messages(Arc<SessionFacts>);

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0.history.messages).finish()
    }
}

impl Object for Messages {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let i = key.as_usize()?;
        (i < self.0.history.messages.len()).then(|| record(MessageView(self.0.clone(), i)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.history.messages.len())
    }
}

/// A message of the history.
struct MessageView(Arc<SessionFacts>, usize);

impl Fields for MessageView {
    const KEYS: &'static [&'static str] = &["role", "content", "turn"];
    const NAME: &'static str = "message";

    fn field(&self, key: &str) -> Option<Value> {
        let m = self.0.history.messages.get(self.1)?;
        Some(match key {
            "role" => Value::from(m.role.as_str()),
            "content" => Value::from(m.content.as_str()),
            "turn" => uint(m.turn),
            _ => return None,
        })
    }
}

/// `context.history.tools`: a list.
struct Tools(Arc<SessionFacts>);

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.0.history.tools).finish()
    }
}

impl Object for Tools {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let i = key.as_usize()?;
        (i < self.0.history.tools.len()).then(|| record(ToolRecordView(self.0.clone(), i)))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.history.tools.len())
    }
}

/// A tool call of the history: a map (its keys sorted), as the flattened struct it replaces
/// was, with `timestamp`, the data model's name for `time`.
struct ToolRecordView(Arc<SessionFacts>, usize);

impl Fields for ToolRecordView {
    const KEYS: &'static [&'static str] = &[
        "arguments",
        "error",
        "name",
        "result",
        "status",
        "success",
        "time",
        "timestamp",
        "turn",
    ];
    const NAME: &'static str = "tool record";

    fn field(&self, key: &str) -> Option<Value> {
        let t = self.0.history.tools.get(self.1)?;
        Some(match key {
            "name" => Value::from(t.name.as_str()),
            "arguments" => json(&t.arguments),
            "result" => json(&t.result),
            "error" => t.error.as_deref().map_or(Value::from(()), Value::from),
            "success" => Value::from(t.success),
            "status" => ser(t.status),
            "turn" => uint(t.turn),
            "time" | "timestamp" => Value::from(t.time),
            _ => return None,
        })
    }
}

#[derive(Clone, Copy)]
enum Party {
    User,
    Project,
}

/// `context.user` and `context.project`.
struct IdentityView(Arc<SessionFacts>, Party);

impl Fields for IdentityView {
    const KEYS: &'static [&'static str] = &["id", "settings", "root"];
    const NAME: &'static str = "identity";

    fn field(&self, key: &str) -> Option<Value> {
        let who = match self.1 {
            Party::User => &self.0.user,
            Party::Project => &self.0.project,
        };
        Some(match key {
            "id" => Value::from(who.id.as_str()),
            "settings" => ser(&who.settings),
            "root" => Value::from(who.root.as_str()),
            _ => return None,
        })
    }
}

/// `event`.
struct EventView(Arc<Root>);

impl Fields for EventView {
    const KEYS: &'static [&'static str] = &[
        "hook",
        "tool_name",
        "query",
        "message",
        "error",
        "data",
        "time",
    ];
    const NAME: &'static str = "event";

    fn field(&self, key: &str) -> Option<Value> {
        let root = &self.0;
        let e = &root.event;
        Some(match key {
            "hook" => Value::from(root.hook.name()),
            "tool_name" => Value::from(root.tool_name()),
            "query" => ser(&e.query),
            "message" => ser(&e.message),
            "error" => ser(&e.error),
            "data" => ser(&e.data),
            "time" => Value::from(root.time),
            _ => return None,
        })
    }
}

/// `tool`: the tool of the event. Its arguments are the event's, or, when the event did not
/// repeat them (a completion reported after its call), those of the call it completes.
struct ToolView(Arc<Root>);

impl Fields for ToolView {
    const KEYS: &'static [&'static str] = &[TOOL_FIELDS[0], TOOL_FIELDS[1], "shell"];
    const NAME: &'static str = "tool";

    fn field(&self, key: &str) -> Option<Value> {
        let root = &self.0;
        Some(match ToolField::named(key) {
            Some(ToolField::Name) => Value::from(root.tool_name()),
            Some(ToolField::Arguments) => json(tool_arguments(&root.facts, &root.event)),
            None if key == "shell" => ser(ShellView::of(root.shell.get())),
            None => return None,
        })
    }
}

static NULL: Json = Json::Null;

/// The arguments of the event's tool: the event's, or, when this event did not repeat them (a
/// completion reported after its call), those of the call it completes.
pub(crate) fn tool_arguments<'e>(facts: &'e SessionFacts, event: &'e Event) -> &'e Json {
    let name = event.tool.as_ref().map_or("", |t| t.name.as_str());
    match event.tool.as_ref().map(|t| &t.arguments) {
        Some(args) if !args.is_null() => args,
        _ => facts
            .history
            .tools
            .iter()
            .rev()
            .find(|t| t.name == name)
            .map_or(&NULL, |t| &t.arguments),
    }
}

/// `result`, when the tool returned an object: its keys are converted when read.
struct ResultView(Arc<Event>);

impl ResultView {
    fn map(&self) -> Option<&serde_json::Map<String, Json>> {
        self.0.result.as_ref()?.as_object()
    }
}

impl fmt::Debug for ResultView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0.result, f)
    }
}

impl Object for ResultView {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.map()?.get(key.as_str()?).map(json)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        // Sorted, as the map it replaces was.
        let mut keys: Vec<&str> = self
            .map()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        keys.sort_unstable();
        Enumerator::Values(keys.into_iter().map(Value::from).collect())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.map().map_or(0, serde_json::Map::len))
    }
}

/// `context.state`: the rule's plugin state, read by key. A key the tick has not read yet is
/// recorded, and the template rendered again once it is read (see `state.rs`).
struct StateView(Arc<Mutex<Snapshot>>);

impl fmt::Debug for StateView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("context.state")
    }
}

impl Object for StateView {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        let mut snap = lock(&self.0);
        match snap.key(key) {
            Known::Read(v) => v.map(json),
            Known::Unknown => {
                snap.want(key);
                None
            }
            Known::Failed => {
                snap.mark_failed_read();
                None
            }
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut snap = lock(&self.0);
        match snap.all() {
            Some(all) => Enumerator::Values(all.keys().map(|k| Value::from(k.as_str())).collect()),
            None => {
                if snap.failed() {
                    snap.mark_failed_read();
                } else {
                    snap.want_all();
                }
                Enumerator::Empty
            }
        }
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        let mut snap = lock(&self.0);
        match snap.all() {
            Some(all) => Some(all.len()),
            None => {
                if snap.failed() {
                    snap.mark_failed_read();
                } else {
                    snap.want_all();
                }
                Some(0)
            }
        }
    }
}
