//! `fetch`, the `__index` of each root's memo: the field a run reads, asked of its [`Host`] and
//! kept in the memo for the rest of the run (or answered from the replay record).
//!
//! A C function on the Lua API rather than an mlua callback, which costs about 350
//! instructions a call (its wrapper, an unwind guard, its error preallocated) and runs for
//! every field a run reads first. It leans on mlua's raw interface as `run.rs` does
//! (`Lua::get_or_init_from_ptr`, `RawLua::push_value` and `pop_value`, `RegistryKey::id`).

use std::ffi::{c_int, c_void};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mlua::{Function, Lua, RegistryKey, Value, ffi};

use crate::host::{Keep, Kind, Out, Payload, Refresh, ShapeKey, Shapes, deliver};
use crate::{Host, Input, Recorded, Shared, lock, replayed};

/// The roots a script reads, numbered as the prelude numbers them (from 1).
const ROOTS: [&str; 5] = ["context", "event", "tool", "result", "settings"];

/// What `fetch` keeps from one read to the next: the record shapes, the addresses of the
/// roots' memos (the order of `ROOTS`), and the names of the views of `context.state`.
pub(crate) struct Answers {
    pub(crate) shapes: Shapes,
    pub(crate) memos: [usize; 5],
    pub(crate) state_names: Option<[RegistryKey; 2]>,
    /// The answers kept in the memos across runs, in the order of their list (`Shapes::persist`).
    pub(crate) persisted: Vec<Persisted>,
}

/// Most answers kept across runs: each is asked of the host again at the start of every run
/// that neither records nor replays, whether the run reads it or not.
const MAX_PERSISTED: usize = 8;

/// An answer kept in its root's memo across runs (see [`refresh`]).
pub(crate) struct Persisted {
    root: usize,
    key: Box<str>,
    kind: Kind,
}

pub(crate) fn lock_answers(answers: &Mutex<Answers>) -> std::sync::MutexGuard<'_, Answers> {
    answers.lock().unwrap_or_else(|p| p.into_inner())
}

/// What `fetch` reaches, held by the state (a userdata, its upvalue): the answers, the run's
/// state (its host, its tape), how many answers the run keeps, and how many are kept across
/// runs.
pub(crate) struct Fetch {
    pub(crate) answers: Arc<Mutex<Answers>>,
    pub(crate) shared: Shared,
    pub(crate) count: Arc<AtomicUsize>,
    pub(crate) persisting: Persisting,
}

/// How many answers are kept in the memos across runs (`Answers::persisted`'s length), read
/// without the answers' lock: most runs have none to bring up to date or let go. Written
/// with the lock held, and read under the runtime's, as everything of a run.
pub(crate) type Persisting = Arc<AtomicUsize>;

impl Fetch {
    /// `fetch` as a Lua function, its `Fetch` held by the state (and dropped with it).
    pub(crate) fn into_function(self, lua: &Lua) -> mlua::Result<Function> {
        let mut slot = Some(self);
        // SAFETY: on the main stack, outside any run, with room checked; `make` runs under
        // `lua_pcall` and moves `slot` into Lua memory only once nothing it does next can
        // leave it unowned.
        unsafe {
            lua.exec_raw_lua(|raw| {
                let s = raw.state();
                if ffi::lua_checkstack(s, 4) == 0 {
                    return Err(mlua::Error::StackError);
                }
                ffi::lua_pushcfunction(s, make);
                ffi::lua_pushlightuserdata(s, std::ptr::addr_of_mut!(slot).cast::<c_void>());
                match ffi::lua_pcall(s, 1, 1, 0) {
                    ffi::LUA_OK => match raw.pop_value() {
                        Value::Function(f) => Ok(f),
                        _ => Err(mlua::Error::RuntimeError("internal: fetch".into())),
                    },
                    _ => {
                        ffi::lua_pop(s, 1);
                        Err(mlua::Error::MemoryError("not enough memory".into()))
                    }
                }
            })
        }
    }
}

