//! The `warden` command: check rule files, replay session traces, print compiled trees, run the
//! demo session and the benchmark. It only wires: every behavior lives in `warden-core`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use miette::{GraphicalReportHandler, GraphicalTheme};
use warden_core::trace::{explain_lines, outcome_lines, parse_trace};
use warden_core::{Diagnostic, Hook, RuleSource, SessionOptions, Store, Warden, bench};

mod demo;

/// The session the demo replays: a research question, supervised by the built-in rules.
pub const DEMO_TRACE: &str = include_str!("../../../examples/traces/research-session.jsonl");

#[derive(Parser)]
#[command(name = "warden", version, about = "A behavior-tree supervisor for LLM agents", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate rule folders; exit non-zero if any rule has an error.
    Check {
        /// Rule folders to check (the built-in rules when none is given).
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
        /// A rule folder (repeatable). The built-in rules when none is given.
        #[arg(long = "rules", value_name = "DIR")]
        rules: Vec<PathBuf>,
        /// Also load the built-in rules when --rules is given.
        #[arg(long)]
        builtin: bool,
        /// SQLite file for plugin state, so state carries from one replay to the next
        /// (in memory when absent).
        #[arg(long, value_name = "FILE")]
        db: Option<PathBuf>,
        /// Also print, for every event, why each rule did or did not fire.
        #[arg(long)]
        explain: bool,
        /// The session id (generated when absent).
        #[arg(long)]
        session: Option<String>,
    },
    /// Print the compiled behavior trees, per hook.
    Tree {
        /// Only this hook.
        #[arg(long)]
        hook: Option<String>,
        /// A rule folder (repeatable). The built-in rules when none is given.
        #[arg(long = "rules", value_name = "DIR")]
        rules: Vec<PathBuf>,
        /// Also load the built-in rules when --rules is given.
        #[arg(long)]
        builtin: bool,
    },
    /// Run a simulated research session supervised by the built-in rules, and show each hook,
    /// the rules that fired and the notifications.
    Demo {
        /// Replay this trace instead of the built-in one.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// A rule folder (repeatable) to use instead of the built-in rules.
        #[arg(long = "rules", value_name = "DIR")]
        rules: Vec<PathBuf>,
    },
    /// Measure a tick of 100 threshold rules against the same work written by hand.
    Bench {
        /// Ticks per measurement round.
        #[arg(long, default_value_t = 20_000)]
        ticks: u32,
        /// Measurement rounds (the median is reported).
        #[arg(long, default_value_t = 7)]
        rounds: u32,
    },
}

/// Runs the command line; the binary's `main`.
pub fn main() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { paths, json } => check(&paths, json),
        Command::Replay {
            trace,
            rules,
            builtin,
            db,
            explain,
            session,
        } => replay(
            &trace,
            &sources(&rules, builtin),
            db.as_deref(),
            explain,
            session,
        ),
        Command::Tree {
            hook,
            rules,
            builtin,
        } => tree(hook.as_deref(), &sources(&rules, builtin)),
        Command::Demo { trace, rules } => demo::run(trace.as_deref(), &sources(&rules, false)),
        Command::Bench { ticks, rounds } => run_bench(ticks.max(1), rounds.max(1)),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
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

fn sources(rules: &[PathBuf], builtin: bool) -> Vec<RuleSource> {
    let mut out = Vec::new();
    if rules.is_empty() || builtin {
        out.push(RuleSource::Builtin);
    }
    out.extend(rules.iter().cloned().map(RuleSource::Dir));
    out
}

