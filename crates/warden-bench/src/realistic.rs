//! The realistic scenarios: what a tick costs over a long session, and what a session costs
//! to keep, each beside a floor measured in the same run.
//!
//! - a long session (`long_session`): the whole replay (read, tick, write each line) against
//!   reading the lines only; and the cost per event at events 100, 1,000 and 20,000, which
//!   must not grow with what the session has seen;
//! - 10,000 sessions of 100 rules kept at once: the memory per session, beside the memory of
//!   the history they keep;
//! - a Lua condition reading three context fields, beside the same expression;
//! - loading and compiling 100 and 1,000 rules, beside reading and parsing their files;
//! - the cost per event as plugin state grows (5,000 keys; a rule writing a key per turn) and
//!   as a session meets a new tool at every event;
//! - saving a durable session of 1,000 events after a tick (SQLite, a file), beside one write
//!   of a value of the same size through the same store.

use std::hint::black_box;
use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use warden_core::{
    DEFAULT_ID, Event, Hook, Session, SessionFacts, SessionOptions, StateScope, Store, Warden,
};
use warden_store::StateWrite;
use warden_wire::v1::line::parse_line;
use warden_wire::v1::replay::write_outcome_lines;

use crate::long_session::long_session;
use crate::measure::{median, with_dir};
use crate::report::Report;
use crate::scenarios::{self as bench, OneRule};

/// The sizes of the realistic scenarios.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Turns of the long session (3,000: 23,872 events).
    pub turns: u32,
    /// Where its cost per event is measured (event indices).
    pub at: [usize; 3],
    /// Events measured at each of them.
    pub window: usize,
    /// Sessions kept at once.
    pub sessions: usize,
    /// Rule counts loaded cold.
    pub rules: [usize; 2],
    /// Keys of plugin state already stored.
    pub state_keys: usize,
}

impl Sizes {
    /// The sizes `warden bench` measures.
    pub const FULL: Sizes = Sizes {
        turns: 3000,
        at: [100, 1_000, 20_000],
        window: 256,
        sessions: 10_000,
        rules: [100, 1_000],
        state_keys: 5_000,
    };

    /// Small sizes, to check the scenarios run (tests).
    pub const SMALL: Sizes = Sizes {
        turns: 40,
        at: [10, 50, 200],
        window: 16,
        sessions: 50,
        rules: [5, 10],
        state_keys: 20,
    };
}

/// Measures the realistic scenarios and writes their report to `out`: the median of `rounds`
/// rounds each.
pub fn run_realistic(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    let rounds = rounds.max(1);
    long_session_replay(out, rounds, sizes)?;
    many_sessions(out, sizes)?;
    lua_three_fields(out, rounds)?;
    cold_load(out, rounds, sizes)?;
    growing_state(out, rounds, sizes)?;
    new_tool_every_event(out, rounds, sizes)?;
    durable_save(out, rounds, sizes)
}

