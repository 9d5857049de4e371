//! Finding and reading rule files: Warden's built-in rules (compiled into the binary) and
//! rule folders on disk. Each file is read on its own; a broken file is reported and skipped,
//! and the others load.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::rule::{RuleDef, parse_rule_file};

/// The plugin id of Warden's built-in rules.
pub const BUILTIN_PLUGIN: &str = "builtin";
/// The plugin id of rules loaded from a plain rule folder (not a plugin).
pub const LOCAL_PLUGIN: &str = "local";
/// Largest rule file Warden reads.
pub const MAX_RULE_FILE_BYTES: u64 = 1 << 20;

/// The built-in rules, embedded from the repository's `rules/` folder.
pub const BUILTIN_RULES: &[(&str, &str)] = &[
    (
        "rules/token-budget-warning.toml",
        include_str!("../../../rules/token-budget-warning.toml"),
    ),
    (
        "rules/iteration-budget-warning.toml",
        include_str!("../../../rules/iteration-budget-warning.toml"),
    ),
    (
        "rules/large-result-summary.toml",
        include_str!("../../../rules/large-result-summary.toml"),
    ),
    (
        "rules/repeated-failure-warning.toml",
        include_str!("../../../rules/repeated-failure-warning.toml"),
    ),
];

/// Where rules come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// Warden's built-in rules.
    Builtin,
    /// Every `*.toml` file directly inside a folder (files ending `.test.toml` are rule tests,
    /// not rules).
    Dir(PathBuf),
}

/// Reads every rule of `sources`. Broken files are reported and skipped; ids must be unique
/// within a plugin (the later duplicate is reported and skipped).
pub fn load(sources: &[RuleSource]) -> (Vec<RuleDef>, Vec<Diagnostic>) {
    let mut rules: Vec<RuleDef> = Vec::new();
    let mut diagnostics = Vec::new();
    let mut seen: HashMap<Arc<str>, usize> = HashMap::new();
    for source in sources {
        let (plugin, files) = match source {
            RuleSource::Builtin => (
                Arc::<str>::from(BUILTIN_PLUGIN),
                BUILTIN_RULES
                    .iter()
                    .map(|(p, t)| SourceFile::new(*p, *t))
                    .collect::<Vec<_>>(),
            ),
            RuleSource::Dir(dir) => (
                Arc::<str>::from(LOCAL_PLUGIN),
                read_dir(dir, &mut diagnostics),
            ),
        };
        for file in files {
            let parsed = parse_rule_file(file, &plugin);
            diagnostics.extend(parsed.diagnostics);
            let Some(rule) = parsed.rule else { continue };
            if !rule.valid {
                // Kept so that compiling reports its condition's and templates' errors too.
                rules.push(rule);
                continue;
            }
            // Built-in and local rules share one namespace (both are shown by bare id).
            let key = crate::program::rule_key(&rule.plugin, &rule.id);
            if let Some(&first) = seen.get(&key) {
                let first = &rules[first];
                let (line, _) = first.source.line_col(first.span.start);
                diagnostics.push(
                    Diagnostic::error(&rule.source, Some(rule.span.clone()), Some("rule.id"), format!("duplicate rule id `{}`", rule.id))
                        .with_help(format!(
                            "it is already defined in {}:{line}; rule ids must be unique (built-in and local rules share one namespace)",
                            first.source.path().display()
                        )),
                );
                continue;
            }
            seen.insert(key, rules.len());
            rules.push(rule);
        }
    }
    diagnostics.sort_by(|a, b| (a.path(), a.location()).cmp(&(b.path(), b.location())));
    (rules, diagnostics)
}

