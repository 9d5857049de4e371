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

use warden_session::shared::{Reload, Shared};

/// How long the files must be quiet before a reload.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);

/// The longest a reload waits for the writers of changed files to close them.
pub(crate) const MAX_SETTLE: Duration = Duration::from_secs(2);

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
    let mut watched = Watched::new();
    sync(&mut watcher, &mut watched, &shared.watched_folders())?;
    let again = tx.clone();
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
                match sync(&mut watcher, &mut watched, &folders) {
                    // A folder that appeared is watched from now on; files copied into it
                    // before then were not seen one by one: read everything once more.
                    Ok(true) => {
                        let _ = again.send(Message::Changed(Change::Other));
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "a new folder could not be watched"),
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

/// What is watched: each path, and whether the whole tree under it is.
type Watched = std::collections::BTreeMap<PathBuf, bool>;

/// Watches each folder of `folders`: the folder itself when it exists, else its parent (so
/// that its creation is noticed), and stops watching what is no longer wanted. A folder that
/// was deleted lost its watch with it, and is watched again when it comes back. Whether a
/// folder that did not exist before is watched now.
fn sync(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut Watched,
    folders: &[PathBuf],
) -> Result<bool, notify::Error> {
    let mut wanted = Watched::new();
    for folder in folders {
        if folder.is_dir() {
            wanted.insert(folder.clone(), true);
            continue;
        }
        // (The parent of a relative `plugins` is the empty path: the current folder.)
        let parent = match folder.parent() {
            Some(p) if p.as_os_str().is_empty() => Path::new("."),
            Some(p) => p,
            None => continue,
        };
        if parent.is_dir() {
            wanted.entry(parent.to_path_buf()).or_insert(false);
        }
    }
    for (path, _) in watched.iter().filter(|(p, r)| wanted.get(*p) != Some(r)) {
        // A deleted folder's watch is gone already.
        let _ = watcher.unwatch(path);
    }
    let mut appeared = false;
    for (path, recursive) in &wanted {
        if watched.get(path) == Some(recursive) {
            continue;
        }
        let mode = if *recursive {
            appeared |= !watched.is_empty();
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        watcher.watch(path, mode)?;
    }
    *watched = wanted;
    Ok(appeared)
}
