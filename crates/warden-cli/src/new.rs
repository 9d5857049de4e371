//! `warden new rule` and `warden new plugin`: files to start from, which `warden check` and
//! `warden test` pass as written. Nothing existing is overwritten.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use warden_core::{MANIFEST_FILE, SourceFile};
use warden_load::{CONFIG_FILE, is_kebab, parse_manifest, to_kebab};

use crate::folders::plugin_of;

#[derive(Subcommand, Debug)]
pub(crate) enum New {
    /// A rule file, `NAME.toml`, with its tests beside it in `NAME.test.toml`.
    Rule {
        /// The rule's id, in kebab-case (`empty-search`).
        name: String,
        /// The rule folder to write in (created if missing); in a plugin's folder, the rule
        /// goes in its `rules/`.
        #[arg(long = "in", value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
    /// A plugin folder, `NAME/`: its manifest with a setting, a rule that reads the setting,
    /// and the rule's tests.
    Plugin {
        /// The plugin's id, in kebab-case (`search-budget`).
        name: String,
        /// The folder of plugins to write it in (created if missing).
        #[arg(long = "in", value_name = "DIR", default_value = ".")]
        dir: PathBuf,
    },
}

pub(crate) fn run(what: &New) -> Result<ExitCode, String> {
    let (files, next) = match what {
        New::Rule { name, dir } => rule_files(name, dir)?,
        New::Plugin { name, dir } => plugin_files(name, dir)?,
    };
    // Refuse before writing anything, so that a refusal leaves nothing half made.
    for (path, _) in &files {
        if path.exists() || path.is_symlink() {
            return Err(format!(
                "{} already exists; `warden new` never overwrites a file: choose another name, or move the file away",
                path.display()
            ));
        }
    }
    for (path, text) in &files {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        // `create_new`: a file that appeared since the check above is not overwritten either.
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("created {}", path.display());
    }
    println!("{next}");
    Ok(ExitCode::SUCCESS)
}

/// `name`, if it is a kebab-case id.
fn checked_id<'a>(name: &'a str, what: &str) -> Result<&'a str, String> {
    if is_kebab(name) {
        Ok(name)
    } else {
        Err(format!(
            "`{name}` is not a kebab-case {what} id: use lowercase letters, digits and single hyphens, such as `{}`",
            to_kebab(name)
        ))
    }
}

