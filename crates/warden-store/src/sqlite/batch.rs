//! Sessions saved in batches (see [`crate::Store::save_in_batch`]): a thread of the store's own
//! takes every save waiting, writes them in one IMMEDIATE transaction on the store's connection
//! and commits once, then tells each caller how its save went. While it commits, the next saves
//! queue up and make the next batch: under load one commit (its lock, its append to the
//! write-ahead log) serves many sessions, and no caller's thread waits for the database.
//!
//! Each save is checked against the version it was loaded at, as a tick's commit checks it: a
//! session saved by another process meanwhile is a [`StoreError::SessionConflict`] for that
//! save alone, and the others of its batch are committed. A save that writes more than its
//! row (its history's entries moving to their table) does it in a savepoint of its own, so one
//! that fails half-way (its row written, one of its entries refused) leaves nothing of itself
//! (see `sessions::save_session`). A failure of the transaction itself (the lock held elsewhere too long, a
//! full disk) fails every save of its batch, and none of them is written.
//!
//! The thread outlives a panic, of a caller's `done` (it is caught, and the others of the batch
//! are still told) or of its own (the batch is rolled back and every save of it told so).

use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use rusqlite::Connection;

use super::sessions::save_session;
use crate::error::{Named, StoreError};
use crate::types::SessionSave;

/// The most saves one transaction takes; the rest make the next one.
const MAX_BATCH: usize = 64;

/// Told how a save went: its new version, or why it was not saved.
pub(crate) type Done = Box<dyn FnOnce(Result<i64, StoreError>) + Send>;

/// One save waiting, and whom to tell. Dropped untold (the thread stopped before its batch),
/// it tells its caller the save was not made: every caller hears back exactly once.
struct Job {
    save: SessionSave,
    done: Option<Done>,
    db: Named,
}

impl Job {
    fn tell(mut self, result: Result<i64, StoreError>) {
        if let Some(done) = self.done.take() {
            done(result);
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            done(Err(self.db.refused(
                "the store stopped before the session could be saved".to_string(),
            )));
        }
    }
}

/// The batching thread, and the queue to it.
pub(crate) struct Batcher {
    jobs: Sender<Job>,
    thread: JoinHandle<()>,
    db: Named,
}

impl Batcher {
    /// Starts the thread, on `conn` (the store's own connection, shared with ticks).
    pub(crate) fn start(conn: Arc<Mutex<Connection>>, db: Named) -> Result<Batcher, StoreError> {
        let (jobs, queue) = std::sync::mpsc::channel();
        let named = db.clone();
        let thread = std::thread::Builder::new()
            .name("warden-save".into())
            .spawn(move || run(&conn, &named, &queue))
            .map_err(|e| db.refused(format!("cannot start the thread that saves sessions: {e}")))?;
        Ok(Batcher { jobs, thread, db })
    }

    /// Queues `save`; `done` is called on the batching thread once its batch is committed (or
    /// failed). If the thread is gone (it should not be: it survives panics), the save and
    /// `done` are handed back, untold.
    pub(crate) fn submit(
        &self,
        save: SessionSave,
        done: Done,
    ) -> Result<(), Box<(SessionSave, Done)>> {
        let job = Job {
            save,
            done: Some(done),
            db: self.db.clone(),
        };
        self.jobs
            .send(job)
            .map_err(|std::sync::mpsc::SendError(mut job)| {
                let done = job.done.take();
                let save = std::mem::take(&mut job.save);
                Box::new((save, done.unwrap_or_else(|| Box::new(|_| {}))))
            })
    }

    /// Commits what is queued, and stops the thread.
    pub(crate) fn stop(self) {
        drop(self.jobs);
        if self.thread.join().is_err() {
            tracing::error!(db = %self.db.label, "the thread that saves sessions panicked");
        }
    }
}

/// Saves `save` now, on the caller's thread (when the thread cannot be started).
pub(crate) fn save_now(conn: &Mutex<Connection>, db: &Named, save: SessionSave, done: Done) {
    let job = Job {
        save,
        done: Some(done),
        db: db.clone(),
    };
    let result = {
        let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
        commit(&conn, db, std::slice::from_ref(&job)).pop()
    };
    if let Some(result) = result {
        job.tell(result);
    }
}

fn run(conn: &Mutex<Connection>, db: &Named, queue: &Receiver<Job>) {
    while let Ok(first) = queue.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => batch.push(job),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let results = {
            let conn = conn.lock().unwrap_or_else(PoisonError::into_inner);
            let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                commit(&conn, db, &batch)
            }));
            results.unwrap_or_else(|_| {
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                let reason = "saving sessions failed (a bug in Warden; the log has it)";
                batch
                    .iter()
                    .map(|_| Err(db.refused(reason.to_string())))
                    .collect()
            })
        };
        for (job, result) in batch.into_iter().zip(results) {
            // A caller's `done` that panics does not take the thread, or the others, with it.
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.tell(result)));
            if told.is_err() {
                tracing::error!(db = %db.label, "a caller's handler of a saved session panicked");
            }
        }
    }
}

/// Writes the batch's saves in one transaction; each one's result.
fn commit(conn: &Connection, db: &Named, batch: &[Job]) -> Vec<Result<i64, StoreError>> {
    // Why no save of the batch was written: a fresh error for each.
    let all_fail = |why: &dyn Fn() -> StoreError| batch.iter().map(|_| Err(why())).collect();
    // Prepared once and kept, as the saves' statements are: a batch is committed every few
    // hundred microseconds under load, and parsing these two each time showed in profiles.
    let step = |sql: &str| super::execute(conn, sql, []);
    if let Err(e) = step("BEGIN IMMEDIATE") {
        return if super::is_busy(&e) {
            all_fail(&|| db.busy())
        } else {
            let reason = format!("beginning the transaction that saves sessions: {e}");
            all_fail(&|| db.refused(reason.clone()))
        };
    }
    let mut results = Vec::with_capacity(batch.len());
    for job in batch {
        // A save that fails after some of its statements is undone to its savepoint (see
        // `save_session`); one that ends the transaction (a full disk) is seen below.
        results.push(save_session(db, conn, &job.save.as_write()));
        if conn.is_autocommit() {
            let reason = match results.pop() {
                Some(Err(e)) => e.to_string(),
                _ => "the transaction ended".to_string(),
            };
            return all_fail(&|| db.refused(format!("saving sessions: {reason}")));
        }
    }
    if let Err(e) = step("COMMIT") {
        let reason = format!("committing saved sessions: {e}");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        return all_fail(&|| db.refused(reason.clone()));
    }
    results
}
