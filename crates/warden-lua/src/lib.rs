//! Warden's Lua scripts: a hardened sandbox, and scripts that run as coroutines across ticks.
//!
//! A [`Runtime`] is one Lua 5.4 state (one per session, created on first use). Every script
//! runs as a coroutine ([`Task`]): a run lasts until the script returns, fails or waits
//! (`wait_turns`, `wait_for`), and a waiting task is resumed by a later run. Each run has a time
//! limit that also stops loops inside `pcall`, coroutines, `string.gsub` callbacks and
//! `table.sort` comparators, and pattern matching (on Warden's own matcher, which can be
//! stopped); calls may nest 10,000 deep; the state has a memory limit, of which each script may
//! keep a quarter between runs. A run that hits a limit or fails is reported as
//! [`Step::Failed`] and its effects are discarded.
//!
//! What a script can reach is decided in `prelude.lua`: no `io`, `os` beyond `os.time` and
//! `os.clock`, `require`, `package`, `dofile`, `loadfile`, `debug`, `string.dump`, binary
//! chunks, finalizers or garbage-collector control; the libraries and the data it is given are
//! read-only; the shared string metatable is locked.
//!
//! The crate knows nothing of rules or trees: the embedder supplies the data of a run through
//! [`Host`] and receives the script's actions as [`Effect`]s.
//!
//! ```
//! use std::time::Duration;
//! use warden_lua::{Host, Limits, Out, Runtime, Script, Step, Vocabulary};
//!
//! struct Turn(i64);
//! impl Host for Turn {
//!     fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
//!         match (root, key) {
//!             ("context", "turn") => out.record(&["number"], &[mlua::Value::Integer(self.0)]),
//!             _ => Ok(()),
//!         }
//!     }
//! }
//!
//! let script = Script::new(1, "turns.lua", "notify('turn ' .. context.turn.number); return context.turn.number > 2");
//! let mut rt = Runtime::new(Limits::default(), Vocabulary::NONE).unwrap();
//! let (task, step) = rt.start(&script, &Turn(3), Duration::from_secs(1));
//! assert!(task.is_none());
//! assert!(matches!(step, Step::Done { holds: true, ref effects } if effects.len() == 1));
//! ```

#![warn(missing_docs)]

mod lmatch;
mod memory;
mod strings;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{
    Function, HookTriggers, IntoLua, Lua, LuaOptions, LuaSerdeExt, LuaString, MultiValue, StdLib,
    Table, Thread, Value, VmState,
};

/// How often (in Lua instructions) the time limit is checked.
const CHECK_EVERY: u32 = 1000;

/// Most nested calls a script may make (checked with the time limit). Lua itself only stops a
/// recursion when its stack reaches a million slots, far past a session's memory limit.
const MAX_DEPTH: usize = 10_000;

/// The limits of a runtime.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Longest a run may take, unless the rule sets its own (5 seconds by default).
    pub timeout: Duration,
    /// Most memory the session's Lua state may hold, in bytes (32 MiB by default).
    pub memory: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(5),
            memory: 32 << 20,
        }
    }
}

/// The names the API accepts, supplied by the embedder so the two cannot disagree.
#[derive(Debug, Clone, Copy)]
pub struct Vocabulary {
    /// Hook names, for `wait_for`.
    pub hooks: &'static [&'static str],
    /// Notification priorities, for `notify`'s `priority`.
    pub priorities: &'static [&'static str],
    /// Delivery points, for `notify`'s `deliver_at`.
    pub delivery_points: &'static [&'static str],
    /// Log levels, for `log`.
    pub log_levels: &'static [&'static str],
    /// Decisions, for `decide` (and `allow`, `ask`, `deny`, `stop`).
    pub decisions: &'static [&'static str],
}

impl Vocabulary {
    /// A vocabulary that accepts no names: `wait_for`, and the options of `notify` and `log`,
    /// are refused (the embedder supplies the names it uses).
    pub const NONE: Vocabulary = Vocabulary {
        hooks: &[],
        priorities: &[],
        delivery_points: &[],
        log_levels: &[],
        decisions: &[],
    };
}

/// A script: its source, and a key that identifies it within a program.
#[derive(Debug, Clone)]
pub struct Script {
    key: u64,
    name: Arc<str>,
    source: Arc<str>,
}

impl Script {
    /// A script named `name` (a path, for messages) with `source`. `key` identifies it: the
    /// runtime compiles each key once.
    pub fn new(key: u64, name: &str, source: &str) -> Self {
        Script {
            key,
            name: Arc::from(name),
            source: Arc::from(source),
        }
    }

    /// The script's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The script's text.
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// A syntax error in a script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// The 1-based line of the error, when Lua gives one.
    pub line: Option<usize>,
    /// Lua's message, without the chunk name.
    pub message: String,
}

