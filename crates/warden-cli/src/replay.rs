//! `warden replay`: a session trace through a fresh session, from a file or standard input,
//! printed as JSON lines or as text for a person. Each event's answer is written, and flushed,
//! as soon as the event is read, so another program can feed a session through a pipe.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;
use serde_json::json;
use warden_core::trace::{explain_lines, node_lines, outcome_lines, read_trace};
use warden_core::{Config, SessionOptions};

use crate::narrate::Narrator;
use crate::{load, load_status};

/// What `warden replay` takes.
#[derive(clap::Args, Debug)]
pub(crate) struct ReplayArgs {
    /// The trace: one event per line, `{"hook": "on_turn_start", ...}`; `-` reads standard
    /// input, answering each event as soon as its line is read.
    trace: PathBuf,
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

pub(crate) fn run(config: &Config, a: &ReplayArgs) -> Result<ExitCode, String> {
    let stdin = a.trace.as_os_str() == "-";
    let name = if stdin {
        "standard input".to_string()
    } else {
        a.trace.display().to_string()
    };
    // Read as it is replayed, a line at a time: a trace may be long, or a pipe.
    let input: Box<dyn BufRead> = if stdin {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&a.trace).map_err(|e| format!("cannot read {name}: {e}"))?,
        ))
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
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut bad_lines = 0;
    let mut unsaved = 0;
    for (index, parsed) in read_trace(input) {
        let mut text = String::new();
        match (parsed, &mut narrator) {
            (Ok(e), Some(n)) => {
                text.push_str(&n.event(index, e.hook, &e.event));
                let outcome = session.tick(e.hook, e.event);
                if outcome.unsaved.is_some() {
                    unsaved += 1;
                }
                text.push_str(&n.outcome(&outcome));
            }
            (Ok(e), None) => {
                let hook = e.hook;
                let outcome = session.tick(e.hook, e.event);
                let mut lines = if a.nodes {
                    node_lines(index, &outcome)
                } else {
                    Vec::new()
                };
                if explain {
                    lines.extend(explain_lines(index, &outcome));
                }
                lines.extend(outcome_lines(index, &outcome));
                if let (true, Some(text)) = (a.render, &outcome.rendered) {
                    lines.push(json!({"event": index, "hook": hook.name(), "render": text}));
                }
                if outcome.unsaved.is_some() {
                    unsaved += 1;
                }
                if a.all {
                    lines.push(json!({
                        "event": index,
                        "hook": hook.name(),
                        "done": true,
                        "fired": outcome.fired(),
                        "errors": outcome.errors.len(),
                    }));
                }
                for line in lines {
                    text.push_str(&format!("{line}\n"));
                }
            }
            (Err(e), narrator) => {
                bad_lines += 1;
                let error = format!("{name}: {e}");
                match narrator {
                    Some(n) => text.push_str(&n.unreadable(index, &error)),
                    None => {
                        text.push_str(&format!(
                            "{}\n",
                            json!({"event": index, "rule": null, "error": error})
                        ));
                        if a.all {
                            text.push_str(&format!(
                                "{}\n",
                                json!({"event": index, "hook": null, "done": true, "fired": [], "errors": 1})
                            ));
                        }
                    }
                }
            }
        }
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    if let Some(n) = &narrator {
        writeln!(out, "\n{}", n.totals().trim_end()).map_err(|e| e.to_string())?;
    }
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
