//! `warden hook AGENT` and `warden init AGENT` (`claude-code`, `codex`, `gemini-cli`): the
//! agents' hooks, wired.
//!
//! The hook is run by the agent, one process per event: it reads the payload on stdin and
//! prints the answer on stdout, always exiting 0. Nothing that goes wrong in Warden itself
//! (the configuration, the database, the payload, a bug) breaks the user's session: the answer
//! then says what is wrong, and lets the agent go on unless the configuration asks to fail
//! closed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;
use warden_agents::{Agent, Answer, InitOptions, MAX_PAYLOAD, Options, answer, fail};
use warden_core::{ClaudeCodeConfig, Config};

use crate::setup::open_store;

/// What a hook is for.
#[derive(Subcommand)]
pub(crate) enum HookTarget {
    /// Answer one Claude Code hook: the payload on stdin, the answer on stdout (exit 0).
    ClaudeCode {
        /// Deny tool calls while Warden itself is broken (a broken configuration cannot say
        /// so itself); the default lets the agent go on with a warning.
        #[arg(long)]
        fail_closed: bool,
    },
    /// Answer one Codex hook: the payload on stdin, the answer on stdout (exit 0).
    Codex {
        /// Deny tool calls while Warden itself is broken.
        #[arg(long)]
        fail_closed: bool,
    },
    /// Answer one Gemini CLI hook: the payload on stdin, the answer on stdout (exit 0).
    GeminiCli {
        /// Deny tool calls while Warden itself is broken.
        #[arg(long)]
        fail_closed: bool,
    },
}

impl HookTarget {
    fn agent(&self) -> (Agent, bool) {
        match *self {
            HookTarget::ClaudeCode { fail_closed } => (Agent::ClaudeCode, fail_closed),
            HookTarget::Codex { fail_closed } => (Agent::Codex, fail_closed),
            HookTarget::GeminiCli { fail_closed } => (Agent::GeminiCli, fail_closed),
        }
    }
}

/// What to set up.
#[derive(Subcommand)]
pub(crate) enum InitTarget {
    /// Supervise Claude Code in a project: writes `.warden/` (configuration, rules folder,
    /// database) and adds Warden's hooks to `.claude/settings.json`, keeping what is there.
    ClaudeCode {
        /// The project folder (default: the current one).
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// Post the hooks to a Warden service (`warden serve`) at this address instead of
        /// running `warden` for each: e.g. `http://127.0.0.1:7878`. The token comes from the
        /// environment variable WARDEN_TOKEN.
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        /// Leave the guardrails that ship with Warden off (`builtin:guardrails`: destructive
        /// commands refused, a session refused again and again stopped); they are on otherwise.
        #[arg(long)]
        no_guardrails: bool,
    },
    /// Supervise Codex in a project: writes `.warden/` and adds Warden's hooks to
    /// `.codex/hooks.json`, keeping what is there.
    Codex {
        /// The project folder (default: the current one).
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// Leave the guardrails that ship with Warden off.
        #[arg(long)]
        no_guardrails: bool,
    },
    /// Supervise Gemini CLI in a project: writes `.warden/` and adds Warden's hooks to
    /// `.gemini/settings.json`, keeping what is there.
    GeminiCli {
        /// The project folder (default: the current one).
        #[arg(long, value_name = "DIR", default_value = ".")]
        dir: PathBuf,
        /// Leave the guardrails that ship with Warden off.
        #[arg(long)]
        no_guardrails: bool,
    },
}

