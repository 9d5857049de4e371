//! Finding and reading rule files: Warden's built-in rules (compiled into the binary), rule
//! folders and plugin folders on disk. Each file is read on its own; a broken file is reported
//! and skipped, and the others load. A plugin whose manifest is broken, or that requires a
//! capability the host does not have, is skipped with the reason.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_input::{
    Diagnostic, FileKind, ReadError, SourceFile, read_entry, read_text, sort_and_cap,
};

use crate::builtin::{BUILTIN_MANIFEST, BUILTIN_PREFIX, BUILTIN_RULES};
use crate::ids::{BUILTIN_PLUGIN, LOCAL_PLUGIN};
use crate::manifest::{
    MANIFEST_FILE, Manifest, glob_match, parse_builtin_manifest, parse_manifest,
};
use crate::modes::{BUILTIN_MODES, ModeSource};
use crate::rule::{Parsed, RuleDef, parse_rule_file};

/// Where rules come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// Warden's built-in rules.
    Builtin,
    /// Every `*.toml` file directly inside a folder (files ending `.test.toml` are rule tests,
    /// not rules). A folder with a `manifest.toml` is a plugin, and is read as one. A path to
    /// a file is that one rule (or behavior) file, read as a rule folder's file is.
    Dir(PathBuf),
    /// A folder of plugins: each folder in it with a `manifest.toml` is a plugin.
    Plugins(PathBuf),
    /// A plugin that ships with Warden, by name (`builtin:guardrails` names `guardrails`).
    BuiltinPlugin(String),
}

/// Which capabilities (tools, usually) the host has, for plugins that require some.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Capabilities {
    /// Exactly these; a plugin that requires another is skipped.
    Only(BTreeSet<String>),
    /// Assume any (for checking plugins without a host, as `warden check` does).
    #[default]
    Any,
}

impl Capabilities {
    /// The host has exactly `names`.
    pub fn only<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Capabilities::Only(names.into_iter().map(Into::into).collect())
    }

    /// What of `required` is missing.
    fn missing<'a>(&self, required: &'a [String]) -> Vec<&'a str> {
        match self {
            Capabilities::Any => Vec::new(),
            Capabilities::Only(have) => required
                .iter()
                .filter(|r| !have.contains(*r))
                .map(String::as_str)
                .collect(),
        }
    }
}

/// A plugin found while loading.
#[derive(Debug, Clone)]
pub struct PluginDef {
    /// Its manifest.
    pub manifest: Manifest,
    /// Its folder (none for the built-in rules).
    pub dir: Option<PathBuf>,
    /// Why it was not loaded, if it was not.
    pub skipped: Option<String>,
}

/// Everything read from the sources.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The rules, in load order (those with errors too, marked invalid).
    pub rules: Vec<RuleDef>,
    /// The plugins, loaded or skipped.
    pub plugins: Vec<PluginDef>,
    /// What is wrong, and what was skipped.
    pub diagnostics: Vec<Diagnostic>,
    /// The folders rules, manifests and plugins were read from (for watching).
    pub folders: Vec<PathBuf>,
    /// The modes file, read (when the program has modes).
    pub modes: Option<Arc<SourceFile>>,
}

/// Reads the modes file of `source` into `out` (a problem reading it is a diagnostic).
pub fn load_modes(source: &ModeSource, out: &mut Loaded) {
    match source {
        ModeSource::Builtin(name) => match BUILTIN_MODES.iter().find(|(n, _)| n == name) {
            Some((n, text)) => {
                out.modes = Some(SourceFile::new(format!("modes/{n}.toml"), *text));
            }
            None => out.diagnostics.push(
                Diagnostic::io(Path::new(name), format!("no built-in modes named `{name}`"))
                    .with_help(format!(
                        "the built-in modes are {}",
                        ticked(BUILTIN_MODES.iter().map(|(n, _)| n))
                    )),
            ),
        },
        ModeSource::File(path) => {
            let dir = path.parent().map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            });
            out.folders.extend(dir.map(Path::to_path_buf));
            let root = dir
                .and_then(|d| fs::canonicalize(d).ok())
                .unwrap_or_default();
            match read_rule_file(path, &root) {
                Ok(text) => out.modes = Some(SourceFile::new(path, text)),
                Err(e) => out.diagnostics.push(Diagnostic::io(path, e.to_string())),
            }
        }
    }
}

