//! Hot reload: watching the rule, plugin, manifest and script files a [`Warden`] was built
//! from, and reloading when they change.
//!
//! Changes are gathered until the files have been quiet for [`SETTLE`] (an editor saving a
//! file, or a plugin folder being copied in, is several events), then [`Warden::reload`]
//! runs once. A change that breaks something is not applied: the last good program stays in
//! force and the reload report says what is wrong (see [`Reload`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use notify::{RecursiveMode, Watcher as _};

use std::sync::Arc;

use crate::shared::{Reload, Shared};

/// How long the files must be quiet before a reload.
pub const SETTLE: Duration = Duration::from_millis(100);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch the rule files: {0}")]
pub struct WatchError(#[from] notify::Error);

enum Message {
    Changed,
    Stop,
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
        let matters = match &res {
            Ok(e) => !e.kind.is_access() && e.paths.iter().any(|p| relevant(p)),
            Err(_) => true,
        };
        if matters {
            let _ = events.send(Message::Changed);
        }
    })?;
    let mut watched = BTreeSet::new();
    sync(&mut watcher, &mut watched, &shared.watched_folders())?;
    let thread = std::thread::Builder::new()
        .name("warden-watch".into())
        .spawn(move || {
            loop {
                match rx.recv() {
                    Ok(Message::Changed) => {}
                    Ok(Message::Stop) | Err(_) => return,
                }
                // Let the burst of events settle.
                loop {
                    match rx.recv_timeout(SETTLE) {
                        Ok(Message::Changed) => continue,
                        Ok(Message::Stop) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
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