/// Runs a hook: never fails, always exits 0 (see the module docs).
pub(crate) fn run(config: Result<Config, String>, target: HookTarget) -> ExitCode {
    let (agent, fail_closed) = target.agent();
    let mut input = Vec::new();
    let read = std::io::stdin()
        .take(MAX_PAYLOAD as u64 + 1)
        .read_to_end(&mut input);
    let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        hook(agent, config, fail_closed, &input, read.err())
    }))
    .unwrap_or_else(|_| {
        let cc = ClaudeCodeConfig {
            fail_closed,
            ..ClaudeCodeConfig::default()
        };
        fail(
            agent,
            &cc,
            event_name(&input).as_deref(),
            "Warden stopped on an internal error (a bug: please report it with the payload)",
        )
    });
    let mut err = std::io::stderr().lock();
    for line in &answer.log {
        let _ = writeln!(err, "{line}");
    }
    // Gemini CLI reads stderr as the answer when stdout is empty: it gets `{}` then.
    let json = match (&answer.json, agent) {
        (None, Agent::GeminiCli) => Some(serde_json::json!({})),
        (json, _) => json.clone(),
    };
    if let Some(json) = json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{json}");
        let _ = out.flush();
    }
    ExitCode::SUCCESS
}

/// The payload's event name, read leniently (for an answer to a payload that did not parse).
fn event_name(input: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(input).ok()?;
    Some(v.get("hook_event_name")?.as_str()?.to_string())
}

/// How long a hook process waits for another process's lock on the database, unless
/// `[database] lock_timeout` says otherwise (Claude Code gives a command hook 60 s).
const HOOK_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How large (in pages) the database's write-ahead log may grow before the hook process that
/// closes it checkpoints it: about ten events of a long session, each of which then reads at
/// most this much of the log when it opens the database instead of making four fsyncs.
const HOOK_CHECKPOINT_PAGES: u32 = 64;

fn hook(
    agent: Agent,
    config: Result<Config, String>,
    fail_closed: bool,
    input: &[u8],
    read: Option<std::io::Error>,
) -> Answer {
    let mut cc = ClaudeCodeConfig {
        fail_closed,
        ..ClaudeCodeConfig::default()
    };
    let event = event_name(input);
    let failed = |cc: &ClaudeCodeConfig, why: &str| fail(agent, cc, event.as_deref(), why);
    if let Some(e) = read {
        return failed(&cc, &format!("the payload could not be read: {e}"));
    }
    let mut config = match config {
        Ok(c) => c,
        Err(e) => return failed(&cc, &e),
    };
    cc = ClaudeCodeConfig {
        fail_closed: fail_closed || config.claude_code.fail_closed,
        ..config.claude_code.clone()
    };
    if config.database.is_none() {
        return failed(
            &cc,
            &format!(
                "no database is configured, so sessions cannot be followed from one hook to the next: run `warden init {}` in the project, or set `database` in warden.toml",
                agent.name()
            ),
        );
    }
    // A hook process ticks once: waiting longer for the database than a tick of a long-running
    // process does is better than letting the event through unsupervised.
    config.lock_timeout.get_or_insert(HOOK_LOCK_TIMEOUT);
    // A hook process ticks one event: it compiles the rules of the hooks it ticks, not all
    // of them (the check below, once per prompt, compiles them all), and leaves the database's
    // log to the next process rather than checkpointing it at every event.
    // A database that cannot be opened (a full disk, a read-only folder, a lock held too
    // long) does not stop the rules that need no stored state from deciding: the Warden runs
    // without it, and the answer says so (the failure policy applies after the rules).
    let store = open_store(&config, "a hook").and_then(|mut s| {
        s.checkpoint_past(HOOK_CHECKPOINT_PAGES)
            .map_err(|e| e.described())?;
        Ok(s)
    });
    let rules = Config {
        database: None,
        ..config.clone()
    };
    let built = warden_core::WardenBuilder::from_config(&rules).and_then(|b| {
        let b = match store {
            Ok(store) => b.store(store),
            Err(why) => b.store_unavailable(why),
        };
        b.compile_on_demand(true).build()
    });
    let warden = match built {
        Ok(w) => w,
        Err(e) => return failed(&cc, &e.to_string()),
    };
    let opts = Options {
        user: config.user.clone(),
        project: config.project.clone(),
        project_dir: project_dir(agent, config.path.as_deref()),
    };
    let out = answer(agent, &warden, &cc, &opts, input);
    // The process ends here: its memory goes back to the system whole, rather than value by
    // value (freeing the program was 5% of a hook's instructions). The store's one duty at close
    // is done first; a SQLite connection closes with the process. (A PostgreSQL pool is closed
    // properly, so that the server does not log connections lost.)
    if warden.store().path().is_some() {
        warden.store().checkpoint_if_past();
        std::mem::forget(warden);
    }
    out
}

