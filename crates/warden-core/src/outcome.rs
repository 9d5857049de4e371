//! What the supervisor decided at one hook: the [`Outcome`] of a tick.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;

use crate::program::Program;
use warden_load::Hook;
use warden_load::{DeliverAt, LogLevel, Priority};

/// A notification for the agent's context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notification {
    /// The rule that fired it.
    pub rule: Arc<str>,
    /// The rendered message.
    pub message: Arc<str>,
    /// Its category (`warning`, `hint`...).
    pub category: Arc<str>,
    /// How urgent it is.
    pub priority: Priority,
    /// When it is to be injected.
    pub deliver_at: DeliverAt,
    /// The hook it was fired at.
    pub fired_at: Hook,
}

/// One applied effect of a fired rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Effect {
    /// `notify_self`: a notification was queued (see [`Outcome::inject`] for delivery).
    NotifySelf(Notification),
    /// `log`: a line was written to the log (target `warden::rule`).
    Log {
        /// The rule.
        rule: Arc<str>,
        /// Its level.
        level: LogLevel,
        /// The rendered message.
        message: String,
    },
    /// `set_state`: a value was stored in the rule's plugin state.
    SetState {
        /// The rule.
        rule: Arc<str>,
        /// The plugin whose state it is.
        plugin: Arc<str>,
        /// The key.
        key: String,
        /// The value.
        value: Json,
    },
    /// `emit_event`: an event was published on the bus.
    EmitEvent {
        /// The rule.
        rule: Arc<str>,
        /// The event type.
        event_type: Arc<str>,
        /// The rendered payload.
        payload: Json,
    },
    /// `enrich_context`: the query was enriched with knowledge (see [`Outcome::enrichment`]).
    EnrichContext {
        /// The rule.
        rule: Arc<str>,
        /// The result: mode, selected sources, the `<reference_material>` section.
        enrichment: Arc<warden_knowledge::Enrichment>,
    },
}

impl Effect {
    /// The rule that produced it.
    pub fn rule(&self) -> &str {
        match self {
            Effect::NotifySelf(n) => &n.rule,
            Effect::Log { rule, .. }
            | Effect::SetState { rule, .. }
            | Effect::EmitEvent { rule, .. }
            | Effect::EnrichContext { rule, .. } => rule,
        }
    }

    /// The action type name (`notify_self`...).
    pub fn action(&self) -> &'static str {
        match self {
            Effect::NotifySelf(_) => "notify_self",
            Effect::Log { .. } => "log",
            Effect::SetState { .. } => "set_state",
            Effect::EmitEvent { .. } => "emit_event",
            Effect::EnrichContext { .. } => "enrich_context",
        }
    }
}

/// A failure isolated to one rule (or to the event itself, when `rule` is `None`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleError {
    /// The rule concerned, if any.
    pub rule: Option<Arc<str>>,
    /// What went wrong.
    pub error: String,
}

/// A script or a behavior stopped before it finished: its session ended, its rule changed or
/// was removed in a reload, it was switched off or left its mode, or its tree moved on without
/// it. It is closed cleanly and reported here (and logged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Halted {
    /// The rule whose script was stopped.
    pub rule: Arc<str>,
    /// Why.
    pub reason: String,
}

/// What evaluating one rule at one tick came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "result", content = "reason", rename_all = "snake_case")]
pub enum Evaluation {
    /// The condition held and the effects were applied.
    Fired,
    /// The condition was false.
    NotMatched,
    /// The condition could not be evaluated (missing data); the reason says what was missing.
    Undetermined(String),
    /// The condition, a template or an effect failed; see [`Outcome::errors`].
    Failed(String),
    /// A decorator held the rule back (cooldown, once per session, max fires).
    Suppressed(&'static str),
    /// The rule's node is still running (a script waiting for a later hook).
    Running,
    /// The rule is switched off for this session's user.
    Disabled,
    /// The rule is not active in the current mode (named).
    Inactive(Arc<str>),
}

/// A change of mode, and what Warden's own `on_mode_change` hook decided about it.
#[derive(Debug, Clone)]
pub struct ModeChange {
    /// The mode before.
    pub from: Arc<str>,
    /// The mode now.
    pub to: Arc<str>,
    /// The `on_mode_change` tick: rules that react to the change. Its notifications due now
    /// are also in the outer outcome's `inject`.
    pub outcome: Box<Outcome>,
}

#[derive(Debug, Clone)]
pub(crate) struct TraceEntry {
    pub rule: u32,
    pub evaluation: Evaluation,
}

/// What the supervisor decided at one hook.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The hook that was handled.
    pub hook: Hook,
    /// The effects applied, in the order they were applied (rule priority order).
    pub effects: Vec<Effect>,
    /// Notifications due now: fired by this hook for now, or queued earlier for this point.
    /// Most urgent first. An agent loop injects these into the agent's context.
    pub inject: Vec<Notification>,
    /// Failures isolated to a rule. The other rules ran.
    pub errors: Vec<RuleError>,
    /// Scripts stopped at this tick before they finished.
    pub halted: Vec<Halted>,
    /// Knowledge for the agent's system prompt, when this tick enriched the query: at
    /// `on_query_start` when knowledge enrichment is configured and registered, or when a rule's
    /// `enrich_context` action fired (the last one wins). Put its `section` after the system
    /// prompt (`Enrichment::integrate`).
    pub enrichment: Option<Arc<warden_knowledge::Enrichment>>,
    /// The mode this hook ran in (`default` without modes).
    pub mode: Arc<str>,
    /// Set when this event changed the mode: from what, to what, and the `on_mode_change`
    /// tick that ran first.
    pub mode_change: Option<ModeChange>,
    pub(crate) trace: Vec<TraceEntry>,
    /// Behavior nodes that ran (explain mode): rule, node, what it came to.
    pub(crate) nodes: Vec<(u32, u32, crate::behavior::NodeStatus)>,
    pub(crate) program: Arc<Program>,
}

impl Outcome {
    /// The notifications fired at this hook (whenever they are to be delivered).
    pub fn notifications(&self) -> impl Iterator<Item = &Notification> {
        self.effects.iter().filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(n),
            _ => None,
        })
    }

    /// The ids of the rules that fired, in order.
    pub fn fired(&self) -> Vec<&str> {
        self.trace()
            .filter(|(_, e)| **e == Evaluation::Fired)
            .map(|(r, _)| r)
            .collect()
    }

    /// Every rule evaluated at this hook and what it came to, in evaluation order. This is how
    /// an operator tells a false condition from one that could not be evaluated.
    pub fn trace(&self) -> impl Iterator<Item = (&str, &Evaluation)> {
        self.trace
            .iter()
            .map(|t| (self.program.rule_key(t.rule), &t.evaluation))
    }

    /// The nodes of behaviors that ran at this hook, in the order they finished, with what
    /// each came to: `(behavior, node label, status)`. Recorded in explain mode only
    /// ([`crate::SessionOptions::explain`]).
    pub fn node_trace(&self) -> impl Iterator<Item = (&str, &str, crate::behavior::NodeStatus)> {
        self.nodes.iter().map(|(rule, node, status)| {
            let label = match self.program.rules.get(*rule as usize).map(|r| &r.condition) {
                Some(crate::rule::RuleCondition::Tree(t)) => t.label(*node),
                _ => "?",
            };
            (self.program.rule_key(*rule), label, *status)
        })
    }

    /// Whether nothing fired and nothing failed.
    pub fn is_quiet(&self) -> bool {
        self.effects.is_empty() && self.errors.is_empty() && self.inject.is_empty()
    }
}