/// Checks a script's syntax without running it (for load time).
pub fn check_syntax(name: &str, source: &str) -> Result<(), SyntaxError> {
    let lua = Lua::new_with(StdLib::NONE, LuaOptions::new()).map_err(|e| SyntaxError {
        line: None,
        message: e.to_string(),
    })?;
    match lua
        .load(source)
        .set_name(format!("={name}"))
        .into_function()
    {
        Ok(_) => Ok(()),
        Err(mlua::Error::SyntaxError { message, .. }) => {
            // "name:3: unexpected symbol near 'x'"
            let rest = message.strip_prefix(name).and_then(|r| r.strip_prefix(':'));
            let (line, text) = match rest.and_then(|r| r.split_once(':')) {
                Some((l, t)) => (l.parse().ok(), t.trim().to_string()),
                None => (None, message.clone()),
            };
            Err(SyntaxError {
                line,
                message: text,
            })
        }
        Err(e) => Err(SyntaxError {
            line: None,
            message: e.to_string(),
        }),
    }
}

/// Where a run's data comes from: the embedder's frame of the current tick.
pub trait Host {
    /// Writes the value of `root.key` into `out` (`root` is `context`, `event`, `tool` or
    /// `result`); writing nothing means `nil`. Called each time a script reads the field, so
    /// the host must answer the same within a tick.
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()>;

    /// The tool result when it is not a table (a string, a number...), or `None` when the
    /// result is a table (read lazily through [`Host::field`]) or absent (see
    /// [`Host::has_result`]).
    fn result_value(&self, _lua: &Lua) -> mlua::Result<Option<Value>> {
        Ok(None)
    }

    /// Whether this tick has a tool result at all.
    fn has_result(&self) -> bool {
        false
    }

    /// Whether this tick concerns a tool.
    fn has_tool(&self) -> bool {
        false
    }
}

/// Where a [`Host`] writes a field's value. Records (a few named values) are handed over as
/// values for a Lua constructor made once per shape, which costs far less than building tables
/// through the C API under a memory limit.
pub struct Out<'a> {
    lua: &'a Lua,
    ctors: &'a mut HashMap<(usize, usize), Function>,
    /// The record marker, and the read-only view metatable and private key of the prelude.
    record: &'a Table,
    views: &'a (Table, Table),
    values: Vec<Value>,
}

impl Out<'_> {
    /// The Lua state, to convert values the other methods do not cover.
    pub fn lua(&self) -> &Lua {
        self.lua
    }

    /// The field is this value (an integer, a number, a boolean, a string, a converted table).
    pub fn value(&mut self, v: impl IntoLua) -> mlua::Result<()> {
        self.values.clear();
        self.values.push(v.into_lua(self.lua)?);
        Ok(())
    }

    /// The field is a serializable value, converted whole (lists, free-form data).
    pub fn serialize<T: serde::Serialize + ?Sized>(&mut self, v: &T) -> mlua::Result<()> {
        let options = mlua::serde::SerializeOptions::new()
            .serialize_none_to_null(false)
            .serialize_unit_to_null(false)
            .set_array_metatable(false);
        let v = self.lua.to_value_with(v, options)?;
        self.values.clear();
        self.values.push(v);
        Ok(())
    }

    /// The field is a record: `keys` (Lua identifiers, the same slice for the same shape)
    /// with their `values`, in order.
    pub fn record(&mut self, keys: &'static [&'static str], values: &[Value]) -> mlua::Result<()> {
        let shape = (keys.as_ptr() as usize, keys.len());
        let ctor = match self.ctors.get(&shape) {
            Some(f) => f.clone(),
            None => {
                if let Some(bad) = keys.iter().find(|k| !is_identifier(k)) {
                    return Err(mlua::Error::RuntimeError(format!(
                        "record key `{bad}` is not a Lua name"
                    )));
                }
                let params: Vec<String> = (0..keys.len()).map(|i| format!("a{i}")).collect();
                let fields: Vec<String> = keys
                    .iter()
                    .zip(&params)
                    .map(|(k, p)| format!("{k} = {p}"))
                    .collect();
                // The constructor returns the record as a read-only view which, unlike a view
                // of free-form data, knows its fields: a misspelt one is an error, not nil.
                let known: Vec<String> = keys.iter().map(|k| format!("{k} = true")).collect();
                let source = format!(
                    "local RO, REAL, setmetatable = ...\n\
                     local KNOWN = {{ {known} }}\n\
                     local MT = {{}}\n\
                     for k, v in next, RO do MT[k] = v end\n\
                     local get = RO.__index\n\
                     MT.__index = function(p, k)\n\
                       local v = get(p, k)\n\
                       if v == nil and not KNOWN[k] then\n\
                         error(\"no field `\" .. tostring(k) .. \"` in this record; its fields are {list}\", 2)\n\
                       end\n\
                       return v\n\
                     end\n\
                     return function({params}) return setmetatable({{ [REAL] = {{ {fields} }} }}, MT) end",
                    known = known.join(", "),
                    list = keys.join(", "),
                    params = params.join(", "),
                    fields = fields.join(", ")
                );
                let (ro, real) = self.views;
                let f: Function = self.lua.load(source).set_name("=warden-record").call((
                    ro.clone(),
                    real.clone(),
                    self.lua.globals().raw_get::<Function>("setmetatable")?,
                ))?;
                self.ctors.insert(shape, f.clone());
                f
            }
        };
        self.values.clear();
        self.values.push(Value::Table(self.record.clone()));
        self.values.push(Value::Function(ctor));
        self.values
            .extend(keys.iter().zip(values).map(|(_, v)| v.clone()));
        Ok(())
    }
}

