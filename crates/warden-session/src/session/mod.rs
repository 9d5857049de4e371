//! A session: one agent conversation. It keeps the facts Warden learns from events, the memory
//! of decorators (cooldowns, fire counts), trees left running, and notifications waiting for
//! their delivery point. [`Session::tick`] runs one hook.
//!
//! - `mod.rs`: the session and its tick.
//! - `attempt.rs`: one attempt at a tick: what is in force, the transaction, the steps.
//! - `step.rs`: one step: a hook's trees ticked on the frame, their effects applied.
//! - `evaluate.rs`: a rule's leaf: gates, condition, script, rendering.
//! - `bonsai.rs`: the bridge to bonsai-bt; trees left running, resumed where they stand (kept
//!   as Warden's own cursor too, from which bonsai's state is built back).
//! - `effects.rs`: state writes, events, log lines, delivery, the execution log.
//! - `ruling.rs`: the decisions and rewrites of a step, merged into one ruling.
//! - `tree_env.rs`: a behavior's tree ticked or halted; what its nodes read and do.
//! - `trees.rs`: what the trees keep between ticks, and how it moves to a new program.
//! - `scripts.rs`: the Lua side: the runtime, waiting scripts, behavior runs.
//! - `keys.rs`: small keys and sets for the tables above.
//! - `durable.rs`: the session saved as plain data (format 3), and read back under any program.
//! - `upgrade.rs`: reading the saves of formats 1 and 2 (bonsai-bt's own value in them).
//! - `stop.rs`: a stop that holds until the next prompt.

mod attempt;
mod bonsai;
mod durable;
mod effects;
mod evaluate;
mod keys;
mod lean;
mod place;
mod ruling;
mod scripts;
mod step;
mod stop;
mod tree_env;
mod trees;
mod upgrade;

use std::cell::OnceCell;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use warden_load::{DEFAULT_ID, Hook};

use crate::shared::Shared;
use durable::{Parts, Snapshot};
use effects::AfterCommit;
use step::Step;
use stop::Stopped;
use trees::Trees;
use warden_context::context::{Frame, StateSource, Unavailable};
use warden_context::event::Event;
use warden_context::facts::SessionFacts;
use warden_control::Resolved;
use warden_program::mode::ModeState;
use warden_program::outcome::{
    Halted, Inject, Lost, ModeChange, Notification, Outcome, Overridden, RuleError,
};
use warden_program::program::Program;

pub use durable::{UnreadableSession, saved_snapshot};
pub use scripts::DEFAULT_JOURNAL_LIMIT;

/// How many times a tick runs again on a session another process saved meanwhile, before it
/// gives up and says its writes were not saved.
const MAX_ATTEMPTS: usize = 32;

/// Options for a new session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The session id (generated when absent).
    pub id: Option<String>,
    /// The user (until an event says otherwise; `default` when absent).
    pub user: Option<String>,
    /// The project (until an event says otherwise; `default` when absent).
    pub project: Option<String>,
    /// Evaluate every rule of a hook and record why each did or did not fire (see
    /// [`Outcome::trace`]). Otherwise rules whose threshold cannot hold are skipped unseen;
    /// the outcomes are the same either way.
    pub explain: bool,
}

/// One agent conversation supervised by Warden. Not shared: an agent loop owns its session
/// (use `AsyncSession` from async code).
pub struct Session {
    shared: Arc<Shared>,
    id: String,
    /// Shared with the template views of a tick (never beyond it), so updated in place.
    facts: Arc<SessionFacts>,
    /// The program the session last ran (its running trees and scripts belong to it).
    program: Option<Arc<Program>>,
    /// The program and the users' choices in force at the last tick (see `Shared::in_force`).
    in_force: Option<crate::shared::InForce>,
    /// The rules on and the settings in force for the session's user and project.
    resolved: Resolved,
    /// The active mode.
    mode: ModeState,
    /// Decorator memory, trees left running, waiting scripts.
    trees: Trees,
    /// Notifications waiting for a later delivery point.
    mailbox: Vec<Notification>,
    ended: bool,
    explain: bool,
    /// The execution log's sampling position (see `log_this_tick`).
    log_credit: f64,
    /// Events ticked so far.
    events: u64,
    /// For a session saved in the store after every tick: the version of it this copy is.
    durable: Option<Durable>,
    /// What reading the session back could not keep, reported by its next tick.
    restored_halted: Vec<Halted>,
    /// Tick attempts so far in this process (not saved): tells a batched save settled late
    /// from one settled in order ([`Session::saved`]).
    attempts: u64,
    /// What the embedding host keeps with the session (saved with it).
    host: serde_json::Map<String, serde_json::Value>,
    /// Set when a rule stopped the session, until the next prompt: every tool call meanwhile
    /// is refused with the stop's reason.
    stopped: Option<Stopped>,
}

