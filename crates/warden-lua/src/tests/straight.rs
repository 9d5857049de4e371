//! Straight-line scripts (see `straight.rs`): their first run has no instruction hook, and
//! every script that could need the hook keeps it.

use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use super::*;

/// A [`Frame`] that notes the hook mask of the coroutine that reads a field.
struct HookSpy {
    frame: Frame,
    mask: AtomicI32,
}

impl HookSpy {
    fn new() -> Self {
        HookSpy {
            frame: Frame::default(),
            mask: AtomicI32::new(-1),
        }
    }
}

impl Host for HookSpy {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        // SAFETY: `out.stack` is the stack of the coroutine that reads, during its run.
        let mask = unsafe { mlua::ffi::lua_gethookmask(out.stack) };
        self.mask.store(mask, Ordering::Relaxed);
        self.frame.field(out, root, key)
    }

    fn shape(&self) -> Shape {
        self.frame.shape()
    }
}

/// The hook mask of the coroutine running `src` (which reads `context.history`) in `rt`, with
/// whether `src` is straight-line and how its run ended.
fn mask_of(rt: &mut Runtime, key: u64, src: &str) -> (i32, bool, Step) {
    let spy = HookSpy::new();
    let (_, step) = rt.start(&Script::new(key, "test.lua", src), &spy, HANG);
    let straight = is_straight(rt, key);
    (spy.mask.load(Ordering::Relaxed), straight, step)
}

fn is_straight(rt: &Runtime, key: u64) -> bool {
    rt.compiled.get(&key).is_some_and(|c| c.straight)
}

#[test]
fn a_straight_line_script_runs_unhooked_and_its_coroutine_gets_its_hook_back() {
    let mut rt = runtime();
    // `context.history` is a table: asked of the host at every run, on the coroutine.
    let three = "return context.history.failures.web == 3 and context.turn.number >= 0";
    let (mask, straight, step) = mask_of(&mut rt, 1_000_001, three);
    assert!(straight);
    assert_eq!(mask, 0, "a straight-line run is unhooked");
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    // The same coroutine (reused) runs a script with a loop: hooked.
    let (mask, straight, step) = mask_of(
        &mut rt,
        1_000_002,
        "local n = 0; for i = 1, 3 do n = n + context.history.failures.web end; return n == 9",
    );
    assert!(!straight);
    assert_ne!(mask, 0, "a script with a loop is hooked");
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    // After an unhooked run, the reused coroutine's time limit still holds.
    let (mask, _, step) = mask_of(&mut rt, 1_000_003, three);
    assert_eq!(mask, 0);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    let (_, step) = run_limited(&mut rt, "while true do end", &Frame::default());
    assert!(failed(&step).contains("time limit"), "{step:?}");
}

#[test]
fn a_straight_line_script_still_meets_the_memory_limit() {
    let mut rt = runtime();
    let src =
        "local s = string.rep('x', 1e6); return #(s .. s .. s .. s .. s .. s .. s .. s .. s) > 0";
    let script = Script::new(1_000_010, "test.lua", src);
    rt.compile(&script).unwrap();
    assert!(is_straight(&rt, 1_000_010));
    let (_, step) = rt.start(&script, &Frame::default(), HANG);
    assert!(failed(&step).contains("out of memory"), "{step:?}");
    let script = Script::new(1_000_011, "test.lua", "return #string.rep('x', 1e9) > 0");
    rt.compile(&script).unwrap();
    assert!(is_straight(&rt, 1_000_011));
    let (_, step) = rt.start(&script, &Frame::default(), HANG);
    assert!(failed(&step).contains("out of memory"), "{step:?}");
    assert!(holds_in(&mut rt, "return ('a'):rep(3) == 'aaa'"));
}

