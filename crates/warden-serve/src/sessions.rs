//! The sessions the server serves, by id. They are the engine's durable sessions
//! (`Warden::open_session`): every tick saves its session in the store, in the tick's own
//! transaction, so a restarted server (or another server on the same database) carries on
//! where the last tick left off. The server keeps the sessions it uses in memory, at most
//! [`Sessions::new`]'s `max`; past that, the least recently used one is put down (it is in
//! the store, and is read back at its next event). One tick at a time per session; different
//! sessions tick in parallel. This is the only module that knows how sessions are kept.
//!
//! An operator may trade that for speed (`ServeOptions::durable` false): sessions then live in
//! this process only, and a restart loses them.
//!
//! How a tick runs depends on the store. SQLite (the default): on the runtime's threads
//! ([`Sessions::tick_here`]), its save left to the store's batch and awaited, so that no
//! runtime thread waits for the database and one commit saves many sessions (a tick that reads
//! or writes plugin state commits its own transaction there, briefly). PostgreSQL, whose every
//! statement is a network round trip: on tokio's blocking pool ([`Sessions::tick`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use warden_core::{AsyncSession, Event, Hook, Outcome, Session, SessionOptions, Warden};
use warden_wire::v1;

/// The longest session id accepted.
pub(crate) const MAX_ID_LEN: usize = 128;

/// Why a session could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SessionError {
    /// The id has characters a session id may not have, or is too long.
    #[error(
        "`{0}` is not a valid session id: use 1 to {MAX_ID_LEN} letters, digits and `-_.:@` (a UUID is fine)"
    )]
    InvalidId(String),
    /// The saved session cannot be read back (saved by a Warden that this one cannot follow).
    #[error(
        "the saved session cannot be resumed ({0}); DELETE /v1/sessions/{{id}} starts it afresh"
    )]
    Unreadable(String),
    /// The store failed.
    #[error("the session store failed: {0}")]
    Store(String),
    /// The tick panicked: a bug in Warden (the server log has it).
    #[error("the tick panicked (a bug in Warden; the server log has it)")]
    Panicked,
    /// Sessions are kept in memory only, and the server holds as many as it may.
    #[error(
        "this server keeps sessions in memory only and holds {0} already (see --max-sessions): end finished ones with DELETE /v1/sessions/{{id}}"
    )]
    Full(usize),
}

impl From<warden_core::Error> for SessionError {
    fn from(e: warden_core::Error) -> Self {
        match e {
            warden_core::Error::Session { reason, .. } => SessionError::Unreadable(reason),
            other => SessionError::Store(other.to_string()),
        }
    }
}

/// Who a new session is for (an event's `user` and `project` change it later).
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    /// The user.
    pub user: String,
    /// The project.
    pub project: String,
}

/// A session in memory, and when it was last used (for putting down the least recent). Its
/// lock is held across the wait for a batched save, so it is tokio's (`blocking_lock` on the
/// blocking pool).
struct Open {
    session: AsyncSession,
    used: AtomicU64,
}

/// The sessions of one server.
pub(crate) struct Sessions {
    warden: Warden,
    open: Mutex<HashMap<String, Arc<Open>>>,
    max: usize,
    clock: AtomicU64,
    durable: bool,
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
    // still whole (a tick applies its effects at its end, and the store has the last save).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `f`; a panic in it (a bug) fails this request rather than the runtime thread's
/// other connections.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, SessionError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| SessionError::Panicked)
}

