//! One run of a task's coroutine, straight on the Lua API: the script started or resumed,
//! what it came to read off the coroutine's stack, the roots' memos let go when it ends, and
//! how much the state grew meanwhile. mlua's `Thread::resume` would convert every value the
//! coroutine yields or returns into a reference, and this runs at every tick of every script.
//!
//! This file and `host.rs` use mlua's raw interface, which its documentation hides
//! (`Lua::exec_raw_lua`, `RawLua`, `FromLuaMulti::from_stack_args`,
//! `IntoLuaMulti::push_into_stack_multi`): an upgrade of mlua must check that they still do
//! what they did in 0.12.2 (the sandbox's tests would fail to compile or fail if not).

use super::*;

/// What a run runs: the task coroutine whose state is `thread` (the caller holds the
/// coroutine), on the script of key `key`, started if `first`, else resumed.
#[derive(Clone, Copy)]
pub(crate) struct On {
    pub(crate) thread: usize,
    pub(crate) key: u64,
    pub(crate) first: bool,
}

impl Runtime {
    /// One run (see [`On`]), with `tape` for what it receives and `rng` for its random
    /// numbers: what it came to, the tape and generator afterwards, and how much the state
    /// grew during the run (for the ledger).
    pub(crate) fn run(
        &mut self,
        on: On,
        host: &dyn Host,
        timeout: Duration,
        tape: Tape,
        rng: u64,
    ) -> (Step, Tape, u64, i64) {
        // Only a result that is not a table is converted up front; the rest is read lazily.
        let shape = host.shape();
        let lazy_result = shape.result == ResultShape::Table;
        let result = if shape.result == ResultShape::Plain {
            match self.plain_result(host) {
                Ok(result) => result,
                Err(failed) => return (failed, tape, rng, 0),
            }
        } else {
            Value::Nil
        };
        // A run that records or replays what it reads asks at every read: it is handed no
        // answer kept across runs (see `fetch::refresh`).
        let lasting = matches!(tape, Tape::Off);
        let erased: *const (dyn Host + '_) = host;
        // SAFETY: only the lifetime is erased; the pointer is cleared before `host`'s borrow
        // ends (by `run_raw`, or by its `HostGuard` if the run unwinds), and nothing reads it
        // outside this run.
        let erased: *const (dyn Host + 'static) = unsafe { std::mem::transmute(erased) };
        let now = Instant::now();
        self.started = Some(now);
        let mut begin = Begin {
            tape,
            rng,
            host: erased,
            has_tool: shape.tool,
            lazy_result,
            result,
            deadline: now + timeout,
            limit: timeout,
            hand_over_at: HAND_OVER.get().map(|_| now + HAND_OVER_AFTER),
        };
        // Emptied when the run that filled them ended; here only if that was cut short.
        let kept = self.take_kept();
        let mut end = End::default();
        let ran = self.run_raw(on, kept, lasting.then_some(host), &mut begin, &mut end);
        let step = match (end.stop, ran) {
            (None, Ok(Ran::Waiting(wake))) => Step::Waiting {
                wake,
                effects: end.effects,
            },
            (None, Ok(Ran::Done(holds))) => Step::Done {
                holds,
                effects: end.effects,
            },
            (Some(why), _) => Step::Failed { error: why },
            (None, Ok(Ran::Failed(message))) => self.script_failed(&message),
            (None, Err(e)) => self.run_failed(&e),
        };
        (step, end.tape, end.rng, end.grown)
    }

    /// The result of the event, converted whole (it is not a table, read lazily): nil when
    /// the host gives none; a failed step when it cannot be converted. (Out of line, as the
    /// failures below: a run's own path is what stays in the instruction cache.)
    #[inline(never)]
    fn plain_result(&self, host: &dyn Host) -> Result<Value, Step> {
        match host.result_value(&self.lua) {
            Ok(r) => Ok(r.unwrap_or(Value::Nil)),
            Err(e) => Err(self.run_failed(&e)),
        }
    }

    /// The step of a script that failed with `message`.
    #[cold]
    #[inline(never)]
    fn script_failed(&self, message: &str) -> Step {
        Step::Failed {
            error: if message.starts_with("not enough memory") {
                self.out_of_memory()
            } else {
                message.trim_end().to_string()
            },
        }
    }

    /// The step of a run that could not be made, or that an error escaped.
    #[cold]
    #[inline(never)]
    fn run_failed(&self, e: &mlua::Error) -> Step {
        Step::Failed {
            error: match e {
                mlua::Error::MemoryError(_) => self.out_of_memory(),
                e => describe_error(e),
            },
        }
    }

    /// How many answers the runs since the last call kept in the roots' memos (and none from
    /// now). Read first: most runs keep nothing, and a read costs less than a swap.
    fn take_kept(&self) -> usize {
        match self.kept.load(Ordering::Relaxed) {
            0 => 0,
            _ => self.kept.swap(0, Ordering::Relaxed),
        }
    }

    /// When the last run started (the clock its time limit counts from), for an embedder that
    /// times its scripts without reading the clock again; `None` once taken, or when the last
    /// [`Runtime::start`] or [`Runtime::resume`] did not reach its run.
    #[inline]
    pub fn take_run_started(&mut self) -> Option<Instant> {
        self.started.take()
    }

    /// Starts the coroutine `thread` on the script of key `key` (if `first`), or resumes it
    /// where it waits,
    /// and reads what it came to into `end` and the result. The roots' memos in `kept` (left
    /// by a run cut short) are emptied first, and what this run kept in them is let go when it
    /// ends; the record views it was handed are kept for the next runs only if no script can
    /// reach them any more (see [`Runtime::release_views`]). The answers kept across runs
    /// are made this tick's from `host` first, or let go when there is none (a run that records
    /// or replays what it reads).
    ///
    /// Straight on the Lua API: mlua's `Thread::resume` would convert every value the
    /// coroutine yields or returns into a reference, and it runs at every tick of every script.
    fn run_raw(
        &self,
        on: On,
        kept: usize,
        host: Option<&dyn Host>,
        begin: &mut Begin,
        end: &mut End,
    ) -> mlua::Result<Ran> {
        let On { thread, key, first } = on;
        let th = thread as *mut ffi::lua_State;
        let wait_tag = self.wait_tag.as_bytes();
        // SAFETY: `th` is the state of a task's coroutine, which the caller holds, so it lives; the
        // runtime's lock is held (by `exec_raw_lua`) for the whole block. Nothing here raises
        // a Lua error: `lua_resume` runs the coroutine protected and returns its status; the
        // pushes of references and integers, the moves between stacks, the reads of strings in
        // place, the memory count and the stack checks do not allocate or raise (a failed
        // check is reported).
        unsafe {
            self.lua.exec_raw_lua(|raw| {
                // The run's state is set, and taken back, under mlua's lock (see `RunCell`).
                {
                    let mut state = lock(&self.shared);
                    // (A tape that is off, and a result that is nil, as the state holds
                    // them between runs (a run takes them back, or its `HostGuard` clears
                    // them), are not moved: a move drops what it replaces.)
                    if !matches!((&begin.tape, &state.tape), (Tape::Off, Tape::Off)) {
                        state.tape = std::mem::take(&mut begin.tape);
                    }
                    state.rng = begin.rng;
                    state.stop = None;
                    state.effects.clear();
                    state.host = Some(begin.host);
                    state.lua = Some(&raw const self.lua);
                    state.has_tool = begin.has_tool;
                    state.lazy_result = begin.lazy_result;
                    if !matches!((&begin.result, &state.result), (Value::Nil, Value::Nil)) {
                        state.result = std::mem::replace(&mut begin.result, Value::Nil);
                    }
                    state.tripped = false;
                    state.deadline = Some(begin.deadline);
                    state.limit = begin.limit;
                    // (Left as the last run left it, none, when there is no hand-over.)
                    if begin.hand_over_at.is_some() {
                        state.hand_over_at = begin.hand_over_at;
                    }
                }
                // Clears the host if the run leaves before taking its state back.
                let mut guard = HostGuard {
                    shared: &self.shared,
                    armed: true,
                };
                let main = raw.state();
                // What the main state holds at most here: clearing the kept answers 4, the
                // views' check 4, a failed start's error; the coroutine: a start's 3. A resume
                // that has nothing to clear pushes nothing on either (its results are read in
                // place).
                let clean = kept == 0 && self.lent.load(Ordering::Relaxed) == 0;
                if (first || !clean)
                    && (ffi::lua_checkstack(main, 8) == 0 || ffi::lua_checkstack(th, 4) == 0)
                {
                    // What this run took to let go is left for the next.
                    self.kept.fetch_add(kept, Ordering::Relaxed);
                    return Err(mlua::Error::StackError);
                }
                if kept != 0 {
                    clear_kept(raw.state(), &self.kept_list, kept);
                }
                // Views handed to a run cut short are not refilled: it may have left them
                // anywhere.
                let lent = take_bits(&self.lent);
                if lent != 0 {
                    self.forget_lent(main, lent)?;
                }
                // The answers kept in the memos across runs: made this tick's, or let go
                // before a run that records or replays. A run that cannot do either fails.
                match host {
                    Some(host) => {
                        fetch::refresh(&self.answers, &self.persisting, &self.lua, main, host)?
                    }
                    None => fetch::let_go(&self.answers, &self.persisting, main, |_| true)?,
                }
                let mut straight = false;
                let nargs = if first {
                    straight = self.prepare_start(raw, th, key)?;
                    2
                } else if ffi::lua_status(th) == ffi::LUA_YIELD {
                    0
                } else {
                    return Err(mlua::Error::CoroutineUnresumable);
                };
                let before = self.memory(main);
                let mut n = 0;
                // A straight-line script's first run has no instruction hook (see
                // `straight.rs`): the coroutine's own is put back as soon as it returns.
                let unhooked = straight.then(|| {
                    let saved = (
                        ffi::lua_gethook(th),
                        ffi::lua_gethookmask(th),
                        ffi::lua_gethookcount(th),
                    );
                    ffi::lua_sethook(th, None, 0, 0);
                    saved
                });
                let status = ffi::lua_resume(th, main, nargs, &mut n);
                if let Some((hook, mask, count)) = unhooked {
                    ffi::lua_sethook(th, hook, mask, count);
                }
                {
                    let mut state = lock(&self.shared);
                    state.host = None;
                    state.lua = None;
                    if !matches!(state.result, Value::Nil) {
                        state.result = Value::Nil;
                    }
                    state.deadline = None;
                    if begin.hand_over_at.is_some() {
                        state.hand_over_at = None;
                    }
                    state.tripped = false;
                    end.effects = std::mem::take(&mut state.effects);
                    if !matches!(state.tape, Tape::Off) {
                        end.tape = std::mem::take(&mut state.tape);
                    }
                    end.stop = state.stop.take();
                    end.rng = state.rng;
                }
                guard.armed = false;
                let kept = self.take_kept();
                let lent = take_bits(&self.lent);
                if kept != 0 || lent != 0 {
                    self.let_go_after(raw, key, status, kept, lent)?;
                }
                end.grown = self.memory(main) - before;
                match status {
                    ffi::LUA_YIELD => {
                        // A wait says what wakes it: WAIT and the hook.
                        let wake = if n >= 2 && bytes_at(th, -n) == Some(wait_tag) {
                            bytes_at(th, -n + 1).map(|h| String::from_utf8_lossy(h).into())
                        } else {
                            None
                        };
                        ffi::lua_pop(th, n);
                        Ok(Ran::Waiting(wake))
                    }
                    ffi::LUA_OK => Ok(finished(th, n)),
                    status => Err(escaped(raw, th, status)),
                }
            })
        }
    }
}

impl Runtime {
    /// Puts a start of script `key` on the coroutine `th`: `xpcall`, the script's chunk and
    /// the handler (its 2 arguments); whether the script is straight-line (see
    /// `straight.rs`). Out of line: most runs resume.
    ///
    /// # Safety
    /// Called by `run_raw`, the runtime's lock held, with room for 3 values on both stacks.
    #[inline(never)]
    unsafe fn prepare_start(
        &self,
        raw: &mlua::state::RawLua,
        th: *mut ffi::lua_State,
        key: u64,
    ) -> mlua::Result<bool> {
        let Some(compiled) = self.compiled.get(&key) else {
            return Err(mlua::Error::RuntimeError(
                "internal: the script is not compiled".into(),
            ));
        };
        // SAFETY: as the function's; the pushes of references do not raise.
        unsafe {
            if ffi::lua_status(th) != ffi::LUA_OK {
                return Err(mlua::Error::CoroutineUnresumable);
            }
            ffi::lua_settop(th, 0);
            raw.push(&self.call)?;
            raw.push(&compiled.chunk)?;
            raw.push(&self.handler)?;
            ffi::lua_xmove(raw.state(), th, 3);
        }
        Ok(compiled.straight)
    }

    /// Lets go of what the run that ended with `status` kept in the roots' memos (`kept`
    /// pairs) and of the record views it was handed (`lent`, see [`Runtime::release_views`]).
    ///
    /// # Safety
    /// Called by `run_raw`, the runtime's lock held.
    #[cold]
    #[inline(never)]
    unsafe fn let_go_after(
        &self,
        raw: &mlua::state::RawLua,
        key: u64,
        status: i32,
        kept: usize,
        lent: u64,
    ) -> mlua::Result<()> {
        let main = raw.state();
        // SAFETY: as the function's.
        unsafe {
            // Room on the main state's stack (4 values) for what follows; without it, what
            // this run kept and was lent is left for the next run to let go.
            if ffi::lua_checkstack(main, 8) == 0 {
                self.kept.fetch_add(kept, Ordering::Relaxed);
                self.lent.fetch_or(lent, Ordering::Relaxed);
                return Err(mlua::Error::StackError);
            }
            if kept != 0 {
                clear_kept(main, &self.kept_list, kept);
            }
            if lent != 0 {
                self.release_views(raw, key, status, lent)?;
            }
        }
        Ok(())
    }

    /// After a run of script `key` that ended with `status`, and was handed the reusable
    /// record views of the shapes in `lent` (bits): they stay for the next runs to refill
    /// only when nothing a script can reach holds them, else they are forgotten (they keep
    /// their values, a snapshot of their tick, for whoever holds them) and the next read
    /// makes new ones.
    ///
    /// What a script can reach after its run: its coroutine's stack, when it waits (locals
    /// live across `coroutine.yield` and `wait_turns`), and its globals, which persist from
    /// run to run and hold everything else it keeps (tables, closures, coroutines it made).
    /// Everything else it can reach is read-only (the libraries, the roots, the views), and
    /// the roots' memos are emptied when the run ends. So the views are refilled only after
    /// a run that did not wait and whose globals are as they were made ([`as_made`]): `_G`, the
    /// globals themselves, and the waiting primitives bound in them when the script names
    /// them. A script whose source names `_ENV` never has its views refilled: it can set
    /// `_ENV`, the upvalue of its chunk, to a table of its own, which the next run starts with
    /// (no other way to change an upvalue is in the sandbox: no `debug`). A
    /// straight-line script that assigns nothing (`Compiled::keeps_nothing`) cannot have
    /// changed its globals, nor kept anything anywhere else: they are not looked at.
    ///
    /// # Safety
    /// Called by `run_raw`, the runtime's lock held, with room for 4 values on `raw`'s stack.
    unsafe fn release_views(
        &self,
        raw: &mlua::state::RawLua,
        key: u64,
        status: i32,
        lent: u64,
    ) -> mlua::Result<()> {
        let s = raw.state();
        // SAFETY: the lock is held and there is room; reading tables and a table's next key
        // neither allocate nor raise (`lua_next` raises only on a key that
        // is not in the table, and it is given nil then a key it returned).
        unsafe {
            let keeps_nothing = self.compiled.get(&key).is_some_and(|c| c.keeps_nothing);
            let clean = status != ffi::LUA_YIELD
                && (keeps_nothing
                    || match self.envs.get(&key) {
                        Some(env) if env.fixed => {
                            let top = ffi::lua_gettop(s);
                            let clean =
                                raw.push(&env.table).is_ok() && as_made(s, top + 1, &self.waits);
                            ffi::lua_settop(s, top);
                            clean
                        }
                        _ => false,
                    });
            if !clean {
                return self.forget_lent(s, lent);
            }
        }
        Ok(())
    }

    /// [`forget_views`] of this runtime's views; when the answers kept across runs cannot be
    /// let go, the views stay lent, for the next run to forget before it starts.
    ///
    /// # Safety
    /// As [`forget_views`]'s.
    unsafe fn forget_lent(&self, state: *mut ffi::lua_State, lent: u64) -> mlua::Result<()> {
        // SAFETY: as the function's.
        let forgotten = unsafe {
            forget_views(
                state,
                &self.record_cache,
                &self.answers,
                &self.persisting,
                lent,
            )
        };
        if forgotten.is_err() {
            self.lent.fetch_or(lent, Ordering::Relaxed);
        }
        forgotten
    }
}

/// Whether the globals at `env` on `s`'s stack hold only what they were made with: under keys
/// that are strings, the globals themselves (`_G`) and some of the waiting primitives bound in
/// them ([`WAITS`]; a script may have let one go, or swapped two). Nothing else a script could
/// keep from run to run is then in them. Leaves up to 2 more values on the stack.
///
/// # Safety
/// `s` is the runtime's state, its lock held, with room for 2 more values; `env` is a table.
unsafe fn as_made(s: *mut ffi::lua_State, env: i32, waits: &[usize; 3]) -> bool {
    // SAFETY: as the function's; `lua_next` is given nil, then each key it returned.
    unsafe {
        ffi::lua_pushnil(s);
        // At most `_G` and each primitive once: one entry more is not as made.
        for _ in 0..=waits.len() {
            if ffi::lua_next(s, env) == 0 {
                return true;
            }
            // (A key that is not a string could hold a view.)
            if ffi::lua_type(s, -2) != ffi::LUA_TSTRING {
                return false;
            }
            let at = ffi::lua_topointer(s, -1) as usize;
            if ffi::lua_rawequal(s, -1, env) == 0 && !waits.contains(&at) {
                return false;
            }
            ffi::lua_pop(s, 1);
        }
        ffi::lua_next(s, env) == 0
    }
}

/// What a script that returned came to, from the `n` values `xpcall` left on `th`: true and
/// the script's results, or false and the handler's message. The stack is emptied: the
/// coroutine can run the next script.
///
/// # Safety
/// `th` is a task's coroutine that returned, the runtime's lock held.
#[inline(never)]
unsafe fn finished(th: *mut ffi::lua_State, n: i32) -> Ran {
    // SAFETY: as the function's; reading the values in place neither allocates nor raises.
    unsafe {
        let ok = n >= 1 && ffi::lua_toboolean(th, -n) != 0;
        let ran = if !ok {
            match if n >= 2 { bytes_at(th, -n + 1) } else { None } {
                Some(m) => Ran::Failed(String::from_utf8_lossy(m).into_owned()),
                None => Ran::Failed("the script stopped without a result".into()),
            }
        } else if n < 2 {
            Ran::Done(false)
        } else {
            match ffi::lua_type(th, -n + 1) {
                ffi::LUA_TNIL => Ran::Done(false),
                ffi::LUA_TBOOLEAN => Ran::Done(ffi::lua_toboolean(th, -n + 1) != 0),
                t => Ran::Failed(format!(
                    "a script used as a condition returns true or false (or nothing); this one returned {}",
                    type_name(th, -n + 1, t)
                )),
            }
        };
        ffi::lua_settop(th, 0);
        ran
    }
}

/// The error that escaped the body of coroutine `th` (it can only be the memory's: the
/// coroutine is dead), ended with `status`.
///
/// # Safety
/// `th` is a task's coroutine whose run ended in error, the runtime's lock held.
#[cold]
#[inline(never)]
unsafe fn escaped(raw: &mlua::state::RawLua, th: *mut ffi::lua_State, status: i32) -> mlua::Error {
    // SAFETY: as the function's; the checked room takes the error object.
    unsafe {
        let main = raw.state();
        if ffi::lua_checkstack(main, 1) == 0 {
            return mlua::Error::StackError;
        }
        ffi::lua_xmove(th, main, 1);
        match raw.pop_value() {
            _ if status == ffi::LUA_ERRMEM => mlua::Error::MemoryError("not enough memory".into()),
            Value::Error(e) => *e,
            Value::String(s) => mlua::Error::RuntimeError(s.to_string_lossy()),
            other => mlua::Error::RuntimeError(format!(
                "the script stopped with an error object of type {}",
                other.type_name()
            )),
        }
    }
}

/// Forgets the reusable record views of the shapes in `lent` (bits), and lets go of the records
/// kept in the memos across runs (which are such views): the next read of each makes a new
/// one.
///
/// # Safety
/// The runtime's lock is held, no Lua code runs on `state`, and it has room for 8 values.
/// Setting an integer key to nil neither allocates nor raises.
unsafe fn forget_views(
    state: *mut ffi::lua_State,
    cache: &mlua::RegistryKey,
    answers: &Mutex<fetch::Answers>,
    persisting: &AtomicUsize,
    lent: u64,
) -> mlua::Result<()> {
    unsafe {
        fetch::let_go(answers, persisting, state, |k| {
            matches!(k, host::Kind::Record(..))
        })?;
        ffi::lua_rawgeti(
            state,
            ffi::LUA_REGISTRYINDEX,
            ffi::lua_Integer::from(cache.id()),
        );
        for n in 0..64 {
            if lent & (1 << n) != 0 {
                ffi::lua_pushnil(state);
                ffi::lua_rawseti(state, -2, 2 * n + 1);
                ffi::lua_pushnil(state);
                ffi::lua_rawseti(state, -2, 2 * n + 2);
            }
        }
        ffi::lua_pop(state, 1);
    }
    Ok(())
}

/// What a run leaves besides its result: the actions it took, what it received, why it must
/// stop (a replay that diverged), its random numbers' state, and how much the state grew.
#[derive(Default)]
struct End {
    effects: Vec<Effect>,
    tape: Tape,
    stop: Option<String>,
    rng: u64,
    grown: i64,
}

/// What a run starts with: its state (see [`RunState`]), set in `run_raw` under mlua's lock
/// (taken from here: the closure run under the lock only borrows, rather than moves, it).
struct Begin {
    tape: Tape,
    rng: u64,
    host: *const (dyn Host + 'static),
    has_tool: bool,
    lazy_result: bool,
    result: Value,
    deadline: Instant,
    limit: Duration,
    /// When the run is handed over, if the process says how (see [`crate::set_hand_over`]).
    hand_over_at: Option<Instant>,
}

/// Clears the current host, and the clock, if a run leaves `run_raw` without taking its state
/// back (it unwinds, or fails before it resumes the coroutine). Made and dropped under mlua's
/// lock, within `run_raw`'s `exec_raw_lua`.
struct HostGuard<'a> {
    shared: &'a Shared,
    armed: bool,
}

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut state = lock(self.shared);
            state.host = None;
            state.lua = None;
            state.result = Value::Nil;
            state.tripped = false;
            state.deadline = None;
            state.hand_over_at = None;
            // What the run was given to record or replay, and what it did, go with it.
            if !matches!(state.tape, Tape::Off) {
                state.tape = Tape::Off;
            }
            state.effects.clear();
        }
    }
}

