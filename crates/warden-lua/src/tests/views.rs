//! Record views handed from run to run: a run that leaves nothing a script can reach holding
//! its records lets the next run refill them; every other record keeps the values of the tick
//! it was read in, however it was kept (a global, a local across a wait, `_ENV`, the values
//! dug out with Lua's own `next`), and two records read in one run are two records.

use super::*;

const TURN: &[&str] = &["number", "token_usage", "max_iterations", "iteration_count"];

/// A host whose `context.turn` and `context.previous` are records of one shape (the same
/// field names), and whose turn may be given without its later fields.
struct Turns {
    turn: i64,
    short: bool,
}

impl Turns {
    fn at(turn: i64) -> Self {
        Turns { turn, short: false }
    }
}

impl Host for Turns {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        let number = match (root, key) {
            ("context", "turn") => self.turn,
            ("context", "previous") => self.turn - 1,
            _ => return Ok(()),
        };
        let values = [
            Value::Integer(number),
            Value::Number(0.5),
            Value::Integer(number * 10),
            Value::Integer(0),
        ];
        out.record(TURN, if self.short { &values[..1] } else { &values })
    }
}

fn holds_at(rt: &mut Runtime, key: u64, src: &str, host: &Turns) -> bool {
    match rt.start(&Script::new(key, "views.lua", src), host, HANG).1 {
        Step::Done { holds, .. } => holds,
        other => panic!("{src}: {other:?}"),
    }
}

/// Runs that read `context.turn` and keep nothing, at turns 5 to 7, each a script of its own:
/// each may refill the view a previous run was handed, and must see its own turn.
fn churn(rt: &mut Runtime) {
    for turn in 5..8 {
        let src = format!(
            "return context.turn.number == {turn} and context.turn.max_iterations == {}",
            turn * 10
        );
        assert!(
            holds_at(rt, 900 + turn as u64, &src, &Turns::at(turn)),
            "turn {turn}"
        );
    }
}

#[test]
fn a_record_kept_in_a_global_keeps_its_tick() {
    let mut rt = runtime();
    let src = "if T == nil then T = context.turn; return T.number == 1 end; \
               return T.number == 1 and T.max_iterations == 10 and context.turn.number == 2";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(1)));
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn a_record_kept_inside_a_table_of_the_globals_keeps_its_tick() {
    let mut rt = runtime();
    let src = "if keep == nil then keep = { {} }; keep[1].t = context.turn; return true end; \
               return keep[1].t.number == 1 and context.turn.number == 2";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(1)));
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn a_record_kept_in_a_closure_of_the_globals_keeps_its_tick() {
    let mut rt = runtime();
    let src = "if get == nil then local t = context.turn; get = function() return t end; return true end; \
               return get().number == 1 and context.turn.number == 2";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(1)));
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn a_record_kept_among_bound_waiting_primitives_keeps_its_tick() {
    // A script that names `coroutine`, `wait_turns` or `wait_for` has them bound in its own
    // globals: a record kept under one of their names, or beside them, is still seen.
    for (key, src) in [
        "if type(wait_for) == 'function' then wait_for = context.turn; return wait_for.number == 1 end; \
         return wait_for.number == 1 and context.turn.number == 2",
        "if type(wait_turns) == 'function' then wait_turns = context.turn; return wait_turns.number == 1 end; \
         return wait_turns.number == 1 and context.turn.number == 2 and coroutine.running ~= nil",
        "if coroutine.number == nil then coroutine = context.turn; return coroutine.number == 1 end; \
         return coroutine.number == 1 and context.turn.number == 2",
        "if T == nil then T = context.turn; return T.number == 1 and coroutine ~= nil end; \
         return T.number == 1 and context.turn.number == 2",
        // Under a key that is a record.
        "-- coroutine\n\
         for k in pairs(_G) do if type(k) == 'table' then return k.number == 1 and context.turn.number == 2 end end; \
         _G[context.turn] = wait_for; return true",
        // Swapped, the primitives keep nothing: the next runs may refill the record.
        "wait_for, coroutine = coroutine, wait_for; return context.turn.number == 1 or context.turn.number == 2",
    ]
    .into_iter()
    .enumerate()
    {
        let mut rt = runtime();
        let key = 10 + key as u64;
        assert!(holds_at(&mut rt, key, src, &Turns::at(1)), "{src}");
        churn(&mut rt);
        assert!(holds_at(&mut rt, key, src, &Turns::at(2)), "{src}");
        churn(&mut rt);
    }
}

