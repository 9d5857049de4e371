//! `warden init claude-code`, `codex`, `gemini-cli`: a project supervised in one command.
//! Writes `.warden/` (its `warden.toml`, a rules folder, the database) and adds Warden's hooks to
//! the agent's project hook file (`.claude/settings.json`, `.codex/hooks.json`,
//! `.gemini/settings.json`), merged into what is there: the user's other hooks and settings are
//! kept, a hook already added is not added twice, and a file that is not valid JSON is left
//! alone with an error. It only writes files: the agent need not be installed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::agent::Agent;

/// The events Warden hooks, with the matcher each takes (Claude Code's tool events match
/// every tool with `*`; Codex's and Gemini CLI's without a matcher).
fn events(agent: Agent) -> Vec<(&'static str, Option<&'static str>)> {
    agent
        .events()
        .iter()
        .map(|(name, event)| {
            let every_tool = agent == Agent::ClaudeCode && event.is_tool_event();
            (*name, every_tool.then_some("*"))
        })
        .collect()
}

/// How long the agent waits for a hook, in seconds.
const TIMEOUT: u64 = 30;

/// What Codex gives a `SessionEnd` hook at most, in seconds.
const CODEX_SESSION_END_TIMEOUT: u64 = 3;

/// The agent's project hook file, in the project folder.
pub fn hook_file(agent: Agent) -> &'static str {
    match agent {
        Agent::ClaudeCode => ".claude/settings.json",
        Agent::Codex => ".codex/hooks.json",
        Agent::GeminiCli => ".gemini/settings.json",
    }
}

/// What `init` is asked to do.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The agent whose hooks are written.
    pub agent: Agent,
    /// The project folder.
    pub project: PathBuf,
    /// How the hook runs Warden: the `warden` command (its path, or `warden` when it is on
    /// the PATH).
    pub command: String,
    /// A Warden service to post to (`http` hooks, Claude Code only) instead of running the
    /// command.
    pub url: Option<String>,
    /// Leave the guardrails that ship with Warden off (`warden init ... --no-guardrails`).
    pub no_guardrails: bool,
}

/// What `init` did, file by file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitReport {
    /// Files and folders written anew.
    pub created: Vec<PathBuf>,
    /// Files changed.
    pub updated: Vec<PathBuf>,
    /// Files that already had what they need.
    pub unchanged: Vec<PathBuf>,
    /// Hook entries added to the agent's hook file.
    pub hooks_added: usize,
}

/// Why `init` stopped.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A file or folder could not be read or written.
    #[error("{path}: {cause}")]
    Io {
        /// Which.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// The agent's hook file is not what the agent reads; it is left as it is.
    #[error(
        "{path}: {why}; fix it (or move it away) and run `warden init {agent}` again — it was left as it is"
    )]
    Settings {
        /// The agent's name on the command line.
        agent: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The database could not be created.
    #[error(transparent)]
    Store(#[from] warden_core::StoreError),
}

/// The configuration `init` writes: every top-level key above the first table (a key added
/// below a table would belong to it), with `PLUGINS` filled in.
const CONFIG: &str = r#"# Warden's configuration for this project. The book's chapter on your agent (Claude Code,
# Codex, Gemini CLI) explains each part; `warden check` validates it.
builtin = true          # Warden's built-in rules (token budget, repeated failures...)
rules = ["rules"]       # your own rules, one TOML file each
PLUGINS
database = "warden.db"  # sessions, plugin state, your choices, the execution log
# Add top-level settings here, above the first [table] (TOML puts a key written below a
# table inside that table).

[sessions]
retention_days = 30     # saved sessions untouched this long are deleted

[claude_code]            # how the agents' hooks answer (Claude Code, Codex and Gemini CLI alike)
# allow = false         # let Warden skip the agent's own approval (Claude Code: its `allow`; Codex: rewrites)
# max_continues = 3     # send an agent that wants to stop back to work at most this often in a row
# on_failure = "open"   # "closed": deny tool calls while Warden itself is broken
# transcript_wait_ms = 250  # (Claude Code) how long PreToolUse waits for its model call in the transcript
#
# [claude_code.context_windows]
# "claude-sonnet-4-5" = 1000000  # a model's context window, by id or the start of one
"#;

const GITIGNORE: &str = "warden.db\nwarden.db-wal\nwarden.db-shm\n";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InitError + '_ {
    move |cause| InitError::Io {
        path: path.to_path_buf(),
        cause,
    }
}