impl Runtime {
    /// The memory the state holds, in bytes: the count mlua's allocator keeps (one load, see
    /// [`crate::memory::allocator_count`]), or else Lua's own count, to the KiB below (the
    /// difference of two such counts is off by less than a KiB, either way).
    ///
    /// # Safety
    /// `state` is a state of the runtime, whose lock is held.
    unsafe fn memory(&self, state: *mut ffi::lua_State) -> i64 {
        match self.allocated {
            // SAFETY: the count of the runtime's allocator, which lives as long as its `Lua`;
            // read under mlua's lock, so no allocation writes it meanwhile.
            Some(count) => unsafe { *count.0 as i64 },
            None => unsafe { i64::from(ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0)) * 1024 },
        }
    }
}

/// Lets go of the first `n` answers listed in `list` (memo, key, memo, key...): each memo's
/// entry for its key is set to nil, on the Lua API.
///
/// # Safety
/// The runtime's lock is held, no Lua code runs on `state`, and it has room for 4 values.
/// Reading a table and setting a key to nil neither allocate nor raise (a key never stored is
/// left alone: Lua does not insert nil).
unsafe fn clear_kept(state: *mut ffi::lua_State, list: &mlua::RegistryKey, n: usize) {
    unsafe {
        ffi::lua_rawgeti(
            state,
            ffi::LUA_REGISTRYINDEX,
            ffi::lua_Integer::from(list.id()),
        );
        for i in 0..n {
            let at = 2 * i as ffi::lua_Integer + 1;
            if ffi::lua_rawgeti(state, -1, at) == ffi::LUA_TTABLE {
                if ffi::lua_rawgeti(state, -2, at + 1) == ffi::LUA_TSTRING {
                    ffi::lua_pushnil(state);
                    ffi::lua_rawset(state, -3);
                } else {
                    ffi::lua_pop(state, 1);
                }
            }
            ffi::lua_pop(state, 1);
        }
        ffi::lua_pop(state, 1);
    }
}

