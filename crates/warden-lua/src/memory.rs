//! What each script keeps in the session's Lua state, so that one script cannot starve the
//! others.
//!
//! All the scripts of a session share one state and its memory limit. Each script may *keep*
//! (in its globals, and in the locals of its waiting task) at most a share of that limit: a
//! quarter. Keeping is checked cheaply: the state's memory is read before and after each run
//! (two reads of Lua's own count), and the growth is added to the script's account. Only when a script's account
//! passes its share is a full collection run and the script weighed (its objects walked from its
//! roots, leaving out the sandbox's own); a script found over its share has its globals reset,
//! its waiting task stopped, and its run fails with an error that names it.
//!
//! When a run runs out of memory, the state is collected and every script weighed: those over
//! their share are reset and named in the error; when none is, the failing script's globals are
//! reset, so what its run allocated, kept or not, is garbage once it stops.

use std::collections::HashSet;
use std::sync::Arc;

use mlua::{Function, Lua, MultiValue, Table, Thread, Value, ffi};

use crate::KeyMap;

// Estimated sizes of Lua 5.4's objects, in bytes (64-bit).
const STRING: usize = 24;
const TABLE: usize = 56;
const ENTRY: usize = 32;
const FUNCTION: usize = 48;
const THREAD: usize = 200;
const SLOT: usize = 16;
const USERDATA: usize = 64;

/// Objects waiting to be walked at most (each holds a reference slot); past it, objects are
/// counted at a table's size without being walked.
const MAX_PENDING: usize = 100_000;

/// Where the runtime's allocator keeps its count of the bytes the state holds (see
/// [`allocator_count`]).
#[derive(Clone, Copy)]
pub(crate) struct Count(pub(crate) *const isize);

// SAFETY: read only under the runtime's mlua lock (`run_raw`), while its `Lua` lives.
unsafe impl Send for Count {}
// SAFETY: as for `Send`.
unsafe impl Sync for Count {}

/// The count of bytes mlua's allocator keeps for `lua`'s state, to be read in one load rather
/// than asked of Lua (`lua_gc(LUA_GCCOUNT)`, a call that takes Lua's own lock, at every run,
/// twice). mlua 0.12.2 gives Lua its allocator's state as the allocator's userdata: a
/// `#[repr(C)] MemoryState` whose first field, `used_memory: isize`, is what
/// `Lua::used_memory` reads. That is hidden from mlua's interface, so it is checked here
/// against `Lua::used_memory` around an allocation; `None` (Lua's own count is used then)
/// if it does not hold, as after an upgrade of mlua that changed it.
pub(crate) fn allocator_count(lua: &Lua) -> Option<Count> {
    lua.exec_raw_lua(|raw| {
        let mut ud = std::ptr::null_mut();
        // SAFETY: the state is the runtime's, whose lock is held; reading the allocator
        // neither allocates nor raises.
        unsafe { ffi::lua_getallocf(raw.state(), &mut ud) };
        if ud.is_null() || !ud.cast::<isize>().is_aligned() {
            return None;
        }
        let count = ud.cast_const().cast::<isize>();
        // SAFETY: the userdata of the state's allocator lives as long as the state, and is at
        // least a pointer's size (mlua's `MemoryState`, or another allocator's, checked here).
        let agrees = || unsafe { *count } as usize == lua.used_memory();
        let before = lua.used_memory();
        let agreed = agrees() && lua.create_table_with_capacity(8, 8).is_ok() && agrees();
        (agreed && lua.used_memory() > before).then_some(Count(count))
    })
}

/// A script's account.
struct Account {
    name: Arc<str>,
    /// What it kept when last weighed.
    kept: usize,
    /// What the state grew by during its runs since.
    grown: i64,
    /// Why its globals were reset while another script ran, for its next start.
    notice: Option<String>,
}

/// The accounts of a state's scripts, and the tables that tie tasks to them.
pub(crate) struct Ledger {
    limit: usize,
    accounts: KeyMap<Account>,
    /// The sandbox's own objects (libraries, prelude), never counted for a script.
    shared: Option<HashSet<usize>>,
    /// Task thread -> script key (weak keys: a task dropped by the embedder is forgotten).
    owners: Table,
    /// Task thread -> why its script was reset while it waited.
    stopped: Table,
    /// Whether `stopped` may hold anything (most sessions never stop a task).
    any_stopped: bool,
    noop: Function,
}

/// "30.9 MiB", "512 KiB".
pub(crate) fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// The roots of a state: what its scripts share, and what each script holds.
pub(crate) struct Roots<'a> {
    /// The sandbox's own roots (the real globals, the prelude's functions).
    pub(crate) shared: &'a [Value],
    /// The compiled scripts, by key: each holds its globals (`_ENV`).
    pub(crate) compiled: &'a mut KeyMap<crate::Compiled>,
    /// The globals of each compiled script.
    pub(crate) envs: &'a mut KeyMap<crate::Env>,
}

