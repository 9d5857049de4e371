//! Paths resolved as the command would see them, and placed against the project and the
//! machine: lexically (`..`, `.`, the working folder), then, for a path that looks inside the
//! project, through the symbolic links on disk (one that leads out of the project is outside).

use std::path::{Path, PathBuf};

use crate::Env;
use crate::model::Place;

/// Folders of the system: `/` itself, and these with everything in them (the home folder and
/// the folders for temporary files aside).
const SYSTEM: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/var",
    "/Applications",
    "/Library",
    "/System",
    "/Users",
    "/Volumes",
    "/private",
];

/// Folders for temporary files (below them, not they themselves).
const TEMP: &[&str] = &["/tmp", "/var/tmp", "/dev/shm", "/private/tmp"];

/// Devices that writing to destroys nothing.
const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/full",
];

/// Warden's own files and the agents' hook configurations, relative to the project (and, for
/// the user's own settings, to the home folder).
const WARDEN_IN_PROJECT: &[&str] = &[
    ".warden",
    "warden.toml",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".codex/hooks.json",
    ".codex/config.toml",
    ".gemini/settings.json",
];
const WARDEN_IN_HOME: &[&str] = &[
    ".claude/settings.json",
    ".codex/hooks.json",
    ".codex/config.toml",
    ".gemini/settings.json",
];

/// A path resolved and placed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resolved {
    pub path: String,
    pub place: Place,
    pub glob: bool,
    pub covers_project: bool,
}

/// Resolves and places paths for one analysis.
pub(crate) struct Resolver {
    project: Option<String>,
    home: Option<String>,
    tmpdir: Option<String>,
    cwd: Option<String>,
    follow_links: bool,
    warden: Vec<String>,
    /// The project's folder with its links resolved, made at the first path that needs it.
    real_project: std::cell::OnceCell<Option<PathBuf>>,
}

/// `p` as a string, normalized (`/a/./b/../c` is `/a/c`).
fn text(p: &Path) -> Option<String> {
    p.to_str().map(|s| normalize(s, None))
}

impl Resolver {
    pub(crate) fn new(env: &Env) -> Resolver {
        let project = env
            .project
            .as_deref()
            .and_then(text)
            .filter(|p| p.starts_with('/'));
        let home = env
            .home
            .as_deref()
            .and_then(text)
            .filter(|p| p.starts_with('/'));
        let mut warden: Vec<String> = Vec::new();
        if let Some(p) = &project {
            warden.extend(WARDEN_IN_PROJECT.iter().map(|w| join(p, w)));
        }
        if let Some(h) = &home {
            warden.extend(WARDEN_IN_HOME.iter().map(|w| join(h, w)));
        }
        Resolver {
            cwd: env
                .cwd
                .as_deref()
                .and_then(text)
                .filter(|p| p.starts_with('/'))
                .or_else(|| project.clone()),
            project,
            home,
            tmpdir: env.tmpdir.as_deref().and_then(text),
            follow_links: env.follow_links,
            warden,
            real_project: std::cell::OnceCell::new(),
        }
    }

    /// The folder the command starts in.
    pub(crate) fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// The home folder.
    pub(crate) fn home(&self) -> Option<&str> {
        self.home.as_deref()
    }

    /// `written` (expanded: no `~` or variables left) resolved in `cwd`, and placed. `glob`:
    /// it holds unquoted glob characters, and the folder they range over is the path. A glob
    /// that matches every name there (`/*`, `*`) is placed as that folder, whose whole content
    /// it is; one that chooses some names (`/tmp/build-*`, `*.log`) as what is in the folder,
    /// and holds the project only when its pattern may name the project's folder.
    pub(crate) fn resolve(&self, written: &str, cwd: Option<&str>, glob: bool) -> Resolved {
        let ranged = if glob { glob_base(written) } else { written };
        let path = if ranged.starts_with('/') {
            Some(normalize(ranged, None))
        } else {
            cwd.map(|c| normalize(ranged, Some(c)))
        };
        let Some(path) = path else {
            return Resolved {
                path: written.to_string(),
                place: Place::Unknown,
                glob,
                covers_project: false,
            };
        };
        let chosen = glob.then(|| chosen_names(written)).flatten();
        let (place, covers_project) = match chosen {
            Some(pattern) => {
                // What is in the folder: a name no folder of the system has.
                let (place, _) = self.place(&join(&path, "\u{1}"));
                let covers = self.project.as_deref().is_some_and(|p| {
                    p != path
                        && under(p, &path)
                        && p[path.len()..]
                            .trim_start_matches('/')
                            .split('/')
                            .next()
                            .is_some_and(|name| may_match(pattern, name))
                });
                (place, covers)
            }
            None => self.place(&path),
        };
        Resolved {
            path,
            place,
            glob,
            covers_project,
        }
    }

