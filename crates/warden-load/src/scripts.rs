//! Finding the Lua script a rule names (`[condition] script = "scripts/x.lua"`), safely.
//!
//! A script path is relative, uses `/`, ends in `.lua` and has no `..`. It is looked up next to
//! the rule file, then in the folder above it (so `rules/a.toml` finds `scripts/a.lua` beside
//! `rules/`), then among Warden's built-in scripts. A file that is a link leading out of the
//! folder it was found in is refused, as is one larger than 1 MiB or not UTF-8.

use std::fs;
use std::path::{Component, Path, PathBuf};

use warden_input::{FileKind, ReadError, read_text};

use crate::builtin::BUILTIN_SCRIPTS;

/// Scripts: at most 1 MiB, beside the rules.
pub const SCRIPT_FILES: FileKind = FileKind {
    plural: "scripts",
    folder: "the rule folder",
    limit: 1 << 20,
};

/// A script found and read.
#[derive(Debug, Clone)]
pub struct Found {
    /// Where it was found (shown in messages).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// Whether it was read from disk (not one of the built-in scripts).
    pub on_disk: bool,
}

/// Why a script path was refused or its file not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The path is not the shape of a script path (absolute, `..`, not `.lua`...).
    #[error("{0}")]
    Shape(String),
    /// No file was found where the path was looked for.
    #[error("no script `{path}`: looked {looked}")]
    NotFound {
        /// The path as written.
        path: String,
        /// Where it was looked for.
        looked: String,
    },
    /// The file was found but not read.
    #[error("{}: {error}", .path.display())]
    Unreadable {
        /// Where it was found.
        path: PathBuf,
        /// Why it was not read.
        error: ReadError,
    },
}

