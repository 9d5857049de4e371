//! Reading a file an operator wrote, defensively: every loader (rule files, manifests, modes,
//! `warden.toml`, rule tests), the scripts and the knowledge sources read through
//! [`read_text`] (a rule folder's listed files through [`read_entry`], its shorter way to the
//! same checks), so they share one set of defences.
//!
//! - Only a regular file is read. A named pipe, a socket or a device is refused before it is
//!   opened, and the open itself never waits (`O_NONBLOCK`: a FIFO swapped in after the check
//!   cannot block it).
//! - The read is bounded: at most the limit of its [`FileKind`], checked before the open, on the
//!   open file and while reading (a file that grows in between is still refused).
//! - Confined: with a folder given, the file the path leads to, through any link of the file
//!   or of a folder on the way, must be inside that folder; the file opened is the one found
//!   there, without following a link put at its place since (`O_NOFOLLOW`).
//! - UTF-8 text only.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What kind of file is read: how messages name it, and how large it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// Such files, in the plural (`rule files`), for messages.
    pub plural: &'static str,
    /// The folder they must live in (`the rule folder`), for messages.
    pub folder: &'static str,
    /// The largest such file, in bytes.
    pub limit: u64,
}

impl FileKind {
    /// Rule, behavior, manifest, modes and test files, and `warden.toml`: at most 1 MiB.
    pub const RULES: FileKind = FileKind {
        plural: "rule files",
        folder: "the rule folder",
        limit: 1 << 20,
    };
}

/// Why a file was not read. Its `Display` is a phrase about the file (the caller names it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened or read (missing, no permission...).
    #[error("cannot read: {0}")]
    Unreadable(String),
    /// It is a link that cannot be followed.
    #[error("a link that cannot be followed: {0}")]
    BrokenLink(String),
    /// It leads out of the folder it must live in.
    #[error("a link to {}, outside {folder}; {plural} must live in the folder", real.display())]
    Outside {
        /// Where the path really leads.
        real: PathBuf,
        /// The folder, as [`FileKind::folder`] names it.
        folder: &'static str,
        /// The kind of file, as [`FileKind::plural`] names it.
        plural: &'static str,
    },
    /// It is not a regular file (what it is, when that can be told).
    #[error("not a regular file{}", .0.map(|w| format!(" ({w})")).unwrap_or_default())]
    NotRegular(Option<&'static str>),
    /// It is larger than its kind allows.
    #[error("the file is {len} bytes; {plural} are limited to {limit}")]
    TooLarge {
        /// Its size (or as much as was read past the limit).
        len: u64,
        /// The limit.
        limit: u64,
        /// The kind of file, as [`FileKind::plural`] names it.
        plural: &'static str,
    },
    /// It is not UTF-8 text.
    #[error("the file is not UTF-8 text")]
    NotUtf8,
}

/// Reads the file at `path` as text, within the bounds of `kind`; with `root` (a canonical
/// folder), the file it leads to must be inside it. See the module documentation.
pub fn read_text(path: &Path, root: Option<&Path>, kind: &FileKind) -> Result<String, ReadError> {
    let is_link = || fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let unreadable = |e: std::io::Error| {
        if is_link() {
            ReadError::BrokenLink(e.to_string())
        } else {
            ReadError::Unreadable(e.to_string())
        }
    };
    // Confined, the file opened is the one the check found inside the folder, by its resolved
    // path and without following a link at its end: a link put in its place since the check
    // is refused, not followed out of the folder.
    let mut target = path.to_path_buf();
    if let Some(root) = root {
        let real = fs::canonicalize(path).map_err(unreadable)?;
        if !real.starts_with(root) {
            return Err(ReadError::Outside {
                real,
                folder: kind.folder,
                plural: kind.plural,
            });
        }
        target = real;
    }
    let too_large = |len: u64| ReadError::TooLarge {
        len,
        limit: kind.limit,
        plural: kind.plural,
    };
    let check = |meta: &fs::Metadata| {
        if !meta.is_file() {
            Err(not_regular(meta))
        } else if meta.len() > kind.limit {
            Err(too_large(meta.len()))
        } else {
            Ok(())
        }
    };
    check(&fs::metadata(&target).map_err(unreadable)?)?;
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Opening a FIFO waits for a writer: never wait on one put in the file's place since
        // the check above (on a regular file the flag changes nothing).
        let nofollow = if root.is_some() { libc::O_NOFOLLOW } else { 0 };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    let mut file = options.open(&target).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    check(&meta)?;
    read_open(&mut file, meta.len(), kind)
}

/// Reads `folder/name`, a file listed in `folder`, whose canonical path is `root`, as
/// [`read_text`] with `root` would, with fewer system calls: a listed name that is a regular
/// file and not a link leads to `root/name`, inside the folder by construction, so it is not
/// resolved link by link; it is opened without following a link (`O_NOFOLLOW`, should a link
/// be put in its place meanwhile) and checked again on the open file. Anything else (a link, a
/// pipe, what the open refuses) takes [`read_text`]'s way, with its checks and its messages. A
/// loader reads each file of a folder this way: resolving every path was most of what a hook
/// process, which loads every rule at every event, spent on reading. It relies, as the caller
/// does in listing it, on `folder` still being the folder `root` names: a folder moved or
/// replaced by a link while it is read is not noticed (that takes write access to where the
/// folder lives, which is already the power to write its rules). `listed` is the type the
/// listing gave (`DirEntry::file_type`, which does not follow a link, usually without a system
/// call); `None` looks it up.
pub fn read_entry(
    path: &Path,
    listed: Option<fs::FileType>,
    root: &Path,
    kind: &FileKind,
) -> Result<String, ReadError> {
    #[cfg(unix)]
    if listed
        .or_else(|| fs::symlink_metadata(path).ok().map(|m| m.file_type()))
        .is_some_and(|t| t.is_file())
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut options = fs::OpenOptions::new();
        options
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        if let Ok(mut file) = options.open(path) {
            let meta = file
                .metadata()
                .map_err(|e| ReadError::Unreadable(e.to_string()))?;
            if !meta.is_file() {
                return Err(not_regular(&meta));
            }
            return read_open(&mut file, meta.len(), kind);
        }
    }
    read_text(path, Some(root), kind)
}

