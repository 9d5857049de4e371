//! The limits of issue 17: patterns that would hang Lua's own matcher stop within the run's
//! time, one script cannot starve the others of memory, and deep recursion says so.

use std::time::{Duration, Instant};

use super::*;

fn runtime_with(timeout: Duration, memory: usize) -> Runtime {
    Runtime::new(Limits { timeout, memory }, VOCABULARY).unwrap()
}

fn step_of(rt: &mut Runtime, script: &Script) -> Step {
    rt.start(script, &Frame::default(), rt.limits().timeout).1
}

/// The `count` a script reported with `set_state('count', count)`.
fn count_of(step: &Step) -> Option<i64> {
    match step {
        Step::Done { effects, .. } => effects.iter().find_map(|e| match e {
            Effect::SetState { key, value, .. } if key == "count" => value.as_i64(),
            _ => None,
        }),
        _ => None,
    }
}

// ---- patterns (item 1) ----

/// The reproductions of the issue: each would run for minutes (or for ever) in Lua's matcher.
const HANGING: &[&str] = &[
    "local n = 40; local s = ('a'):rep(n); return s:match(('a?'):rep(n) .. ('a'):rep(n)) ~= nil",
    "local n = 40; local s = ('a'):rep(n); return (s:gsub(('a?'):rep(n) .. ('a'):rep(n), 'x')) ~= s",
    "local n = 40; local s = ('a'):rep(n); for m in s:gmatch(('a?'):rep(n) .. ('a'):rep(n)) do return true end; return false",
    "local n = 40; local s = ('a'):rep(n); return s:find('^' .. ('a?'):rep(n) .. ('a'):rep(n)) ~= nil",
    "local n = 40; local s = ('a'):rep(n); return s:match(('[%w]?'):rep(n) .. ('a'):rep(n)) ~= nil",
    "local n = 40; local s = ('a'):rep(n); return string.find(s, ('a?'):rep(n) .. ('a'):rep(n)) ~= nil",
    "local n = 40; local s = ('a'):rep(n); return (s:gsub(('a?'):rep(n) .. ('a'):rep(n), function() return 'x' end)) ~= s",
    "local n = 40; local s = ('a'):rep(n); return (s:gsub(('a?'):rep(n) .. ('a'):rep(n), {})) ~= s",
];

#[test]
fn patterns_that_hang_lua_stop_within_the_time_limit_and_the_rule_does_not_fire() {
    let mut rt = runtime_with(Duration::from_millis(500), 8 << 20);
    for src in HANGING {
        let start = Instant::now();
        let (_, step) = run_limited(&mut rt, src, &Frame::default());
        let elapsed = start.elapsed();
        let error = failed(&step);
        assert!(
            error.contains("ran past the script's time limit of 500 ms")
                && error.contains("pattern"),
            "{src}: {error}"
        );
        assert!(elapsed < HANG, "{src} took {elapsed:?}");
        // The host goes on: the next script of the session runs as usual.
        assert!(holds_in(
            &mut rt,
            "return ('key=value'):match('^(%w+)=') == 'key'"
        ));
    }
}

#[test]
fn the_pattern_limit_cannot_be_caught() {
    let src = "local s = ('a'):rep(40); \
               local ok = pcall(string.match, s, ('a?'):rep(40) .. ('a'):rep(40)); \
               notify('escaped'); return true";
    let step = limited(src);
    assert!(
        failed(&step).contains("ran past the script's time limit"),
        "{step:?}"
    );
    let src = "local s = ('a'):rep(40); local co = coroutine.wrap(function() \
               return s:match(('a?'):rep(40) .. ('a'):rep(40)) end); \
               pcall(co); while true do end";
    assert!(failed(&limited(src)).contains("pattern"));
}

#[test]
fn ordinary_matching_is_unchanged() {
    for src in [
        "local n = 0; for w in string.rep('word ', 10000):gmatch('%a+') do n = n + 1 end; return n == 10000",
        "return ('key=value'):match('^(%w+)=(.*)$') == 'key'",
        "return string.rep('a', 100000):find('b', 1, true) == nil",
        "return (string.rep('ab', 5000):gsub('b', 'c')) == string.rep('ac', 5000)",
        "local s = string.rep('x', 200000) .. 'needle'; return s:find('needle') == 200001",
        "return select(2, ('hello world'):gsub('o', { o = '0' })) == 2",
        "local t = {}; for k, v in ('a=1, b=2'):gmatch('(%w+)=(%w+)') do t[k] = v end; return t.b == '2'",
        "return query_mentions('HISTORY')",
    ] {
        assert!(holds(src), "{src}");
    }
    // A backtracking pattern on a long subject is no longer refused in advance: it runs, and
    // only the time limit stops it.
    assert!(holds(
        "local s = string.rep('a', 5000) .. 'b'; return s:find('.-.-b') == 1"
    ));
}

