//! `warden replay`: a session trace through a fresh session, from a file or standard input,
//! printed as JSON lines or as text for a person. Lines are written straight from each
//! outcome through a buffer; from standard input (or a pipe) each event's answer is flushed as
//! soon as the event is read, so another program can feed a session through a pipe.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use serde_json::json;
use warden_core::{Config, SessionOptions};
use warden_trace::read_trace;
use warden_wire::v1::replay::{
    write_bad_line, write_explain_lines, write_node_lines, write_outcome_lines,
};

use crate::narrate::Narrator;
use crate::{load, load_status};

/// What `warden replay` takes.
#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// The trace: one event per line, `{"hook": "on_turn_start", ...}`; `-` reads standard
    /// input, answering each event as soon as its line is read. With `--from`, an agent's
    /// transcript, or a folder of them (every `*.jsonl` under it).
    trace: PathBuf,
    /// Backtest: read the trace as this agent's transcript and replay the hook events its
    /// live hook would have been sent, on a session per transcript, with the rules in memory
    /// (the database is not touched).
    #[arg(long, value_enum, value_name = "AGENT")]
    from: Option<crate::backtest::Agent>,
    /// With --from: print a summary instead of each firing: per rule, the events it fired on,
    /// its decisions, the sessions it would have stopped and the first examples; per session,
    /// the calls that would have been refused.
    #[arg(long, requires = "from", conflicts_with = "against")]
    summary: bool,
    /// With --from: replay the transcripts with the rules of this configuration file too, and
    /// print only the decisions that change between them.
    #[arg(long, requires = "from", value_name = "WARDEN_TOML")]
    against: Option<PathBuf>,
    /// With --from: print the Warden events the transcripts make, as a trace (`warden replay`
    /// reads it; a rule test's events can be taken from it), instead of what fired.
    #[arg(long, requires = "from", conflicts_with_all = ["summary", "against"])]
    print_trace: bool,
    /// Also print, for every event, why each rule did or did not fire.
    #[arg(long)]
    explain: bool,
    /// Also print, for every event, each behavior node that ran and what it returned
    /// (implies --explain).
    #[arg(long = "trace")]
    nodes: bool,
    /// End each event's lines with one that says it is done (`"done": true`, with the rules
    /// that fired), even when nothing fired: a program feeding events through a pipe then
    /// knows when each answer is complete.
    #[arg(long)]
    all: bool,
    /// `json`: JSON lines, for programs; `text`: each event and what was decided, for a
    /// person (as `warden demo` prints them).
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Also print, for every event with notifications due, the block an agent's context
    /// gets (`{"event": N, "hook": ..., "render": "..."}`): each message once, most urgent
    /// first, as every host injects it.
    #[arg(long)]
    render: bool,
    /// The session id (generated when absent).
    #[arg(long)]
    session: Option<String>,
}

/// How `warden replay` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    // JSON lines.
    Json,
    // Text, as the demo prints it.
    Text,
}

/// The line of a trace from which a replay runs long: the process's host is told
/// ([`crate::Host::serving`]), and the `warden` binary takes its blocks from mimalloc from
/// then on. A replay allocates and frees a few blocks of every size at each event, which
/// mimalloc's per-size free lists serve faster than the system's allocator; a short replay
/// (a rule test, the seed's 42-event session) stays on the system's, which starts faster.
const LONG_TRACE: usize = 1_000;

/// How many lines of a trace file are read ahead of the ticks (see [`run`]).
const READ_AHEAD: usize = 32;