#[test]
fn a_record_kept_in_a_new_env_keeps_its_tick() {
    let mut rt = runtime();
    // `_ENV` is the chunk's upvalue: setting it changes what the next run starts with, while
    // the script's own globals stay as they were made.
    let src = "if T ~= nil then return T.number == 1 and context.turn.number == 2 end; \
               local keep = setmetatable({ T = context.turn }, { __index = _ENV }); \
               _ENV = keep; return true";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(1)));
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn a_records_values_dug_out_with_luas_own_next_keep_their_tick() {
    let mut rt = runtime();
    // `pairs` of a table without `__pairs` hands out Lua's own `next`, which finds the view's
    // private key and its values; the sandbox's `next` walks a table holding them as a record.
    let src = "local rawnext = pairs({}); \
               if U ~= nil then \
                 local n; for k, v in next, { [K] = U } do if k == 'number' then n = v end end; \
                 return n == 1 and context.turn.number == 2 \
               end; \
               K, U = rawnext(context.turn); return K ~= nil and type(U) == 'userdata'";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(1)));
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn a_record_held_across_a_wait_keeps_its_tick() {
    let mut rt = runtime();
    let src = "local t = context.turn; coroutine.yield(); \
               return t.number == 1 and t.max_iterations == 10 and context.turn.number == 2";
    let (task, step) = rt.start(&Script::new(1, "wait.lua", src), &Turns::at(1), HANG);
    assert!(matches!(step, Step::Waiting { .. }), "{step:?}");
    churn(&mut rt);
    let step = rt.resume(&task.unwrap(), &Turns::at(2), HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn a_record_kept_by_a_failed_run_keeps_its_tick() {
    let mut rt = runtime();
    let src = "if T == nil then T = context.turn; error('on purpose') end; \
               return T.number == 1 and context.turn.number == 2";
    let step = rt
        .start(&Script::new(1, "views.lua", src), &Turns::at(1), HANG)
        .1;
    assert!(failed(&step).contains("on purpose"), "{step:?}");
    churn(&mut rt);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
}

#[test]
fn two_records_of_one_shape_in_a_run_are_two_records() {
    let mut rt = runtime();
    let src = "local t, p = context.turn, context.previous; \
               return t ~= p and t.number == TURN and p.number == TURN - 1 \
               and t.max_iterations == TURN * 10 and p.max_iterations == (TURN - 1) * 10";
    for turn in [3, 4, 5] {
        let src = format!("local TURN = {turn}; {src}");
        assert!(
            holds_at(&mut rt, 10 + turn as u64, &src, &Turns::at(turn)),
            "turn {turn}"
        );
    }
}

#[test]
fn a_refilled_record_shows_only_its_own_runs_values() {
    let mut rt = runtime();
    let full = "return context.turn.number == 4 and context.turn.max_iterations == 40";
    assert!(holds_at(&mut rt, 3, full, &Turns::at(4)));
    // The same shape given without its later fields: they are nil, not the last run's.
    let short = Turns {
        turn: 5,
        short: true,
    };
    let src = "local t = context.turn; local n = 0; for _ in pairs(t) do n = n + 1 end; \
               return t.number == 5 and t.max_iterations == nil and t.token_usage == nil and n == 1";
    assert!(holds_at(&mut rt, 4, src, &short));
    assert!(holds_at(
        &mut rt,
        5,
        "local t = context.turn; local seen = {}; for k, v in pairs(t) do seen[k] = v end; \
         return getmetatable(t) == 'read-only' and seen.number == 6 and seen.max_iterations == 60 \
         and not pcall(function() t.number = 1 end) and not pcall(rawset, t, 'number', 1)",
        &Turns::at(6)
    ));
}

#[test]
fn a_record_that_outlives_its_run_without_escaping_is_not_seen_again() {
    // A record a run returned (a failure: a condition returns a boolean) or raised as its
    // error object is out of every script's reach once the run ends.
    let mut rt = runtime();
    let step = rt
        .start(
            &Script::new(4, "views.lua", "return context.turn"),
            &Turns::at(1),
            HANG,
        )
        .1;
    assert!(failed(&step).contains("returned a table"), "{step:?}");
    let step = rt
        .start(
            &Script::new(5, "views.lua", "error(context.turn)"),
            &Turns::at(1),
            HANG,
        )
        .1;
    assert!(
        failed(&step).contains("error object of type table"),
        "{step:?}"
    );
    churn(&mut rt);
}

// Answers kept in the memos across runs (`fetch::refresh`): a run reads them as plain table
// lookups, each brought up to date with the run's own tick before any script code runs.

/// A script that reads `context.turn` and keeps nothing, so that its view stays in the memo.
fn settle(rt: &mut Runtime, turn: i64) {
    let src = format!("return context.turn.number == {turn}");
    assert!(
        holds_at(rt, 800 + turn as u64, &src, &Turns::at(turn)),
        "settle at {turn}"
    );
}

#[test]
fn a_record_taken_from_the_memo_without_reading_it_keeps_its_tick() {
    let mut rt = runtime();
    settle(&mut rt, 1);
    // Handed the view kept from the run before, brought to turn 2, and kept without a read.
    let src = "if T == nil then T = context.turn; return true end; \
               return T.number == 2 and T.max_iterations == 20 and context.turn.number == 9 \
               and T ~= context.turn";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(2)));
    churn(&mut rt);
    settle(&mut rt, 8);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(9)));
}

