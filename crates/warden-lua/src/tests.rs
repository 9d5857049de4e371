//! The runtime's behavior, and the sandbox tried by scripts that attempt to break it: every
//! point of the sandbox has a test here that must be refused or stopped.

use std::time::{Duration, Instant};

use mlua::Value;

use super::*;

/// The names the tests use (an embedder passes its own: Warden passes its hooks and levels).
const VOCABULARY: Vocabulary = Vocabulary {
    hooks: &[
        "on_turn_start",
        "on_turn_end",
        "on_tool_complete",
        "on_tool_call",
    ],
    priorities: &["low", "normal", "high", "critical"],
    delivery_points: &["immediate", "turn_start", "turn_end"],
    log_levels: &["debug", "info", "warning", "warn", "error"],
    decisions: &["allow", "ask", "deny", "continue", "stop"],
};

/// A host with a turn number, an event, and a tool result.
#[derive(Clone)]
struct Frame {
    turn: i64,
    hook: &'static str,
    tool: &'static str,
    result: serde_json::Value,
    state: serde_json::Value,
}

impl Default for Frame {
    fn default() -> Self {
        Frame {
            turn: 1,
            hook: "on_turn_start",
            tool: "",
            result: serde_json::Value::Null,
            state: serde_json::json!({"seen": 2}),
        }
    }
}

impl Host for Frame {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        let json = match (root, key) {
            ("context", "turn") => {
                return out.record(
                    &["number", "token_usage", "max_iterations", "iteration_count"],
                    &[
                        Value::Integer(self.turn),
                        Value::Number(0.5),
                        Value::Integer(0),
                        Value::Integer(0),
                    ],
                );
            }
            ("context", "state") => self.state.clone(),
            ("context", "history") => {
                serde_json::json!({"failures": {"web": 3}, "calls": {}, "tools": [{"name": "web"}]})
            }
            ("context", "query") => serde_json::json!("Research the history of Lua"),
            ("event", "hook") => serde_json::json!(self.hook),
            ("event", "tool_name") => serde_json::json!(self.tool),
            ("result", k) => self
                .result
                .get(k)
                .cloned()
                .unwrap_or(serde_json::Value::Null),
            _ => serde_json::Value::Null,
        };
        out.serialize(&json)
    }

    fn shape(&self) -> Shape {
        Shape {
            tool: !self.tool.is_empty(),
            result: if self.result.is_null() {
                ResultShape::None
            } else {
                ResultShape::Table
            },
        }
    }
}

/// How long a test lets a run take before it calls the run hung: a hang detector, not a speed
/// check. It is the time limit of every run whose verdict the clock must not decide: a script
/// that must end on its own (done, waiting, or refused), or that another limit (memory,
/// recursion) must stop. Those run within milliseconds, which a loaded machine stretches by a
/// small factor, not a thousandfold. Only the runs the time limit is to stop have a short one
/// ([`run_limited`]).
const HANG: Duration = Duration::from_secs(60);

/// A session's runtime. Its own time limit, 300 ms, is for the runs the time limit is to stop
/// ([`run_limited`]); the others run under [`HANG`].
fn runtime() -> Runtime {
    Runtime::new(
        Limits {
            timeout: Duration::from_millis(300),
            memory: 8 << 20,
        },
        VOCABULARY,
    )
    .unwrap()
}

/// Runs `source`, which must end on its own (or be stopped by a limit other than time): its
/// time limit is [`HANG`].
fn run_with(rt: &mut Runtime, source: &str, frame: &Frame) -> (Option<Task>, Step) {
    run_within(rt, source, frame, HANG)
}

/// Runs `source`, which the time limit is to stop: its time limit is the runtime's own.
fn run_limited(rt: &mut Runtime, source: &str, frame: &Frame) -> (Option<Task>, Step) {
    let timeout = rt.limits().timeout;
    run_within(rt, source, frame, timeout)
}