/// A session saved in the store after every tick.
#[derive(Debug, Clone, Copy)]
struct Durable {
    /// The saved version this copy is (`None`: never saved).
    version: Option<i64>,
    /// The copy may be behind the store (a save failed, or is under way): read it again
    /// before the next tick.
    stale: bool,
    /// The `updated_at` of the stored row, when this copy knows it.
    touched: Option<f64>,
}

impl Durable {
    /// Whether a save at `now` writes `updated_at` (not when the row got it less than a
    /// second ago: see [`warden_store::SessionWrite::touch`]).
    fn touches(&self, now: f64) -> bool {
        self.touched
            .is_none_or(|t| !(0.0..1.0).contains(&(now - t)))
    }
}

/// What [`Session::tick_batched`] did.
#[derive(Debug)]
pub enum Ticked {
    /// The tick is over (saved, or not saved: [`Outcome::unsaved`] says).
    Done(Outcome),
    /// The tick's save is in the store's batch: pass its result to [`Session::saved`], which
    /// gives the outcome.
    Saving(PendingSave),
}

/// A tick whose save is in the store's batch ([`Session::tick_batched`]). What it decided is
/// not to be acted upon before [`Session::saved`] says it was saved.
pub struct PendingSave {
    outcome: Outcome,
    after_commit: Vec<AfterCommit>,
    hook: Hook,
    event: Arc<Event>,
    touched: Option<f64>,
    /// The session's attempts when the tick was over.
    attempts: u64,
}

impl std::fmt::Debug for PendingSave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSave")
            .field("hook", &self.hook)
            .field("touched", &self.touched)
            .finish()
    }
}

/// One attempt at a tick. (It lives for one return: boxing the large variant would cost an
/// allocation per tick for nothing.)
#[allow(clippy::large_enum_variant)]
enum Attempt {
    Done(Outcome),
    /// Another process saved the session meanwhile: run the tick again, on it.
    Again,
    /// The session's save, for the store's batch.
    Deferred(PendingSave, warden_store::SessionSave),
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("ended", &self.ended)
            .finish()
    }
}

