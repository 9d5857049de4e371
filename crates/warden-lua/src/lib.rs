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
//! A run reads the frame (`context`, `event`, ...) lazily: a field is asked of the [`Host`]
//! the first time the run reads it and kept for the rest of the run, so reading it again costs a
//! table lookup; what a run kept is let go when it ends, except a few records, texts, numbers
//! and booleans, kept from run to run and brought up to date with each run's tick before its
//! script runs. Records such as `context.turn` are read-only views built on the Lua API, their
//! fields read by a C function.
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

mod effect;
mod errors;
mod fetch;
mod host;
mod journal;
mod lmatch;
mod memory;
mod restore;
mod run;
mod sandbox;
mod straight;
mod strings;

use errors::{describe_error, is_stack_overflow, root_message, script_frames};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{
    Function, HookTriggers, Lua, LuaOptions, LuaString, StdLib, Table, Thread, Value, VmState, ffi,
};

pub use effect::Effect;
use effect::effect;
pub use host::{Host, Out, ResultShape, Shape};
use journal::Tape;
pub use journal::{Input, Journal, Recorded, RunRecord};
pub use restore::RestoreError;

/// A map keyed by script keys (or other integers Warden picks), hashed by one multiplication
/// rather than SipHash: it is looked up at every run.
pub(crate) type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// The hasher of [`KeyMap`] (Fx's multiplication; hashbrown reads the high bits it spreads).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// How often (in Lua instructions) the time limit is checked.
const CHECK_EVERY: u32 = 1000;

/// How long a run goes on its thread before the thread is handed over (see [`set_hand_over`]).
const HAND_OVER_AFTER: Duration = Duration::from_millis(1);

/// What a run that goes on past [`HAND_OVER_AFTER`] calls (see [`set_hand_over`]).
static HAND_OVER: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets, once for the process, what a script's run that goes on past a millisecond calls, on
/// its thread, and again 10 ms after each call while it goes on: an async host hands the
/// thread's other work over there (tokio's `block_in_place` on a runtime worker, as
/// `warden-core`'s `AsyncSession` does), since a script may run for as long as its time limit
/// lets it, and most runs take microseconds, too few to pay for a hand-over. It is called
/// where the run checks its time limit: at any depth of the script's code, in a coroutine the script made, in a callback called from C (a
/// `table.sort` comparator), while a pattern is matched. It may block; it must not run Lua.
/// False when one was set already (that one stays).
pub fn set_hand_over(hand_over: fn()) -> bool {
    HAND_OVER.set(hand_over).is_ok()
}

/// How long after a call of the hand-over a run that goes on calls it again: a hand-over may
/// not hold (the thread's work came back to it, or no thread could take it in time), and a
/// call on a thread whose work went elsewhere costs little.
const HAND_OVER_AGAIN: Duration = Duration::from_millis(10);

/// Whether the run of `state` is due to call the hand-over at `now` (see [`hand_over`]).
fn hand_over_due(state: &mut RunState, now: Instant) -> bool {
    let due = state.hand_over_at.is_some_and(|at| now >= at);
    if due {
        state.hand_over_at = None;
    }
    due
}

/// Calls the process's hand-over (see [`set_hand_over`]), with the run's state not borrowed,
/// and makes the next call due [`HAND_OVER_AGAIN`] after it returns (a call that waited long
/// does not make the next due at once).
#[cold]
#[inline(never)]
fn hand_over(shared: &Shared) {
    if let Some(hand_over) = HAND_OVER.get() {
        hand_over();
    }
    lock(shared).hand_over_at = Some(Instant::now() + HAND_OVER_AGAIN);
}

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

/// A compiled script: its chunk, whether it is straight-line (its first run then has no
/// instruction hook, see `straight.rs`), and whether it also assigns nothing (and so keeps
/// nothing past its run, with its globals as they were made: see `Runtime::release_views`).
pub(crate) struct Compiled {
    pub(crate) chunk: Function,
    pub(crate) straight: bool,
    pub(crate) keeps_nothing: bool,
}

/// A compiled script's globals, and whether the script's source never names `_ENV` (so that
/// no run of it can give its chunk other globals), for the check of `Runtime::release_views`.
pub(crate) struct Env {
    pub(crate) table: Table,
    pub(crate) fixed: bool,
}