/// Makes `fetch` with its `Fetch` (argument: a light userdata, an `Option<Fetch>` to take):
/// a userdata holding it, dropped by its `__gc`, as the closure's upvalue.
unsafe extern "C-unwind" fn make(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by `into_function` under `lua_pcall`. Everything that may raise (the
    // metatable, the userdata) comes before the `Fetch` is moved in; the closure made after
    // owns the userdata, which its `__gc` drops if making the closure raises.
    unsafe {
        let slot = &mut *(ffi::lua_touserdata(state, 1) as *mut Option<Fetch>);
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushcfunction(state, drop_fetch);
        ffi::lua_setfield(state, -2, c"__gc".as_ptr());
        let ud = ffi::lua_newuserdatauv(state, std::mem::size_of::<Fetch>(), 0).cast::<Fetch>();
        let Some(fetch) = slot.take() else {
            return 0;
        };
        std::ptr::write(ud, fetch);
        ffi::lua_rotate(state, -2, 1);
        ffi::lua_setmetatable(state, -2);
        ffi::lua_pushcclosure(state, self::fetch, 1);
        1
    }
}

/// The `__gc` of the userdata holding a `Fetch`.
unsafe extern "C-unwind" fn drop_fetch(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: only the userdata `make` initialized has this metatable, and Lua calls `__gc`
    // once; no script can reach it (it is only an upvalue of `fetch`).
    unsafe {
        let ud = ffi::lua_touserdata(state, 1).cast::<Fetch>();
        if !ud.is_null() {
            std::ptr::drop_in_place(ud);
        }
    }
    0
}

/// `fetch` (arguments: a root's memo, the key): the host's answer, kept in the memo for the
/// run. Its work is `answer`; an error is raised here, once nothing is left to drop.
unsafe extern "C-unwind" fn fetch(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: Lua calls it with at least 20 free slots; its upvalue is the userdata `make`
    // filled, alive as long as the closure. `lua_error` is reached with nothing to drop.
    unsafe {
        let f = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Fetch);
        let error = match std::panic::catch_unwind(AssertUnwindSafe(|| answer(f, state))) {
            Ok(Ok(n)) => return n,
            Ok(Err(e)) => e,
            Err(_) => mlua::Error::RuntimeError("internal: reading a field failed".into()),
        };
        // Found from the stack (a registry lookup): errors are rare.
        let lua = Lua::get_or_init_from_ptr(state);
        if !push_error(lua, state, error) {
            ffi::lua_pushstring(state, c"not enough memory".as_ptr());
        }
        ffi::lua_error(state)
    }
}

/// Pushes `e` onto `state` as mlua's error object (what the handler reads as an error of
/// Warden's, for the script's line); false if it could not.
///
/// # Safety
/// `state` is a coroutine of `lua`'s state during a run.
unsafe fn push_error(lua: &Lua, state: *mut ffi::lua_State, e: mlua::Error) -> bool {
    unsafe {
        lua.exec_raw_lua(|raw| {
            let m = raw.state();
            if ffi::lua_checkstack(m, 3) == 0 || ffi::lua_checkstack(state, 1) == 0 {
                return false;
            }
            if raw.push_value(&Value::Error(Box::new(e))).is_err() {
                return false;
            }
            if m != state {
                ffi::lua_xmove(m, state, 1);
            }
            true
        })
    }
}