/// Writes a file unless it exists; reports which.
fn write_new(path: &Path, text: &str, report: &mut InitReport) -> Result<(), InitError> {
    if path.exists() {
        report.unchanged.push(path.to_path_buf());
        return Ok(());
    }
    std::fs::write(path, text).map_err(io(path))?;
    report.created.push(path.to_path_buf());
    Ok(())
}

/// Sets a project up (see the module docs).
pub fn init(opts: &InitOptions) -> Result<InitReport, InitError> {
    // Checked before anything is written.
    let handler = hook(opts)?;
    // The agent's hook file is read (and refused, if it is not what the agent reads) before
    // anything is written.
    let agent = opts.agent;
    let settings = opts.project.join(hook_file(agent));
    let folder = settings
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| opts.project.clone());
    let settings_error = |why: String| InitError::Settings {
        agent: agent.name(),
        path: settings.clone(),
        why,
    };
    let (before, mut root) = match std::fs::read_to_string(&settings) {
        Ok(text) => {
            let value: Value = serde_json::from_str(&text)
                .map_err(|e| settings_error(format!("it is not valid JSON ({e})")))?;
            match value {
                Value::Object(map) => (Some(text), map),
                _ => return Err(settings_error("it is not a JSON object".into())),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Map::new()),
        Err(e) => return Err(io(&settings)(e)),
    };
    let mut report = InitReport::default();
    let warden_dir = opts.project.join(".warden");
    let rules = warden_dir.join("rules");
    if !rules.is_dir() {
        std::fs::create_dir_all(&rules).map_err(io(&rules))?;
        report.created.push(rules.clone());
    }
    let plugins = if opts.no_guardrails {
        "# plugins = [\"builtin:guardrails\"]  # the guardrails that ship with Warden (left off), and plugin folders"
    } else {
        "plugins = [\"builtin:guardrails\"]  # refuse destructive commands, stop a session refused again and again;\n                                  # add plugin folders to the list: [\"builtin:guardrails\", \"plugins\"]"
    };
    write_new(
        &warden_dir.join("warden.toml"),
        &CONFIG.replace("PLUGINS", plugins),
        &mut report,
    )?;
    write_new(&warden_dir.join(".gitignore"), GITIGNORE, &mut report)?;
    let db = warden_dir.join("warden.db");
    let existed = db.exists();
    warden_core::Store::open(&db)?;
    if existed {
        report.unchanged.push(db);
    } else {
        report.created.push(db);
    }
    std::fs::create_dir_all(&folder).map_err(io(&folder))?;
    report.hooks_added = merge_hooks(&mut root, agent, |event| {
        // Codex gives `SessionEnd` 3 seconds whatever the hook says, and warns at every run
        // when it says more.
        let mut h = handler.clone();
        if agent == Agent::Codex && event == "SessionEnd" {
            h["timeout"] = json!(CODEX_SESSION_END_TIMEOUT);
        }
        h
    })
    .map_err(settings_error)?;
    if report.hooks_added == 0 {
        report.unchanged.push(settings);
        return Ok(report);
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    // Written whole, then moved into place: the agent never reads half a file.
    let tmp = folder.join(".hooks.warden-tmp");
    std::fs::write(&tmp, &text).map_err(io(&tmp))?;
    std::fs::rename(&tmp, &settings).map_err(io(&settings))?;
    if before.is_some() {
        report.updated.push(settings);
    } else {
        report.created.push(settings);
    }
    Ok(report)
}

/// The hook handler Warden adds for every event.
fn hook(opts: &InitOptions) -> Result<Value, InitError> {
    let command = shell_word(&opts.command);
    Ok(match (opts.agent, &opts.url) {
        (Agent::ClaudeCode, Some(url)) => json!({
            "type": "http",
            "url": format!("{}/v1/claude-code", url.trim_end_matches('/')),
            "headers": { "Authorization": "Bearer $WARDEN_TOKEN" },
            "allowedEnvVars": ["WARDEN_TOKEN"],
            "timeout": TIMEOUT,
        }),
        (agent, Some(_)) => {
            return Err(InitError::Settings {
                agent: agent.name(),
                path: opts.project.join(hook_file(agent)),
                why: format!(
                    "{agent} runs command hooks only, not http hooks; leave out --url (the hook runs `warden` itself)"
                ),
            });
        }
        (Agent::ClaudeCode, None) => json!({
            "type": "command",
            "command": format!(
                "{command} hook claude-code --config \"$CLAUDE_PROJECT_DIR/.warden/warden.toml\""
            ),
            "timeout": TIMEOUT,
        }),
        // Codex runs the hook in the session's folder and names no project folder in its
        // environment: the configuration is named by its full path.
        (Agent::Codex, None) => json!({
            "type": "command",
            "command": format!(
                "{command} hook codex --config {}",
                shell_word(&opts.project.join(".warden/warden.toml").display().to_string())
            ),
            "timeout": TIMEOUT,
        }),
        // Gemini CLI's timeout is in milliseconds. It writes the project's folder into the
        // command itself, quoted for the shell: so the variable is not quoted again.
        (Agent::GeminiCli, None) => json!({
            "type": "command",
            "name": "warden",
            "command": format!(
                "{command} hook gemini-cli --config $GEMINI_PROJECT_DIR/.warden/warden.toml"
            ),
            "timeout": TIMEOUT * 1000,
        }),
    })
}

/// `s` as one shell word.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Adds `handler` to every event of `settings.hooks` that does not have it yet; how many it
/// added. What is there that is not a hook list of Claude Code's shape is an error.
fn merge_hooks(
    settings: &mut Map<String, Value>,
    agent: Agent,
    handler_of: impl Fn(&str) -> Value,
) -> Result<usize, String> {
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        return Err("`hooks` is not an object".into());
    };
    let mut added = 0;
    for (event, matcher) in events(agent) {
        let handler = &handler_of(event);
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(groups) = groups else {
            return Err(format!("`hooks.{event}` is not a list"));
        };
        let present = groups.iter().any(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|hs| hs.iter().any(|h| same_handler(h, handler)))
        });
        if present {
            continue;
        }
        // Warden's hook written before, with another command (the project moved, `warden` is
        // elsewhere): it is replaced, not kept beside the new one.
        let stale = groups
            .iter_mut()
            .filter_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut))
            .flat_map(|hs| hs.iter_mut())
            .find(|h| is_wardens(h, agent));
        if let Some(old) = stale {
            *old = handler.clone();
            added += 1;
            continue;
        }
        let mut group = Map::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), json!(m));
        }
        group.insert("hooks".into(), json!([handler]));
        groups.push(Value::Object(group));
        added += 1;
    }
    Ok(added)
}

