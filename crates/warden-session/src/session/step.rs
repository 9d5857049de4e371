//! One step of a tick: the trees of one hook (and those of other hooks waiting for it) ticked
//! on the frame, then what they rendered applied and the notifications due delivered. A tick
//! runs one step for the hook reported, after one for Warden's own `on_mode_change` when the
//! mode changed.

use std::sync::Arc;

use bonsai_bt::Behavior;
use warden_expr::Frame as Eval;
use warden_load::Hook;

use crate::session::bonsai::{Running, tick_entry};
use crate::session::effects::{self, Actor, AfterCommit};
use crate::session::evaluate::Tick;
use crate::session::keys::{HookSet, IndexMap};
use crate::session::place::room;
use crate::session::ruling;
use crate::session::trees::Trees;
use crate::shared::Shared;
use warden_context::context::Frame;
use warden_control::Resolved;
use warden_program::hooks::Node;
use warden_program::outcome::{Effect, Halted, Notification, Outcome, RuleError, TraceEntry};
use warden_program::program::Program;

/// What a step reads and the parts of the session it changes.
pub(crate) struct Step<'s, 'f, 't> {
    pub shared: &'s Shared,
    pub program: &'s Arc<Program>,
    pub frame: &'s Frame<'f>,
    pub resolved: &'s Resolved,
    /// The active mode, as an index into the program's modes.
    pub mode: Option<usize>,
    pub session: &'s str,
    pub trees: &'s mut Trees,
    pub mailbox: &'s mut Vec<Notification>,
    /// Evaluate every rule and say why each did or did not fire.
    pub explain: bool,
    /// Record the step in the execution log.
    pub logging: bool,
    /// The tick's transaction.
    pub tx: &'s warden_store::TickTransaction<'t>,
    /// Why the database could not be opened, when the Warden runs without it: shared state
    /// writes fail with it.
    pub store_unavailable: Option<&'s str>,
    /// What the tick does once it has committed.
    pub after_commit: &'s mut Vec<AfterCommit>,
    /// Set when a step rendered a `set_state` of the session's own scope: the tick then
    /// writes it into the session's facts (`effects::write_session_state`).
    pub session_state: bool,
}

