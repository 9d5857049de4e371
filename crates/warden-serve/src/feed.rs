//! The live feed behind `GET /v1/events`: what rules emit (`emit_event`, from the engine's
//! bus), and the firings, rulings and rule errors of every tick the server runs (from each
//! tick's `Outcome`), and reloads. A broadcast channel: a slow subscriber misses items (and
//! is told how many) rather than slowing the ticks down.

use std::sync::Arc;

use serde_json::Value as Json;
use tokio::sync::broadcast;
use warden_core::{BusEvent, Outcome};
pub(crate) use warden_wire::v1::FeedItem;

/// How many items a subscriber may fall behind before it misses some.
const CAPACITY: usize = 1024;

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
                    hook: o.hook.name(),
                    rule: effect.rule().into(),
                    action: effect.action(),
                    message: FeedItem::message_of(effect),
                    shadow,
                    at,
                });
            }
        }
        if let Some(r) = &outcome.ruling {
            self.publish(FeedItem::Decision {
                session: session.to_string(),
                hook: outcome.hook.name(),
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
                Ok(event) => self.publish(FeedItem::emitted(event)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "the event feed fell behind the engine's bus");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}

/// The JSON of an item, as sent.
pub(crate) fn to_json(item: &FeedItem) -> Json {
    serde_json::to_value(item).unwrap_or(Json::Null)
}