impl Ledger {
    pub(crate) fn new(lua: &Lua, limit: usize) -> mlua::Result<Self> {
        let weak = |mode: &str| -> mlua::Result<Table> {
            let t = lua.create_table()?;
            let mt = lua.create_table()?;
            mt.raw_set("__mode", mode)?;
            t.set_metatable(Some(mt))?;
            Ok(t)
        };
        Ok(Ledger {
            limit,
            accounts: KeyMap::default(),
            shared: None,
            owners: weak("k")?,
            stopped: weak("k")?,
            any_stopped: false,
            noop: lua.create_function(|_, ()| Ok(()))?,
        })
    }

    /// What one script may keep: a quarter of the state's limit.
    pub(crate) fn share(&self) -> usize {
        self.limit / 4
    }

    /// Forgets the accounts (the keys of a new program may mean other scripts); the tasks
    /// still waiting keep their scripts.
    pub(crate) fn forget(&mut self) {
        let owned: HashSet<u64> = self.owned().into_iter().map(|(k, _)| k).collect();
        self.accounts.retain(|k, _| owned.contains(k));
    }

    /// Opens (or finds) the account of script `key`, named `name`, before a run.
    pub(crate) fn open(&mut self, key: u64, name: &Arc<str>) {
        let account = self.account(key);
        if !Arc::ptr_eq(&account.name, name) {
            account.name = name.clone();
        }
    }

    /// Notes that `thread`, a task waiting to be resumed, runs script `key`.
    pub(crate) fn own(&mut self, thread: &Thread, key: u64) {
        let _ = self.owners.raw_set(thread.clone(), key as i64);
    }

    fn account(&mut self, key: u64) -> &mut Account {
        self.accounts.entry(key).or_insert_with(|| Account {
            name: Arc::from("?"),
            kept: 0,
            grown: 0,
            notice: None,
        })
    }

    /// Why the task running on `thread` was stopped while it waited, if it was (said once:
    /// its script's next start is then not told again).
    pub(crate) fn stopped(&mut self, thread: &Thread) -> Option<String> {
        if !self.any_stopped {
            return None;
        }
        let why = self
            .stopped
            .raw_get::<Option<String>>(thread.clone())
            .ok()
            .flatten()?;
        let _ = self.stopped.raw_set(thread.clone(), Value::Nil);
        if let Ok(key) = self.owners.raw_get::<i64>(thread.clone())
            && let Some(account) = self.accounts.get_mut(&(key as u64))
        {
            account.notice = None;
        }
        Some(why)
    }

    /// Why script `key`'s globals were reset while another script ran (once).
    pub(crate) fn notice(&mut self, key: u64) -> Option<String> {
        self.accounts.get_mut(&key).and_then(|a| a.notice.take())
    }

    /// Whether a task may have been stopped while it waited ([`Ledger::stopped`] has
    /// something to say).
    #[inline]
    pub(crate) fn any_stopped(&self) -> bool {
        self.any_stopped
    }

    /// Accounts for a run of `key` that ended without running out of memory, during which the
    /// state grew by `grown` bytes. When the script now keeps more than its share, it is reset
    /// and the message says so.
    ///
    /// Between runs every account's growth is within its room (this returns `None` only then,
    /// and a weighing or a reset sets the growth to 0 wherever it changes what a script
    /// keeps), so a run that grew the state by 0 has nothing to account for: the caller
    /// need not call this for it.
    pub(crate) fn after_run(
        &mut self,
        lua: &Lua,
        roots: &mut Roots,
        key: u64,
        grown: i64,
    ) -> Option<String> {
        let share = self.share();
        let account = self.accounts.get_mut(&key)?;
        account.grown += grown;
        // Weighed again once its runs may have taken it past its share, and not before they
        // grew the state by an eighth of a share (a script close to its share that makes
        // garbage is not weighed at every run).
        let room = share.saturating_sub(account.kept).max(share / 8);
        if account.grown <= room as i64 {
            return None;
        }
        // The account is only an estimate (garbage counts until it is collected): weigh.
        let _ = lua.gc_collect();
        let kept = self.weigh(lua, roots, key);
        let account = self.accounts.get_mut(&key)?;
        account.kept = kept;
        account.grown = 0;
        if kept <= share {
            return None;
        }
        let message = format!(
            "stopped: the script keeps {} between runs (in its globals and waiting task), more than \
             a script's share of the session's Lua memory ({} of {}); its globals were reset",
            size(kept),
            size(share),
            size(self.limit)
        );
        self.reset(roots, key, &message);
        let _ = lua.gc_collect();
        Some(message)
    }