fn is_identifier(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// An action a script took. Names were checked against the [`Vocabulary`] when it was taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// `notify(message, { category =, priority =, deliver_at = })`
    Notify {
        /// The message.
        message: String,
        /// Its category, if given.
        category: Option<String>,
        /// Its priority, if given.
        priority: Option<String>,
        /// Its delivery point, if given.
        deliver_at: Option<String>,
    },
    /// `log(message, level)` (and `print(...)`, at `debug`).
    Log {
        /// The level, if given.
        level: Option<String>,
        /// The message.
        message: String,
    },
    /// `set_state(key, value)`
    SetState {
        /// The key.
        key: String,
        /// The value.
        value: serde_json::Value,
    },
    /// `decide(decision, reason)` (or `allow`, `ask`, `deny`, `stop`).
    Decide {
        /// The decision, one of the vocabulary's.
        decision: String,
        /// What the agent (or the person asked) is told.
        reason: String,
    },
    /// `rewrite({ limit = 50 })`: set arguments of the tool call (a key may be a dotted path,
    /// `["options.dry_run"] = true`).
    Rewrite {
        /// The arguments to set, by path below `arguments`.
        set: serde_json::Map<String, serde_json::Value>,
    },
    /// `emit_event(type, payload)`
    EmitEvent {
        /// The event type.
        event_type: String,
        /// The payload (an empty object when not given).
        payload: serde_json::Value,
    },
}

/// What a run came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The script returned. `holds` is whether it returned `true` (a script used as a
    /// condition); its effects are to be applied.
    Done {
        /// Whether the script returned true.
        holds: bool,
        /// The actions it took in this run.
        effects: Vec<Effect>,
    },
    /// The script is waiting; resume its task at the next `wake` hook (`None`: at the next
    /// tick of its own hook). The effects of this run are to be applied.
    Waiting {
        /// The hook that wakes it.
        wake: Option<String>,
        /// The actions it took in this run.
        effects: Vec<Effect>,
    },
    /// The script failed or hit a limit; its effects in this run are discarded.
    Failed {
        /// What went wrong, with the script's traceback.
        error: String,
    },
}

/// A running script, waiting to be resumed. Dropping it without [`Runtime::halt`] leaves the
/// coroutine to the garbage collector without running its to-be-closed variables.
#[derive(Debug)]
pub struct Task {
    thread: Thread,
    script: Arc<str>,
    key: u64,
}

impl Task {
    /// The name of the script it runs.
    pub fn script(&self) -> &str {
        &self.script
    }
}

/// What the callbacks of a state share with the runtime during a run: the clock, the actions
/// taken so far, and the host. One lock, taken briefly; never held while Lua code runs.
struct RunState {
    deadline: Option<Instant>,
    limit: Duration,
    /// Whether a limit stopped the run, and what it said (every later check repeats it).
    tripped: bool,
    stop: String,
    effects: Vec<Effect>,
    /// The host of the run in progress, so `fetch` (made once per state) can reach it. Set by
    /// [`Runtime::run`] for exactly the duration of a run and cleared on the way out, even if
    /// the run unwinds, so it never outlives the reference it was made from.
    host: Option<*const (dyn Host + 'static)>,
    /// Whether the run's tick concerns a tool.
    has_tool: bool,
    /// Whether the result is read lazily through the host, and else its value.
    lazy_result: bool,
    result: Value,
}

// SAFETY: the host pointer is only dereferenced by `fetch`, which Lua calls only while a run
// is in progress on the thread that set it (see `HostGuard`); a state is never used from two
// threads at once (mlua's `send` feature serializes access).
unsafe impl Send for RunState {}

impl RunState {
    /// Stops the run for good with `message`.
    fn trip(&mut self, message: String) -> mlua::Error {
        self.tripped = true;
        self.stop.clone_from(&message);
        mlua::Error::RuntimeError(message)
    }
}

type Shared = Arc<Mutex<RunState>>;

/// The clock of the pattern functions: `None` while the run in progress may go on, else the
/// message that stops it (and the run is then stopped for good).
fn pattern_clock(shared: &Shared, pattern: &[u8]) -> Option<String> {
    let mut state = lock(shared);
    if state.tripped {
        return Some(state.stop.clone());
    }
    match state.deadline {
        Some(deadline) if Instant::now() >= deadline => {
            let message = format!(
                "stopped: the pattern '{}' ran past the script's time limit of {}",
                strings::shown(pattern),
                human(state.limit)
            );
            state.trip(message.clone());
            Some(message)
        }
        _ => None,
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, RunState> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// Clears the current host when a run ends.
struct HostGuard<'a>(&'a Shared);

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        let mut state = lock(self.0);
        state.host = None;
        state.result = Value::Nil;
    }
}

