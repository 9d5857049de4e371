//! The sessions the server holds, by id: opened at their first event, ticked one event at a
//! time each (two requests for one session wait for each other; different sessions tick in
//! parallel), looked at and deleted. This is the only module that knows how sessions are kept.
//!
//! Ticks are synchronous CPU work: the callers run [`Sessions::tick`] on tokio's blocking
//! pool, never on the runtime's threads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use warden_core::{
    Event, Hook, Notification, Outcome, Session, SessionFacts, SessionOptions, Warden,
};

/// The longest session id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Why a session could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The id has characters a session id may not have, or is too long.
    #[error(
        "`{0}` is not a valid session id: use 1 to {MAX_ID_LEN} letters, digits and `-_.:@` (a UUID is fine)"
    )]
    InvalidId(String),
    /// The server holds as many sessions as it may.
    #[error(
        "this server already holds {0} sessions (see --max-sessions): end finished ones with DELETE /v1/sessions/{{id}}"
    )]
    TooMany(usize),
}

/// Who a new session is for (an event's `user` and `project` change it later).
#[derive(Debug, Clone)]
pub struct Owner {
    /// The user.
    pub user: String,
    /// The project.
    pub project: String,
}

/// A session as `GET /v1/sessions/{id}` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    /// Its id.
    pub id: String,
    /// The active mode.
    pub mode: String,
    /// Whether `on_session_end` was handled.
    pub ended: bool,
    /// What Warden knows of it: turn, history, user, project, query.
    pub facts: SessionFacts,
    /// The rules with a script or behavior running (waiting for a later hook).
    pub running: Vec<String>,
    /// Notifications waiting for a later delivery point.
    pub pending: Vec<Notification>,
}

type Slot = Arc<Mutex<Session>>;

/// The sessions of one server.
pub struct Sessions {
    warden: Warden,
    open: Mutex<HashMap<String, Slot>>,
    max: usize,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("open", &self.count())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A tick that panicked is a bug reported where it happened; the session it left is
    // still whole (a tick applies its effects at its end).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `id` may name a session.
pub fn valid_id(id: &str) -> Result<(), SessionError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@".contains(c));
    if ok {
        Ok(())
    } else {
        let shown: String = id.chars().take(MAX_ID_LEN).collect();
        Err(SessionError::InvalidId(shown.escape_debug().to_string()))
    }
}

impl Sessions {
    /// No sessions yet; at most `max` at once.
    pub fn new(warden: Warden, max: usize) -> Self {
        Sessions {
            warden,
            open: Mutex::new(HashMap::new()),
            max,
        }
    }

    fn slot(&self, id: &str) -> Option<Slot> {
        lock(&self.open).get(id).cloned()
    }

    /// Runs one event in session `id`, opening it for `owner` if it is new. Blocks for the
    /// tick (and for a tick of the same session already running).
    pub fn tick(
        &self,
        id: &str,
        owner: &Owner,
        hook: Hook,
        event: Event,
    ) -> Result<Outcome, SessionError> {
        valid_id(id)?;
        let slot = match self.slot(id) {
            Some(s) => s,
            None => {
                let mut open = lock(&self.open);
                if !open.contains_key(id) && open.len() >= self.max {
                    return Err(SessionError::TooMany(self.max));
                }
                open.entry(id.to_string())
                    .or_insert_with(|| {
                        Arc::new(Mutex::new(self.warden.session_with(SessionOptions {
                            id: Some(id.to_string()),
                            user: Some(owner.user.clone()),
                            project: Some(owner.project.clone()),
                            explain: false,
                        })))
                    })
                    .clone()
            }
        };
        let mut session = lock(&slot);
        Ok(session.tick(hook, event))
    }

    /// The session `id`, if the server holds it.
    pub fn view(&self, id: &str) -> Option<SessionView> {
        let slot = self.slot(id)?;
        let s = lock(&slot);
        Some(SessionView {
            id: s.id().to_string(),
            mode: s.facts().mode.clone(),
            ended: s.is_ended(),
            facts: s.facts().clone(),
            running: s.running().into_iter().map(str::to_string).collect(),
            pending: s.pending().to_vec(),
        })
    }

    /// Forgets session `id`; whether it existed.
    pub fn delete(&self, id: &str) -> bool {
        lock(&self.open).remove(id).is_some()
    }

    /// How many sessions the server holds.
    pub fn count(&self) -> usize {
        lock(&self.open).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_checked() {
        for ok in ["s1", "9b2f1c3e-8c2a-4e5f-9d7a-1b2c3d4e5f60", "a.b:c@d_e"] {
            assert!(valid_id(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "a/b",
            "<script>",
            "é",
            &"x".repeat(MAX_ID_LEN + 1),
        ] {
            assert!(valid_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sessions_are_capped_and_deleted() {
        let w = Warden::builder().builtin_rules().build().unwrap();
        let s = Sessions::new(w, 1);
        let owner = Owner {
            user: "ada".into(),
            project: "p".into(),
        };
        s.tick("a", &owner, Hook::OnTurnStart, Event::new())
            .unwrap();
        assert!(matches!(
            s.tick("b", &owner, Hook::OnTurnStart, Event::new()),
            Err(SessionError::TooMany(1))
        ));
        let view = s.view("a").unwrap();
        assert_eq!(view.facts.user.id, "ada");
        assert_eq!(view.facts.turn.number, 1);
        assert!(s.delete("a"));
        assert!(!s.delete("a"));
        assert!(s.view("a").is_none());
    }
}