/// Reads every rule and plugin of `sources`. Broken files are reported and skipped; rule ids
/// must be unique within a plugin, and plugin ids unique (a later duplicate is reported and
/// skipped).
pub fn load(sources: &[RuleSource], capabilities: &Capabilities) -> Loaded {
    let mut out = Loaded::default();
    let mut seen: HashMap<Arc<str>, usize> = HashMap::new();
    let mut plugin_dirs: HashMap<String, String> = HashMap::new();
    for source in sources {
        let units: Vec<(Arc<str>, Vec<Arc<SourceFile>>)> = match source {
            RuleSource::Builtin => {
                let file = SourceFile::new(BUILTIN_MANIFEST.0, BUILTIN_MANIFEST.1);
                let (manifest, diagnostics) = parse_builtin_manifest(file);
                out.diagnostics.extend(diagnostics);
                let files = BUILTIN_RULES
                    .iter()
                    .map(|(p, t)| SourceFile::new(*p, *t))
                    .collect();
                match manifest {
                    Some(m) => {
                        plugin_dirs.insert(m.id.clone(), "Warden's built-in rules".into());
                        out.plugins.push(PluginDef {
                            manifest: m,
                            dir: None,
                            skipped: None,
                        });
                        vec![(Arc::from(BUILTIN_PLUGIN), files)]
                    }
                    None => Vec::new(),
                }
            }
            RuleSource::Dir(dir) => {
                out.folders.push(dir.clone());
                let named_file = !dir.exists() && dir.extension().is_some_and(|e| e == "toml");
                if dir.is_file() || named_file {
                    vec![(Arc::from(LOCAL_PLUGIN), read_one(dir, &mut out.diagnostics))]
                } else if dir.join(MANIFEST_FILE).exists() {
                    read_plugin(dir, capabilities, &mut plugin_dirs, &mut out)
                        .into_iter()
                        .collect()
                } else {
                    vec![(Arc::from(LOCAL_PLUGIN), read_dir(dir, &mut out.diagnostics))]
                }
            }
            RuleSource::Plugins(dir) => {
                out.folders.push(dir.clone());
                plugin_folders(dir, &mut out.diagnostics)
                    .iter()
                    .filter_map(|d| read_plugin(d, capabilities, &mut plugin_dirs, &mut out))
                    .collect()
            }
            RuleSource::BuiltinPlugin(name) => {
                match crate::builtin::BUILTIN_PLUGINS
                    .iter()
                    .find(|p| p.name == name)
                {
                    Some(plugin) => read_embedded(plugin, capabilities, &mut plugin_dirs, &mut out)
                        .into_iter()
                        .collect(),
                    None => {
                        let file = SourceFile::new(format!("{BUILTIN_PREFIX}{name}"), "");
                        let why =
                            crate::builtin::builtin_plugin(&format!("{BUILTIN_PREFIX}{name}"))
                                .and_then(Result::err)
                                .unwrap_or_default();
                        out.diagnostics.push(Diagnostic::io(file.path(), why));
                        Vec::new()
                    }
                }
            }
        };
        for (plugin, files) in units {
            // `[plugin] shadow = true` puts each of its rules in shadow (one that is on, and
            // not a core rule).
            let shadow = out
                .plugins
                .iter()
                .any(|p| p.manifest.shadow && *p.manifest.id == *plugin);
            for file in files {
                let mut parsed = parse_rule_file(file, &plugin);
                if let Some(rule) = parsed.rule.as_mut() {
                    rule.shadow |= shadow && rule.enabled && !rule.core;
                }
                add_rule(&mut out, &mut seen, parsed);
            }
        }
    }
    sort_and_cap(&mut out.diagnostics);
    out
}

