//! Evaluating the leaves of a step: a rule's gates (switched off, out of mode, decorators,
//! tool filter), its condition (an expression, a script, a behavior's tree), and rendering the
//! actions of the rules that fire. Every leaf reads the same frame; what the leaves render is
//! collected here and applied after the step.

use std::sync::Arc;
use std::time::Instant;

use bonsai_bt::Status;
use warden_expr::{Frame as Eval, Verdict};
use warden_load::{Decision, Hook, OnError};

use crate::session::keys::HookSet;
use crate::session::place::room_for_one;
use crate::session::scripts::{ROOT, Scripts, script_effect};
use warden_context::context::{Frame, SETTINGS_ROOT, STATE_ROOT};
use warden_context::template::Text;
use warden_program::actions::CompiledAction;
use warden_program::behavior::run::{NodeStatus, TreeRun};
use warden_program::hooks::Node;
use warden_program::outcome::{Effect, Evaluation, Halted, Notification, RuleError, TraceEntry};
use warden_program::program::Program;
use warden_program::rule::{Body, CompiledRule, RuleCondition};

/// What a session remembers about one rule (for its decorators).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RuleMemory {
    pub(crate) fires: u32,
    pub(crate) last_fired_turn: Option<u32>,
}

/// A rule that acted this tick: its rendered effects (not yet applied) are
/// `Tick::rendered[effects]`. `counts` is whether it fired (its decorators remember it); a
/// script's actions in a run that did not end in `true` apply without counting as a fire.
pub(crate) struct Fired {
    pub(crate) rule: u32,
    /// The trace entry of the evaluation that recorded it (none for a halt outside one).
    pub(crate) trace: Option<usize>,
    pub(crate) effects: std::ops::Range<usize>,
    pub(crate) counts: bool,
}

/// The state of one step while the trees run: every rule reads the same frozen frame.
pub(crate) struct Tick<'a, 'f> {
    pub(crate) program: &'a Program,
    pub(crate) facts: &'a Frame<'f>,
    pub(crate) frame: Eval<'a>,
    pub(crate) memory: &'a [RuleMemory],
    /// Per rule: on for this session's user and in the current mode.
    pub(crate) enabled: &'a [bool],
    /// Per rule: on for this session's user (whatever the mode).
    pub(crate) user_enabled: &'a [bool],
    /// Per rule: in shadow for this session's user. What a rule in shadow renders goes to
    /// `shadow_fired` and `shadow_rendered`, never applied; its failures to `shadow_errors`;
    /// and in an exclusive group it never holds the group (its leaf reports failure to the
    /// tree whatever it came to), so the live rules run as if it were off.
    pub(crate) shadow: &'a [bool],
    /// The entry being ticked is an exclusive group (a selector of several rules).
    pub(crate) in_group: bool,
    pub(crate) shadow_fired: Vec<Fired>,
    pub(crate) shadow_rendered: Vec<Effect>,
    pub(crate) shadow_errors: Vec<RuleError>,
    /// What the Warden's clones share: its knowledge, read (under a lock) by `enrich_context`.
    pub(crate) shared: &'a crate::shared::Shared,
    pub(crate) turn: u32,
    pub(crate) fired: Vec<Fired>,
    pub(crate) rendered: Vec<Effect>,
    pub(crate) errors: Vec<RuleError>,
    pub(crate) trace: Vec<TraceEntry>,
    /// The trace entry of the rule being evaluated, if one is.
    pub(crate) at: Option<usize>,
    pub(crate) timings: Option<Vec<f64>>,
    /// When the tick is not sampled: the evaluations that go into the execution log whatever
    /// the sampling (trace entry, milliseconds): the failed ones, and those of rules in shadow
    /// that fired (what a rule in shadow would have done is what it is there to show).
    pub(crate) unsampled_rows: Vec<(usize, f64)>,
    pub(crate) scripts: &'a mut Scripts,
    /// What the nodes left running in the current entry wait for.
    pub(crate) wake: HookSet,
    /// The hook whose trees the current entry belongs to.
    pub(crate) entry_hook: Hook,
    /// Behavior nodes that ran, and what each came to (explain mode).
    pub(crate) node_trace: Option<Vec<(u32, u32, NodeStatus)>>,
    /// The rules of the current entry whose leaf is still running.
    pub(crate) running_leaves: Leaves,
    pub(crate) halted: Vec<Halted>,
    /// While a tree is halted from outside (`Tick::halt_tree`): why, for its scripts' reports.
    pub(crate) halt_reason: Option<String>,
    /// The entry being ticked is a lone rule whose condition the threshold index found true
    /// (`HookTree::holds_when_chosen`): it is not evaluated again.
    pub(crate) holds: bool,
    /// The plugin `context.state` was last pointed at in this step (`Frame::plugin`, which
    /// only `select_plugin` sets), to tell a rule of the same plugin at a glance.
    pub(crate) plugin: Option<&'a Arc<str>>,
    /// The session, for the seed of the scripts this step starts.
    pub(crate) session: &'a str,
    /// The seed of the random numbers of the scripts this step starts (mixed with the rule
    /// and node of each), made when the first starts: most steps start none.
    pub(crate) seed: Option<u64>,
}

