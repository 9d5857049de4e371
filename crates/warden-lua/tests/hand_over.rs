//! The hand-over of a long run (`warden_lua::set_hand_over`): a run that goes on past a
//! millisecond calls the process's hand-over (and again every 10 ms), wherever it checks its
//! time limit (its own code, a coroutine it made, a callback called from C, the pattern
//! matcher), and goes on: the script comes to what it would have. Its own test binary: the hand-over is set once for the
//! process.
//!
//! The runs that must be handed over do work no machine does in a millisecond (ten million
//! additions, half a million ways for the matcher to backtrack); the one that must not runs fewer
//! instructions than the hook counts between two checks. No verdict rests on a time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use warden_lua::{Host, Limits, Out, Runtime, Script, Step, Vocabulary};

/// How many runs were handed over.
static HANDED_OVER: AtomicUsize = AtomicUsize::new(0);

/// One test at a time: each counts the hand-overs of its own runs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn hand_over() {
    HANDED_OVER.fetch_add(1, Ordering::SeqCst);
}

/// A host whose fields are all nil.
struct Nothing;

impl Host for Nothing {
    fn field(&self, _: &mut Out<'_>, _: &str, _: &str) -> mlua::Result<()> {
        Ok(())
    }
}

/// Far past what any run here takes: no run ends by its time limit.
const HANG: Duration = Duration::from_secs(600);

fn runtime() -> Runtime {
    warden_lua::set_hand_over(hand_over);
    Runtime::new(
        Limits {
            timeout: HANG,
            ..Limits::default()
        },
        Vocabulary::NONE,
    )
    .unwrap()
}

/// Starts `source` on a fresh runtime: the step, and how many times it was handed over.
fn start(source: &str) -> (Runtime, Option<warden_lua::Task>, Step, usize) {
    let mut rt = runtime();
    let before = HANDED_OVER.load(Ordering::SeqCst);
    let (task, step) = rt.start(&Script::new(1, "long.lua", source), &Nothing, HANG);
    let handed = HANDED_OVER.load(Ordering::SeqCst) - before;
    (rt, task, step, handed)
}

fn holds(step: &Step) -> bool {
    match step {
        Step::Done { holds, .. } => *holds,
        other => panic!("the script did not return: {other:?}"),
    }
}

const SUM: &str = "local n = 0\nfor i = 1, 10000000 do n = n + i end\n";

#[test]
fn a_long_run_is_handed_over_and_ends_as_it_would_have() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (_, _, step, handed) = start(&format!("{SUM}return n == 50000005000000\n"));
    assert!(holds(&step));
    assert!(handed >= 1, "never handed over");
}

#[test]
fn a_run_shorter_than_the_checks_interval_is_not_handed_over() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (_, _, step, handed) =
        start("local n = 0\nfor i = 1, 10 do n = n + i end\nreturn n == 55\n");
    assert!(holds(&step));
    assert_eq!(handed, 0);
}

#[test]
fn a_run_that_waits_after_its_hand_over_waits() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (mut rt, task, step, handed) = start(&format!(
        "{SUM}coroutine.yield()\nreturn n == 50000005000000\n"
    ));
    assert!(matches!(step, Step::Waiting { wake: None, .. }), "{step:?}");
    assert!(handed >= 1, "never handed over");
    let step = rt.resume(&task.unwrap(), &Nothing, HANG);
    assert!(holds(&step));
}

#[test]
fn a_run_is_handed_over_from_a_coroutine_it_made_and_from_a_callback_of_c() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (_, _, step, handed) = start(&format!(
        "local co = coroutine.wrap(function()\n{SUM}return n\nend)\nreturn co() == 50000005000000\n"
    ));
    assert!(holds(&step));
    assert!(handed >= 1, "never handed over");
    let (_, _, step, handed) = start(&format!(
        "local t = {{2, 1}}\n\
         table.sort(t, function(a, b)\n{SUM}return a < b\nend)\n\
         return t[1] == 1 and t[2] == 2\n"
    ));
    assert!(holds(&step));
    assert!(handed >= 1, "never handed over");
}

#[test]
fn a_straight_line_run_is_handed_over_from_the_pattern_matcher() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    // Straight-line: no instruction hook; the matcher's own checks of the clock hand it over.
    // Half a million ways to backtrack, and no match.
    let (_, _, step, handed) =
        start("return ('a'):rep(19):find(('a?'):rep(19) .. ('a'):rep(20)) == nil\n");
    assert!(holds(&step));
    assert!(handed >= 1, "never handed over");
}