fn add_rule(out: &mut Loaded, seen: &mut HashMap<Arc<str>, usize>, parsed: Parsed) {
    out.diagnostics.extend(parsed.diagnostics);
    let Some(rule) = parsed.rule else { return };
    if !rule.valid {
        // Kept so that compiling reports its condition's and templates' errors too.
        out.rules.push(rule);
        return;
    }
    // Built-in and local rules share one namespace (both are shown by bare id).
    let key = rule.key();
    if let Some(&first) = seen.get(&key) {
        let first = &out.rules[first];
        let (line, _) = first.source.line_col(first.span.start);
        let scope = if key.contains('/') {
            "rule ids must be unique within a plugin"
        } else {
            "rule ids must be unique (built-in and local rules share one namespace)"
        };
        out.diagnostics.push(
            Diagnostic::error(
                &rule.source,
                Some(rule.span.clone()),
                Some("rule.id"),
                format!("duplicate rule id `{}`", rule.id),
            )
            .with_help(format!(
                "it is already defined in {}:{line}; {scope}",
                first.source.path().display()
            )),
        );
        return;
    }
    seen.insert(key, out.rules.len());
    out.rules.push(rule);
}

/// The plugin folders of a plugins folder, sorted by name. Loose files and folders without
/// a manifest are reported.
fn plugin_folders(dir: &Path, diagnostics: &mut Vec<Diagnostic>) -> Vec<PathBuf> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            diagnostics.push(
                Diagnostic::io(dir, format!("cannot read the plugins folder: {e}"))
                    .with_help("check that the folder exists and can be read"),
            );
            return Vec::new();
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    paths.sort();
    let mut plugins = Vec::new();
    for path in paths {
        if path.is_dir() {
            if path.join(MANIFEST_FILE).exists() {
                plugins.push(path);
            } else {
                diagnostics.push(
                    Diagnostic::io_warning(&path, "this folder has no manifest.toml, so it is not a plugin and was not loaded")
                        .with_help("add a manifest.toml with a [plugin] table, or move the folder out of the plugins folder"),
                );
            }
        } else if path.extension().is_some_and(|e| e == "toml") {
            diagnostics.push(
                Diagnostic::io_warning(&path, "a file directly in the plugins folder is not loaded")
                    .with_help("put rules in a plugin folder (with its manifest.toml), or load this folder as a rule folder"),
            );
        }
    }
    plugins
}

/// Reads one plugin folder: its manifest, then (unless it is skipped) its rule files.
fn read_plugin(
    dir: &Path,
    capabilities: &Capabilities,
    plugin_dirs: &mut HashMap<String, String>,
    out: &mut Loaded,
) -> Option<(Arc<str>, Vec<Arc<SourceFile>>)> {
    let root = match fs::canonicalize(dir) {
        Ok(r) => r,
        Err(e) => {
            out.diagnostics.push(Diagnostic::io(
                dir,
                format!("cannot read the plugin folder: {e}"),
            ));
            return None;
        }
    };
    let path = dir.join(MANIFEST_FILE);
    let text = match read_rule_file(&path, &root) {
        Ok(t) => t,
        Err(e) => {
            out.diagnostics.push(Diagnostic::io(&path, e.to_string()));
            return None;
        }
    };
    let (manifest, diagnostics) = parse_manifest(SourceFile::new(&path, text));
    out.diagnostics.extend(diagnostics);
    let manifest = manifest?;
    if let Some(first) = plugin_dirs.get(&manifest.id) {
        out.diagnostics.push(
            Diagnostic::error(
                &manifest.source,
                Some(manifest.span.clone()),
                Some("plugin.id"),
                format!("duplicate plugin id `{}`", manifest.id),
            )
            .with_help(format!(
                "{first} already uses it; plugin ids must be unique, so this plugin was not loaded"
            )),
        );
        return None;
    }
    plugin_dirs.insert(manifest.id.clone(), dir.display().to_string());
    let missing = capabilities.missing(&manifest.requires);
    if !missing.is_empty() {
        let reason = format!(
            "it requires {}, which this host does not provide",
            ticked(&missing)
        );
        let have = match capabilities {
            Capabilities::Only(h) if !h.is_empty() => format!("this host provides {}", ticked(h)),
            _ => "this host declares no capabilities".into(),
        };
        out.diagnostics.push(
            Diagnostic::warning(
                &manifest.source,
                Some(manifest.requires_span.clone()),
                Some("capabilities.requires"),
                format!("plugin `{}` is skipped: {reason}", manifest.id),
            )
            .with_help(format!(
                "{have}; declare the capability in the host (WardenBuilder::capabilities, or `--capability` on the command line) to load the plugin"
            )),
        );
        out.plugins.push(PluginDef {
            manifest,
            dir: Some(dir.to_path_buf()),
            skipped: Some(reason),
        });
        return None;
    }
    let files = include_files(dir, &root, &manifest, &mut out.diagnostics);
    let id = Arc::from(manifest.id.as_str());
    out.plugins.push(PluginDef {
        manifest,
        dir: Some(dir.to_path_buf()),
        skipped: None,
    });
    Some((id, files))
}

