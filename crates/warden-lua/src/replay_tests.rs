//! Deterministic replay: a waiting script recorded in one runtime is brought back in another
//! (as a second process would) and goes on exactly as if it had never stopped.

use std::time::Duration;

use mlua::Value;

use super::*;

const VOCABULARY: Vocabulary = Vocabulary {
    hooks: &["on_turn_start", "on_tool_complete"],
    priorities: &["low", "normal", "high"],
    delivery_points: &["immediate", "turn_start"],
    log_levels: &["debug", "info"],
    decisions: &["allow", "deny"],
};

/// A host whose answers change from tick to tick, as a session's do.
struct Tick {
    turn: i64,
    hook: &'static str,
    count: i64,
}

impl Host for Tick {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        match (root, key) {
            ("context", "turn") => out.record(&["number"], &[Value::Integer(self.turn)]),
            ("context", "history") => out.serialize(&serde_json::json!({
                "calls": {"zeta": 1, "alpha": 2, "mid": 3, "beta": 4},
                "tools": [{"name": "web"}]
            })),
            ("event", "hook") => out.value(self.hook),
            ("event", "tool_name") => out.value("vault_search"),
            ("result", "count") => out.value(self.count),
            _ => Ok(()),
        }
    }
    fn shape(&self) -> Shape {
        let tool = self.hook == "on_tool_complete";
        Shape {
            tool,
            result: if tool {
                ResultShape::Table
            } else {
                ResultShape::None
            },
        }
    }
}