/// The answer of `fetch`, pushed onto `state`: how many values (none for a memo or key it does
/// not know).
///
/// # Safety
/// `state` is the stack of a `fetch` call: the memo at 1, the key at 2.
unsafe fn answer(f: &Fetch, state: *mut ffi::lua_State) -> mlua::Result<c_int> {
    // The key is read in place: it stays on the stack for the whole call.
    let (memo, key) = unsafe {
        if ffi::lua_gettop(state) < 2 || ffi::lua_type(state, 2) != ffi::LUA_TSTRING {
            return Ok(0);
        }
        let mut len = 0;
        let p = ffi::lua_tolstring(state, 2, &mut len);
        (
            ffi::lua_topointer(state, 1) as usize,
            std::slice::from_raw_parts(p.cast::<u8>(), len),
        )
    };
    let mut answers = lock_answers(&f.answers);
    let Answers {
        shapes,
        memos,
        state_names,
        persisted,
    } = &mut *answers;
    let Some(n) = memos.iter().position(|m| *m == memo) else {
        return Ok(0);
    };
    let root = ROOTS[n];
    let key = std::str::from_utf8(key).map_err(|_| {
        mlua::Error::RuntimeError(format!("`{root}`: a field name is not UTF-8 text"))
    })?;
    // `context.state` and `context.session_state` are given as their own views.
    let state_name = match (n, key, state_names.as_ref()) {
        (0, "state", Some([s, _])) => Some(s),
        (0, "session_state", Some([_, s])) => Some(s),
        _ => None,
    };
    let mut run = lock(&f.shared);
    let Some(lua) = run.lua else {
        return Err(mlua::Error::RuntimeError(format!(
            "`{root}` can only be read while the script runs"
        )));
    };
    // SAFETY: set only during a run, to the runtime's `Lua`, which that run borrows (see
    // `RunState::lua`).
    let lua = unsafe { &*lua };
    if run.tape.replaying() {
        let want = Input::Field {
            root: root.to_string(),
            key: key.to_string(),
            value: Recorded::Nil,
        };
        let Input::Field { value, .. } = replayed(&mut run, &want)? else {
            return Err(mlua::Error::RuntimeError("internal: replay".into()));
        };
        drop(run);
        let mut make = |keys: &[String], values| shapes.build(lua, keys, values);
        match &value {
            Recorded::Record { record, values } => {
                let values = values
                    .iter()
                    .map(|v| v.to_lua(lua, &mut make))
                    .collect::<mlua::Result<Vec<_>>>()?;
                let shape = shapes.shape(lua, ShapeKey::Named(record.join(",")), record)?;
                let names: Vec<&str> = record.iter().map(String::as_str).collect();
                let values = &values[..values.len().min(names.len())];
                deliver(
                    lua,
                    state,
                    shapes,
                    Payload::Record(shape, &names, values),
                    None,
                    state_name,
                )?;
            }
            other => {
                let v = other.to_lua(lua, &mut make)?;
                deliver(lua, state, shapes, Payload::of(&v), None, state_name)?;
            }
        }
        return Ok(1);
    }
    // A run that records what it reads asks at every read, as its replay will.
    let recording = run.tape.recording();
    let current = run.host;
    drop(run);
    let Some(host) = current else {
        return Err(mlua::Error::RuntimeError(format!(
            "`{root}` can only be read while the script runs"
        )));
    };
    let at = f.count.load(Ordering::Relaxed);
    let mut out = Out {
        lua,
        stack: state,
        shapes,
        keep: (!recording).then_some(Keep {
            memo: 1,
            key: 2,
            at: 2 * at as ffi::lua_Integer + 1,
            persist: if persisted.len() < MAX_PERSISTED {
                2 * persisted.len() as ffi::lua_Integer + 1
            } else {
                0
            },
        }),
        state: state_name,
        recorded: None,
        recording,
        delivered: false,
        persisted: None,
        refresh: None,
    };
    // SAFETY: set only during a run, while the host it points to is borrowed by
    // `Runtime::run` (see `RunState::host`).
    let asked = unsafe { (*host).field(&mut out, root, key) };
    // An answer delivered is in the memo, and listed: it is counted (to be let go, or brought
    // up to date) even when the host then fails, so that no later run reads it unasked.
    if out.delivered {
        if let Some(kind) = out.persisted.take() {
            persisted.push(Persisted {
                root: n,
                key: key.into(),
                kind,
            });
            f.persisting.store(persisted.len(), Ordering::Relaxed);
        } else if !recording {
            f.count.store(at + 1, Ordering::Relaxed);
        }
    }
    asked?;
    if !out.delivered {
        out.nothing()?;
    }
    if recording {
        let value = out.recorded.take().unwrap_or(Recorded::Nil);
        lock(&f.shared).tape.record(|| {
            Ok(Input::Field {
                root: root.to_string(),
                key: key.to_string(),
                value,
            })
        });
    }
    Ok(1)
}