impl Step<'_, '_, '_> {
    /// Runs the trees of the frame's hook, applies what they decided and delivers the
    /// notifications due; `errors` and `halted` are what the tick found before the step.
    pub(crate) fn run(&mut self, errors: Vec<RuleError>, halted: Vec<Halted>) -> Outcome {
        let program = self.program;
        let frame = self.frame;
        let hook = frame.hook();
        let event = frame.event();
        let tool = if hook.is_tool_hook() {
            event.tool.as_ref().map(|t| t.name.as_str())
        } else {
            None
        };
        self.trees.refresh_active(program, self.resolved, self.mode);
        let tree = program.hook(hook);
        let shared = self.shared;
        // Knowledge enrichment, the built-in capability: every query, once it registered.
        let auto_enrichment = match &shared.knowledge_config {
            Some(c) if c.at_query_start && hook == Hook::OnQueryStart => {
                let knowledge = shared.knowledge();
                knowledge.registered().map(|k| {
                    crate::knowledge::enrich(k, &frame.facts.query, frame.facts.turn.context_window)
                })
            }
            _ => None,
        };
        let trees = &mut *self.trees;
        let mut tick = Tick {
            program,
            facts: frame,
            frame: Eval::new(frame),
            memory: &trees.memory,
            enabled: if program.modes.is_some() {
                &trees.active
            } else {
                self.resolved.enabled()
            },
            user_enabled: self.resolved.enabled(),
            shadow: self.resolved.shadow(),
            in_group: false,
            shadow_fired: Vec::new(),
            shadow_rendered: Vec::new(),
            shadow_errors: Vec::new(),
            shared,
            turn: frame.facts.turn.number,
            fired: std::mem::take(&mut trees.fired),
            rendered: Vec::new(),
            errors,
            trace: Vec::new(),
            at: None,
            timings: self.logging.then(Vec::new),
            unsampled_rows: Vec::new(),
            scripts: &mut trees.scripts,
            wake: HookSet::default(),
            entry_hook: hook,
            running_leaves: Default::default(),
            node_trace: self.explain.then(Vec::new),
            halted,
            halt_reason: None,
            session: self.session,
            seed: None,
            holds: false,
            plugin: None,
        };

        // Waiting scripts a saved session could not bring back: their rules halt now, a
        // behavior through its `on_halted` path.
        if !tick.scripts.lost.is_empty() {
            halt_lost(&mut tick);
        }
        let bonsai_event = bonsai_bt::Event::zero_dt_args();
        let running = &mut trees.running;
        let mut selected = std::mem::take(&mut trees.selected);
        // Whether the threshold index chose the entries (so that a lone threshold rule it
        // chose holds without evaluating its condition).
        let mut indexed = false;
        // Whether a tree of another hook runs (it may wait for this one): most often none
        // does, and then none is looked for after this hook's own trees.
        let mut foreign = !running.is_empty();
        if hook.is_tool_hook() && event.tool.is_none() {
            // Reported by the facts; rules of a tool hook need to know which tool.
            selected.clear();
        } else {
            indexed = tree.select(tool, frame, self.explain || self.logging, &mut selected);
            // A running tree resumes at its hook whatever the tool: its filter was checked when
            // it started (and its rules check theirs when they start).
            if !running.is_empty() {
                let before = selected.len();
                foreign = false;
                for &(h, e) in running.keys() {
                    if h != hook {
                        foreign = true;
                    } else if !selected.contains(&e) {
                        selected.push(e);
                    }
                }
                if selected.len() > before {
                    selected.sort_unstable();
                }
            }
        }
        // Room for what the selected trees fire, made once (growing it a push at a time costs
        // more than the rules' own work). A few trees (a waiting script, say) need none: the
        // first push makes room for four, and a tree that does not fire makes none.
        if selected.len() > 4 {
            tick.fired.reserve(selected.len());
            room(&mut tick.rendered, selected.len());
        }
        room(&mut tick.trace, selected.len());
        // The lean leaf: a lone expression rule when nothing runs (no tree left running, no
        // script waiting), no rule is in shadow and the tick is not sampled. It cannot be left
        // running nor leave a script behind, so bonsai's bridge has nothing to do for it
        // (`Tick::lone_expression`), and it changes none of this: only an entry that takes the
        // general path may, so it is looked at again after each of those.
        let mut lean = running.is_empty() && tick.plain();
        for &e in &selected {
            let key = (hook, e);
            let entry = &tree.entries[e as usize];
            let holds = indexed && tree.holds_when_chosen(e);
            if lean
                && let Behavior::Action(Node::Rule(ix)) = entry.behavior
                && tick.lone_expression(ix, holds)
            {
                continue;
            }
            // A tree left running: not ticked at this hook when it waits for another, and a
            // lone rule whose script waits takes the second lean leaf.
            if !running.is_empty() && resumed_lean(running, key, entry, &mut tick) {
                lean = running.is_empty() && tick.plain();
                continue;
            }
            tick.holds = holds && !running.contains_key(&key);
            tick_entry(running, key, entry, &mut tick, &bonsai_event);
            lean = running.is_empty() && tick.plain();
        }
        tick.holds = false;
        trees.selected = selected;
        // Trees of other hooks waiting for this one (a script's `wait_for`) resume now, after
        // this hook's own trees. (The trees this hook's ticked are all of this hook.)
        if foreign && !running.is_empty() {
            resume_waiting(running, program, hook, &mut tick, &bonsai_event);
        }
        // The session ends: trees still running are halted in this tick, so that their
        // `on_halted` actions apply (scripts of plain rules are closed when the session ends).
        if hook == Hook::OnSessionEnd && !tick.scripts.trees.is_empty() {
            halt_at_session_end(&mut tick);
        }
        let Tick {
            fired,
            rendered,
            mut errors,
            mut trace,
            timings,
            unsampled_rows,
            mut halted,
            node_trace,
            shadow_fired,
            shadow_rendered,
            mut shadow_errors,
            ..
        } = tick;
        // A rule in shadow changes nothing the host sees: its scripts' halts are reported with
        // its other failures, apart.
        if !self.resolved.shadow().is_empty() && !halted.is_empty() {
            shadow_halts(
                program,
                self.resolved.shadow(),
                &mut halted,
                &mut shadow_errors,
            );
        }
        let actor = Actor {
            session: self.session,
            user: &frame.facts.user.id,
            project: &frame.facts.project.id,
            turn: frame.facts.turn.number,
        };
        let kinds = effects::Kinds::of(&rendered, hook);
        self.session_state |= kinds.session_state;
        let effects = effects::apply(
            self.tx,
            self.store_unavailable,
            self.after_commit,
            &actor,
            program,
            hook,
            &mut trees.memory,
            &fired,
            rendered,
            kinds,
            &mut errors,
            &mut trace,
        );
        // Kept for the next step: a tick of many firing rules allocates nothing for them.
        trees.fired = fired;
        trees.fired.clear();
        // A rule in shadow remembers its own firings (its decorators work as they would live);
        // nothing else of what it rendered applies.
        for f in shadow_fired.iter().filter(|f| f.counts) {
            let m = &mut trees.memory[f.rule as usize];
            m.fires = m.fires.saturating_add(1);
            m.last_fired_turn = Some(actor.turn);
        }
        if !errors.is_empty() {
            warn_failures(self.session, hook, &errors);
        }
        // (What `apply` kept is some of what was rendered: a kind it found none of is none.)
        let merged = if kinds.ruling {
            ruling::merge(
                &effects,
                event.tool.as_ref().map(|t| &t.arguments),
                &mut errors,
            )
        } else {
            ruling::Merged::default()
        };
        // The execution log: a sampled tick's evaluations, and whatever the sampling, the
        // failures and the firings in shadow.
        if timings.is_some() || !unsampled_rows.is_empty() {
            let log = Log {
                tx: self.tx,
                actor: &actor,
                program,
                hook,
            };
            log.record(
                &trace,
                timings,
                &unsampled_rows,
                &effects,
                &shadow_rendered,
                merged.ruling.as_ref(),
            );
        }
        let (inject, dropped) = effects::deliver_kinds(self.mailbox, hook, &effects, kinds);
        if dropped > 0 {
            errors.push(dropped_notifications(dropped));
        }
        let enrichment = kinds
            .enrichment
            .then(|| {
                effects.iter().rev().find_map(|e| match e {
                    Effect::EnrichContext { enrichment, .. } => Some(enrichment.clone()),
                    _ => None,
                })
            })
            .flatten()
            .or(auto_enrichment);
        Outcome {
            hook,
            effects,
            inject,
            rendered: std::sync::OnceLock::new(),
            errors,
            halted,
            enrichment,
            mode: frame.mode().clone(),
            mode_change: None,
            ruling: merged.ruling,
            overridden: merged.overridden,
            unsaved: None,
            shadow: shadow_rendered,
            shadow_errors,
            trace,
            nodes: node_trace.unwrap_or_default(),
            program: program.clone(),
        }
    }
}

