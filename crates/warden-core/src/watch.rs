//! Hot reload: watching the rule, plugin, manifest and script files a [`Warden`] was built
//! from, and reloading when they change.
//!
//! Changes are gathered until the files have settled: quiet for [`SETTLE`] (an editor saving a
//! file, or a plugin folder being copied in, is several events), and, where the system says
//! when a writer closes a file (Linux), every file written since the last reload closed again,
//! so that a file whose writer paused halfway is not read half-written (a half that happens to
//! parse would otherwise be applied until the rest arrives). A writer that holds a file open
//! longer than [`MAX_SETTLE`] does not hold the reload back any longer. Then
//! [`Warden::reload`] runs once. A change that breaks something is not applied: the last good
//! program stays in force and the reload report says what is wrong (see [`Reload`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher as _};

use std::sync::Arc;

use crate::shared::{Reload, Shared};

/// How long the files must be quiet before a reload.
pub const SETTLE: Duration = Duration::from_millis(100);

/// The longest a reload waits for the writers of changed files to close them.
pub const MAX_SETTLE: Duration = Duration::from_secs(2);

/// Whether the watcher reports a writer closing a file (inotify's `IN_CLOSE_WRITE`); elsewhere a
/// reload waits for quiet alone.
const CLOSE_EVENTS: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the rule files: {0}")]
pub struct WatchError(#[from] notify::Error);

enum Message {
    Changed(Change),
    Stop,
}

/// What a file event says about the files being written.
enum Change {
    /// Something changed.
    Other,
    /// A file was created or written, and its writer may still hold it open.
    Written(PathBuf),
    /// The writer of a file closed it.
    Closed(PathBuf),
    /// A file was removed or renamed (a file renamed into place was closed before).
    Gone(Vec<PathBuf>),
}

impl Change {
    /// What `event` says, or `None` if it cannot matter.
    fn of(event: &notify::Event) -> Option<Change> {
        let path = event.paths.iter().find(|p| relevant(p))?.clone();
        Some(match event.kind {
            EventKind::Access(AccessKind::Close(AccessMode::Write)) if CLOSE_EVENTS => {
                Change::Closed(path)
            }
            EventKind::Access(_) => return None,
            EventKind::Create(CreateKind::File) | EventKind::Modify(ModifyKind::Data(_))
                if CLOSE_EVENTS =>
            {
                Change::Written(path)
            }
            EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_)) => {
                Change::Gone(event.paths.clone())
            }
            _ => Change::Other,
        })
    }

    /// Keeps `writing`, the files written and not closed yet, up to date.
    fn note(self, writing: &mut BTreeSet<PathBuf>) {
        match self {
            Change::Other => {}
            Change::Written(p) => {
                writing.insert(p);
            }
            Change::Closed(p) => {
                writing.remove(&p);
            }
            Change::Gone(paths) => {
                for p in &paths {
                    writing.remove(p);
                }
            }
        }
    }
}

/// Watches the files while it lives; dropping it stops watching.
#[derive(Debug)]
pub struct Watch {
    tx: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether a changed path can matter: rule files and manifests (`.toml`), scripts (`.lua`),
/// knowledge sources (`.md`, `.txt`), and folders (a plugin copied in arrives as a folder).
fn relevant(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') || n.ends_with('~'));
    !hidden
        && match path.extension().and_then(|e| e.to_str()) {
            Some("toml" | "lua" | "md" | "markdown" | "txt") => true,
            Some(_) => false,
            None => true,
        }
}

/// Watches the folders of `shared`'s program and knowledge, and reloads when they change,
/// calling `on_reload` after each reload (from the watching thread).
pub(crate) fn start(
    shared: Arc<Shared>,
    on_reload: impl Fn(&Reload) + Send + 'static,
) -> Result<Watch, WatchError> {
    let (tx, rx) = mpsc::channel();
    let events = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let change = match &res {
            Ok(e) => Change::of(e),
            Err(_) => Some(Change::Other),
        };
        if let Some(change) = change {
            let _ = events.send(Message::Changed(change));
        }
    })?;
    let mut watched = BTreeSet::new();
    sync(&mut watcher, &mut watched, &shared.watched_folders())?;
    let thread = std::thread::Builder::new()
        .name("warden-watch".into())
        .spawn(move || {
            // The files written since the last reload whose writers have not closed them.
            let mut writing = BTreeSet::new();
            loop {
                match rx.recv() {
                    Ok(Message::Changed(change)) => change.note(&mut writing),
                    Ok(Message::Stop) | Err(_) => return,
                }
                // Let the burst of events settle, and the writers finish.
                let started = Instant::now();
                loop {
                    match rx.recv_timeout(SETTLE) {
                        Ok(Message::Changed(change)) => change.note(&mut writing),
                        Ok(Message::Stop) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if writing.is_empty() {
                                break;
                            }
                            if started.elapsed() >= MAX_SETTLE {
                                tracing::warn!(
                                    files = ?writing,
                                    "reloading while files are still open for writing"
                                );
                                writing.clear();
                                break;
                            }
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
                let report = shared.reload();
                let folders = shared.watched_folders();
                if let Err(e) = sync(&mut watcher, &mut watched, &folders) {
                    tracing::warn!(error = %e, "a new folder could not be watched");
                }
                on_reload(&report);
            }
        })
        .map_err(|e| WatchError(notify::Error::io(e)))?;
    Ok(Watch {
        tx,
        thread: Some(thread),
    })
}

/// Watches every folder of `folders` not yet watched. A folder that does not exist yet is
/// watched through its parent, so creating it is noticed.
fn sync(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut BTreeSet<PathBuf>,
    folders: &[PathBuf],
) -> Result<(), notify::Error> {
    for folder in folders {
        let (target, mode) = if folder.is_dir() {
            (folder.clone(), RecursiveMode::Recursive)
        } else {
            match folder.parent().filter(|p| p.is_dir()) {
                Some(p) => (p.to_path_buf(), RecursiveMode::NonRecursive),
                None => continue,
            }
        };
        if watched.insert(target.clone()) {
            watcher.watch(&target, mode)?;
        }
    }
    Ok(())
}