/// The globals a waiting script calls at every run (`coroutine.yield`, `wait_turns`,
/// `wait_for`): bound in the globals of each script whose source names them, where a read
/// finds them at once. A global a script's globals lack is looked up again in the sandbox's
/// (one more lookup through `__index`), and a resumed script reads one at every run.
pub(crate) const WAITS: [&str; 3] = ["coroutine", "wait_turns", "wait_for"];

/// A running script, waiting to be resumed. Dropping it without [`Runtime::halt`] leaves the
/// coroutine to the garbage collector without running its to-be-closed variables.
#[derive(Debug)]
pub struct Task {
    thread: Thread,
    /// The coroutine's state (`thread.to_pointer()`, which costs a lock and a lookup).
    state: usize,
    script: Arc<str>,
    /// Its script's key (for what the script keeps, see `memory.rs`).
    key: u64,
    /// Its random numbers' state.
    rng: Cell<u64>,
    /// Its replay record, when the runtime records (see [`Runtime::set_recording`]).
    journal: RefCell<Option<Journal>>,
}

impl Task {
    /// The name of the script it runs.
    pub fn script(&self) -> &str {
        &self.script
    }

    /// Its replay record: what [`Runtime::restore`] needs to bring it back in another
    /// process. `None` when the runtime does not record.
    pub fn journal(&self) -> Option<Journal> {
        self.journal.borrow().clone()
    }

    /// How many values its replay record holds (0 when it does not record).
    #[inline]
    pub fn journal_len(&self) -> usize {
        self.journal.borrow().as_ref().map_or(0, Journal::len)
    }
}

/// What the callbacks of a state share with the runtime during a run: the clock, the actions
/// taken so far, and the host. Borrowed briefly ([`lock`]); never held while Lua code runs.
struct RunState {
    deadline: Option<Instant>,
    limit: Duration,
    /// Whether a limit stopped the run, and what it said (every later check repeats it).
    tripped: bool,
    tripped_by: String,
    effects: Vec<Effect>,
    /// The host of the run in progress, so `fetch` (made once per state) can reach it. Set by
    /// [`Runtime::run`] for exactly the duration of a run and cleared on the way out, even if
    /// the run unwinds, so it never outlives the reference it was made from.
    host: Option<*const (dyn Host + 'static)>,
    /// The runtime's `Lua`, for `fetch` (a C function, given only the coroutine's stack), set
    /// and cleared with `host`: finding it from the stack costs a registry lookup.
    lua: Option<*const Lua>,
    /// Whether the run's tick concerns a tool.
    has_tool: bool,
    /// Whether the result is read lazily through the host, and else its value.
    lazy_result: bool,
    result: Value,
    /// What the run does with the values it receives (record, replay, nothing).
    tape: Tape,
    /// The random numbers' state of the running script.
    rng: u64,
    /// Why the run must stop, when a replay diverged: like a tripped limit, it cannot be
    /// caught by the script.
    stop: Option<String>,
    /// When the run's thread is handed over (see [`set_hand_over`]), while it has not been.
    hand_over_at: Option<Instant>,
}

// SAFETY: the host and Lua pointers are only dereferenced by `fetch`, which Lua calls only while a run
// is in progress on the thread that set it (see `HostGuard`); a state is never used from two
// threads at once (mlua's `send` feature serializes access).
unsafe impl Send for RunState {}

impl RunState {
    /// Stops the run for good with `message`.
    fn trip(&mut self, message: String) -> mlua::Error {
        self.tripped = true;
        self.tripped_by.clone_from(&message);
        mlua::Error::RuntimeError(message)
    }
}

/// The [`RunState`] of a runtime, shared with its callbacks. Not a mutex of its own: it is
/// only ever borrowed with the runtime's `Lua` locked (mlua's lock, which serializes every use
/// of a state across threads), so a run takes one lock, mlua's, and not three. The callbacks
/// borrow it when Lua calls them (Lua code runs only under mlua's lock: its API takes it, and
/// `run_raw` resumes a coroutine within `Lua::exec_raw_lua`); the runtime borrows it within
/// `run_raw` and [`Runtime::set_deadline`], both within `exec_raw_lua`. A borrow while another
/// is held (which a mutex would deadlock on) panics.
struct RunCell(RefCell<RunState>);

// SAFETY: every borrow is made with the runtime's mlua lock held (see `RunCell`), so no two
// threads touch the cell at once; `RunState` itself is `Send`.
unsafe impl Sync for RunCell {}

type Shared = Arc<RunCell>;

/// The clock of the pattern functions: `None` while the run in progress may go on, else the
/// message that stops it (and the run is then stopped for good).
fn pattern_clock(shared: &Shared, pattern: &[u8]) -> Option<String> {
    let mut state = lock(shared);
    if state.tripped {
        return Some(state.tripped_by.clone());
    }
    let now = Instant::now();
    match state.deadline {
        Some(deadline) if now >= deadline => {
            let message = format!(
                "stopped: the pattern '{}' ran past the script's time limit of {}",
                strings::shown(pattern),
                human(state.limit)
            );
            state.trip(message.clone());
            Some(message)
        }
        _ => {
            if hand_over_due(&mut state, now) {
                drop(state);
                hand_over(shared);
            }
            None
        }
    }
}

/// The run's state, borrowed; only with the runtime's mlua lock held (see [`RunCell`]).
fn lock(shared: &Shared) -> std::cell::RefMut<'_, RunState> {
    shared.0.borrow_mut()
}

