//! `warden.toml`: where an installation's rules, plugins and database are, in one file, so
//! the `warden` command and an embedding host agree on them.
//!
//! ```toml
//! builtin = true                       # Warden's built-in rules (default true)
//! rules = ["rules"]                    # rule folders
//! plugins = ["builtin:guardrails", "plugins"]  # plugins that ship with Warden, folders of plugins
//! capabilities = ["vault_search"]      # what the host provides, for plugins that require it
//! database = "warden.db"               # plugin state, user choices, the execution log
//!                                      # (or postgres://USER@HOST/DB for many nodes,
//!                                      # or [database] with `path`, `synchronous` and
//!                                      # `lock_timeout`)
//! user = "default"                     # who `warden rules ...` acts for
//! project = "default"
//!
//! [log]
//! sample = 0.1                         # record one tick in ten in the execution log
//!
//! [scripts]
//! timeout_seconds = 5
//! memory_mb = 32
//!
//! modes = "builtin:context-window"     # or a modes file of your own
//!
//! [knowledge]
//! sources = "knowledge/sources.toml"   # knowledge enrichment (see warden-knowledge)
//! root = "."                           # source paths are relative to this folder
//! at_query_start = true                # enrich every query (else only `enrich_context`)
//!
//! [sessions]
//! retention_days = 30                  # saved sessions untouched this long are deleted
//! journal_limit = 100000               # most values a waiting script's replay record holds
//!
//! [render]
//! template = "..."                     # how notifications are written into the agent's context
//!
//! [shell]
//! tools = ["run_shell"]                # tools whose input's `command` is a shell command
//!                                      # (added to Warden's: Bash, bash, shell, ...)
//! [shell.fields]
//! exec = "cmd"                         # a shell tool whose command is in another field
//!
//! [claude_code]
//! allow = false                        # pass Warden's `allow` on as Claude Code's `allow`
//! max_continues = 3                    # `continue` at Stop at most this many times in a row
//! on_failure = "open"                  # or "closed": a broken Warden denies tool calls
//! transcript_wait_ms = 250             # wait this long for the model call of a tool call
//! [claude_code.context_windows]        # tokens per model (added to the defaults)
//! "claude-sonnet-4-5" = 200000
//! ```
//!
//! Relative paths are relative to the file's folder.

use std::path::{Path, PathBuf};
use std::time::Duration;

use warden_input::{Diagnostic, Doc, FileKind, SourceFile, Table, read_text, to_json};

use crate::ids::DEFAULT_ID;
use crate::modes::ModeSource;

/// The name Warden looks for in the current folder.
pub const CONFIG_FILE: &str = "warden.toml";

/// The keys of `warden.toml`.
pub const CONFIG_FIELDS: &[&str] = &[
    "builtin",
    "rules",
    "plugins",
    "capabilities",
    "database",
    "user",
    "project",
    "log",
    "scripts",
    "knowledge",
    "modes",
    "sessions",
    "render",
    "shell",
    "claude_code",
];

/// The tools agents commonly run shell commands with, and the input field that holds the
/// command: Claude Code's `Bash`, Codex's `shell` and `exec_command`, Gemini CLI's
/// `run_shell_command`, and the names other agents and frameworks give theirs.
pub const DEFAULT_SHELL_TOOLS: &[(&str, &str)] = &[
    ("Bash", "command"),
    ("bash", "command"),
    ("shell", "command"),
    ("local_shell", "command"),
    ("exec_command", "cmd"),
    ("run_shell_command", "command"),
    ("terminal", "command"),
    ("run_terminal_cmd", "command"),
    ("execute_command", "command"),
];

/// The tools whose input holds a shell command, and in which field (`[shell]`): Warden's
/// defaults ([`DEFAULT_SHELL_TOOLS`]) and the installation's own.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellTools {
    /// Tool name and input field, the installation's after the defaults (a later entry for a
    /// name wins).
    pub tools: Vec<(String, String)>,
}

impl Default for ShellTools {
    fn default() -> Self {
        ShellTools {
            tools: DEFAULT_SHELL_TOOLS
                .iter()
                .map(|(n, f)| ((*n).to_string(), (*f).to_string()))
                .collect(),
        }
    }
}