    /// Where an absolute, normalized path is, and whether the project is inside it.
    fn place(&self, path: &str) -> (Place, bool) {
        let covers = self
            .project
            .as_deref()
            .is_some_and(|p| p != path && under(p, path));
        let lexical = self.lexical_place(path);
        // A path inside the project may still lead out of it through a link on disk.
        if self.follow_links
            && matches!(lexical, Place::Inside | Place::Warden)
            && let Some(real) = self.real_place(path)
        {
            return (real, covers);
        }
        (lexical, covers)
    }

    fn lexical_place(&self, path: &str) -> Place {
        if self.warden.iter().any(|w| {
            under(path, w)
                || (self.inside(path) && under(w, path) && Some(path) != self.project.as_deref())
        }) {
            return Place::Warden;
        }
        if let Some(p) = &self.project {
            if path == p {
                return Place::Root;
            }
            if under(path, p) {
                return Place::Inside;
            }
        }
        if path.starts_with("/dev/") {
            if HARMLESS_DEVICES.contains(&path)
                || path.starts_with("/dev/fd/")
                || path.starts_with("/dev/pts/")
            {
                return Place::Temp;
            }
            if !path.starts_with("/dev/shm/") {
                return Place::Device;
            }
        }
        // The home folder first: a home below /tmp (a test's, a sandbox's) is still a home.
        if let Some(h) = &self.home {
            if path == h {
                return Place::Home;
            }
            if under(path, h) {
                return Place::Outside;
            }
        }
        let temp = TEMP
            .iter()
            .copied()
            .chain(self.tmpdir.as_deref())
            .any(|t| path != t && under(path, t));
        if temp {
            return Place::Temp;
        }
        if path == "/" || SYSTEM.iter().any(|s| under(path, s)) {
            return Place::System;
        }
        Place::Outside
    }

    fn inside(&self, path: &str) -> bool {
        self.project.as_deref().is_some_and(|p| under(path, p))
    }

    /// Where `path` really is, through the links on disk, if it leads out of the project.
    fn real_place(&self, path: &str) -> Option<Place> {
        let project = self
            .real_project
            .get_or_init(|| {
                self.project
                    .as_deref()
                    .and_then(|p| std::fs::canonicalize(p).ok())
            })
            .as_ref()?;
        // The longest part of the path that exists, with its links resolved.
        let mut existing = PathBuf::from(path);
        let mut rest = Vec::new();
        let real = loop {
            if let Ok(r) = std::fs::canonicalize(&existing) {
                break r;
            }
            rest.push(existing.file_name()?.to_os_string());
            if !existing.pop() {
                return None;
            }
        };
        if real.starts_with(project) {
            return None;
        }
        let mut real = real;
        for part in rest.iter().rev() {
            real.push(part);
        }
        let real = text(&real)?;
        Some(match self.lexical_place(&real) {
            Place::Inside | Place::Root => Place::Outside,
            other => other,
        })
    }
}

/// Whether `path` is `dir` or below it (both absolute and normalized).
pub(crate) fn under(path: &str, dir: &str) -> bool {
    path == dir
        || dir == "/"
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

fn join(dir: &str, rel: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{rel}")
    } else {
        format!("{dir}/{rel}")
    }
}

/// The folder a glob ranges over: its path up to the first part with a glob character
/// (`/var/log/*.log` ranges over `/var/log`; `*` over `.`).
fn glob_base(written: &str) -> &str {
    let Some(first) = written.find(['*', '?', '[']) else {
        return written;
    };
    match written[..first].rfind('/') {
        Some(0) => "/",
        Some(i) => &written[..i],
        None => ".",
    }
}

/// The pattern of a glob's last part when it chooses some names of its folder (`build-*`,
/// `*.log`), rather than every name (`*`, `.*`) or a path through other globs (`*/x`).
fn chosen_names(written: &str) -> Option<&str> {
    let trimmed = written.trim_end_matches('/');
    let (dir, last) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
    if dir.contains(['*', '?', '[']) || !last.contains(['*', '?', '[']) {
        return None;
    }
    (!matches!(last, "*" | ".*" | "*.*" | "**" | "?*" | "*?")).then_some(last)
}

