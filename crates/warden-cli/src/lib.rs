//! The `warden` command: check rule files, replay session traces, print compiled trees, manage
//! rules, plugins and settings, run rule tests, read the execution log, watch files, run the
//! demo session and the benchmark. It only wires: every behavior lives in `warden-core`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

use clap::{Parser, Subcommand, ValueEnum};
use miette::{GraphicalReportHandler, GraphicalTheme};
use warden_core::{Config, Diagnostic, Hook, Warden};

mod backtest;
mod check;
mod demo;
mod folders;
mod hook;
mod manage;
mod migrate;
mod narrate;
mod new;
mod replay;
mod serve;
mod sessions;
mod setup;
mod shell;

use setup::{Setup, build};

/// The session the demo replays: a research question, supervised by the built-in rules.
pub const DEMO_TRACE: &str = include_str!("../../../examples/traces/research-session.jsonl");

#[derive(Parser)]
#[command(name = "warden", version, about = "A behavior-tree supervisor for LLM agents", long_about = None)]
struct Cli {
    #[command(flatten)]
    setup: Setup,
    /// Colour diagnostics: `auto` (on a terminal, unless NO_COLOR is set), `always` or `never`.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = Color::Auto, global = true, help_heading = "Global options")]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

/// When to colour what is printed for a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Color {
    // (Plain comments: doc comments here would make `--help` print its long form.)
    // When standard error is a terminal and `NO_COLOR` is not set.
    Auto,
    // Always, even into a pipe or with `NO_COLOR` set.
    Always,
    Never,
}

/// Whether diagnostics and log lines on standard error are coloured (set once, from --color).
static COLOR: OnceLock<bool> = OnceLock::new();

fn colored() -> bool {
    *COLOR.get_or_init(auto_color)
}