    /// A run of `key` ran out of memory: collects the state, resets the scripts that keep more
    /// than their share (or, when none does, the failing script), and says what happened.
    pub(crate) fn out_of_memory(&mut self, lua: &Lua, roots: &mut Roots, key: u64) -> String {
        let _ = lua.gc_collect();
        let share = self.share();
        let mut keys: Vec<u64> = roots.compiled.keys().copied().collect();
        keys.extend(self.owned().into_iter().map(|(k, _)| k));
        keys.sort_unstable();
        keys.dedup();
        let mut over = Vec::new();
        for k in keys {
            let kept = self.weigh(lua, roots, k);
            if let Some(account) = self.accounts.get_mut(&k) {
                account.kept = kept;
                account.grown = 0;
            }
            if kept > share {
                over.push((kept, k));
            }
        }
        over.sort_unstable_by(|a, b| b.cmp(a));
        let why = format!(
            "more than a script's share of the session's Lua memory ({})",
            size(share)
        );
        let mut parts = Vec::new();
        let mut own = None;
        for &(kept, k) in &over {
            if k == key {
                own = Some(kept);
                continue;
            }
            let name = self.accounts.get(&k).map(|a| a.name.clone());
            parts.push(format!(
                "script {} kept {}, {why}, and its globals were reset",
                name.as_deref().unwrap_or("?"),
                size(kept)
            ));
            let notice = format!(
                "stopped: the script's globals were reset while another script ran out of memory: \
                 it kept {}, {why}; it starts again with fresh globals",
                size(kept)
            );
            self.reset(roots, k, &notice);
            if let Some(account) = self.accounts.get_mut(&k) {
                account.notice = Some(notice);
            }
        }
        // The failing script loses its globals when it keeps too much, or when no other script
        // does (what its run stored is then what filled the state).
        if own.is_some() || parts.is_empty() {
            self.reset(
                roots,
                key,
                "stopped: the script's globals were reset when it ran out of memory",
            );
            parts.insert(
                0,
                match own {
                    Some(kept) => format!("it kept {}, {why}; its globals were reset", size(kept)),
                    None => "its globals were reset".to_string(),
                },
            );
        }
        let _ = lua.gc_collect();
        format!(
            "stopped: the script ran out of memory (the session's Lua memory limit is {}); {}",
            size(self.limit),
            parts.join("; ")
        )
    }

    /// The waiting tasks, with their scripts.
    fn owned(&self) -> Vec<(u64, Thread)> {
        let mut out = Vec::new();
        let _ = self.owners.for_each::<Thread, i64>(|t, k| {
            if t.status() == mlua::thread::ThreadStatus::Resumable {
                out.push((k as u64, t));
            }
            Ok(())
        });
        out
    }

    /// Drops script `key`'s globals, and stops its waiting tasks with `why`.
    fn reset(&mut self, roots: &mut Roots, key: u64, why: &str) {
        roots.compiled.remove(&key);
        roots.envs.remove(&key);
        for (k, thread) in self.owned() {
            if k == key {
                let _ = thread.reset(self.noop.clone());
                let _ = self.stopped.raw_set(thread, why);
                self.any_stopped = true;
            }
        }
        if let Some(account) = self.accounts.get_mut(&key) {
            account.kept = 0;
            account.grown = 0;
        }
    }

    /// Lets a test pretend a script's runs grew the state by `bytes` (an account is an
    /// estimate; this makes one wrong on purpose).
    #[cfg(test)]
    pub(crate) fn credit(&mut self, key: u64, bytes: i64) {
        self.account(key).grown += bytes;
    }

    /// What script `key` keeps: its compiled chunk (and so its globals) and its waiting tasks,
    /// without the sandbox's own objects. The memory limit is raised while the walk holds its
    /// references, so that a full state can still be weighed.
    fn weigh(&mut self, lua: &Lua, roots: &Roots, key: u64) -> usize {
        let raised = lua.set_memory_limit(self.limit + self.limit / 2).is_ok();
        if self.shared.is_none() {
            let none = HashSet::new();
            let mut scale = Scale::new(&none);
            for v in roots.shared {
                scale.add(v.clone());
            }
            scale.walk(lua, usize::MAX);
            self.shared = Some(scale.seen);
        }
        let mut owned: Vec<Value> = self
            .owned()
            .into_iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, t)| Value::Thread(t))
            .collect();
        if let Some(c) = roots.compiled.get(&key) {
            owned.push(Value::Function(c.chunk.clone()));
        }
        let skip = self.shared.take().unwrap_or_default();
        let mut scale = Scale::new(&skip);
        for v in owned {
            scale.add(v);
        }
        let total = scale.walk(lua, self.limit);
        self.shared = Some(skip);
        if raised {
            let _ = lua.set_memory_limit(self.limit);
        }
        total
    }
}

/// A walk over Lua objects that estimates their size, each counted once.
struct Scale<'a> {
    skip: &'a HashSet<usize>,
    seen: HashSet<usize>,
    pending: Vec<Value>,
    total: usize,
}

