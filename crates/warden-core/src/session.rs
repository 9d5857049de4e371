//! A session: one agent conversation. It keeps the facts Warden learns from events, the
//! memory of decorators (cooldowns, fire counts), trees left running, and notifications
//! waiting for their delivery point. [`Session::tick`] runs one hook.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bonsai_bt::{BT, Status};
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
            errors,
            trace: Vec::new(),
            timings: shared.config.execution_log.then(Vec::new),
        };

        let tree = program.hook(hook);
        let bonsai_event = bonsai_bt::Event::zero_dt_args();
        for &e in tree.entries_for(tool) {
            let key = (hook, e);
            let entry = &tree.entries[e as usize];
            let mut bt = match self.running.is_empty() {
                true => None,
                false => self.running.remove(&key),
            }
            .unwrap_or_else(|| BT::new(entry.behavior.clone(), ()));
            let status = bt.tick(&bonsai_event, &mut |args, _| (tick.run(*args.action), 0.0));
            if matches!(status, Some((Status::Running, _))) {
                self.running.insert(key, bt);
            }
        }

        let Tick {
            fired,
            mut errors,
            mut trace,
            timings,
            ..
        } = tick;
        let mut effects = Vec::new();
        self.apply(&program, hook, fired, &mut effects, &mut errors, &mut trace);
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
    /// together or not at all (and then none of its effects apply).
    fn apply(
        &mut self,
        program: &Program,
        hook: Hook,
        fired: Vec<Fired>,
        effects: &mut Vec<Effect>,
        errors: &mut Vec<RuleError>,
        trace: &mut [TraceEntry],
    ) {
        if fired.is_empty() {
            return;
        }
        let groups: Vec<Vec<StateWrite>> = fired
            .iter()
            .map(|f| {
                f.effects
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
        let results: Vec<Result<(), String>> = if groups.iter().all(Vec::is_empty) {
            vec![Ok(()); fired.len()]
        } else {
            match self.shared.store.apply_writes(&groups) {
                Ok(r) => r
                    .into_iter()
                    .map(|r| r.map_err(|e| e.to_string()))
                    .collect(),
                Err(e) => groups
                    .iter()
                    .map(|g| {
                        if g.is_empty() {
                            Ok(())
                        } else {
                            Err(e.to_string())
                        }
                    })
                    .collect(),
            }
        };
        for (f, result) in fired.into_iter().zip(results) {
            let rule = &program.rules[f.rule as usize];
            if let Err(e) = result {
                let error =
                    format!("its state could not be saved, so none of its effects applied: {e}");
                trace[f.trace].evaluation = Evaluation::Failed(error.clone());
                errors.push(RuleError {
                    rule: Some(rule.key.clone()),
                    error,
                });
                continue;
            }
            let memory = &mut self.memory[f.rule as usize];
            memory.fires = memory.fires.saturating_add(1);
            memory.last_fired_turn = Some(self.facts.turn.number);
            for effect in f.effects {
                match &effect {
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
                            plugin: program.rules[f.rule as usize].def.plugin.clone(),
                            session: self.id.clone(),
                            hook,
                        });
                    }
                    Effect::NotifySelf(_) | Effect::SetState { .. } => {}
                }
                effects.push(effect);
            }
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

/// A rule that fired this tick, with its rendered effects (not yet applied).
struct Fired {
    rule: u32,
    trace: usize,
    effects: Vec<Effect>,
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
        let def = &rule.def;
        let memory = self.memory[ix as usize];
        if def.once_per_session && memory.fires > 0 {
            return Evaluation::Suppressed("once per session");
        }
        if def.max_fires.is_some_and(|max| memory.fires >= max) {
            return Evaluation::Suppressed("max fires reached");
        }
        if let (Some(n), Some(last)) = (def.cooldown_turns, memory.last_fired_turn)
            && self.turn < last.saturating_add(n)
        {
            return Evaluation::Suppressed("cooling down");
        }
        if !def.tools.is_empty() {
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
                Ok(effects) => {
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

    /// Renders every action of a fired rule; any failure discards them all.
    fn render(&mut self, rule: &CompiledRule) -> Result<Vec<Effect>, String> {
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
        let mut out = Vec::with_capacity(rule.actions.len());
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
        Ok(out)
    }
}