/// Checks the shape of a script path; the error says what is wrong with it.
fn check_shape(path: &str) -> Result<&Path, ScriptError> {
    let refuse = |why: String| Err(ScriptError::Shape(why));
    if path.trim().is_empty() {
        return refuse("the script path is empty".into());
    }
    if path.contains('\\') {
        return refuse("write script paths with `/`, not `\\`".into());
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('/') {
        return refuse(format!(
            "`{path}` is absolute; script paths are relative to the rule folder"
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return refuse(format!(
            "`{path}` leaves the rule folder with `..`; keep scripts beside the rules"
        ));
    }
    if p.extension().is_none_or(|e| e != "lua") {
        return refuse(format!("`{path}` is not a `.lua` file"));
    }
    Ok(p)
}

/// Where a rule read from `rule_file` looks for scripts: its folder, then the folder above
/// (`rules/x.toml` looks in `rules`, then `.`; `x.toml` in `.`, then `..`).
fn search_folders(rule_file: &Path) -> [PathBuf; 2] {
    let dir = match rule_file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let above = match (dir.file_name(), dir.parent()) {
        (Some(_), Some(p)) if !p.as_os_str().is_empty() => p.to_path_buf(),
        (Some(_), _) => PathBuf::from("."),
        (None, _) => dir.join(".."),
    };
    [dir.to_path_buf(), above]
}

/// Finds the script `path` for a rule read from `rule_file` (`None` for a built-in rule).
pub fn find(rule_file: Option<&Path>, path: &str) -> Result<Found, ScriptError> {
    let rel = check_shape(path)?;
    let mut tried = Vec::new();
    if let Some(found) = rule_file.and_then(|f| in_embedded_plugin(f, path)) {
        return Ok(found);
    }
    if let Some(file) = rule_file {
        for base in &search_folders(file) {
            let candidate = base.join(rel);
            if fs::symlink_metadata(&candidate).is_ok() {
                let root = fs::canonicalize(base).unwrap_or_else(|_| base.clone());
                return match read_text(&candidate, Some(&root), &SCRIPT_FILES) {
                    Ok(text) => Ok(Found {
                        path: candidate,
                        text,
                        on_disk: true,
                    }),
                    Err(error) => Err(ScriptError::Unreadable {
                        path: candidate,
                        error,
                    }),
                };
            }
            tried.push(candidate.display().to_string());
        }
    }
    if let Some((p, text)) = BUILTIN_SCRIPTS.iter().find(|(p, _)| *p == path) {
        return Ok(Found {
            path: PathBuf::from(p),
            text: text.to_string(),
            on_disk: false,
        });
    }
    let looked = if tried.is_empty() {
        "among the built-in scripts".to_string()
    } else {
        format!("at {} and among the built-in scripts", tried.join(", "))
    };
    Err(ScriptError::NotFound {
        path: path.to_string(),
        looked,
    })
}

/// The script `path` of a rule of a plugin that ships with Warden (its file named
/// `builtin:NAME/rules/x.toml`), looked for as on disk: beside the rule, then in the folder
/// above.
fn in_embedded_plugin(rule_file: &Path, path: &str) -> Option<Found> {
    let file = rule_file
        .to_str()?
        .strip_prefix(crate::builtin::BUILTIN_PREFIX)?;
    let (name, inside) = file.split_once('/')?;
    let plugin = crate::builtin::BUILTIN_PLUGINS
        .iter()
        .find(|p| p.name == name)?;
    let beside = match inside.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/{path}"),
        None => path.to_string(),
    };
    [beside.as_str(), path].iter().find_map(|want| {
        plugin
            .scripts
            .iter()
            .find(|(p, _)| p == want)
            .map(|(p, text)| Found {
                path: PathBuf::from(plugin.file_name(p)),
                text: text.to_string(),
                on_disk: false,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused_with_a_reason() {
        for (path, why) in [
            ("/etc/passwd.lua", "absolute"),
            ("../../etc/x.lua", "`..`"),
            ("scripts/../../x.lua", "`..`"),
            ("scripts\\x.lua", "`/`"),
            ("scripts/x.txt", "not a `.lua`"),
            ("", "empty"),
        ] {
            let err = find(Some(Path::new("rules/r.toml")), path)
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains(why), "{path}: {err}");
        }
    }

    #[test]
    fn relative_rule_folders_look_in_the_folder_above_too() {
        let folders = |f: &str| search_folders(Path::new(f)).map(|p| p.display().to_string());
        assert_eq!(folders("rules/r.toml"), ["rules", "."]);
        assert_eq!(folders("./rules/r.toml"), ["./rules", "."]);
        assert_eq!(folders("r.toml"), [".", "./.."]);
        assert_eq!(folders("a/b/r.toml"), ["a/b", "a"]);
        assert_eq!(folders("/srv/rules/r.toml"), ["/srv/rules", "/srv"]);
    }

    #[test]
    fn scripts_are_found_beside_the_rules_then_above_then_built_in() {
        let tmp = tempfile::tempdir().unwrap();
        let rules = tmp.path().join("rules");
        fs::create_dir_all(rules.join("scripts")).unwrap();
        fs::create_dir_all(tmp.path().join("scripts")).unwrap();
        fs::write(rules.join("scripts/near.lua"), "return 1").unwrap();
        fs::write(tmp.path().join("scripts/above.lua"), "return 2").unwrap();
        let rule = rules.join("r.toml");
        assert_eq!(
            find(Some(&rule), "scripts/near.lua").unwrap().text,
            "return 1"
        );
        assert_eq!(
            find(Some(&rule), "scripts/above.lua").unwrap().text,
            "return 2"
        );
        assert!(
            find(Some(&rule), "scripts/research-workflow.lua")
                .unwrap()
                .text
                .contains("wait_turns")
        );
        let err = find(Some(&rule), "scripts/none.lua")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("no script") && err.contains("looked at") && err.contains("built-in"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_out_of_the_folder_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let rules = tmp.path().join("rules");
        fs::create_dir_all(&rules).unwrap();
        fs::write(outside.path().join("evil.lua"), "return true").unwrap();
        std::os::unix::fs::symlink(outside.path().join("evil.lua"), rules.join("evil.lua"))
            .unwrap();
        std::os::unix::fs::symlink(outside.path(), rules.join("linked")).unwrap();
        let rule = rules.join("r.toml");
        assert!(
            find(Some(&rule), "evil.lua")
                .err()
                .unwrap()
                .to_string()
                .contains("outside")
        );
        assert!(
            find(Some(&rule), "linked/evil.lua")
                .err()
                .unwrap()
                .to_string()
                .contains("outside")
        );
    }
}