/// One sandboxed Lua state and the scripts compiled in it (see the crate docs).
pub struct Runtime {
    lua: Lua,
    shared: Shared,
    new_env: Function,
    start: Function,
    wait_tag: String,
    compiled: HashMap<u64, Function>,
    /// Finished coroutines, reset and reused by the next start (creating one costs more).
    spare: Vec<Thread>,
    limits: Limits,
    /// What each script keeps; the sandbox's own roots, which no script is charged for.
    ledger: memory::Ledger,
    shared_roots: Vec<Value>,
    /// Whether the run that just ended ran out of memory.
    ran_out: AtomicBool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("scripts", &self.compiled.len())
            .field("memory", &self.lua.used_memory())
            .finish()
    }
}

/// The frames of a traceback that belong to scripts (not Warden's prelude or the C calls that
/// run them), under a `stack traceback:` header; empty when none is left.
fn script_frames(traceback: &str) -> String {
    let frames: Vec<&str> = traceback
        .lines()
        .skip(1)
        .filter(|l| {
            let l = l.trim();
            !l.starts_with("warden-prelude:")
                && !l.starts_with("[C]: in function 'xpcall'")
                && !l.starts_with("[C]: in function 'error'")
                && !l.starts_with("[C]: in upvalue ")
                && l != "(...tail calls...)"
                && !l.is_empty()
        })
        .collect();
    if frames.is_empty() {
        return String::new();
    }
    format!("\nstack traceback:\n{}", frames.join("\n"))
}

/// The message of an error raised in a host function, without the layers (and tracebacks)
/// mlua wraps it in on the way out.
fn root_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => root_message(cause),
        mlua::Error::RuntimeError(message) => message.clone(),
        other => describe_error(other),
    }
}

fn describe_error(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::CallbackError { cause, traceback } => {
            format!("{}\n{traceback}", describe_error(cause))
        }
        mlua::Error::MemoryError(_) => {
            "stopped: the script ran out of memory (the session's Lua memory limit)".into()
        }
        other => other.to_string(),
    }
}

fn check_name(what: &str, value: &Option<String>, allowed: &[&str]) -> mlua::Result<()> {
    match value {
        Some(v) if !allowed.contains(&v.as_str()) => Err(mlua::Error::RuntimeError(format!(
            "{what}: unknown value '{v}'; use one of {}",
            allowed.join(", ")
        ))),
        _ => Ok(()),
    }
}

/// A Lua value as JSON, the same on every run: a table whose keys are exactly 1..n is a list;
/// any other table is an object whose keys (strings, or numbers written as text) are sorted.
/// Nothing is dropped silently: a value JSON cannot hold is an error that says what it is.
fn to_json(v: &Value, depth: usize) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    if depth > 32 {
        return Err("it is nested more than 32 levels deep".into());
    }
    Ok(match v {
        Value::Nil => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(n) => J::from(*n),
        Value::Number(x) => serde_json::Number::from_f64(*x)
            .map(J::Number)
            .ok_or_else(|| format!("{x} is not a number JSON can hold"))?,
        Value::String(s) => J::String(
            s.to_str()
                .map_err(|_| "a string that is not UTF-8 text".to_string())?
                .to_string(),
        ),
        Value::Table(t) => {
            let mut entries: Vec<(Value, Value)> = Vec::new();
            for pair in t.clone().pairs::<Value, Value>() {
                entries.push(pair.map_err(|e| e.to_string())?);
            }
            let n = entries.len();
            let is_list = n > 0
                && entries
                    .iter()
                    .all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1 && *i as usize <= n));
            if is_list {
                let mut items = vec![J::Null; n];
                for (k, x) in &entries {
                    if let Value::Integer(i) = k {
                        items[*i as usize - 1] = to_json(x, depth + 1)?;
                    }
                }
                J::Array(items)
            } else {
                let mut keyed = std::collections::BTreeMap::new();
                for (k, x) in &entries {
                    let key = match k {
                        Value::String(s) => s
                            .to_str()
                            .map_err(|_| "a key that is not UTF-8 text".to_string())?
                            .to_string(),
                        Value::Integer(i) => i.to_string(),
                        Value::Number(f) => f.to_string(),
                        other => {
                            return Err(format!(
                                "a table key must be a string or a number, not a {}",
                                other.type_name()
                            ));
                        }
                    };
                    keyed.insert(key, to_json(x, depth + 1)?);
                }
                J::Object(keyed.into_iter().collect())
            }
        }
        other => return Err(format!("a {} cannot be stored", other.type_name())),
    })
}