/// Runs `source` with `timeout` as its time limit.
fn run_within(
    rt: &mut Runtime,
    source: &str,
    frame: &Frame,
    timeout: Duration,
) -> (Option<Task>, Step) {
    static KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let key = KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    rt.start(&Script::new(key, "test.lua", source), frame, timeout)
}

/// [`run_with`] in a fresh session.
fn run(source: &str) -> Step {
    run_with(&mut runtime(), source, &Frame::default()).1
}

/// [`run_limited`] in a fresh session (300 ms).
fn limited(source: &str) -> Step {
    run_limited(&mut runtime(), source, &Frame::default()).1
}

fn failed(step: &Step) -> &str {
    match step {
        Step::Failed { error } => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// Whether `source` holds. Its time limit is [`HANG`]: a script that must hold is not stopped
/// by the clock of a loaded machine.
fn holds(source: &str) -> bool {
    match run_within(&mut runtime(), source, &Frame::default(), HANG).1 {
        Step::Done { holds, .. } => holds,
        other => panic!("{source}: {other:?}"),
    }
}

// ---- the API ----

#[test]
fn a_script_reads_the_context_and_returns_its_verdict() {
    assert!(holds(
        "return context.turn.number == 1 and context.turn.token_usage == 0.5"
    ));
    assert!(holds(
        "return context.state.get('seen') == 2 and context.state.get('x', 7) == 7 and context.state.seen == 2"
    ));
    assert!(holds(
        "return failure_count('web') == 3 and tool_calls('web') == 0"
    ));
    assert!(holds(
        "return query_mentions('HISTORY') and not query_mentions('rust')"
    ));
    assert!(holds(
        "return #context.history.tools == 1 and context.history.tools[1].name == 'web'"
    ));
    assert!(!holds("return nil"));
    assert!(!holds("local x = 1"));
    let step = run("return 'yes'");
    assert!(failed(&step).contains("returns true or false"), "{step:?}");
}

#[test]
fn several_actions_in_one_run_are_all_reported() {
    let step = run(r#"
        notify("first", { priority = "high", category = "hint", deliver_at = "immediate" })
        log("second", "warn")
        set_state("count", { n = 1, list = { 1, 2 } })
        emit_event("research.started", { query = context.query })
        print("debug", 1)
        return true
    "#);
    let Step::Done {
        holds: true,
        effects,
    } = step
    else {
        panic!("{step:?}")
    };
    assert_eq!(effects.len(), 5);
    assert_eq!(
        effects[0],
        Effect::Notify {
            message: "first".into(),
            category: Some("hint".into()),
            priority: Some("high".into()),
            deliver_at: Some("immediate".into())
        }
    );
    assert_eq!(
        effects[2],
        Effect::SetState {
            key: "count".into(),
            value: serde_json::json!({"n": 1, "list": [1, 2]}),
            session: false,
        }
    );
    assert_eq!(
        effects[3],
        Effect::EmitEvent {
            event_type: "research.started".into(),
            payload: serde_json::json!({"query": "Research the history of Lua"})
        }
    );
    assert_eq!(
        effects[4],
        Effect::Log {
            level: Some("debug".into()),
            message: "debug\t1".into()
        }
    );
}

#[test]
fn a_failing_run_discards_its_effects_and_reports_a_traceback() {
    let step = run("notify('lost')\nlocal function inner() error('boom') end\ninner()");
    let e = failed(&step);
    assert!(e.contains("test.lua:2: boom"), "{e}");
    assert!(e.contains("stack traceback"), "{e}");
}

#[test]
fn bad_arguments_are_named() {
    assert!(
        failed(&run("notify('x', { priority = 'hihg' })"))
            .contains("use one of low, normal, high, critical")
    );
    assert!(failed(&run("notify('x', { colour = 'red' })")).contains("unknown option `colour`"));
    assert!(failed(&run("log('x', 'loud')")).contains("unknown value 'loud'"));
    assert!(failed(&run("wait_for('on_turn_strat')")).contains("is not a hook"));
    assert!(failed(&run("wait_turns(0)")).contains("whole number from 1"));
    assert!(failed(&run("set_state('k', function() end)")).contains("cannot be stored"));
}

#[test]
fn syntax_errors_name_the_line() {
    let e = check_syntax("scripts/x.lua", "local a = 1\nif a then\n  return 2 +\nend").unwrap_err();
    assert_eq!(e.line, Some(4));
    assert!(e.message.contains("unexpected symbol"), "{e}");
    assert!(check_syntax("scripts/x.lua", "return true").is_ok());
}

// ---- coroutines ----

#[test]
fn a_script_waits_across_turns_and_resumes_where_it_stopped() {
    let mut rt = runtime();
    let src = "notify('start'); wait_turns(2); notify('two turns later at ' .. context.turn.number); return true";
    let mut frame = Frame::default();
    let (task, step) = run_with(&mut rt, src, &frame);
    let task = task.expect("waiting");
    assert!(
        matches!(&step, Step::Waiting { wake: Some(h), effects } if h == "on_turn_start" && effects.len() == 1)
    );
    frame.turn = 2;
    let step = rt.resume(&task, &frame, HANG);
    assert!(
        matches!(&step, Step::Waiting { effects, .. } if effects.is_empty()),
        "{step:?}"
    );
    frame.turn = 3;
    let step = rt.resume(&task, &frame, HANG);
    let Step::Done {
        holds: true,
        effects,
    } = step
    else {
        panic!("{step:?}")
    };
    assert_eq!(
        effects,
        vec![Effect::Notify {
            message: "two turns later at 3".into(),
            category: None,
            priority: None,
            deliver_at: None
        }]
    );
}

#[test]
fn the_event_wait_for_returns_keeps_its_values_after_later_waits() {
    let mut rt = runtime();
    let src = "local ev = wait_for('on_tool_complete'); wait_turns(1); \
               return ev.tool_name == 'vault_search' and event.tool_name == '' and ev.hook == 'on_tool_complete'";
    let (task, _) = run_with(&mut rt, src, &Frame::default());
    let task = task.unwrap();
    let done = Frame {
        hook: "on_tool_complete",
        tool: "vault_search",
        ..Frame::default()
    };
    assert!(matches!(
        rt.resume(&task, &done, HANG),
        Step::Waiting { .. }
    ));
    let next_turn = Frame {
        turn: 2,
        ..Frame::default()
    };
    assert!(matches!(
        rt.resume(&task, &next_turn, HANG),
        Step::Done { holds: true, .. }
    ));
}

#[test]
fn wait_for_returns_the_matching_event() {
    let mut rt = runtime();
    let src = "local ev = wait_for('on_tool_complete', { tool = 'vault_search' }); return ev.tool_name == 'vault_search' and result.count > 6";
    let (task, step) = run_with(&mut rt, src, &Frame::default());
    assert!(matches!(step, Step::Waiting { wake: Some(ref h), .. } if h == "on_tool_complete"));
    let task = task.unwrap();
    let other = Frame {
        hook: "on_tool_complete",
        tool: "web_search",
        result: serde_json::json!({"count": 9}),
        ..Frame::default()
    };
    assert!(matches!(
        rt.resume(&task, &other, HANG),
        Step::Waiting { .. }
    ));
    let vault = Frame {
        tool: "vault_search",
        ..other
    };
    assert!(matches!(
        rt.resume(&task, &vault, HANG),
        Step::Done { holds: true, .. }
    ));
}

#[test]
fn a_plain_yield_waits_for_the_scripts_own_hook() {
    let mut rt = runtime();
    let (task, step) = run_with(&mut rt, "coroutine.yield(); return true", &Frame::default());
    assert!(matches!(step, Step::Waiting { wake: None, .. }));
    assert!(matches!(
        rt.resume(&task.unwrap(), &Frame::default(), HANG),
        Step::Done { holds: true, .. }
    ));
}

#[test]
fn waiting_inside_the_scripts_own_coroutine_is_an_error_not_a_silent_yield() {
    let mut rt = runtime();
    for src in [
        "local co = coroutine.create(function() wait_turns(1) end); local ok, e = coroutine.resume(co); error(e, 0)",
        "coroutine.wrap(function() wait_for('on_turn_end') end)()",
    ] {
        let (task, step) = run_with(&mut rt, src, &Frame::default());
        assert!(task.is_none());
        let error = failed(&step);
        assert!(
            error.contains("cannot wait inside a coroutine the script created"),
            "{src}: {error}"
        );
    }
}

#[test]
fn values_read_before_waiting_keep_their_tick_and_roots_read_the_current_one() {
    let mut rt = runtime();
    let src = "local t = context.turn; local c = context; wait_turns(1); \
               return t.number == 1 and c.turn.number == 2 and context.turn.number == 2";
    let (task, _) = run_with(&mut rt, src, &Frame::default());
    let next = Frame {
        turn: 2,
        ..Frame::default()
    };
    let step = rt.resume(&task.unwrap(), &next, HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn within_a_run_the_context_is_one_frame() {
    assert!(holds(
        "local a = context.turn; local b = context.turn; return a.number == b.number and a.token_usage == b.token_usage"
    ));
}

#[test]
fn a_halted_task_is_gone_and_the_runtime_goes_on() {
    let mut rt = runtime();
    let (task, _) = run_with(&mut rt, "wait_turns(5)", &Frame::default());
    let task = task.unwrap();
    assert_eq!(task.script(), "test.lua");
    rt.halt(task);
    assert!(holds_in(&mut rt, "return true"));
}

#[test]
fn sessions_do_not_share_globals() {
    let mut a = runtime();
    let mut b = runtime();
    let src = "counter = (counter or 0) + 1; return counter == 1";
    let script = Script::new(7, "count.lua", src);
    let frame = Frame::default();
    assert!(matches!(
        a.start(&script, &frame, HANG).1,
        Step::Done { holds: true, .. }
    ));
    // The same script's globals persist within a session...
    assert!(matches!(
        a.start(&script, &frame, HANG).1,
        Step::Done { holds: false, .. }
    ));
    // ...and are not seen by another session's.
    assert!(matches!(
        b.start(&script, &frame, HANG).1,
        Step::Done { holds: true, .. }
    ));
    // Nor by another script of the same session.
    assert!(holds_in(&mut a, "return counter == nil"));
}

fn holds_in(rt: &mut Runtime, src: &str) -> bool {
    matches!(
        run_within(rt, src, &Frame::default(), HANG).1,
        Step::Done { holds: true, .. }
    )
}

// ---- the sandbox ----

#[test]
fn dangerous_globals_are_absent() {
    for name in [
        "io",
        "debug",
        "require",
        "package",
        "dofile",
        "loadfile",
        "newproxy",
        "module",
        "loadstring",
        "setfenv",
        "getfenv",
    ] {
        assert!(
            holds(&format!("return {name} == nil")),
            "{name} is reachable"
        );
    }
    assert!(holds(
        "return os.execute == nil and os.getenv == nil and os.remove == nil and os.exit == nil"
    ));
    assert!(holds(
        "return type(os.time()) == 'number' and type(os.clock()) == 'number'"
    ));
    assert!(holds("return string.dump == nil"));
    assert!(holds("return ('x').dump == nil"));
}

#[test]
fn the_real_globals_are_out_of_reach() {
    assert!(holds("return _G.io == nil and _ENV.io == nil"));
    assert!(holds("return getmetatable(_ENV) == 'sandbox'"));
    assert!(holds("return load('return io')() == nil"));
    assert!(holds("return load('return debug', 'x', 't', {})() == nil"));
    assert!(holds("local f = load('x = 1'); f(); return x == nil"));
    // The library tables are views: their metatable is protected and they hold nothing, so
    // the real tables (shared by every script of the session) cannot be reached.
    for lib in ["string", "table", "math", "utf8", "coroutine", "os"] {
        assert!(
            holds(&format!(
                "return getmetatable({lib}) == 'read-only' and next({lib}) ~= nil \
                 and rawget({lib}, (next({lib}))) == nil"
            )),
            "{lib}"
        );
    }
}

#[test]
fn binary_chunks_cannot_be_loaded() {
    assert!(failed(&run("load('\\27Lua', 'x', 'b')")).contains("binary chunks are not allowed"));
    assert!(holds(
        "local f, err = load('\\27LuaT\\0'); return f == nil and err:find('binary') ~= nil"
    ));
    assert!(failed(&run("load(function() return nil end)")).contains("only load source text"));
}

#[test]
fn garbage_collection_cannot_be_controlled() {
    assert!(holds("return type(collectgarbage('count')) == 'number'"));
    for opt in [
        "collect",
        "stop",
        "step",
        "incremental",
        "generational",
        "setpause",
    ] {
        assert!(
            failed(&run(&format!("collectgarbage('{opt}')"))).contains("only ask for \"count\""),
            "{opt}"
        );
    }
}

#[test]
fn the_string_metatable_is_locked() {
    assert!(holds(
        "return getmetatable('') == 'the string metatable is protected'"
    ));
    assert!(
        !failed(&run(
            "getmetatable('').__index = function() return 'pwned' end"
        ))
        .is_empty()
    );
    assert!(failed(&run("setmetatable('', {})")).contains("table expected"));
    assert!(holds("return ('abc'):upper() == 'ABC'"));
}

#[test]
fn the_provided_tables_cannot_be_changed() {
    for src in [
        "string.upper = function() return 'x' end",
        "table.insert = nil",
        "math.pi = 3",
        "os.time = nil",
        "coroutine.resume = nil",
        "context.turn = 1",
        "context.turn.number = 5",
        "context.history.tools[1].name = 'x'",
        "table.insert(context.history.tools, 1)",
        "event.hook = 'x'",
        "context.state.seen = 3",
        "rawset(string, 'upper', 1)",
        "rawset(context, 'turn', 1)",
        "setmetatable(context, {})",
        "setmetatable(string, {})",
    ] {
        let step = run(src);
        assert!(
            matches!(step, Step::Failed { .. }),
            "{src} was allowed: {step:?}"
        );
    }
    // And a script in the same session still sees them intact afterwards.
    let mut rt = runtime();
    let _ = run_with(
        &mut rt,
        "string.upper = nil; math.pi = 3",
        &Frame::default(),
    );
    assert!(holds_in(
        &mut rt,
        "return ('a'):upper() == 'A' and string.upper('b') == 'B' and math.pi > 3.14"
    ));
}

#[test]
fn finalizers_are_refused() {
    assert!(
        failed(&run(
            "setmetatable({}, { __gc = function() while true do end end })"
        ))
        .contains("__gc")
    );
    // Closers could run with hooks off after the time limit stops a coroutine.
    assert!(
        failed(&run(
            "local x <close> = setmetatable({}, { __close = function() end })"
        ))
        .contains("__close")
    );
    // Nor added later to a metatable in use: Lua reads __close off it when an object becomes
    // closable and when it is closed (a late __gc would not mark the table for finalization,
    // but it is refused all the same).
    for late in [
        "local mt = {}; setmetatable({}, mt); mt.__gc = function() while true do end end; return true",
        "local mt = {}; setmetatable({}, mt); mt.__close = function() while true do end end; return true",
        "local mt = {}; setmetatable({}, mt); rawset(mt, '__close', function() end); return true",
    ] {
        let step = run(late);
        let error = failed(&step);
        assert!(
            error.contains("__close") && error.contains("__gc"),
            "{late}: {error}"
        );
    }
}

fn assert_stopped(src: &str) {
    let start = Instant::now();
    let step = limited(src);
    let e = failed(&step);
    assert!(
        e.contains("time limit") || e.contains("out of memory"),
        "{src}: {e}"
    );
    assert!(start.elapsed() < HANG, "{src} took {:?}", start.elapsed());
}

#[test]
fn the_time_limit_stops_every_kind_of_loop() {
    assert_stopped("while true do end");
    assert_stopped("notify('lost'); local i = 0; while true do i = i + 1 end");
    assert_stopped("while true do pcall(function() while true do end end) end");
    assert_stopped(
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
    );
    assert_stopped("pcall(function() while true do end end); while true do end");
    assert_stopped(
        "local co = coroutine.create(function() while true do end end); while true do coroutine.resume(co) end",
    );
    assert_stopped("local f = coroutine.wrap(function() while true do end end); f()");
    assert_stopped("string.gsub(string.rep('a', 100), 'a', function() while true do end end)");
    assert_stopped("local t = {3, 2, 1}; table.sort(t, function(a, b) while true do end end)");
    assert_stopped(
        "local t = setmetatable({}, { __index = function(t, k) while true do end end }); return t.x",
    );
    assert_stopped(
        "xpcall(function() error('x') end, function() while true do end end); while true do end",
    );
    assert_stopped("local function f() return pcall(f) end; while true do f() end");
    // A message handler that loops, after the limit is hit: hooks are off while it runs.
    assert_stopped("xpcall(function() while true do end end, function() while true do end end)");
    assert_stopped(
        "local co = coroutine.create(function() while true do end end); coroutine.resume(co); coroutine.close(co); while true do end",
    );
}

#[test]
fn a_limit_cannot_be_caught() {
    let step = limited(
        "local ok = pcall(function() while true do end end); notify('escaped: ' .. tostring(ok)); return true",
    );
    assert!(failed(&step).contains("time limit"), "{step:?}");
}

#[test]
fn the_memory_limit_stops_a_script_and_the_session_goes_on() {
    // A time limit these runs cannot reach: only the memory limit may stop them.
    let mut rt = Runtime::new(
        Limits {
            timeout: HANG,
            memory: 8 << 20,
        },
        VOCABULARY,
    )
    .unwrap();
    let src = "local t = {}; for i = 1, 1e8 do t[i] = string.rep('x', 100) .. i end";
    let step = run_with(&mut rt, src, &Frame::default()).1;
    assert!(failed(&step).contains("memory"), "{step:?}");
    let step = run_with(&mut rt, "local parts = {}; while true do local ok = pcall(function() parts[#parts + 1] = string.rep('y', 1e6) end) end", &Frame::default()).1;
    assert!(failed(&step).contains("memory"), "{step:?}");
    assert!(
        failed(&run_with(&mut rt, "return string.rep('x', 1e8)", &Frame::default()).1)
            .contains("memory")
    );
    assert!(holds_in(&mut rt, "collectgarbage('count'); return true"));
}

#[test]
fn error_objects_are_not_formatted_through_their_own_tostring() {
    let start = Instant::now();
    let step = run("error(setmetatable({}, { __tostring = function() while true do end end }))");
    assert!(
        failed(&step).contains("error object of type table"),
        "{step:?}"
    );
    assert!(start.elapsed() < HANG);
}

#[test]
fn a_script_cannot_yield_its_way_out_of_the_limit() {
    let mut rt = runtime();
    let (task, _) = run_with(
        &mut rt,
        "while true do coroutine.yield() end",
        &Frame::default(),
    );
    let task = task.unwrap();
    for _ in 0..3 {
        assert!(matches!(
            rt.resume(&task, &Frame::default(), HANG),
            Step::Waiting { .. }
        ));
    }
    let (_, step) = run_limited(
        &mut rt,
        "local n = 0; while true do n = n + 1 end",
        &Frame::default(),
    );
    assert!(failed(&step).contains("time limit"));
}

#[test]
fn next_over_a_view_shows_its_contents_and_nothing_behind_it() {
    // `next` walks what a view shows (field names and frozen values), never the view's
    // private insides; nothing it returns can change what others read.
    assert!(holds(
        "local k, v = next(context.turn); return type(k) == 'string' and not pcall(function() context.turn[k] = 1 end)"
    ));
    assert!(holds(
        "local n = 0; for k, v in next, string do n = n + 1 end; return n > 5 and not pcall(function() string.upper = nil end) and string.upper('a') == 'A'"
    ));
}

#[test]
fn tables_become_the_same_json_every_time_and_nothing_is_dropped() {
    let mut rt = runtime();
    let src = "set_state('k', { 1, 2, a = 3, [10] = 'x', z = { y = true, b = {} } }); \
               set_state('list', { 'a', 'b', 'c' }); return true";
    let (_, step) = run_with(&mut rt, src, &Frame::default());
    let Step::Done { effects, .. } = step else {
        panic!("{step:?}")
    };
    let values: Vec<String> = effects
        .iter()
        .map(|e| match e {
            Effect::SetState { value, .. } => value.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        values,
        [
            r#"{"1":1,"10":"x","2":2,"a":3,"z":{"b":{},"y":true}}"#,
            r#"["a","b","c"]"#
        ]
    );
    for (src, why) in [
        (
            "set_state('k', { f = print })",
            "a function cannot be stored",
        ),
        (
            "set_state('k', { [true] = 1 })",
            "must be a string or a number, not a boolean",
        ),
        ("set_state('k', 0/0)", "is not a number JSON can hold"),
    ] {
        let (_, step) = run_with(&mut rt, src, &Frame::default());
        let error = failed(&step);
        assert!(error.contains(why), "{src}: {error}");
    }
}

#[test]
fn views_walk_like_tables_and_records_know_their_fields() {
    let mut rt = runtime();
    for src in [
        // `next` over a view sees the view's contents, not its insides.
        "local n = 0; for k in next, context.turn do n = n + 1 end; return n == 4 and next(context.turn) ~= nil",
        "return type(next(context.turn)) == 'string'",
    ] {
        let (_, step) = run_with(&mut rt, src, &Frame::default());
        assert!(
            matches!(step, Step::Done { holds: true, .. }),
            "{src}: {step:?}"
        );
    }
    let (_, step) = run_with(&mut rt, "return context.turn.nubmer", &Frame::default());
    let error = failed(&step);
    assert!(
        error.contains("no field `nubmer` in this record; its fields are number, token_usage"),
        "{error}"
    );
}

#[test]
fn errors_in_wardens_functions_point_at_the_script_line_once() {
    let mut rt = runtime();
    for (src, want) in [
        (
            "\nnotify('x', { colour = 'red' })",
            "test.lua:2: notify: unknown option `colour`; the options are category, priority and deliver_at\nstack traceback:\n\ttest.lua:2: in main chunk",
        ),
        (
            "setmetatable(context, {})",
            "test.lua:1: setmetatable: this table's metatable is protected (Warden's data and libraries are read-only)\nstack traceback:\n\ttest.lua:1: in main chunk",
        ),
        (
            "local function f() log('x', 'loud') end\nf()",
            "test.lua:1: log: level: unknown value 'loud'; use one of debug, info, warning, warn, error\nstack traceback:\n\ttest.lua:1: in local 'f'\n\ttest.lua:2: in main chunk",
        ),
    ] {
        let (_, step) = run_with(&mut rt, src, &Frame::default());
        assert_eq!(failed(&step), want, "{src}");
    }
}

mod limits;
mod memo;
mod patterns;
mod redteam;
mod straight;
mod views;
