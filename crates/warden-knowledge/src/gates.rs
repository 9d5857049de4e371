//! Gates 1 to 4: a path named in a sources file leads to a regular file inside the project,
//! and nowhere else. (Gate 5, injection detection, is in [`crate::injection`].)
//!
//! In order, a path is refused when it is not a usable path at all (empty, control or hidden
//! characters, `\`), when it is absolute (gate 1), when it has a `..` component (gate 2), when
//! the file is a symbolic link (gate 3), or when its real path, after every link on the way is
//! followed, is outside the project root's real path (gate 4: a folder on the way is a link
//! leading out). Then it must be a regular file (not a folder, a FIFO or a device) of at most
//! [`MAX_SOURCE_BYTES`], in UTF-8.
//!
//! Not defended: a hard link to a file outside the project (it is a regular file inside), and a
//! path swapped for a link between the check and the read by someone who can write to the
//! project (who could change the sources themselves).

use std::fs;
use std::path::{Component, Path, PathBuf};

use warden_input::{FileKind, ReadError};

/// Largest knowledge source (or classification file) read, in bytes.
pub const MAX_SOURCE_BYTES: u64 = 1 << 20;

/// The check that refused a source. The first five variants after [`Check::MalformedPath`] are
/// the five security gates; the others say why a source that passed them could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// Not a usable path: empty, with a NUL, control or hidden character, or with `\`.
    MalformedPath,
    /// Gate 1: the path is absolute.
    AbsolutePath,
    /// Gate 2: the path leaves the project root with `..`.
    Traversal,
    /// Gate 3: the file is a symbolic link.
    Symlink,
    /// Gate 4: the real path (links followed) is outside the project root.
    RealPathEscape,
    /// Gate 5: the text contains an injection pattern (refused only if not curated).
    Injection,
    /// No file at the path.
    Missing,
    /// Not a regular file, too large, not UTF-8, or unreadable.
    Unreadable,
}

impl Check {
    /// The gate's number (1 to 5) for the five security gates, `None` for the other checks.
    pub fn gate(self) -> Option<u8> {
        match self {
            Check::AbsolutePath => Some(1),
            Check::Traversal => Some(2),
            Check::Symlink => Some(3),
            Check::RealPathEscape => Some(4),
            Check::Injection => Some(5),
            Check::MalformedPath | Check::Missing | Check::Unreadable => None,
        }
    }

    /// How it is named in messages: `the symlink gate`, `the path check`.
    pub fn name(self) -> &'static str {
        match self {
            Check::MalformedPath => "the path check",
            Check::AbsolutePath => "the absolute-path gate",
            Check::Traversal => "the traversal gate",
            Check::Symlink => "the symlink gate",
            Check::RealPathEscape => "the real-path gate",
            Check::Injection => "the injection gate",
            Check::Missing => "the existence check",
            Check::Unreadable => "the file check",
        }
    }
}

/// A refusal before it is attached to a source: which check, and what it found.
pub(crate) type Refused = (Check, String);

/// The project root, as given and as its real path.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    pub given: PathBuf,
    pub real: PathBuf,
}

impl Root {
    pub(crate) fn new(given: &Path) -> std::io::Result<Root> {
        let real = fs::canonicalize(given)?;
        if !real.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        Ok(Root {
            given: given.to_path_buf(),
            real,
        })
    }
}