/// Reads a plugin that ships with Warden, as `read_plugin` reads a folder: its manifest, then
/// (unless it is skipped) the embedded rule files its `include` patterns match.
fn read_embedded(
    plugin: &crate::builtin::EmbeddedPlugin,
    capabilities: &Capabilities,
    plugin_dirs: &mut HashMap<String, String>,
    out: &mut Loaded,
) -> Option<(Arc<str>, Vec<Arc<SourceFile>>)> {
    let file = SourceFile::new(plugin.file_name(MANIFEST_FILE), plugin.manifest);
    let (manifest, diagnostics) = parse_manifest(file);
    out.diagnostics.extend(diagnostics);
    let manifest = manifest?;
    let shipped = format!(
        "the plugin {BUILTIN_PREFIX}{} that ships with Warden",
        plugin.name
    );
    if let Some(first) = plugin_dirs.get(&manifest.id) {
        out.diagnostics.push(
            Diagnostic::error(
                &manifest.source,
                Some(manifest.span.clone()),
                Some("plugin.id"),
                format!("duplicate plugin id `{}`", manifest.id),
            )
            .with_help(format!(
                "{first} already uses it, so {shipped} was not loaded: name only one of them"
            )),
        );
        return None;
    }
    plugin_dirs.insert(manifest.id.clone(), shipped);
    let missing = capabilities.missing(&manifest.requires);
    if !missing.is_empty() {
        out.plugins.push(PluginDef {
            skipped: Some(format!(
                "it requires {}, which this host does not provide",
                ticked(&missing)
            )),
            manifest,
            dir: None,
        });
        return None;
    }
    let mut files = Vec::new();
    for (path, text) in plugin.files {
        let included = manifest
            .include
            .iter()
            .any(|pattern| matches_path(pattern, path));
        if included && !path.ends_with(".test.toml") {
            files.push(SourceFile::new(plugin.file_name(path), *text));
        }
    }
    let id = Arc::from(manifest.id.as_str());
    out.plugins.push(PluginDef {
        manifest,
        dir: None,
        skipped: None,
    });
    Some((id, files))
}

/// Whether `pattern` (a manifest's `include`, segments with `*` and `?`) matches the relative
/// `path`.
fn matches_path(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let path: Vec<&str> = path.split('/').collect();
    pattern.len() == path.len()
        && pattern
            .iter()
            .zip(&path)
            .all(|(p, n)| !n.starts_with('.') && glob_match(p, n))
}

