//! The state every clone of a `Warden` shares, and reloading it: the program in force (swapped
//! whole on reload), the store, the event bus, the users' choices (polled for other processes'
//! changes), knowledge enrichment.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::Instant;

use serde_json::Value as Json;
use tokio::sync::broadcast;
use warden_input::Diagnostic;
use warden_load::{Capabilities, Hook, ModeSource, RuleSource, load, load_modes};
use warden_store::Store;

use crate::knowledge::{KnowledgeConfig, KnowledgeState};
use warden_control::{Controls, POLL_INTERVAL};
use warden_program::program::Program;

/// An event a rule published with `emit_event`.
#[derive(Debug, Clone, PartialEq)]
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

/// What `Warden::reload` did.
#[derive(Debug, Clone)]
pub struct Reload {
    /// Whether the files as they are now are in force. False when the change introduced an
    /// error: the previous program then stays in force.
    pub applied: bool,
    /// The program generation in force after the reload.
    pub generation: u64,
    /// Every problem found in the files as they are now.
    pub diagnostics: Vec<Diagnostic>,
    /// The errors the change introduced (empty when it was applied).
    pub introduced: Vec<Diagnostic>,
}

/// Settings of a `Warden`.
#[derive(Debug, Clone)]
pub struct Options {
    /// How many events a session's history keeps of each list.
    pub history_limit: usize,
    /// Share of ticks recorded in the execution log (0: off).
    pub log_sample: f64,
    /// The limits of every Lua script.
    pub script_limits: warden_lua::Limits,
    /// Most values a waiting script's replay record may hold (durable sessions).
    pub journal_limit: usize,
    /// The tools whose input holds a shell command (`tool.shell`).
    pub shell_tools: warden_load::ShellTools,
}

