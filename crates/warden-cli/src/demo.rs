//! `warden demo`: a simulated agent session, printed so a person can follow the supervisor.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use warden_core::trace::{TraceError, TraceEvent, read_trace};
use warden_core::{Config, Effect, Evaluation, Event, Hook, Outcome};

use crate::{DEMO_TRACE, load};

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
    let mut session = warden.session();
    let (mut fired, mut injected, mut errors, mut events) = (0, 0, 0, 0);
    for (index, parsed) in lines {
        let e = match parsed {
            Ok(e) => e,
            Err(err) => {
                println!("[{index:>2}] unreadable trace line: {err}");
                errors += 1;
                continue;
            }
        };
        events += 1;
        println!(
            "[{index:>2}] {:<17} {}",
            e.hook.name(),
            summary(e.hook, &e.event)
        );
        let outcome = session.tick(e.hook, e.event);
        print!("{}", decisions(&outcome));
        fired += outcome.fired().len();
        injected += outcome.inject.len();
        errors += outcome.errors.len();
    }
    println!(
        "\n{events} events, {fired} rule firing{}, {injected} notification{} injected, {errors} error{}.",
        if fired == 1 { "" } else { "s" },
        if injected == 1 { "" } else { "s" },
        if errors == 1 { "" } else { "s" },
    );
    if trace.is_none() {
        println!(
            "Replay it as JSON lines with: warden replay examples/traces/research-session.jsonl"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn summary(hook: Hook, e: &Event) -> String {
    let mut s = String::new();
    match hook {
        Hook::OnQueryStart => {
            if let Some(q) = &e.query {
                let _ = write!(s, "\"{}\"", q.text);
            }
        }
        Hook::OnTurnStart => {
            if let Some(t) = &e.turn {
                if let Some(n) = t.number {
                    let _ = write!(s, "turn {n}");
                }
                if let Some(u) = t.token_usage {
                    let _ = write!(s, ", tokens {:.0}%", u * 100.0);
                }
                if let Some(i) = t.iteration_count {
                    let _ = write!(s, ", iteration {i}");
                }
            }
        }
        Hook::OnToolCall | Hook::OnToolComplete | Hook::OnToolFailure => {
            let name = e.tool.as_ref().map_or("?", |t| t.name.as_str());
            let _ = write!(s, "{name}");
            if let Some(count) = e.result.as_ref().and_then(|r| r.get("count")) {
                let _ = write!(s, " -> {count} results");
            }
            if let Some(err) = &e.error {
                let _ = write!(s, " failed: {err}");
            }
        }
        Hook::OnModeChange => {
            if let Some(d) = &e.data {
                let _ = write!(s, "{} -> {}", d["from"], d["to"]);
            }
        }
        Hook::OnTurnEnd | Hook::OnSessionEnd => {
            if let Some(m) = &e.message {
                let _ = write!(s, "{}: \"{}\"", m.role, m.content);
            }
        }
    }
    s
}

fn decisions(outcome: &Outcome) -> String {
    let mut s = String::new();
    for (rule, evaluation) in outcome.trace() {
        match evaluation {
            Evaluation::Fired => {
                let _ = writeln!(s, "       fired        {rule}");
            }
            Evaluation::Undetermined(why) => {
                let _ = writeln!(s, "       undetermined {rule}: {why}");
            }
            Evaluation::Suppressed(why) => {
                let _ = writeln!(s, "       held back    {rule}: {why}");
            }
            Evaluation::Running => {
                let _ = writeln!(
                    s,
                    "       waiting      {rule} (it carries on at a later hook)"
                );
            }
            _ => {}
        }
    }
    for effect in &outcome.effects {
        match effect {
            Effect::NotifySelf(n) if !n.deliver_at.is_due_at(outcome.hook) => {
                let _ = writeln!(
                    s,
                    "       queued for {}: {}",
                    n.deliver_at.name(),
                    n.message
                );
            }
            Effect::Log { level, message, .. } => {
                let _ = writeln!(s, "       log {}: {message}", level.name());
            }
            Effect::SetState {
                plugin, key, value, ..
            } => {
                let _ = writeln!(s, "       state {plugin}.{key} = {value}");
            }
            Effect::EmitEvent {
                event_type,
                payload,
                ..
            } => {
                let _ = writeln!(s, "       event {event_type} {payload}");
            }
            Effect::NotifySelf(_)
            | Effect::EnrichContext { .. }
            | Effect::Decide { .. }
            | Effect::Rewrite { .. } => {}
        }
    }
    if let Some(r) = &outcome.ruling {
        let input = r
            .input
            .as_ref()
            .map(|i| format!(" with {i}"))
            .unwrap_or_default();
        let _ = writeln!(s, "   ==> {} by {}{input}: {}", r.name(), r.rule, r.reason);
    }
    if let Some(e) = &outcome.enrichment {
        let ids = e.selected_ids();
        let _ = writeln!(
            s,
            "       knowledge    {} mode, {} of {} tokens: {}",
            e.mode,
            e.tokens_used,
            e.budget,
            if ids.is_empty() {
                "no source".to_string()
            } else {
                ids.join(", ")
            }
        );
    }
    for n in &outcome.inject {
        let _ = writeln!(
            s,
            "   >>> inject [{} {}] {}",
            n.priority.name(),
            n.category,
            n.message
        );
    }
    for h in &outcome.halted {
        let _ = writeln!(s, "       halted       {}: {}", h.rule, h.reason);
    }
    for e in &outcome.errors {
        let _ = writeln!(
            s,
            "   !!! error {}: {}",
            e.rule.as_deref().unwrap_or("(event)"),
            e.error
        );
    }
    s
}