/// What a run of a task's coroutine came to.
enum Ran {
    /// It waits, for this hook (`None`: its own).
    Waiting(Option<String>),
    /// The script returned, true or not.
    Done(bool),
    /// The script failed (or returned what a condition cannot), with this message.
    Failed(String),
}

/// The bytes of the string at `idx` of `state`'s stack, read in place (`None` if it is not a
/// string: a number is not converted, which would change the stack).
///
/// # Safety
/// `idx` is a valid index of `state`, and the bytes are used while the value stays there.
unsafe fn bytes_at<'a>(state: *mut ffi::lua_State, idx: i32) -> Option<&'a [u8]> {
    unsafe {
        if ffi::lua_type(state, idx) != ffi::LUA_TSTRING {
            return None;
        }
        let mut len = 0;
        let p = ffi::lua_tolstring(state, idx, &mut len);
        Some(std::slice::from_raw_parts(p.cast::<u8>(), len))
    }
}

/// "a string", "an integer": a value's type as a condition's error names it.
///
/// # Safety
/// `idx` is a valid index of `state`, whose type is `t`.
unsafe fn type_name(state: *mut ffi::lua_State, idx: i32, t: i32) -> &'static str {
    match t {
        ffi::LUA_TNUMBER if unsafe { ffi::lua_isinteger(state, idx) } != 0 => "an integer",
        ffi::LUA_TNUMBER => "a number",
        ffi::LUA_TSTRING => "a string",
        ffi::LUA_TTABLE => "a table",
        ffi::LUA_TFUNCTION => "a function",
        ffi::LUA_TTHREAD => "a thread",
        ffi::LUA_TLIGHTUSERDATA => "a lightuserdata",
        _ => "a userdata",
    }
}

/// The bits of `lent`, and none from now. Read first: most runs are lent nothing, and a read
/// costs less than a swap (a locked instruction).
#[inline]
fn take_bits(lent: &std::sync::atomic::AtomicU64) -> u64 {
    match lent.load(Ordering::Relaxed) {
        0 => 0,
        _ => lent.swap(0, Ordering::Relaxed),
    }
}
