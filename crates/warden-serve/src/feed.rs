//! The live feed behind `GET /v1/events`: what rules emit (`emit_event`, from the engine's
//! bus), and the firings, rulings and rule errors of every tick the server runs (from each
//! tick's `Outcome`), and reloads. A broadcast channel: a slow subscriber misses items (and
//! is told how many) rather than slowing the ticks down.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value as Json;
use tokio::sync::broadcast;
use warden_core::{BusEvent, Effect, Hook, Outcome};

/// How many items a subscriber may fall behind before it misses some.
const CAPACITY: usize = 1024;

/// One item of the feed. Its `type` is the server-sent event's name.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum FeedItem {
    /// A rule fired: one item per action it applied (a rule in shadow: per action it would
    /// have applied, marked `shadow`).
    Fired {
        /// The session.
        session: String,
        /// The hook it fired at.
        hook: Hook,
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
        hook: Hook,
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
        /// The event.
        #[serde(flatten)]
        event: BusEvent,
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
    pub(crate) fn name(&self) -> &'static str {
        match self {
            FeedItem::Fired { .. } => "fired",
            FeedItem::Decision { .. } => "decision",
            FeedItem::RuleError { .. } => "rule_error",
            FeedItem::Emitted { .. } => "emitted",
            FeedItem::Reload { .. } => "reload",
        }
    }
}

/// The feed's sending side.
#[derive(Debug, Clone)]
pub(crate) struct Feed {
    tx: broadcast::Sender<Arc<FeedItem>>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: broadcast::channel(CAPACITY).0,
        }
    }
}

impl Feed {
    /// A new subscriber, from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<FeedItem>> {
        self.tx.subscribe()
    }

    /// Whether anyone listens (nothing is built for nobody).
    pub(crate) fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Publishes an item (dropped when nobody listens).
    pub(crate) fn publish(&self, item: FeedItem) {
        let _ = self.tx.send(Arc::new(item));
    }

    /// Publishes what a tick did: each applied action of each rule that fired, the ruling,
    /// the errors. (`emit_event`'s events reach the feed from the bus, as `emitted`.)
    pub(crate) fn publish_outcome(&self, session: &str, outcome: &Outcome, at: f64) {
        if !self.has_subscribers() {
            return;
        }
        let change = outcome.mode_change.as_ref().map(|c| &*c.outcome);
        for o in change.into_iter().chain([outcome]) {
            let live = o.effects.iter().map(|e| (e, false));
            for (effect, shadow) in live.chain(o.shadow.iter().map(|e| (e, true))) {
                self.publish(FeedItem::Fired {
                    session: session.to_string(),
                    hook: o.hook,
                    rule: effect.rule().into(),
                    action: effect.action(),
                    message: effect_message(effect),
                    shadow,
                    at,
                });
            }
        }
        if let Some(r) = &outcome.ruling {
            self.publish(FeedItem::Decision {
                session: session.to_string(),
                hook: outcome.hook,
                decision: r.name(),
                rule: r.rule.clone(),
                reason: r.reason.clone(),
                at,
            });
        }
        let live = outcome.errors.iter().map(|e| (e, false));
        for (e, shadow) in live.chain(outcome.shadow_errors.iter().map(|e| (e, true))) {
            self.publish(FeedItem::RuleError {
                session: session.to_string(),
                rule: e.rule.clone(),
                error: e.error.clone(),
                shadow,
                at,
            });
        }
    }

    /// Forwards the engine's bus (what rules emit) into the feed until the bus closes.
    pub(crate) async fn forward(self, mut bus: broadcast::Receiver<BusEvent>) {
        loop {
            match bus.recv().await {
                Ok(event) => self.publish(FeedItem::Emitted { event }),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "the event feed fell behind the engine's bus");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

/// What a person reads of an effect in the feed.
fn effect_message(effect: &Effect) -> Option<String> {
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

/// The JSON of an item, as sent.
pub(crate) fn to_json(item: &FeedItem) -> Json {
    serde_json::to_value(item).unwrap_or(Json::Null)
}