/// The entry `key` when a tree of it is left running: true, having done all there is to do
/// for it, when it waits for another hook (it is not ticked at this one) or is a lone rule
/// whose script waits and took the lean leaf (`Tick::lone_script`); false when the general
/// path ticks it. (Out of line: a tick of many rules and nothing running has no use for it.)
#[inline(never)]
fn resumed_lean(
    running: &mut IndexMap<(Hook, u32), Running>,
    key: (Hook, u32),
    entry: &warden_program::hooks::Entry,
    tick: &mut Tick<'_, '_>,
) -> bool {
    let Some(r) = running.get_mut(&key) else {
        return false;
    };
    if !r.wake.contains(key.0) {
        return true;
    }
    let Behavior::Action(Node::Rule(ix)) = entry.behavior else {
        return false;
    };
    match tick.lone_script(ix) {
        Some(true) => r.wake = tick.wake_of(key.0),
        Some(false) => {
            running.remove(&key);
        }
        None => return false,
    }
    true
}

// The step's rare work, out of line: `Step::run` runs at every tick, and what it leaves
// inline is what the processor's instruction cache holds for it.

/// Halts the rules whose waiting scripts a saved session could not bring back (a behavior
/// through its `on_halted` path).
#[cold]
#[inline(never)]
fn halt_lost(tick: &mut Tick<'_, '_>) {
    let program = tick.program;
    for (ix, why) in std::mem::take(&mut tick.scripts.lost) {
        if !tick.halt_tree(ix, &why) {
            tick.halted.push(Halted {
                rule: program.rules[ix as usize].key.clone(),
                reason: why,
            });
        }
    }
}

