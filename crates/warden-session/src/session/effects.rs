//! Applying what a step's rules rendered, after all of them ran: shared state writes (each
//! rule's in one savepoint of the tick's transaction: together or not at all, and then none of
//! its effects apply), decorator memory; events for the bus and log lines, held until the tick
//! commits; then delivering notifications and recording the step in the execution log. (The
//! session's own state is written by the tick once its frame is gone: `write_session_state`.)

use warden_load::{Hook, LogLevel, Scope};
use warden_store::{ExecutionRecord, StateScope, StateWrite, TickTransaction};

use crate::session::evaluate::{Fired, RuleMemory};
use crate::shared::{BusEvent, Shared};
use warden_program::outcome::{Effect, Evaluation, Inject, Notification, RuleError, TraceEntry};
use warden_program::program::Program;

/// What a tick does once it has committed: nothing is published, and no rule's log line is
/// written, for a tick whose effects were not saved.
pub(crate) enum AfterCommit {
    /// An event for the bus.
    Publish(BusEvent),
    /// A rule's log line.
    Log {
        rule: std::sync::Arc<str>,
        level: LogLevel,
        message: String,
    },
}

impl AfterCommit {
    pub(crate) fn run(self, shared: &Shared) {
        match self {
            // No subscriber is not an error: the bus is for whoever listens.
            AfterCommit::Publish(event) => {
                if let Some(bus) = shared.bus.get() {
                    let _ = bus.send(event);
                }
            }
            AfterCommit::Log {
                rule,
                level,
                message,
            } => emit_log(&rule, level, &message),
        }
    }
}

/// Who a step acted for: the session, its user and project, and the turn.
pub(crate) struct Actor<'a> {
    pub session: &'a str,
    pub user: &'a str,
    pub project: &'a str,
    pub turn: u32,
}

/// Which kinds of effect a step rendered, from one look at them: most steps render
/// notifications only, and the steps after rendering (applying, merging the ruling, finding
/// the enrichment) each skip a look of their own at what they would find nothing in.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Kinds {
    /// Plugin state to write in the store (a `set_state` of a scope other than the session).
    pub shared_state: bool,
    /// Plugin state of the session's own scope.
    pub session_state: bool,
    /// Something to do after the commit (a log line, an event to publish).
    pub later: bool,
    /// A decision or a rewrite, to merge into the ruling.
    pub ruling: bool,
    /// An enrichment of the context.
    pub enrichment: bool,
    /// A notification not due at this hook (it waits in the mailbox), or due ones out of
    /// priority order: delivering then takes [`deliver`]'s longer way.
    pub unusual_delivery: bool,
}

impl Kinds {
    /// The kinds of `effects`, rendered at `hook`. Out of line: inlined into `Step::run`, its
    /// `match` in a loop became a jump table whose base the loop keeps in a register, which a
    /// post-link optimizer cannot follow; it then leaves the whole step as the compiler laid
    /// it out (`release/build.sh`).
    #[inline(never)]
    pub(crate) fn of(effects: &[Effect], hook: Hook) -> Self {
        let mut kinds = Kinds::default();
        // As `deliver` orders them: most urgent first.
        let mut least = None;
        for e in effects {
            match e {
                Effect::NotifySelf(n) => {
                    if !n.deliver_at.is_due_at(hook) || least.is_some_and(|p| n.priority > p) {
                        kinds.unusual_delivery = true;
                    }
                    least = Some(n.priority);
                }
                Effect::SetState { scope, .. } if scope.is_session() => kinds.session_state = true,
                Effect::SetState { .. } => kinds.shared_state = true,
                Effect::Log { .. } | Effect::EmitEvent { .. } => kinds.later = true,
                Effect::Decide { .. } | Effect::Rewrite { .. } => kinds.ruling = true,
                Effect::EnrichContext { .. } => kinds.enrichment = true,
            }
        }
        kinds
    }
}