/// One sandboxed Lua state and the scripts compiled in it (see the crate docs).
pub struct Runtime {
    lua: Lua,
    shared: Shared,
    new_env: Function,
    /// The body of every task's coroutine, `xpcall` (called with the script and `handler`).
    call: Function,
    handler: Function,
    /// What runs keep in the roots' memos (see `prelude.lua`): memo, key, memo, key..., and
    /// how many pairs the run in progress (or one cut short) listed.
    kept_list: mlua::RegistryKey,
    kept: Arc<AtomicUsize>,
    /// The reusable record views, by shape (`[2n + 1]`, their values at `[2n + 2]`), and which
    /// of them runs were handed
    /// since the last run ended (see `run.rs`).
    record_cache: mlua::RegistryKey,
    lent: host::Lent,
    /// What `fetch` keeps, for the answers kept in the memos across runs (see
    /// `fetch::refresh`).
    answers: Arc<Mutex<fetch::Answers>>,
    /// How many answers are kept across runs (see `fetch::Persisting`).
    persisting: fetch::Persisting,
    /// The coroutines Warden made (where a script may wait), weak keys.
    task_threads: Table,
    wait_tag: String,
    compiled: KeyMap<Compiled>,
    /// The table of the sandbox's globals (`base` in the prelude), for `straight::straight_line`.
    base: Table,
    /// The globals of each compiled script.
    envs: KeyMap<Env>,
    /// Where the values of [`WAITS`] live (`lua_topointer`), bound in some scripts' globals.
    waits: [usize; 3],
    /// Finished coroutines, reused by the next start (creating one costs more), with their
    /// states.
    spare: Vec<(Thread, usize)>,
    limits: Limits,
    /// Whether waiting scripts keep a replay record.
    recording: bool,
    /// What each script keeps; the sandbox's own roots, which no script is charged for.
    ledger: memory::Ledger,
    shared_roots: Vec<Value>,
    /// Whether the run that just ended ran out of memory.
    ran_out: AtomicBool,
    /// When the last run started (see [`Runtime::take_run_started`]).
    started: Option<Instant>,
    /// The count of mlua's allocator, when it can be read (see `memory::allocator_count`).
    allocated: Option<memory::Count>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("scripts", &self.compiled.len())
            .field("memory", &self.lua.used_memory())
            .finish()
    }
}

/// The next value of a replay, which must be `want`; a divergence stops the run for good.
fn replayed(state: &mut RunState, want: &Input) -> mlua::Result<Input> {
    state.tape.replay(want).map_err(|why| {
        state.stop = Some(why.clone());
        mlua::Error::RuntimeError(why)
    })
}

/// For values that never hold records.
fn no_records(_: &[String], _: Vec<Value>) -> mlua::Result<Value> {
    Err(mlua::Error::RuntimeError(
        "internal: a record where none can be".into(),
    ))
}