/// Resumes the trees of other hooks waiting for `hook` (a script's `wait_for`), in order.
#[inline(never)]
fn resume_waiting(
    running: &mut IndexMap<(Hook, u32), Running>,
    program: &Program,
    hook: Hook,
    tick: &mut Tick<'_, '_>,
    bonsai_event: &bonsai_bt::Event,
) {
    let mut waiting: Vec<(Hook, u32)> = running
        .iter()
        .filter(|(k, r)| k.0 != hook && r.wake.contains(hook))
        .map(|(k, _)| *k)
        .collect();
    waiting.sort();
    for key in waiting {
        let entry = &program.hook(key.0).entries[key.1 as usize];
        tick_entry(running, key, entry, tick, bonsai_event);
    }
}

/// Halts the behaviors still running when the session ends, in this tick.
#[cold]
#[inline(never)]
fn halt_at_session_end(tick: &mut Tick<'_, '_>) {
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

/// Moves the halts of rules in `shadow` from `halted` to their failures.
#[cold]
#[inline(never)]
fn shadow_halts(
    program: &Program,
    shadow: &[bool],
    halted: &mut Vec<Halted>,
    shadow_errors: &mut Vec<RuleError>,
) {
    halted.retain(|h| {
        let in_shadow = program
            .rule_index(&h.rule)
            .is_some_and(|ix| shadow.get(ix).copied().unwrap_or(false));
        if in_shadow {
            shadow_errors.push(RuleError {
                rule: Some(h.rule.clone()),
                error: format!("halted: {}", h.reason),
            });
        }
        !in_shadow
    });
}

/// Logs the step's failures.
#[cold]
#[inline(never)]
fn warn_failures(session: &str, hook: Hook, errors: &[RuleError]) {
    for e in errors {
        let rule = e.rule.as_deref().unwrap_or("-");
        tracing::warn!(target: "warden::rule", session, hook = hook.name(), rule, error = %e.error, "a rule failed");
    }
}

/// The failure that says `dropped` notifications did not fit the mailbox.
#[cold]
#[inline(never)]
fn dropped_notifications(dropped: usize) -> RuleError {
    RuleError {
        rule: None,
        error: format!(
            "{dropped} notification(s) waiting for their delivery point were dropped: at most {} wait, and the oldest go first",
            effects::MAILBOX_LIMIT
        ),
    }
}

/// Where a step's evaluations are logged (`effects::record_executions`).
struct Log<'a, 't> {
    tx: &'a warden_store::TickTransaction<'t>,
    actor: &'a Actor<'a>,
    program: &'a Program,
    hook: Hook,
}

impl Log<'_, '_> {
    /// Records the evaluations of `trace` timed in `timings` (a sampled tick), or else those
    /// of `unsampled` (trace entry, milliseconds), beside what the live rules decided.
    #[inline(never)]
    fn record(
        &self,
        trace: &[TraceEntry],
        timings: Option<Vec<f64>>,
        unsampled: &[(usize, f64)],
        effects: &[Effect],
        shadow: &[Effect],
        ruling: Option<&warden_program::outcome::Ruling>,
    ) {
        // Beside each evaluation of a rule in shadow, what the live rules decided.
        let live = ruling.map_or("none", |r| r.name());
        let Log {
            tx,
            actor,
            program,
            hook,
        } = *self;
        match timings {
            Some(timings) => effects::record_executions(
                tx,
                actor,
                program,
                hook,
                trace.iter().zip(timings),
                effects,
                (shadow, live),
            ),
            None => effects::record_executions(
                tx,
                actor,
                program,
                hook,
                unsampled
                    .iter()
                    .filter_map(|&(at, ms)| Some((trace.get(at)?, ms))),
                effects,
                (shadow, live),
            ),
        }
    }
}