/// The rules of an entry whose leaf is still running: a few, kept inline (a tick with a waiting
/// script does not allocate for them), any more in a vector.
#[derive(Default)]
pub(crate) struct Leaves {
    first: [u32; 4],
    len: usize,
    more: Vec<u32>,
}

impl Leaves {
    pub(crate) fn push(&mut self, rule: u32) {
        match self.first.get_mut(self.len) {
            Some(slot) => *slot = rule,
            None => self.more.push(rule),
        }
        self.len += 1;
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.more.clear();
    }

    pub(crate) fn contains(&self, rule: &u32) -> bool {
        self.first[..self.len.min(4)].contains(rule) || self.more.contains(rule)
    }

    /// The rule whose leaf was last left running.
    pub(crate) fn last(&self) -> Option<&u32> {
        match self.len {
            0 => None,
            n if n <= self.first.len() => self.first.get(n - 1),
            _ => self.more.last(),
        }
    }
}

impl<'a> Tick<'a, '_> {
    /// Runs one leaf; Success means the rule fired (a selector stops there).
    pub(crate) fn run(&mut self, node: Node) -> Status {
        let Node::Rule(ix) = node;
        // Scripts, trees and rules in shadow are timed whatever the sampling (a failure, a
        // timeout, a firing in shadow is logged with how long it took); other expressions only
        // when the tick is sampled.
        let shadow = self.is_shadow(ix);
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let body = rule.body();
        let condition = body.map(|b| &b.condition);
        let timed =
            self.timings.is_some() || shadow || !matches!(condition, Some(RuleCondition::Expr(_)));
        // A script is timed by the clock its run's time limit counts from (one reading of the
        // clock per run, not three); only what the run took is in it.
        let script = matches!(condition, Some(RuleCondition::Script { .. }));
        if script && let Some(rt) = &mut self.scripts.runtime {
            rt.take_run_started();
        }
        let start = (timed && !script).then(Instant::now);
        // What the rule fires is recorded with the trace entry its evaluation gets.
        self.at = Some(self.trace.len());
        let evaluation = self.rule(ix, rule, body);
        if let Evaluation::Failed(error) = &evaluation {
            self.fail_closed(ix, error);
        }
        self.at = None;
        let status = match evaluation {
            Evaluation::Fired => Status::Success,
            Evaluation::Running => {
                self.running_leaves.push(ix);
                Status::Running
            }
            _ => Status::Failure,
        };
        let ms = match start {
            Some(s) => s.elapsed().as_secs_f64() * 1000.0,
            None if script
                && (self.timings.is_some()
                    || matches!(evaluation, Evaluation::Failed(_))
                    || (shadow && matches!(evaluation, Evaluation::Fired))) =>
            {
                self.script_ms()
            }
            None => 0.0,
        };
        match self.timings.as_mut() {
            Some(t) => t.push(ms),
            None if matches!(evaluation, Evaluation::Failed(_))
                || (shadow && matches!(evaluation, Evaluation::Fired)) =>
            {
                self.unsampled_rows.push((self.trace.len(), ms));
            }
            None => {}
        }
        if let Evaluation::Failed(error) = &evaluation {
            let failure = RuleError {
                rule: Some(self.program.rules[ix as usize].key.clone()),
                error: error.clone(),
            };
            match shadow {
                true => self.shadow_errors.push(failure),
                false => self.errors.push(failure),
            }
        }
        if let Evaluation::Undetermined(why) = &evaluation {
            tracing::debug!(rule = %self.program.rule_key(ix), reason = %why, "condition undetermined");
        }
        self.trace.push(TraceEntry {
            rule: ix,
            evaluation,
            shadow,
        });
        // In an exclusive group, a rule in shadow that fired or waits does not hold the group:
        // the rules after it run as they would if it were off. (A script of it that waits is
        // kept, and resumed when the group is next ticked at its hook.)
        if shadow && self.in_group {
            return Status::Failure;
        }
        status
    }

    /// How long the last script run took, in milliseconds, by the clock its time limit
    /// counted from (taken: 0 when no run started since).
    pub(super) fn script_ms(&mut self) -> f64 {
        self.scripts
            .runtime
            .as_mut()
            .and_then(warden_lua::Runtime::take_run_started)
            .map_or(0.0, |s| s.elapsed().as_secs_f64() * 1000.0)
    }

    /// Whether rule `ix` runs in shadow for this session.
    pub(crate) fn is_shadow(&self, ix: u32) -> bool {
        !self.shadow.is_empty() && self.shadow.get(ix as usize).copied().unwrap_or(false)
    }

    /// Evaluates rule `ix` (`rule`, with its `body` when it compiles).
    pub(super) fn rule(
        &mut self,
        ix: u32,
        rule: &'a CompiledRule,
        body: Option<&Body>,
    ) -> Evaluation {
        self.rule_inline(ix, rule, body)
    }

    /// [`Tick::rule`], inlined into the lean leaf (`Tick::lone_expression`), which ticks most
    /// rules of a many-rule tick: the call's frame and the move of its evaluation cost about a
    /// fifth of such a rule's work.
    #[inline(always)]
    pub(super) fn rule_inline(
        &mut self,
        ix: u32,
        rule: &'a CompiledRule,
        body: Option<&Body>,
    ) -> Evaluation {
        if !self.enabled.get(ix as usize).copied().unwrap_or(true) {
            let off = !self.user_enabled.get(ix as usize).copied().unwrap_or(true);
            // Switched off (or out of mode) while it ran: what it ran stops here (a tree's
            // `on_halted` actions apply with this tick's effects).
            if self.scripts.waiting(ix) {
                let why = if off {
                    "its rule was switched off".to_string()
                } else {
                    format!("its rule is not active in mode `{}`", self.facts.mode())
                };
                if !self.halt_tree(ix, &why) {
                    self.halted.extend(self.scripts.halt(ix, &why));
                }
            }
            return if off {
                Evaluation::Disabled
            } else {
                Evaluation::Inactive(self.facts.mode().clone())
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
        let gate = &rule.gate;
        let memory = &self.memory[ix as usize];
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
                .event()
                .tool
                .as_ref()
                .map(|t| t.name.as_str())
                .unwrap_or_default();
            if !def.tools.iter().any(|t| t == tool) {
                return Evaluation::NotMatched;
            }
        }
        // Only rules that compile are in a hook's trees.
        let Some(body) = body else {
            return Evaluation::NotMatched;
        };
        self.select_plugin(&def.plugin);
        let condition = match &body.condition {
            RuleCondition::Expr(c) => c,
            RuleCondition::Script { script, .. } => return self.script(ix, Some(script.clone())),
            RuleCondition::Tree(_) => return self.tree(ix),
        };
        let verdict = match std::mem::take(&mut self.holds) {
            true => Verdict::True,
            false => condition.eval(&mut self.frame),
        };
        if self.facts.state_error.replace(false) {
            return Evaluation::Failed(self.state_failure(&def.plugin));
        }
        match verdict {
            Verdict::True => match self.render(rule, body) {
                Ok(()) => {
                    self.record_firing(ix, self.rendered.len() - body.actions.len(), true);
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
    pub(super) fn drive_script(
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
        let journal_limit = self.scripts.journal_limit;
        // A waiting script's runtime is there: only a start may have to make it.
        if start.is_some()
            && let Err(error) = self.scripts.runtime()
        {
            return warden_lua::Step::Failed { error };
        }
        let super::scripts::Scripts {
            runtime,
            tasks,
            seeds,
            session_seed,
            ..
        } = &mut self.scripts;
        let Some(runtime) = runtime.as_mut() else {
            return warden_lua::Step::Failed {
                error: "the Lua runtime is unavailable".into(),
            };
        };
        // A waiting task stays where it is kept while it runs on: only one that stops waiting,
        // or whose replay record is full, leaves.
        let (step, over) = match start {
            Some(script) => {
                // By the rule's key, not its number: a program compiled on demand numbers rules
                // that do not compile too, so the same rule may have another number in another
                // process. (Hashed once per rule and key.)
                let key_seed = match seeds.get(&slot.0) {
                    Some((key, seed)) if Arc::ptr_eq(key, rule_key) => *seed,
                    _ => {
                        let seed = super::keys::key_seed(rule_key);
                        seeds.insert(slot.0, (rule_key.clone(), seed));
                        seed
                    }
                };
                let session_seed = match session_seed {
                    Some((id, seed)) if **id == *self.session => *seed,
                    _ => {
                        let seed = super::keys::session_seed(self.session);
                        *session_seed = Some((self.session.into(), seed));
                        seed
                    }
                };
                let step_seed = *self.seed.get_or_insert_with(|| {
                    super::keys::step_seed_from(session_seed, self.turn, facts.hook())
                });
                let seed = step_seed ^ key_seed.rotate_left(32) ^ u64::from(slot.1);
                let (task, step) = runtime.start_seeded(script, facts, timeout, seed);
                let over = task
                    .as_ref()
                    .is_some_and(|t| t.journal_len() > journal_limit);
                if let Some(task) = task {
                    tasks.insert(slot, (task, rule_key.clone()));
                }
                (step, over)
            }
            None => {
                let Some((task, _)) = tasks.get(&slot) else {
                    return warden_lua::Step::Failed {
                        error: "internal: no waiting script to resume".into(),
                    };
                };
                let step = runtime.resume(task, facts, timeout);
                let over = task.journal_len() > journal_limit;
                if !over && !matches!(step, warden_lua::Step::Waiting { .. }) {
                    tasks.remove(&slot);
                }
                (step, over)
            }
        };
        // A replay record past its limit: the script stops (a record that grew without
        // bound would make the session slower to read back at every tick).
        if over && let Some((task, key)) = self.scripts.tasks.remove(&slot) {
            let halted = self
                .scripts
                .halt_task(task, key, "its replay record is full");
            tracing::warn!(rule = %halted.rule, "a waiting script passed its replay record's limit");
            return warden_lua::Step::Failed {
                error: format!(
                    "stopped: its replay record passed {journal_limit} values (the `[sessions] journal_limit` of a session saved after every tick); wait for fewer events, or read less while waiting"
                ),
            };
        }
        if let warden_lua::Step::Waiting { wake, .. } = &step {
            self.wait_for(wake.as_deref());
        }
        step
    }

    /// What the entry just ticked waits for: what its nodes asked for, or else its own hook.
    pub(crate) fn wake_of(&self, hook: Hook) -> HookSet {
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
    pub(super) fn script(&mut self, ix: u32, start: Option<Arc<warden_lua::Script>>) -> Evaluation {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        self.select_plugin(&rule.def.plugin);
        let Some(body) = rule.body() else {
            return Evaluation::Failed("internal: not a script rule".into());
        };
        let RuleCondition::Script { timeout, script } = &body.condition else {
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
        // (Most runs act on nothing: no iterator is made, and dropped, for them.)
        if !effects.is_empty() {
            for e in effects {
                match script_effect(rule, facts.hook(), e) {
                    Ok(effect) => self.rendered.push(effect),
                    Err(why) => {
                        self.rendered.truncate(mark);
                        let error = format!("script {}: {why}", script.name());
                        // A run that failed does not wait on.
                        self.halted.extend(self.scripts.halt(ix, &error));
                        return Evaluation::Failed(error);
                    }
                }
            }
        }
        if holds && let Err(e) = self.render(rule, body) {
            self.rendered.truncate(mark);
            return Evaluation::Failed(e);
        }
        self.record_firing(ix, mark, holds);
        evaluation
    }

    /// A guard that failed decides deny when its rule says `on_error = "deny"` (fail closed).
    pub(super) fn fail_closed(&mut self, ix: u32, error: &str) {
        let rule = &self.program.rules[ix as usize];
        if rule.on_error != OnError::Deny {
            return;
        }
        let mark = self.rendered.len();
        self.rendered.push(Effect::Decide {
            rule: rule.key.clone(),
            decision: Decision::Deny,
            reason: Arc::from(format!(
                "denied because the guard `{}` failed and is set to fail closed: {error}",
                rule.key
            )),
        });
        self.record_firing(ix, mark, false);
    }

    /// Records what rule `ix` rendered since `mark` as one firing (its effects apply
    /// together), with the trace entry of the evaluation under way; `counts`: it fired (for
    /// its decorators), which records it even without effects.
    #[inline(always)]
    pub(super) fn record_firing(&mut self, ix: u32, mark: usize, counts: bool) {
        if (self.rendered.len() > mark || counts) && self.is_shadow(ix) {
            // What a rule in shadow rendered is kept apart, and never applied.
            let start = self.shadow_rendered.len();
            self.shadow_rendered.extend(self.rendered.drain(mark..));
            self.shadow_fired.push(Fired {
                rule: ix,
                trace: self.at,
                effects: start..self.shadow_rendered.len(),
                counts,
            });
        } else if self.rendered.len() > mark || counts {
            self.fired.push(Fired {
                rule: ix,
                trace: self.at,
                effects: mark..self.rendered.len(),
                counts,
            });
        }
    }

    pub(super) fn state_failure(&self, plugin: &Arc<str>) -> String {
        self.facts.state.failure(plugin)
    }

    /// Points `context.state` at `plugin`'s state for what follows.
    #[inline(always)]
    pub(super) fn select_plugin(&mut self, plugin: &'a Arc<str>) {
        // The rules of a tick are mostly one plugin's: the same pointer, no cell borrowed
        // (checked inline at every leaf; the change itself is out of line).
        if !self.plugin.as_ref().is_some_and(|p| Arc::ptr_eq(p, plugin)) {
            self.point_at(plugin);
        }
    }

    /// The change of [`Tick::select_plugin`]: at the first rule of a step, and where a rule of
    /// another plugin follows.
    #[inline(never)]
    fn point_at(&mut self, plugin: &'a Arc<str>) {
        self.plugin = Some(plugin);
        let mut current = self.facts.plugin.borrow_mut();
        match current.as_mut() {
            Some(c) if Arc::ptr_eq(c, plugin) || **c == **plugin => {}
            _ => {
                *current = Some(plugin.clone());
                drop(current);
                self.frame.invalidate(STATE_ROOT);
                self.frame.invalidate(SETTINGS_ROOT);
            }
        }
    }

    /// Renders every action of a fired rule into `rendered`; any failure discards them all.
    #[inline(always)]
    fn render(&mut self, rule: &CompiledRule, body: &Body) -> Result<(), String> {
        // A lone notification of a fixed text, the most common action, needs neither the
        // template engine nor a way back on failure: it is written as it is.
        if let [
            CompiledAction::Notify {
                message: Text::Static(message),
                category,
                priority,
                deliver_at,
            },
        ] = &body.actions[..]
            && !self.facts.state_error.get()
        {
            let (len, end) = (self.rendered.len(), room_for_one(&mut self.rendered));
            // SAFETY: `end` is the vector's end, with room for one more: written, then counted.
            unsafe {
                end.write(Effect::NotifySelf(Notification {
                    rule: rule.key.clone(),
                    message: message.clone(),
                    category: category.clone(),
                    priority: *priority,
                    deliver_at: *deliver_at,
                    fired_at: self.facts.hook(),
                }));
                self.rendered.set_len(len + 1);
            }
            return Ok(());
        }
        self.render_actions(&rule.key, &rule.def.plugin, &body.actions)
    }

    /// Renders `actions` (all of a rule's, or an action node's) into `rendered`, for the rule
    /// `key` of `plugin`; any failure discards them all.
    pub(super) fn render_actions(
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
        let templates = &self.program.compiler.templates;
        let facts = self.facts;
        let shared = self.shared;
        let mut values = facts.template_context();
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
                    fired_at: facts.hook(),
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
                    scope,
                } => Effect::SetState {
                    rule: key.clone(),
                    plugin: plugin.clone(),
                    scope: *scope,
                    key: templates
                        .render(state_key, &mut values)
                        .map_err(which)?
                        .to_string(),
                    value: Box::new(templates.render_value(value, &mut values).map_err(which)?),
                },
                CompiledAction::Enrich { query } => {
                    let text = match query {
                        Some(q) => templates.render(q, &mut values).map_err(which)?.to_string(),
                        None => facts.facts.query.clone(),
                    };
                    let knowledge = shared.knowledge();
                    let Some(k) = knowledge.registered() else {
                        return Err(which(if shared.knowledge_config.is_none() {
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
                    payload: Box::new(
                        templates
                            .render_value(payload, &mut values)
                            .map_err(which)?,
                    ),
                },
                CompiledAction::Decide { decision, reason } => Effect::Decide {
                    rule: key.clone(),
                    decision: *decision,
                    reason: templates.render(reason, &mut values).map_err(which)?,
                },
                CompiledAction::Rewrite { set } => {
                    let mut rendered = Vec::with_capacity(set.len());
                    for (path, value) in set {
                        let v = templates.render_value(value, &mut values).map_err(which)?;
                        rendered.push((path.clone(), v));
                    }
                    Effect::Rewrite {
                        rule: key.clone(),
                        set: rendered,
                    }
                }
            };
            // Rule files are checked at load; a behavior's action node may run at any hook
            // its tree waits for, so its decisions are checked where they are made.
            if matches!(effect, Effect::Decide { .. } | Effect::Rewrite { .. })
                && let Some(why) = effect.misplaced_at(facts.hook())
            {
                return Err(which(why));
            }
            out.push(effect);
        }
        if facts.state_error.replace(false) {
            return Err(self.state_failure(plugin));
        }
        Ok(())
    }
}