impl ShellTools {
    /// Declares `tool` a shell whose command is in `field`.
    pub fn declare(&mut self, tool: impl Into<String>, field: impl Into<String>) {
        let tool = tool.into();
        self.tools.retain(|(n, _)| *n != tool);
        self.tools.push((tool, field.into()));
    }

    /// The input field that holds the command of `tool`, if it is a shell.
    pub fn field(&self, tool: &str) -> Option<&str> {
        self.tools
            .iter()
            .rev()
            .find(|(n, _)| n == tool)
            .map(|(_, f)| f.as_str())
    }
}

/// How `warden hook claude-code` answers Claude Code (`[claude_code]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClaudeCodeConfig {
    /// Pass Warden's `allow` on as Claude Code's `permissionDecision: "allow"`, which skips the
    /// user's own permission prompt (off by default: Warden's allow then says nothing).
    pub allow: bool,
    /// Send an agent that wants to stop back to work (`continue`) at most this many times in a
    /// row (Claude Code's `stop_hook_active`).
    pub max_continues: u32,
    /// When Warden itself fails (a broken configuration, a locked database, a bad payload):
    /// let the agent go on with a warning (`false`, the default), or deny its tool calls.
    pub fail_closed: bool,
    /// Context windows in tokens, by model id, added to Warden's table of current models.
    pub context_windows: Vec<(String, u64)>,
    /// How long a `PreToolUse` hook waits for Claude Code to write the model call that asked
    /// for the tool into its transcript (it flushes every 100 ms), before it goes on with what
    /// the transcript holds.
    pub transcript_wait: Duration,
}

impl Default for ClaudeCodeConfig {
    fn default() -> Self {
        ClaudeCodeConfig {
            allow: false,
            max_continues: 3,
            fail_closed: false,
            context_windows: Vec::new(),
            transcript_wait: Duration::from_millis(250),
        }
    }
}

/// An installation's settings, from `warden.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The file it was read from (none for the defaults).
    pub path: Option<PathBuf>,
    /// Load Warden's built-in rules.
    pub builtin: bool,
    /// Rule folders.
    pub rules: Vec<PathBuf>,
    /// Folders of plugins.
    pub plugins: Vec<PathBuf>,
    /// Capabilities the host provides.
    pub capabilities: Vec<String>,
    /// The database (in memory when absent): a SQLite file, or a PostgreSQL URL
    /// (`postgres://...`, kept as written).
    pub database: Option<PathBuf>,
    /// Make every commit durable on power loss (`[database] synchronous = "full"`), not only on
    /// a crash of the process (`"normal"`, the default).
    pub synchronous_full: bool,
    /// How long a tick waits for another process's lock on the database
    /// (`[database] lock_timeout`, seconds; the store's default, 2 s, when absent).
    pub lock_timeout: Option<Duration>,
    /// The user commands act for.
    pub user: String,
    /// The project commands act in.
    pub project: String,
    /// Share of ticks recorded in the execution log (0 = off, 1 = every tick).
    pub log_sample: f64,
    /// The time limit of one script run (the engine's default when absent).
    pub script_timeout: Option<Duration>,
    /// The memory limit of a session's Lua state, in bytes (the engine's default when absent).
    pub script_memory: Option<usize>,
    /// Knowledge enrichment: the sources file and the project root (off when absent).
    pub knowledge: Option<(PathBuf, PathBuf)>,
    /// Enrich every query at `on_query_start`.
    pub knowledge_at_query_start: bool,
    /// Where the modes are (none: every rule is always active).
    pub modes: Option<ModeSource>,
    /// Saved sessions untouched for this many days are deleted (never, when absent).
    pub retention_days: Option<f64>,
    /// Most values a waiting script's replay record holds (the engine's default when absent).
    pub journal_limit: Option<usize>,
    /// The template notifications are written into the agent's context with (Warden's own
    /// when absent).
    pub render_template: Option<String>,
    /// The tools whose input holds a shell command (`[shell]`).
    pub shell: ShellTools,
    /// How `warden hook claude-code` answers.
    pub claude_code: ClaudeCodeConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            path: None,
            builtin: true,
            rules: Vec::new(),
            plugins: Vec::new(),
            capabilities: Vec::new(),
            database: None,
            synchronous_full: false,
            lock_timeout: None,
            user: DEFAULT_ID.to_string(),
            project: DEFAULT_ID.to_string(),
            log_sample: 0.0,
            script_timeout: None,
            script_memory: None,
            knowledge: None,
            knowledge_at_query_start: true,
            modes: None,
            retention_days: None,
            journal_limit: None,
            render_template: None,
            shell: ShellTools::default(),
            claude_code: ClaudeCodeConfig::default(),
        }
    }
}

