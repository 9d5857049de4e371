//! `warden demo`: a simulated agent session, printed so a person can follow the supervisor.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use warden_core::{Config, SessionOptions};
use warden_trace::{TraceError, TraceEvent, read_trace};

use crate::narrate::Narrator;
use crate::{DEMO_TRACE, load};

/// Where the demo's session is in a checkout.
const TRACE_FILE: &str = "examples/traces/research-session.jsonl";

pub(crate) fn run(trace: Option<&Path>, config: &Config) -> Result<ExitCode, String> {
    // Read once, a line at a time (the trace may be a pipe), and kept: the demo needs its
    // users before it plays its events. A demo trace is a short session.
    let lines: Vec<(usize, Result<TraceEvent, TraceError>)> = match trace {
        Some(path) => read_trace(std::io::BufReader::new(
            std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        ))
        .collect(),
        None => read_trace(DEMO_TRACE.as_bytes()).collect(),
    };
    let warden = load(config, true)?;
    let program = warden.program();
    // The built-in behavior is off unless switched on: the demo switches it on for the
    // session's users (this store is in memory, so nothing outlives the demo).
    const BEHAVIOR: &str = "research-then-synthesize";
    let mut behavior = false;
    if program.rule_keys().any(|k| k == BEHAVIOR) {
        let mut users = vec![warden_core::DEFAULT_ID.to_string()];
        users.extend(lines.iter().filter_map(|(_, e)| {
            e.as_ref()
                .ok()?
                .event
                .user
                .as_ref()
                .and_then(|u| u.id.clone())
        }));
        for u in users {
            behavior |= warden.set_rule_enabled(&u, BEHAVIOR, true).is_ok();
        }
    }
    println!(
        "Warden demo: an agent session supervised by {} rule{}{}.",
        program.active_rules(),
        if program.active_rules() == 1 { "" } else { "s" },
        if behavior {
            format!(" and the built-in behavior `{BEHAVIOR}`, switched on for it")
        } else {
            String::new()
        }
    );
    println!(
        "Each line is a hook the agent loop reported; indented lines are what Warden decided.\n"
    );
    // Explain mode: the narrator reads where a behavior waits from its node trace.
    let mut session = warden.session_with(SessionOptions {
        explain: true,
        ..SessionOptions::default()
    });
    let mut narrator = Narrator::new(false, false);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let write = |out: &mut std::io::StdoutLock<'_>, text: &str| {
        out.write_all(text.as_bytes()).map_err(|e| e.to_string())
    };
    for (index, parsed) in lines {
        match parsed {
            Ok(e) => {
                write(&mut out, &narrator.event(index, e.hook, &e.event))?;
                let outcome = session.tick_shared(e.hook, e.event);
                write(&mut out, &narrator.outcome(&outcome))?;
            }
            Err(err) => write(&mut out, &narrator.unreadable(index, &err.to_string()))?,
        }
    }
    write(&mut out, &format!("\n{}", narrator.totals()))?;
    if trace.is_none() {
        write(
            &mut out,
            &format!("Replay it as JSON lines with: {}\n", replay_hint()),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A command that replays the demo's session as printed, from where the demo was run: with
/// `cargo run` when the demo was run by cargo, else with the program as it was called, and
/// the trace file when it is there (a checkout), else the trace the demo prints itself.
fn replay_hint() -> String {
    let by_cargo = std::env::var_os("CARGO").is_some()
        && std::env::var_os("CARGO_MANIFEST_DIR").is_some()
        && std::env::var_os("CARGO_PKG_NAME").is_some_and(|n| n == "warden");
    let program = if by_cargo {
        "cargo run -q --".to_string()
    } else {
        let called = std::env::args().next().unwrap_or_default();
        // As the shell was asked: a bare name is found on the PATH, a path is run as given.
        if called.is_empty() || called.contains(char::is_whitespace) {
            "warden".to_string()
        } else {
            called
        }
    };
    if Path::new(TRACE_FILE).is_file() {
        format!("{program} replay {TRACE_FILE}")
    } else {
        format!("{program} demo --print-trace | {program} replay -")
    }
}
