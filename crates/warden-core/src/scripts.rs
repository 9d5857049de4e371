//! Finding the Lua script a rule names (`[condition] script = "scripts/x.lua"`), safely.
//!
//! A script path is relative, uses `/`, ends in `.lua` and has no `..`. It is looked up next to
//! the rule file, then in the folder above it (so `rules/a.toml` finds `scripts/a.lua` beside
//! `rules/`), then among Warden's built-in scripts. A file that is a link leading out of the
//! folder it was found in is refused, as is one larger than 1 MiB or not UTF-8.

use std::fs;
use std::path::{Component, Path, PathBuf};

/// Warden's built-in scripts, embedded from the repository's `scripts/` folder.
pub const BUILTIN_SCRIPTS: &[(&str, &str)] = &[(
    "scripts/research-workflow.lua",
    include_str!("../../../scripts/research-workflow.lua"),
)];

/// Largest script file Warden reads.
pub const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// A script found and read.
pub(crate) struct Found {
    /// Where it was found (shown in messages).
    pub path: PathBuf,
    pub text: String,
    /// Whether it was read from disk (not one of the built-in scripts).
    pub on_disk: bool,
}

/// Checks the shape of a script path; the error says what is wrong with it.
fn check_shape(path: &str) -> Result<&Path, String> {
    if path.trim().is_empty() {
        return Err("the script path is empty".into());
    }
    if path.contains('\\') {
        return Err("write script paths with `/`, not `\\`".into());
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('/') {
        return Err(format!(
            "`{path}` is absolute; script paths are relative to the rule folder"
        ));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "`{path}` leaves the rule folder with `..`; keep scripts beside the rules"
        ));
    }
    if p.extension().is_none_or(|e| e != "lua") {
        return Err(format!("`{path}` is not a `.lua` file"));
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
pub(crate) fn find(rule_file: Option<&Path>, path: &str) -> Result<Found, String> {
    let rel = check_shape(path)?;
    let mut tried = Vec::new();
    if let Some(file) = rule_file {
        for base in &search_folders(file) {
            let candidate = base.join(rel);
            if fs::symlink_metadata(&candidate).is_ok() {
                return read(&candidate, base).map(|text| Found {
                    path: candidate,
                    text,
                    on_disk: true,
                });
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
    Err(format!("no script `{path}`: looked {looked}"))
}

fn read(path: &Path, base: &Path) -> Result<String, String> {
    let real = fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let root = fs::canonicalize(base).unwrap_or_else(|_| base.to_path_buf());
    if !real.starts_with(&root) {
        return Err(format!(
            "{} leads to {}, outside {}; scripts must live beside the rules",
            path.display(),
            real.display(),
            root.display()
        ));
    }
    let meta = fs::metadata(&real).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "{} is {} bytes; scripts are limited to {MAX_SCRIPT_BYTES}",
            path.display(),
            meta.len()
        ));
    }
    let bytes = fs::read(&real).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_scripts_are_exactly_the_scripts_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        let mut on_disk: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| format!("scripts/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".lua"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = BUILTIN_SCRIPTS.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            on_disk, embedded,
            "add new built-in scripts to BUILTIN_SCRIPTS"
        );
        for (p, text) in BUILTIN_SCRIPTS {
            assert_eq!(
                fs::read_to_string(dir.join(p.trim_start_matches("scripts/"))).unwrap(),
                *text
            );
            warden_lua::check_syntax(p, text).unwrap();
        }
    }

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
            let err = find(Some(Path::new("rules/r.toml")), path).err().unwrap();
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
        let err = find(Some(&rule), "scripts/none.lua").err().unwrap();
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
                .contains("outside")
        );
        assert!(
            find(Some(&rule), "linked/evil.lua")
                .err()
                .unwrap()
                .contains("outside")
        );
    }
}