/// Whether `id` may name a session.
pub(crate) fn valid_id(id: &str) -> Result<(), SessionError> {
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
    /// No sessions in memory yet; at most `max` at once. Not `durable`: sessions live in
    /// memory only (faster; a restart loses them, and none is put down: past `max`, new
    /// sessions are refused).
    pub(crate) fn new(warden: Warden, max: usize, durable: bool) -> Self {
        Sessions {
            warden,
            open: Mutex::new(HashMap::new()),
            max: max.max(1),
            clock: AtomicU64::new(0),
            durable,
        }
    }

    fn open_session(&self, id: &str, opts: SessionOptions) -> Result<Session, SessionError> {
        if self.durable {
            Ok(self.warden.open_session(id, opts)?)
        } else {
            Ok(self.warden.session_with(opts))
        }
    }

    /// The session `id` in memory, read from the store (or new) when it is not.
    fn get(&self, id: &str, owner: &Owner) -> Result<Arc<Open>, SessionError> {
        if let Some(open) = self.in_memory(id) {
            return Ok(open);
        }
        // Read outside the map's lock: it may take a store read.
        let session = self.open_session(
            id,
            SessionOptions {
                id: Some(id.to_string()),
                user: Some(owner.user.clone()),
                project: Some(owner.project.clone()),
                explain: false,
            },
        )?;
        self.keep(id, session)
    }

    fn in_memory(&self, id: &str) -> Option<Arc<Open>> {
        let open = lock(&self.open).get(id).cloned()?;
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        open.used.store(now, Ordering::Relaxed);
        Some(open)
    }

    /// Keeps `session` in memory (unless another request just did), putting one down if full
    /// (refusing it, when sessions are not durable).
    fn keep(&self, id: &str, session: Session) -> Result<Arc<Open>, SessionError> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut open = lock(&self.open);
        if let Some(raced) = open.get(id) {
            return Ok(raced.clone());
        }
        if open.len() >= self.max {
            if !self.durable {
                return Err(SessionError::Full(self.max));
            }
            self.put_down_one(&mut open);
        }
        let entry = Arc::new(Open {
            session: AsyncSession::new(session),
            used: AtomicU64::new(now),
        });
        open.insert(id.to_string(), entry.clone());
        Ok(entry)
    }

    /// Forgets the least recently used session that is not ticking (it is in the store).
    fn put_down_one(&self, open: &mut HashMap<String, Arc<Open>>) {
        let idle = open
            .iter()
            .filter(|(_, o)| Arc::strong_count(o) == 1)
            .min_by_key(|(_, o)| o.used.load(Ordering::Relaxed))
            .map(|(id, _)| id.clone());
        if let Some(id) = idle {
            open.remove(&id);
        }
    }

    /// Runs one event in session `id`, opening it for `owner` if it is new. Blocks for the
    /// tick (and for a tick of the same session already running).
    pub(crate) fn tick(
        &self,
        id: &str,
        owner: &Owner,
        hook: Hook,
        event: Event,
    ) -> Result<Outcome, SessionError> {
        valid_id(id)?;
        let open = self.get(id, owner)?;
        let mut session = open.session.blocking_lock();
        if let Some(warning) = session.undeclared_shell_tool(hook, &event) {
            tracing::warn!(session = id, "{warning}");
        }
        Ok(session.tick(hook, event))
    }

    /// Runs `f` on session `id` (opening it for `owner` if it is new, from memory when the
    /// server holds it), as [`Sessions::tick`] does for one event: for a host that ticks a
    /// session several times per request (Claude Code's `http` hook). Blocks while another
    /// request uses the session.
    pub(crate) fn with_session<R>(
        &self,
        id: &str,
        owner: &Owner,
        f: impl FnOnce(&mut Session) -> R,
    ) -> Result<R, SessionError> {
        valid_id(id)?;
        let open = self.get(id, owner)?;
        let mut session = open.session.blocking_lock();
        guarded(|| f(&mut session))
    }

    /// Whether ticks run on the runtime's threads ([`Sessions::tick_here`]): the store saves
    /// in batches on a thread of its own (SQLite).
    pub(crate) fn ticks_here(&self) -> bool {
        self.warden.store().batches_saves()
    }

    /// Runs one event in session `id` on the calling (runtime) thread, as [`Sessions::tick`]
    /// does, waiting for its save in the store's batch without holding the thread. Dropped
    /// while it waits (the client went away), it leaves a task to settle the save: a tick that
    /// was saved still sends its events and log lines, and the session stays locked until then.
    pub(crate) async fn tick_here(
        &self,
        id: &str,
        owner: &Owner,
        hook: Hook,
        event: Event,
    ) -> Result<Outcome, SessionError> {
        valid_id(id)?;
        let open = self.get(id, owner)?;
        if let Some(warning) = open
            .session
            .lock()
            .await
            .undeclared_shell_tool(hook, &event)
        {
            tracing::warn!(session = id, "{warning}");
        }
        // The engine's batched tick: the save joins the store's batch, awaited without holding
        // this thread; a request that goes away leaves the save to settle on its own.
        open.session
            .try_tick(hook, event)
            .await
            .map_err(|_| SessionError::Panicked)
    }

    /// The session `id`, if it has seen an event (here, or in a process before this one).
    pub(crate) fn view(&self, id: &str) -> Result<Option<v1::SessionView>, SessionError> {
        valid_id(id)?;
        let open = match self.in_memory(id) {
            Some(o) => o,
            None if !self.durable => return Ok(None),
            None => {
                let s = self.open_session(id, SessionOptions::default())?;
                if s.events() == 0 {
                    return Ok(None);
                }
                self.keep(id, s)?
            }
        };
        let mut s = open.session.blocking_lock();
        // Another server on the same database may have ticked it since.
        s.refresh()?;
        if s.events() == 0 {
            return Ok(None);
        }
        Ok(Some(v1::SessionView {
            id: s.id().to_string(),
            mode: s.facts().mode.clone(),
            ended: s.is_ended(),
            events: s.events(),
            facts: s.facts().clone(),
            running: s.running().into_iter().map(str::to_string).collect(),
            pending: s.pending().to_vec(),
        }))
    }

    /// Deletes session `id`, in memory and in the store; whether it existed.
    pub(crate) fn delete(&self, id: &str) -> Result<bool, SessionError> {
        valid_id(id)?;
        let in_memory = lock(&self.open).remove(id).is_some();
        let saved = self.durable && self.warden.delete_session(id)?;
        Ok(in_memory || saved)
    }

    /// How many sessions the server has in memory.
    pub(crate) fn count(&self) -> usize {
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

    /// A request that goes away while its tick waits for its batched save (one poll, then
    /// dropped) still has the save settled: the tick's emitted event goes out, the session is
    /// unlocked after it, and the next tick carries on from the saved session.
    #[test]
    fn a_tick_dropped_while_its_save_waits_is_settled_anyway() {
        let dir = tempfile::tempdir().unwrap();
        let rules = dir.path().join("rules");
        std::fs::create_dir(&rules).unwrap();
        std::fs::write(
            rules.join("emit.toml"),
            "[rule]\nid = \"emit\"\ntrigger = \"on_tool_failure\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"emit_event\"\nevent_type = \"failed\"\n",
        )
        .unwrap();
        let db = dir.path().join("w.db");
        let w = Warden::builder()
            .rules_dir(&rules)
            .store(warden_core::Store::open(&db).unwrap())
            .build()
            .unwrap();
        let mut bus = w.subscribe();
        let sessions = Sessions::new(w, 10, true);
        let owner = Owner {
            user: "ada".into(),
            project: "p".into(),
        };
        let fail = || Event::tool_failure("web", "timeout");
        // Another connection holds the database's write lock: the first save waits for it.
        let holder = warden_core::Store::open(&db).unwrap();
        let held = holder.tick();
        held.begin().unwrap();
        let runtime = crate::runtime().unwrap();
        runtime.block_on(async {
            let first = sessions.tick_here("a", &owner, Hook::OnToolFailure, fail());
            let gone = tokio::time::timeout(std::time::Duration::ZERO, first).await;
            assert!(gone.is_err(), "the first poll waits for the save");
            drop(held);
            let second = tokio::time::timeout(
                std::time::Duration::from_secs(10),
                sessions.tick_here("a", &owner, Hook::OnToolFailure, fail()),
            )
            .await
            .expect("the session was unlocked once the first save was settled")
            .unwrap();
            assert!(second.unsaved.is_none(), "{:?}", second.unsaved);
        });
        assert_eq!(&*bus.try_recv().unwrap().event_type, "failed");
        assert_eq!(&*bus.try_recv().unwrap().event_type, "failed");
        let saved = warden_core::Store::open(&db)
            .unwrap()
            .load_session("a")
            .unwrap()
            .unwrap();
        assert_eq!(saved.summary.events, 2);
    }

    #[test]
    fn sessions_put_down_are_read_back_and_deleted_everywhere() {
        let w = Warden::builder().builtin_rules().build().unwrap();
        let s = Sessions::new(w, 1, true);
        let owner = Owner {
            user: "ada".into(),
            project: "p".into(),
        };
        let fail = || Event::tool_failure("web", "timeout");
        s.tick("a", &owner, Hook::OnToolFailure, fail()).unwrap();
        s.tick("a", &owner, Hook::OnToolFailure, fail()).unwrap();
        // Opening `b` puts `a` down; `a` comes back from the store with its two failures.
        s.tick("b", &owner, Hook::OnTurnStart, Event::new())
            .unwrap();
        assert_eq!(s.count(), 1);
        let third = s.tick("a", &owner, Hook::OnToolFailure, fail()).unwrap();
        assert_eq!(third.fired(), ["repeated-failure-warning"]);
        let view = s.view("a").unwrap().unwrap();
        assert_eq!(view.facts.user.id, "ada");
        assert_eq!(view.events, 3);
        assert!(s.view("never").unwrap().is_none());
        assert!(s.delete("a").unwrap());
        assert!(!s.delete("a").unwrap());
        assert!(s.view("a").unwrap().is_none());
    }
}
