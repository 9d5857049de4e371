//! The items of the service's live feed (`GET /v1/events`, server-sent events): rules firing,
//! rulings, rule errors, events rules emit, reloads. Owned, so that one item is built once and
//! shared by every subscriber.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;

use warden_program::outcome::Effect;
use warden_session::shared::BusEvent;

/// One item of the feed. Its `type` is the server-sent event's name ([`FeedItem::name`]).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FeedItem {
    /// A rule fired: one item per action it applied (a rule in shadow: per action it would
    /// have applied, marked `shadow`).
    Fired {
        /// The session.
        session: String,
        /// The hook it fired at.
        hook: &'static str,
        /// The rule.
        rule: Arc<str>,
        /// The action (`notify_self`, `log`, `decide`...).
        action: &'static str,
        /// The rendered message or reason, for the actions that have one.
        message: Option<String>,
        /// The rule is in shadow: nothing of this was applied.
        shadow: bool,
        /// When, in seconds since the Unix epoch.
        at: f64,
    },
    /// The merged ruling of an event.
    Decision {
        /// The session.
        session: String,
        /// The hook.
        hook: &'static str,
        /// `allow`, `ask`, `deny`, `continue`, `stop`, or `rewrite`.
        decision: &'static str,
        /// The rule that decided.
        rule: Arc<str>,
        /// Why.
        reason: Arc<str>,
        /// When.
        at: f64,
    },
    /// A rule failed (the tick went on).
    RuleError {
        /// The session.
        session: String,
        /// The rule, if the error belongs to one.
        rule: Option<Arc<str>>,
        /// What went wrong.
        error: String,
        /// The rule is in shadow (its failure changed nothing the host saw).
        shadow: bool,
        /// When.
        at: f64,
    },
    /// A rule emitted an event (`emit_event`).
    Emitted {
        /// The event type the rule gave.
        event_type: Arc<str>,
        /// The rendered payload.
        payload: Json,
        /// The rule that emitted it.
        rule: Arc<str>,
        /// The rule's plugin.
        plugin: Arc<str>,
        /// The session it happened in.
        session: String,
        /// The hook that fired the rule.
        hook: &'static str,
    },
    /// The rule files were reloaded (or a change was refused).
    Reload {
        /// Whether the change is in force.
        applied: bool,
        /// The generation in force.
        generation: u64,
        /// The errors that kept a change out.
        errors: Vec<String>,
    },
}

impl FeedItem {
    /// The event name of the server-sent event.
    pub fn name(&self) -> &'static str {
        match self {
            FeedItem::Fired { .. } => "fired",
            FeedItem::Decision { .. } => "decision",
            FeedItem::RuleError { .. } => "rule_error",
            FeedItem::Emitted { .. } => "emitted",
            FeedItem::Reload { .. } => "reload",
        }
    }

    /// The item of an event a rule emitted on the engine's bus.
    pub fn emitted(e: BusEvent) -> Self {
        FeedItem::Emitted {
            event_type: e.event_type,
            payload: e.payload,
            rule: e.rule,
            plugin: e.plugin,
            session: e.session,
            hook: e.hook.name(),
        }
    }

    /// What a person reads of an effect in the feed (a `fired` item's `message`).
    pub fn message_of(effect: &Effect) -> Option<String> {
        match effect {
            Effect::NotifySelf(n) => Some(n.message.to_string()),
            Effect::Log { message, .. } => Some(message.clone()),
            Effect::Decide {
                decision, reason, ..
            } => Some(format!("{}: {reason}", decision.name())),
            Effect::SetState { key, value, .. } => Some(format!("{key} = {value}")),
            Effect::EmitEvent { event_type, .. } => Some(event_type.to_string()),
            Effect::Rewrite { set, .. } => Some(
                set.iter()
                    .map(|(path, v)| format!("arguments.{} = {v}", path.join(".")))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Effect::EnrichContext { .. } => None,
        }
    }
}

/// The first event of the live feed (`ready`): the program in force when the client joined.
#[derive(Debug, Serialize)]
pub struct FeedReady {
    /// The generation of the program in force.
    pub generation: u64,
}

/// A live feed's `lagged` event: the client fell behind and this many items were dropped.
#[derive(Debug, Serialize)]
pub struct FeedLagged {
    /// Items the client missed.
    pub missed: u64,
}
