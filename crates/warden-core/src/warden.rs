//! [`Warden`]: the supervisor an agent loop embeds. It holds the compiled program, the store
//! and the event bus, and opens sessions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::Value as Json;
use tokio::sync::broadcast;
use warden_store::Store;

use crate::diagnostic::Diagnostic;
use crate::event::Event;
use crate::facts::DEFAULT_HISTORY_LIMIT;
use crate::hook::Hook;
use crate::loader::{RuleSource, load};
use crate::outcome::Outcome;
use crate::program::Program;
use crate::session::{Session, SessionOptions};

/// An event a rule published with `emit_event`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusEvent {
    /// The event type the rule gave.
    pub event_type: Arc<str>,
    /// The rendered payload.
    pub payload: Json,
    /// The rule that emitted it.
    pub rule: Arc<str>,
    /// The rule's plugin.
    pub plugin: Arc<str>,
    /// The session it happened in.
    pub session: String,
    /// The hook that fired the rule.
    pub hook: Hook,
}

/// Settings of a [`Warden`].
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub history_limit: usize,
    pub execution_log: bool,
    pub script_limits: warden_lua::Limits,
}

/// Why a [`Warden`] could not be built. Problems in rule files are not errors here: they are
/// [`Diagnostic`]s, and the rules without problems load.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] warden_store::StoreError),
    /// `strict` was asked for and some rule did not load.
    #[error("{} rule file problem(s); the first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
    Rules(Vec<Diagnostic>),
}

pub(crate) struct Shared {
    program: RwLock<Arc<Program>>,
    pub(crate) store: Store,
    pub(crate) bus: broadcast::Sender<BusEvent>,
    pub(crate) config: Config,
    sources: Vec<RuleSource>,
    next_session: AtomicU64,
    generation: AtomicU64,
    reload_lock: Mutex<()>,
}

impl Shared {
    pub(crate) fn program(&self) -> Arc<Program> {
        match self.program.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

/// The supervisor. Cheap to clone (all clones share one program, store and bus); `Send` and
/// `Sync`, so many sessions can run on many threads.
///
/// ```
/// use warden_core::{Event, Hook, Warden};
///
/// let warden = Warden::builder().builtin_rules().build().unwrap();
/// let mut session = warden.session();
/// session.tick(Hook::OnQueryStart, Event::query("Summarise the design notes"));
/// let outcome = session.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.85));
/// assert_eq!(outcome.fired(), ["token-budget-warning"]);
/// assert_eq!(&*outcome.inject[0].message, "Token budget at 85%. Consider wrapping up or summarizing.");
/// ```
#[derive(Clone)]
pub struct Warden {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Warden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warden")
            .field("program", &self.shared.program())
            .finish()
    }
}

/// Builds a [`Warden`].
#[derive(Debug, Default)]
pub struct WardenBuilder {
    sources: Vec<RuleSource>,
    store: Option<Store>,
    history_limit: Option<usize>,
    execution_log: bool,
    strict: bool,
    bus_capacity: Option<usize>,
    script_limits: Option<warden_lua::Limits>,
}

impl WardenBuilder {
    /// Loads Warden's built-in rules.
    pub fn builtin_rules(mut self) -> Self {
        self.sources.push(RuleSource::Builtin);
        self
    }

    /// Loads every rule file of a folder.
    pub fn rules_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sources.push(RuleSource::Dir(dir.into()));
        self
    }

    /// Uses `store` for plugin state and the execution log (an in-memory store otherwise).
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// How many recent messages and tool calls a session's history keeps (default 50).
    pub fn history_limit(mut self, limit: usize) -> Self {
        self.history_limit = Some(limit);
        self
    }

    /// Records every rule evaluation in the store's execution log (off by default).
    pub fn execution_log(mut self, on: bool) -> Self {
        self.execution_log = on;
        self
    }

