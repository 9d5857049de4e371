//! What a run keeps of what it reads: a field asked of the host once per run, let go when the
//! run ends (waiting or not, failed or not), asked at every read by a run that records; and
//! records, the views the host builds, read-only and walked like data.

use std::cell::Cell;

use super::*;

/// A host that counts how often each field is asked for.
struct Counting {
    turn: i64,
    turns: Cell<usize>,
    modes: Cell<usize>,
}

impl Counting {
    fn at(turn: i64) -> Self {
        Counting {
            turn,
            turns: Cell::new(0),
            modes: Cell::new(0),
        }
    }
}

impl Host for Counting {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        match (root, key) {
            ("context", "turn") => {
                self.turns.set(self.turns.get() + 1);
                out.record(
                    &["number", "token_usage", "max_iterations", "iteration_count"],
                    &[
                        Value::Integer(self.turn),
                        Value::Number(0.5),
                        Value::Integer(0),
                        Value::Integer(0),
                    ],
                )
            }
            ("context", "mode") => {
                self.modes.set(self.modes.get() + 1);
                out.text(if self.turn % 2 == 0 { "even" } else { "odd" })
            }
            _ => Ok(()),
        }
    }
}

fn start(rt: &mut Runtime, key: u64, src: &str, host: &Counting) -> (Option<Task>, Step) {
    rt.start(&Script::new(key, "memo.lua", src), host, HANG)
}