const WORKFLOW: &str = r#"
runs = (runs or 0) + 1
local names = {}
for name in pairs(context.history.calls) do names[#names + 1] = name end
local started = os.clock()
local roll = math.random(1, 1000)
notify("start " .. context.turn.number .. " roll " .. roll .. " " .. table.concat(names, ","))
local ev = wait_for("on_tool_complete", { tool = "vault_search" })
notify("found " .. result.count .. " at " .. ev.hook .. " clock ok " .. tostring(os.clock() >= started))
wait_turns(2)
notify("two turns later: turn " .. context.turn.number .. " roll " .. math.random(1, 1000) .. " runs " .. runs)
return true
"#;

fn runtime(recording: bool) -> Runtime {
    let mut rt = Runtime::new(Limits::default(), VOCABULARY).unwrap();
    rt.set_recording(recording);
    rt
}

fn events() -> Vec<Tick> {
    vec![
        Tick {
            turn: 1,
            hook: "on_turn_start",
            count: 0,
        },
        Tick {
            turn: 1,
            hook: "on_tool_complete",
            count: 7,
        },
        Tick {
            turn: 2,
            hook: "on_turn_start",
            count: 0,
        },
        Tick {
            turn: 3,
            hook: "on_turn_start",
            count: 0,
        },
        Tick {
            turn: 4,
            hook: "on_turn_start",
            count: 0,
        },
    ]
}

/// The time limit of every run here, all of which end within milliseconds: a hang detector, so
/// that the clock of a loaded machine cannot stop a run these tests expect to end.
fn hang() -> Duration {
    Duration::from_secs(60)
}

#[test]
fn a_waiting_script_brought_back_elsewhere_goes_on_as_if_it_never_stopped() {
    let script = Script::new(9, "workflow.lua", WORKFLOW);
    let events = events();
    // Straight through, in one runtime.
    let mut straight = runtime(false);
    let (task, first) = straight.start_seeded(&script, &events[0], hang(), 42);
    let task = task.expect("waits");
    let mut expected = vec![first];
    for e in &events[1..] {
        let step = straight.resume(&task, e, hang());
        let done = !matches!(step, Step::Waiting { .. });
        expected.push(step);
        if done {
            break;
        }
    }
    // Brought back in a fresh runtime before every resume.
    let mut rt = runtime(true);
    let (task, first) = rt.start_seeded(&script, &events[0], hang(), 42);
    let mut task = task.expect("waits");
    let mut got = vec![first];
    for e in &events[1..] {
        let journal = task.journal().expect("recorded");
        let text = serde_json::to_string(&journal).unwrap();
        let journal: Journal = serde_json::from_str(&text).unwrap();
        let globals = rt.globals(&script).expect("ran");
        rt = runtime(true);
        task = rt.restore(&script, &journal, hang()).expect("restored");
        rt.set_globals(&script, &globals).unwrap();
        let step = rt.resume(&task, e, hang());
        let done = !matches!(step, Step::Waiting { .. });
        got.push(step);
        if done {
            break;
        }
    }
    assert_eq!(got, expected);
    let Step::Done { effects, .. } = got.last().unwrap() else {
        panic!("finished: {got:?}")
    };
    assert!(
        matches!(&effects[0], Effect::Notify { message, .. } if message.ends_with("runs 1")),
        "{effects:?}"
    );
}

#[test]
fn a_replay_that_reads_otherwise_is_refused_with_where_it_diverged() {
    let original = Script::new(9, "workflow.lua", WORKFLOW);
    let mut rt = runtime(true);
    let (task, _) = rt.start_seeded(&original, &events()[0], hang(), 1);
    let journal = task.expect("waits").journal().expect("recorded");
    // The script changed: it reads the query first.
    let changed = Script::new(
        9,
        "workflow.lua",
        &format!("local q = event.hook\n{WORKFLOW}"),
    );
    let mut other = runtime(true);
    let err = other.restore(&changed, &journal, hang()).unwrap_err();
    assert!(
        err.reason
            .contains("read `event.hook` where the record has `context.history`"),
        "{err}"
    );
    // Waiting elsewhere is divergence too.
    let waits_elsewhere = Script::new(
        9,
        "workflow.lua",
        "runs = 1\nlocal _ = context.history.calls\nlocal _ = os.clock()\nlocal _ = context.turn.number\nwait_turns(1)",
    );
    let err = runtime(true)
        .restore(&waits_elsewhere, &journal, hang())
        .unwrap_err();
    assert!(err.reason.contains("run 1 of 1"), "{err}");
}

#[test]
fn random_numbers_repeat_from_a_seed_and_differ_between_seeds() {
    let script = Script::new(
        1,
        "r.lua",
        "notify(tostring(math.random(1, 1000000)) .. ' ' .. tostring(math.random()))",
    );
    let roll = |seed| {
        let (_, step) = runtime(false).start_seeded(&script, &events()[0], hang(), seed);
        step
    };
    assert_eq!(roll(5), roll(5));
    assert_ne!(roll(5), roll(6));
}

#[test]
fn views_of_data_are_walked_in_a_fixed_order() {
    let script = Script::new(
        1,
        "order.lua",
        "local ks = {} for k in pairs(context.history.calls) do ks[#ks + 1] = k end \
         local nk = {} local k = next(context.history.calls) while k do nk[#nk + 1] = k k = next(context.history.calls, k) end \
         notify(table.concat(ks, ',') .. ' ' .. table.concat(nk, ','))",
    );
    let (_, step) = runtime(false).start(&script, &events()[0], hang());
    let Step::Done { effects, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        effects[0],
        Effect::Notify {
            message: "alpha,beta,mid,zeta alpha,beta,mid,zeta".into(),
            category: None,
            priority: None,
            deliver_at: None,
        }
    );
}

/// As a session brings `script` back in another process: started at the first event, where
/// it waits; then, in a fresh runtime, its task restored (its runs replayed) and its saved
/// globals set, in that order; what its resume at the second event comes to.
fn brought_back_and_resumed(script: &Script) -> Step {
    let events = events();
    let mut rt = runtime(true);
    let (task, first) = rt.start_seeded(script, &events[0], hang(), 7);
    let task = task.expect("waits");
    assert!(matches!(first, Step::Waiting { .. }), "{first:?}");
    let journal = task.journal().expect("recorded");
    let globals = rt.globals(script).expect("ran");
    let mut rt = runtime(true);
    let task = rt.restore(script, &journal, hang()).expect("restored");
    rt.set_globals(script, &globals).unwrap();
    rt.resume(&task, &events[1], hang())
}

#[test]
fn a_script_that_yields_once_is_brought_back_and_returns() {
    // Bound in its globals again once they are set (they are not data).
    let script = Script::new(
        12,
        "yield-once.lua",
        "coroutine.yield()\nreturn rawget(_G, 'coroutine') ~= nil",
    );
    let step = brought_back_and_resumed(&script);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn a_function_the_replay_defined_again_outlives_the_saved_globals() {
    // The replay defines `helper` again; the saved globals hold data only.
    let script = Script::new(
        13,
        "helper.lua",
        "function helper() return x == 1 end\nx = 1\ncoroutine.yield()\nreturn helper()",
    );
    let step = brought_back_and_resumed(&script);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}
