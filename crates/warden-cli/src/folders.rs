//! What a path on the command line is: a rule file, a rule folder, a plugin's folder (or a
//! folder inside one), a folder of plugins.

use std::path::{Path, PathBuf};

use warden_core::MANIFEST_FILE;

/// Whether `dir` is a folder of plugins: no manifest of its own, and a folder with a
/// manifest in it.
pub(crate) fn is_plugins_folder(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    // A folder that is itself a plugin is not a folder of plugins; loose rule files beside
    // plugin folders are reported by the loader.
    !dir.join(MANIFEST_FILE).is_file()
        && entries
            .filter_map(Result::ok)
            .any(|e| e.path().join(MANIFEST_FILE).is_file())
}

/// The plugin folder `dir` is in: itself, or a folder up to two levels above it (a plugin's
/// `rules/`, or a folder inside that), if it is in one.
pub(crate) fn plugin_of(dir: &Path) -> Option<PathBuf> {
    let mut at = Some(dir);
    for _ in 0..3 {
        let d = at?;
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if d.join(MANIFEST_FILE).is_file() {
            return Some(d.to_path_buf());
        }
        at = d.parent();
    }
    None
}

/// The folder a file is in (`.` for a bare file name).
pub(crate) fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}