/// At the start of a run that neither records nor replays, before any script code runs: each
/// answer kept in the memos across runs is asked of `host` again and brought up to date in
/// place (a record's view refilled, a number set again, a text left as it is while the host's
/// is the same), so that a read of it is a plain table lookup; an answer that cannot be (the
/// host answers otherwise, fails, or gives values that would need converting) is let go, and
/// the run's first read of it asks the host as usual.
///
/// So no run ever reads a kept answer of another tick: every one in the memos is this tick's
/// by the time the script runs, and a record's view a script could still reach after its run
/// is let go then (see [`let_go`] and `run.rs`).
///
/// # Safety
/// `state` is the main stack of `lua`'s state, in a run (the runtime's lock held, the run's
/// host set), no Lua code running on it.
pub(crate) unsafe fn refresh(
    answers: &Mutex<Answers>,
    persisting: &AtomicUsize,
    lua: &Lua,
    state: *mut ffi::lua_State,
    host: &dyn Host,
) -> mlua::Result<()> {
    // SAFETY: as the function's.
    let Some((mut answers, list)) = (unsafe { held(answers, persisting, state)? }) else {
        return Ok(());
    };
    let Answers {
        shapes, persisted, ..
    } = &mut *answers;
    // SAFETY: as the function's, with room for 8 values; reading tables and setting an
    // existing key to nil neither allocate nor raise, and the host's answers are put in place
    // by `host::refresh`, which does not either.
    unsafe {
        let top = ffi::lua_gettop(state);
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, ffi::lua_Integer::from(list));
        let mut stale = 0u64;
        for (i, p) in persisted.iter_mut().enumerate() {
            let mut out = Out {
                lua,
                stack: state,
                shapes,
                keep: None,
                state: None,
                recorded: None,
                recording: false,
                delivered: false,
                persisted: None,
                refresh: Some(Refresh {
                    kind: &mut p.kind,
                    list: top + 1,
                    at: 2 * i as ffi::lua_Integer + 1,
                    fresh: false,
                }),
            };
            let asked = std::panic::catch_unwind(AssertUnwindSafe(|| {
                host.field(&mut out, ROOTS[p.root], &p.key)
            }));
            let fresh =
                matches!(asked, Ok(Ok(()))) && out.refresh.as_ref().is_some_and(|r| r.fresh);
            if ffi::lua_gettop(state) != top + 1 {
                ffi::lua_settop(state, top + 1);
            }
            if !fresh {
                stale |= 1 << i;
            }
        }
        ffi::lua_settop(state, top);
        if stale != 0 {
            drop_persisted(state, list, persisted, |i, _| stale & (1 << i) != 0);
            persisting.store(persisted.len(), Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The answers, locked, and the registry id of the list of those kept across runs, with room
/// for 8 values on `state`: `None` when none are kept (known without the lock), an error when
/// the room cannot be made (the run then fails: a kept answer left as it is would be another
/// tick's).
///
/// # Safety
/// As [`refresh`]'s.
#[inline(always)]
unsafe fn held<'a>(
    answers: &'a Mutex<Answers>,
    persisting: &AtomicUsize,
    state: *mut ffi::lua_State,
) -> mlua::Result<Option<(MutexGuard<'a, Answers>, c_int)>> {
    if persisting.load(Ordering::Relaxed) == 0 {
        return Ok(None);
    }
    let answers = lock_answers(answers);
    let list = match answers.shapes.persist.as_ref() {
        Some(list) if !answers.persisted.is_empty() => list.id(),
        _ => return Ok(None),
    };
    // SAFETY: as the function's.
    if unsafe { ffi::lua_checkstack(state, 8) } == 0 {
        return Err(mlua::Error::StackError);
    }
    Ok(Some((answers, list)))
}

/// Lets go of the answers kept across runs that `which` picks (by place and kind): `Record`s
/// when a script may still reach the views a run was handed, all before a run that records or
/// replays what it reads (which must ask the host at every read).
///
/// # Safety
/// As [`refresh`]'s, with the host not needed.
pub(crate) unsafe fn let_go(
    answers: &Mutex<Answers>,
    persisting: &AtomicUsize,
    state: *mut ffi::lua_State,
    which: impl Fn(&Kind) -> bool,
) -> mlua::Result<()> {
    // SAFETY: as the function's.
    let Some((mut answers, list)) = (unsafe { held(answers, persisting, state)? }) else {
        return Ok(());
    };
    let persisted = &mut answers.persisted;
    // SAFETY: as the function's, with room for 8 values.
    unsafe { drop_persisted(state, list, persisted, |_, k| which(k)) };
    persisting.store(persisted.len(), Ordering::Relaxed);
    Ok(())
}

/// Removes the answers kept across runs that `which` picks (by place and kind): each memo's
/// entry set to nil, the list (registry key `list`) and `persisted` closed up.
///
/// # Safety
/// `state` has room for 8 values, the runtime's lock is held and no Lua code runs on it.
/// Setting an existing key or index to nil, or an existing index to a value, neither allocates
/// nor raises.
unsafe fn drop_persisted(
    state: *mut ffi::lua_State,
    list: c_int,
    persisted: &mut Vec<Persisted>,
    which: impl Fn(usize, &Kind) -> bool,
) {
    unsafe {
        let top = ffi::lua_gettop(state);
        ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, ffi::lua_Integer::from(list));
        let l = top + 1;
        let mut kept = 0usize;
        let all = persisted.len();
        let mut i = 0usize;
        persisted.retain(|p| {
            let at = 2 * i as ffi::lua_Integer + 1;
            let gone = which(i, &p.kind);
            i += 1;
            if gone {
                // memo[key] = nil
                ffi::lua_rawgeti(state, l, at);
                ffi::lua_rawgeti(state, l, at + 1);
                ffi::lua_pushnil(state);
                ffi::lua_rawset(state, -3);
                ffi::lua_settop(state, l);
            } else {
                let to = 2 * kept as ffi::lua_Integer + 1;
                if to != at {
                    ffi::lua_rawgeti(state, l, at);
                    ffi::lua_rawseti(state, l, to);
                    ffi::lua_rawgeti(state, l, at + 1);
                    ffi::lua_rawseti(state, l, to + 1);
                }
                kept += 1;
            }
            !gone
        });
        for j in kept..all {
            let at = 2 * j as ffi::lua_Integer + 1;
            ffi::lua_pushnil(state);
            ffi::lua_rawseti(state, l, at);
            ffi::lua_pushnil(state);
            ffi::lua_rawseti(state, l, at + 1);
        }
        ffi::lua_settop(state, top);
    }
}