impl Config {
    /// Reads `path`. Every problem is a diagnostic naming the line and field.
    pub fn load(path: &Path) -> Result<Config, Vec<Diagnostic>> {
        let text = read_text(path, None, &FileKind::RULES).map_err(|e| {
            let e = e.to_string();
            // (The reader's own message may start with the same words.)
            let why = e.strip_prefix("cannot read: ").unwrap_or(&e);
            vec![Diagnostic::io(
                path,
                format!("cannot read the configuration: {why}"),
            )]
        })?;
        Self::parse(path, &text)
    }

    /// Reads a configuration from `text`, as if from the file `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Config, Vec<Diagnostic>> {
        let file = SourceFile::new(path, text);
        let mut doc = Doc::new(file.clone());
        let mut config = Config {
            path: Some(path.to_path_buf()),
            ..Config::default()
        };
        let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
        let resolve = |p: String| {
            let p = PathBuf::from(p);
            if p.is_absolute() { p } else { base.join(p) }
        };
        // A URL names a server, not a file beside this one.
        let database = |p: String| {
            if is_database_url(&p) {
                PathBuf::from(p)
            } else {
                resolve(p)
            }
        };
        if let Some(table) = doc.parse(file.text()) {
            let mut top = Table::new(table.get_ref(), "", 0..0);
            if let Some(at) = top.boolean(&mut doc, "builtin") {
                config.builtin = at.value;
            }
            if let Some(at) = top.strings(&mut doc, "rules") {
                config.rules = at.value.into_iter().map(resolve).collect();
            }
            if let Some(at) = top.strings(&mut doc, "plugins") {
                // A plugin that ships with Warden (`builtin:guardrails`) is not a path.
                config.plugins = at
                    .value
                    .into_iter()
                    .map(|p| {
                        if p.starts_with(crate::BUILTIN_PREFIX) {
                            PathBuf::from(p)
                        } else {
                            resolve(p)
                        }
                    })
                    .collect();
            }
            if let Some(at) = top.strings(&mut doc, "capabilities") {
                config.capabilities = at.value;
            }
            if let Some(at) = top.string(&mut doc, "modes") {
                config.modes = Some(match at.value.strip_prefix("builtin:") {
                    Some(name) => ModeSource::Builtin(name.to_string()),
                    None => ModeSource::File(resolve(at.value)),
                });
            }
            let database_table = top
                .raw("database")
                .is_some_and(|v| matches!(v.get_ref(), toml::de::DeValue::Table(_)));
            if !database_table {
                if let Some(at) = top.string(&mut doc, "database") {
                    config.database = Some(database(at.value));
                }
            } else if let Some(mut t) = top.table(&mut doc, "database") {
                if let Some(at) = t.string(&mut doc, "path") {
                    config.database = Some(database(at.value));
                }
                if let Some(at) = t.string(&mut doc, "synchronous") {
                    match at.value.as_str() {
                        "normal" => config.synchronous_full = false,
                        "full" => config.synchronous_full = true,
                        other => doc.error(
                            at.span,
                            "database.synchronous",
                            format!("`synchronous` is \"normal\" or \"full\", not {other:?}"),
                            Some("\"full\" makes every commit survive a power cut, at the cost of an fsync per commit; \"normal\" (the default) survives a crash of the process".into()),
                        ),
                    }
                }
                if let Some(raw) = t.raw("lock_timeout") {
                    match to_json(raw.get_ref()).as_f64() {
                        Some(x) if x > 0.0 && x <= 600.0 => {
                            config.lock_timeout = Some(Duration::from_secs_f64(x));
                        }
                        _ => doc.error(
                            raw.span(),
                            "database.lock_timeout",
                            "`lock_timeout` must be a number of seconds above 0 (at most 600)",
                            Some("to wait up to five seconds for another process, write `lock_timeout = 5`".into()),
                        ),
                    }
                }
                t.finish(&mut doc, &["path", "synchronous", "lock_timeout"]);
            }
            for (key, slot) in [("user", &mut config.user), ("project", &mut config.project)] {
                if let Some(at) = top.string(&mut doc, key) {
                    if at.value.trim().is_empty() {
                        doc.error(at.span, key, format!("`{key}` cannot be empty"), None);
                    } else {
                        *slot = at.value;
                    }
                }
            }
            if let Some(mut log) = top.table(&mut doc, "log") {
                if let Some(raw) = log.raw("sample") {
                    match to_json(raw.get_ref()).as_f64() {
                        Some(x) if (0.0..=1.0).contains(&x) => config.log_sample = x,
                        _ => doc.error(
                            raw.span(),
                            "log.sample",
                            "`sample` must be a number from 0 (off) to 1 (every tick)",
                            Some("for one tick in ten, write `sample = 0.1`".into()),
                        ),
                    }
                }
                log.finish(&mut doc, &["sample"]);
            }
            if let Some(mut scripts) = top.table(&mut doc, "scripts") {
                if let Some(raw) = scripts.raw("timeout_seconds") {
                    match to_json(raw.get_ref()).as_f64() {
                        Some(x) if x > 0.0 && x <= 3600.0 => {
                            config.script_timeout = Some(Duration::from_secs_f64(x));
                        }
                        _ => doc.error(
                            raw.span(),
                            "scripts.timeout_seconds",
                            "`timeout_seconds` must be a number of seconds above 0 and at most 3600",
                            None,
                        ),
                    }
                }
                if let Some(at) = scripts.integer(&mut doc, "memory_mb") {
                    match usize::try_from(at.value) {
                        Ok(mb) if (1..=4096).contains(&mb) => config.script_memory = Some(mb << 20),
                        _ => doc.error(
                            at.span,
                            "scripts.memory_mb",
                            "`memory_mb` must be from 1 to 4096",
                            None,
                        ),
                    }
                }
                scripts.finish(&mut doc, &["timeout_seconds", "memory_mb"]);
            }
            if let Some(mut k) = top.table(&mut doc, "knowledge") {
                let sources = k.string(&mut doc, "sources");
                let root = k.string(&mut doc, "root");
                if let Some(at) = k.boolean(&mut doc, "at_query_start") {
                    config.knowledge_at_query_start = at.value;
                }
                match sources {
                    Some(s) => {
                        let sources = resolve(s.value);
                        // The project root defaults to the sources file's folder.
                        let root = root
                            .map(|r| resolve(r.value))
                            .unwrap_or_else(|| match sources.parent() {
                                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                                _ => PathBuf::from("."),
                            });
                        config.knowledge = Some((sources, root));
                    }
                    None => doc.error(
                        k.span.clone(),
                        "knowledge.sources",
                        "[knowledge] needs `sources`, the sources file",
                        Some("add `sources = \"knowledge/sources.toml\"`".into()),
                    ),
                }
                k.finish(&mut doc, &["sources", "root", "at_query_start"]);
            }
            if let Some(mut t) = top.table(&mut doc, "sessions") {
                if let Some(raw) = t.raw("retention_days") {
                    match to_json(raw.get_ref()).as_f64() {
                        Some(x) if x > 0.0 && x <= 36_500.0 => config.retention_days = Some(x),
                        _ => doc.error(
                            raw.span(),
                            "sessions.retention_days",
                            "`retention_days` must be a number of days above 0 (at most 36500)",
                            Some(
                                "to keep sessions for a month, write `retention_days = 30`".into(),
                            ),
                        ),
                    }
                }
                if let Some(at) = t.count(&mut doc, "journal_limit") {
                    match usize::try_from(at.value) {
                        Ok(n) if n >= 1 => config.journal_limit = Some(n),
                        _ => doc.error(
                            at.span,
                            "sessions.journal_limit",
                            "`journal_limit` must be at least 1",
                            None,
                        ),
                    }
                }
                t.finish(&mut doc, &["retention_days", "journal_limit"]);
            }
            if let Some(mut t) = top.table(&mut doc, "render") {
                if let Some(at) = t.string(&mut doc, "template") {
                    config.render_template = Some(at.value);
                }
                t.finish(&mut doc, &["template"]);
            }
            if let Some(mut t) = top.table(&mut doc, "shell") {
                read_shell(&mut doc, &mut t, &mut config.shell);
                t.finish(&mut doc, &["tools", "fields"]);
            }
            if let Some(mut t) = top.table(&mut doc, "claude_code") {
                let cc = &mut config.claude_code;
                if let Some(at) = t.boolean(&mut doc, "allow") {
                    cc.allow = at.value;
                }
                if let Some(at) = t.count(&mut doc, "max_continues") {
                    cc.max_continues = u32::try_from(at.value).unwrap_or(u32::MAX);
                }
                if let Some(at) = t.string(&mut doc, "on_failure") {
                    match at.value.as_str() {
                        "open" => cc.fail_closed = false,
                        "closed" => cc.fail_closed = true,
                        other => doc.error(
                            at.span,
                            "claude_code.on_failure",
                            format!("`on_failure` is \"open\" or \"closed\", not {other:?}"),
                            Some("\"open\" lets the agent go on with a warning when Warden itself fails; \"closed\" denies its tool calls".into()),
                        ),
                    }
                }
                if let Some(at) = t.count(&mut doc, "transcript_wait_ms") {
                    if at.value > 10_000 {
                        doc.error(
                            at.span,
                            "claude_code.transcript_wait_ms",
                            format!("{} ms is longer than a hook should wait", at.value),
                            Some("at most 10000; Claude Code writes its transcript every 100 ms, and 250 (the default) covers it".into()),
                        );
                    } else {
                        cc.transcript_wait = Duration::from_millis(at.value);
                    }
                }
                if let Some(windows) = t.table(&mut doc, "context_windows") {
                    for (model, v) in windows.entries() {
                        match to_json(v.get_ref()).as_u64() {
                            Some(n) if n > 0 => {
                                cc.context_windows.push((model.value.to_string(), n));
                            }
                            _ => doc.error(
                                v.span(),
                                &format!("claude_code.context_windows.{}", model.value),
                                "a context window is a whole number of tokens above 0",
                                Some(
                                    "for a 200 000-token model, write `\"model-id\" = 200000`"
                                        .into(),
                                ),
                            ),
                        }
                    }
                }
                t.finish(
                    &mut doc,
                    &[
                        "allow",
                        "max_continues",
                        "on_failure",
                        "transcript_wait_ms",
                        "context_windows",
                    ],
                );
            }
            top.finish(&mut doc, CONFIG_FIELDS);
        }
        if doc.has_errors() {
            Err(doc.diagnostics)
        } else {
            Ok(config)
        }
    }
}

