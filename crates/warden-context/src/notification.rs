//! A notification for the agent's context, and Warden's own block of the notifications due at
//! a hook (`Outcome::rendered`, in `warden-program`); an operator's template is `render.rs`'s.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use warden_load::{DeliverAt, Hook, Priority};

/// A notification for the agent's context.
///
/// Its serde derives are the saved session's (the queued notifications of a `Snapshot`), not
/// the wire's: what clients read of a notification is `warden-wire`'s `v1::Notification`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Warden's own block for `notifications`, or `None` when there is nothing to say.
pub fn plain_block<'a>(
    notifications: impl IntoIterator<Item = &'a Notification>,
) -> Option<String> {
    let notes = once_each(notifications);
    if notes.is_empty() {
        return None;
    }
    Some(plain(&notes))
}

/// Each message of a rule once, most urgent first (stable: among equals, the order the rules
/// fired in).
pub fn once_each<'a>(
    notifications: impl IntoIterator<Item = &'a Notification>,
) -> Vec<&'a Notification> {
    let notifications = notifications.into_iter();
    let mut notes: Vec<&Notification> = Vec::with_capacity(notifications.size_hint().0);
    for n in notifications {
        let same = |m: &&Notification| {
            (Arc::ptr_eq(&m.rule, &n.rule) || m.rule == n.rule)
                && (Arc::ptr_eq(&m.message, &n.message) || m.message == n.message)
        };
        if !notes.iter().any(same) {
            notes.push(n);
        }
    }
    notes.sort_by_key(|n| std::cmp::Reverse(n.priority));
    notes
}

/// Warden's own rendering: a header line, then one line per note, its priority written only
/// when it is high or critical and its category only when it is not `info`.
pub fn plain(notes: &[&Notification]) -> String {
    const HEADER: &str = "[warden]";
    // Made once at its size: growing it a line at a time cost more than the rest of a tick of
    // 100 rules.
    let size = notes
        .iter()
        .map(|n| "\n- CRITICAL ".len() + n.category.len() + ": ".len() + n.message.len())
        .sum::<usize>();
    let mut out = String::with_capacity(HEADER.len() + size);
    out.push_str(HEADER);
    for n in notes {
        out.push_str("\n- ");
        if n.priority >= Priority::High {
            out.push_str(&n.priority.name().to_ascii_uppercase());
            out.push(' ');
        }
        if &*n.category != "info" {
            out.push_str(&n.category);
            out.push_str(": ");
        }
        out.push_str(&n.message);
    }
    out
}
