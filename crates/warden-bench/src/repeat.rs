//! One scenario run a given number of times, and nothing else: what a profiler (perf,
//! callgrind) looks into, and what `benches/instructions.sh` counts the instructions of
//! (`warden bench --repeat SCENARIO --ticks N`). The script runs each scenario at two counts and
//! divides the difference, so that setting it up (loading the rules, the session before the
//! measured part) is left out.

use std::hint::black_box;
use std::path::Path;

use warden_core::{Event, Hook, Session, SessionOptions, Warden};
use warden_store::Store;
use warden_wire::v1::line::parse_line;
use warden_wire::v1::replay::write_outcome_lines;

use crate::long_session::long_session;
use crate::measure::with_dir;
use crate::scenarios::{self as bench, BareResume, Floor, OneRule};

/// The scenarios [`repeat`] runs, each with what one repetition is.
pub const REPEATABLE: &[(&str, &str)] = &[
    (
        "floor",
        "the hand-written floor of `hundred-rules`: an `if` per rule",
    ),
    (
        "hundred-rules",
        "one on_turn_start tick, 100 threshold rules, 10 firing",
    ),
    (
        "expression-three-fields",
        "one tick of one rule whose condition reads three context fields, as an expression",
    ),
    ("lua-three-fields", "the same condition as a Lua script"),
    (
        "expression",
        "one tick of one rule, `context.turn.token_usage > 0.9` as an expression",
    ),
    (
        "lua-resume",
        "one tick resuming a waiting Lua coroutine (the same rule as `expression` beside it)",
    ),
    (
        "runtime-resume",
        "the coroutine of `lua-resume` resumed by the script runtime alone, no session or tick",
    ),
    (
        "guardrails-tool-call",
        "one on_tool_call of Bash (`cargo test --workspace`) with builtin:guardrails",
    ),
    (
        "durable-save",
        "Session::save of a session of 1,000 events to a SQLite file",
    ),
    (
        "replay-floor",
        "the floor of `replay`: each line of a 300-turn session read into a JSON value",
    ),
    (
        "replay",
        "a 300-turn session (2,391 events) replayed with the built-in rules: read, tick, write",
    ),
];

/// Turns of the session the replay scenarios replay at each repetition.
const REPLAY_TURNS: u32 = 300;

/// Why a scenario did not run ([`repeat`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepeatError {
    /// No scenario has that name.
    UnknownScenario(String),
    /// Setting the scenario up failed (a temporary folder, the rules, writing its output).
    Setup(String),
}

impl std::fmt::Display for RepeatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RepeatError::UnknownScenario(name) => {
                let names: Vec<&str> = REPEATABLE.iter().map(|(n, _)| *n).collect();
                write!(
                    f,
                    "no scenario `{name}`: the scenarios are {}",
                    names.join(", ")
                )
            }
            RepeatError::Setup(why) => write!(f, "the scenario could not be set up: {why}"),
        }
    }
}

impl std::error::Error for RepeatError {}

fn setup(e: impl std::fmt::Display) -> RepeatError {
    RepeatError::Setup(e.to_string())
}