impl<'a> Scale<'a> {
    fn new(skip: &'a HashSet<usize>) -> Self {
        Scale {
            skip,
            seen: HashSet::new(),
            pending: Vec::new(),
            total: 0,
        }
    }

    fn add(&mut self, v: Value) {
        let p = match &v {
            Value::String(_)
            | Value::Table(_)
            | Value::Function(_)
            | Value::Thread(_)
            | Value::UserData(_)
            | Value::Error(_) => v.to_pointer() as usize,
            _ => return,
        };
        if p == 0 || self.skip.contains(&p) || !self.seen.insert(p) {
            return;
        }
        match v {
            Value::String(s) => self.total += STRING + s.as_bytes().len() + 1,
            Value::Table(_) | Value::Function(_) | Value::Thread(_)
                if self.pending.len() < MAX_PENDING =>
            {
                self.pending.push(v)
            }
            Value::Table(_) => self.total += TABLE,
            _ => self.total += USERDATA,
        }
    }

    /// Walks what was added, stopping once past `cap` bytes; the estimate.
    fn walk(&mut self, lua: &Lua, cap: usize) -> usize {
        while let Some(v) = self.pending.pop() {
            if self.total > cap {
                break;
            }
            match v {
                Value::Table(t) => self.table(&t),
                Value::Function(f) => {
                    self.total += FUNCTION;
                    for up in upvalues(lua, &f) {
                        self.total += SLOT;
                        self.add(up);
                    }
                }
                Value::Thread(t) => {
                    self.total += THREAD;
                    for v in stack(lua, &t) {
                        self.total += SLOT;
                        self.add(v);
                    }
                }
                _ => {}
            }
        }
        self.pending.clear();
        self.total
    }

    fn table(&mut self, t: &Table) {
        self.total += TABLE;
        let (mut weak_keys, mut weak_values) = (false, false);
        if let Some(mt) = t.metatable() {
            if let Ok(Some(mode)) = mt.raw_get::<Option<String>>("__mode") {
                weak_keys = mode.contains('k');
                weak_values = mode.contains('v');
            }
            self.add(Value::Table(mt));
        }
        let _ = t.for_each::<Value, Value>(|k, v| {
            self.total += ENTRY;
            if !weak_keys {
                self.add(k);
            }
            if !weak_values {
                self.add(v);
            }
            Ok(())
        });
    }
}

/// The upvalues of `f` (nothing for a function without any).
fn upvalues(lua: &Lua, f: &Function) -> Vec<Value> {
    // SAFETY: `lua_checkstack` and `lua_getupvalue` never raise an error; the function is at
    // index 1 of the protected call.
    let values = unsafe {
        lua.exec_raw::<MultiValue>(f, |state| {
            let mut n = 1;
            while n <= 255
                && ffi::lua_checkstack(state, 1) != 0
                && !ffi::lua_getupvalue(state, 1, n).is_null()
            {
                n += 1;
            }
        })
    };
    values
        .map(|v| v.into_iter().skip(1).collect())
        .unwrap_or_default()
}

/// The values on the stack of a suspended (or not yet started) thread.
fn stack(lua: &Lua, t: &Thread) -> Vec<Value> {
    const MAX_VALUES: i32 = 20_000;
    // SAFETY: only calls that never raise an error (`lua_getstack`, `lua_getlocal`,
    // `lua_checkstack`, `lua_xmove`, `lua_pushvalue`) on a thread that is not running (all of
    // a state's threads are suspended between runs); the thread is at index 1.
    let values = unsafe {
        lua.exec_raw::<MultiValue>(t, |state| {
            let co = ffi::lua_tothread(state, 1);
            if co.is_null() || co == state {
                return;
            }
            let room = |n| ffi::lua_checkstack(co, 1) != 0 && ffi::lua_checkstack(state, n) != 0;
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            let (mut level, mut pushed) = (0, 0);
            while ffi::lua_getstack(co, level, &mut ar) != 0 {
                let mut n = 1;
                while pushed < MAX_VALUES && room(1) && !ffi::lua_getlocal(co, &ar, n).is_null() {
                    ffi::lua_xmove(co, state, 1);
                    n += 1;
                    pushed += 1;
                }
                level += 1;
            }
            if level == 0 && ffi::lua_status(co) == ffi::LUA_OK {
                // Not started: its function and arguments wait on its stack.
                for i in 1..=ffi::lua_gettop(co).min(MAX_VALUES) {
                    if !room(1) {
                        break;
                    }
                    ffi::lua_pushvalue(co, i);
                    ffi::lua_xmove(co, state, 1);
                }
            }
        })
    };
    values
        .map(|v| v.into_iter().skip(1).collect())
        .unwrap_or_default()
}