/// `empty-search` as a title: `Empty search`.
fn title(id: &str) -> String {
    let words = id.replace('-', " ");
    let mut chars = words.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A path for a command line: as given, `.` shown as the current folder.
fn shown(dir: &Path) -> String {
    dir.display().to_string()
}

type Files = (Vec<(PathBuf, String)>, String);

fn rule_files(name: &str, dir: &Path) -> Result<Files, String> {
    let id = checked_id(name, "rule")?;
    if dir.join(CONFIG_FILE).is_file() {
        return Err(format!(
            "{} holds {CONFIG_FILE}, which is not a rule: give the rule a folder of its own, such as `--in {}`",
            shown(dir),
            dir.join("rules").display()
        ));
    }
    // In a plugin, the rule is addressed as `plugin/id`, and lives in its `rules/`.
    let (dir, key, checked) = match plugin_of(dir) {
        Some(plugin) => {
            let id_of_plugin = plugin_id(&plugin)?;
            let dir = if dir.join(MANIFEST_FILE).is_file() {
                dir.join("rules")
            } else {
                dir.to_path_buf()
            };
            (dir, format!("{id_of_plugin}/{id}"), plugin)
        }
        None => (dir.to_path_buf(), id.to_string(), dir.to_path_buf()),
    };
    let files = vec![
        (dir.join(format!("{id}.toml")), rule_text(id)),
        (dir.join(format!("{id}.test.toml")), rule_tests(id, &key)),
    ];
    let next = format!(
        "next: edit the rule, then `warden check {d}` and `warden test {d}`",
        d = shown(&checked)
    );
    Ok((files, next))
}

/// The id in the manifest of the plugin folder `plugin`.
fn plugin_id(plugin: &Path) -> Result<String, String> {
    let path = plugin.join(MANIFEST_FILE);
    let text = warden_input::read_text(&path, None, &warden_input::FileKind::RULES)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match parse_manifest(SourceFile::new(&path, text)) {
        (Some(m), _) => Ok(m.id),
        (None, _) => Err(format!(
            "{} has errors (`warden check {}` shows them): fix it first, so that the new rule can be named after its plugin",
            path.display(),
            plugin.display()
        )),
    }
}

fn plugin_files(name: &str, dir: &Path) -> Result<Files, String> {
    let id = checked_id(name, "plugin")?;
    if plugin_of(dir).is_some() {
        return Err(format!(
            "{} is inside a plugin: a plugin goes in a folder of plugins, such as `--in plugins`",
            shown(dir)
        ));
    }
    let root = dir.join(id);
    let files = vec![
        (root.join(MANIFEST_FILE), manifest_text(id)),
        (root.join("rules/large-results.toml"), plugin_rule_text(id)),
        (root.join(format!("rules/{id}.test.toml")), plugin_tests(id)),
    ];
    let next = format!(
        "next: edit the manifest and the rule, then `warden check {r}` and `warden test {r}`",
        r = root.display()
    );
    Ok((files, next))
}

fn rule_text(id: &str) -> String {
    format!(
        r#"# A Warden rule: when it runs (trigger), what it checks (condition), what it does
# (action). `warden check` checks it; its tests are in {id}.test.toml beside it, and
# `warden test` runs them. Every key is in the book: Reference > Rule files.

[rule]
id = "{id}"
name = "{title}"
description = "Tells the agent when a tool returned nothing"
version = "0.1.0"
# The hook that runs it: on_query_start, on_turn_start, on_turn_end, on_tool_call,
# on_tool_complete, on_tool_failure or on_session_end.
trigger = "on_tool_complete"
# Among the rules of a hook, higher runs first (1 to 1000).
priority = 100

[condition]
# `result` is what the tool returned; get() reads 0 when it has no `count`.
expression = "get(result, 'count', 0) == 0"

[action]
type = "notify_self"
message = "{{{{ tool.name }}}} returned nothing. Try other terms before calling it again."
category = "hint"
# `immediate`: handed back with this very call (or `turn_start`: at the next turn).
deliver_at = "immediate"
"#,
        title = title(id)
    )
}

fn rule_tests(id: &str, key: &str) -> String {
    format!(
        r#"# The tests of the rule {key}: `warden test` runs them. Each [[test]] is a short session
# (trace lines written as TOML tables); `fires`, `not_fires` and `messages` check its last
# event. Every key is in the book: Plugins > Testing rules.

[[test]]
name = "{id}: a tool that returns nothing"
events = [
  {{ hook = "on_tool_complete", tool = {{ name = "web_search" }}, result = {{ count = 0 }} }},
]
fires = ["{key}"]
messages = ["web_search returned nothing. Try other terms before calling it again."]

[[test]]
name = "{id}: quiet when the tool returns results"
events = [
  {{ hook = "on_tool_complete", tool = {{ name = "web_search" }}, result = {{ count = 3 }} }},
]
not_fires = ["{key}"]
"#
    )
}

fn manifest_text(id: &str) -> String {
    format!(
        r#"# The Warden plugin {id}: what it is, what the host must provide, and the settings its
# rules read (each user may change them, within their bounds). Its rules are the files
# rules/*.toml. Every key is in the book: Reference > Plugin manifests.

[plugin]
id = "{id}"
name = "{title}"
version = "0.1.0"
description = "Asks the agent to summarize a large tool result before going on"

[capabilities]
# What the host must provide (tool names, usually) for these rules to make sense: a host
# without one of them skips the plugin, with a warning. For example ["web_search"].
requires = []

[settings.max_results]
type = "integer"
default = 10
min = 1
max = 1000
description = "Results above which the agent is asked to summarize them"
"#,
        title = title(id)
    )
}

fn plugin_rule_text(id: &str) -> String {
    format!(
        r#"# A rule of the plugin {id}, addressed as {id}/large-results. It reads the plugin's
# setting max_results, declared in its manifest.

[rule]
id = "large-results"
name = "Large results"
description = "Asks the agent to summarize a tool result of more than max_results results"
version = "0.1.0"
trigger = "on_tool_complete"

[condition]
expression = "get(result, 'count', 0) > settings.max_results"

[action]
type = "notify_self"
message = "{{{{ tool.name }}}} returned {{{{ result.count }}}} results, more than {{{{ settings.max_results }}}}. Summarize them before going on."
category = "hint"
deliver_at = "immediate"
"#
    )
}

fn plugin_tests(id: &str) -> String {
    format!(
        r#"# The tests of the plugin {id}: `warden test` runs them. Each [[test]] is a short session
# of its own; the expectations check its last event. Every key is in the book: Plugins >
# Testing rules.

[[test]]
name = "quiet at the limit"
events = [
  {{ hook = "on_tool_complete", tool = {{ name = "web_search" }}, result = {{ count = 10 }} }},
]
not_fires = ["{id}/large-results"]

[[test]]
name = "asks above the limit"
events = [
  {{ hook = "on_tool_complete", tool = {{ name = "web_search" }}, result = {{ count = 11 }} }},
]
fires = ["{id}/large-results"]
messages = ["web_search returned 11 results, more than 10. Summarize them before going on."]

[[test]]
name = "a user's own limit"
settings = {{ "{id}.max_results" = 3 }}
events = [
  {{ hook = "on_tool_complete", tool = {{ name = "web_search" }}, result = {{ count = 4 }} }},
]
fires = ["{id}/large-results"]
"#
    )
}