impl Runtime {
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
        // Their globals go with them (a reload starts scripts with fresh globals).
        self.envs.clear();
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

    /// A coroutine for a task: a finished one reused, or a new one, marked as Warden's.
    fn task_thread(&mut self) -> mlua::Result<(Thread, usize)> {
        if let Some(t) = self.spare.pop() {
            return Ok(t);
        }
        let t = self.lua.create_thread(self.call.clone())?;
        self.task_threads.raw_set(&t, true)?;
        let state = t.to_pointer() as usize;
        Ok((t, state))
    }

    /// Compiles `script` unless it is (its function is then `compiled[key]`).
    fn compile(&mut self, script: &Script) -> mlua::Result<()> {
        if !self.compiled.contains_key(&script.key) {
            self.function(script)?;
        }
        Ok(())
    }

    fn function(&mut self, script: &Script) -> mlua::Result<Function> {
        if let Some(c) = self.compiled.get(&script.key) {
            return Ok(c.chunk.clone());
        }
        let env: Table = self.new_env.call(())?;
        self.bind_waits(&env, &script.source)?;
        let f = self
            .lua
            .load(&*script.source)
            .set_name(format!("={}", script.name))
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_environment(env.clone())
            .into_function()?;
        let base = &self.base;
        let straight = straight::straight_line(script.source.as_bytes(), |w| {
            // A failed read is a global: the script keeps its hook.
            !matches!(base.raw_get::<Value>(w), Ok(Value::Nil))
        });
        self.compiled.insert(
            script.key,
            Compiled {
                chunk: f.clone(),
                straight,
                keeps_nothing: straight && straight::assigns_nothing(script.source.as_bytes()),
            },
        );
        // Only a script that never names `_ENV` keeps these globals for good (see
        // `Runtime::release_views`).
        let fixed = !script.source.contains("_ENV");
        self.envs.insert(script.key, Env { table: env, fixed });
        Ok(f)
    }

    /// Binds in `env`, the globals of the script of `source`, each of [`WAITS`] the source
    /// names.
    fn bind_waits(&self, env: &Table, source: &str) -> mlua::Result<()> {
        for name in WAITS {
            if source.contains(name) {
                env.raw_set(name, self.base.raw_get::<Value>(name)?)?;
            }
        }
        Ok(())
    }

    /// Whether waiting scripts keep a replay record ([`Task::journal`]), so that they can be
    /// brought back in another process ([`Runtime::restore`]). Off by default: it costs a
    /// copy of every value a script reads.
    pub fn set_recording(&mut self, on: bool) {
        self.recording = on;
    }

    /// Starts `script` with a seed for its random numbers derived from its key. Returns the
    /// task when the script is waiting (to be resumed later).
    pub fn start(
        &mut self,
        script: &Script,
        host: &dyn Host,
        timeout: Duration,
    ) -> (Option<Task>, Step) {
        self.start_seeded(script, host, timeout, script.key)
    }