/// Checks the text of a path (no file system access): the path check and gates 1 and 2.
pub(crate) fn check_shape(path: &str) -> Result<&Path, Refused> {
    let shown = path.escape_debug();
    if path.trim().is_empty() {
        return Err((Check::MalformedPath, "the path is empty".into()));
    }
    if path.contains('\0') {
        return Err((
            Check::MalformedPath,
            format!("`{shown}` contains a NUL character"),
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|&c| c.is_control() || crate::injection::is_hidden(c))
    {
        return Err((
            Check::MalformedPath,
            format!(
                "`{shown}` contains the invisible character U+{:04X}",
                u32::from(c)
            ),
        ));
    }
    if path.contains('\\') {
        return Err((
            Check::MalformedPath,
            format!("`{shown}` contains `\\`; write paths with `/`"),
        ));
    }
    let p = Path::new(path);
    let first = p.components().next();
    let drive_like =
        matches!(first, Some(Component::Normal(c)) if c.to_string_lossy().contains(':'));
    if path.starts_with('/')
        || p.is_absolute()
        || drive_like
        || p.components()
            .any(|c| matches!(c, Component::RootDir | Component::Prefix(_)))
    {
        return Err((
            Check::AbsolutePath,
            format!("`{shown}` is absolute; source paths are relative to the project root"),
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err((
            Check::Traversal,
            format!("`{shown}` uses `..`; source paths must stay inside the project root"),
        ));
    }
    Ok(p)
}

/// Gates 3 and 4 for `rel` (which passed [`check_shape`]): the real path of the file.
pub(crate) fn resolve(root: &Root, rel: &Path) -> Result<PathBuf, Refused> {
    let shown = rel.display();
    let full = root.given.join(rel);
    let meta = match fs::symlink_metadata(&full) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err((
                Check::Missing,
                format!("`{shown}` does not exist under the project root"),
            ));
        }
        Err(e) => return Err((Check::Unreadable, format!("`{shown}`: {e}"))),
    };
    if meta.file_type().is_symlink() {
        let target = fs::read_link(&full)
            .map(|t| format!(" to `{}`", t.display()))
            .unwrap_or_default();
        return Err((
            Check::Symlink,
            format!(
                "`{shown}` is a symbolic link{target}; knowledge sources must be regular files, \
                 not links"
            ),
        ));
    }
    let real =
        fs::canonicalize(&full).map_err(|e| (Check::Unreadable, format!("`{shown}`: {e}")))?;
    if !real.starts_with(&root.real) {
        return Err((
            Check::RealPathEscape,
            format!(
                "`{shown}` really is `{}`, outside the project root `{}`: a folder on the way is \
                 a link leading out",
                real.display(),
                root.real.display()
            ),
        ));
    }
    Ok(real)
}

/// Knowledge sources and the sources and classification files: at most
/// [`MAX_SOURCE_BYTES`], UTF-8, regular files.
const SOURCE_FILES: FileKind = FileKind {
    plural: "knowledge files",
    folder: "the project root",
    limit: MAX_SOURCE_BYTES,
};

/// Reads the file at `real`, which passed the gates, as text; `shown` names it in messages.
pub(crate) fn read_text(real: &Path, shown: &str) -> Result<String, Refused> {
    warden_input::read_text(real, None, &SOURCE_FILES)
        .map_err(|e| (Check::Unreadable, format!("`{shown}`: {e}")))
}

/// Reads a sources file (named by the operator, not through the gates).
pub(crate) fn read_config(path: &Path) -> Result<String, ReadError> {
    warden_input::read_text(path, None, &SOURCE_FILES)
}

/// The path check and gates 1 to 4, then the read: the text of `path` under `root`.
pub(crate) fn open(root: &Root, path: &str) -> Result<String, Refused> {
    let rel = check_shape(path)?;
    let real = resolve(root, rel)?;
    read_text(&real, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_before_the_file_system() {
        for (path, check) in [
            ("", Check::MalformedPath),
            ("  ", Check::MalformedPath),
            ("notes/a\0.md", Check::MalformedPath),
            ("notes/a\n.md", Check::MalformedPath),
            ("notes/\u{202E}dm.txt", Check::MalformedPath),
            ("notes/a\u{200B}.md", Check::MalformedPath),
            ("notes\\..\\..\\x.md", Check::MalformedPath),
            ("/etc/passwd", Check::AbsolutePath),
            ("//server/share/x.md", Check::AbsolutePath),
            ("C:/Windows/win.ini", Check::AbsolutePath),
            ("file:/etc/passwd", Check::AbsolutePath),
            ("../x.md", Check::Traversal),
            ("notes/../../x.md", Check::Traversal),
            ("notes/..", Check::Traversal),
            ("./notes/./a.md/..", Check::Traversal),
        ] {
            let got = check_shape(path).err().map(|(c, _)| c);
            assert_eq!(got, Some(check), "{path:?}");
        }
        for ok in [
            "notes/a.md",
            "./notes/a.md",
            "a..b.md",
            "notes/…/x.md",
            "café/ü.md",
        ] {
            assert!(check_shape(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn gate_numbers() {
        let gates: Vec<_> = [
            Check::AbsolutePath,
            Check::Traversal,
            Check::Symlink,
            Check::RealPathEscape,
            Check::Injection,
        ]
        .iter()
        .map(|c| c.gate())
        .collect();
        assert_eq!(gates, [Some(1), Some(2), Some(3), Some(4), Some(5)]);
        assert_eq!(Check::Missing.gate(), None);
    }
}