/// Reads an open regular file of `len` bytes, within the limit of `kind` (also if it grows
/// while it is read), as UTF-8 text.
fn read_open(file: &mut fs::File, len: u64, kind: &FileKind) -> Result<String, ReadError> {
    let too_large = |len: u64| ReadError::TooLarge {
        len,
        limit: kind.limit,
        plural: kind.plural,
    };
    if len > kind.limit {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.by_ref()
        .take(kind.limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Unreadable(e.to_string()))?;
    if bytes.len() as u64 > kind.limit {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

/// Why a file that is not a regular file is refused, naming what it is when that can be told.
pub fn not_regular(meta: &fs::Metadata) -> ReadError {
    let kind = meta.file_type();
    ReadError::NotRegular(if kind.is_dir() {
        Some("a folder")
    } else {
        special_kind(&kind)
    })
}

#[cfg(unix)]
fn special_kind(kind: &fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        Some("a named pipe")
    } else if kind.is_socket() {
        Some("a socket")
    } else if kind.is_char_device() || kind.is_block_device() {
        Some("a device")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn special_kind(_: &fs::FileType) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: FileKind = FileKind {
        plural: "test files",
        folder: "the test folder",
        limit: 8,
    };

    #[test]
    fn bounds_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let ok = root.join("ok");
        fs::write(&ok, "fine").unwrap();
        assert_eq!(read_text(&ok, Some(&root), &SMALL).unwrap(), "fine");
        let big = root.join("big");
        fs::write(&big, "123456789").unwrap();
        assert_eq!(
            read_text(&big, None, &SMALL).unwrap_err().to_string(),
            "the file is 9 bytes; test files are limited to 8"
        );
        let bin = root.join("bin");
        fs::write(&bin, [0xff, 0xfe]).unwrap();
        assert_eq!(
            read_text(&bin, None, &SMALL).unwrap_err(),
            ReadError::NotUtf8
        );
        assert_eq!(
            read_text(&root, None, &SMALL).unwrap_err().to_string(),
            "not a regular file (a folder)"
        );
        assert!(matches!(
            read_text(&root.join("missing"), None, &SMALL),
            Err(ReadError::Unreadable(_))
        ));
    }

    /// A folder (its canonical path) and, in another folder, a file `secret` a link may lead to.
    #[cfg(unix)]
    fn folder_and_secret_outside() -> (tempfile::TempDir, PathBuf, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "x").unwrap();
        (dir, root, outside)
    }

    /// Makes a named pipe at `path` (no writer: opening it to read without `O_NONBLOCK` waits).
    #[cfg(unix)]
    fn make_fifo(path: &Path) -> PathBuf {
        let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a plain libc call on a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        path.to_path_buf()
    }

    #[cfg(unix)]
    #[test]
    fn links_out_and_pipes_are_refused_without_waiting() {
        let (_dir, root, outside) = folder_and_secret_outside();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        let e = read_text(&root.join("link"), Some(&root), &SMALL).unwrap_err();
        assert!(e.to_string().contains("outside the test folder"), "{e}");
        let fifo = make_fifo(&root.join("fifo"));
        assert_eq!(
            read_text(&fifo, Some(&root), &SMALL)
                .unwrap_err()
                .to_string(),
            "not a regular file (a named pipe)"
        );
    }

    /// A folder's entries read the short way come to what `read_text` says of them.
    #[cfg(unix)]
    #[test]
    fn entries_read_as_read_text_reads_them() {
        let (_dir, root, outside) = folder_and_secret_outside();
        fs::write(root.join("ok"), "fine").unwrap();
        fs::write(root.join("big"), "123456789").unwrap();
        fs::write(root.join("bin"), [0xff, 0xfe]).unwrap();
        fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("ok"), root.join("in")).unwrap();
        std::os::unix::fs::symlink(root.join("gone"), root.join("broken")).unwrap();
        make_fifo(&root.join("fifo"));
        // Named through a link to the folder, as an operator may name it.
        let via = outside.path().join("rules");
        std::os::unix::fs::symlink(&root, &via).unwrap();
        for name in [
            "ok", "big", "bin", "sub", "out", "in", "broken", "fifo", "missing",
        ] {
            for folder in [&root, &via] {
                let path = folder.join(name);
                let listed = fs::symlink_metadata(&path).ok().map(|m| m.file_type());
                for listed in [None, listed] {
                    assert_eq!(
                        read_entry(&path, listed, &root, &SMALL),
                        read_text(&path, Some(&root), &SMALL),
                        "{}",
                        path.display()
                    );
                }
            }
        }
        assert_eq!(
            read_entry(&root.join("in"), None, &root, &SMALL).unwrap(),
            "fine"
        );
        assert!(matches!(
            read_entry(&root.join("out"), None, &root, &SMALL),
            Err(ReadError::Outside { .. })
        ));
    }
}