    /// Starts `script`, its random numbers (`math.random`) drawn from `seed`: the same seed
    /// gives the same numbers, in this process or another.
    pub fn start_seeded(
        &mut self,
        script: &Script,
        host: &dyn Host,
        timeout: Duration,
        seed: u64,
    ) -> (Option<Task>, Step) {
        if let Some(error) = self.ledger.notice(script.key) {
            return (None, Step::Failed { error });
        }
        self.started = None;
        let prepared = self.compile(script).and_then(|()| self.task_thread());
        let (thread, state) = match prepared {
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
        let globals = self
            .recording
            .then(|| self.globals(script))
            .flatten()
            .unwrap_or(Recorded::Nil);
        let tape = if self.recording {
            Tape::Record(Vec::new())
        } else {
            Tape::Off
        };
        let (step, tape, rng, grown) = self.run(
            run::On {
                thread: state,
                key: script.key,
                first: true,
            },
            host,
            timeout,
            tape,
            seed,
        );
        let task = if matches!(step, Step::Waiting { .. }) {
            self.ledger.own(&thread, script.key);
            let journal = match tape {
                Tape::Record(inputs) => Some(Journal {
                    seed,
                    globals,
                    runs: vec![run_record(inputs, &step)],
                }),
                _ => None,
            };
            Some(Task {
                thread,
                state,
                script: script.name.clone(),
                key: script.key,
                rng: Cell::new(rng),
                journal: RefCell::new(journal),
            })
        } else {
            // A coroutine that returned can run the next script; one that failed is dropped.
            if matches!(step, Step::Done { .. }) && self.spare.len() < 4 {
                self.spare.push((thread, state));
            } else {
                // Before the ledger collects what the run left.
                drop(thread);
            }
            None
        };
        match self.settle(script.key, grown, step) {
            step @ Step::Waiting { .. } => (task, step),
            step => (None, step),
        }
    }

    /// Resumes a waiting task. When the step is not [`Step::Waiting`] the task is over.
    pub fn resume(&mut self, task: &Task, host: &dyn Host, timeout: Duration) -> Step {
        if self.ledger.any_stopped()
            && let Some(error) = self.ledger.stopped(&task.thread)
        {
            return Step::Failed { error };
        }
        self.started = None;
        let tape = match &*task.journal.borrow() {
            Some(_) => Tape::Record(Vec::new()),
            None => Tape::Off,
        };
        let (step, tape, rng, grown) = self.run(
            run::On {
                thread: task.state,
                key: task.key,
                first: false,
            },
            host,
            timeout,
            tape,
            task.rng.get(),
        );
        task.rng.set(rng);
        // (Matched whole, so that a tape that is off is not handed to its drop.)
        match tape {
            Tape::Off => {}
            Tape::Record(inputs) => {
                if let Some(journal) = &mut *task.journal.borrow_mut()
                    && matches!(step, Step::Waiting { .. })
                {
                    journal.runs.push(run_record(inputs, &step));
                }
            }
            replay @ Tape::Replay { .. } => drop(replay),
        }
        if self.ran_out.load(Ordering::Relaxed)
            && let Ok(noop) = self.lua.create_function(|_, ()| Ok(()))
        {
            // What the failed run left on its stack goes with it.
            let _ = task.thread.reset(noop);
        }
        self.settle(task.key, grown, step)
    }

    /// Accounts for what a run of script `key` left in the state (see `memory.rs`), and names
    /// the limit a failed run hit.
    fn settle(&mut self, key: u64, grown: i64, step: Step) -> Step {
        let mut roots = memory::Roots {
            shared: &self.shared_roots,
            compiled: &mut self.compiled,
            envs: &mut self.envs,
        };
        // Read first: a swap is a locked instruction, and runs seldom run out.
        if self.ran_out.load(Ordering::Relaxed) && self.ran_out.swap(false, Ordering::Relaxed) {
            let error = self.ledger.out_of_memory(&self.lua, &mut roots, key);
            return Step::Failed { error };
        }
        // A run that left the state as it found it (a waiting script resumed that waits
        // again, most often) changes no account (see `Ledger::after_run`).
        let reset = match grown {
            0 => None,
            _ => self.ledger.after_run(&self.lua, &mut roots, key, grown),
        };
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
        // The run's state is borrowed under mlua's lock (see `RunCell`).
        self.lua.exec_raw_lua(|_| {
            let mut state = lock(&self.shared);
            state.tripped = false;
            state.deadline = timeout.map(|t| Instant::now() + t);
            if let Some(t) = timeout {
                state.limit = t;
            }
        });
    }
}

/// The record of a run that ended waiting.
fn run_record(inputs: Vec<Input>, step: &Step) -> RunRecord {
    match step {
        Step::Waiting { wake, effects } => RunRecord {
            inputs,
            wake: wake.clone(),
            actions: journal::digest(effects),
        },
        _ => RunRecord {
            inputs,
            wake: None,
            actions: 0,
        },
    }
}

/// The host of a replay: every value comes from the record, none from here.
struct Replaying;

impl Host for Replaying {
    fn field(&self, _: &mut Out<'_>, root: &str, _: &str) -> mlua::Result<()> {
        Err(mlua::Error::RuntimeError(format!(
            "internal: `{root}` read from the host during a replay"
        )))
    }
}

/// "5 s", "250 ms".
pub fn human(d: Duration) -> String {
    if d.as_millis() >= 1000 && d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;