/// What `lock` holds now (a writer that panicked left a whole value: it is still in force).
pub(crate) fn current<T>(lock: &RwLock<Arc<T>>) -> Arc<T> {
    lock.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// The program and the users' choices a session ticks under, kept from one tick to the next
/// ([`Shared::in_force`]).
pub(crate) struct InForce {
    /// `Shared::swaps` when they were read.
    swaps: u64,
    pub(crate) program: Arc<Program>,
    pub(crate) controls: Arc<Controls>,
}

/// What every clone of a `Warden` shares: the program in force, the store, the
/// bus, the users' choices, knowledge enrichment, and how to load the files again.
pub struct Shared {
    /// The program in force, swapped whole by a reload (`Shared::reload` alone: it counts the
    /// swap in `swaps`).
    pub program: RwLock<Arc<Program>>,
    /// The store: plugin state, the execution log, users' choices, saved sessions.
    pub store: Store,
    /// The events rules emit, made with the first subscriber (until then an event has no one
    /// to reach, and the channel's buffer, some hundred kilobytes, is not worth making for a
    /// process that ticks once).
    pub bus: std::sync::OnceLock<broadcast::Sender<BusEvent>>,
    /// How many events the bus holds for a slow subscriber.
    pub bus_capacity: usize,
    /// The settings the Warden was built with.
    pub config: Options,
    /// Where the rules are loaded from.
    pub sources: Vec<RuleSource>,
    /// What the rules may do (for example, whether scripts may make decisions).
    pub capabilities: Capabilities,
    /// Where the modes are loaded from, if any.
    pub modes: Option<ModeSource>,
    /// How a reload compiles the rules: as the first program was.
    pub compilation: warden_program::program::Compilation,
    /// The number of the next session opened without an id.
    pub next_session: AtomicU64,
    /// Held by a reload, so that two reloads do not interleave.
    pub reload_lock: Mutex<()>,
    /// The users' choices (rules on or off, setting values), as last read from the store
    /// (by `Shared::refresh_controls` alone: it counts the swap in `swaps`).
    pub controls: RwLock<Arc<Controls>>,
    /// How many times `program` or `controls` was swapped: counted after each swap, its lock
    /// still held. A session keeps both from tick to tick ([`Shared::in_force`]) and reads
    /// them again only when this moved: a read of either lock, and the count of the `Arc` it
    /// hands out, are four locked instructions at every tick. (Replace either only as
    /// `reload` and `refresh_controls` do: a session would keep a value swapped uncounted.)
    pub swaps: AtomicU64,
    /// When the store was last polled for changes by other processes ([`monotonic_millis`]).
    pub polled_at: AtomicU64,
    /// The store's `data_version` at that poll (SQLite: other connections' commits;
    /// PostgreSQL: notifications of changed choices heard by its listener).
    pub data_version: AtomicI64,
    /// How notifications are written into the agent's context.
    pub renderer: crate::render::Renderer,
    /// Knowledge enrichment, when configured.
    pub knowledge_config: Option<KnowledgeConfig>,
    /// Knowledge enrichment's sources and index, as last loaded.
    pub knowledge: RwLock<Arc<KnowledgeState>>,
    /// Why the database could not be opened, when the Warden runs without it.
    pub store_unavailable: Option<String>,
    /// The tools not declared shells whose input held a `command` string, each warned of once.
    pub undeclared_shells: Mutex<std::collections::BTreeSet<String>>,
}

impl Shared {
    /// The program in force.
    pub fn program(&self) -> Arc<Program> {
        current(&self.program)
    }

    /// At a tool call, the warning for a tool that is not declared a shell but whose input
    /// holds a `command` string: once per tool name, the first time (see
    /// [`Session::undeclared_shell_tool`](crate::session::Session::undeclared_shell_tool)).
    pub(crate) fn undeclared_shell_tool(
        &self,
        hook: Hook,
        event: &warden_context::event::Event,
    ) -> Option<String> {
        if hook != Hook::OnToolCall {
            return None;
        }
        let tool = event.tool.as_ref()?;
        if self.config.shell_tools.field(&tool.name).is_some()
            || !tool.arguments.get("command").is_some_and(Json::is_string)
        {
            return None;
        }
        let mut warned = self
            .undeclared_shells
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if warned.len() >= 1024 || !warned.insert(tool.name.clone()) {
            return None;
        }
        Some(format!(
            "the tool `{name}` is given a `command`, but it is not declared a shell, so Warden does not judge the command it runs (`tool.shell` is empty for it): declare it in warden.toml (`[shell] tools = [\"{name}\"]`), or with `shell_tools` (Python) or `--shell-tool` (warden serve)",
            name = tool.name
        ))
    }

    /// The users' choices, brought up to date first (see [`Shared::poll_controls`]).
    pub fn controls(&self) -> Arc<Controls> {
        self.poll_controls();
        current(&self.controls)
    }

    /// The program and the users' choices in force, the choices brought up to date first (as
    /// [`Shared::controls`] does): `kept` when neither was swapped since it was read (no lock
    /// taken, no count changed), else both read again. Not while a transaction holds the
    /// store's connection: a new read of the users' choices holds their lock while it reads
    /// the store, so a reader of that lock holding the connection could wait for ever.
    pub(crate) fn in_force(&self, kept: Option<InForce>) -> InForce {
        self.poll_controls();
        let swaps = self.swaps.load(Ordering::Acquire);
        match kept {
            Some(kept) if kept.swaps == swaps => kept,
            // A swap after the count was read is seen at the next tick: the count moved again.
            _ => InForce {
                swaps,
                program: self.program(),
                controls: current(&self.controls),
            },
        }
    }

    /// The program in force, in `kept`, when a swap was counted since `kept` was read (the
    /// users' choices stay as read: the next [`Shared::in_force`] reads both again, the count
    /// in `kept` being the older one). Safe while a transaction holds the store's connection:
    /// it takes the program's lock alone, and a reload never reads the store holding it.
    pub(crate) fn program_since(&self, kept: &mut InForce) {
        if self.swaps.load(Ordering::Acquire) != kept.swaps {
            kept.program = self.program();
        }
    }

    /// At most every [`POLL_INTERVAL`], asks the store whether another process changed the
    /// users' choices, and reads them again if so (on PostgreSQL the question costs no round
    /// trip: a listener connection counts the changes announced).
    fn poll_controls(&self) {
        let now = monotonic_millis();
        let last = self.polled_at.load(Ordering::Relaxed);
        let due = now.saturating_sub(last) >= POLL_INTERVAL.as_millis() as u64;
        if due
            && self
                .polled_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            match self.store.data_version() {
                Ok(v) if self.data_version.swap(v, Ordering::Relaxed) != v => {
                    self.refresh_controls();
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not check the store for changes"),
            }
        }
    }

    /// The knowledge enrichment in force (loaded or not, registered or not).
    pub fn knowledge(&self) -> Arc<KnowledgeState> {
        current(&self.knowledge)
    }

    /// Reads the users' choices again. On a store error the previous ones stay in force.
    pub fn refresh_controls(&self) {
        let mut slot = self.controls.write().unwrap_or_else(|p| p.into_inner());
        match Controls::load(&self.store, slot.generation + 1) {
            Ok(c) => {
                *slot = Arc::new(c);
                self.swaps.fetch_add(1, Ordering::Release);
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read rule and setting choices; the previous ones stay in force")
            }
        }
    }

    /// Every folder to watch for changes: those of the rules, plugins and scripts, and of the
    /// knowledge sources.
    pub fn watched_folders(&self) -> Vec<std::path::PathBuf> {
        let mut folders = self.program().folders().to_vec();
        if let Some(config) = &self.knowledge_config {
            for f in self.knowledge().folders(config) {
                if !folders.contains(&f) {
                    folders.push(f);
                }
            }
        }
        folders
    }

    /// Reads and compiles the rule, manifest and script files again and, unless the change
    /// broke something, swaps the new program in between ticks. Sessions keep their facts and
    /// decorator memory (by rule id), and their running trees whose rules did not change.
    ///
    /// A change that introduces an error (one the program in force does not have) is not
    /// applied: the last good program stays in force, and [`Reload::introduced`] says what
    /// is wrong, with file and line. Errors that were already there (a file broken since
    /// startup, skipped then too) do not block other changes.
    pub fn reload(&self) -> Reload {
        let _guard = self.reload_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.program();
        let knowledge_before = self.knowledge();
        let knowledge = self
            .knowledge_config
            .as_ref()
            .map(|c| knowledge_before.reload(c));
        let mut loaded = load(&self.sources, &self.capabilities);
        if let Some(m) = &self.modes {
            load_modes(m, &mut loaded);
        }
        let candidate = Program::compile_with(loaded, current.generation + 1, self.compilation);
        let known: std::collections::HashSet<_> = current
            .diagnostics()
            .iter()
            .chain(&knowledge_before.diagnostics)
            .filter(|d| d.is_error())
            .map(|d| (d.path().to_path_buf(), d.line(), d.message().to_string()))
            .collect();
        let mut all = candidate.diagnostics().to_vec();
        if let Some(k) = &knowledge {
            all.extend(k.diagnostics.iter().cloned());
        }
        let introduced: Vec<Diagnostic> = all
            .iter()
            .filter(|d| {
                d.is_error()
                    && !known.contains(&(d.path().to_path_buf(), d.line(), d.message().to_string()))
            })
            .cloned()
            .collect();
        let diagnostics = all;
        if !introduced.is_empty() {
            tracing::error!(
                problems = introduced.len(),
                first = %introduced[0],
                "the changed rule files have errors; the previous rules stay in force"
            );
            return Reload {
                applied: false,
                generation: current.generation,
                diagnostics,
                introduced,
            };
        }
        let generation = candidate.generation;
        if let Some(k) = knowledge {
            match self.knowledge.write() {
                Ok(mut slot) => *slot = Arc::new(k),
                Err(poisoned) => *poisoned.into_inner() = Arc::new(k),
            }
        }
        let program = Arc::new(candidate);
        let mut slot = self.program.write().unwrap_or_else(PoisonError::into_inner);
        *slot = program;
        self.swaps.fetch_add(1, Ordering::Release);
        drop(slot);
        tracing::info!(generation, "rules reloaded");
        Reload {
            applied: true,
            generation,
            diagnostics,
            introduced,
        }
    }
}

/// Milliseconds on a monotonic clock, for [`Shared::controls`]' polling: the coarse clock where
/// the system has one (Linux), whose read is a few instructions where the precise clock's is a
/// few dozen (every tick reads it). Its resolution, a few milliseconds, is far finer than the
/// polling interval it times.
pub fn monotonic_millis() -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a timespec the call may write, and nothing else is touched;
        // CLOCK_MONOTONIC_COARSE is Linux's since 2.6.32.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
            let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
            let millis = u64::try_from(ts.tv_nsec).unwrap_or(0) / 1_000_000;
            return secs.saturating_mul(1000).saturating_add(millis);
        }
    }
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    u64::try_from(EPOCH.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}
