//! A session for async code: [`AsyncSession`]. A tick of a durable session whose store saves in
//! batches runs on the calling (runtime) thread and waits for its save without holding the
//! thread, so one commit saves the ticks of many sessions and no thread waits for the
//! database; a script that runs on there for more than a millisecond hands the thread's other
//! tasks over and goes on (`hand_over`). Otherwise the tick runs on tokio's blocking pool, so
//! a slow rule never stalls the runtime. Either way, dropping a tick's future loses nothing: a
//! save under way is settled on a task of its own, the session locked until then.

use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard, OwnedMutexGuard, oneshot};
use warden_load::Hook;

use warden_context::event::Event;
use warden_program::outcome::Outcome;
use warden_session::session::{PendingSave, Session, Ticked};

/// How a batched save went, as the store tells it.
type SaveResult = Result<i64, warden_store::StoreError>;

/// A tick panicked: a bug in Warden (the panic was printed where it happened). The session is
/// still whole: a tick applies its effects at its end, and the store has its last save.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tick panicked (a bug in Warden)")]
pub struct TickPanicked;

/// A session for async agent loops and servers (see the module docs). Clones share the
/// session; its ticks run one at a time.
#[derive(Clone, Debug)]
pub struct AsyncSession {
    inner: Arc<Mutex<Session>>,
}

/// A tick waiting for its batched save, with its session locked. Dropped before the save is
/// settled (its caller went away), it settles it on a task of its own.
struct Settling(
    Option<(
        OwnedMutexGuard<Session>,
        PendingSave,
        oneshot::Receiver<SaveResult>,
    )>,
);

impl Drop for Settling {
    fn drop(&mut self) {
        let Some((mut session, pending, result)) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Ok(result) = result.await {
                    let _ = guarded(|| session.saved(pending, result));
                }
            });
        }
    }
}

thread_local! {
    /// Whether this thread runs a tick on a runtime worker ([`AsyncSession::try_tick`]'s
    /// batched path): the only place a hand-over helps ([`hand_over`]).
    static TICKING_ON_WORKER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Called on a script's run that has gone on for a millisecond, and every 10 ms after
/// ([`warden_lua::set_hand_over`]): in a tick on a worker of a multi-thread runtime, the
/// worker's other tasks, and its turn at polling the runtime's sockets, go to another thread
/// (`block_in_place`), and the run goes on here. Else a script that runs for seconds would
/// hold up every connection of a server, however many workers it has: the idle ones sleep
/// until a task wakes them, and the sockets are polled by none. Most runs end before the
/// millisecond and keep their thread, without the hand-over's cost (a thread woken).
///
/// `block_in_place` gives the worker's tasks to a thread it wakes, and takes them back when
/// its closure returns if that thread has not started yet: the closure waits until the
/// runtime has run a task of its own (at most [`HAND_OVER_WAIT`], which the script's time
/// limit counts). That is best effort: the tasks may still come back (another worker ran the
/// task first; the thread that took them gave them back to hand over work of its own; the
/// blocking pool was full), and the next call, 10 ms later, hands them over again. On a thread
/// that holds no worker's tasks, a call costs the wait for that task.
fn hand_over() {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if !TICKING_ON_WORKER.get() {
        return;
    }
    let Ok(runtime) = Handle::try_current() else {
        return;
    };
    if runtime.runtime_flavor() != RuntimeFlavor::MultiThread {
        return;
    }
    tokio::task::block_in_place(move || {
        let (ran, seen) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = ran.send(());
        });
        let _ = seen.recv_timeout(HAND_OVER_WAIT);
    });
}

/// The longest a hand-over waits for the runtime to go on without the thread (see
/// [`hand_over`]); the script's time limit counts on meanwhile.
const HAND_OVER_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Runs `f`; a panic in it (a bug) is an error of this tick rather than of the thread.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, TickPanicked> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| TickPanicked)
}

impl AsyncSession {
    /// Wraps a session.
    pub fn new(session: Session) -> Self {
        warden_lua::set_hand_over(hand_over);
        AsyncSession {
            inner: Arc::new(Mutex::new(session)),
        }
    }

    /// Handles one hook (see [`Session::tick`]). A panic inside the tick (a bug) is resumed
    /// here, where the caller sees it.
    pub async fn tick(&self, hook: Hook, event: Event) -> Outcome {
        match self.try_tick(hook, event).await {
            Ok(outcome) => outcome,
            Err(TickPanicked) => panic!("a tick panicked (a bug in Warden; see above)"),
        }
    }

    /// Handles one hook as [`AsyncSession::tick`] does; a panic inside the tick is an error
    /// (a server answers that request with it and serves the others).
    pub async fn try_tick(&self, hook: Hook, event: Event) -> Result<Outcome, TickPanicked> {
        let mut session = self.inner.clone().lock_owned().await;
        if !session.saves_in_batches() {
            // The tick commits on its own: on the blocking pool, so that it waits for the
            // database (or a slow rule) without a runtime thread.
            return match tokio::task::spawn_blocking(move || guarded(|| session.tick(hook, event)))
                .await
            {
                Ok(result) => result,
                Err(_) => Err(TickPanicked),
            };
        }
        let (saved, result) = oneshot::channel();
        // Marked for the synchronous tick only (the future may go on on another thread); a
        // panic in it is caught by `guarded`, so the mark is always taken off.
        TICKING_ON_WORKER.set(true);
        let ticked = guarded(|| {
            session.tick_batched(hook, event, move |r| {
                let _ = saved.send(r);
            })
        });
        TICKING_ON_WORKER.set(false);
        let ticked = ticked?;
        match ticked {
            Ticked::Done(outcome) => Ok(outcome),
            Ticked::Saving(pending) => {
                let mut waiting = Settling(Some((session, pending, result)));
                let told = match waiting.0.as_mut() {
                    Some((_, _, result)) => result.await,
                    None => return Err(TickPanicked),
                };
                let Some((mut session, pending, _)) = waiting.0.take() else {
                    return Err(TickPanicked);
                };
                // The store tells every save once, even when it stops first.
                let result = told.unwrap_or_else(|_| {
                    Err(warden_store::StoreError::Unavailable {
                        reason: "the store stopped before saving the session".into(),
                    })
                });
                guarded(|| session.saved(pending, result))
            }
        }
    }

    /// The session, for a look or a tick of its own, waiting for a tick under way.
    pub async fn lock(&self) -> MutexGuard<'_, Session> {
        self.inner.lock().await
    }

    /// The session, from a thread that may block (not a runtime thread), waiting for a tick
    /// under way.
    pub fn blocking_lock(&self) -> MutexGuard<'_, Session> {
        self.inner.blocking_lock()
    }
}