/// The project's folder as the agent names it to its hooks; Codex names none, so it is the
/// folder whose `.warden/warden.toml` the hook was given (as `warden init codex` writes it),
/// else the payload's `cwd` (a session started in a subfolder is still the project's).
fn project_dir(agent: Agent, config: Option<&Path>) -> Option<PathBuf> {
    let var = match agent {
        Agent::ClaudeCode => "CLAUDE_PROJECT_DIR",
        Agent::GeminiCli => "GEMINI_PROJECT_DIR",
        Agent::Codex => {
            let dir = config?.parent()?;
            return (dir.file_name()? == ".warden")
                .then(|| dir.parent().map(Path::to_path_buf))
                .flatten();
        }
    };
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `warden init AGENT`.
pub(crate) fn init(target: InitTarget) -> Result<ExitCode, String> {
    let (agent, dir, url, no_guardrails) = match target {
        InitTarget::ClaudeCode {
            dir,
            url,
            no_guardrails,
        } => (Agent::ClaudeCode, dir, url, no_guardrails),
        InitTarget::Codex { dir, no_guardrails } => (Agent::Codex, dir, None, no_guardrails),
        InitTarget::GeminiCli { dir, no_guardrails } => {
            (Agent::GeminiCli, dir, None, no_guardrails)
        }
    };
    if !dir.is_dir() {
        return Err(format!(
            "{} is not a folder: give the project folder with --dir",
            dir.display()
        ));
    }
    let project = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let report = warden_agents::init(&InitOptions {
        agent,
        project: project.clone(),
        command: command(),
        url,
        no_guardrails,
    })
    .map_err(|e| e.to_string())?;
    let show = |p: &Path| {
        p.strip_prefix(&project)
            .map(|r| r.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    for p in &report.created {
        println!("created   {}", show(p));
    }
    for p in &report.updated {
        println!("updated   {}", show(p));
    }
    for p in &report.unchanged {
        println!("unchanged {}", show(p));
    }
    let guardrails = if no_guardrails {
        "The guardrails that ship with Warden are off (--no-guardrails): turn them on with\n\
         `plugins = [\"builtin:guardrails\"]` in .warden/warden.toml."
    } else {
        "The guardrails that ship with Warden are on (`builtin:guardrails` in .warden/warden.toml):\n\
         destructive commands outside the project are refused, and a session refused again and again stops."
    };
    let next = match agent {
        Agent::ClaudeCode => String::new(),
        Agent::Codex => "\nCodex runs a project's hooks once the project is trusted and its hooks are reviewed:\n\
             open `codex` in this folder, trust it, and approve Warden's hooks in `/hooks`\n\
             (the book's Codex chapter says how, and how to do it without the TUI).\n"
            .to_string(),
        Agent::GeminiCli => "\nGemini CLI runs a project's hooks once the folder is trusted: answer its trust prompt\n\
             (or run it with GEMINI_CLI_TRUST_WORKSPACE=true).\n"
            .to_string(),
    };
    println!(
        "\n{} hook(s) added to {}. {} now runs Warden at every event of this project.\n{next}\
         {guardrails}\n\
         Your rules go in .warden/rules/; check them with `warden --config .warden/warden.toml check`,\n\
         and read what fired with `warden --config .warden/warden.toml log`.",
        report.hooks_added,
        warden_agents::hook_file(agent),
        agent.title(),
    );
    Ok(ExitCode::SUCCESS)
}

/// How a hook runs this program: `warden` when that is what the PATH finds, else its full
/// path.
fn command() -> String {
    let me = std::env::current_exe().ok();
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("warden"))
            .find(|p| p.is_file())
    });
    match (&me, on_path) {
        (Some(me), Some(found))
            if std::fs::canonicalize(me).ok() == std::fs::canonicalize(&found).ok() =>
        {
            "warden".to_string()
        }
        (Some(me), _) => me.display().to_string(),
        (None, _) => "warden".to_string(),
    }
}