/// Applies the effects of the fired rules, in order. Returns the applied ones.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply(
    tx: &TickTransaction<'_>,
    unavailable: Option<&str>,
    after: &mut Vec<AfterCommit>,
    actor: &Actor<'_>,
    program: &Program,
    hook: Hook,
    memory: &mut [RuleMemory],
    fired: &[Fired],
    rendered: Vec<Effect>,
    kinds: Kinds,
    errors: &mut Vec<RuleError>,
    trace: &mut [TraceEntry],
) -> Vec<Effect> {
    // Shared state to write, and anything to do after the commit (most ticks render
    // notifications only, and need neither).
    let Kinds {
        shared_state,
        later,
        ..
    } = kinds;
    let failures = if shared_state {
        write_state(tx, unavailable, actor, fired, &rendered)
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
    if failures.is_empty() && !later {
        // The usual step: nothing failed to save, nothing to do after the commit.
        for f in fired.iter().filter(|f| f.counts) {
            let m = &mut memory[f.rule as usize];
            m.fires = m.fires.saturating_add(1);
            m.last_fired_turn = Some(actor.turn);
        }
        return rendered;
    }
    for (i, f) in fired.iter().enumerate() {
        if let Some((_, e)) = failures.iter().find(|(at, _)| *at == i) {
            let rule = &program.rules[f.rule as usize];
            let error =
                format!("its state could not be saved, so none of its effects applied: {e}");
            if let Some(t) = f.trace.and_then(|at| trace.get_mut(at)) {
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
            let m = &mut memory[f.rule as usize];
            m.fires = m.fires.saturating_add(1);
            m.last_fired_turn = Some(actor.turn);
        }
        if !later {
            continue;
        }
        for effect in &rendered[f.effects.clone()] {
            match effect {
                Effect::Log {
                    rule,
                    level,
                    message,
                } => after.push(AfterCommit::Log {
                    rule: rule.clone(),
                    level: *level,
                    message: message.clone(),
                }),
                Effect::EmitEvent {
                    rule,
                    event_type,
                    payload,
                } => after.push(AfterCommit::Publish(BusEvent {
                    event_type: event_type.clone(),
                    payload: (**payload).clone(),
                    rule: rule.clone(),
                    plugin: program.rules[f.rule as usize].def.plugin.clone(),
                    session: actor.session.to_string(),
                    hook,
                })),
                // Delivered, written, merged into the ruling, or returned: nothing to do here.
                Effect::NotifySelf(_)
                | Effect::SetState { .. }
                | Effect::EnrichContext { .. }
                | Effect::Decide { .. }
                | Effect::Rewrite { .. } => {}
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
fn write_state(
    tx: &TickTransaction<'_>,
    unavailable: Option<&str>,
    actor: &Actor<'_>,
    fired: &[Fired],
    rendered: &[Effect],
) -> Vec<(usize, String)> {
    let groups: Vec<Vec<StateWrite>> = fired
        .iter()
        .map(|f| {
            rendered[f.effects.clone()]
                .iter()
                .filter_map(|e| match e {
                    Effect::SetState {
                        plugin,
                        key,
                        value,
                        scope: Scope::Shared,
                        ..
                    } => Some(StateWrite::set(
                        StateScope::new(actor.user, actor.project, plugin.as_ref()),
                        key.as_str(),
                        (**value).clone(),
                    )),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let written = match unavailable {
        Some(why) => Err(warden_store::StoreError::Unavailable {
            reason: why.to_string(),
        }),
        None => tx.write_groups(&groups),
    };
    match written {
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

/// Writes the session's own state that the applied `effects` set, in order (the frame is gone:
/// no rule of the tick saw these writes).
pub(crate) fn write_session_state(
    facts: &mut std::sync::Arc<warden_context::facts::SessionFacts>,
    effects: &[Effect],
) {
    for e in effects {
        if let Effect::SetState {
            plugin,
            key,
            value,
            scope: Scope::Session,
            ..
        } = e
        {
            std::sync::Arc::make_mut(facts)
                .session_state
                .entry(plugin.to_string())
                .or_default()
                .insert(key.clone(), (**value).clone());
        }
    }
}

/// Most notifications a session keeps waiting for their delivery point; past it the oldest
/// are dropped (a session whose turns never end would otherwise keep every one).
pub(crate) const MAILBOX_LIMIT: usize = 1000;

/// [`deliver`], for effects of these `kinds` (`Kinds::of` them, or of effects they are some
/// of): with nothing waiting in the mailbox and every new notification due now, most urgent
/// first, what is injected is those notifications as they are.
pub(crate) fn deliver_kinds(
    mailbox: &mut Vec<Notification>,
    hook: Hook,
    effects: &[Effect],
    kinds: Kinds,
) -> (Inject, usize) {
    if mailbox.is_empty() && !kinds.unusual_delivery {
        return (Inject::with_effects_due(Vec::new()), 0);
    }
    deliver(mailbox, hook, effects)
}

/// The notifications due at `hook`: queued ones whose point has come, then new ones due now;
/// the rest wait in `mailbox` (a message a rule already has waiting for the same point is not
/// queued again). Most urgent first. The new ones due now stay in `effects`, read from there
/// (`Inject::with_effects_due`), unless the whole must be sorted: then each is copied into
/// place. Also how many waiting ones were dropped to keep the mailbox within
/// [`MAILBOX_LIMIT`].
pub(crate) fn deliver(
    mailbox: &mut Vec<Notification>,
    hook: Hook,
    effects: &[Effect],
) -> (Inject, usize) {
    let mut delivered = Vec::new();
    if !mailbox.is_empty() {
        let (now, later): (Vec<_>, Vec<_>) = mailbox
            .drain(..)
            .partition(|n| n.deliver_at.is_due_at(hook));
        delivered = now;
        *mailbox = later;
    }
    // Whether the delivered ones, then the new ones due now, are most urgent first.
    let mut sorted = delivered.is_sorted_by_key(|n| std::cmp::Reverse(n.priority));
    let mut least = delivered.last().map(|n| n.priority);
    for e in effects {
        if let Effect::NotifySelf(n) = e {
            if n.deliver_at.is_due_at(hook) {
                // Usually in order already (rules of one priority level fire together).
                if least.is_some_and(|p| n.priority > p) {
                    sorted = false;
                }
                least = Some(n.priority);
            } else if !mailbox
                .iter()
                .any(|m| m.rule == n.rule && m.message == n.message && m.deliver_at == n.deliver_at)
            {
                mailbox.push(n.clone());
            }
        }
    }
    let dropped = mailbox.len().saturating_sub(MAILBOX_LIMIT);
    if dropped > 0 {
        mailbox.drain(..dropped);
    }
    if sorted {
        return (Inject::with_effects_due(delivered), dropped);
    }
    let mut due = delivered;
    due.extend(effects.iter().filter_map(|e| match e {
        Effect::NotifySelf(n) if n.deliver_at.is_due_at(hook) => Some(n.clone()),
        _ => None,
    }));
    due.sort_by_key(|n| std::cmp::Reverse(n.priority));
    (Inject::new(due), dropped)
}

/// Records a step's evaluations (each with how long it took, in milliseconds) in the execution
/// log. Rules held back before their condition (switched off, out of mode, a decorator) were
/// not evaluated: they are not recorded.
pub(crate) fn record_executions<'t>(
    tx: &TickTransaction<'_>,
    actor: &Actor<'_>,
    program: &Program,
    hook: Hook,
    evaluations: impl Iterator<Item = (&'t TraceEntry, f64)>,
    effects: &[Effect],
    (shadow, live): (&[Effect], &str),
) {
    // What each rule decided (applied, whether or not its decision won; a rule in shadow:
    // what it would have decided).
    let decided: Vec<(&str, &str)> = effects
        .iter()
        .chain(shadow)
        .filter_map(|e| match e {
            Effect::Decide { rule, decision, .. } => Some((&**rule, decision.name())),
            Effect::Rewrite { rule, .. } => Some((&**rule, "rewrite")),
            _ => None,
        })
        .collect();
    let records: Vec<ExecutionRecord> = evaluations
        .filter(|(t, _)| {
            !matches!(
                t.evaluation,
                Evaluation::Disabled | Evaluation::Inactive(_) | Evaluation::Suppressed(_)
            )
        })
        .map(|(t, ms)| ExecutionRecord {
            user_id: actor.user.to_string(),
            project_id: actor.project.to_string(),
            session_id: Some(actor.session.to_string()),
            rule_id: program.rule_key(t.rule).to_string(),
            trigger: hook.name().to_string(),
            condition_result: matches!(t.evaluation, Evaluation::Fired | Evaluation::Running),
            action_executed: t.evaluation == Evaluation::Fired,
            execution_time_ms: ms,
            error_message: match &t.evaluation {
                Evaluation::Failed(e) => Some(e.clone()),
                Evaluation::Undetermined(e) => Some(format!("undetermined: {e}")),
                _ => None,
            },
            decision: decided
                .iter()
                .find(|(r, _)| *r == program.rule_key(t.rule))
                .map(|(_, d)| d.to_string()),
            shadow: t.shadow,
            live_decision: t.shadow.then(|| live.to_string()),
        })
        .collect();
    if let Err(e) = tx.record_executions(&records) {
        tracing::warn!(error = %e, "the rule execution log could not be written");
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use proptest::prelude::*;
    use warden_load::{DeliverAt, Hook, Priority};

    use super::*;

    /// What `deliver` returned before the notifications due were read in place: each due one
    /// copied into one list, sorted when out of order.
    fn copied(
        mailbox: &mut Vec<Notification>,
        hook: Hook,
        effects: &[Effect],
    ) -> (Vec<Notification>, usize) {
        let mut due = Vec::new();
        if !mailbox.is_empty() {
            let (now, later): (Vec<_>, Vec<_>) = mailbox
                .drain(..)
                .partition(|n| n.deliver_at.is_due_at(hook));
            due.extend(now);
            *mailbox = later;
        }
        for e in effects {
            if let Effect::NotifySelf(n) = e {
                if n.deliver_at.is_due_at(hook) {
                    due.push(n.clone());
                } else if !mailbox.iter().any(|m| {
                    m.rule == n.rule && m.message == n.message && m.deliver_at == n.deliver_at
                }) {
                    mailbox.push(n.clone());
                }
            }
        }
        let dropped = mailbox.len().saturating_sub(MAILBOX_LIMIT);
        if dropped > 0 {
            mailbox.drain(..dropped);
        }
        if !due.is_sorted_by_key(|n| std::cmp::Reverse(n.priority)) {
            due.sort_by_key(|n| std::cmp::Reverse(n.priority));
        }
        (due, dropped)
    }

    const HOOKS: [Hook; 3] = [Hook::OnTurnStart, Hook::OnTurnEnd, Hook::OnToolCall];
    const POINTS: [DeliverAt; 3] = [
        DeliverAt::Immediate,
        DeliverAt::TurnStart,
        DeliverAt::TurnEnd,
    ];
    const PRIORITIES: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];

    fn note((rule, message, at, priority): (usize, usize, usize, usize)) -> Notification {
        Notification {
            rule: Arc::from(format!("r{rule}")),
            message: Arc::from(format!("m{message}")),
            category: Arc::from("info"),
            priority: PRIORITIES[priority],
            deliver_at: POINTS[at],
            fired_at: Hook::OnTurnStart,
        }
    }

    fn notes() -> impl Strategy<Value = Vec<Notification>> {
        prop::collection::vec(
            (0..4usize, 0..3usize, 0..3usize, 0..4usize).prop_map(note),
            0..8,
        )
    }

    proptest! {
        /// The notifications due, read where they are, are those the copy held, in the same
        /// order: the mailbox's first, the tick's own after, sorted only when out of order; the
        /// mailbox is left the same.
        #[test]
        fn read_in_place_is_what_was_copied(
            waiting in notes(),
            fired in notes(),
            logs in prop::collection::vec(any::<bool>(), 0..8),
            hook in 0..HOOKS.len(),
        ) {
            let hook = HOOKS[hook];
            // Notifications among other effects.
            let mut effects: Vec<Effect> = Vec::new();
            for (i, n) in fired.into_iter().enumerate() {
                if logs.get(i).copied().unwrap_or(false) {
                    effects.push(Effect::Log {
                        rule: n.rule.clone(),
                        level: warden_load::LogLevel::Info,
                        message: String::new(),
                    });
                }
                effects.push(Effect::NotifySelf(n));
            }
            let (mut before, mut now) = (waiting.clone(), waiting.clone());
            let (expected, dropped_before) = copied(&mut before, hook, &effects);
            let (inject, dropped) = deliver(&mut now, hook, &effects);
            let got: Vec<Notification> = inject.of(&effects, hook).to_vec();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(inject.of(&effects, hook).len(), expected.len());
            prop_assert_eq!(dropped, dropped_before);
            prop_assert_eq!(&now, &before);
            // The short way, for effects of the kinds one look found, delivers the same.
            let mut short = waiting;
            let (inject, dropped) =
                deliver_kinds(&mut short, hook, &effects, Kinds::of(&effects, hook));
            prop_assert_eq!(inject.of(&effects, hook).to_vec(), expected);
            prop_assert_eq!(dropped, dropped_before);
            prop_assert_eq!(short, before);
        }
    }

    #[test]
    fn mailbox_first_then_the_ticks_own_read_in_place() {
        let waiting = note((0, 0, 1, 1));
        let fired = note((1, 1, 0, 1));
        let effects = vec![Effect::NotifySelf(fired.clone())];
        let mut mailbox = vec![waiting.clone()];
        let (inject, _) = deliver(&mut mailbox, Hook::OnTurnStart, &effects);
        // The tick's own is not copied: it is read in `effects`.
        assert!(inject.reads_effects());
        assert_eq!(inject.held(), std::slice::from_ref(&waiting));
        assert_eq!(
            inject.of(&effects, Hook::OnTurnStart).to_vec(),
            [waiting, fired]
        );
        assert!(mailbox.is_empty());
    }

    #[test]
    fn out_of_order_is_sorted_into_a_list_of_its_own() {
        let waiting = note((0, 0, 1, 0));
        let fired = note((1, 1, 0, 3));
        let effects = vec![Effect::NotifySelf(fired.clone())];
        let mut mailbox = vec![waiting.clone()];
        let (inject, _) = deliver(&mut mailbox, Hook::OnTurnStart, &effects);
        assert!(!inject.reads_effects());
        assert_eq!(
            inject.of(&effects, Hook::OnTurnStart).to_vec(),
            [fired, waiting]
        );
    }
}