#[test]
fn a_record_taken_from_the_memo_and_held_across_a_wait_keeps_its_tick() {
    let mut rt = runtime();
    settle(&mut rt, 1);
    let src = "local t = context.turn; coroutine.yield(); \
               return t.number == 2 and t.max_iterations == 20 and context.turn.number == 9";
    let (task, step) = rt.start(&Script::new(1, "wait.lua", src), &Turns::at(2), HANG);
    assert!(matches!(step, Step::Waiting { .. }), "{step:?}");
    churn(&mut rt);
    settle(&mut rt, 8);
    let step = rt.resume(&task.unwrap(), &Turns::at(9), HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn a_record_taken_from_the_memo_inside_a_table_or_closure_keeps_its_tick() {
    let mut rt = runtime();
    settle(&mut rt, 1);
    let src = "if keep == nil then local t = context.turn; keep = { get = function() return t end }; \
               return true end; \
               return keep.get().number == 3 and keep.get().token_usage == 0.5 \
               and context.turn.number == 10";
    assert!(holds_at(&mut rt, 1, src, &Turns::at(3)));
    churn(&mut rt);
    settle(&mut rt, 8);
    assert!(holds_at(&mut rt, 1, src, &Turns::at(10)));
}

#[test]
fn a_record_kept_across_runs_shows_each_runs_own_values_including_fewer() {
    let mut rt = runtime();
    for turn in 1..4 {
        settle(&mut rt, turn);
    }
    // The same view, given by the host without its later fields: they read nil.
    let short = Turns {
        turn: 4,
        short: true,
    };
    let src = "local t = context.turn; return t.number == 4 and t.max_iterations == nil";
    assert!(holds_at(&mut rt, 2, src, &short));
    settle(&mut rt, 5);
    assert!(holds_at(
        &mut rt,
        3,
        "return context.turn.max_iterations == 60 and context.turn.number == 6",
        &Turns::at(6)
    ));
}

/// A host whose answers change from tick to tick: a record with a text field (which the memo
/// cannot refill without converting it), a text, and a number.
struct Labels(i64);

impl Host for Labels {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        match (root, key) {
            ("context", "turn") => {
                let label = out.lua().create_string(format!("turn {}", self.0))?;
                out.record(
                    &["number", "label"],
                    &[Value::Integer(self.0), Value::String(label)],
                )
            }
            ("context", "mode") => out.text(if self.0 % 2 == 0 { "even" } else { "odd" }),
            ("context", "token_usage") => out.value(self.0 as f64 / 10.0),
            ("context", "final") => out.value(self.0 % 2 == 0),
            _ => Ok(()),
        }
    }
}

#[test]
fn texts_numbers_and_records_kept_across_runs_follow_the_host() {
    let mut rt = runtime();
    let src = "local n = context.turn.number; \
               return context.turn.label == 'turn ' .. n \
               and context.mode == (n % 2 == 0 and 'even' or 'odd') \
               and context.token_usage == n / 10 and context.final == (n % 2 == 0)";
    for turn in [1, 3, 4, 4, 7, 2] {
        let step = rt
            .start(&Script::new(1, "labels.lua", src), &Labels(turn), HANG)
            .1;
        assert!(
            matches!(step, Step::Done { holds: true, .. }),
            "{turn}: {step:?}"
        );
    }
    // Another script, reading them kept in its own globals: each keeps the tick it was read at.
    let src = "if M == nil then M, U, F = context.mode, context.token_usage, context.final; \
               return true end; \
               return M == 'odd' and U == 0.5 and F == false and context.mode == 'even'";
    for turn in [5, 6] {
        let step = rt
            .start(&Script::new(2, "kept.lua", src), &Labels(turn), HANG)
            .1;
        assert!(
            matches!(step, Step::Done { holds: true, .. }),
            "{turn}: {step:?}"
        );
    }
}