/// `[shell]`: `tools`, names whose `command` field is a shell command; `fields`, names with the
/// field that holds theirs.
fn read_shell<'a>(doc: &mut Doc, t: &mut Table<'a>, shell: &mut ShellTools) {
    let name_ok = |doc: &mut Doc, name: &str, span: std::ops::Range<usize>, field: &str| {
        let ok = !name.trim().is_empty() && name.len() <= 256;
        if !ok {
            doc.error(
                span,
                field,
                "a tool's name must be a non-empty string of at most 256 bytes",
                Some(
                    "write the name the agent gives the tool, as in `tools = [\"run_shell\"]`"
                        .into(),
                ),
            );
        }
        ok
    };
    if let Some(items) = t.string_items(doc, "tools") {
        for (i, tool) in items.value.into_iter().enumerate() {
            if name_ok(doc, &tool.value, tool.span, &format!("shell.tools[{i}]")) {
                shell.declare(tool.value, "command");
            }
        }
    }
    if let Some(fields) = t.table(doc, "fields") {
        for (tool, v) in fields.entries() {
            let at = format!("shell.fields.{}", tool.value);
            match v.get_ref() {
                toml::de::DeValue::String(field) if !field.trim().is_empty() => {
                    if name_ok(doc, tool.value, tool.span.clone(), &at) {
                        shell.declare(tool.value, field.to_string());
                    }
                }
                _ => doc.error(
                    v.span(),
                    &at,
                    "a shell tool's field is the name of the input field that holds its command",
                    Some(format!("write `{} = \"command\"`", tool.value)),
                ),
            }
        }
    }
}