/// An error of the engine, as the report's writer's error.
fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::NAN }
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// (a) and (b): the long session, replayed whole and read only, with the cost per event at
/// three points.
fn long_session_replay(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    let trace = long_session(sizes.turns);
    let lines: Vec<&str> = trace.lines().collect();
    let warden = Warden::builder()
        .builtin_rules()
        .build()
        .expect("the built-in rules load");
    let at: Vec<usize> = sizes
        .at
        .iter()
        .map(|&a| a.min(lines.len().saturating_sub(sizes.window)))
        .collect();
    let mut whole = Vec::new();
    let mut floor = Vec::new();
    let mut windows = vec![Vec::new(); at.len()];
    let mut floor_windows = vec![Vec::new(); at.len()];
    let mut sink = io::sink();
    for round in 0..=rounds {
        // The floor: every line read into a JSON value, nothing else.
        let mut starts = vec![None; at.len()];
        let t = Instant::now();
        for (i, line) in lines.iter().enumerate() {
            mark(
                &at,
                sizes.window,
                i,
                &mut starts,
                &mut floor_windows,
                round > 0,
            );
            black_box(serde_json::from_str::<serde_json::Value>(line).ok());
        }
        let floor_ns = t.elapsed().as_nanos() as f64;
        // The replay: each line read, ticked, and its output written.
        let mut session = warden.session();
        let mut starts = vec![None; at.len()];
        let t = Instant::now();
        for (i, line) in lines.iter().enumerate() {
            mark(&at, sizes.window, i, &mut starts, &mut windows, round > 0);
            if let Ok(e) = parse_line(i, line) {
                let outcome = session.tick_shared(e.hook, e.event);
                write_outcome_lines(&mut sink, i, &outcome)?;
            }
        }
        let whole_ns = t.elapsed().as_nanos() as f64;
        // Round 0 warms up.
        if round > 0 {
            floor.push(floor_ns);
            whole.push(whole_ns);
        }
    }
    let (w, f) = (median(whole) / 1e6, median(floor) / 1e6);
    out.figure("long_session.parse_floor", f, "ms");
    out.beside("long_session.replay", w, "ms", "long_session.parse_floor");
    writeln!(
        out,
        "\na long realistic session ({} turns, {} events, the built-in rules; median of {rounds} rounds):",
        thousands(sizes.turns as usize),
        thousands(lines.len())
    )?;
    writeln!(
        out,
        "  reading each line into a JSON value (the floor)          {f:>8.1} ms"
    )?;
    writeln!(
        out,
        "  replaying it: read, tick, write each line                {w:>8.1} ms  {:>5.2}x the floor",
        ratio(w, f)
    )?;
    let per: Vec<f64> = windows
        .into_iter()
        .map(|w| median(w) / sizes.window as f64)
        .collect();
    let per_floor: Vec<f64> = floor_windows
        .into_iter()
        .map(|w| median(w) / sizes.window as f64)
        .collect();
    for (i, a) in at.iter().enumerate() {
        out.figure(&format!("long_session.floor_at_{a}"), per_floor[i], "ns");
        out.beside(
            &format!("long_session.per_event_at_{a}"),
            per[i],
            "ns",
            &format!("long_session.per_event_at_{}", at[0]),
        );
        writeln!(
            out,
            "  per event at event {:<7} (over {} events)           {:>8.0} ns  {:>5.2}x event {}  ({:.2}x its floor)",
            thousands(*a),
            sizes.window,
            per[i],
            ratio(per[i], per[0]),
            thousands(at[0]),
            ratio(per[i], per_floor[i])
        )?;
    }
    Ok(())
}

/// Times the windows of a pass: called before line `i`.
fn mark(
    at: &[usize],
    window: usize,
    i: usize,
    starts: &mut [Option<Instant>],
    times: &mut [Vec<f64>],
    keep: bool,
) {
    for (k, &a) in at.iter().enumerate() {
        if i == a {
            starts[k] = Some(Instant::now());
        } else if i == a + window
            && let Some(s) = starts[k].take()
            && keep
        {
            times[k].push(s.elapsed().as_nanos() as f64);
        }
    }
}

/// This process's resident memory, in bytes (Linux; `None` elsewhere).
fn resident() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// (c): sessions of 100 rules kept at once, each having ticked once: the memory each takes,
/// beside the memory of the facts (the history) each keeps.
fn many_sessions(out: &mut Report<'_>, sizes: Sizes) -> io::Result<()> {
    let warden = with_dir("sessions", bench::warden)?;
    let n = sizes.sessions;
    let event = || {
        Event::new()
            .with_token_usage(bench::TOKEN_USAGE)
            .with_user("ada")
            .at(0.0)
    };
    let (Some(r0), mut facts) = (resident(), Vec::with_capacity(n)) else {
        return writeln!(
            out,
            "\n{n} sessions: not measured (no /proc/self/status here)"
        );
    };
    for _ in 0..n {
        let mut f = SessionFacts::new(DEFAULT_ID, DEFAULT_ID, 50);
        f.update(Hook::OnTurnStart, &event(), 0.0);
        facts.push(f);
    }
    let r1 = resident().unwrap_or(r0);
    let mut sessions: Vec<Session> = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = warden.session();
        black_box(s.tick(Hook::OnTurnStart, event()));
        sessions.push(s);
    }
    let r2 = resident().unwrap_or(r1);
    let history = r1.saturating_sub(r0) as f64 / n as f64;
    let session = r2.saturating_sub(r1) as f64 / n as f64;
    out.figure("many_sessions.facts", history / 1024.0, "KB");
    out.beside(
        "many_sessions.session",
        session / 1024.0,
        "KB",
        "many_sessions.facts",
    );
    out.figure(
        "many_sessions.beyond_facts",
        (session - history) / 1024.0,
        "KB",
    );
    writeln!(
        out,
        "\n{} sessions of {} rules kept at once, each after one tick (resident memory):",
        thousands(n),
        bench::RULES
    )?;
    writeln!(
        out,
        "  the facts one keeps (history, turn, user; the floor)    {:>8.2} KB",
        history / 1024.0
    )?;
    writeln!(
        out,
        "  a session                                               {:>8.2} KB  ({:.2} KB beyond its facts)",
        session / 1024.0,
        (session - history) / 1024.0
    )?;
    black_box((facts, sessions));
    Ok(())
}