    /// Fails the build if any rule file has an error (by default such rules are skipped and
    /// reported through [`Warden::diagnostics`]).
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Limits of Lua scripts: the time limit of one run (5 s by default; a rule may set its
    /// own with `[condition] timeout`) and the memory of a session's Lua state (32 MiB).
    pub fn script_limits(mut self, limits: warden_lua::Limits) -> Self {
        self.script_limits = Some(limits);
        self
    }

    /// How many emitted events the bus buffers for a slow subscriber (default 1024).
    pub fn bus_capacity(mut self, capacity: usize) -> Self {
        self.bus_capacity = Some(capacity.max(1));
        self
    }

    /// Loads and compiles the rules and opens the store.
    pub fn build(self) -> Result<Warden, Error> {
        let store = match self.store {
            Some(s) => s,
            None => Store::in_memory()?,
        };
        let (defs, diagnostics) = load(&self.sources);
        let program = Program::compile(defs, diagnostics, 0);
        if self.strict && program.has_errors() {
            return Err(Error::Rules(
                program
                    .diagnostics()
                    .iter()
                    .filter(|d| d.is_error())
                    .cloned()
                    .collect(),
            ));
        }
        let (bus, _) = broadcast::channel(self.bus_capacity.unwrap_or(1024));
        Ok(Warden {
            shared: Arc::new(Shared {
                program: RwLock::new(Arc::new(program)),
                store,
                bus,
                config: Config {
                    history_limit: self.history_limit.unwrap_or(DEFAULT_HISTORY_LIMIT),
                    execution_log: self.execution_log,
                    script_limits: self.script_limits.unwrap_or_default(),
                },
                sources: self.sources,
                next_session: AtomicU64::new(1),
                generation: AtomicU64::new(0),
                reload_lock: Mutex::new(()),
            }),
        })
    }
}

impl Warden {
    /// Starts building a supervisor.
    pub fn builder() -> WardenBuilder {
        WardenBuilder::default()
    }

    /// Opens a session with a generated id and default user and project.
    pub fn session(&self) -> Session {
        self.session_with(SessionOptions::default())
    }

    /// Opens a session.
    pub fn session_with(&self, opts: SessionOptions) -> Session {
        let n = self.shared.next_session.fetch_add(1, Ordering::Relaxed);
        let id = opts.id.clone().unwrap_or_else(|| format!("session-{n}"));
        Session::new(self.shared.clone(), id, &opts)
    }

    /// Subscribes to the events rules emit with `emit_event`.
    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.shared.bus.subscribe()
    }

    /// The program in force.
    pub fn program(&self) -> Arc<Program> {
        self.shared.program()
    }

    /// Problems found in the rule files (the rules without problems are loaded).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        self.program().diagnostics().to_vec()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// Reads and compiles the rule files again and swaps the new program in between ticks;
    /// sessions keep their facts and decorator memory (by rule id). If the new files have
    /// errors, the rules without errors are used and the diagnostics returned.
    pub fn reload(&self) -> Vec<Diagnostic> {
        let _guard = self
            .shared
            .reload_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let (defs, diagnostics) = load(&self.shared.sources);
        let generation = self.shared.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let program = Arc::new(Program::compile(defs, diagnostics, generation));
        let diagnostics = program.diagnostics().to_vec();
        match self.shared.program.write() {
            Ok(mut p) => *p = program,
            Err(poisoned) => *poisoned.into_inner() = program,
        }
        diagnostics
    }
}

/// A session for async agent loops: ticks run on tokio's blocking pool, so a slow rule never
/// stalls the runtime. Dropping a tick's future does not lose the session's state.
#[derive(Clone, Debug)]
pub struct AsyncSession {
    inner: Arc<Mutex<Session>>,
}

impl AsyncSession {
    /// Wraps a session.
    pub fn new(session: Session) -> Self {
        AsyncSession {
            inner: Arc::new(Mutex::new(session)),
        }
    }

    /// Handles one hook (see [`Session::tick`]).
    pub async fn tick(&self, hook: Hook, event: Event) -> Outcome {
        let inner = self.inner.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut session = inner.lock().unwrap_or_else(|p| p.into_inner());
            session.tick(hook, event)
        });
        match task.await {
            Ok(outcome) => outcome,
            // A panic inside a tick is a bug; surface it where the caller can see it.
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}