/// Whether `database` names a PostgreSQL server (`postgres://` or `postgresql://`) rather than
/// a SQLite file.
pub fn is_database_url(database: &str) -> bool {
    let lower = database.get(..13).unwrap_or(database).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_is_kept_as_written() {
        for url in [
            "postgres://warden@db.internal/warden?pool_size=4",
            "postgresql://warden@db.internal:6543/warden",
        ] {
            let c = Config::parse(
                Path::new("/srv/agent/warden.toml"),
                &format!("database = \"{url}\"\n"),
            )
            .unwrap();
            assert_eq!(c.database, Some(PathBuf::from(url)));
        }
        assert!(!is_database_url("postgres.db"));
    }

    #[test]
    fn a_full_configuration_reads() {
        let c = Config::parse(
            Path::new("/srv/agent/warden.toml"),
            "builtin = false\nrules = [\"rules\"]\nplugins = \"/opt/plugins\"\ncapabilities = [\"vault_search\"]\ndatabase = \"state/w.db\"\nuser = \"ann\"\n[log]\nsample = 0.25\n[scripts]\ntimeout_seconds = 0.5\nmemory_mb = 8\n",
        )
        .unwrap();
        assert!(!c.builtin);
        assert_eq!(c.rules, [PathBuf::from("/srv/agent/rules")]);
        assert_eq!(c.plugins, [PathBuf::from("/opt/plugins")]);
        assert_eq!(c.database, Some(PathBuf::from("/srv/agent/state/w.db")));
        assert_eq!((c.user.as_str(), c.project.as_str()), ("ann", "default"));
        assert_eq!(c.log_sample, 0.25);
        assert_eq!(c.script_timeout, Some(Duration::from_millis(500)));
        assert_eq!(c.script_memory, Some(8 << 20));
    }

    #[test]
    fn the_database_is_a_path_or_a_table_with_its_durability() {
        let c = Config::parse(Path::new("/srv/warden.toml"), "database = \"w.db\"\n").unwrap();
        assert_eq!(
            (c.database, c.synchronous_full),
            (Some(PathBuf::from("/srv/w.db")), false)
        );
        let c = Config::parse(
            Path::new("/srv/warden.toml"),
            "[database]\npath = \"w.db\"\nsynchronous = \"full\"\n",
        )
        .unwrap();
        assert_eq!(
            (c.database, c.synchronous_full),
            (Some(PathBuf::from("/srv/w.db")), true)
        );
        let e = Config::parse(
            Path::new("warden.toml"),
            "[database]\nsynchronous = \"extra\"\n",
        )
        .unwrap_err();
        assert_eq!(
            e[0].to_string().lines().next().unwrap(),
            "warden.toml:2:15: error: database.synchronous: `synchronous` is \"normal\" or \"full\", not \"extra\""
        );
    }

    #[test]
    fn the_lock_timeout_is_seconds_above_zero() {
        let c = Config::parse(
            Path::new("/srv/warden.toml"),
            "[database]
path = \"postgres://w@db/w\"\nlock_timeout = 7.5\n",
        )
        .unwrap();
        assert_eq!(c.database, Some(PathBuf::from("postgres://w@db/w")));
        assert_eq!(c.lock_timeout, Some(Duration::from_millis(7500)));
        for bad in ["0", "-1", "601", "\"5s\""] {
            let e = Config::parse(
                Path::new("warden.toml"),
                &format!("[database]\nlock_timeout = {bad}\n"),
            )
            .unwrap_err();
            assert!(
                e[0].to_string()
                    .starts_with("warden.toml:2:16: error: database.lock_timeout: `lock_timeout` must be a number of seconds"),
                "{bad}: {}",
                e[0]
            );
        }
    }

    #[test]
    fn mistakes_name_line_and_field() {
        for (text, want) in [
            (
                "rulez = [\"r\"]\n",
                "warden.toml:1:1: error: rulez: unknown field `rulez`",
            ),
            ("[log]\nsample = 2\n", "log.sample"),
            ("[scripts]\nmemory_mb = 0\n", "scripts.memory_mb"),
            ("user = \"\"\n", "`user` cannot be empty"),
            ("builtin = \"yes\"\n", "`builtin` must be true or false"),
        ] {
            let e = Config::parse(Path::new("warden.toml"), text).unwrap_err();
            let all: Vec<String> = e.iter().map(ToString::to_string).collect();
            assert!(all.iter().any(|d| d.contains(want)), "{text}: {all:#?}");
        }
    }
}
