//! [`Warden`]: the supervisor an agent loop embeds. It holds the compiled program, the store
//! and the event bus, and opens sessions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value as Json;
use tokio::sync::broadcast;
use warden_input::Diagnostic;
use warden_load::{Capabilities, DEFAULT_ID, RuleSource, load};
use warden_store::{ALL_PROJECTS, RuleState, Store};

use crate::watch::{Watch, WatchError};
use warden_context::facts::DEFAULT_HISTORY_LIMIT;
use warden_control::{
    ControlError, Controls, RuleInfo, SettingInfo, find_rule, find_setting, rule_info, setting_info,
};
use warden_program::program::Program;
use warden_session::error::Error;
use warden_session::knowledge::{KnowledgeConfig, KnowledgeState};
use warden_session::session::{Session, SessionOptions};
use warden_session::shared::{BusEvent, Options, Reload, Shared};

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
/// assert_eq!(&*outcome.injected().first().unwrap().message, "Token budget at 85%. Consider wrapping up or summarizing.");
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

/// Whether nothing is at `path` (one that cannot be read is the loader's to report).
fn missing(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// Builds a [`Warden`].
#[derive(Debug, Default)]
pub struct WardenBuilder {
    sources: Vec<RuleSource>,
    capabilities: std::collections::BTreeSet<String>,
    any_capability: bool,
    store: Option<Store>,
    history_limit: Option<usize>,
    log_sample: f64,
    strict: bool,
    compilation: warden_program::program::Compilation,
    bus_capacity: Option<usize>,
    script_limits: Option<warden_lua::Limits>,
    journal_limit: Option<usize>,
    render_template: Option<String>,
    retention_days: Option<f64>,
    knowledge: Option<KnowledgeConfig>,
    modes: Option<warden_load::ModeSource>,
    store_unavailable: Option<String>,
    shell_tools: warden_load::ShellTools,
}

impl WardenBuilder {
    /// A builder for an installation's configuration (`warden.toml`): its rule and plugin
    /// folders, capabilities, modes, knowledge, log sampling and script limits, and its
    /// database, opened.
    pub fn from_config(config: &warden_load::Config) -> Result<Self, Error> {
        let mut b = Warden::builder();
        if config.builtin {
            b = b.builtin_rules();
        }
        for dir in &config.rules {
            b = b.rules_dir(dir);
        }
        for dir in &config.plugins {
            b = b.plugins_dir(dir);
        }
        b = b.capabilities(config.capabilities.iter().cloned());
        b.modes.clone_from(&config.modes);
        if let Some((sources, root)) = &config.knowledge {
            b = b
                .knowledge(sources, root)
                .knowledge_at_query_start(config.knowledge_at_query_start);
        }
        if let Some(db) = &config.database {
            let timeout = config
                .lock_timeout
                .unwrap_or(warden_store::DEFAULT_LOCK_TIMEOUT);
            let store = Store::open_with_lock_timeout(db, timeout)?;
            if config.synchronous_full {
                store.set_synchronous_full(true)?;
            }
            b = b.store(store);
        }
        if let Some(n) = config.journal_limit {
            b = b.journal_limit(n);
        }
        if let Some(t) = &config.render_template {
            b = b.render_template(t);
        }
        b.retention_days = config.retention_days;
        b.shell_tools = config.shell.clone();
        let defaults = warden_lua::Limits::default();
        Ok(b.execution_log_sample(config.log_sample)
            .script_limits(warden_lua::Limits {
                timeout: config.script_timeout.unwrap_or(defaults.timeout),
                memory: config.script_memory.unwrap_or(defaults.memory),
            }))
    }

    /// Declares `tool` a shell whose input's `field` holds the command it runs, for
    /// `tool.shell` (Warden's defaults, Claude Code's `Bash` among them, need no declaring; see
    /// [`warden_load::DEFAULT_SHELL_TOOLS`]).
    pub fn shell_tool(mut self, tool: impl Into<String>, field: impl Into<String>) -> Self {
        self.shell_tools.declare(tool, field);
        self
    }

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

    /// Loads every plugin of a folder: each folder in it with a `manifest.toml`; or, given
    /// `builtin:NAME`, the plugin of that name that ships with Warden (`builtin:guardrails`).
    /// Plugins that require a capability the host did not declare (see
    /// [`WardenBuilder::capabilities`]) are skipped with a warning.
    pub fn plugins_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        let source = match dir
            .to_str()
            .and_then(|s| s.strip_prefix(warden_load::BUILTIN_PREFIX))
        {
            Some(name) => RuleSource::BuiltinPlugin(name.to_string()),
            None => RuleSource::Plugins(dir),
        };
        self.sources.push(source);
        self
    }

    /// Declares capabilities the host has (the tools it offers, usually), for plugins that
    /// require them (`[capabilities] requires` in a manifest). Adds to those already declared.
    pub fn capabilities<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.capabilities.extend(names.into_iter().map(Into::into));
        self
    }

    /// Loads plugins whatever they require (for checking plugins away from their host, as
    /// `warden check` does).
    pub fn any_capability(mut self) -> Self {
        self.any_capability = true;
        self
    }

    /// Turns knowledge enrichment on: the sources file (`[[source]]` entries, the budget, the
    /// mode thresholds, the health gate) and the project root every source path is relative
    /// to. Each query is then enriched at `on_query_start` ([`Outcome::enrichment`]) once the
    /// sources pass the health gate, and rules can use the `enrich_context` action.
    pub fn knowledge(
        mut self,
        sources: impl Into<PathBuf>,
        project_root: impl Into<PathBuf>,
    ) -> Self {
        self.knowledge = Some(KnowledgeConfig {
            sources: sources.into(),
            root: project_root.into(),
            at_query_start: true,
        });
        self
    }

    /// Whether every query is enriched at `on_query_start` (true by default, once
    /// [`WardenBuilder::knowledge`] is set); when false, only rules' `enrich_context` actions
    /// enrich.
    pub fn knowledge_at_query_start(mut self, on: bool) -> Self {
        if let Some(k) = &mut self.knowledge {
            k.at_query_start = on;
        }
        self
    }

    /// Chooses the active rules by mode, from a modes file: modes in priority order, each
    /// with a condition and the rule sets it activates (see the book's "Modes" chapter).
    pub fn modes_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.modes = Some(warden_load::ModeSource::File(path.into()));
        self
    }

    /// Chooses the active rules by one of Warden's built-in mode files: `context-window`
    /// (the seed's table: unavailable under 30 000 tokens, reduced to 100 000, then full) or
    /// `research-or-coding` (by the words of the query).
    pub fn builtin_modes(mut self, name: impl Into<String>) -> Self {
        self.modes = Some(warden_load::ModeSource::Builtin(name.into()));
        self
    }

    /// Uses `store` for plugin state and the execution log (an in-memory store otherwise).
    pub fn store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Says that the database could not be opened, and why (`StoreError`'s message): the
    /// Warden then runs without one, so that every rule that needs no stored state still
    /// decides (a host that must answer now, a Claude Code hook, answers on them). Rules that
    /// read or write shared plugin state fail with `reason` (a guard set to fail closed then
    /// denies); users' choices are the defaults (every rule on, the manifests' settings);
    /// sessions start empty; every outcome says that nothing was saved
    /// ([`Outcome::unsaved`](crate::Outcome::unsaved)). An in-memory store stands in for the
    /// database, unless the builder was given one.
    pub fn store_unavailable(mut self, reason: impl Into<String>) -> Self {
        self.store_unavailable = Some(reason.into());
        self
    }

    /// How many recent messages and tool calls a session's history keeps (default 50).
    pub fn history_limit(mut self, limit: usize) -> Self {
        self.history_limit = Some(limit);
        self
    }

    /// Records every rule evaluation in the store's execution log (off by default): which
    /// rule, at which hook, whether it matched and acted, how long it took, what failed.
    pub fn execution_log(mut self, on: bool) -> Self {
        self.log_sample = if on { 1.0 } else { 0.0 };
        self
    }

    /// Records a share of ticks in the execution log: `0.1` records about one tick in ten
    /// (every evaluation of a recorded tick), chosen evenly per session; `0` turns the log
    /// off, `1` records every tick.
    pub fn execution_log_sample(mut self, share: f64) -> Self {
        self.log_sample = if share.is_nan() {
            0.0
        } else {
            share.clamp(0.0, 1.0)
        };
        self
    }

    /// Fails the build if any rule file has an error (by default such rules are skipped and
    /// reported through [`Warden::diagnostics`]).
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Compiles each rule when a tick first needs it instead of at build
    /// ([`Compilation::OnDemand`](crate::Compilation::OnDemand)): for a process that handles one
    /// event, like a Claude Code hook, which then compiles only the rules of the hooks it ticks.
    /// What ticks decide is the same. [`Warden::diagnostics`] (and whatever lists rules,
    /// plugins or the folders to watch) compiles every rule first, and reports every problem;
    /// so does [`WardenBuilder::build`] with [`WardenBuilder::strict`]. A reload compiles on
    /// demand too.
    pub fn compile_on_demand(mut self, on: bool) -> Self {
        self.compilation = if on {
            warden_program::program::Compilation::OnDemand
        } else {
            warden_program::program::Compilation::Eager
        };
        self
    }

    /// Limits of Lua scripts: the time limit of one run (5 s by default; a rule may set its
    /// own with `[condition] timeout`) and the memory of a session's Lua state (32 MiB).
    pub fn script_limits(mut self, limits: warden_lua::Limits) -> Self {
        self.script_limits = Some(limits);
        self
    }

    /// Most values a waiting script's replay record may hold in a durable session (see
    /// [`Warden::open_session`]); past it the script is stopped with an error (default
    /// 100 000).
    pub fn journal_limit(mut self, values: usize) -> Self {
        self.journal_limit = Some(values.max(1));
        self
    }

    /// Writes the notifications due at a hook into the agent's context with this minijinja
    /// template instead of Warden's own rendering ([`Outcome::rendered`]). It sees
    /// `notifications`, most urgent first, each with `message`, `category`, `priority` and
    /// `rule`. A template that does not compile stops [`WardenBuilder::build`].
    pub fn render_template(mut self, template: impl Into<String>) -> Self {
        self.render_template = Some(template.into());
        self
    }

    /// How many emitted events the bus buffers for a slow subscriber (default 1024).
    pub fn bus_capacity(mut self, capacity: usize) -> Self {
        self.bus_capacity = Some(capacity.max(1));
        self
    }

    /// Loads and compiles the rules and opens the store. A rule folder, plugins folder or
    /// modes file that does not exist is [`Error::Missing`]: a supervisor built without the
    /// rules it was given would be silent where they refuse.
    pub fn build(self) -> Result<Warden, Error> {
        for source in &self.sources {
            let (what, path) = match source {
                RuleSource::Builtin => continue,
                RuleSource::BuiltinPlugin(name) => {
                    let spec = format!("{}{name}", warden_load::BUILTIN_PREFIX);
                    if let Some(Err(why)) = warden_load::builtin_plugin(&spec) {
                        return Err(Error::Config(why));
                    }
                    continue;
                }
                RuleSource::Dir(p) => ("rule folder", p),
                RuleSource::Plugins(p) => ("plugins folder", p),
            };
            if missing(path) {
                return Err(Error::Missing {
                    what,
                    path: path.clone(),
                });
            }
        }
        if let Some(warden_load::ModeSource::File(path)) = &self.modes
            && missing(path)
        {
            return Err(Error::Missing {
                what: "modes file",
                path: path.clone(),
            });
        }
        let store = match self.store {
            Some(s) => s,
            None => Store::in_memory()?,
        };
        let capabilities = if self.any_capability {
            Capabilities::Any
        } else {
            Capabilities::Only(self.capabilities)
        };
        let mut loaded = load(&self.sources, &capabilities);
        if let Some(m) = &self.modes {
            warden_load::load_modes(m, &mut loaded);
        }
        let program = Program::compile_with(loaded, 0, self.compilation);
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
        let controls = Controls::load(&store, 0)?;
        let data_version = store.data_version()?;
        let knowledge = self
            .knowledge
            .as_ref()
            .map(KnowledgeState::load)
            .unwrap_or_default();
        if self.strict && knowledge.diagnostics.iter().any(Diagnostic::is_error) {
            return Err(Error::Rules(
                knowledge
                    .diagnostics
                    .into_iter()
                    .filter(Diagnostic::is_error)
                    .collect(),
            ));
        }
        let renderer = warden_session::render::Renderer::new(self.render_template.as_deref())
            .map_err(Error::Config)?;
        if let Some(days) = self.retention_days {
            let before = now_secs() - days * 86_400.0;
            match store.prune_sessions(before) {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    sessions = n,
                    days,
                    "saved sessions past their retention deleted"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "saved sessions past their retention could not be deleted")
                }
            }
        }
        Ok(Warden {
            shared: Arc::new(Shared {
                renderer,
                program: RwLock::new(Arc::new(program)),
                store,
                bus: std::sync::OnceLock::new(),
                bus_capacity: self.bus_capacity.unwrap_or(1024),
                config: Options {
                    history_limit: self.history_limit.unwrap_or(DEFAULT_HISTORY_LIMIT),
                    log_sample: self.log_sample,
                    script_limits: self.script_limits.unwrap_or_default(),
                    journal_limit: self
                        .journal_limit
                        .unwrap_or(warden_session::session::DEFAULT_JOURNAL_LIMIT),
                    shell_tools: self.shell_tools,
                },
                sources: self.sources,
                capabilities,
                modes: self.modes,
                compilation: self.compilation,
                next_session: AtomicU64::new(1),
                reload_lock: Mutex::new(()),
                controls: RwLock::new(Arc::new(controls)),
                polled_at: AtomicU64::new(warden_session::shared::monotonic_millis()),
                swaps: AtomicU64::new(0),
                data_version: AtomicI64::new(data_version),
                knowledge_config: self.knowledge,
                store_unavailable: self.store_unavailable,
                knowledge: RwLock::new(Arc::new(knowledge)),
                undeclared_shells: Mutex::default(),
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

    /// A supervisor running the same program on `store`, with a bus of its own: for trials
    /// that must leave no trace in the real store or reach no real subscriber (a rule tried
    /// by hand from a settings page, on an in-memory store). The users' choices are those
    /// `store` holds; a reload of either Warden does not reach the other.
    pub fn with_store(&self, store: Store) -> Result<Warden, Error> {
        let s = &self.shared;
        let controls = Controls::load(&store, 0)?;
        let data_version = store.data_version()?;
        Ok(Warden {
            shared: Arc::new(Shared {
                renderer: s.renderer.clone(),
                program: RwLock::new(s.program()),
                store,
                bus: std::sync::OnceLock::new(),
                bus_capacity: 64,
                config: s.config.clone(),
                sources: s.sources.clone(),
                capabilities: s.capabilities.clone(),
                modes: s.modes.clone(),
                compilation: s.compilation,
                next_session: AtomicU64::new(1),
                reload_lock: Mutex::new(()),
                controls: RwLock::new(Arc::new(controls)),
                polled_at: AtomicU64::new(warden_session::shared::monotonic_millis()),
                swaps: AtomicU64::new(0),
                data_version: AtomicI64::new(data_version),
                knowledge_config: s.knowledge_config.clone(),
                knowledge: RwLock::new(s.knowledge()),
                // A store of its own: what it needs is there.
                store_unavailable: None,
                undeclared_shells: Mutex::default(),
            }),
        })
    }

    /// Opens the session `id`, saved in the store after every tick (in the same transaction
    /// as the tick's state writes and execution-log rows): read back from the store when it
    /// was saved there, new otherwise. With a database file, the session survives the process:
    /// any process that opens `id` on the same database carries on where the last tick left
    /// it. Two processes ticking it at once never lose an event: a tick that finds the session
    /// saved by another since it read it runs again on the newer session.
    ///
    /// ```
    /// use warden_core::{Event, Hook, SessionOptions, Warden};
    ///
    /// let warden = Warden::builder().builtin_rules().build().unwrap();
    /// let mut first = warden.open_session("s1", SessionOptions::default()).unwrap();
    /// first.tick(Hook::OnToolFailure, Event::tool_failure("web", "timeout"));
    /// first.tick(Hook::OnToolFailure, Event::tool_failure("web", "timeout"));
    /// drop(first);
    /// // Later, perhaps in another process:
    /// let mut again = warden.open_session("s1", SessionOptions::default()).unwrap();
    /// let outcome = again.tick(Hook::OnToolFailure, Event::tool_failure("web", "timeout"));
    /// assert_eq!(outcome.fired(), ["repeated-failure-warning"]);
    /// ```
    pub fn open_session(&self, id: &str, opts: SessionOptions) -> Result<Session, Error> {
        Session::open(self.shared.clone(), id.to_string(), &opts)
    }

    /// Deletes the saved session `id`; whether there was one. A copy of it still open in a
    /// process starts afresh at its next tick.
    pub fn delete_session(&self, id: &str) -> Result<bool, Error> {
        Ok(self.shared.store.delete_session(id)?)
    }

    /// The saved sessions, most recently touched first, at most `limit`.
    pub fn saved_sessions(&self, limit: usize) -> Result<Vec<warden_store::SessionSummary>, Error> {
        Ok(self.shared.store.sessions(limit)?)
    }

    /// Deletes the saved sessions not touched for `days` days; how many.
    pub fn prune_sessions(&self, days: f64) -> Result<usize, Error> {
        Ok(self
            .shared
            .store
            .prune_sessions(now_secs() - days * 86_400.0)?)
    }

    /// Writes notifications as one block for the agent's context, as [`Outcome::rendered`]
    /// does for one tick: for a host that answers an event with several ticks (Claude Code's
    /// prompt is a query and a turn) and injects them together.
    /// Takes any list of them: a slice, or several outcomes' [`Outcome::injected`] chained.
    pub fn render<'a>(
        &self,
        notifications: impl IntoIterator<Item = &'a crate::Notification>,
    ) -> Option<String> {
        self.shared.renderer.render(notifications).0
    }

    /// Subscribes to the events rules emit with `emit_event`.
    pub fn subscribe(&self) -> broadcast::Receiver<BusEvent> {
        self.shared
            .bus
            .get_or_init(|| broadcast::channel(self.shared.bus_capacity).0)
            .subscribe()
    }

    /// The program in force.
    pub fn program(&self) -> Arc<Program> {
        self.shared.program()
    }

    /// Problems found in the rule files (the rules without problems are loaded), and in the
    /// knowledge sources when enrichment is configured.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut d = self.program().diagnostics().to_vec();
        d.extend(self.shared.knowledge().diagnostics.iter().cloned());
        d
    }

    /// The knowledge pipeline as loaded (`None` when enrichment is not configured or its
    /// sources file did not load), and its health (whether it registered, and why not).
    pub fn knowledge(
        &self,
    ) -> Option<(Arc<warden_knowledge::Knowledge>, warden_knowledge::Health)> {
        let k = self.shared.knowledge();
        Some((k.knowledge.clone()?, k.health.clone()?))
    }

    /// Every folder to watch for changes: those of the rules, plugins and scripts, and of the
    /// knowledge sources.
    pub fn watched_folders(&self) -> Vec<PathBuf> {
        self.shared.watched_folders()
    }

    /// Watches the files this Warden was built from and reloads when they change, logging
    /// what each reload did through `tracing`. Keep the returned [`Watch`] alive.
    pub fn watch(&self) -> Result<Watch, WatchError> {
        self.watch_with(|report| {
            if report.applied {
                tracing::info!(
                    generation = report.generation,
                    "rules reloaded after a file change"
                );
            } else {
                for d in &report.introduced {
                    tracing::error!("{d}");
                }
            }
        })
    }

    /// Like [`Warden::watch`], calling `on_reload` after each reload (from the watching
    /// thread).
    pub fn watch_with(
        &self,
        on_reload: impl Fn(&Reload) + Send + 'static,
    ) -> Result<Watch, WatchError> {
        crate::watch::start(self.shared.clone(), on_reload)
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// Why the database could not be opened, when this Warden runs without it
    /// ([`WardenBuilder::store_unavailable`]).
    pub fn store_unavailable(&self) -> Option<&str> {
        self.shared.store_unavailable.as_deref()
    }

    // What users choose without editing files: rules on and off, setting values.

    /// Every loaded rule as `user` sees it (settings as in `project`), in priority order per
    /// hook.
    pub fn rule_list(&self, user: &str, project: &str) -> Vec<RuleInfo> {
        let program = self.program();
        let controls = self.shared.controls();
        // The rules that compile (all of them, unless compiled on demand).
        let mut order: Vec<usize> = (0..program.rules.len())
            .filter(|&i| program.rules[i].body().is_some())
            .collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&program.rules[a], &program.rules[b]);
            (ra.def.trigger, std::cmp::Reverse(ra.def.priority), &ra.key).cmp(&(
                rb.def.trigger,
                std::cmp::Reverse(rb.def.priority),
                &rb.key,
            ))
        });
        order
            .into_iter()
            .map(|i| rule_info(&program, &controls, i, user, project))
            .collect()
    }

    /// One rule as `user` sees it.
    pub fn rule_info(
        &self,
        user: &str,
        project: &str,
        rule: &str,
    ) -> Result<RuleInfo, ControlError> {
        let program = self.program();
        let i = find_rule(&program, rule)?;
        Ok(rule_info(
            &program,
            &self.shared.controls(),
            i,
            user,
            project,
        ))
    }

    /// Switches a rule on or off for `user`, from the next tick. A core rule cannot be
    /// switched off, and the error says why.
    pub fn set_rule_enabled(
        &self,
        user: &str,
        rule: &str,
        enabled: bool,
    ) -> Result<RuleInfo, ControlError> {
        let state = if enabled {
            RuleState::On
        } else {
            RuleState::Off
        };
        self.set_rule_state(user, rule, state)
    }

    /// Switches a rule on, off or to shadow for `user`, from the next tick. A rule in shadow
    /// is evaluated and what it would have decided recorded, but nothing it decides applies.
    /// A core rule can be neither switched off nor put in shadow, and the error says why.
    pub fn set_rule_state(
        &self,
        user: &str,
        rule: &str,
        state: RuleState,
    ) -> Result<RuleInfo, ControlError> {
        let program = self.program();
        let i = find_rule(&program, rule)?;
        let r = &program.rules[i];
        if r.def.core && state != RuleState::On {
            return Err(ControlError::CoreRule {
                rule: r.key.to_string(),
                to: state,
                file: (&*r.def.plugin != warden_load::BUILTIN_PLUGIN)
                    .then(|| r.def.source.path().display().to_string()),
            });
        }
        self.write_toggle(&program, i, user, Some(state))
    }

    /// Puts every rule of `plugin` on, off or in shadow for `user` (`None`: forgets the user's
    /// choices, so the files apply again), and returns them as the user now sees them. Its
    /// core rules stay on (they are in the list, on); in shadow, as with `shadow = true` in
    /// its manifest, the rules its files leave off stay off; the other rules change.
    pub fn set_plugin_state(
        &self,
        user: &str,
        plugin: &str,
        state: Option<RuleState>,
    ) -> Result<Vec<RuleInfo>, ControlError> {
        let program = self.program();
        // `builtin:guardrails`, as `warden.toml` names it, is the plugin `guardrails`.
        let plugin = plugin
            .strip_prefix(warden_load::BUILTIN_PREFIX)
            .unwrap_or(plugin);
        let of_plugin: Vec<usize> = (0..program.rules.len())
            .filter(|&i| {
                &*program.rules[i].def.plugin == plugin && program.rules[i].body().is_some()
            })
            .collect();
        if of_plugin.is_empty() {
            let ids: Vec<&str> = program.rules.iter().map(|r| &*r.def.plugin).collect();
            return Err(ControlError::UnknownPlugin {
                plugin: plugin.to_string(),
                suggestion: warden_input::closest(plugin, ids).map(str::to_string),
            });
        }
        let mut infos = Vec::with_capacity(of_plugin.len());
        for i in of_plugin {
            let def = &program.rules[i].def;
            let choice = match state {
                Some(s) if def.core && s != RuleState::On => None,
                Some(RuleState::Shadow) if !def.enabled => None,
                other => other,
            };
            infos.push(self.write_toggle(&program, i, user, choice)?);
        }
        Ok(infos)
    }

    /// Forgets `user`'s choice for a rule: its file's `enabled` and `shadow` apply again.
    pub fn reset_rule(&self, user: &str, rule: &str) -> Result<RuleInfo, ControlError> {
        let program = self.program();
        let i = find_rule(&program, rule)?;
        self.write_toggle(&program, i, user, None)
    }

    /// Writes `user`'s choice for rule `i` (`None`: forgets it) and returns the rule as the
    /// user now sees it.
    fn write_toggle(
        &self,
        program: &Program,
        i: usize,
        user: &str,
        state: Option<RuleState>,
    ) -> Result<RuleInfo, ControlError> {
        self.store()
            .set_toggle(user, &program.rules[i].key, state)?;
        self.shared.refresh_controls();
        Ok(rule_info(
            program,
            &self.shared.controls(),
            i,
            user,
            DEFAULT_ID,
        ))
    }

    /// Every setting of the loaded plugins, as `user` sees them in `project`.
    pub fn setting_list(&self, user: &str, project: &str) -> Vec<SettingInfo> {
        let program = self.program();
        let controls = self.shared.controls();
        (0..program.settings.slots.len())
            .map(|i| setting_info(&program, &controls, i, user, project))
            .collect()
    }

    /// Sets `key` (`plugin.name`) to `value` for `user`: in `project` only, or in all of the
    /// user's projects when `project` is `None`. The value must fit the setting's type and
    /// bounds; the error names the bound it breaks. Takes effect from the next tick.
    pub fn set_setting(
        &self,
        user: &str,
        project: Option<&str>,
        key: &str,
        value: &Json,
    ) -> Result<SettingInfo, ControlError> {
        let program = self.program();
        let slot = find_setting(&program, key)?;
        let def = &program.settings.slots[slot].def;
        let checked = def
            .check(value)
            .map_err(|reason| ControlError::InvalidValue {
                key: key.to_string(),
                reason: reason.0,
            })?;
        self.write_override(&program, slot, user, project, Some(&checked.to_json()))
    }

    /// Like [`Warden::set_setting`], with the value written as text (`12`, `0.75`, `true`,
    /// `brief`), as on a command line.
    pub fn set_setting_text(
        &self,
        user: &str,
        project: Option<&str>,
        key: &str,
        text: &str,
    ) -> Result<SettingInfo, ControlError> {
        let program = self.program();
        let slot = find_setting(&program, key)?;
        let value = program.settings.slots[slot]
            .def
            .parse_text(text)
            .map_err(|reason| ControlError::InvalidValue {
                key: key.to_string(),
                reason: reason.0,
            })?;
        self.set_setting(user, project, key, &value.to_json())
    }

    /// Forgets `user`'s value for `key` (in `project`, or the all-projects value): the
    /// default applies again.
    pub fn reset_setting(
        &self,
        user: &str,
        project: Option<&str>,
        key: &str,
    ) -> Result<SettingInfo, ControlError> {
        let program = self.program();
        let slot = find_setting(&program, key)?;
        self.write_override(&program, slot, user, project, None)
    }

    /// Sets several of `plugin`'s settings for `user` at once, in `project` only or in all the
    /// user's projects (`None`): each `(name, value)`, where a `null` value forgets the user's
    /// value (the default applies again). Every value is checked against the manifest first;
    /// if any does not fit, or names no setting of the plugin, none is set and the error lists
    /// each ([`ControlError::Settings`]). Otherwise all are written in one transaction. Returns
    /// the plugin's settings as the user now sees them there.
    pub fn set_settings(
        &self,
        user: &str,
        project: Option<&str>,
        plugin: &str,
        values: &[(String, Json)],
    ) -> Result<Vec<SettingInfo>, ControlError> {
        let program = self.program();
        let slots = program.settings.of(plugin);
        let declared: Vec<&str> = slots
            .clone()
            .map(|i| program.settings.slots[i].def.name.as_str())
            .collect();
        let mut problems = Vec::new();
        let mut writes: Vec<(&str, Option<Json>)> = Vec::with_capacity(values.len());
        for (name, value) in values {
            let Some(slot) = program.settings.find(plugin, name) else {
                problems.push(warden_control::SettingProblem {
                    setting: name.clone(),
                    message: format!(
                        "plugin `{plugin}` has no setting `{name}`; its settings are: {}",
                        if declared.is_empty() {
                            "none".to_string()
                        } else {
                            declared.join(", ")
                        }
                    ),
                    def: None,
                });
                continue;
            };
            let def = &program.settings.slots[slot].def;
            if value.is_null() {
                writes.push((name, None));
                continue;
            }
            match def.check(value) {
                Ok(checked) => writes.push((name, Some(checked.to_json()))),
                Err(why) => problems.push(warden_control::SettingProblem {
                    setting: name.clone(),
                    message: why.0,
                    def: Some(def.clone()),
                }),
            }
        }
        if !problems.is_empty() {
            return Err(ControlError::Settings {
                plugin: plugin.to_string(),
                problems,
            });
        }
        let rows: Vec<(&str, Option<&Json>)> =
            writes.iter().map(|(n, v)| (*n, v.as_ref())).collect();
        self.store()
            .set_overrides(user, project.unwrap_or(ALL_PROJECTS), plugin, &rows)?;
        self.shared.refresh_controls();
        let controls = self.shared.controls();
        let project = project.unwrap_or(DEFAULT_ID);
        Ok(slots
            .map(|i| setting_info(&program, &controls, i, user, project))
            .collect())
    }

    /// Writes `user`'s value for setting `slot` (`None`: forgets it), in `project` or in all
    /// the user's projects, and returns the setting as the user now sees it.
    fn write_override(
        &self,
        program: &Program,
        slot: usize,
        user: &str,
        project: Option<&str>,
        value: Option<&Json>,
    ) -> Result<SettingInfo, ControlError> {
        let s = &program.settings.slots[slot];
        self.store().set_override(
            user,
            project.unwrap_or(ALL_PROJECTS),
            &s.plugin,
            &s.def.name,
            value,
        )?;
        self.shared.refresh_controls();
        let project = project.unwrap_or(DEFAULT_ID);
        Ok(setting_info(
            program,
            &self.shared.controls(),
            slot,
            user,
            project,
        ))
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
        self.shared.reload()
    }
}

/// Seconds since the Unix epoch.
fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