/// Whether a glob pattern (`*`, `?`, `[...]` as any one character) may match `name`: exactly,
/// by a backtracking match on characters.
fn may_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Each position: a character, or any one character (`?`, a class), or any run (`*`).
    let mut tokens: Vec<Option<char>> = Vec::new();
    let mut stars: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => {
                tokens.push(None);
                stars.push(true);
            }
            '?' => {
                tokens.push(None);
                stars.push(false);
            }
            '[' => {
                let close = p[i + 1..].iter().position(|c| *c == ']').map(|k| i + 1 + k);
                match close {
                    Some(c) => {
                        tokens.push(None);
                        stars.push(false);
                        i = c;
                    }
                    None => {
                        tokens.push(Some('['));
                        stars.push(false);
                    }
                }
            }
            c => {
                tokens.push(Some(c));
                stars.push(false);
            }
        }
        i += 1;
    }
    // Classic wildcard matching, in O(tokens x name).
    let mut can = vec![false; n.len() + 1];
    can[0] = true;
    for (t, star) in tokens.iter().zip(&stars) {
        let mut next = vec![false; n.len() + 1];
        for j in 0..=n.len() {
            if *star {
                next[j] = can[j] || (j > 0 && next[j - 1]);
            } else if j > 0 && can[j - 1] {
                next[j] = t.is_none_or(|c| c == n[j - 1]);
            }
        }
        can = next;
    }
    can[n.len()]
}

/// `p` made absolute against `cwd` (when relative) and normalized: `.` dropped, `..` taken
/// back (never above `/`), repeated slashes one.
pub(crate) fn normalize(p: &str, cwd: Option<&str>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let absolute = p.starts_with('/') || cwd.is_some();
    let start: Vec<&str> = match (p.starts_with('/'), cwd) {
        (false, Some(c)) => c.split('/').collect(),
        _ => Vec::new(),
    };
    for part in start.into_iter().chain(p.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() && !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            follow_links: false,
            ..Env::for_project("/home/ada/app").with_home("/home/ada")
        }
    }

    #[test]
    fn paths_are_normalized_against_the_working_folder() {
        assert_eq!(normalize("/a/./b/../c//d", None), "/a/c/d");
        assert_eq!(normalize("../x", Some("/home/ada/app")), "/home/ada/x");
        assert_eq!(normalize("../../../../..", Some("/a/b")), "/");
        assert_eq!(normalize(".", Some("/a")), "/a");
    }

    #[test]
    fn places() {
        let r = Resolver::new(&env());
        let place = |p: &str| r.resolve(p, Some("/home/ada/app"), false).place;
        assert_eq!(place("target"), Place::Inside);
        assert_eq!(place("."), Place::Root);
        assert_eq!(place("/"), Place::System);
        assert_eq!(place("/etc/passwd"), Place::System);
        assert_eq!(place("/home/ada"), Place::Home);
        assert_eq!(place("/home/ada/other"), Place::Outside);
        assert_eq!(place("/home/bob"), Place::System);
        assert_eq!(place("/tmp/x"), Place::Temp);
        assert_eq!(place("/tmp"), Place::System);
        assert_eq!(place("/dev/sda"), Place::Device);
        assert_eq!(place("/dev/null"), Place::Temp);
        assert_eq!(place(".warden/warden.db"), Place::Warden);
        assert_eq!(place(".claude/settings.json"), Place::Warden);
        assert_eq!(place(".claude"), Place::Warden);
        assert_eq!(place("/home/ada/.claude/settings.json"), Place::Warden);
        assert_eq!(place("/opt/other"), Place::System);
        let home = r.resolve("/home/ada", None, false);
        assert!(home.covers_project);
        let glob = r.resolve("/*", None, true);
        assert_eq!((glob.path.as_str(), glob.place), ("/", Place::System));
        let star = r.resolve("*", Some("/"), true);
        assert_eq!(star.path, "/");
        // A glob that chooses names is placed as what is in its folder.
        let temp = r.resolve("/tmp/app-build-*", None, true);
        assert_eq!((temp.path.as_str(), temp.place), ("/tmp", Place::Temp));
        let logs = r.resolve("*.log", Some("/home/ada/app"), true);
        assert_eq!(logs.place, Place::Inside);
        let etc = r.resolve("/etc/*.conf", None, true);
        assert_eq!(etc.place, Place::System);
        assert!(r.resolve("/home/ada/a*", None, true).covers_project);
        assert!(!r.resolve("/home/ada/b*", None, true).covers_project);
        assert!(r.resolve("/home/*", None, true).covers_project);
        assert!(may_match("a[pq]p", "app") && !may_match("*.log", "app") && may_match("*", ""));
        let unknown = Resolver::new(&Env::default()).resolve("build", None, false);
        assert_eq!(unknown.place, Place::Unknown);
    }
}