#[test]
fn a_gsub_result_counts_against_the_memory_limit() {
    // Only the memory limit may stop it: the time limit is out of reach (a gsub that grows its
    // result checks the clock too, and a loaded machine's could come first).
    let mut rt = runtime_with(HANG, 8 << 20);
    let step = step_of(
        &mut rt,
        &Script::new(
            1,
            "gsub.lua",
            "return ('x'):rep(100000):gsub('.', ('y'):rep(1000)) ~= nil",
        ),
    );
    assert!(failed(&step).contains("ran out of memory"), "{step:?}");
}

// ---- memory (item 4) ----
//
// These runs have the hang bound as their time limit: only the memory limits may stop them,
// however loaded the machine.

const HOG: &str =
    "hoard = hoard or {}; while true do hoard[#hoard + 1] = string.rep('x', 1000) .. #hoard end";
const VICTIM: &str = "count = (count or 0) + 1; local t = {}; for i = 1, 2000 do t[i] = tostring(i) end; \
                      set_state('count', count); return #t == 2000";

#[test]
fn a_script_that_runs_out_of_memory_does_not_starve_the_others() {
    let mut rt = runtime_with(HANG, 8 << 20);
    let victim = Script::new(101, "victim.lua", VICTIM);
    let other = Script::new(
        102,
        "other.lua",
        "return #string.rep('y', 100000) == 100000",
    );
    let hog = Script::new(103, "hog.lua", HOG);
    assert_eq!(count_of(&step_of(&mut rt, &victim)), Some(1));
    for round in 0..3 {
        let step = step_of(&mut rt, &hog);
        let error = failed(&step);
        assert!(
            error.contains("ran out of memory") && error.contains("its globals were reset"),
            "{error}"
        );
        // What the hog kept is given back: the others run, with their own globals intact.
        assert_eq!(
            count_of(&step_of(&mut rt, &victim)),
            Some(round + 2),
            "round {round}"
        );
        assert!(matches!(
            step_of(&mut rt, &other),
            Step::Done { holds: true, .. }
        ));
        assert!(rt.memory_used() < 2 << 20, "{}", rt.memory_used());
    }
}

#[test]
fn a_script_that_keeps_more_than_its_share_is_reset_with_an_error_naming_it() {
    let mut rt = runtime_with(HANG, 8 << 20);
    // Each run keeps about a MiB more; a script's share of 8 MiB is 2 MiB.
    let grows = Script::new(
        201,
        "grows.lua",
        "hoard = hoard or {}; for i = 1, 1000 do hoard[#hoard + 1] = string.rep('x', 1000) .. i end; return true",
    );
    let victim = Script::new(202, "victim.lua", VICTIM);
    let mut errors = Vec::new();
    for _ in 0..4 {
        if let Step::Failed { error } = step_of(&mut rt, &grows) {
            errors.push(error);
        }
        assert!(matches!(
            step_of(&mut rt, &victim),
            Step::Done { holds: true, .. }
        ));
    }
    assert!(!errors.is_empty(), "the script was never stopped");
    assert!(
        errors[0].starts_with("stopped: the script keeps ")
            && errors[0].contains("more than a script's share of the session's Lua memory (2 MiB of 8 MiB); its globals were reset"),
        "{}",
        errors[0]
    );
    assert_eq!(count_of(&step_of(&mut rt, &victim)), Some(5));
}

#[test]
fn memory_kept_in_a_waiting_task_or_a_closure_counts_too() {
    let mut rt = runtime_with(HANG, 8 << 20);
    for (key, src) in [
        (
            301,
            "local big = {}; for i = 1, 3000 do big[i] = string.rep('x', 1000) .. i end; wait_turns(1); return #big > 0",
        ),
        (
            302,
            "local big = {}; for i = 1, 3000 do big[i] = string.rep('x', 1000) .. i end; keep = function() return big end; return true",
        ),
        (
            303,
            "local co = coroutine.create(function() local big = {}; for i = 1, 3000 do big[i] = string.rep('x', 1000) .. i end; coroutine.yield() end); coroutine.resume(co); keep = co; return true",
        ),
    ] {
        let (task, step) = rt.start(
            &Script::new(key, "keeper.lua", src),
            &Frame::default(),
            HANG,
        );
        assert!(task.is_none(), "{src}");
        assert!(
            failed(&step).contains("more than a script's share"),
            "{src}: {step:?}"
        );
        assert!(rt.memory_used() < 2 << 20, "{src}: {}", rt.memory_used());
    }
}

