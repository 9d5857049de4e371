//! The `warden` command: check rule files, replay session traces, print compiled trees, manage
//! rules, plugins and settings, run rule tests, read the execution log, watch files, run the
//! demo session and the benchmark. It only wires: every behavior lives in `warden-core`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use miette::{GraphicalReportHandler, GraphicalTheme};
use warden_core::trace::{explain_lines, node_lines, outcome_lines, read_trace};
use warden_core::{Config, Diagnostic, Hook, MANIFEST_FILE, SessionOptions, Warden};

mod check;
mod demo;
mod manage;
mod serve;
mod setup;

use setup::{Setup, build};

/// The session the demo replays: a research question, supervised by the built-in rules.
pub const DEMO_TRACE: &str = include_str!("../../../examples/traces/research-session.jsonl");

#[derive(Parser)]
#[command(name = "warden", version, about = "A behavior-tree supervisor for LLM agents", long_about = None)]
struct Cli {
    #[command(flatten)]
    setup: Setup,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate rule and plugin folders; exit non-zero if any has an error.
    Check {
        /// Rule folders, plugin folders or folders of plugins (the configured ones when none).
        paths: Vec<PathBuf>,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replay a session trace (JSON Lines) and print what the supervisor did, one JSON line
    /// per applied action and per error.
    Replay {
        /// The trace: one event per line, `{"hook": "on_turn_start", ...}`.
        trace: PathBuf,
        /// Also print, for every event, why each rule did or did not fire.
        #[arg(long)]
        explain: bool,
        /// Also print, for every event, each behavior node that ran and what it returned
        /// (implies --explain).
        #[arg(long = "trace")]
        nodes: bool,
        /// The session id (generated when absent).
        #[arg(long)]
        session: Option<String>,
    },
    /// Print the compiled trees, per hook: rules in order, behaviors with their nodes.
    Tree {
        /// Only this hook.
        #[arg(long)]
        hook: Option<String>,
        /// Only the rules active in this mode (see --modes).
        #[arg(long)]
        mode: Option<String>,
        /// Print this behavior's tree as a Mermaid flowchart instead.
        #[arg(long, value_name = "BEHAVIOR")]
        mermaid: Option<String>,
    },
    /// List, show, switch on or off, and configure rules, for a user.
    Rules {
        #[command(subcommand)]
        command: manage::RulesCommand,
    },
    /// List plugins: loaded, or skipped and why.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Run rule tests (`*.test.toml` beside the rules).
    Test {
        /// Test files or folders (the tests of every configured folder when none).
        paths: Vec<PathBuf>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Read the execution log (recorded when `[log] sample` is above 0).
    Log(check::LogQuery),
    /// Show what knowledge enrichment makes of a query: its mode, tags, the sources chosen
    /// within the budget, and the `<reference_material>` section.
    Enrich(check::EnrichQuery),
    /// Watch the rule, plugin and script files and report each reload (until interrupted).
    Watch,
    /// Run Warden as an HTTP service: the agent API, the management API and the Settings
    /// page, with hot reload (until SIGTERM or Ctrl-C).
    Serve(serve::ServeArgs),
    /// Run a simulated research session supervised by the built-in rules, and show each hook,
    /// the rules that fired and the notifications.
    Demo {
        /// Replay this trace instead of the built-in one.
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// Measure a tick: 100 threshold rules against the same work written by hand, and the cost
    /// of a Lua script condition and of resuming a waiting script.
    Bench {
        /// Ticks per measurement round.
        #[arg(long, default_value_t = 20_000)]
        ticks: u32,
        /// Measurement rounds (the median is reported).
        #[arg(long, default_value_t = 7)]
        rounds: u32,
    },
}

#[derive(Subcommand)]
enum PluginsCommand {
    /// Every plugin found: id, version, rules, requirements and settings.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the command line; the binary's `main`.
pub fn main() -> ExitCode {
    // Output piped into `head` should end quietly, as other command-line tools do, not panic.
    #[cfg(unix)]
    // SAFETY: restoring the default action of SIGPIPE at startup, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    init_logging();
    let cli = Cli::parse();
    let result = cli
        .setup
        .config()
        .and_then(|config| run(&config, cli.command));
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(config: &Config, command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Check { paths, json } => check(config, &paths, json),
        Command::Replay {
            trace,
            explain,
            nodes,
            session,
        } => replay(config, &trace, explain || nodes, nodes, session),
        Command::Tree {
            hook,
            mode,
            mermaid,
        } => tree(config, hook.as_deref(), mode.as_deref(), mermaid.as_deref()),
        Command::Rules { command } => manage::rules(config, command),
        Command::Plugins {
            command: PluginsCommand::List { json },
        } => manage::plugins(config, json),
        Command::Test { paths, json } => check::test(config, &paths, json),
        Command::Log(q) => check::log(config, &q),
        Command::Enrich(q) => check::enrich(config, &q),
        Command::Watch => watch(config),
        Command::Serve(args) => serve::run(config, args),
        Command::Demo { trace } => demo::run(trace.as_deref(), config),
        Command::Bench { ticks, rounds } => run_bench(ticks.max(1), rounds.max(1)),
    }
}

fn init_logging() {
    let level = std::env::var("WARDEN_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing::Level>().ok())
        .unwrap_or(tracing::Level::WARN);
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn json_out<T: serde::Serialize + ?Sized>(value: &T) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Renders diagnostics for a person: the offending line, underlined, with the suggestion.
pub fn render_diagnostics(diagnostics: &[Diagnostic]) -> String {
    let theme = if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme);
    let mut out = String::new();
    for d in diagnostics {
        if handler
            .render_report(&mut out, &warden_core::Report(d))
            .is_err()
        {
            out.push_str(&d.to_string());
            out.push('\n');
        }
    }
    out
}

/// Exit status 1 when the files loaded with errors (the output shows what did load), 0 else.
pub(crate) fn load_status(warden: &Warden) -> ExitCode {
    if warden.diagnostics().iter().any(|d| d.is_error()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Builds a Warden from the configuration, printing what is wrong in its files.
pub(crate) fn load(config: &Config, memory: bool) -> Result<Warden, String> {
    let warden = build(config, memory, false)?;
    let diagnostics = warden.diagnostics();
    if !diagnostics.is_empty() {
        eprint!("{}", render_diagnostics(&diagnostics));
    }
    Ok(warden)
}

/// Whether `dir` is a folder of plugins: no rule files of its own, and a folder with a
/// manifest in it.
fn is_plugins_folder(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    // A folder that is itself a plugin is not a folder of plugins; loose rule files beside
    // plugin folders are reported by the loader.
    !dir.join(MANIFEST_FILE).is_file()
        && entries
            .filter_map(Result::ok)
            .any(|e| e.path().join(MANIFEST_FILE).is_file())
}

fn check(config: &Config, paths: &[PathBuf], json: bool) -> Result<ExitCode, String> {
    let mut config = config.clone();
    if !paths.is_empty() {
        config.builtin = false;
        config.rules.clear();
        config.plugins.clear();
        for p in paths {
            if is_plugins_folder(p) {
                config.plugins.push(p.clone());
            } else {
                config.rules.push(p.clone());
            }
        }
    }
    // Checking plugins away from their host: load them whatever they require, unless the
    // capabilities were named.
    let any = config.capabilities.is_empty();
    let warden = build(&config, true, any)?;
    let program = warden.program();
    // The rules' problems, and the knowledge sources' when enrichment is configured.
    let diagnostics = warden.diagnostics();
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    // A file's problems past the first 100 are one summary diagnostic: count what it stands for.
    let (mut error_count, mut warning_count) = (0, 0);
    for d in &diagnostics {
        if d.omitted() > 0 {
            error_count += d.omitted_errors();
            warning_count += d.omitted() - d.omitted_errors();
        } else if d.is_error() {
            error_count += 1;
        } else {
            warning_count += 1;
        }
    }
    if json {
        let items: Vec<serde_json::Value> = diagnostics
            .iter()
            .map(|d| {
                serde_json::json!({
                    "severity": if d.is_error() { "error" } else { "warning" },
                    "file": d.path().display().to_string(),
                    "line": d.line(),
                    "column": d.location().map(|(_, c)| c),
                    "field": d.field(),
                    "message": d.message(),
                    "help": d.help(),
                })
            })
            .collect();
        json_out(&items)?;
    } else {
        eprint!("{}", render_diagnostics(&diagnostics));
        let loaded = program.rules().count();
        let plugins = program
            .plugins()
            .iter()
            .filter(|p| p.skipped.is_none())
            .count();
        println!(
            "{loaded} rule{} loaded ({} active), {plugins} plugin{}, {error_count} error{}, {} warning{}",
            plural(loaded),
            program.active_rules(),
            plural(plugins),
            plural(error_count),
            warning_count,
            plural(warning_count),
        );
    }
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn replay(
    config: &Config,
    trace: &Path,
    explain: bool,
    nodes: bool,
    session: Option<String>,
) -> Result<ExitCode, String> {
    // Read as it is replayed, a line at a time: a trace may be long, or a pipe.
    let file =
        std::fs::File::open(trace).map_err(|e| format!("cannot read {}: {e}", trace.display()))?;
    let warden = load(config, false)?;
    // The replay runs with every rule that loaded; still, it says that something was wrong.
    let loaded = load_status(&warden);
    let mut session = warden.session_with(SessionOptions {
        id: session,
        explain,
        user: Some(config.user.clone()),
        project: Some(config.project.clone()),
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut bad_lines = 0;
    for (index, parsed) in read_trace(std::io::BufReader::new(file)) {
        let lines = match parsed {
            Ok(e) => {
                let outcome = session.tick(e.hook, e.event);
                let mut lines = if nodes {
                    node_lines(index, &outcome)
                } else {
                    Vec::new()
                };
                if explain {
                    lines.extend(explain_lines(index, &outcome));
                }
                lines.extend(outcome_lines(index, &outcome));
                lines
            }
            Err(e) => {
                bad_lines += 1;
                vec![
                    serde_json::json!({"event": index, "rule": null, "error": format!("{}: {e}", trace.display())}),
                ]
            }
        };
        for line in lines {
            writeln!(out, "{line}").map_err(|e| e.to_string())?;
        }
    }
    Ok(if bad_lines > 0 {
        ExitCode::FAILURE
    } else {
        loaded
    })
}

fn tree(
    config: &Config,
    hook: Option<&str>,
    mode: Option<&str>,
    mermaid: Option<&str>,
) -> Result<ExitCode, String> {
    let hooks: Vec<Hook> = match hook {
        Some(h) => vec![h.parse::<Hook>().map_err(|e| e.to_string())?],
        None => Hook::ALL.to_vec(),
    };
    let warden = load(config, true)?;
    let program = warden.program();
    if let Some(rule) = mermaid {
        return match program.mermaid(rule) {
            Some(chart) => {
                print!("{chart}");
                Ok(load_status(&warden))
            }
            None => Err(format!("no behavior `{rule}` (rules have no tree to draw)")),
        };
    }
    let modes = program.modes();
    if let Some(m) = mode
        && !modes.iter().any(|d| d.id == m)
    {
        let ids: Vec<&str> = modes.iter().map(|d| d.id.as_str()).collect();
        return Err(if ids.is_empty() {
            "no modes are configured (give --modes, or `modes = ...` in warden.toml)".into()
        } else {
            format!("no mode `{m}`; the modes are {}", ids.join(", "))
        });
    }
    if !modes.is_empty() && mode.is_none() {
        println!("modes, in priority order (the first whose condition holds is active):");
        for d in &modes {
            println!(
                "  {:<14} when {}",
                d.id,
                d.when.as_ref().map_or("always", |w| w.text.as_str())
            );
        }
        println!();
    }
    for h in hooks {
        print!("{}", program.describe_hook_in(h, mode));
    }
    Ok(load_status(&warden))
}

fn watch(config: &Config) -> Result<ExitCode, String> {
    let warden = load(config, false)?;
    let program = warden.program();
    let folders = warden.watched_folders();
    println!(
        "watching {} folder{} ({} rules loaded); edit a rule file to reload, Ctrl-C to stop",
        folders.len(),
        plural(folders.len()),
        program.rules().count()
    );
    for f in &folders {
        println!("  {}", f.display());
    }
    let w = warden.clone();
    let _watch = warden
        .watch_with(move |report| {
            if report.applied {
                println!(
                    "reloaded: generation {}, {} rules",
                    report.generation,
                    w.program().rules().count()
                );
                let warnings: Vec<_> = report.diagnostics.to_vec();
                if !warnings.is_empty() {
                    eprint!("{}", render_diagnostics(&warnings));
                }
            } else {
                println!(
                    "not reloaded: the change has {} error{}; the previous rules stay in force",
                    report.introduced.len(),
                    plural(report.introduced.len())
                );
                eprint!("{}", render_diagnostics(&report.introduced));
            }
            let _ = std::io::stdout().flush();
        })
        .map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}

fn run_bench(ticks: u32, rounds: u32) -> Result<ExitCode, String> {
    warden_bench::run(&mut std::io::stdout().lock(), ticks, rounds).map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}