/// (d): one rule whose condition reads three context fields, as a Lua script and as an
/// expression.
fn lua_three_fields(out: &mut Report<'_>, rounds: u32) -> io::Result<()> {
    let m = crate::measure::measure_sessions(
        &[
            &|d| bench::one_rule(d, OneRule::ExpressionThreeFields),
            &|d| bench::one_rule(d, OneRule::ScriptThreeFields),
        ],
        20_000,
        rounds,
    )?;
    out.figure("lua_three_fields.expression", m[0], "ns");
    out.beside(
        "lua_three_fields.lua",
        m[1],
        "ns",
        "lua_three_fields.expression",
    );
    out.figure("lua_three_fields.lua_more", m[1] - m[0], "ns");
    writeln!(
        out,
        "\none on_turn_start tick, one rule reading three context fields (median of {rounds} rounds of 20000 ticks):"
    )?;
    writeln!(
        out,
        "  the condition as an expression (the floor)             {:>8.0} ns",
        m[0]
    )?;
    writeln!(
        out,
        "  the condition as a Lua script                          {:>8.0} ns  (the script: {:>5.0} ns more)",
        m[1],
        m[1] - m[0]
    )
}

/// (e): loading and compiling rule files, cold, beside reading and parsing them.
fn cold_load(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    writeln!(
        out,
        "\nloading rules cold: files read, checked and compiled into a program (median of {rounds} rounds):"
    )?;
    for n in sizes.rules {
        let (load, floor) = with_dir(&format!("load-{n}"), |dir| -> io::Result<(f64, f64)> {
            for (name, toml) in bench::many_rule_files(n) {
                std::fs::write(dir.join(name), toml)?;
            }
            let (mut load, mut floor) = (Vec::new(), Vec::new());
            for round in 0..=rounds {
                let t = Instant::now();
                black_box(read_and_parse(dir)?);
                let f = t.elapsed().as_secs_f64() * 1e3;
                let t = Instant::now();
                let w = Warden::builder().rules_dir(dir).build().map_err(other)?;
                let l = t.elapsed().as_secs_f64() * 1e3;
                black_box(w);
                if round > 0 {
                    floor.push(f);
                    load.push(l);
                }
            }
            Ok((median(load), median(floor)))
        })??;
        out.figure(&format!("cold_load.rules_{n}.parse_floor"), floor, "ms");
        out.beside(
            &format!("cold_load.rules_{n}.load"),
            load,
            "ms",
            &format!("cold_load.rules_{n}.parse_floor"),
        );
        writeln!(
            out,
            "  {:>5} rules: reading and parsing the files (the floor) {floor:>8.2} ms",
            thousands(n)
        )?;
        writeln!(
            out,
            "  {:>5} rules: loading and compiling them                {load:>8.2} ms  {:>5.2}x the floor",
            thousands(n),
            ratio(load, floor)
        )?;
    }
    Ok(())
}

/// Every rule file of `dir`, read and parsed as TOML: the floor of loading rules.
fn read_and_parse(dir: &Path) -> io::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let text = std::fs::read_to_string(entry?.path())?;
        if text.parse::<toml::Table>().is_ok() {
            n += 1;
        }
    }
    Ok(n)
}

/// Ticks `session` at each of `events` and times windows of `window` ticks from each of `at`:
/// the median ns per tick of each window over `rounds` fresh sessions.
fn windows_of(
    rounds: u32,
    at: &[usize],
    window: usize,
    mut session: impl FnMut() -> Session,
    mut tick: impl FnMut(&mut Session, usize),
) -> Vec<f64> {
    let end = at.iter().max().copied().unwrap_or(0) + window;
    let mut times = vec![Vec::new(); at.len()];
    for _ in 0..rounds {
        let mut s = session();
        let mut starts = vec![None; at.len()];
        for i in 0..=end {
            mark(at, window, i, &mut starts, &mut times, true);
            tick(&mut s, i);
        }
    }
    times
        .into_iter()
        .map(|t| median(t) / window as f64)
        .collect()
}