/// Turns an action call from the prelude into an [`Effect`], checking its arguments.
fn effect(
    lua: &Lua,
    vocab: &Vocabulary,
    kind: &str,
    first: String,
    second: Value,
) -> mlua::Result<Effect> {
    Ok(match kind {
        "notify" => {
            let opts: Option<Table> = lua.unpack(second)?;
            let get = |k: &str| -> mlua::Result<Option<String>> {
                match &opts {
                    Some(t) => t.get::<Option<String>>(k),
                    None => Ok(None),
                }
            };
            if let Some(t) = &opts {
                for pair in t.pairs::<String, Value>() {
                    let (k, _) = pair?;
                    if !["category", "priority", "deliver_at"].contains(&k.as_str()) {
                        return Err(mlua::Error::RuntimeError(format!(
                            "notify: unknown option `{k}`; the options are category, priority and deliver_at"
                        )));
                    }
                }
            }
            let (category, priority, deliver_at) =
                (get("category")?, get("priority")?, get("deliver_at")?);
            check_name("notify: priority", &priority, vocab.priorities)?;
            check_name("notify: deliver_at", &deliver_at, vocab.delivery_points)?;
            Effect::Notify {
                message: first,
                category,
                priority,
                deliver_at,
            }
        }
        "log" => {
            let level: Option<String> = lua.unpack(second)?;
            check_name("log: level", &level, vocab.log_levels)?;
            Effect::Log {
                level,
                message: first,
            }
        }
        "decide" => {
            let reason: String = lua.unpack(second)?;
            check_name(
                "decide: the decision",
                &Some(first.clone()),
                vocab.decisions,
            )?;
            Effect::Decide {
                decision: first,
                reason,
            }
        }
        "rewrite" => match to_json(&second, 0) {
            Ok(serde_json::Value::Object(set)) if !set.is_empty() => Effect::Rewrite { set },
            Ok(_) => {
                return Err(mlua::Error::RuntimeError(
                    "rewrite(arguments): give the arguments to set by name, such as { limit = 50 }"
                        .into(),
                ));
            }
            Err(e) => {
                return Err(mlua::Error::RuntimeError(format!(
                    "rewrite: the arguments cannot be used: {e}"
                )));
            }
        },
        "set_state" => Effect::SetState {
            key: first,
            value: to_json(&second, 0).map_err(|e| {
                mlua::Error::RuntimeError(format!("set_state: the value cannot be stored: {e}"))
            })?,
        },
        _ => Effect::EmitEvent {
            event_type: first,
            payload: match second {
                Value::Nil => serde_json::Value::Object(Default::default()),
                v => to_json(&v, 0).map_err(|e| {
                    mlua::Error::RuntimeError(format!(
                        "emit_event: the payload cannot be sent: {e}"
                    ))
                })?,
            },
        },
    })
}