/// The rule files of a folder, sorted by name, each read as text. Files that cannot be read,
/// are too large, are not UTF-8, or are links leading out of the folder are reported.
fn read_dir(dir: &Path, diagnostics: &mut Vec<Diagnostic>) -> Vec<Arc<SourceFile>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            diagnostics.push(
                Diagnostic::io(dir, format!("cannot read the rule folder: {e}"))
                    .with_help("check that the folder exists and can be read"),
            );
            return Vec::new();
        }
    };
    let root = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.ends_with(".toml") && !name.ends_with(".test.toml") && !name.starts_with('.')
        })
        .collect();
    paths.sort();
    let mut files = Vec::new();
    for path in paths {
        match read_rule_file(&path, &root) {
            Ok(text) => files.push(SourceFile::new(path, text)),
            Err(message) => diagnostics.push(Diagnostic::io(&path, message)),
        }
    }
    files
}

fn read_rule_file(path: &Path, root: &Path) -> Result<String, String> {
    let meta = fs::symlink_metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if meta.file_type().is_symlink() {
        let real =
            fs::canonicalize(path).map_err(|e| format!("a link that cannot be followed: {e}"))?;
        if !real.starts_with(root) {
            return Err(format!(
                "a link to {}, outside the rule folder; rule files must live in the folder",
                real.display()
            ));
        }
    }
    let meta = fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_RULE_FILE_BYTES {
        return Err(format!(
            "the file is {} bytes; rule files are limited to {MAX_RULE_FILE_BYTES}",
            meta.len()
        ));
    }
    let bytes = fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_rules_are_exactly_the_rules_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rules");
        let mut on_disk: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| format!("rules/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".toml") && !n.ends_with(".test.toml"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = BUILTIN_RULES.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "add new built-in rule files to BUILTIN_RULES"
        );
        for (path, text) in BUILTIN_RULES {
            let on_disk = fs::read_to_string(dir.join(path.trim_start_matches("rules/"))).unwrap();
            assert_eq!(&on_disk, text);
        }
    }

    #[test]
    fn builtin_rules_load_cleanly() {
        assert!(load(&[RuleSource::Builtin]).0.iter().all(|r| r.valid));
        let (rules, diags) = load(&[RuleSource::Builtin]);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(rules.len(), 4);
    }

    #[test]
    fn broken_files_are_skipped_and_the_rest_load() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.toml"), "[rule]\nid = \"a\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"hi\"\n").unwrap();
        fs::write(tmp.path().join("b.toml"), "[rule\n").unwrap();
        fs::write(tmp.path().join("c.toml"), "[rule]\nid = \"a\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"hi\"\n").unwrap();
        fs::write(tmp.path().join("d.toml"), [0xff, 0xfe]).unwrap();
        fs::write(tmp.path().join("e.test.toml"), "not a rule").unwrap();
        fs::write(tmp.path().join("notes.md"), "not a rule").unwrap();
        let (rules, diags) = load(&[RuleSource::Dir(tmp.path().to_path_buf())]);
        assert_eq!(rules.iter().filter(|r| r.valid).count(), 1);
        let text: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        assert_eq!(text.len(), 3, "{text:#?}");
        assert!(text[0].contains("b.toml:") && text[0].contains("not valid TOML"));
        assert!(
            text[1].contains("c.toml:1:1") && text[1].contains("duplicate rule id `a`"),
            "{}",
            text[1]
        );
        assert!(text[1].contains("a.toml:1"), "{}", text[1]);
        assert!(text[2].contains("d.toml") && text[2].contains("UTF-8"));
    }

    #[cfg(unix)]
    #[test]
    fn links_out_of_the_folder_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.toml"), "password = \"hunter2\"").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.toml"),
            tmp.path().join("x.toml"),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("passwd.toml")).unwrap();
        let (rules, diags) = load(&[RuleSource::Dir(tmp.path().to_path_buf())]);
        assert!(rules.is_empty());
        assert_eq!(diags.len(), 2);
        for d in &diags {
            assert!(d.message().contains("outside the rule folder"), "{d}");
            assert!(!d.to_string().contains("hunter2") && !d.to_string().contains("root:"));
        }
    }

    #[test]
    fn a_missing_folder_is_reported() {
        let (_, diags) = load(&[RuleSource::Dir("/no/such/dir".into())]);
        assert!(diags[0].to_string().contains("cannot read the rule folder"));
    }
}