/// Scripts with no loop word of their own that reach a loop, or recurse: each keeps its hook,
/// and its limit stops it.
#[test]
fn scripts_that_reach_a_loop_or_recurse_keep_the_hook_and_are_stopped() {
    let time = Duration::from_millis(300);
    for (src, why) in [
        ("return load('while true do end')()", "time limit"),
        (
            "return load('local x = 0 ::a:: x = x + 1 goto a')()",
            "time limit",
        ),
        (
            "return _G['lo' .. 'ad']('while true do end')()",
            "time limit",
        ),
        (
            "return _ENV['lo' .. 'ad']('while true do end')()",
            "time limit",
        ),
        ("return pcall(load('while true do end'))", "time limit"),
        (
            "local m = table.move; return m({}, 1, 1e12, 2)",
            "time limit",
        ),
        (
            "return string['r' .. 'ep'] and table.move({}, 1, 1e12, 2)",
            "time limit",
        ),
        (
            "local f; f = load('local f = ...; return 1 + f(f)'); return f(f)",
            "recursion too deep",
        ),
        (
            "local f = function(f) return 1 + f(f) end; return f(f)",
            "recursion too deep",
        ),
        (
            "local co = coroutine.wrap(load('while true do end')); return co()",
            "time limit",
        ),
        (
            "local t = {}; setmetatable(t, { __index = t }); return t.x",
            "chain too long",
        ),
    ] {
        let mut rt = runtime();
        static KEY: AtomicI32 = AtomicI32::new(0);
        let key = 2_000_000 + KEY.fetch_add(1, Ordering::Relaxed) as u64;
        let limit = if why == "time limit" { time } else { HANG };
        let script = Script::new(key, "test.lua", src);
        rt.compile(&script).unwrap();
        assert!(!is_straight(&rt, key), "{src} is not straight-line");
        let (_, step) = rt.start(&script, &Frame::default(), limit);
        let error = failed(&step);
        assert!(error.contains(why), "{src}: {error}");
        assert!(holds_in(&mut rt, "return ('a'):rep(3) == 'aaa'"));
    }
}

/// What a straight-line script can reach runs no loop over what it controls: the decisions and
/// helpers it may name behave as in a hooked run.
#[test]
fn straight_line_scripts_reach_only_what_loops_nowhere() {
    let mut rt = runtime();
    for (key, src) in [
        (
            3_000_001,
            "return deny('no') and tool_calls('web') == 0 and failure_count('web') == 3",
        ),
        (
            3_000_002,
            "return query_mentions('lua') and not tool_completed('web') and os.time() > 0",
        ),
        (
            3_000_003,
            "return context.state.seen == 2 and context.state.get('seen') == 2",
        ),
        (
            3_000_004,
            "return select('#', ('x'):rep(3):byte(1, -1)) == 3 and math.max(1, 2) == 2",
        ),
        (
            3_000_005,
            "return (('a,b,c'):find(',', 1, true)) == 2 and ('ab'):match('b') == 'b'",
        ),
    ] {
        let script = Script::new(key, "test.lua", src);
        let (_, step) = rt.start(&script, &Frame::default(), HANG);
        assert!(is_straight(&rt, key), "{src}");
        assert!(
            matches!(step, Step::Done { holds: true, .. }),
            "{src}: {step:?}"
        );
    }
}

/// A straight-line script that assigns nothing keeps nothing past its run: the record views it
/// was handed are refilled for the next runs without looking at its globals. One that assigns
/// (or whose globals the embedder set) has them looked at, and a view it kept keeps its tick.
#[test]
fn only_a_straight_line_script_that_assigns_nothing_skips_the_check_of_its_globals() {
    let mut rt = runtime();
    let reads = Script::new(
        4_000_001,
        "test.lua",
        "return deny(tostring(context.turn.number))",
    );
    let keeps = Script::new(
        4_000_002,
        "test.lua",
        "kept = kept or context.turn; return kept.number == 1",
    );
    for script in [&reads, &keeps] {
        rt.compile(script).unwrap();
    }
    let flag = |rt: &Runtime, key: u64| rt.compiled.get(&key).is_some_and(|c| c.keeps_nothing);
    assert!(flag(&rt, 4_000_001));
    assert!(!flag(&rt, 4_000_002));
    for turn in 1..4 {
        let frame = Frame {
            turn,
            ..Frame::default()
        };
        for script in [&reads, &keeps] {
            let (_, step) = rt.start(script, &frame, HANG);
            assert!(
                matches!(step, Step::Done { holds: true, .. }),
                "turn {turn}: {step:?}"
            );
            // The reused view shows this run's tick.
            if let Step::Done { effects, .. } = &step
                && script.key == reads.key
            {
                assert!(
                    matches!(&effects[..], [Effect::Decide { reason, .. }] if *reason == turn.to_string()),
                    "turn {turn}: {effects:?}"
                );
            }
        }
    }
    rt.set_globals(&reads, &Recorded::Nil).unwrap();
    assert!(!flag(&rt, 4_000_001));
}
