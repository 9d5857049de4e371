//! The hand-over of a long run (`warden_lua::set_hand_over`): a run that goes on past a
//! millisecond carries on through the process's hand-over, where it stood, and the script sees
//! nothing of it. Its own test binary: the hand-over is set once for the process.
//!
//! The runs that must be handed over do work no machine does in a millisecond (ten million
//! additions); the ones that must not are straight-line, which runs without the instruction
//! hook that cuts a run, or cut only where a cut cannot be made. No verdict rests on a time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use warden_lua::{Host, Limits, Out, Runtime, Script, Step, Vocabulary};

/// How many runs were handed over.
static HANDED_OVER: AtomicUsize = AtomicUsize::new(0);

/// One test at a time: each counts the hand-overs of its own runs.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn hand_over(rest: &mut dyn FnMut()) {
    HANDED_OVER.fetch_add(1, Ordering::SeqCst);
    rest();
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
fn a_long_run_is_handed_over_once_and_ends_as_it_would_have() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (_, _, step, handed) = start(&format!("{SUM}return n == 50000005000000\n"));
    assert!(holds(&step));
    assert_eq!(handed, 1);
}

#[test]
fn a_straight_line_run_is_not_handed_over() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    let (_, _, step, handed) = start("return 1 + 1 == 2\n");
    assert!(holds(&step));
    assert_eq!(handed, 0);
}

#[test]
fn a_cut_is_not_taken_for_a_wait() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    // The run is cut in the loop, goes on, and then waits: its step says it waits, and the
    // resume finds what the run before the wait left.
    let (mut rt, task, step, handed) = start(&format!(
        "{SUM}coroutine.yield()\nreturn n == 50000005000000\n"
    ));
    assert!(matches!(step, Step::Waiting { wake: None, .. }), "{step:?}");
    assert_eq!(handed, 1);
    let step = rt.resume(&task.unwrap(), &Nothing, HANG);
    assert!(holds(&step));
}

#[test]
fn a_coroutine_the_script_made_is_not_cut() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    // The loop runs in the script's own coroutine: a cut there would yield to the script (its
    // `co()` would return nothing). The run is handed over once back in the script's code,
    // or not at all; either way it comes to the same.
    let (_, _, step, handed) = start(&format!(
        "local co = coroutine.wrap(function()\n{SUM}return n\nend)\nreturn co() == 50000005000000\n"
    ));
    assert!(holds(&step));
    assert!(handed <= 1, "{handed}");
}

#[test]
fn a_run_is_cut_inside_pcall_but_not_inside_a_call_from_c() {
    let _one = ONE_AT_A_TIME.lock().unwrap();
    // `pcall` may yield; `table.sort`'s comparator may not, and there the run goes on.
    let (_, _, step, handed) = start(&format!(
        "local ok, n = pcall(function()\n{SUM}return n\nend)\nreturn ok and n == 50000005000000\n"
    ));
    assert!(holds(&step));
    assert_eq!(handed, 1);
    let (_, _, step, _) = start(
        "local t = {3, 1, 2}\n\
         table.sort(t, function(a, b)\n\
           local n = 0\n\
           for i = 1, 3000000 do n = n + i end\n\
           return a < b\n\
         end)\n\
         return t[1] == 1 and t[2] == 2 and t[3] == 3\n",
    );
    assert!(holds(&step));
}