#[test]
fn a_field_read_again_in_a_run_is_asked_once_and_the_next_run_asks_afresh() {
    let mut rt = runtime();
    let src = "return context.turn.number == context.turn.number and context.turn == context.turn \
               and context.mode == context.mode and context.turn.number";
    let src = format!("local n = context.turn.number; {src} == n and n % 2 == 1");
    for turn in [1, 3] {
        let host = Counting::at(turn);
        let (_, step) = start(&mut rt, 1, &src, &host);
        assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
        assert_eq!((host.turns.get(), host.modes.get()), (1, 1));
    }
    // Another script of the same session, at another tick: its own answers.
    let host = Counting::at(2);
    let (_, step) = start(
        &mut rt,
        2,
        "return context.turn.number == 2 and context.mode == 'even'",
        &host,
    );
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn a_run_that_fails_or_waits_lets_go_of_what_it_read() {
    let mut rt = runtime();
    let (_, step) = start(
        &mut rt,
        1,
        "local n = context.turn.number; error('no')",
        &Counting::at(1),
    );
    failed(&step);
    let (_, step) = start(
        &mut rt,
        2,
        "return context.turn.number == 2",
        &Counting::at(2),
    );
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    // A waiting script reads the tick it is resumed at; a value it took keeps its own.
    let (task, _) = start(
        &mut rt,
        3,
        "local t = context.turn; coroutine.yield(); \
         return t.number == 1 and context.turn.number == 5 and context.mode == 'odd'",
        &Counting::at(1),
    );
    let host = Counting::at(5);
    let step = rt.resume(&task.unwrap(), &host, HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    assert_eq!(host.turns.get(), 1);
}

#[test]
fn a_run_that_records_what_it_reads_asks_at_every_read() {
    // Its replay record holds every read, as records made before runs kept their reads did.
    let mut rt = runtime();
    rt.set_recording(true);
    let host = Counting::at(1);
    let (task, _) = start(
        &mut rt,
        1,
        "local a = context.turn.number + context.turn.number; coroutine.yield(); return a == 2",
        &host,
    );
    assert_eq!(host.turns.get(), 2);
    let task = task.unwrap();
    let reads = task.journal().unwrap().runs[0]
        .inputs
        .iter()
        .filter(|i| matches!(i, Input::Field { key, .. } if key == "turn"))
        .count();
    assert_eq!(reads, 2);
}

#[test]
fn records_are_read_only_and_walk_and_copy_like_data() {
    let mut rt = runtime();
    for src in [
        "return not pcall(function() context.turn.number = 2 end)",
        "return not pcall(rawset, context.turn, 'number', 2)",
        "return not pcall(setmetatable, context.turn, nil)",
        "return getmetatable(context.turn) == 'read-only'",
        "return rawget(context.turn, 'number') == nil and #context.turn == 0 and rawlen(context.turn) == 0",
        // In the order of their sorted field names, through `pairs` and `next` alike.
        "local names = {}; for k, v in pairs(context.turn) do names[#names + 1] = k .. '=' .. tostring(v) end; \
         return table.concat(names, ',') == 'iteration_count=0,max_iterations=0,number=1,token_usage=0.5'",
        "local k, v = next(context.turn); local k2 = next(context.turn, k); \
         return k == 'iteration_count' and v == 0 and k2 == 'max_iterations'",
        // A misspelt field is an error; a field of the record is readable.
        "return not pcall(function() return context.turn.nubmer end) and context.turn.max_iterations == 0",
        // Dug out with Lua's own `next`, a record's values are a userdata no script can read
        // or change (nor reach its shape, which records of its kind share).
        "local raw_next = pairs({}); local _, u = raw_next(context.turn); \
         return type(u) == 'userdata' and getmetatable(u) == nil \
         and not pcall(function() return u[1] end) and not pcall(function() u[1] = 2 end) \
         and context.turn.number == 1",
    ] {
        let (_, step) = run_with(&mut rt, src, &Frame::default());
        assert!(
            matches!(step, Step::Done { holds: true, .. }),
            "{src}: {step:?}"
        );
    }
    // Handed back to the host, a record is a plain object of its fields.
    let (_, step) = run_with(
        &mut rt,
        "set_state('t', { turn = context.turn }); return true",
        &Frame::default(),
    );
    let Step::Done { effects, .. } = step else {
        panic!("{step:?}")
    };
    let [Effect::SetState { value, .. }] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(
        value.to_string(),
        r#"{"turn":{"iteration_count":0,"max_iterations":0,"number":1,"token_usage":0.5}}"#
    );
}

#[test]
fn a_record_kept_past_its_run_keeps_the_values_of_that_run() {
    // Each record is one table of its own, made at the run that read it.
    let mut rt = runtime();
    let src = "if kept == nil then kept = context.turn; return false end; \
               return kept.number == 1 and context.turn.number == 2 and kept ~= context.turn \
               and kept.token_usage == 0.5";
    let (_, step) = start(&mut rt, 9, src, &Counting::at(1));
    assert!(matches!(step, Step::Done { holds: false, .. }), "{step:?}");
    let (_, step) = start(&mut rt, 9, src, &Counting::at(2));
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

/// A host whose record has a field without a value.
struct Sparse;

impl Host for Sparse {
    fn field(&self, out: &mut Out<'_>, _: &str, key: &str) -> mlua::Result<()> {
        match key {
            "turn" => out.record(
                &["number", "label", "final"],
                &[Value::Integer(4), Value::Nil, Value::Boolean(false)],
            ),
            _ => Ok(()),
        }
    }
}

#[test]
fn a_record_field_without_a_value_reads_nil_and_is_not_walked() {
    let mut rt = runtime();
    let src = "local names = {}; for k in pairs(context.turn) do names[#names + 1] = k end; \
               return context.turn.label == nil and context.turn.final == false \
               and table.concat(names, ',') == 'final,number' \
               and not pcall(function() return context.turn.lable end)";
    let (_, step) = rt.start(&Script::new(10, "sparse.lua", src), &Sparse, HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
}

#[test]
fn answers_kept_across_runs_are_asked_again_once_per_run_and_never_by_a_recording_run() {
    let mut rt = runtime();
    let src = "return context.turn.number > 0 and context.mode ~= '' and context.turn.number > 0";
    // The mode is the same at odd turns: its text is kept, the turn's view refilled.
    for turn in [1, 3, 5] {
        let host = Counting::at(turn);
        let (_, step) = start(&mut rt, 1, src, &host);
        assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
        assert_eq!((host.turns.get(), host.modes.get()), (1, 1), "turn {turn}");
    }
    // A run that records what it reads asks at every read, as its replay will.
    rt.set_recording(true);
    let host = Counting::at(4);
    let (task, _) = start(
        &mut rt,
        2,
        "local a = context.turn.number + context.turn.number; coroutine.yield(); return a == 8",
        &host,
    );
    assert_eq!(host.turns.get(), 2);
    let reads = task.unwrap().journal().unwrap().runs[0]
        .inputs
        .iter()
        .filter(|i| matches!(i, Input::Field { key, .. } if key == "turn"))
        .count();
    assert_eq!(reads, 2);
}

/// A host that answers, and then fails.
struct AnswersThenFails {
    text: &'static str,
    number: i64,
}

impl Host for AnswersThenFails {
    fn field(&self, out: &mut Out<'_>, root: &str, key: &str) -> mlua::Result<()> {
        match (root, key) {
            ("context", "mode") => out.text(self.text)?,
            ("context", "turn") => out.record(&["number"], &[Value::Integer(self.number)])?,
            _ => return Ok(()),
        }
        Err(mlua::Error::RuntimeError(
            "the host failed after answering".into(),
        ))
    }
}

/// What a host delivered before it failed is kept like any answer, and so let go or brought
/// up to date: no later run reads it without the host being asked again.
#[test]
fn an_answer_delivered_before_the_host_failed_is_not_read_by_a_later_run() {
    let mut rt = runtime();
    let src = "local ok1 = pcall(function() return context.mode end) \
               local ok2 = pcall(function() return context.turn end) \
               return not ok1 and not ok2";
    let host = AnswersThenFails {
        text: "first",
        number: 1,
    };
    let (_, step) = rt.start(&Script::new(1, "fails.lua", src), &host, HANG);
    assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
    // The next runs, of this script and another, on a host that answers otherwise.
    for key in [2, 3] {
        let host = Counting::at(7);
        let (_, step) = start(
            &mut rt,
            key,
            "return context.mode == 'odd' and context.turn.number == 7",
            &host,
        );
        assert!(matches!(step, Step::Done { holds: true, .. }), "{step:?}");
        // Asked (at the run's start, to bring a kept answer up to date, or at the read).
        assert!(host.turns.get() >= 1 && host.modes.get() >= 1);
    }
}