/// Whether `h` is a command hook of Warden's for `agent` (`... hook codex --config ...`).
fn is_wardens(h: &Value, agent: Agent) -> bool {
    let Some(command) = h.get("command").and_then(Value::as_str) else {
        return false;
    };
    let needle = format!(" hook {}", agent.name());
    command
        .match_indices(&needle)
        .any(|(i, _)| matches!(command[i + needle.len()..].chars().next(), None | Some(' ')))
}

/// Whether `h` is Warden's handler already (the same command or URL).
fn same_handler(h: &Value, handler: &Value) -> bool {
    ["command", "url"]
        .iter()
        .any(|k| h.get(k).is_some() && h.get(k) == handler.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(dir: &Path) -> InitOptions {
        InitOptions {
            agent: Agent::ClaudeCode,
            project: dir.to_path_buf(),
            command: "warden".into(),
            url: None,
            no_guardrails: false,
        }
    }

    #[test]
    fn init_writes_the_project_and_merges_into_the_users_hooks_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".claude")).unwrap();
        let mine = json!({
            "model": "opus",
            "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}]}
        });
        std::fs::write(dir.path().join(".claude/settings.json"), mine.to_string()).unwrap();
        let report = init(&opts(dir.path())).unwrap();
        assert_eq!(report.hooks_added, 8);
        assert!(dir.path().join(".warden/warden.toml").is_file());
        assert!(dir.path().join(".warden/warden.db").is_file());
        assert!(dir.path().join(".warden/rules").is_dir());
        let text = std::fs::read_to_string(dir.path().join(".claude/settings.json")).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["model"], "opus", "the user's settings are kept");
        let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2, "the user's hook is kept beside Warden's");
        assert_eq!(pre[0]["hooks"][0]["command"], "my-check");
        assert!(
            pre[1]["hooks"][0]["command"]
                .as_str()
                .unwrap()
                .contains("hook claude-code --config \"$CLAUDE_PROJECT_DIR/.warden/warden.toml\"")
        );
        // Again: nothing is added twice, nothing is overwritten.
        std::fs::write(dir.path().join(".warden/warden.toml"), "builtin = false\n").unwrap();
        let again = init(&opts(dir.path())).unwrap();
        assert_eq!(again.hooks_added, 0);
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".warden/warden.toml")).unwrap(),
            "builtin = false\n"
        );
    }

    #[test]
    fn a_broken_settings_file_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".claude")).unwrap();
        std::fs::write(dir.path().join(".claude/settings.json"), "{ nope").unwrap();
        let err = init(&opts(dir.path())).unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(!dir.path().join(".warden").exists(), "nothing written");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(".claude/settings.json")).unwrap(),
            "{ nope"
        );
        std::fs::write(dir.path().join(".claude/settings.json"), r#"{"hooks": []}"#).unwrap();
        let err = init(&opts(dir.path())).unwrap_err().to_string();
        assert!(err.contains("`hooks` is not an object"), "{err}");
    }

    #[test]
    fn http_hooks_carry_the_token_from_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.url = Some("http://warden.internal:7777/".into());
        init(&o).unwrap();
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".claude/settings.json")).unwrap(),
        )
        .unwrap();
        let h = &v["hooks"]["Stop"][0]["hooks"][0];
        assert_eq!(h["type"], "http");
        assert_eq!(h["url"], "http://warden.internal:7777/v1/claude-code");
        assert_eq!(h["allowedEnvVars"], json!(["WARDEN_TOKEN"]));
        assert_eq!(
            shell_word("/opt/my warden/warden"),
            "'/opt/my warden/warden'"
        );
    }

    #[test]
    fn codex_and_gemini_cli_get_their_own_files_merged_the_same_way() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".gemini")).unwrap();
        let mine = json!({"theme": "dark", "hooks": {"BeforeTool": [{"matcher": "write_file",
            "hooks": [{"type": "command", "command": "my-check"}]}]}});
        std::fs::write(dir.path().join(".gemini/settings.json"), mine.to_string()).unwrap();
        for agent in [Agent::Codex, Agent::GeminiCli] {
            let o = InitOptions {
                agent,
                ..opts(dir.path())
            };
            let report = init(&o).unwrap();
            assert_eq!(report.hooks_added, agent.events().len(), "{agent}");
            assert_eq!(init(&o).unwrap().hooks_added, 0, "{agent}: once");
        }
        let codex: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".codex/hooks.json")).unwrap(),
        )
        .unwrap();
        let pre = &codex["hooks"]["PreToolUse"][0];
        assert_eq!(pre.get("matcher"), None, "every tool");
        assert_eq!(codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
        let command = pre["hooks"][0]["command"].as_str().unwrap();
        assert!(
            command.starts_with("warden hook codex --config "),
            "{command}"
        );
        assert!(command.ends_with(".warden/warden.toml"), "{command}");
        let gemini: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".gemini/settings.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(gemini["theme"], "dark", "the user's settings are kept");
        let before_tool = gemini["hooks"]["BeforeTool"].as_array().unwrap();
        assert_eq!(
            before_tool.len(),
            2,
            "the user's hook is kept beside Warden's"
        );
        assert_eq!(before_tool[1]["hooks"][0]["timeout"], 30_000);
        assert!(
            before_tool[1]["hooks"][0]["command"]
                .as_str()
                .unwrap()
                .contains("hook gemini-cli --config $GEMINI_PROJECT_DIR/.warden/warden.toml")
        );
        // Run again from elsewhere (the project moved, `warden` is another): Warden's hooks
        // are replaced, not doubled, and the user's are kept.
        let moved = InitOptions {
            agent: Agent::Codex,
            command: "/opt/warden/bin/warden".into(),
            ..opts(dir.path())
        };
        assert_eq!(
            init(&moved).unwrap().hooks_added,
            Agent::Codex.events().len()
        );
        let codex: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(".codex/hooks.json")).unwrap(),
        )
        .unwrap();
        let pre = codex["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1, "{pre:?}");
        assert!(
            pre[0]["hooks"][0]["command"]
                .as_str()
                .unwrap()
                .starts_with("/opt/warden/bin/warden hook codex")
        );
        // Only Claude Code takes http hooks.
        let err = init(&InitOptions {
            agent: Agent::Codex,
            url: Some("http://127.0.0.1:7878".into()),
            ..opts(dir.path())
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("command hooks only"), "{err}");
    }
}