/// `names` in backticks, separated by commas.
fn ticked<T: std::fmt::Display>(names: impl IntoIterator<Item = T>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rule files a manifest includes, in pattern order, each read once.
fn include_files(
    dir: &Path,
    root: &Path,
    manifest: &Manifest,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Arc<SourceFile>> {
    let mut seen = BTreeSet::new();
    let mut files = Vec::new();
    for pattern in &manifest.include {
        let mut matched = expand(dir, pattern);
        matched.retain(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name != MANIFEST_FILE && !name.ends_with(".test.toml") && !name.starts_with('.')
        });
        if matched.is_empty() {
            diagnostics.push(
                Diagnostic::warning(
                    &manifest.source,
                    Some(manifest.include_span.clone()),
                    Some("rules.include"),
                    format!("`{pattern}` matches no rule file"),
                )
                .with_help(format!("the pattern is relative to {}", dir.display())),
            );
        }
        for path in matched {
            if !seen.insert(path.clone()) {
                continue;
            }
            match read_rule_file(&path, root) {
                Ok(text) => files.push(SourceFile::new(path, text)),
                Err(e) => diagnostics.push(Diagnostic::io(&path, e.to_string())),
            }
        }
    }
    files
}

/// The paths under `dir` that `pattern` matches (sorted), without following links out of
/// `dir` (those are refused when read).
fn expand(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut current = vec![dir.to_path_buf()];
    let segments: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let mut next = Vec::new();
        for base in &current {
            if segment.contains(['*', '?']) {
                let Ok(entries) = fs::read_dir(base) else {
                    continue;
                };
                let mut found: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| !n.starts_with('.') && glob_match(segment, n))
                    })
                    .map(|e| e.path())
                    .collect();
                found.sort();
                next.extend(found);
            } else {
                next.push(base.join(segment));
            }
        }
        current = next
            .into_iter()
            .filter(|p| {
                if last {
                    p.is_file() || p.is_symlink()
                } else {
                    p.is_dir()
                }
            })
            .collect();
    }
    current
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
    let mut paths: Vec<(PathBuf, Option<fs::FileType>)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_str().unwrap_or_default();
            name.ends_with(".toml") && !name.ends_with(".test.toml") && !name.starts_with('.')
        })
        .map(|e| (e.path(), e.file_type().ok()))
        .collect();
    // One folder: the order of the names' bytes, as a path sorts, without splitting each path
    // into components at every comparison.
    paths.sort_unstable_by(|a, b| a.0.as_os_str().cmp(b.0.as_os_str()));
    let mut files = Vec::new();
    for (path, listed) in paths {
        match read_entry(&path, listed, &root, &FileKind::RULES) {
            Ok(text) => files.push(SourceFile::new(path, text)),
            Err(e) => diagnostics.push(Diagnostic::io(&path, e.to_string())),
        }
    }
    files
}

/// One rule file named on its own, confined to its folder as a rule folder's files are.
fn read_one(path: &Path, diagnostics: &mut Vec<Diagnostic>) -> Vec<Arc<SourceFile>> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let root = fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
    match read_rule_file(path, &root) {
        Ok(text) => vec![SourceFile::new(path, text)],
        Err(e) => {
            diagnostics.push(Diagnostic::io(path, e.to_string()));
            Vec::new()
        }
    }
}

fn read_rule_file(path: &Path, root: &Path) -> Result<String, ReadError> {
    read_text(path, Some(root), &FileKind::RULES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules_load_cleanly() {
        assert!(
            load(&[RuleSource::Builtin], &Capabilities::Any)
                .rules
                .iter()
                .all(|r| r.valid)
        );
        let Loaded {
            rules,
            diagnostics: diags,
            ..
        } = load(&[RuleSource::Builtin], &Capabilities::Any);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(rules.len(), 5);
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
        let Loaded {
            rules,
            diagnostics: diags,
            ..
        } = load(
            &[RuleSource::Dir(tmp.path().to_path_buf())],
            &Capabilities::Any,
        );
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
        let Loaded {
            rules,
            diagnostics: diags,
            ..
        } = load(
            &[RuleSource::Dir(tmp.path().to_path_buf())],
            &Capabilities::Any,
        );
        assert!(rules.is_empty());
        assert_eq!(diags.len(), 2);
        for d in &diags {
            assert!(d.message().contains("outside the rule folder"), "{d}");
            assert!(!d.to_string().contains("hunter2") && !d.to_string().contains("root:"));
        }
    }

    #[test]
    fn a_single_rule_file_is_read_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let rule = "[rule]\nid = \"a\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = \"hi\"\n";
        fs::write(tmp.path().join("a.toml"), rule).unwrap();
        fs::write(tmp.path().join("b.toml"), "[rule\n").unwrap();
        let Loaded {
            rules, diagnostics, ..
        } = load(
            &[RuleSource::Dir(tmp.path().join("a.toml"))],
            &Capabilities::Any,
        );
        assert!(
            diagnostics.is_empty(),
            "b.toml is not read: {diagnostics:?}"
        );
        assert_eq!(rules.len(), 1);
        assert!(rules[0].valid && *rules[0].plugin == *LOCAL_PLUGIN);
    }

    #[test]
    fn a_missing_folder_is_reported() {
        let diags = load(
            &[RuleSource::Dir("/no/such/dir".into())],
            &Capabilities::Any,
        )
        .diagnostics;
        assert!(diags[0].to_string().contains("cannot read the rule folder"));
    }
}
