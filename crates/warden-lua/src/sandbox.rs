//! Building a [`Runtime`]: the sandboxed Lua state (the libraries it keeps, the ones it
//! takes away), the memory and time limits, and the callbacks of Warden's API.

use super::*;
use std::sync::atomic::AtomicUsize;

use crate::fetch::{Answers, Fetch, lock_answers};
use crate::host::{self, Shapes, Views};

impl Runtime {
    /// Builds a sandboxed state with the given limits.
    pub fn new(limits: Limits, vocabulary: Vocabulary) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::COROUTINE
                | StdLib::TABLE
                | StdLib::STRING
                | StdLib::MATH
                | StdLib::UTF8
                | StdLib::OS,
            LuaOptions::new(),
        )?;
        let shared: Shared = Arc::new(RunCell(RefCell::new(RunState {
            deadline: None,
            limit: limits.timeout,
            tripped: false,
            tripped_by: String::new(),
            effects: Vec::new(),
            host: None,
            lua: None,
            has_tool: false,
            lazy_result: false,
            result: Value::Nil,
            tape: Tape::Off,
            rng: 0,
            stop: None,
            hand_over_at: None,
        })));
        let host = lua.create_table()?;
        let sh = shared.clone();
        let clock = lua.create_function(move |_, pattern: LuaString| {
            Ok(pattern_clock(&sh, &pattern.as_bytes()))
        })?;
        host.set("strings", strings::install(&lua, &clock)?)?;
        // The record shapes, the roots' memos, and the list of what runs keep in them.
        let kept_list = lua.create_table()?;
        let mut shapes = Shapes::new();
        shapes.kept = Some(lua.create_registry_value(kept_list.clone())?);
        // The list of answers kept in the memos across runs (see `fetch::refresh`).
        shapes.persist = Some(lua.create_registry_value(lua.create_table()?)?);
        // The reusable record views, by shape (see `run.rs`).
        let record_cache = lua.create_table()?;
        shapes.cache = Some(lua.create_registry_value(record_cache.clone())?);
        let lent = shapes.lent.clone();
        let answers = Arc::new(Mutex::new(Answers {
            shapes,
            memos: [0; 5],
            state_names: None,
            persisted: Vec::new(),
        }));
        let kept = Arc::new(AtomicUsize::new(0));
        let persisting = Arc::new(AtomicUsize::new(0));
        for (name, key) in [
            ("real", host::real_key()),
            ("record_key", host::record_key()),
            ("miss_key", host::miss_key()),
        ] {
            host.set(name, Value::LightUserData(mlua::LightUserData(key)))?;
        }
        // SAFETY: `record_index` is a C function that reads tables and calls a shape's MISS
        // (see its comment).
        host.set("record_index", unsafe {
            lua.create_c_function(host::record_index)?
        })?;
        // SAFETY: as `record_index`, reading without calling anything.
        host.set("record_at", unsafe {
            lua.create_c_function(host::record_at)?
        })?;
        // The prelude hands over what building answers needs, once.
        let slot = answers.clone();
        host.set(
            "views",
            lua.create_function(
                move |lua,
                      (record, freeze, state_view, shape): (
                    Table,
                    Function,
                    Function,
                    Function,
                )| {
                    let mut answers = lock_answers(&slot);
                    answers.shapes.views = Some(Views {
                        record: lua.create_registry_value(record)?,
                        freeze: lua.create_registry_value(freeze)?,
                        state_view: lua.create_registry_value(state_view)?,
                        shape,
                    });
                    answers.state_names = Some([
                        lua.create_registry_value("state")?,
                        lua.create_registry_value("session_state")?,
                    ]);
                    Ok(())
                },
            )?,
        )?;
        let fetch = Fetch {
            answers: answers.clone(),
            shared: shared.clone(),
            count: kept.clone(),
            persisting: persisting.clone(),
        };
        host.set("fetch", fetch.into_function(&lua)?)?;
        let sh = shared.clone();
        host.set(
            "tripped",
            lua.create_function(move |_, ()| {
                let state = lock(&sh);
                Ok(state.tripped || state.stop.is_some())
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "has_tool",
            lua.create_function(move |_, ()| {
                let mut state = lock(&sh);
                if state.tape.replaying() {
                    let want = Input::Tool { value: false };
                    return match replayed(&mut state, &want)? {
                        Input::Tool { value } => Ok(value),
                        _ => Ok(false),
                    };
                }
                let value = state.has_tool;
                state.tape.record(|| Ok(Input::Tool { value }));
                Ok(value)
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "result",
            lua.create_function(move |lua, ()| {
                let mut state = lock(&sh);
                if state.tape.replaying() {
                    let want = Input::Result {
                        lazy: false,
                        value: Recorded::Nil,
                    };
                    let Input::Result { lazy, value } = replayed(&mut state, &want)? else {
                        return Err(mlua::Error::RuntimeError("internal: replay".into()));
                    };
                    drop(state);
                    return Ok((lazy, value.to_lua(lua, &mut no_records)?));
                }
                let (lazy, value) = (state.lazy_result, state.result.clone());
                state.tape.record(|| {
                    Ok(Input::Result {
                        lazy,
                        value: Recorded::of(&value)?,
                    })
                });
                Ok((lazy, value))
            })?,
        )?;
        // A value of the machine (the clock, the time, the memory count): recorded, and
        // answered from the record in a replay.
        let sh = shared.clone();
        host.set(
            "input",
            lua.create_function(move |lua, (what, live): (String, Value)| {
                let mut state = lock(&sh);
                if state.tape.replaying() {
                    let want = Input::Machine {
                        what,
                        value: Recorded::Nil,
                    };
                    let Input::Machine { value, .. } = replayed(&mut state, &want)? else {
                        return Err(mlua::Error::RuntimeError("internal: replay".into()));
                    };
                    drop(state);
                    return value.to_lua(lua, &mut no_records);
                }
                state.tape.record(|| {
                    Ok(Input::Machine {
                        what,
                        value: Recorded::of(&live)?,
                    })
                });
                Ok(live)
            })?,
        )?;
        // `math.random`, from the running script's own generator.
        let sh = shared.clone();
        host.set(
            "random",
            lua.create_function(move |_, args: mlua::Variadic<Value>| {
                let mut ints = Vec::with_capacity(2);
                for (i, a) in args.iter().enumerate() {
                    ints.push(match a {
                        Value::Integer(n) => *n,
                        Value::Number(x) if x.fract() == 0.0 && x.abs() < 9.2e18 => *x as i64,
                        _ => {
                            return Err(mlua::Error::RuntimeError(format!(
                                "bad argument #{} to 'random' (number has no integer representation)",
                                i + 1
                            )));
                        }
                    });
                }
                let mut state = lock(&sh);
                journal::random(&mut state.rng, &ints, args.is_empty())
                    .map_err(mlua::Error::RuntimeError)
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "randomseed",
            lua.create_function(move |_, seed: Option<Value>| {
                let mut state = lock(&sh);
                state.rng = match seed {
                    Some(Value::Integer(n)) => n as u64,
                    Some(Value::Number(x)) => x.to_bits(),
                    _ => journal::next_random(&mut state.rng),
                };
                Ok(())
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "handler",
            lua.create_function(move |lua, e: Value| {
                // Never format a script's own error object through its __tostring here.
                let message = match &e {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Error(err) => root_message(err),
                    Value::Integer(_) | Value::Number(_) => e.to_string()?,
                    other => format!("an error object of type {}", other.type_name()),
                };
                // A limit stops a script wherever it happens to be: no traceback, which would
                // differ from run to run.
                if lock(&sh).tripped {
                    return Ok(message);
                }
                let traceback = lua
                    .traceback(None, 1)
                    .map(|t| t.to_string_lossy())
                    .unwrap_or_default();
                let frames = script_frames(&traceback);
                // An error raised by one of Warden's functions is the script's mistake: say
                // where in the script, as Lua does for its own errors.
                let message = match (&e, frames.lines().find(|l| l.contains(": in "))) {
                    (Value::Error(_), Some(frame)) => match frame.trim().split_once(": in ") {
                        Some((at, _)) => format!("{at}: {message}"),
                        None => message,
                    },
                    _ => message,
                };
                Ok(format!("{message}{frames}"))
            })?,
        )?;
        let vocab = vocabulary;
        host.set(
            "is_hook",
            lua.create_function(move |_, h: Value| {
                Ok(matches!(&h, Value::String(s) if vocab.hooks.contains(&&*s.to_string_lossy())))
            })?,
        )?;
        let sh = shared.clone();
        host.set(
            "effect",
            lua.create_function(move |lua, (kind, first, second): (String, String, Value)| {
                let e = effect(lua, &vocab, &kind, first, second)?;
                lock(&sh).effects.push(e);
                Ok(())
            })?,
        )?;

        let handler: Function = host.get("handler")?;
        let exports: Table = lua
            .load(include_str!("prelude.lua"))
            .set_name("=warden-prelude")
            .call(host)?;
        let new_env: Function = exports.get("new_env")?;
        let base: Table = exports.get("base")?;
        let mut waits = [0; 3];
        for (at, name) in waits.iter_mut().zip(WAITS) {
            *at = base.raw_get::<Value>(name)?.to_pointer() as usize;
            debug_assert!(*at != 0, "`{name}` is not a global of the sandbox");
        }
        let call: Function = exports.get("call")?;
        let memos: Vec<Table> = exports.get("memos")?;
        {
            let mut answers = lock_answers(&answers);
            for (slot, memo) in answers.memos.iter_mut().zip(&memos) {
                *slot = memo.to_pointer() as usize;
            }
        }
        let runtime = Runtime {
            shared_roots: vec![
                Value::Table(lua.globals()),
                Value::Function(new_env.clone()),
                Value::Function(handler.clone()),
            ],
            ledger: memory::Ledger::new(&lua, limits.memory)?,
            ran_out: AtomicBool::new(false),
            started: None,
            allocated: memory::allocator_count(&lua),
            new_env,
            call,
            handler,
            kept_list: lua.create_registry_value(kept_list)?,
            kept,
            record_cache: lua.create_registry_value(record_cache)?,
            lent,
            answers: answers.clone(),
            persisting,
            task_threads: exports.get("task_threads")?,
            wait_tag: exports.get("wait_tag")?,
            compiled: KeyMap::default(),
            base,
            envs: KeyMap::default(),
            waits,
            spare: Vec::new(),
            limits,
            recording: false,
            shared: shared.clone(),
            lua,
        };
        // A global hook reaches every coroutine, including those scripts create themselves.
        let sh = shared;
        runtime.lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(CHECK_EVERY),
            move |lua, _| {
                let hand_over = {
                    let mut state = lock(&sh);
                    if let Some(why) = &state.stop {
                        return Err(mlua::Error::RuntimeError(why.clone()));
                    }
                    if state.tripped {
                        return Err(mlua::Error::RuntimeError(state.tripped_by.clone()));
                    }
                    let now = (state.deadline.is_some() || state.hand_over_at.is_some())
                        .then(Instant::now);
                    if let (Some(deadline), Some(now)) = (state.deadline, now)
                        && now >= deadline
                    {
                        let message = format!(
                            "stopped: the script ran longer than its time limit of {}",
                            human(state.limit)
                        );
                        return Err(state.trip(message));
                    }
                    now.is_some_and(|now| hand_over_due(&mut state, now))
                };
                // Costs a walk of the stack as deep as it is, up to the limit.
                if lua.inspect_stack(MAX_DEPTH, |_| ()).is_some() {
                    let message =
                        format!("stopped: recursion too deep (more than {MAX_DEPTH} nested calls)");
                    return Err(lock(&sh).trip(message));
                }
                // The run has gone on for a millisecond: its thread's other work goes elsewhere
                // (what the process set), and the run goes on.
                if hand_over {
                    super::hand_over(&sh);
                }
                Ok(VmState::Continue)
            },
        )?;
        runtime.lua.set_memory_limit(limits.memory)?;
        Ok(runtime)
    }
}