fn auto_color() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[derive(Subcommand)]
enum Command {
    /// Validate rule files, rule folders and plugin folders; exit non-zero if any has an error.
    Check {
        /// Rule or behavior files, rule folders, plugin folders or folders of plugins (the
        /// configured ones when none).
        paths: Vec<PathBuf>,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replay a session trace (JSON Lines) and print what the supervisor did, one JSON line
    /// per applied action and per error.
    Replay(replay::ReplayArgs),
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
    /// Write a new rule (with its test) or plugin (with its manifest, a rule and its tests).
    New {
        #[command(subcommand)]
        what: new::New,
    },
    /// Run rule tests (`*.test.toml` beside the rules).
    Test {
        /// Test files or folders (the tests of every configured folder when none).
        paths: Vec<PathBuf>,
        /// Print the results as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show what Warden sees in a shell command, as `tool.shell` shows it to rules: the
    /// commands that would run, the paths they delete and write and where those are, what it
    /// cannot see through, and what the guardrails make of it. Nothing is run.
    Shell(shell::ShellArgs),
    /// Read the execution log (recorded when `[log] sample` is above 0; failures and the
    /// firings of rules in shadow always).
    Log(check::LogQuery),
    /// Show what knowledge enrichment makes of a query: its mode, tags, the sources chosen
    /// within the budget, and the `<reference_material>` section.
    Enrich(check::EnrichQuery),
    /// Watch the rule, plugin and script files and report each reload (until interrupted).
    Watch {
        /// Print one JSON object per line: what is watched, then each reload.
        #[arg(long)]
        json: bool,
    },
    /// Run Warden as an HTTP service: the agent API, the management API and the Settings
    /// page, with hot reload (until SIGTERM or Ctrl-C).
    Serve(serve::ServeArgs),
    /// Answer a hook of an agent (`warden hook claude-code`, `codex`, `gemini-cli`: the
    /// agent's payload on stdin, its answer on stdout).
    Hook {
        #[command(subcommand)]
        target: hook::HookTarget,
    },
    /// Set up supervision of an agent in a project (`warden init claude-code`, `codex`,
    /// `gemini-cli`).
    Init {
        #[command(subcommand)]
        target: hook::InitTarget,
    },
    /// List, show or delete saved sessions.
    Sessions {
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
    /// Copy a store into another: `warden migrate --from warden.db --to postgres://...` moves
    /// plugin state, users' choices, saved sessions and the execution log, in one transaction.
    Migrate(migrate::MigrateArgs),
    /// Run a simulated research session supervised by the built-in rules, and show each hook,
    /// the rules that fired and the notifications.
    Demo {
        /// Replay this trace instead of the built-in one.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Print the built-in session's trace (JSON Lines) instead of playing it.
        #[arg(long, conflicts_with = "trace")]
        print_trace: bool,
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
        /// Only the measures of judging shell commands (`tool.shell`).
        #[arg(long)]
        shell: bool,
        /// Run one scenario `--ticks` times and print nothing, for a profiler or an
        /// instruction count (benches/instructions.sh): floor, hundred-rules,
        /// expression-three-fields, lua-three-fields, expression, lua-resume, runtime-resume,
        /// guardrails-tool-call, durable-save, replay-floor, replay.
        #[arg(long, value_name = "SCENARIO", conflicts_with = "shell")]
        repeat: Option<String>,
        /// Print the figures as JSON (each with its id, value, unit, and the floor it is
        /// measured beside with the ratio) instead of the text report.
        #[arg(long, conflicts_with = "repeat")]
        json: bool,
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

/// What the binary that runs the command line lets it change in the process.
pub struct Host {
    /// Called when the process is found to run long and allocate on every event: once when
    /// `warden serve` starts (before it reads the rules), and when `warden replay` reaches the
    /// 1,000th line of its trace (a short replay, like a hook process, stays as it started).
    /// The `warden` binary switches its allocator here (`src/allocator.rs`); calling it again
    /// does nothing more.
    pub serving: fn(),
}

/// Runs the command line; the binary's `main`.
pub fn main() -> ExitCode {
    main_with(Host { serving: || {} })
}

/// Runs the command line, telling `host` what the process is about to become.
pub fn main_with(host: Host) -> ExitCode {
    // Output piped into `head` should end quietly, as other command-line tools do, not panic.
    #[cfg(unix)]
    // SAFETY: restoring the default action of SIGPIPE at startup, before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let color = match cli.color {
        Color::Auto => auto_color(),
        Color::Always => true,
        Color::Never => false,
    };
    let _ = COLOR.set(color);
    init_logging();
    // A hook answers whatever happens, even when the configuration is broken.
    let command = match cli.command {
        Command::Hook { target } => return hook::run(cli.setup.config(), target),
        Command::Init { target } => {
            return match hook::init(target) {
                Ok(code) => code,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(2)
                }
            };
        }
        other => other,
    };
    if matches!(command, Command::Serve(_)) {
        (host.serving)();
    }
    let builtin_by_default = cli.setup.builtin_by_default();
    let result = cli
        .setup
        .config()
        .and_then(|config| run(&config, builtin_by_default, command, &host));
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(
    config: &Config,
    builtin_by_default: bool,
    command: Command,
    host: &Host,
) -> Result<ExitCode, String> {
    match command {
        Command::Check { paths, json } => check::check(config, &paths, json),
        Command::Replay(args) => replay::run(config, &args, host.serving),
        Command::Tree {
            hook,
            mode,
            mermaid,
        } => tree(config, hook.as_deref(), mode.as_deref(), mermaid.as_deref()),
        Command::Rules { command } => manage::rules(config, command),
        Command::Plugins {
            command: PluginsCommand::List { json },
        } => manage::plugins(config, json),
        Command::New { what } => new::run(&what),
        Command::Test { paths, json } => check::test(config, builtin_by_default, &paths, json),
        Command::Shell(args) => shell::run(&args),
        Command::Log(q) => check::log(config, &q),
        Command::Enrich(q) => check::enrich(config, &q),
        Command::Watch { json } => watch(config, json),
        Command::Serve(args) => serve::run(config, args),
        Command::Demo { trace, print_trace } => {
            if print_trace {
                print!("{DEMO_TRACE}");
                return Ok(ExitCode::SUCCESS);
            }
            demo::run(trace.as_deref(), config)
        }
        Command::Bench {
            ticks,
            repeat: Some(scenario),
            ..
        } => {
            // Zero repetitions is allowed: it is what an instruction count subtracts.
            warden_bench::repeat(&scenario, ticks).map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            ticks,
            rounds,
            shell,
            repeat: None,
            json,
        } => run_bench(ticks.max(1), rounds.max(1), shell, json),
        Command::Sessions { command } => sessions::run(config, command),
        Command::Migrate(args) => migrate::run(&args),
        // Answered before the configuration is read (see `main`).
        Command::Hook { .. } | Command::Init { .. } => Ok(ExitCode::SUCCESS),
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
        .with_ansi(colored())
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
    let theme = if colored() {
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

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
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

fn watch(config: &Config, json: bool) -> Result<ExitCode, String> {
    let warden = if json {
        // The diagnostics are in the first JSON line instead.
        build(config, false, false)?
    } else {
        load(config, false)?
    };
    let w = warden.clone();
    let _watch = warden
        .watch_with(move |report| {
            if json {
                // Every problem in the files as they are now, and which of them the change
                // introduced (why it was not applied).
                let line = warden_wire::v1::Reload {
                    reloaded: report.applied,
                    generation: report.generation,
                    rules: w.program().rules().count(),
                    diagnostics: warden_wire::v1::diagnostics(&report.diagnostics),
                    introduced: warden_wire::v1::diagnostics(&report.introduced),
                };
                let line = serde_json::to_string(&line).unwrap_or_default();
                println!("{line}");
            } else if report.applied {
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
    // Said once the watcher is in place: an edit made after this line is seen.
    let program = warden.program();
    let folders = warden.watched_folders();
    if json {
        let diagnostics = warden.diagnostics();
        let line = warden_wire::v1::Watching {
            watching: folders.iter().map(|f| f.display().to_string()).collect(),
            rules: program.rules().count(),
            diagnostics: warden_wire::v1::diagnostics(&diagnostics),
        };
        let line = serde_json::to_string(&line).unwrap_or_default();
        println!("{line}");
    } else {
        println!(
            "watching {} folder{} ({} rules loaded); edit a rule file to reload, Ctrl-C to stop",
            folders.len(),
            plural(folders.len()),
            program.rules().count()
        );
        for f in &folders {
            println!("  {}", f.display());
        }
    }
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}

fn run_bench(ticks: u32, rounds: u32, shell: bool, json: bool) -> Result<ExitCode, String> {
    let mut stdout = std::io::stdout().lock();
    let mut report = if json {
        warden_bench::Report::figures_only()
    } else {
        warden_bench::Report::text(&mut stdout)
    };
    if shell {
        warden_bench::run_shell(&mut report, rounds).map_err(|e| e.to_string())?;
    } else {
        warden_bench::run(&mut report, ticks, rounds).map_err(|e| e.to_string())?;
    }
    if json {
        let figures = report.to_json(ticks, rounds);
        drop(report);
        writeln!(stdout, "{figures:#}").map_err(|e| e.to_string())?;
    }
    Ok(ExitCode::SUCCESS)
}
