//! Measuring: sessions warmed up, then ticked in alternation, round after round, so that the
//! machine's noise hits every scenario alike; the median of the rounds is reported.

use std::io::{self, Write};
use std::path::Path;
use std::time::Instant;

use warden_core::{SessionOptions, Warden};

use crate::report::Report;
use crate::scenarios::{self as bench, BareResume, Floor, OneRule};

/// The median of `v` (NaN when it is empty).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A temporary folder for one scenario's rule files, removed once the rules are loaded.
pub(crate) fn with_dir<T>(tag: &str, make: impl FnOnce(&Path) -> T) -> io::Result<T> {
    let dir = std::env::temp_dir().join(format!("warden-bench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let made = make(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(made)
}

/// Measures the tick scenarios and writes their report to `out`: `ticks` ticks per round, the
/// median of `rounds` rounds.
pub fn run_ticks(out: &mut Report<'_>, ticks: u32, rounds: u32) -> io::Result<()> {
    let (ticks, rounds) = (ticks.max(1), rounds.max(1));
    threshold_rules(out, ticks, rounds)?;
    decisions(out, ticks, rounds)?;
    scripts(out, ticks, rounds)?;
    behaviors(out, ticks, rounds)
}

fn threshold_rules(out: &mut Report<'_>, ticks: u32, rounds: u32) -> io::Result<()> {
    let warden = with_dir("rules", bench::warden)?;
    let mut session = warden.session();
    let mut explained = warden.session_with(SessionOptions {
        explain: true,
        ..SessionOptions::default()
    });
    let floor = Floor::default();
    let mut sink = 0usize;
    let (mut ours, mut all, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
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
    out.figure("tick.hundred_rules.floor", f, "ns");
    out.beside(
        "tick.hundred_rules.warden",
        w,
        "ns",
        "tick.hundred_rules.floor",
    );
    out.beside(
        "tick.hundred_rules.explain",
        a,
        "ns",
        "tick.hundred_rules.floor",
    );
    writeln!(
        out,
        "one on_turn_start tick, {} threshold rules, {} firing (median of {rounds} rounds of {ticks} ticks):",
        bench::RULES,
        floor.tick(bench::TOKEN_USAGE).len()
    )?;
    writeln!(
        out,
        "  hand-written Rust (the floor)                {f:>8.0} ns"
    )?;
    writeln!(
        out,
        "  warden                                       {w:>8.0} ns  {:>5.1}x the floor",
        w / f
    )?;
    writeln!(
        out,
        "  warden, every rule evaluated (explain mode)  {a:>8.0} ns  {:>5.1}x the floor",
        a / f
    )
}

/// 100 rules at `on_tool_call`, 10 of them (all firing) decisions, against the same rules
/// without decisions.
fn decisions(out: &mut Report<'_>, ticks: u32, rounds: u32) -> io::Result<()> {
    let m = measure_sessions_with(
        &[&|d| bench::decision_warden(d, 0), &|d| {
            bench::decision_warden(d, 10)
        }],
        bench::tick_tool_call,
        ticks,
        rounds,
    )?;
    out.figure("tick.tool_call.notify", m[0], "ns");
    out.beside("tick.tool_call.deny", m[1], "ns", "tick.tool_call.notify");
    writeln!(
        out,
        "\none on_tool_call tick, {} threshold rules, 10 firing (median of {rounds} rounds of {ticks} ticks):",
        bench::RULES
    )?;
    writeln!(
        out,
        "  every firing rule notifies                   {:>8.0} ns",
        m[0]
    )?;
    writeln!(
        out,
        "  the 10 firing rules decide deny instead      {:>8.0} ns  {:>5.2}x",
        m[1],
        m[1] / m[0]
    )
}

/// Builds one session per scenario, warms them up, then measures them in alternation: the
/// median ns per tick of each.
pub(crate) fn measure_sessions(
    scenarios: &[&dyn Fn(&Path) -> Warden],
    ticks: u32,
    rounds: u32,
) -> io::Result<Vec<f64>> {
    measure_sessions_with(scenarios, bench::tick, ticks, rounds)
}

/// Like `measure_sessions`, ticking each session with `tick`.
fn measure_sessions_with(
    scenarios: &[&dyn Fn(&Path) -> Warden],
    tick: fn(&mut warden_core::Session) -> usize,
    ticks: u32,
    rounds: u32,
) -> io::Result<Vec<f64>> {
    let mut sessions = sessions_of(scenarios)?;
    let mut work: Vec<Box<dyn FnMut() -> usize + '_>> = sessions
        .iter_mut()
        .map(|s| Box::new(move || tick(s)) as Box<dyn FnMut() -> usize>)
        .collect();
    Ok(alternate(&mut work, ticks, rounds))
}

/// A session of each scenario, its rules written to a folder of its own.
fn sessions_of(scenarios: &[&dyn Fn(&Path) -> Warden]) -> io::Result<Vec<warden_core::Session>> {
    let mut sessions = Vec::new();
    for (i, make) in scenarios.iter().enumerate() {
        sessions.push(with_dir(&i.to_string(), make)?.session());
    }
    Ok(sessions)
}

/// Warms each of `work` up, then runs them in alternation, `ticks` calls each a round, round
/// after round: the median ns per call of each.
fn alternate(work: &mut [Box<dyn FnMut() -> usize + '_>], ticks: u32, rounds: u32) -> Vec<f64> {
    let mut sink = 0usize;
    for w in work.iter_mut() {
        for _ in 0..ticks.min(2000) {
            sink += w();
        }
    }
    let mut times = vec![Vec::new(); work.len()];
    for _ in 0..rounds {
        for (w, t) in work.iter_mut().zip(&mut times) {
            let start = Instant::now();
            for _ in 0..ticks {
                sink += w();
            }
            t.push(start.elapsed().as_nanos() as f64 / f64::from(ticks));
        }
    }
    std::hint::black_box(sink);
    times.into_iter().map(median).collect()
}

/// The cost of a script: one rule on `on_turn_start` as an expression, as a script condition
/// reading the context, and as a coroutine resumed at every tick; and that coroutine resumed
/// by the script runtime alone, by itself and after each tick of the expression rule (where
/// the tick's code and the resume's share the processor's caches, as in the session's resume).
fn scripts(out: &mut Report<'_>, ticks: u32, rounds: u32) -> io::Result<()> {
    let mut sessions = sessions_of(&[
        &|d| bench::one_rule(d, OneRule::Expression),
        &|d| bench::one_rule(d, OneRule::ScriptCondition),
        &|d| bench::one_rule(d, OneRule::Coroutine),
        &|d| bench::one_rule(d, OneRule::Expression),
    ])?;
    let [expression, script, coroutine, beside] = &mut sessions[..] else {
        unreachable!("four sessions were made");
    };
    let (mut alone, mut after) = (BareResume::new(), BareResume::new());
    let mut work: Vec<Box<dyn FnMut() -> usize + '_>> = vec![
        Box::new(|| bench::tick(expression)),
        Box::new(|| bench::tick(script)),
        Box::new(|| bench::tick(coroutine)),
        Box::new(|| alone.resume()),
        Box::new(|| bench::tick(beside) + after.resume()),
    ];
    let m = alternate(&mut work, ticks, rounds);
    let (e, s, c, r, er) = (m[0], m[1], m[2], m[3], m[4]);
    out.figure("tick.one_rule.expression", e, "ns");
    out.beside(
        "tick.one_rule.lua_condition",
        s,
        "ns",
        "tick.one_rule.expression",
    );
    out.figure("tick.one_rule.lua_condition_more", s - e, "ns");
    out.beside(
        "tick.one_rule.lua_resume",
        c,
        "ns",
        "tick.one_rule.expression",
    );
    out.figure("tick.one_rule.lua_resume_more", c - e, "ns");
    out.figure("tick.one_rule.runtime_resume", r, "ns");
    out.beside(
        "tick.one_rule.expression_then_runtime_resume",
        er,
        "ns",
        "tick.one_rule.expression",
    );
    out.figure(
        "tick.one_rule.expression_then_runtime_resume_more",
        er - e,
        "ns",
    );
    writeln!(
        out,
        "\none on_turn_start tick, one rule (median of {rounds} rounds of {ticks} ticks):"
    )?;
    writeln!(
        out,
        "  the rule as an expression                    {e:>8.0} ns"
    )?;
    writeln!(
        out,
        "  the rule as a Lua script reading context     {s:>8.0} ns  (the script: {:>5.0} ns more)",
        s - e
    )?;
    writeln!(
        out,
        "  a waiting Lua coroutine, resumed             {c:>8.0} ns  (the resume: {:>5.0} ns more)",
        c - e
    )?;
    writeln!(
        out,
        "  the same coroutine resumed by the script runtime alone, no session or tick:"
    )?;
    writeln!(
        out,
        "    by itself                                  {r:>8.0} ns"
    )?;
    writeln!(
        out,
        "    after each tick of the expression rule     {er:>8.0} ns  (the resume: {:>5.0} ns more)",
        er - e
    )
}

/// The frame lock (a running node deep in a behavior, after 1 or 100 siblings at each level)
/// and mode detection (the one expression rule, with and without the context-window modes).
fn behaviors(out: &mut Report<'_>, ticks: u32, rounds: u32) -> io::Result<()> {
    let m = measure_sessions(
        &[
            &|d| bench::deep_tree(d, 1, 4),
            &|d| bench::deep_tree(d, 100, 4),
            &|d| bench::one_rule(d, OneRule::Expression),
            &|d| bench::one_rule_with_modes(d),
        ],
        ticks,
        rounds,
    )?;
    out.figure("tick.behavior_4_deep.siblings_1", m[0], "ns");
    out.beside(
        "tick.behavior_4_deep.siblings_100",
        m[1],
        "ns",
        "tick.behavior_4_deep.siblings_1",
    );
    out.figure("tick.modes.without", m[2], "ns");
    out.beside("tick.modes.detected", m[3], "ns", "tick.modes.without");
    writeln!(
        out,
        "\none on_turn_start tick (median of {rounds} rounds of {ticks} ticks):"
    )?;
    writeln!(
        out,
        "  a behavior running 4 levels down, 1 sibling before it at each level      {:>8.0} ns",
        m[0]
    )?;
    writeln!(
        out,
        "  the same with 100 siblings before it at each level                         {:>8.0} ns  {:>5.2}x",
        m[1],
        m[1] / m[0]
    )?;
    writeln!(
        out,
        "  one expression rule, with the context-window modes detected              {:>8.0} ns  (modes: {:>5.0} ns more)",
        m[3],
        m[3] - m[2]
    )
}