/// Plugin state: a rule that reads one key, with 5,000 keys stored beside it or none; and a
/// rule that writes a new key at every turn, over thousands of turns.
fn growing_state(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    let at = sizes.at;
    let turn = |i: usize| {
        Event::new()
            .with_turn(i as u32 + 1)
            .with_token_usage(0.5)
            .at(0.0)
    };
    let reading = |keys: usize| -> io::Result<f64> {
        with_dir(&format!("state-{keys}"), |dir| -> io::Result<f64> {
            bench::state_reader_rule(dir)?;
            let store = Store::in_memory().map_err(other)?;
            // Rules outside a plugin keep their state as the plugin `local`.
            let scope = StateScope::new(DEFAULT_ID, DEFAULT_ID, "local");
            let writes: Vec<_> = (0..keys)
                .map(|i| StateWrite::set(scope.clone(), format!("k{i}"), serde_json::json!(i)))
                .collect();
            store.apply_writes(&[writes]).map_err(other)?;
            let warden = Warden::builder()
                .rules_dir(dir)
                .store(store)
                .build()
                .map_err(other)?;
            let w = windows_of(
                rounds,
                &at[..1],
                sizes.window * 4,
                || warden.session(),
                |s, i| {
                    black_box(s.tick(Hook::OnTurnStart, turn(i)));
                },
            );
            Ok(w[0])
        })?
    };
    let (none, many) = (reading(0)?, reading(sizes.state_keys)?);
    out.figure("plugin_state.read.no_other_key", none, "ns");
    out.beside(
        "plugin_state.read.many_keys",
        many,
        "ns",
        "plugin_state.read.no_other_key",
    );
    let writing = with_dir("state-writer", |dir| -> io::Result<Vec<f64>> {
        bench::state_writer_rule(dir)?;
        let warden = Warden::builder().rules_dir(dir).build().map_err(other)?;
        Ok(windows_of(
            rounds,
            &at,
            sizes.window,
            || warden.session(),
            |s, i| {
                black_box(s.tick(Hook::OnTurnStart, turn(i)));
            },
        ))
    })??;
    writeln!(
        out,
        "\nplugin state: a rule reading one key at each on_turn_start (median of {rounds} rounds):"
    )?;
    writeln!(
        out,
        "  no other key stored (the floor)                          {none:>8.0} ns"
    )?;
    writeln!(
        out,
        "  {} other keys stored                                  {many:>8.0} ns  {:>5.2}x",
        thousands(sizes.state_keys),
        ratio(many, none)
    )?;
    writeln!(
        out,
        "a rule writing a new key at each turn and reading one (the state grows by a key a tick):"
    )?;
    for (i, a) in at.iter().enumerate() {
        out.beside(
            &format!("plugin_state.write.per_tick_at_{a}"),
            writing[i],
            "ns",
            &format!("plugin_state.write.per_tick_at_{}", at[0]),
        );
        writeln!(
            out,
            "  per tick at tick {:<7}                                {:>8.0} ns  {:>5.2}x tick {}",
            thousands(*a),
            writing[i],
            ratio(writing[i], writing[0]),
            thousands(at[0])
        )?;
    }
    Ok(())
}

/// A session that meets a new tool at every event: the built-in rules and a rule that names
/// the tool and its count of calls.
fn new_tool_every_event(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    let at = sizes.at;
    let times = with_dir("tools", |dir| -> io::Result<Vec<f64>> {
        bench::tool_counter_rule(dir)?;
        let warden = Warden::builder()
            .builtin_rules()
            .rules_dir(dir)
            .build()
            .map_err(other)?;
        Ok(windows_of(
            rounds,
            &at,
            sizes.window,
            || warden.session(),
            |s, i| {
                let name = format!("tool_{i}");
                black_box(s.tick(
                    Hook::OnToolCall,
                    Event::tool_call(name, serde_json::json!({"n": i})).at(0.0),
                ));
            },
        ))
    })??;
    writeln!(
        out,
        "\na new tool at every event (on_tool_call; the built-in rules and a rule naming the tool and its calls):"
    )?;
    for (i, a) in at.iter().enumerate() {
        out.beside(
            &format!("new_tool.per_event_at_{a}"),
            times[i],
            "ns",
            &format!("new_tool.per_event_at_{}", at[0]),
        );
        writeln!(
            out,
            "  per event at event {:<7}                              {:>8.0} ns  {:>5.2}x event {}",
            thousands(*a),
            times[i],
            ratio(times[i], times[0]),
            thousands(at[0])
        )?;
    }
    Ok(())
}

