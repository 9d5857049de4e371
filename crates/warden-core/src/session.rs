//! A session: one agent conversation. It keeps the facts Warden learns from events, the
//! memory of decorators (cooldowns, fire counts), trees left running, and notifications
//! waiting for their delivery point. [`Session::tick`] runs one hook.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bonsai_bt::{BT, Behavior, Status};
use warden_expr::{Frame, Verdict};
use warden_store::{ExecutionRecord, StateScope, StateWrite};

use crate::context::{STATE_ROOT, StateReader, TickFacts};
use crate::event::Event;
use crate::facts::SessionFacts;
use crate::hook::Hook;
use crate::outcome::{Effect, Evaluation, Notification, Outcome, RuleError, TraceEntry};
use crate::program::{CompiledAction, CompiledRule, Node, Program};
use crate::rule::LogLevel;
use crate::warden::{BusEvent, Shared};

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
    memory: Vec<RuleMemory>,
    memory_keys: Vec<Arc<str>>,
    running: HashMap<(Hook, u32), BT<Node, ()>>,
    mailbox: Vec<Notification>,
    ended: bool,
    explain: bool,
    /// Reused between ticks: the entries selected for the current tick.
    selected: Vec<u32>,
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
        let explain = opts.explain || shared.config.execution_log;
        Session {
            shared,
            id,
            facts,
            generation: u64::MAX,
            memory: Vec::new(),
            memory_keys: Vec::new(),
            running: HashMap::new(),
            mailbox: Vec::new(),
            ended: false,
            explain,
            selected: Vec::new(),
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

    /// Whether `on_session_end` was handled.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Keeps decorator memory across a program change, by rule id.
    fn adopt(&mut self, program: &Program) {
        if self.generation == program.generation {
            return;
        }
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
        // Running trees belong to the program that started them.
        self.running.clear();
        self.generation = program.generation;
    }

    /// Handles one hook: updates the facts, ticks the hook's trees, applies the effects of
    /// the rules that fired (in priority order) and returns what was decided. Never panics
    /// on bad input and never fails as a whole: a failing rule is reported in
    /// [`Outcome::errors`] and the others run.
    pub fn tick(&mut self, hook: Hook, event: Event) -> Outcome {
        let program = self.shared.program();
        self.adopt(&program);
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
        let tool = if hook.is_tool_hook() {
            event.tool.as_ref().map(|t| t.name.as_str())
        } else {
            None
        };

        let tree = program.hook(hook);
        let shared = self.shared.clone();
        let store = &shared.store;
        let tick_facts = TickFacts {
            facts: &self.facts,
            hook,
            event: &event,
            time,
            state: StateReader::new(store, &self.facts.user.id, &self.facts.project.id),
            plugin: std::cell::RefCell::new(Arc::from("")),
            state_error: std::cell::Cell::new(false),
        };
        let mut tick = Tick {
            program: &program,
            facts: &tick_facts,
            frame: Frame::new(&tick_facts),
            template_values: None,
            memory: &self.memory,
            turn: self.facts.turn.number,
            fired: Vec::new(),
            rendered: Vec::new(),
            errors,
            trace: Vec::with_capacity(tree.entries.len()),
            timings: shared.config.execution_log.then(Vec::new),
        };

        let bonsai_event = bonsai_bt::Event::zero_dt_args();
        let mut selected = std::mem::take(&mut self.selected);
        if hook.is_tool_hook() && event.tool.is_none() {
            // Reported above; rules of a tool hook need to know which tool.
            selected.clear();
        } else {
            tree.select(tool, &tick_facts, self.explain, &mut selected);
        }
        for &e in &selected {
            let key = (hook, e);
            let entry = &tree.entries[e as usize];
            let resumed = match self.running.is_empty() {
                true => None,
                false => self.running.remove(&key),
            };
            match (&entry.behavior, resumed) {
                // A tree of one leaf: bonsai's state for a lone action is the action itself,
                // so the leaf is run directly (building a bonsai state for it each tick cost
                // a quarter of a tick). A leaf left running is kept as a bonsai tree.
                (Behavior::Action(node), None) => {
                    if tick.run(*node) == Status::Running {
                        self.running
                            .insert(key, BT::new(entry.behavior.clone(), ()));
                    }
                }
                (_, resumed) => {
                    let mut bt = resumed.unwrap_or_else(|| BT::new(entry.behavior.clone(), ()));
                    let status =
                        bt.tick(&bonsai_event, &mut |args, _| (tick.run(*args.action), 0.0));
                    if matches!(status, Some((Status::Running, _))) {
                        self.running.insert(key, bt);
                    }
                }
            }
        }
        self.selected = selected;

        let Tick {
            fired,
            rendered,
            mut errors,
            mut trace,
            timings,
            ..
        } = tick;
        let effects = self.apply(&program, hook, fired, rendered, &mut errors, &mut trace);
        if let Some(timings) = timings {
            self.record_executions(&program, hook, &trace, &timings);
        }
        let inject = self.deliver(hook, &effects);
        if hook == Hook::OnSessionEnd {
            self.end();
        }
        Outcome {
            hook,
            effects,
            inject,
            errors,
            trace,
            program,
        }
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
                trace[f.trace].evaluation = Evaluation::Failed(error.clone());
                errors.push(RuleError {
                    rule: Some(rule.key.clone()),
                    error,
                });
                keep[f.effects.clone()].fill(false);
                continue;
            }
            let memory = &mut self.memory[f.rule as usize];
            memory.fires = memory.fires.saturating_add(1);
            memory.last_fired_turn = Some(self.facts.turn.number);
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
                    Effect::NotifySelf(_) | Effect::SetState { .. } => {}
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

    fn end(&mut self) {
        self.ended = true;
        self.running.clear();
        if !self.mailbox.is_empty() {
            tracing::debug!(session = %self.id, dropped = self.mailbox.len(), "session ended with notifications still waiting for delivery");
            self.mailbox.clear();
        }
    }

    fn record_executions(
        &self,
        program: &Program,
        hook: Hook,
        trace: &[TraceEntry],
        timings: &[f64],
    ) {
        let records: Vec<ExecutionRecord> = trace
            .iter()
            .zip(timings)
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

/// A rule that fired this tick: its rendered effects (not yet applied) are
/// `Tick::rendered[effects]`.
struct Fired {
    rule: u32,
    trace: usize,
    effects: std::ops::Range<usize>,
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
    turn: u32,
    fired: Vec<Fired>,
    rendered: Vec<Effect>,
    errors: Vec<RuleError>,
    trace: Vec<TraceEntry>,
    timings: Option<Vec<f64>>,
}

impl Tick<'_> {
    /// Runs one leaf; Success means the rule fired (a selector stops there).
    fn run(&mut self, node: Node) -> Status {
        match node {
            Node::Rule(ix) => {
                let start = self.timings.as_ref().map(|_| Instant::now());
                let evaluation = self.rule(ix);
                let status = if evaluation == Evaluation::Fired {
                    Status::Success
                } else {
                    Status::Failure
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
                if evaluation == Evaluation::Fired
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
        let verdict = rule.condition.eval(&mut self.frame);
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
                    });
                    Evaluation::Fired
                }
                Err(e) => Evaluation::Failed(e),
            },
            Verdict::False => Evaluation::NotMatched,
            Verdict::Undetermined(why) => Evaluation::Undetermined(why),
            Verdict::Error(e) => {
                Evaluation::Failed(format!("condition `{}`: {e}", rule.condition.source()))
            }
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
        }
    }

    /// Renders every action of a fired rule into `rendered`; any failure discards them all.
    fn render(&mut self, rule: &CompiledRule) -> Result<(), String> {
        let mark = self.rendered.len();
        let result = self.render_into(rule);
        if result.is_err() {
            self.rendered.truncate(mark);
        }
        result
    }

    fn render_into(&mut self, rule: &CompiledRule) -> Result<(), String> {
        let templates = &self.program.templates;
        let facts = self.facts;
        let plugin = &rule.def.plugin;
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
        for (i, action) in rule.actions.iter().enumerate() {
            let which = |e: String| {
                if rule.actions.len() == 1 {
                    format!("{} action: {e}", rule.def.actions[i].type_name())
                } else {
                    format!(
                        "action {} ({}): {e}",
                        i + 1,
                        rule.def.actions[i].type_name()
                    )
                }
            };
            let effect = match action {
                CompiledAction::Notify {
                    message,
                    category,
                    priority,
                    deliver_at,
                } => Effect::NotifySelf(Notification {
                    rule: rule.key.clone(),
                    message: templates.render(message, &mut values).map_err(which)?,
                    category: category.clone(),
                    priority: *priority,
                    deliver_at: *deliver_at,
                    fired_at: facts.hook,
                }),
                CompiledAction::Log { message, level } => Effect::Log {
                    rule: rule.key.clone(),
                    level: *level,
                    message: templates
                        .render(message, &mut values)
                        .map_err(which)?
                        .to_string(),
                },
                CompiledAction::SetState { key, value } => Effect::SetState {
                    rule: rule.key.clone(),
                    plugin: plugin.clone(),
                    key: templates
                        .render(key, &mut values)
                        .map_err(which)?
                        .to_string(),
                    value: templates.render_value(value, &mut values).map_err(which)?,
                },
                CompiledAction::Emit {
                    event_type,
                    payload,
                } => Effect::EmitEvent {
                    rule: rule.key.clone(),
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
