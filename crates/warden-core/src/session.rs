//! A session: one agent conversation. It keeps the facts Warden learns from events, the
//! memory of decorators (cooldowns, fire counts), trees left running, and notifications
//! waiting for their delivery point. [`Session::tick`] runs one hook.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for the session's maps keyed by Warden's own small integers (rule, entry and node
/// indices, hooks). They are never input, so SipHash's protection against chosen keys buys
/// nothing here, and it was a sixth of the cost of resuming a waiting script.
#[derive(Default, Clone, Copy)]
struct IndexHasher(u64);

impl IndexHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for IndexHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
    fn write_isize(&mut self, x: isize) {
        self.add(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IndexMap<K, V> = HashMap<K, V, BuildHasherDefault<IndexHasher>>;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bonsai_bt::{BT, Behavior, Status};
use warden_expr::{Frame, Verdict};
use warden_store::{ExecutionRecord, StateScope, StateWrite};

use crate::behavior::run::{self as tree_run, NodeStatus, TreeRun};
use crate::context::{SETTINGS_ROOT, STATE_ROOT, StateReader, TickFacts};
use crate::control::Resolved;
use crate::event::Event;
use crate::facts::SessionFacts;
use crate::outcome::{Effect, Evaluation, Halted, Notification, Outcome, RuleError, TraceEntry};
use crate::program::{CompiledAction, CompiledRule, Entry, Node, Program, RuleCondition};
use crate::warden::{BusEvent, Shared};
use warden_load::Hook;
use warden_load::{DeliverAt, LogLevel, Priority};

/// What a session remembers about one rule (for its decorators).
#[derive(Debug, Clone, Copy, Default)]
struct RuleMemory {
    fires: u32,
    last_fired_turn: Option<u32>,
}

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
/// (use [`crate::AsyncSession`] from async code).
pub struct Session {
    shared: Arc<Shared>,
    id: String,
    facts: SessionFacts,
    generation: u64,
    /// The program the session last ran (its running trees and scripts belong to it).
    program: Option<Arc<Program>>,
    /// The rules on and the settings in force for the session's user and project.
    resolved: Resolved,
    /// The active mode.
    mode: crate::mode::ModeState,
    /// Rules on for the user and in the current mode (when the program has modes), and what
    /// it was computed for.
    active: Vec<bool>,
    active_key: Option<(u64, u64, Option<usize>)>,
    memory: Vec<RuleMemory>,
    memory_keys: Vec<Arc<str>>,
    /// Trees left running, by (hook, entry), with the hook that wakes them.
    running: IndexMap<(Hook, u32), Running>,
    scripts: Scripts,
    mailbox: Vec<Notification>,
    ended: bool,
    explain: bool,
    /// Reused between ticks: the entries selected for the current tick.
    selected: Vec<u32>,
    /// The execution log's sampling position (see `log_this_tick`).
    log_credit: f64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("ended", &self.ended)
            .finish()
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>, id: String, opts: &SessionOptions) -> Self {
        let facts = SessionFacts::new(
            opts.user.as_deref().unwrap_or(crate::facts::DEFAULT_ID),
            opts.project.as_deref().unwrap_or(crate::facts::DEFAULT_ID),
            shared.config.history_limit,
        );
        let explain = opts.explain;
        let script_limits = shared.config.script_limits;
        Session {
            shared,
            id,
            facts,
            generation: u64::MAX,
            program: None,
            resolved: Resolved::default(),
            mode: crate::mode::ModeState::default(),
            active: Vec::new(),
            active_key: None,
            memory: Vec::new(),
            memory_keys: Vec::new(),
            running: IndexMap::default(),
            scripts: Scripts {
                runtime: None,
                tasks: IndexMap::default(),
                trees: IndexMap::default(),
                limits: script_limits,
            },
            mailbox: Vec::new(),
            ended: false,
            explain,
            selected: Vec::new(),
            log_credit: 0.0,
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

    /// Notifications waiting for a later delivery point.
    pub fn pending(&self) -> &[Notification] {
        &self.mailbox
    }

    /// The memory of the session's Lua state, in bytes; `None` while no script has run (a
    /// session without scripts never creates one).
    pub fn script_memory(&self) -> Option<usize> {
        self.scripts
            .runtime
            .as_ref()
            .map(warden_lua::Runtime::memory_used)
    }

    /// Whether `on_session_end` was handled.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Moves the session onto a new program: decorator memory is kept by rule id; a running
    /// tree is kept if its rules did not change (same rules, same files, same scripts), and
    /// halted otherwise.
    fn adopt(&mut self, program: &Arc<Program>, halted: &mut Vec<Halted>) {
        if self.generation == program.generation {
            return;
        }
        if let Some(old) = self.program.take() {
            self.carry_over(&old, program, halted);
        }
        self.program = Some(program.clone());
        let old: HashMap<Arc<str>, RuleMemory> = self
            .memory_keys
            .drain(..)
            .zip(self.memory.drain(..))
            .collect();
        self.memory_keys = program.rules.iter().map(|r| r.key.clone()).collect();
        self.memory = self
            .memory_keys
            .iter()
            .map(|k| old.get(k).copied().unwrap_or_default())
            .collect();
        self.generation = program.generation;
    }

    /// Keeps the running trees (and their scripts) whose rules are unchanged in `new`, under
    /// their new positions; halts the others.
    fn carry_over(&mut self, old: &Program, new: &Program, halted: &mut Vec<Halted>) {
        let mut moved: HashMap<u32, u32> = HashMap::new();
        let mut running = std::mem::take(&mut self.running)
            .into_iter()
            .collect::<Vec<_>>();
        running.sort_by_key(|(k, _)| *k);
        for ((hook, e), r) in running {
            let old_entry = &old.hook(hook).entries[e as usize];
            let same = |ne: &Entry| {
                ne.name == old_entry.name
                    && ne.rules.len() == old_entry.rules.len()
                    && ne.rules.iter().zip(&old_entry.rules).all(|(&n, &o)| {
                        let (n, o) = (&new.rules[n as usize], &old.rules[o as usize]);
                        n.key == o.key && n.fingerprint == o.fingerprint
                    })
            };
            let Some(at) = new.hook(hook).entries.iter().position(same) else {
                continue;
            };
            let new_entry = &new.hook(hook).entries[at];
            let pairs: HashMap<u32, u32> = old_entry
                .rules
                .iter()
                .copied()
                .zip(new_entry.rules.iter().copied())
                .collect();
            // The tree's leaves keep the indices they were built with; map them onward.
            let remap = match r.remap {
                Some(m) => m.into_iter().map(|(leaf, o)| (leaf, pairs[&o])).collect(),
                None => pairs.clone(),
            };
            moved.extend(pairs);
            self.running.insert(
                (hook, at as u32),
                Running {
                    bt: r.bt,
                    wake: r.wake,
                    remap: Some(remap),
                },
            );
        }
        let reason = |key: &Arc<str>| {
            if new.rules.iter().any(|r| r.key == *key) {
                "its rule changed in a reload"
            } else {
                "its rule was removed in a reload"
            }
        };
        let tasks = std::mem::take(&mut self.scripts.tasks);
        let mut stopped: Vec<_> = Vec::new();
        for ((ix, node), task) in tasks {
            match moved.get(&ix) {
                Some(&n) => {
                    self.scripts.tasks.insert((n, node), task);
                }
                None => stopped.push(((ix, node), task)),
            }
        }
        stopped.sort_by_key(|(k, _)| *k);
        for (_, (task, key)) in stopped {
            let why = reason(&key);
            halted.push(self.scripts.halt_task(task, key, why));
        }
        // Behavior runs move with their rules (their decorator memory too); a running one
        // whose rule changed is halted.
        let trees = std::mem::take(&mut self.scripts.trees);
        let mut dropped: Vec<(u32, bool)> = Vec::new();
        for (ix, run) in trees {
            match moved.get(&ix) {
                Some(&n) => {
                    self.scripts.trees.insert(n, run);
                }
                None => dropped.push((ix, run.is_running())),
            }
        }
        dropped.sort_unstable();
        for (ix, was_running) in dropped {
            if was_running {
                let key = old.rules[ix as usize].key.clone();
                let why = reason(&key);
                halted.push(Halted {
                    rule: key,
                    reason: why.to_string(),
                });
            }
        }
        if let Some(rt) = &mut self.scripts.runtime {
            rt.forget_scripts();
        }
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

    /// Handles one hook: updates the facts, ticks the hook's trees, applies the effects of
    /// the rules that fired (in priority order) and returns what was decided. Never panics
    /// on bad input and never fails as a whole: a failing rule is reported in
    /// [`Outcome::errors`] and the others run.
    pub fn tick(&mut self, hook: Hook, event: Event) -> Outcome {
        let program = self.shared.program();
        let mut halted = Vec::new();
        self.adopt(&program, &mut halted);
        let time = event.time.unwrap_or_else(now);
        let mut errors = Vec::new();
        if self.ended {
            errors.push(RuleError {
                rule: None,
                error: format!("{hook} arrived after on_session_end; the session had ended"),
            });
        }
        if let Some(complaint) = self.facts.update(hook, &event, time) {
            errors.push(RuleError {
                rule: None,
                error: complaint,
            });
        }
        let controls = self.shared.controls();
        self.resolved.refresh(
            &program,
            &controls,
            &self.facts.user.id,
            &self.facts.project.id,
        );
        let logging = self.log_this_tick();
        // The mode: detected on the frame of this event, before any rule runs. A change ticks
        // Warden's own `on_mode_change` first, in the new mode.
        let change = self.detect_mode(&program, hook, &event, time);
        let before = change.map(|(from, to)| {
            let data = serde_json::json!({ "from": &*from, "to": &*to });
            let event = Event::new().with_data(data);
            let outcome = self.run_hook(
                &program,
                Hook::OnModeChange,
                &event,
                time,
                Vec::new(),
                Vec::new(),
                logging,
            );
            crate::outcome::ModeChange {
                from,
                to,
                outcome: Box::new(outcome),
            }
        });
        let mut outcome = self.run_hook(&program, hook, &event, time, errors, halted, logging);
        if let Some(change) = before {
            // The agent gets the mode change's notifications with this hook's.
            let mut inject = change.outcome.inject.clone();
            inject.append(&mut outcome.inject);
            inject.sort_by_key(|n| std::cmp::Reverse(n.priority));
            outcome.inject = inject;
            outcome.mode_change = Some(change);
        }
        outcome
    }

    /// Detects the mode for this event; on a change, records it and returns (from, to).
    fn detect_mode(
        &mut self,
        program: &Arc<Program>,
        hook: Hook,
        event: &Event,
        time: f64,
    ) -> Option<(Arc<str>, Arc<str>)> {
        let modes = program.modes.as_ref()?;
        let shared = self.shared.clone();
        let detected = {
            let facts = TickFacts {
                facts: &self.facts,
                hook,
                event,
                time,
                state: StateReader::new(&shared.store, &self.facts.user.id, &self.facts.project.id),
                plugin: std::cell::RefCell::new(Arc::from("")),
                state_error: std::cell::Cell::new(false),
                slots: &program.settings,
                settings: &self.resolved.settings,
            };
            let mut frame = Frame::new(&facts);
            modes.detect(&mut frame)
        };
        let turn = self.facts.turn.number;
        let next = modes.next(&self.mode, detected, turn);
        let to: Arc<str> = next.map_or_else(
            || Arc::from(crate::mode::DEFAULT_MODE),
            |i| modes.modes[i].id.clone(),
        );
        if to == self.mode.id {
            // The same mode (its position may have moved in a reload).
            self.mode.current = next;
            return None;
        }
        let from = std::mem::replace(
            &mut self.mode,
            crate::mode::ModeState {
                current: next,
                id: to.clone(),
                since_turn: turn,
            },
        )
        .id;
        self.facts.mode = to.to_string();
        tracing::info!(session = %self.id, from = %from, to = %to, "mode changed");
        Some((from, to))
    }

    /// Ticks the trees of `hook` (and those of other hooks waiting for it) on this event,
    /// applies what they decided, and delivers notifications.
    #[allow(clippy::too_many_arguments)]
    fn run_hook(
        &mut self,
        program: &Arc<Program>,
        hook: Hook,
        event: &Event,
        time: f64,
        errors: Vec<RuleError>,
        halted: Vec<Halted>,
        logging: bool,
    ) -> Outcome {
        let program = program.clone();
        let tool = if hook.is_tool_hook() {
            event.tool.as_ref().map(|t| t.name.as_str())
        } else {
            None
        };
        self.refresh_active(&program);
        let tree = program.hook(hook);
        let shared = self.shared.clone();
        let store = &shared.store;
        let knowledge = shared.knowledge();
        // Knowledge enrichment, the built-in capability: every query, once it registered.
        let auto_enrichment = match (&shared.knowledge_config, knowledge.registered()) {
            (Some(c), Some(k)) if c.at_query_start && hook == Hook::OnQueryStart => Some(
                crate::knowledge::enrich(k, &self.facts.query, self.facts.turn.context_window),
            ),
            _ => None,
        };
        let tick_facts = TickFacts {
            facts: &self.facts,
            hook,
            event,
            time,
            state: StateReader::new(store, &self.facts.user.id, &self.facts.project.id),
            plugin: std::cell::RefCell::new(Arc::from("")),
            state_error: std::cell::Cell::new(false),
            slots: &program.settings,
            settings: &self.resolved.settings,
        };
        let mut tick = Tick {
            program: &program,
            facts: &tick_facts,
            frame: Frame::new(&tick_facts),
            template_values: None,
            memory: &self.memory,
            enabled: if program.modes.is_some() {
                &self.active
            } else {
                &self.resolved.enabled
            },
            user_enabled: &self.resolved.enabled,
            mode: &self.mode.id,
            knowledge: &knowledge,
            knowledge_configured: shared.knowledge_config.is_some(),
            turn: self.facts.turn.number,
            fired: Vec::new(),
            rendered: Vec::new(),
            errors,
            trace: Vec::with_capacity(tree.entries.len()),
            timings: logging.then(Vec::new),
            scripts: &mut self.scripts,
            wake: HookSet::default(),
            entry_hook: hook,
            running_leaves: Vec::new(),
            node_trace: self.explain.then(Vec::new),
            halted,
            halt_reason: None,
        };

        let bonsai_event = bonsai_bt::Event::zero_dt_args();
        let mut selected = std::mem::take(&mut self.selected);
        if hook.is_tool_hook() && event.tool.is_none() {
            // Reported above; rules of a tool hook need to know which tool.
            selected.clear();
        } else {
            tree.select(tool, &tick_facts, self.explain || logging, &mut selected);
            // A running tree resumes at its hook whatever the tool: its filter was checked when
            // it started (and its rules check theirs when they start).
            if !self.running.is_empty() {
                let before = selected.len();
                for &(h, e) in self.running.keys() {
                    if h == hook && !selected.contains(&e) {
                        selected.push(e);
                    }
                }
                if selected.len() > before {
                    selected.sort_unstable();
                }
            }
        }
        for &e in &selected {
            let key = (hook, e);
            // A tree waiting for another hook is not ticked at this one.
            if self
                .running
                .get(&key)
                .is_some_and(|r| !r.wake.contains(hook))
            {
                continue;
            }
            tick_entry(
                &mut self.running,
                key,
                &tree.entries[e as usize],
                &mut tick,
                &bonsai_event,
            );
        }
        self.selected = selected;
        // Trees of other hooks waiting for this one (a script's `wait_for`) resume now, after
        // this hook's own trees.
        if !self.running.is_empty() {
            let mut waiting: Vec<(Hook, u32)> = self
                .running
                .iter()
                .filter(|(k, r)| k.0 != hook && r.wake.contains(hook))
                .map(|(k, _)| *k)
                .collect();
            waiting.sort();
            for key in waiting {
                let entry = &program.hook(key.0).entries[key.1 as usize];
                tick_entry(&mut self.running, key, entry, &mut tick, &bonsai_event);
            }
        }

        // The session ends: trees still running are halted in this tick, so that their
        // `on_halted` actions apply (scripts of plain rules are closed by `end`, below).
        if hook == Hook::OnSessionEnd && !tick.scripts.trees.is_empty() {
            let mut running: Vec<u32> = tick
                .scripts
                .trees
                .iter()
                .filter(|(_, r)| r.is_running())
                .map(|(ix, _)| *ix)
                .collect();
            running.sort_unstable();
            for ix in running {
                tick.halt_tree(ix, "the session ended");
            }
        }
        let Tick {
            fired,
            rendered,
            mut errors,
            mut trace,
            timings,
            mut halted,
            node_trace,
            ..
        } = tick;
        let effects = self.apply(&program, hook, fired, rendered, &mut errors, &mut trace);
        if let Some(timings) = timings {
            self.record_executions(&program, hook, &trace, &timings);
        }
        let inject = self.deliver(hook, &effects);
        if hook == Hook::OnSessionEnd {
            halted.extend(self.end());
        }
        let enrichment = effects
            .iter()
            .rev()
            .find_map(|e| match e {
                Effect::EnrichContext { enrichment, .. } => Some(enrichment.clone()),
                _ => None,
            })
            .or(auto_enrichment);
        Outcome {
            hook,
            effects,
            inject,
            errors,
            halted,
            enrichment,
            mode: self.mode.id.clone(),
            mode_change: None,
            trace,
            nodes: node_trace.unwrap_or_default(),
            program,
        }
    }

    /// Brings `active` (rules on for the user and in the current mode) up to date.
    fn refresh_active(&mut self, program: &Program) {
        let Some(modes) = &program.modes else {
            return;
        };
        let key = (self.resolved.version, program.generation, self.mode.current);
        if self.active_key == Some(key) {
            return;
        }
        let mode = self.mode.current.and_then(|i| modes.modes.get(i));
        self.active = self
            .resolved
            .enabled
            .iter()
            .enumerate()
            .map(|(i, on)| *on && mode.is_none_or(|m| m.active.get(i).copied().unwrap_or(true)))
            .collect();
        self.active_key = Some(key);
    }

    /// Applies the effects of the fired rules, in order: each rule's state writes commit
    /// together or not at all (and then none of its effects apply). Returns the applied ones.
    fn apply(
        &mut self,
        program: &Program,
        hook: Hook,
        fired: Vec<Fired>,
        rendered: Vec<Effect>,
        errors: &mut Vec<RuleError>,
        trace: &mut [TraceEntry],
    ) -> Vec<Effect> {
        let failures = if rendered
            .iter()
            .any(|e| matches!(e, Effect::SetState { .. }))
        {
            self.write_state(&fired, &rendered)
        } else {
            Vec::new()
        };
        let mut keep = vec![
            true;
            if failures.is_empty() {
                0
            } else {
                rendered.len()
            }
        ];
        for (i, f) in fired.iter().enumerate() {
            let rule = &program.rules[f.rule as usize];
            if let Some((_, e)) = failures.iter().find(|(at, _)| *at == i) {
                let error =
                    format!("its state could not be saved, so none of its effects applied: {e}");
                if let Some(t) = trace.get_mut(f.trace) {
                    t.evaluation = Evaluation::Failed(error.clone());
                }
                errors.push(RuleError {
                    rule: Some(rule.key.clone()),
                    error,
                });
                keep[f.effects.clone()].fill(false);
                continue;
            }
            if f.counts {
                let memory = &mut self.memory[f.rule as usize];
                memory.fires = memory.fires.saturating_add(1);
                memory.last_fired_turn = Some(self.facts.turn.number);
            }
            for effect in &rendered[f.effects.clone()] {
                match effect {
                    Effect::Log {
                        rule,
                        level,
                        message,
                    } => emit_log(rule, *level, message),
                    Effect::EmitEvent {
                        rule,
                        event_type,
                        payload,
                    } => {
                        // No subscriber is not an error: the bus is for whoever listens.
                        let _ = self.shared.bus.send(BusEvent {
                            event_type: event_type.clone(),
                            payload: payload.clone(),
                            rule: rule.clone(),
                            plugin: rule_plugin(program, f.rule),
                            session: self.id.clone(),
                            hook,
                        });
                    }
                    Effect::NotifySelf(_)
                    | Effect::SetState { .. }
                    | Effect::EnrichContext { .. } => {}
                }
            }
        }
        if keep.is_empty() {
            return rendered;
        }
        rendered
            .into_iter()
            .zip(keep)
            .filter_map(|(e, k)| k.then_some(e))
            .collect()
    }

    /// Writes the state of every fired rule, each rule's writes in one savepoint. Returns the
    /// rules (by position in `fired`) whose writes failed, with why.
    fn write_state(&self, fired: &[Fired], rendered: &[Effect]) -> Vec<(usize, String)> {
        let groups: Vec<Vec<StateWrite>> = fired
            .iter()
            .map(|f| {
                rendered[f.effects.clone()]
                    .iter()
                    .filter_map(|e| match e {
                        Effect::SetState {
                            plugin, key, value, ..
                        } => Some(StateWrite::set(
                            StateScope::new(
                                self.facts.user.id.as_str(),
                                self.facts.project.id.as_str(),
                                plugin.as_ref(),
                            ),
                            key.as_str(),
                            value.clone(),
                        )),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        match self.shared.store.apply_writes(&groups) {
            Ok(results) => results
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| r.err().map(|e| (i, e.to_string())))
                .collect(),
            // The transaction itself failed: nothing was written.
            Err(e) => groups
                .iter()
                .enumerate()
                .filter(|(_, g)| !g.is_empty())
                .map(|(i, _)| (i, e.to_string()))
                .collect(),
        }
    }

    /// The notifications due at `hook`: queued ones whose point has come, then new ones due
    /// now; the rest wait. Most urgent first.
    fn deliver(&mut self, hook: Hook, effects: &[Effect]) -> Vec<Notification> {
        let mut due = Vec::new();
        if !self.mailbox.is_empty() {
            let (now, later): (Vec<_>, Vec<_>) = self
                .mailbox
                .drain(..)
                .partition(|n| n.deliver_at.is_due_at(hook));
            due = now;
            self.mailbox = later;
        }
        for e in effects {
            if let Effect::NotifySelf(n) = e {
                if n.deliver_at.is_due_at(hook) {
                    due.push(n.clone());
                } else {
                    self.mailbox.push(n.clone());
                }
            }
        }
        due.sort_by_key(|n| std::cmp::Reverse(n.priority));
        due
    }

    fn end(&mut self) -> Vec<Halted> {
        self.ended = true;
        self.running.clear();
        self.program = None;
        if !self.mailbox.is_empty() {
            tracing::debug!(session = %self.id, dropped = self.mailbox.len(), "session ended with notifications still waiting for delivery");
            self.mailbox.clear();
        }
        self.scripts.halt_all("the session ended")
    }

    fn record_executions(
        &self,
        program: &Program,
        hook: Hook,
        trace: &[TraceEntry],
        timings: &[f64],
    ) {
        // Rules held back before their condition (switched off, out of mode, a decorator)
        // were not evaluated: they are not recorded.
        let records: Vec<ExecutionRecord> = trace
            .iter()
            .zip(timings)
            .filter(|(t, _)| {
                !matches!(
                    t.evaluation,
                    Evaluation::Disabled | Evaluation::Inactive(_) | Evaluation::Suppressed(_)
                )
            })
            .map(|(t, ms)| ExecutionRecord {
                user_id: self.facts.user.id.clone(),
                project_id: self.facts.project.id.clone(),
                session_id: Some(self.id.clone()),
                rule_id: program.rule_key(t.rule).to_string(),
                trigger: hook.name().to_string(),
                condition_result: matches!(t.evaluation, Evaluation::Fired | Evaluation::Running),
                action_executed: t.evaluation == Evaluation::Fired,
                execution_time_ms: *ms,
                error_message: match &t.evaluation {
                    Evaluation::Failed(e) => Some(e.clone()),
                    Evaluation::Undetermined(e) => Some(format!("undetermined: {e}")),
                    _ => None,
                },
            })
            .collect();
        if let Err(e) = self.shared.store.record_executions(&records) {
            tracing::warn!(error = %e, "the rule execution log could not be written");
        }
    }
}

fn emit_log(rule: &str, level: LogLevel, message: &str) {
    match level {
        LogLevel::Debug => tracing::debug!(target: "warden::rule", rule, "{message}"),
        LogLevel::Info => tracing::info!(target: "warden::rule", rule, "{message}"),
        LogLevel::Warning => tracing::warn!(target: "warden::rule", rule, "{message}"),
        LogLevel::Error => tracing::error!(target: "warden::rule", rule, "{message}"),
    }
}

/// A rule that acted this tick: its rendered effects (not yet applied) are
/// `Tick::rendered[effects]`. `counts` is whether it fired (its decorators remember it); a
/// script's actions in a run that did not end in `true` apply without counting as a fire.
struct Fired {
    rule: u32,
    trace: usize,
    effects: std::ops::Range<usize>,
    counts: bool,
}

/// A tree left running, and the hook that wakes it.
struct Running {
    bt: BT<Node, ()>,
    wake: HookSet,
    /// For a tree carried across a reload: the rule index each of its leaves now stands for.
    remap: Option<HashMap<u32, u32>>,
}

/// Ticks one entry (a tree): a tree of one leaf is run by calling the leaf (bonsai's state
/// for a lone action is the action itself, and building one per rule per tick cost a quarter
/// of a tick); anything else, or a tree left running, goes through bonsai. Afterwards, any
/// script of the tree that its leaf did not keep running is halted (bonsai drops an abandoned
/// child without telling anyone).
fn tick_entry(
    running: &mut IndexMap<(Hook, u32), Running>,
    key: (Hook, u32),
    entry: &Entry,
    tick: &mut Tick<'_>,
    bonsai_event: &bonsai_bt::Event,
) {
    tick.wake = HookSet::default();
    tick.entry_hook = key.0;
    tick.running_leaves.clear();
    let foreign = key.0 != tick.facts.hook;
    // A tree left running is ticked where it is kept, and dropped once it is done.
    let resumed = match running.is_empty() {
        true => None,
        false => running.get_mut(&key),
    };
    let started = match (&entry.behavior, resumed) {
        (Behavior::Action(node), None) => {
            (tick.run(*node) == Status::Running).then(|| BT::new(entry.behavior.clone(), ()))
        }
        (_, None) => {
            let mut bt = BT::new(entry.behavior.clone(), ());
            tick_bt(&mut bt, None, tick, bonsai_event).then_some(bt)
        }
        (_, Some(r)) => {
            let still = if foreign {
                // Woken by another hook (a script's `wait_for`): only the waiting leaf runs.
                // The tree's other nodes belong to its own hook; if the leaf is done, so is
                // the tree (an exclusive group does not fall through to its next rule at a
                // foreign hook).
                let mut still = false;
                for &rule in &entry.rules {
                    if tick.scripts.waiting(rule) {
                        still |= tick.run(Node::Rule(rule)) == Status::Running;
                    }
                }
                still
            } else {
                tick_bt(&mut r.bt, r.remap.as_ref(), tick, bonsai_event)
            };
            if still {
                r.wake = tick.wake_of(key.0);
            } else {
                running.remove(&key);
            }
            None
        }
    };
    if let Some(bt) = started {
        let wake = tick.wake_of(key.0);
        running.insert(
            key,
            Running {
                bt,
                wake,
                remap: None,
            },
        );
    }
    if !tick.scripts.tasks.is_empty() || !tick.scripts.trees.is_empty() {
        for &rule in &entry.rules {
            if tick.scripts.waiting(rule) && !tick.running_leaves.contains(&rule) {
                tick.halted
                    .extend(tick.scripts.halt(rule, "its tree left it behind"));
            }
        }
    }
}

/// Ticks a tree through bonsai, its leaves mapped onward by `remap` (a tree carried across a
/// reload); true when it is left running.
fn tick_bt(
    bt: &mut BT<Node, ()>,
    remap: Option<&HashMap<u32, u32>>,
    tick: &mut Tick<'_>,
    bonsai_event: &bonsai_bt::Event,
) -> bool {
    let status = bt.tick(bonsai_event, &mut |args, _| {
        let node = match (remap, *args.action) {
            (Some(m), Node::Rule(leaf)) => Node::Rule(m.get(&leaf).copied().unwrap_or(leaf)),
            (None, node) => node,
        };
        (tick.run(node), 0.0)
    });
    matches!(status, Some((Status::Running, _)))
}

/// The Lua side of a session: the runtime (created when a script first runs, so a session
/// without scripts pays nothing for Lua) and the scripts waiting to be resumed, by rule.
struct Scripts {
    runtime: Option<warden_lua::Runtime>,
    /// Waiting scripts, by (rule, node): a rule's own script is node [`ROOT`].
    tasks: IndexMap<(u32, u32), (warden_lua::Task, Arc<str>)>,
    /// Behavior runs, by rule: running nodes, and decorator memory that outlives a run.
    trees: IndexMap<u32, TreeRun>,
    limits: warden_lua::Limits,
}

/// The names the script API accepts, from the same tables rule files use.
const VOCABULARY: warden_lua::Vocabulary = warden_lua::Vocabulary {
    hooks: Hook::NAMES,
    priorities: Priority::NAMES,
    delivery_points: DeliverAt::NAMES,
    log_levels: &["debug", "info", "warning", "warn", "error"],
};

impl Scripts {
    fn runtime(&mut self) -> Result<&mut warden_lua::Runtime, String> {
        if self.runtime.is_none() {
            let rt = warden_lua::Runtime::new(self.limits, VOCABULARY)
                .map_err(|e| format!("the Lua runtime could not start: {e}"))?;
            self.runtime = Some(rt);
        }
        self.runtime
            .as_mut()
            .ok_or_else(|| "the Lua runtime is unavailable".to_string())
    }

    /// Whether `rule` has something running: its script, or its behavior's tree.
    fn waiting(&self, rule: u32) -> bool {
        self.tasks.contains_key(&(rule, ROOT))
            || self.trees.get(&rule).is_some_and(TreeRun::is_running)
    }

    /// Stops whatever `rule` has running: its script, its tree and the tree's scripts, without
    /// a tick (a tree's `on_halted` actions do not run; see `Tick::halt_tree` for halts that
    /// happen within a tick).
    fn halt(&mut self, rule: u32, reason: &str) -> Vec<Halted> {
        let mut out = Vec::new();
        let mut nodes: Vec<u32> = self
            .tasks
            .keys()
            .filter(|(r, _)| *r == rule)
            .map(|(_, n)| *n)
            .collect();
        nodes.sort_unstable();
        let mut key = None;
        for n in nodes {
            if let Some((task, k)) = self.tasks.remove(&(rule, n)) {
                key = Some(k.clone());
                out.push(self.halt_task(task, k, reason));
            }
        }
        if let Some(run) = self.trees.get_mut(&rule)
            && run.is_running()
        {
            run.reset();
            if out.is_empty()
                && let Some(k) = key.or_else(|| self.trees.get(&rule).map(|t| t.key.clone()))
            {
                tracing::info!(rule = %k, reason, "behavior halted");
                out.push(Halted {
                    rule: k,
                    reason: reason.to_string(),
                });
            }
        }
        out
    }

    fn halt_task(&mut self, task: warden_lua::Task, key: Arc<str>, reason: &str) -> Halted {
        tracing::info!(rule = %key, script = task.script(), reason, "script halted");
        if let Some(rt) = &mut self.runtime {
            rt.halt(task);
        }
        Halted {
            rule: key,
            reason: reason.to_string(),
        }
    }

    fn halt_all(&mut self, reason: &str) -> Vec<Halted> {
        let mut rules: Vec<u32> = self
            .tasks
            .keys()
            .map(|(r, _)| *r)
            .chain(
                self.trees
                    .iter()
                    .filter(|(_, t)| t.is_running())
                    .map(|(r, _)| *r),
            )
            .collect();
        rules.sort_unstable();
        rules.dedup();
        rules
            .into_iter()
            .flat_map(|r| self.halt(r, reason))
            .collect()
    }
}

fn rule_plugin(program: &Program, rule: u32) -> Arc<str> {
    program.rules[rule as usize].def.plugin.clone()
}

/// The state of one tick while the trees run: every rule reads the same frozen frame.
struct Tick<'a> {
    program: &'a Program,
    facts: &'a TickFacts<'a>,
    frame: Frame<'a>,
    template_values: Option<(Arc<str>, minijinja::Value)>,
    memory: &'a [RuleMemory],
    /// Per rule: on for this session's user and in the current mode.
    enabled: &'a [bool],
    /// Per rule: on for this session's user (whatever the mode).
    user_enabled: &'a [bool],
    /// The current mode.
    mode: &'a Arc<str>,
    /// Knowledge enrichment, for `enrich_context` actions.
    knowledge: &'a crate::knowledge::KnowledgeState,
    knowledge_configured: bool,
    turn: u32,
    fired: Vec<Fired>,
    rendered: Vec<Effect>,
    errors: Vec<RuleError>,
    trace: Vec<TraceEntry>,
    timings: Option<Vec<f64>>,
    scripts: &'a mut Scripts,
    /// What the nodes left running in the current entry wait for.
    wake: HookSet,
    /// The hook whose trees the current entry belongs to.
    entry_hook: Hook,
    /// Behavior nodes that ran, and what each came to (explain mode).
    node_trace: Option<Vec<(u32, u32, NodeStatus)>>,
    /// The rules of the current entry whose leaf is still running.
    running_leaves: Vec<u32>,
    halted: Vec<Halted>,
    /// While a tree is halted from outside (`Tick::halt_tree`): why, for its scripts' reports.
    halt_reason: Option<String>,
}

impl Tick<'_> {
    /// Runs one leaf; Success means the rule fired (a selector stops there).
    fn run(&mut self, node: Node) -> Status {
        match node {
            Node::Rule(ix) => {
                let start = self.timings.as_ref().map(|_| Instant::now());
                let acted_before = self.fired.len();
                let evaluation = self.rule(ix);
                let status = match evaluation {
                    Evaluation::Fired => Status::Success,
                    Evaluation::Running => {
                        self.running_leaves.push(ix);
                        Status::Running
                    }
                    _ => Status::Failure,
                };
                if let (Some(t), Some(start)) = (self.timings.as_mut(), start) {
                    t.push(start.elapsed().as_secs_f64() * 1000.0);
                }
                if let Evaluation::Failed(error) = &evaluation {
                    self.errors.push(RuleError {
                        rule: Some(self.program.rules[ix as usize].key.clone()),
                        error: error.clone(),
                    });
                }
                if let Evaluation::Undetermined(why) = &evaluation {
                    tracing::debug!(rule = %self.program.rule_key(ix), reason = %why, "condition undetermined");
                }
                if self.fired.len() > acted_before
                    && let Some(f) = self.fired.last_mut()
                {
                    f.trace = self.trace.len();
                }
                self.trace.push(TraceEntry {
                    rule: ix,
                    evaluation,
                });
                status
            }
        }
    }

    fn rule(&mut self, ix: u32) -> Evaluation {
        let rule = &self.program.rules[ix as usize];
        if !self.enabled.get(ix as usize).copied().unwrap_or(true) {
            let off = !self.user_enabled.get(ix as usize).copied().unwrap_or(true);
            // Switched off (or out of mode) while it ran: what it ran stops here (a tree's
            // `on_halted` actions apply with this tick's effects).
            if self.scripts.waiting(ix) {
                let why = if off {
                    "its rule was switched off".to_string()
                } else {
                    format!("its rule is not active in mode `{}`", self.mode)
                };
                if !self.halt_tree(ix, &why) {
                    self.halted.extend(self.scripts.halt(ix, &why));
                }
            }
            return if off {
                Evaluation::Disabled
            } else {
                Evaluation::Inactive(self.mode.clone())
            };
        }
        // A waiting script resumes where it stopped: its decorators and filter were checked
        // when it started.
        if !self.scripts.tasks.is_empty() && self.scripts.tasks.contains_key(&(ix, ROOT)) {
            return self.script(ix, None);
        }
        if !self.scripts.trees.is_empty()
            && self.scripts.trees.get(&ix).is_some_and(TreeRun::is_running)
        {
            return self.tree(ix);
        }
        let gate = rule.gate;
        let memory = self.memory[ix as usize];
        if gate.once_per_session && memory.fires > 0 {
            return Evaluation::Suppressed("once per session");
        }
        if gate.max_fires.is_some_and(|max| memory.fires >= max) {
            return Evaluation::Suppressed("max fires reached");
        }
        if let (Some(n), Some(last)) = (gate.cooldown_turns, memory.last_fired_turn)
            && self.turn < last.saturating_add(n)
        {
            return Evaluation::Suppressed("cooling down");
        }
        let def = &rule.def;
        if gate.tool_filter {
            let tool = self
                .facts
                .event
                .tool
                .as_ref()
                .map(|t| t.name.as_str())
                .unwrap_or_default();
            if !def.tools.iter().any(|t| t == tool) {
                return Evaluation::NotMatched;
            }
        }
        self.select_plugin(&def.plugin);
        let condition = match &rule.condition {
            RuleCondition::Expr(c) => c,
            RuleCondition::Script { script, .. } => return self.script(ix, Some(script.clone())),
            RuleCondition::Tree(_) => return self.tree(ix),
        };
        let verdict = condition.eval(&mut self.frame);
        if self.facts.state_error.replace(false) {
            return Evaluation::Failed(self.state_failure(&def.plugin));
        }
        match verdict {
            Verdict::True => match self.render(rule) {
                Ok(()) => {
                    let effects = self.rendered.len() - rule.actions.len()..self.rendered.len();
                    self.fired.push(Fired {
                        rule: ix,
                        trace: 0,
                        effects,
                        counts: true,
                    });
                    Evaluation::Fired
                }
                Err(e) => Evaluation::Failed(e),
            },
            Verdict::False => Evaluation::NotMatched,
            Verdict::Undetermined(why) => Evaluation::Undetermined(why),
            Verdict::Error(e) => {
                Evaluation::Failed(format!("condition `{}`: {e}", condition.source()))
            }
        }
    }

    /// Starts the script of task `slot` (`start` given) or resumes it, within `timeout`
    /// (capped by the host's limit). A task that waits is kept; the wait is recorded.
    fn drive_script(
        &mut self,
        slot: (u32, u32),
        rule_key: &Arc<str>,
        start: Option<&Arc<warden_lua::Script>>,
        timeout: Option<std::time::Duration>,
    ) -> warden_lua::Step {
        // A rule may ask for less time than the host allows, never more.
        let limit = self.scripts.limits.timeout;
        let timeout = timeout.map_or(limit, |t| t.min(limit));
        let facts = self.facts;
        let waiting = if start.is_none() {
            self.scripts.tasks.remove(&slot)
        } else {
            None
        };
        let runtime = match self.scripts.runtime() {
            Ok(rt) => rt,
            Err(error) => return warden_lua::Step::Failed { error },
        };
        let (task, step) = match (start, waiting) {
            (Some(script), _) => {
                let (task, step) = runtime.start(script, facts, timeout);
                (task.map(|t| (t, rule_key.clone())), step)
            }
            (None, Some((task, key))) => {
                let step = runtime.resume(&task, facts, timeout);
                (Some((task, key)), step)
            }
            (None, None) => {
                return warden_lua::Step::Failed {
                    error: "internal: no waiting script to resume".into(),
                };
            }
        };
        if let Some(task) = task
            && matches!(step, warden_lua::Step::Waiting { .. })
        {
            self.scripts.tasks.insert(slot, task);
        }
        if let warden_lua::Step::Waiting { wake, .. } = &step {
            self.wait_for(wake.as_deref());
        }
        step
    }

    /// What the entry just ticked waits for: what its nodes asked for, or else its own hook.
    fn wake_of(&self, hook: Hook) -> HookSet {
        if self.wake.is_empty() {
            HookSet::of(hook)
        } else {
            self.wake
        }
    }

    /// Records what a waiting node waits for (`None`: the hook of its own tree).
    fn wait_for(&mut self, hook: Option<&str>) {
        let hook = hook
            .and_then(|h| h.parse::<Hook>().ok())
            .unwrap_or(self.entry_hook);
        self.wake.insert(hook);
    }

    /// Starts a rule's script (`start` given) or resumes its waiting task, and turns what the
    /// run came to into the rule's evaluation. The script's own actions and, when it returns
    /// true, the rule's actions apply together, or not at all.
    fn script(&mut self, ix: u32, start: Option<Arc<warden_lua::Script>>) -> Evaluation {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        self.select_plugin(&rule.def.plugin);
        let RuleCondition::Script { timeout, script } = &rule.condition else {
            return Evaluation::Failed("internal: not a script rule".into());
        };
        let facts = self.facts;
        let step = self.drive_script((ix, ROOT), &rule.key, start.as_ref(), *timeout);
        if facts.state_error.replace(false) {
            return Evaluation::Failed(self.state_failure(&rule.def.plugin));
        }
        let (effects, evaluation, holds) = match step {
            warden_lua::Step::Waiting { effects, .. } => (effects, Evaluation::Running, false),
            warden_lua::Step::Done {
                holds: true,
                effects,
            } => (effects, Evaluation::Fired, true),
            warden_lua::Step::Done {
                holds: false,
                effects,
            } => (effects, Evaluation::NotMatched, false),
            warden_lua::Step::Failed { error } => {
                return Evaluation::Failed(format!("script {}: {error}", script.name()));
            }
        };
        let mark = self.rendered.len();
        for e in effects {
            self.rendered.push(script_effect(rule, facts.hook, e));
        }
        if holds && let Err(e) = self.render(rule) {
            self.rendered.truncate(mark);
            return Evaluation::Failed(e);
        }
        self.record_firing(ix, mark, 0, holds);
        evaluation
    }

    /// Ticks a behavior's tree (starting it, or resuming it where it runs). Its action nodes'
    /// effects of this tick apply together; it fires when the tree succeeds.
    fn tree(&mut self, ix: u32) -> Evaluation {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let RuleCondition::Tree(tree) = &rule.condition else {
            return Evaluation::Failed("internal: not a behavior".into());
        };
        self.select_plugin(&rule.def.plugin);
        let mut run = self
            .scripts
            .trees
            .remove(&ix)
            .unwrap_or_else(|| TreeRun::new(tree, rule.key.clone()));
        let mark = self.rendered.len();
        let status = {
            let mut env = TreeEnv {
                tick: self,
                rule: ix,
                tree,
            };
            tree_run::tick(tree, &mut run, &mut env)
        };
        self.scripts.trees.insert(ix, run);
        let holds = status == tree_run::Status::Success;
        self.record_firing(ix, mark, 0, holds);
        match status {
            tree_run::Status::Success => Evaluation::Fired,
            tree_run::Status::Failure => Evaluation::NotMatched,
            tree_run::Status::Running => Evaluation::Running,
        }
    }

    /// Halts the running tree of behavior `ix` within this tick, so that its `on_halted`
    /// actions apply with the tick's effects (they do not count as a firing). False when `ix`
    /// has no running tree.
    fn halt_tree(&mut self, ix: u32, reason: &str) -> bool {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let RuleCondition::Tree(tree) = &rule.condition else {
            return false;
        };
        let Some(mut run) = self.scripts.trees.remove(&ix) else {
            return false;
        };
        if !run.is_running() {
            self.scripts.trees.insert(ix, run);
            return false;
        }
        self.select_plugin(&rule.def.plugin);
        let mark = self.rendered.len();
        let reported = self.halted.len();
        self.halt_reason = Some(reason.to_string());
        {
            let mut env = TreeEnv {
                tick: self,
                rule: ix,
                tree,
            };
            tree_run::halt_tree(tree, &mut run, &mut env);
        }
        self.halt_reason = None;
        self.scripts.trees.insert(ix, run);
        // Not in the trace unless the tick evaluates it (which then points here).
        self.record_firing(ix, mark, usize::MAX, false);
        // One report for the behavior: its scripts', if it had any running (with this reason).
        if self.halted.len() == reported {
            tracing::info!(rule = %rule.key, reason, "behavior halted");
            self.halted.push(Halted {
                rule: rule.key.clone(),
                reason: reason.to_string(),
            });
        }
        true
    }

    /// Records what rule `ix` rendered since `mark` as one firing (its effects apply
    /// together); `counts`: it fired (for its decorators), which records it even without
    /// effects.
    fn record_firing(&mut self, ix: u32, mark: usize, trace: usize, counts: bool) {
        if self.rendered.len() > mark || counts {
            self.fired.push(Fired {
                rule: ix,
                trace,
                effects: mark..self.rendered.len(),
                counts,
            });
        }
    }

    fn state_failure(&self, plugin: &Arc<str>) -> String {
        match self.facts.state.get(plugin) {
            Err(e) => e,
            Ok(_) => "plugin state could not be read".into(),
        }
    }

    /// Points `context.state` at `plugin`'s state for what follows.
    fn select_plugin(&mut self, plugin: &Arc<str>) {
        let mut current = self.facts.plugin.borrow_mut();
        if !Arc::ptr_eq(&current, plugin) && **current != **plugin {
            *current = plugin.clone();
            drop(current);
            self.frame.invalidate(STATE_ROOT);
            self.frame.invalidate(SETTINGS_ROOT);
        }
    }

    /// Renders every action of a fired rule into `rendered`; any failure discards them all.
    fn render(&mut self, rule: &CompiledRule) -> Result<(), String> {
        self.render_actions(&rule.key, &rule.def.plugin, &rule.actions)
    }

    /// Renders `actions` (all of a rule's, or an action node's) into `rendered`, for the rule
    /// `key` of `plugin`; any failure discards them all.
    fn render_actions(
        &mut self,
        key: &Arc<str>,
        plugin: &Arc<str>,
        actions: &[CompiledAction],
    ) -> Result<(), String> {
        let mark = self.rendered.len();
        let result = self.render_into(key, plugin, actions);
        if result.is_err() {
            self.rendered.truncate(mark);
        }
        result
    }

    fn render_into(
        &mut self,
        key: &Arc<str>,
        plugin: &Arc<str>,
        actions: &[CompiledAction],
    ) -> Result<(), String> {
        let templates = &self.program.templates;
        let facts = self.facts;
        let (knowledge, knowledge_configured) = (self.knowledge, self.knowledge_configured);
        let cache = &mut self.template_values;
        let mut values = || {
            if let Some((p, v)) = cache.as_ref()
                && p == plugin
            {
                return v.clone();
            }
            let v = facts.template_values();
            *cache = Some((plugin.clone(), v.clone()));
            v
        };
        let out = &mut self.rendered;
        for (i, action) in actions.iter().enumerate() {
            let which = |e: String| {
                if actions.len() == 1 {
                    format!("{} action: {e}", action.type_name())
                } else {
                    format!("action {} ({}): {e}", i + 1, action.type_name())
                }
            };
            let effect = match action {
                CompiledAction::Notify {
                    message,
                    category,
                    priority,
                    deliver_at,
                } => Effect::NotifySelf(Notification {
                    rule: key.clone(),
                    message: templates.render(message, &mut values).map_err(which)?,
                    category: category.clone(),
                    priority: *priority,
                    deliver_at: *deliver_at,
                    fired_at: facts.hook,
                }),
                CompiledAction::Log { message, level } => Effect::Log {
                    rule: key.clone(),
                    level: *level,
                    message: templates
                        .render(message, &mut values)
                        .map_err(which)?
                        .to_string(),
                },
                CompiledAction::SetState {
                    key: state_key,
                    value,
                } => Effect::SetState {
                    rule: key.clone(),
                    plugin: plugin.clone(),
                    key: templates
                        .render(state_key, &mut values)
                        .map_err(which)?
                        .to_string(),
                    value: templates.render_value(value, &mut values).map_err(which)?,
                },
                CompiledAction::Enrich { query } => {
                    let text = match query {
                        Some(q) => templates.render(q, &mut values).map_err(which)?.to_string(),
                        None => facts.facts.query.clone(),
                    };
                    let Some(k) = knowledge.registered() else {
                        return Err(which(if !knowledge_configured {
                            "knowledge enrichment is not configured (WardenBuilder::knowledge, or [knowledge] in warden.toml)".to_string()
                        } else if knowledge.knowledge.is_none() {
                            "the knowledge sources file did not load (see the diagnostics)"
                                .to_string()
                        } else {
                            format!(
                                "knowledge enrichment is not registered: {}",
                                knowledge
                                    .health
                                    .as_ref()
                                    .map(|h| h.reasons.join("; "))
                                    .unwrap_or_default()
                            )
                        }));
                    };
                    Effect::EnrichContext {
                        rule: key.clone(),
                        enrichment: crate::knowledge::enrich(
                            k,
                            &text,
                            facts.facts.turn.context_window,
                        ),
                    }
                }
                CompiledAction::Emit {
                    event_type,
                    payload,
                } => Effect::EmitEvent {
                    rule: key.clone(),
                    event_type: event_type.clone(),
                    payload: templates
                        .render_value(payload, &mut values)
                        .map_err(which)?,
                },
            };
            out.push(effect);
        }
        if facts.state_error.replace(false) {
            return Err(self.state_failure(plugin));
        }
        Ok(())
    }
}

/// What a behavior's tree reads and does, through the tick it runs in.
struct TreeEnv<'t, 'a> {
    tick: &'t mut Tick<'a>,
    rule: u32,
    tree: &'a crate::behavior::Tree,
}

impl TreeEnv<'_, '_> {
    fn key(&self) -> Arc<str> {
        self.tick.program.rules[self.rule as usize].key.clone()
    }

    fn error(&mut self, error: String) {
        let rule = Some(self.key());
        self.tick.errors.push(RuleError { rule, error });
    }
}

impl tree_run::Env for TreeEnv<'_, '_> {
    fn hook(&self) -> Hook {
        self.tick.facts.hook
    }

    fn turn(&self) -> u32 {
        self.tick.turn
    }

    fn now(&self) -> f64 {
        self.tick.facts.time
    }

    fn tool(&self) -> Option<&str> {
        self.tick.facts.event.tool.as_ref().map(|t| t.name.as_str())
    }

    fn condition(&mut self, condition: u32) -> bool {
        let Some(c) = self.tree.conditions.get(condition as usize) else {
            return false;
        };
        let verdict = c.eval(&mut self.tick.frame);
        if self.tick.facts.state_error.replace(false) {
            let plugin = self.tick.program.rules[self.rule as usize]
                .def
                .plugin
                .clone();
            let e = self.tick.state_failure(&plugin);
            self.error(e);
            return false;
        }
        match verdict {
            Verdict::True => true,
            Verdict::False => false,
            Verdict::Undetermined(why) => {
                tracing::debug!(rule = %self.key(), reason = %why, "behavior condition undetermined");
                false
            }
            Verdict::Error(e) => {
                self.error(format!("condition `{}`: {e}", c.source()));
                false
            }
        }
    }

    fn act(&mut self, group: u32) -> bool {
        let Some(actions) = self.tree.actions.get(group as usize) else {
            return false;
        };
        let rule = &self.tick.program.rules[self.rule as usize];
        let (key, plugin) = (rule.key.clone(), rule.def.plugin.clone());
        match self.tick.render_actions(&key, &plugin, actions) {
            Ok(()) => true,
            Err(e) => {
                self.error(e);
                false
            }
        }
    }

    fn script(&mut self, node: u32, script: u32, start: bool) -> tree_run::Status {
        let Some(leaf) = self.tree.scripts.get(script as usize) else {
            return tree_run::Status::Failure;
        };
        let program = self.tick.program;
        let rule = &program.rules[self.rule as usize];
        let step = self.tick.drive_script(
            (self.rule, node),
            &rule.key,
            start.then_some(&leaf.script),
            leaf.timeout,
        );
        let (effects, status) = match step {
            warden_lua::Step::Waiting { effects, .. } => (effects, tree_run::Status::Running),
            warden_lua::Step::Done { holds, effects } => (
                effects,
                if holds {
                    tree_run::Status::Success
                } else {
                    tree_run::Status::Failure
                },
            ),
            warden_lua::Step::Failed { error } => {
                self.error(format!("script {}: {error}", leaf.script.name()));
                return tree_run::Status::Failure;
            }
        };
        let hook = self.tick.facts.hook;
        for e in effects {
            self.tick.rendered.push(script_effect(rule, hook, e));
        }
        status
    }

    fn halt_script(&mut self, node: u32) {
        if let Some((task, key)) = self.tick.scripts.tasks.remove(&(self.rule, node)) {
            let reason = self
                .tick
                .halt_reason
                .clone()
                .unwrap_or_else(|| "its node was halted".into());
            let halted = self.tick.scripts.halt_task(task, key, &reason);
            self.tick.halted.push(halted);
        }
    }

    fn wake(&mut self, hook: Hook) {
        self.tick.wake.insert(hook);
    }

    fn trace(&mut self, node: u32, status: NodeStatus) {
        if let Some(t) = &mut self.tick.node_trace {
            t.push((self.rule, node, status));
        }
    }
}

/// The node of a rule's own script (not a behavior node) in the table of waiting scripts.
const ROOT: u32 = u32::MAX;

/// A script's action as the rule's effect (defaults as in rule files).
fn script_effect(rule: &CompiledRule, hook: Hook, e: warden_lua::Effect) -> Effect {
    match e {
        warden_lua::Effect::Notify {
            message,
            category,
            priority,
            deliver_at,
        } => Effect::NotifySelf(Notification {
            rule: rule.key.clone(),
            message: Arc::from(message),
            category: Arc::from(category.as_deref().unwrap_or("info")),
            priority: priority
                .as_deref()
                .and_then(Priority::parse)
                .unwrap_or(Priority::Normal),
            deliver_at: deliver_at
                .as_deref()
                .and_then(DeliverAt::parse)
                .unwrap_or(DeliverAt::TurnStart),
            fired_at: hook,
        }),
        warden_lua::Effect::Log { level, message } => Effect::Log {
            rule: rule.key.clone(),
            level: level
                .as_deref()
                .and_then(LogLevel::parse)
                .unwrap_or(LogLevel::Info),
            message,
        },
        warden_lua::Effect::SetState { key, value } => Effect::SetState {
            rule: rule.key.clone(),
            plugin: rule.def.plugin.clone(),
            key,
            value,
        },
        warden_lua::Effect::EmitEvent {
            event_type,
            payload,
        } => Effect::EmitEvent {
            rule: rule.key.clone(),
            event_type: Arc::from(event_type),
            payload,
        },
    }
}

/// A set of hooks (what a running tree waits for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HookSet(u8);

impl HookSet {
    pub(crate) fn insert(&mut self, hook: Hook) {
        self.0 |= 1 << hook.index();
    }

    pub(crate) fn contains(self, hook: Hook) -> bool {
        self.0 & (1 << hook.index()) != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn of(hook: Hook) -> Self {
        let mut s = HookSet::default();
        s.insert(hook);
        s
    }
}