/// Saving a durable session after a tick: the built-in rules and the 100 threshold rules, a
/// session of 1,000 events of the long session (or fewer, at small sizes) in a SQLite file;
/// `Session::save` (the snapshot taken, serialized, and committed with its version check)
/// beside the floor, one write of a value of the snapshot's size through the same store, and
/// the snapshot alone.
fn durable_save(out: &mut Report<'_>, rounds: u32, sizes: Sizes) -> io::Result<()> {
    const SAVES: usize = 200;
    let events = sizes.at[1];
    let trace = long_session(sizes.turns);
    let measured = with_dir("save", |dir| -> io::Result<(usize, f64, f64, f64)> {
        for (name, toml) in bench::rule_files() {
            std::fs::write(dir.join(name), toml)?;
        }
        let store = Store::open(dir.join("save.db")).map_err(other)?;
        let warden = Warden::builder()
            .builtin_rules()
            .rules_dir(dir)
            .store(store)
            .build()
            .map_err(other)?;
        let mut session = warden
            .open_session("bench", SessionOptions::default())
            .map_err(other)?;
        for (i, line) in trace.lines().take(events).enumerate() {
            if let Ok(e) = parse_line(i, line) {
                black_box(session.tick_shared(e.hook, e.event));
            }
        }
        let size = session.snapshot().len();
        let scope = StateScope::new(DEFAULT_ID, DEFAULT_ID, "bench-floor");
        let blob = serde_json::Value::String("x".repeat(size));
        let (mut save, mut floor, mut snap) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..=rounds {
            // The floor first in each round, then the save, then the snapshot alone.
            let t = Instant::now();
            for _ in 0..SAVES {
                warden
                    .store()
                    .apply_writes(&[vec![StateWrite::set(scope.clone(), "blob", blob.clone())]])
                    .map_err(other)?;
            }
            let floor_ns = t.elapsed().as_nanos() as f64 / SAVES as f64;
            let t = Instant::now();
            for _ in 0..SAVES {
                session.save().map_err(other)?;
            }
            let save_ns = t.elapsed().as_nanos() as f64 / SAVES as f64;
            let t = Instant::now();
            for _ in 0..SAVES {
                black_box(session.snapshot());
            }
            let snap_ns = t.elapsed().as_nanos() as f64 / SAVES as f64;
            if round > 0 {
                floor.push(floor_ns);
                save.push(save_ns);
                snap.push(snap_ns);
            }
        }
        Ok((size, median(save), median(floor), median(snap)))
    })??;
    let (size, save, floor, snap) = measured;
    out.figure("durable_save.bytes", size as f64, "bytes");
    out.figure("durable_save.write_floor", floor / 1000.0, "us");
    out.beside(
        "durable_save.save",
        save / 1000.0,
        "us",
        "durable_save.write_floor",
    );
    out.figure("durable_save.snapshot", snap / 1000.0, "us");
    writeln!(
        out,
        "\nsaving a durable session after {} events (SQLite file; {} bytes saved; median of {rounds} rounds of {SAVES}):",
        thousands(events),
        thousands(size)
    )?;
    writeln!(
        out,
        "  one write of a value of that size (the floor)            {:>8.1} us",
        floor / 1000.0
    )?;
    writeln!(
        out,
        "  Session::save (snapshot, serialize, commit)              {:>8.1} us   {:.2}x the floor",
        save / 1000.0,
        ratio(save, floor)
    )?;
    writeln!(
        out,
        "    of which the snapshot taken and serialized             {:>8.1} us",
        snap / 1000.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_realistic_scenario_runs_and_reports() {
        let mut out = Vec::new();
        let mut r = Report::text(&mut out);
        run_realistic(&mut r, 1, Sizes::SMALL).unwrap();
        // Every text line's figure is recorded too, each floor before what is beside it.
        let ids: Vec<&str> = r.figures().iter().map(|f| f.id.as_str()).collect();
        for f in r.figures() {
            if let Some(b) = &f.baseline {
                let at = ids.iter().position(|i| i == b);
                assert!(at.is_some(), "{}: no figure {b}", f.id);
            }
        }
        for id in [
            "long_session.replay",
            "long_session.per_event_at_200",
            "many_sessions.session",
            "lua_three_fields.lua_more",
            "cold_load.rules_10.load",
            "plugin_state.read.many_keys",
            "plugin_state.write.per_tick_at_200",
            "new_tool.per_event_at_200",
            "durable_save.save",
        ] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        drop(r);
        let report = String::from_utf8(out).unwrap();
        for needle in [
            "x the floor",
            "per event at event 200",
            "sessions of 100 rules",
            "as a Lua script",
            "loading and compiling them",
            "other keys stored",
            "per tick at tick 200",
            "a new tool at every event",
        ] {
            assert!(report.contains(needle), "{needle} missing from:\n{report}");
        }
    }
}