/// Says in `outcome` that nothing its tick wrote was saved, and why.
fn unsaved(outcome: &mut Outcome, why: String) {
    let error = format!("nothing this tick wrote was saved: {why}");
    outcome.unsaved = Some(error.clone());
    outcome.errors.push(RuleError { rule: None, error });
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Session {
    /// A new session of `id` under the program `shared` holds now.
    pub fn new(shared: Arc<Shared>, id: String, opts: &SessionOptions) -> Self {
        let facts = Arc::new(SessionFacts::new(
            opts.user.as_deref().unwrap_or(DEFAULT_ID),
            opts.project.as_deref().unwrap_or(DEFAULT_ID),
            shared.config.history_limit,
        ));
        let trees = Trees::new(shared.config.script_limits);
        Session {
            shared,
            id,
            facts,
            program: None,
            in_force: None,
            resolved: Resolved::default(),
            mode: ModeState::default(),
            trees,
            mailbox: Vec::new(),
            ended: false,
            explain: opts.explain,
            log_credit: 0.0,
            events: 0,
            durable: None,
            restored_halted: Vec::new(),
            attempts: 0,
            host: serde_json::Map::new(),
            stopped: None,
        }
    }

    /// The session `id`, saved in the store after every tick: read back from the store when
    /// it was saved there, new otherwise.
    pub fn open(
        shared: Arc<Shared>,
        id: String,
        opts: &SessionOptions,
    ) -> Result<Self, crate::error::Error> {
        let mut session = Session::new(shared, id, opts);
        session.make_durable();
        let stored = session.shared.store.load_session(&session.id)?;
        if let Some(stored) = stored {
            session
                .restore(stored)
                .map_err(|e| crate::error::Error::Session {
                    id: session.id.clone(),
                    reason: e,
                })?;
        }
        Ok(session)
    }

    /// From now on, the session is saved after every tick, and its waiting scripts keep the
    /// record that brings them back in another process.
    fn make_durable(&mut self) {
        self.durable = Some(Durable {
            version: None,
            stale: false,
            touched: None,
        });
        self.trees.scripts.recording = true;
        self.trees.scripts.journal_limit = self.shared.config.journal_limit;
    }

    /// Saves a durable session now, without a tick: after the host changed its data
    /// ([`Session::host_data_mut`]) once the last tick of an event was over. Does nothing for
    /// a session that is not saved (`Warden::session`).
    pub fn save(&mut self) -> Result<(), crate::error::Error> {
        let Some((save, touched)) = self.session_save() else {
            return Ok(());
        };
        let saved = self.shared.store.tick().commit(Some(save.as_write()));
        match saved {
            Ok(version) => {
                self.saved_as(version, touched);
                Ok(())
            }
            Err(e) => {
                if let Some(d) = &mut self.durable {
                    d.stale = true;
                }
                Err(e.into())
            }
        }
    }

    /// Whether the session is saved in the store after every tick.
    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }

    /// Events ticked so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// What the embedding host keeps with the session: an adapter's own memory of it (the last
    /// model call it saw, how many times in a row it sent the agent back). Saved with the
    /// session at its next tick; rules do not see it.
    pub fn host_data(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.host
    }

    /// The host's data, to change (see [`Session::host_data`]).
    pub fn host_data_mut(&mut self) -> &mut serde_json::Map<String, serde_json::Value> {
        &mut self.host
    }

    /// The session as plain data, JSON, whole (the history inside; a save keeps the history's
    /// entries beside it instead). Read back as a saved session is.
    pub fn snapshot(&self) -> String {
        self.snapshot_with(None)
    }

    /// The snapshot as a save writes it: without the history's entries, which are saved beside
    /// it.
    fn head(&mut self) -> String {
        let facts = Arc::make_mut(&mut self.facts);
        let lists = facts.history_lists();
        let history = facts.take_history();
        let head = self.snapshot_with(Some(lists));
        Arc::make_mut(&mut self.facts).put_back_history(history);
        head
    }

    fn snapshot_with(&self, lists: Option<[(u64, u64); 2]>) -> String {
        let snapshot = Snapshot::take(
            self.program.as_deref(),
            Parts {
                facts: &self.facts,
                mode: &self.mode,
                mailbox: &self.mailbox,
                ended: self.ended,
                log_credit: self.log_credit,
                events: self.events,
                trees: &self.trees,
                scripts: self.trees.scripts.save(self.program.as_deref()),
                host: &self.host,
                stopped: self.stopped.as_ref(),
            },
            lists,
        );
        // Plain data of strings, numbers and maps: it always serializes.
        serde_json::to_string(&snapshot).unwrap_or_default()
    }

    /// Replaces what the session holds with a saved copy of it.
    fn restore(&mut self, stored: warden_store::StoredSession) -> Result<(), String> {
        let mut snapshot = Snapshot::parse(&stored.snapshot)?;
        let program = self.shared.program();
        let config = &self.shared.config;
        self.facts = Arc::new(snapshot.facts(config.history_limit, &stored.entries)?);
        self.mode = snapshot.mode(&program);
        self.ended = snapshot.ended;
        self.log_credit = snapshot.log_credit;
        self.events = snapshot.events;
        self.mailbox = std::mem::take(&mut snapshot.mailbox).into_owned();
        self.host = std::mem::take(&mut snapshot.host).into_owned();
        self.stopped = snapshot.stopped.take();
        let mut trees = Trees::new(config.script_limits);
        trees.scripts.recording = true;
        trees.scripts.journal_limit = config.journal_limit;
        let halted = snapshot.restore_trees(&program, &mut trees);
        // A tree of a hook left running on a script that could not be brought back would start
        // it again from scratch: it is dropped, and the rule halted at the next tick.
        let lost: Vec<u32> = trees.scripts.lost.iter().map(|(ix, _)| *ix).collect();
        trees.running.retain(|(hook, e), _| {
            program
                .hook(*hook)
                .entries
                .get(*e as usize)
                .is_none_or(|entry| !entry.rules.iter().any(|r| lost.contains(r)))
        });
        self.trees = trees;
        self.program = Some(program);
        self.restored_halted = halted;
        self.durable = Some(Durable {
            version: Some(stored.summary.version),
            stale: false,
            touched: Some(stored.summary.updated_at),
        });
        Ok(())
    }

    /// Reads a durable session again if another process (another node) saved it since this
    /// copy was read, as a tick does first: for a host that shows a session between ticks.
    /// Whether it was read again. Does nothing for a session that is not saved.
    pub fn refresh(&mut self) -> Result<bool, crate::error::Error> {
        let Some(before) = self.durable else {
            return Ok(false);
        };
        self.catch_up(true)
            .map_err(|reason| crate::error::Error::Session {
                id: self.id.clone(),
                reason,
            })?;
        let after = self.durable.map(|d| d.version);
        Ok(after != Some(before.version) || before.stale)
    }

    /// Reads the session again if a save of this copy failed, or (with `check`) if another
    /// process saved it since this copy was read. A tick does not check: its save is refused
    /// when another process saved the session meanwhile, and the tick then runs again on the
    /// session read anew; so a session ticked by one process at a time pays no read per tick.
    /// (The usual answer, nothing to catch up on, is found inline.)
    #[inline]
    fn catch_up(&mut self, check: bool) -> Result<(), String> {
        match self.durable {
            Some(durable) if check || durable.stale => self.read_back(durable),
            _ => Ok(()),
        }
    }

    #[cold]
    fn read_back(&mut self, durable: Durable) -> Result<(), String> {
        let store = &self.shared.store;
        let saved = store
            .session_version(&self.id)
            .map_err(|e| format!("the saved session could not be read: {e}"))?;
        if saved == durable.version && !durable.stale {
            return Ok(());
        }
        let stored = store
            .load_session(&self.id)
            .map_err(|e| format!("the saved session could not be read: {e}"))?;
        self.adopt_saved(stored)
    }

    /// [`Session::catch_up`] inside the tick's transaction, for an attempt that runs again
    /// after losing a race: reading the session's version there locks the session (on both
    /// back ends) until the attempt commits, so no other process can save it in between and
    /// this attempt's save cannot be refused. The session is read again if it changed.
    fn catch_up_locked(&mut self, tx: &warden_store::TickTransaction<'_>) -> Result<(), String> {
        let Some(durable) = self.durable else {
            return Ok(());
        };
        let unreadable = |e| format!("the saved session could not be read: {e}");
        let saved = tx.session_version(&self.id).map_err(unreadable)?;
        if saved == durable.version && !durable.stale {
            return Ok(());
        }
        let stored = tx.load_session(&self.id).map_err(unreadable)?;
        self.adopt_saved(stored)
    }

    /// Takes the session as saved (`None`: deleted meanwhile, so it starts again).
    fn adopt_saved(&mut self, stored: Option<warden_store::StoredSession>) -> Result<(), String> {
        match stored {
            Some(stored) => self.restore(stored),
            None => {
                // Deleted meanwhile (`warden sessions rm`): it starts again.
                let opts = SessionOptions {
                    explain: self.explain,
                    ..SessionOptions::default()
                };
                let id = std::mem::take(&mut self.id);
                *self = Session::new(self.shared.clone(), id, &opts);
                self.make_durable();
                Ok(())
            }
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What Warden knows about the session so far.
    pub fn facts(&self) -> &SessionFacts {
        &self.facts
    }

    /// Sets `key` of `plugin`'s state of this session, as a rule's `set_state` with
    /// `scope = "session"` does (for rule tests, and hosts that carry a conversation's state
    /// over). Saved with the session's next tick.
    pub fn set_session_state(&mut self, plugin: &str, key: &str, value: serde_json::Value) {
        Arc::make_mut(&mut self.facts)
            .session_state
            .entry(plugin.to_string())
            .or_default()
            .insert(key.to_string(), value);
    }

    /// The rule that stopped the session and why, while the stop holds (until the next
    /// prompt; see `Proceed::Stop`).
    pub fn stopped(&self) -> Option<(&str, &str)> {
        self.stopped.as_ref().map(|s| (&*s.rule, &*s.reason))
    }

    /// Notifications waiting for a later delivery point.
    pub fn pending(&self) -> &[Notification] {
        &self.mailbox
    }

    /// The memory of the session's Lua state, in bytes; `None` while no script has run (a
    /// session without scripts never creates one).
    pub fn script_memory(&self) -> Option<usize> {
        self.trees
            .scripts
            .runtime
            .as_ref()
            .map(warden_lua::Runtime::memory_used)
    }

    /// The rules with something running (a script waiting for a later hook, or a behavior's
    /// tree), in rule order.
    pub fn running(&self) -> Vec<&str> {
        let Some(program) = &self.program else {
            return Vec::new();
        };
        (0..program.rules.len() as u32)
            .filter(|&ix| self.trees.scripts.waiting(ix))
            .map(|ix| program.rule_key(ix))
            .collect()
    }

    /// At `on_tool_call`, a warning for the host to show once: the event's tool is not
    /// declared a shell, yet its input holds a `command` string, so `tool.shell` is empty for it
    /// and no guard reads what it runs. `None` for any other call, and for a tool already
    /// warned of by this `Warden` (its clones included). Call it before
    /// [`tick`](Session::tick); the Python middleware and the service show it.
    pub fn undeclared_shell_tool(&self, hook: Hook, event: &Event) -> Option<String> {
        self.shared.undeclared_shell_tool(hook, event)
    }

    /// Whether `on_session_end` was handled.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Handles one hook: updates the facts, ticks the hook's trees, applies the effects of
    /// the rules that fired (in priority order) and returns what was decided. Never panics
    /// on bad input and never fails as a whole: a failing rule is reported in
    /// [`Outcome::errors`] and the others run.
    ///
    /// A tick reads one frame. It folds the event into the facts, resolves the users'
    /// choices, detects the mode on the frame and, when the mode changed, runs Warden's own
    /// `on_mode_change` as a first step; then the step of the hook reported.
    pub fn tick(&mut self, hook: Hook, event: Event) -> Outcome {
        // Shared with the template views of the tick.
        self.tick_from(hook, shared(event), 1)
    }

    /// [`Session::tick`] on an event already shared: as a trace's reader makes it, once, so
    /// that the event (about 400 bytes) is not moved again on its way to the tick.
    pub fn tick_shared(&mut self, hook: Hook, event: Arc<Event>) -> Outcome {
        self.tick_from(hook, event, 1)
    }

    /// Runs the tick's attempts from the `first`th on, each committing its own transaction.
    fn tick_from(&mut self, hook: Hook, event: Arc<Event>, first: usize) -> Outcome {
        let mut attempts = first;
        loop {
            // After a lost race, the session is locked first: see `catch_up_locked`.
            let locked = attempts > 1;
            match self.attempt(hook, &event, attempts < MAX_ATTEMPTS, locked, false) {
                Attempt::Done(outcome) => return outcome,
                // Another process saved the session meanwhile: the tick runs again, on it.
                // (`Deferred` is not returned without `batch`.)
                Attempt::Again | Attempt::Deferred(..) => attempts += 1,
            }
        }
    }

    /// Whether the session's store saves in batches on a thread of its own (SQLite): then a
    /// tick neither waits for the database on its caller's thread nor commits on its own
    /// ([`Session::tick_batched`]), and an async host runs it on a runtime thread.
    pub fn saves_in_batches(&self) -> bool {
        self.shared.store.batches_saves()
    }

    /// Handles one hook as [`Session::tick`] does, except that a durable tick that wrote
    /// nothing else to the store leaves its save to the store's next batch
    /// ([`warden_store::Store::save_in_batch`]): `done` is then called with the save's result,
    /// on the store's thread, and the tick returns [`Ticked::Saving`]; pass that result to
    /// [`Session::saved`] for the outcome. Meanwhile the session may not tick (it is behind
    /// the store until then). Otherwise (a tick that read or wrote plugin state, a session
    /// not saved, a store that does not batch) the tick commits as [`Session::tick`] does,
    /// returns [`Ticked::Done`], and `done` is dropped uncalled.
    ///
    /// A server runs many sessions' ticks this way on a few threads: none waits for the
    /// database, and one commit saves many sessions.
    pub fn tick_batched(
        &mut self,
        hook: Hook,
        event: Event,
        done: impl FnOnce(Result<i64, warden_store::StoreError>) + Send + 'static,
    ) -> Ticked {
        let event = shared(event);
        let batches = self.durable.is_some() && self.shared.store.batches_saves();
        match self.attempt(hook, &event, true, false, batches) {
            Attempt::Done(outcome) => Ticked::Done(outcome),
            Attempt::Again => Ticked::Done(self.tick_from(hook, event, 2)),
            Attempt::Deferred(pending, save) => {
                if let Some(d) = &mut self.durable {
                    // Until `saved`: were the result never heard, the next tick reads the
                    // session back from the store rather than trust this copy.
                    d.stale = true;
                }
                self.shared.store.save_in_batch(save, done);
                Ticked::Saving(pending)
            }
        }
    }

    /// The outcome of a tick whose save was in the store's batch ([`Session::tick_batched`]),
    /// given how the save went. A session another process saved meanwhile is read again and
    /// the tick runs again on it (committing on its own, as [`Session::tick`] does); a save
    /// that failed is said in the outcome ([`Outcome::unsaved`]), as a tick's is.
    pub fn saved(
        &mut self,
        pending: PendingSave,
        result: Result<i64, warden_store::StoreError>,
    ) -> Outcome {
        let PendingSave {
            mut outcome,
            after_commit,
            hook,
            event,
            touched,
            attempts,
        } = pending;
        if attempts != self.attempts {
            // The session ticked again meanwhile (its host did not wait): this result says
            // nothing of the copy as it is now, which is left as it stands.
            return self.settled_late(outcome, after_commit, result);
        }
        if self.settle(result.map(Some), &mut outcome, after_commit, true, touched) {
            outcome
        } else {
            // Saved by another process meanwhile.
            self.tick_from(hook, event, 2)
        }
    }

    /// The outcome of a batched save settled after the session ticked again: its events go out
    /// if it was saved; if it was not, it cannot run again (the session moved on), and says so.
    fn settled_late(
        &self,
        mut outcome: Outcome,
        after_commit: Vec<AfterCommit>,
        result: Result<i64, warden_store::StoreError>,
    ) -> Outcome {
        match result {
            Ok(_) => self.after_commit(after_commit),
            Err(e) => unsaved(
                &mut outcome,
                format!("{e} (and the session ticked again before this tick's save was settled)"),
            ),
        }
        outcome
    }

    /// The save of a durable session (its snapshot, and the history's entries changed since
    /// the last save), and the time it writes into `updated_at` (if it does).
    fn session_save(&mut self) -> Option<(warden_store::SessionSave, Option<f64>)> {
        let d = self.durable?;
        let at = now();
        let touch = d.touches(at);
        let (entries, firsts) = durable::history_entries(&self.facts);
        let save = warden_store::SessionSave {
            id: self.id.clone(),
            user: self.facts.user.id.clone(),
            project: self.facts.project.id.clone(),
            loaded: d.version,
            snapshot: self.head(),
            events: self.events,
            ended: self.ended,
            updated_at: at,
            touch,
            entries,
            firsts,
        };
        Some((save, touch.then_some(at)))
    }

    /// The session was saved as `version` (when a save was made), writing `updated_at` at
    /// `touched` (when it did): the copy is the store's again.
    fn saved_as(&mut self, version: Option<i64>, touched: Option<f64>) {
        let Some(d) = &mut self.durable else {
            return;
        };
        d.version = version.or(d.version);
        d.stale = false;
        if touched.is_some() {
            d.touched = touched;
        }
        if version.is_some() {
            Arc::make_mut(&mut self.facts).history_saved();
        }
    }

    /// Commits the tick (with the session, when it is saved after every tick), then publishes
    /// its events and writes its rules' log lines. A tick that could not be saved says so in
    /// its outcome; its decisions and notifications stand.
    fn commit(
        &mut self,
        tx: warden_store::TickTransaction<'_>,
        outcome: &mut Outcome,
        after_commit: Vec<AfterCommit>,
        retry: bool,
    ) -> bool {
        let save = self.session_save();
        let touched = save.as_ref().and_then(|(_, t)| *t);
        let result = tx.commit(save.as_ref().map(|(s, _)| s.as_write()));
        self.settle(result, outcome, after_commit, retry, touched)
    }

    /// What a tick's commit (or batched save) came to: the new version kept and the actions
    /// after it run, or the copy marked stale. `false` when `retry` and another process saved
    /// the session meanwhile (the tick is to run again); otherwise a failure is said in the
    /// outcome.
    fn settle(
        &mut self,
        result: Result<Option<i64>, warden_store::StoreError>,
        outcome: &mut Outcome,
        after_commit: Vec<AfterCommit>,
        retry: bool,
        touched: Option<f64>,
    ) -> bool {
        match result {
            Ok(version) => {
                self.saved_as(version, touched);
                self.after_commit(after_commit);
                true
            }
            Err(e) => {
                if let Some(d) = &mut self.durable {
                    d.stale = true;
                }
                if retry && matches!(e, warden_store::StoreError::SessionConflict { .. }) {
                    tracing::debug!(session = %self.id, "saved by another process meanwhile: the tick runs again");
                    return false;
                }
                tracing::warn!(session = %self.id, error = %e, "a tick could not be saved");
                unsaved(outcome, e.described());
                true
            }
        }
    }

    /// Publishes a saved tick's events and writes its rules' log lines.
    fn after_commit(&self, actions: Vec<AfterCommit>) {
        for action in actions {
            action.run(&self.shared);
        }
    }

    /// Moves the session onto `program` if it is new to it; what that halted.
    fn adopt(&mut self, program: &Arc<Program>) -> Vec<Halted> {
        let mut halted = Vec::new();
        if self
            .program
            .as_ref()
            .is_none_or(|p| p.generation != program.generation)
        {
            let old = self.program.replace(program.clone());
            self.trees.adopt(old.as_deref(), program, &mut halted);
        }
        halted
    }

    /// Folds the event into the facts; what was wrong with it (reported, the tick goes on).
    fn fold(&mut self, hook: Hook, event: &Event, time: f64) -> Vec<RuleError> {
        let mut errors = Vec::new();
        if self.ended {
            errors.push(RuleError {
                rule: None,
                error: format!("{hook} arrived after on_session_end; the session had ended"),
            });
        }
        if let Some(complaint) = Arc::make_mut(&mut self.facts).update(hook, event, time) {
            errors.push(RuleError {
                rule: None,
                error: complaint,
            });
        }
        errors
    }

    /// Whether this tick goes into the execution log: with a sample share `s`, a tick is
    /// recorded each time the accumulated share passes a whole number, so exactly one tick in
    /// `1/s` is recorded, evenly spread, the first tick included.
    fn log_this_tick(&mut self) -> bool {
        let share = self.shared.config.log_sample;
        if share <= 0.0 {
            return false;
        }
        let before = self.log_credit;
        self.log_credit += share;
        before == 0.0 || self.log_credit.floor() > before.floor()
    }

    fn end(&mut self) -> Vec<Halted> {
        self.ended = true;
        self.program = None;
        if !self.mailbox.is_empty() {
            tracing::debug!(session = %self.id, dropped = self.mailbox.len(), "session ended with notifications still waiting for delivery");
            self.mailbox.clear();
        }
        self.trees.end()
    }
}

/// `event` shared, copied once into its `Arc`: `Arc::new` builds the `Arc`'s contents on the
/// stack first and copies them again (an event is about 600 bytes).
fn shared(event: Event) -> Arc<Event> {
    let mut shared = Arc::<Event>::new_uninit();
    Arc::get_mut(&mut shared)
        .expect("a new Arc has no other owner")
        .write(event);
    // SAFETY: the value was written just above.
    unsafe { shared.assume_init() }
}