impl Runtime {
    /// Builds a sandboxed state with the given limits.
    pub fn new(limits: Limits, vocabulary: Vocabulary) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::COROUTINE
                | StdLib::TABLE
                | StdLib::STRING
                | StdLib::MATH
                | StdLib::UTF8
                | StdLib::OS,
            LuaOptions::new(),
        )?;
        let shared: Shared = Arc::new(Mutex::new(RunState {
            deadline: None,
            limit: limits.timeout,
            tripped: false,
            stop: String::new(),
            effects: Vec::new(),
            host: None,
            has_tool: false,
            lazy_result: false,
            result: Value::Nil,
        }));
        // Made before the prelude so `fetch` can mark records with it.
        let record = lua.create_table()?;

        let host = lua.create_table()?;
        let sh = shared.clone();
        let clock = lua.create_function(move |_, pattern: LuaString| {
            Ok(pattern_clock(&sh, &pattern.as_bytes()))
        })?;
        host.set("strings", strings::install(&lua, &clock)?)?;
        let sh = shared.clone();
        let marker = record.clone();
        let ctors = Mutex::new(HashMap::new());
        // The prelude hands over its view metatable and private key once.
        let views: Arc<Mutex<Option<(Table, Table)>>> = Arc::new(Mutex::new(None));
        let slot = views.clone();
        host.set(
            "views",
            lua.create_function(move |_, (ro, real): (Table, Table)| {
                *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some((ro, real));
                Ok(())
            })?,
        )?;
        host.set(
            "fetch",
            lua.create_function(move |lua, (root, key): (LuaString, Value)| {
                let root = root.to_str()?;
                let Value::String(key) = key else {
                    return Ok(MultiValue::new());
                };
                let key = key.to_str()?;
                let views = views.lock().unwrap_or_else(|p| p.into_inner());
                let Some(views) = views.as_ref() else {
                    return Err(mlua::Error::RuntimeError("the sandbox is not ready".into()));
                };
                let current = lock(&sh).host;
                let Some(host) = current else {
                    return Err(mlua::Error::RuntimeError(format!(
                        "`{}` can only be read while the script runs",
                        &*root
                    )));
                };
                let mut ctors = ctors.lock().unwrap_or_else(|p| p.into_inner());
                let mut out = Out {
                    lua,
                    ctors: &mut ctors,
                    record: &marker,
                    views,
                    values: Vec::with_capacity(8),
                };
                // SAFETY: set only during a run, while the host it points to is borrowed by
                // `Runtime::run` (see `RunState::host`).
                unsafe { (*host).field(&mut out, &root, &key)? };
                Ok(MultiValue::from_vec(out.values))
            })?,
        )?;
        // A flag of the run in progress, for the prelude.
        let flag = |read: fn(&RunState) -> bool| {
            let sh = shared.clone();
            lua.create_function(move |_, ()| Ok(read(&lock(&sh))))
        };
        host.set("has_tool", flag(|s| s.has_tool)?)?;
        host.set("tripped", flag(|s| s.tripped)?)?;
        let sh = shared.clone();
        host.set(
            "result",
            lua.create_function(move |_, ()| {
                let state = lock(&sh);
                Ok((state.lazy_result, state.result.clone()))
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "handler",
            lua.create_function(move |lua, e: Value| {
                // Never format a script's own error object through its __tostring here.
                let message = match &e {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Error(err) => root_message(err),
                    Value::Integer(_) | Value::Number(_) => e.to_string()?,
                    other => format!("an error object of type {}", other.type_name()),
                };
                // A limit stops a script wherever it happens to be: no traceback, which would
                // differ from run to run.
                if lock(&sh).tripped {
                    return Ok(message);
                }
                let traceback = lua
                    .traceback(None, 1)
                    .map(|t| t.to_string_lossy())
                    .unwrap_or_default();
                let frames = script_frames(&traceback);
                // An error raised by one of Warden's functions is the script's mistake: say
                // where in the script, as Lua does for its own errors.
                let message = match (&e, frames.lines().find(|l| l.contains(": in "))) {
                    (Value::Error(_), Some(frame)) => match frame.trim().split_once(": in ") {
                        Some((at, _)) => format!("{at}: {message}"),
                        None => message,
                    },
                    _ => message,
                };
                Ok(format!("{message}{frames}"))
            })?,
        )?;
        let vocab = vocabulary;
        host.set(
            "is_hook",
            lua.create_function(move |_, h: Value| {
                Ok(matches!(&h, Value::String(s) if vocab.hooks.contains(&&*s.to_string_lossy())))
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "effect",
            lua.create_function(move |lua, (kind, first, second): (String, String, Value)| {
                let e = effect(lua, &vocab, &kind, first, second)?;
                lock(&sh).effects.push(e);
                Ok(())
            })?,
        )?;

        host.set("record", record)?;
        let exports: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=warden-prelude")
            .call(host)?;
        let new_env: Function = exports.get("new_env")?;
        let start: Function = exports.get("start")?;
        let runtime = Runtime {
            shared_roots: vec![
                Value::Table(lua.globals()),
                Value::Function(new_env.clone()),
                Value::Function(start.clone()),
            ],
            ledger: memory::Ledger::new(&lua, limits.memory)?,
            ran_out: AtomicBool::new(false),
            new_env,
            start,
            wait_tag: exports.get("wait_tag")?,
            compiled: HashMap::new(),
            spare: Vec::new(),
            limits,
            shared: shared.clone(),
            lua,
        };
        // A global hook reaches every coroutine, including those scripts create themselves.
        let sh = shared;
        runtime.lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(CHECK_EVERY),
            move |lua, _| {
                {
                    let mut state = lock(&sh);
                    if state.tripped {
                        return Err(mlua::Error::RuntimeError(state.stop.clone()));
                    }
                    if state.deadline.is_some_and(|d| Instant::now() >= d) {
                        let message = format!(
                            "stopped: the script ran longer than its time limit of {}",
                            human(state.limit)
                        );
                        return Err(state.trip(message));
                    }
                }
                // Costs a walk of the stack as deep as it is, up to the limit.
                if lua.inspect_stack(MAX_DEPTH, |_| ()).is_some() {
                    let message =
                        format!("stopped: recursion too deep (more than {MAX_DEPTH} nested calls)");
                    return Err(lock(&sh).trip(message));
                }
                Ok(VmState::Continue)
            },
        )?;
        runtime.lua.set_memory_limit(limits.memory)?;
        Ok(runtime)
    }

    fn out_of_memory(&self) -> String {
        self.ran_out.store(true, Ordering::Relaxed);
        format!(
            "stopped: the script ran out of memory (the session's Lua memory limit is {} MiB)",
            self.limits.memory >> 20
        )
    }

    /// Forgets the compiled scripts (when the program they came from is replaced; keys of a new
    /// program may mean other scripts).
    pub fn forget_scripts(&mut self) {
        self.compiled.clear();
        self.ledger.forget();
    }

    /// The memory the state uses now, in bytes.
    pub fn memory_used(&self) -> usize {
        self.lua.used_memory()
    }

    /// The runtime's limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    fn function(&mut self, script: &Script) -> mlua::Result<Function> {
        if let Some(f) = self.compiled.get(&script.key) {
            return Ok(f.clone());
        }
        let env: Table = self.new_env.call(())?;
        let f = self
            .lua
            .load(&*script.source)
            .set_name(format!("={}", script.name))
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(env)
            .into_function()?;
        self.compiled.insert(script.key, f.clone());
        Ok(f)
    }

    /// Starts `script`. Returns the task when the script is waiting (to be resumed later).
    pub fn start(
        &mut self,
        script: &Script,
        host: &dyn Host,
        timeout: Duration,
    ) -> (Option<Task>, Step) {
        if let Some(error) = self.ledger.notice(script.key) {
            return (None, Step::Failed { error });
        }
        let before = self.lua.used_memory();
        let thread = match self.spare.pop() {
            Some(t) => t.reset(self.start.clone()).map(|()| t),
            None => self.lua.create_thread(self.start.clone()),
        };
        let prepared = self.function(script).and_then(|f| thread.map(|t| (t, f)));
        let (thread, f) = match prepared {
            Ok(p) => p,
            Err(e) => {
                return (
                    None,
                    Step::Failed {
                        error: describe_error(&e),
                    },
                );
            }
        };
        self.ledger.open(script.key, &script.name);
        let step = self.run(&thread, host, timeout, Some(f));
        let task = if matches!(step, Step::Waiting { .. }) {
            self.ledger.own(&thread, script.key);
            Some(Task {
                thread,
                script: script.name.clone(),
                key: script.key,
            })
        } else {
            // A coroutine that returned can run the next script; one that failed is dropped.
            if matches!(step, Step::Done { .. }) && self.spare.len() < 4 {
                self.spare.push(thread);
            } else {
                // Before the ledger collects what the run left.
                drop(thread);
            }
            None
        };
        match self.settle(script.key, before, step) {
            step @ Step::Waiting { .. } => (task, step),
            step => (None, step),
        }
    }

    /// Resumes a waiting task. When the step is not [`Step::Waiting`] the task is over.
    pub fn resume(&mut self, task: &Task, host: &dyn Host, timeout: Duration) -> Step {
        if let Some(error) = self.ledger.stopped(&task.thread) {
            return Step::Failed { error };
        }
        let before = self.lua.used_memory();
        let step = self.run(&task.thread, host, timeout, None);
        if self.ran_out.load(Ordering::Relaxed)
            && let Ok(noop) = self.lua.create_function(|_, ()| Ok(()))
        {
            // What the failed run left on its stack goes with it.
            let _ = task.thread.reset(noop);
        }
        self.settle(task.key, before, step)
    }

    /// Accounts for what a run of script `key` left in the state (see `memory.rs`), and names
    /// the limit a failed run hit.
    fn settle(&mut self, key: u64, before: usize, step: Step) -> Step {
        let mut roots = memory::Roots {
            shared: &self.shared_roots,
            compiled: &mut self.compiled,
        };
        if self.ran_out.swap(false, Ordering::Relaxed) {
            let error = self.ledger.out_of_memory(&self.lua, &mut roots, key);
            return Step::Failed { error };
        }
        let reset = self.ledger.after_run(&self.lua, &mut roots, key, before);
        match (step, reset) {
            (Step::Failed { error }, None) if is_stack_overflow(&error) => Step::Failed {
                error: format!("stopped: recursion too deep: {error}"),
            },
            (step, None) => step,
            (Step::Failed { error }, Some(reset)) => Step::Failed {
                error: format!("{reset}\n(the run had failed: {error})"),
            },
            (_, Some(error)) => Step::Failed { error },
        }
    }

    /// Stops a task for good, closing its to-be-closed variables (under the time limit).
    pub fn halt(&mut self, task: Task) {
        self.set_deadline(Some(self.limits.timeout));
        if let Ok(noop) = self.lua.create_function(|_, ()| Ok(())) {
            let _ = task.thread.reset(noop);
        }
        self.set_deadline(None);
    }

    fn set_deadline(&self, timeout: Option<Duration>) {
        let mut state = lock(&self.shared);
        state.tripped = false;
        state.deadline = timeout.map(|t| Instant::now() + t);
        if let Some(t) = timeout {
            state.limit = t;
        }
    }

    fn run(
        &mut self,
        thread: &Thread,
        host: &dyn Host,
        timeout: Duration,
        first: Option<Function>,
    ) -> Step {
        let erased: *const (dyn Host + '_) = host;
        // SAFETY: only the lifetime is erased; `_guard` clears the pointer before `host`'s
        // borrow ends, and nothing reads it outside this run.
        let erased: *const (dyn Host + 'static) = unsafe { std::mem::transmute(erased) };
        // Only a result that is not a table is converted up front; the rest is read lazily.
        let lazy_result = host.has_result();
        let result = if lazy_result {
            Ok(None)
        } else {
            host.result_value(&self.lua)
        };
        let _guard = HostGuard(&self.shared);
        let outcome = result.and_then(|result| {
            {
                let mut state = lock(&self.shared);
                state.effects.clear();
                state.host = Some(erased);
                state.has_tool = host.has_tool();
                state.lazy_result = lazy_result;
                state.result = result.unwrap_or(Value::Nil);
            }
            self.set_deadline(Some(timeout));
            let values = match first {
                Some(f) => thread.resume::<MultiValue>(f),
                None => thread.resume::<MultiValue>(()),
            };
            self.set_deadline(None);
            values
        });
        let effects = std::mem::take(&mut lock(&self.shared).effects);
        let values = match outcome {
            Ok(v) => v,
            Err(e) => {
                let error = match &e {
                    mlua::Error::MemoryError(_) => self.out_of_memory(),
                    e => describe_error(e),
                };
                return Step::Failed { error };
            }
        };
        let mut values = values.into_iter();
        match thread.status() {
            mlua::thread::ThreadStatus::Resumable => {
                let first = values.next();
                let wake = match (&first, values.next()) {
                    (Some(Value::String(tag)), Some(Value::String(hook)))
                        if *tag.as_bytes() == *self.wait_tag.as_bytes() =>
                    {
                        Some(hook.to_string_lossy())
                    }
                    _ => None,
                };
                Step::Waiting { wake, effects }
            }
            _ => match (values.next(), values.next()) {
                (Some(Value::String(s)), result) if *s.as_bytes() == *b"done" => match result {
                    None | Some(Value::Nil) | Some(Value::Boolean(false)) => Step::Done {
                        holds: false,
                        effects,
                    },
                    Some(Value::Boolean(true)) => Step::Done {
                        holds: true,
                        effects,
                    },
                    Some(other) => Step::Failed {
                        error: format!(
                            "a script used as a condition returns true or false (or nothing); this one returned {} {}",
                            if other.type_name().starts_with(['a', 'e', 'i', 'o', 'u']) {
                                "an"
                            } else {
                                "a"
                            },
                            other.type_name()
                        ),
                    },
                },
                (_, Some(Value::String(message))) => {
                    let message = message.to_string_lossy();
                    let error = if message.starts_with("not enough memory") {
                        self.out_of_memory()
                    } else {
                        message.trim_end().to_string()
                    };
                    Step::Failed { error }
                }
                _ => Step::Failed {
                    error: "the script stopped without a result".into(),
                },
            },
        }
    }
}

/// Whether an error is Lua's own stack overflow (of its stack, or of nested C calls).
fn is_stack_overflow(error: &str) -> bool {
    !error.starts_with("stopped:")
        && error
            .lines()
            .next()
            .is_some_and(|l| l.ends_with("stack overflow") || l.contains("stack overflow ("))
}

/// "5 s", "250 ms".
pub fn human(d: Duration) -> String {
    if d.as_millis() >= 1000 && d.as_millis() % 1000 == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests;