fn build(sources: &[RuleSource], store: Option<Store>) -> Result<Warden, String> {
    let mut b = Warden::builder();
    for s in sources {
        b = match s {
            RuleSource::Builtin => b.builtin_rules(),
            RuleSource::Dir(d) => b.rules_dir(d),
        };
    }
    if let Some(store) = store {
        b = b.store(store);
    }
    b.build().map_err(|e| e.to_string())
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

fn check(paths: &[PathBuf], json: bool) -> Result<ExitCode, String> {
    let sources: Vec<RuleSource> = if paths.is_empty() {
        vec![RuleSource::Builtin]
    } else {
        paths.iter().cloned().map(RuleSource::Dir).collect()
    };
    let warden = build(&sources, None)?;
    let program = warden.program();
    let diagnostics = program.diagnostics();
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
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
        println!(
            "{}",
            serde_json::to_string_pretty(&items).map_err(|e| e.to_string())?
        );
    } else {
        eprint!("{}", render_diagnostics(diagnostics));
        let loaded = program.rules().count();
        println!(
            "{loaded} rule{} loaded ({} active), {errors} error{}, {} warning{}",
            plural(loaded),
            program.active_rules(),
            plural(errors),
            diagnostics.len() - errors,
            plural(diagnostics.len() - errors),
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
    trace: &Path,
    sources: &[RuleSource],
    db: Option<&Path>,
    explain: bool,
    session: Option<String>,
) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(trace)
        .map_err(|e| format!("cannot read {}: {e}", trace.display()))?;
    let store = match db {
        Some(path) => Store::open(path).map_err(|e| e.to_string())?,
        None => Store::in_memory().map_err(|e| e.to_string())?,
    };
    let warden = build(sources, Some(store))?;
    let diagnostics = warden.diagnostics();
    if !diagnostics.is_empty() {
        eprint!("{}", render_diagnostics(&diagnostics));
    }
    let mut session = warden.session_with(SessionOptions {
        id: session,
        explain,
        ..SessionOptions::default()
    });
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut bad_lines = 0;
    for (index, parsed) in parse_trace(&text) {
        let lines = match parsed {
            Ok(e) => {
                let outcome = session.tick(e.hook, e.event);
                let mut lines = if explain {
                    explain_lines(index, &outcome)
                } else {
                    Vec::new()
                };
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
    // The replay ran with every rule that loaded; still, say that something was wrong.
    let rule_errors = diagnostics.iter().any(Diagnostic::is_error);
    Ok(if bad_lines > 0 || rule_errors {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn tree(hook: Option<&str>, sources: &[RuleSource]) -> Result<ExitCode, String> {
    let hooks: Vec<Hook> = match hook {
        Some(h) => vec![h.parse::<Hook>().map_err(|e| e.to_string())?],
        None => Hook::ALL.to_vec(),
    };
    let warden = build(sources, None)?;
    let diagnostics = warden.diagnostics();
    if !diagnostics.is_empty() {
        eprint!("{}", render_diagnostics(&diagnostics));
    }
    let program = warden.program();
    for h in hooks {
        print!("{}", program.describe_hook(h));
    }
    Ok(ExitCode::SUCCESS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn run_bench(ticks: u32, rounds: u32) -> Result<ExitCode, String> {
    let dir = std::env::temp_dir().join(format!("warden-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let warden = bench::warden(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let mut session = warden.session();
    let mut explained = warden.session_with(SessionOptions {
        explain: true,
        ..SessionOptions::default()
    });
    let floor = bench::Floor::default();
    let mut sink = 0usize;
    let (mut ours, mut all, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
    // Warm up, then alternate so machine noise hits all three alike.
    for _ in 0..ticks.min(2000) {
        sink += bench::tick(&mut session)
            + bench::tick(&mut explained)
            + floor.tick(bench::TOKEN_USAGE).len();
    }
    let per_tick = |t: Instant| t.elapsed().as_nanos() as f64 / f64::from(ticks);
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..ticks {
            sink += floor.tick(std::hint::black_box(bench::TOKEN_USAGE)).len();
        }
        theirs.push(per_tick(t));
        let t = Instant::now();
        for _ in 0..ticks {
            sink += bench::tick(&mut session);
        }
        ours.push(per_tick(t));
        let t = Instant::now();
        for _ in 0..ticks {
            sink += bench::tick(&mut explained);
        }
        all.push(per_tick(t));
    }
    std::hint::black_box(sink);
    let (w, a, f) = (median(ours), median(all), median(theirs));
    println!(
        "one on_turn_start tick, {} threshold rules, {} firing (median of {rounds} rounds of {ticks} ticks):",
        bench::RULES,
        floor.tick(bench::TOKEN_USAGE).len()
    );
    println!("  hand-written Rust (the floor)                {f:>8.0} ns");
    println!(
        "  warden                                       {w:>8.0} ns  {:>5.1}x the floor",
        w / f
    );
    println!(
        "  warden, every rule evaluated (explain mode)  {a:>8.0} ns  {:>5.1}x the floor",
        a / f
    );
    bench_scripts(ticks, rounds)
}

/// The cost of a script: one rule on `on_turn_start` as an expression, as a script condition
/// reading the context, and as a coroutine resumed at every tick.
fn bench_scripts(ticks: u32, rounds: u32) -> Result<ExitCode, String> {
    let mut sessions = Vec::new();
    let mut dirs = Vec::new();
    for kind in [
        bench::OneRule::Expression,
        bench::OneRule::ScriptCondition,
        bench::OneRule::Coroutine,
    ] {
        let dir = std::env::temp_dir().join(format!(
            "warden-bench-{}-{}",
            std::process::id(),
            sessions.len()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let warden = bench::one_rule(&dir, kind);
        sessions.push(warden.session());
        dirs.push(dir);
    }
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    let mut sink = 0usize;
    for s in &mut sessions {
        for _ in 0..ticks.min(2000) {
            sink += bench::tick(s);
        }
    }
    let mut times = vec![Vec::new(); sessions.len()];
    for _ in 0..rounds {
        for (s, t) in sessions.iter_mut().zip(&mut times) {
            let start = Instant::now();
            for _ in 0..ticks {
                sink += bench::tick(s);
            }
            t.push(start.elapsed().as_nanos() as f64 / f64::from(ticks));
        }
    }
    std::hint::black_box(sink);
    let [e, s, c]: [f64; 3] = times
        .into_iter()
        .map(median)
        .collect::<Vec<_>>()
        .try_into()
        .map_err(|_| "internal: three measurements expected".to_string())?;
    println!("\none on_turn_start tick, one rule (median of {rounds} rounds of {ticks} ticks):");
    println!("  the rule as an expression                    {e:>8.0} ns");
    println!(
        "  the rule as a Lua script reading context     {s:>8.0} ns  (the script: {:>5.0} ns more)",
        s - e
    );
    println!(
        "  a waiting Lua coroutine, resumed             {c:>8.0} ns  (the resume: {:>5.0} ns more)",
        c - e
    );
    Ok(ExitCode::SUCCESS)
}