pub(crate) fn run(config: &Config, a: &ReplayArgs, long_run: fn()) -> Result<ExitCode, String> {
    if a.from.is_some() {
        if a.explain || a.nodes || a.all || a.render || a.session.is_some() {
            return Err(
                "--explain, --trace, --all, --render and --session replay Warden's own traces; a backtest (--from) prints what fired per event, or --summary"
                    .into(),
            );
        }
        return crate::backtest::run(
            config,
            &crate::backtest::BacktestArgs {
                agent: a.from.unwrap_or(crate::backtest::Agent::ClaudeCode),
                path: &a.trace,
                summary: a.summary,
                json: a.format == Format::Json,
                against: a.against.as_deref(),
                print_trace: a.print_trace,
            },
        );
    }
    let stdin = a.trace.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_string()
    } else {
        a.trace.display().to_string()
    };
    // Read as it is replayed, a line at a time: a trace may be long, or a pipe.
    let (input, streaming): (Box<dyn BufRead>, bool) = if stdin {
        (Box::new(std::io::stdin().lock()), true)
    } else {
        let file = std::fs::File::open(&a.trace).map_err(|e| format!("cannot read {name}: {e}"))?;
        // A file that is not a regular one (a named pipe) is fed as it goes, as stdin is.
        let streaming = !file.metadata().is_ok_and(|m| m.is_file());
        (Box::new(std::io::BufReader::new(file)), streaming)
    };
    let warden = load(config, false)?;
    // The replay runs with every rule that loaded; still, it says that something was wrong.
    let loaded = load_status(&warden);
    let explain = a.explain || a.nodes;
    let mut narrator = (a.format == Format::Text).then(|| Narrator::new(explain, a.nodes));
    let mut session = warden.session_with(SessionOptions {
        id: a.session.clone(),
        // The narrator reads where a behavior waits from the node trace.
        explain: explain || narrator.is_some(),
        user: Some(config.user.clone()),
        project: Some(config.project.clone()),
    });
    // Buffered, each line written straight from the outcome; flushed after every event when
    // the trace comes through a pipe, so that each answer goes out as its event is read.
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut bad_lines = 0;
    let mut unsaved = 0;
    // A file is read a few lines ahead of the ticks. Reading a line and ticking its event
    // each run more code than the processor's instruction cache holds: read in turn with
    // each tick, the reader's code was fetched again at every event. A stream is read a line
    // at a time, so that each answer goes out as its event comes in.
    let ahead = if streaming { 1 } else { READ_AHEAD };
    let mut lines = read_trace(input);
    let mut batch = Vec::with_capacity(ahead);
    loop {
        batch.extend(lines.by_ref().take(ahead));
        if batch.is_empty() {
            break;
        }
        for (index, parsed) in batch.drain(..) {
            if index == LONG_TRACE {
                long_run();
            }
            let written = match (parsed, &mut narrator) {
                (Ok(e), Some(n)) => {
                    let mut text = n.event(index, e.hook, &e.event);
                    let outcome = session.tick_shared(e.hook, e.event);
                    if outcome.unsaved.is_some() {
                        unsaved += 1;
                    }
                    text.push_str(&n.outcome(&outcome));
                    out.write_all(text.as_bytes())
                }
                (Ok(e), None) => {
                    let hook = e.hook;
                    let outcome = session.tick_shared(e.hook, e.event);
                    if outcome.unsaved.is_some() {
                        unsaved += 1;
                    }
                    (|| {
                        if a.nodes {
                            write_node_lines(&mut out, index, &outcome)?;
                        }
                        if explain {
                            write_explain_lines(&mut out, index, &outcome)?;
                        }
                        write_outcome_lines(&mut out, index, &outcome)?;
                        if let (true, Some(text)) = (a.render, outcome.rendered()) {
                            let line = json!({"event": index, "hook": hook.name(), "render": text});
                            writeln!(out, "{line}")?;
                        }
                        if a.all {
                            let line = json!({
                                "event": index,
                                "hook": hook.name(),
                                "done": true,
                                "fired": outcome.fired(),
                                "errors": outcome.errors.len(),
                            });
                            writeln!(out, "{line}")?;
                        }
                        Ok(())
                    })()
                }
                (Err(e), narrator) => {
                    bad_lines += 1;
                    let error = format!("{name}: {e}");
                    match narrator {
                    Some(n) => out.write_all(n.unreadable(index, &error).as_bytes()),
                    None => write_bad_line(&mut out, index, &error).and_then(|()| {
                        if a.all {
                            let line = json!({"event": index, "hook": null, "done": true, "fired": [], "errors": 1});
                            writeln!(out, "{line}")?;
                        }
                        Ok(())
                    }),
                }
                }
            };
            written.map_err(|e| e.to_string())?;
            if streaming {
                out.flush().map_err(|e| e.to_string())?;
            }
        }
    }
    if let Some(n) = &narrator {
        writeln!(out, "\n{}", n.totals().trim_end()).map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    if unsaved > 0 {
        eprintln!(
            "error: {unsaved} event(s) could not be saved (their errors say why): their state writes and execution-log rows are lost"
        );
    }
    Ok(if bad_lines > 0 || unsaved > 0 {
        ExitCode::FAILURE
    } else {
        loaded
    })
}