/// Runs the scenario `name` `times` times. Errs with the known names when there is no such
/// scenario, or when setting it up fails.
pub fn repeat(name: &str, times: u32) -> Result<(), RepeatError> {
    let Some(_) = REPEATABLE.iter().find(|(n, _)| *n == name) else {
        return Err(RepeatError::UnknownScenario(name.to_string()));
    };
    let mut sink = 0usize;
    match name {
        "floor" => {
            let floor = Floor::default();
            for _ in 0..times {
                sink += floor.tick(black_box(bench::TOKEN_USAGE)).len();
            }
        }
        "runtime-resume" => {
            let mut bare = BareResume::new();
            for _ in 0..times {
                sink += bare.resume();
            }
        }
        "durable-save" => {
            with_dir("repeat", |dir| durable_save(dir, times))
                .map_err(setup)?
                .map_err(RepeatError::Setup)?;
        }
        "replay-floor" => {
            let trace = long_session(REPLAY_TURNS);
            for _ in 0..times {
                for line in trace.lines() {
                    sink += usize::from(
                        serde_json::from_str::<serde_json::Value>(black_box(line)).is_ok(),
                    );
                }
            }
        }
        "replay" => {
            let trace = long_session(REPLAY_TURNS);
            let warden = Warden::builder().builtin_rules().build().map_err(setup)?;
            let mut out = Vec::new();
            for _ in 0..times {
                let mut session = warden.session();
                for (i, line) in trace.lines().enumerate() {
                    if let Ok(e) = parse_line(i, black_box(line)) {
                        let outcome = session.tick_shared(e.hook, e.event);
                        write_outcome_lines(&mut out, i, &outcome).map_err(setup)?;
                    }
                }
                sink += out.len();
                out.clear();
            }
        }
        _ => {
            let made = with_dir(
                "repeat",
                |dir| -> Result<(Warden, Option<ToolCall>), String> {
                    Ok(match name {
                        "hundred-rules" => (bench::warden(dir), None),
                        "expression" => (bench::one_rule(dir, OneRule::Expression), None),
                        "expression-three-fields" => {
                            (bench::one_rule(dir, OneRule::ExpressionThreeFields), None)
                        }
                        "lua-three-fields" => {
                            (bench::one_rule(dir, OneRule::ScriptThreeFields), None)
                        }
                        "lua-resume" => (bench::one_rule(dir, OneRule::Coroutine), None),
                        _ => (guardrails()?, Some(ToolCall)),
                    })
                },
            )
            .map_err(setup)?
            .map_err(RepeatError::Setup)?;
            let (warden, tool_call) = made;
            let mut session: Session = warden.session();
            for _ in 0..times {
                sink += match tool_call {
                    None => bench::tick(&mut session),
                    Some(ToolCall) => guardrails_tick(&mut session),
                };
            }
        }
    }
    black_box(sink);
    Ok(())
}

/// The guardrails scenario ticks a tool call rather than a turn start.
#[derive(Clone, Copy)]
struct ToolCall;

fn guardrails() -> Result<Warden, String> {
    Warden::builder()
        .builtin_rules()
        .plugins_dir("builtin:guardrails")
        .build()
        .map_err(|e| e.to_string())
}

fn guardrails_tick(session: &mut Session) -> usize {
    let outcome = session.tick(
        Hook::OnToolCall,
        Event::tool_call(
            "Bash",
            serde_json::json!({"command": "cargo test --workspace 2>&1 | tail -20"}),
        )
        .at(0.0),
    );
    outcome.effects.len() + usize::from(outcome.ruling.is_some())
}

/// `times` saves of a durable session that has seen the first 1,000 events of the long
/// session, with the built-in rules and the 100 threshold rules.
fn durable_save(dir: &Path, times: u32) -> Result<(), String> {
    for (name, toml) in bench::rule_files() {
        std::fs::write(dir.join(name), toml).map_err(|e| e.to_string())?;
    }
    let store = Store::open(dir.join("save.db")).map_err(|e| e.to_string())?;
    let warden = Warden::builder()
        .builtin_rules()
        .rules_dir(dir)
        .store(store)
        .build()
        .map_err(|e| e.to_string())?;
    let mut session = warden
        .open_session("bench", SessionOptions::default())
        .map_err(|e| e.to_string())?;
    for (i, line) in long_session(200).lines().take(1000).enumerate() {
        if let Ok(e) = parse_line(i, line) {
            black_box(session.tick_shared(e.hook, e.event));
        }
    }
    for _ in 0..times {
        session.save().map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_repeats_and_an_unknown_one_is_named() {
        for (name, _) in REPEATABLE {
            repeat(name, 2).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let err = repeat("hundred", 1).unwrap_err().to_string();
        assert!(
            err.contains("no scenario `hundred`") && err.contains("hundred-rules"),
            "{err}"
        );
    }
}