#[test]
fn when_a_victim_runs_out_of_memory_the_error_names_the_script_that_kept_it() {
    let mut rt = runtime_with(HANG, 8 << 20);
    let hog = Script::new(
        401,
        "hog.lua",
        "hoard = hoard or {}; for i = 1, 3000 do hoard[#hoard + 1] = string.rep('x', 1000) .. i end; return true",
    );
    let victim = Script::new(
        402,
        "victim.lua",
        "count = (count or 0) + 1; set_state('count', count); \
         if count == 2 then local t = {}; for i = 1, 1e6 do t[i] = string.rep('v', 100) .. i end end; return true",
    );
    assert_eq!(count_of(&step_of(&mut rt, &victim)), Some(1));
    // The account of a run is an estimate; pretend the hog's slipped under its share (as the
    // collector freeing another script's garbage during its runs could make it).
    rt.ledger.credit(401, -(64 << 20));
    assert!(matches!(
        step_of(&mut rt, &hog),
        Step::Done { holds: true, .. }
    ));
    let step = step_of(&mut rt, &victim);
    let error = failed(&step);
    assert!(
        error.contains("ran out of memory") && error.contains("script hog.lua kept 3."),
        "{error}"
    );
    // The victim keeps its globals; the hog's were reset, and it is told at its next start.
    assert_eq!(count_of(&step_of(&mut rt, &victim)), Some(3));
    let error = failed(&step_of(&mut rt, &hog)).to_string();
    assert!(
        error.contains("globals were reset while another script ran out of memory"),
        "{error}"
    );
    // It starts again with fresh globals, and keeping as much again, is stopped by its share.
    let error = failed(&step_of(&mut rt, &hog)).to_string();
    assert!(error.contains("more than a script's share"), "{error}");
    assert_eq!(count_of(&step_of(&mut rt, &victim)), Some(4));
}

#[test]
fn a_waiting_task_of_a_reset_script_ends_with_the_reason() {
    let mut rt = runtime_with(HANG, 8 << 20);
    let waiter = Script::new(
        501,
        "waiter.lua",
        "hoard = {}; for i = 1, 3000 do hoard[i] = string.rep('x', 1000) .. i end; wait_turns(1); return true",
    );
    rt.ledger.credit(501, -(64 << 20));
    let (task, step) = rt.start(&waiter, &Frame::default(), HANG);
    assert!(matches!(step, Step::Waiting { .. }), "{step:?}");
    let hog = Script::new(502, "hog.lua", HOG);
    let error = failed(&step_of(&mut rt, &hog)).to_string();
    assert!(error.contains("script waiter.lua kept"), "{error}");
    let next = Frame {
        turn: 2,
        ..Frame::default()
    };
    let step = rt.resume(&task.unwrap(), &next, HANG);
    assert!(failed(&step).contains("globals were reset"), "{step:?}");
}

// ---- recursion (item 8) ----
//
// The recursion limit counts calls, not time: these runs have the hang bound as their time
// limit, so that only the recursion limit may stop them, however loaded the machine.

#[test]
fn deep_recursion_says_recursion_too_deep() {
    for src in [
        "local function f(n) return f(n + 1) + 1 end; return f(1)",
        "local function f(n) local a, b, c, d = n, n, n, n; return f(n + 1) + a + b + c + d end; return f(1)",
        "local t = setmetatable({}, { __index = function(t, k) return t[k] end }); return t.x",
        "local function nest() return coroutine.wrap(nest)() end; return nest()",
        "local function f(s) return (s:gsub('.', f)) end; return f('abc') == ''",
        "local t = setmetatable({}, {}); getmetatable(t).__concat = function(a, b) return a .. b end; return (t .. 'x') == ''",
    ] {
        let start = Instant::now();
        let (_, step) = run_with(&mut runtime_with(HANG, 8 << 20), src, &Frame::default());
        let error = failed(&step);
        assert!(error.contains("recursion too deep"), "{src}: {error}");
        assert!(!error.contains("memory"), "{src}: {error}");
        assert!(start.elapsed() < HANG, "{src}");
    }
    // Recursion a few thousand calls deep is fine.
    assert!(holds(
        "local function f(n) if n == 0 then return 0 end return f(n - 1) + 1 end; return f(5000) == 5000"
    ));
    // A table that is its own __index is Lua's own loop check.
    let step = run("local t = setmetatable({}, {}); getmetatable(t).__index = t; return t.x");
    assert!(
        failed(&step).contains("'__index' chain too long"),
        "{step:?}"
    );
}

#[test]
fn the_recursion_limit_cannot_be_caught() {
    let (_, step) = run_with(
        &mut runtime_with(HANG, 8 << 20),
        "local function f(n) return f(n + 1) + 1 end; local ok = pcall(f, 1); notify('escaped'); return true",
        &Frame::default(),
    );
    assert!(failed(&step).contains("recursion too deep"), "{step:?}");
}
