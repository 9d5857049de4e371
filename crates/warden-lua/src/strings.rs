//! `string.find`, `match`, `gmatch` and `gsub` as scripts see them, on the bounded matcher of
//! `lmatch`: C functions written against Lua's C API as `lstrlib.c` writes them, so that
//! arguments, results, errors (with their positions), `gsub` callbacks and their errors, and
//! the cost of a call are Lua's own. The one difference: every few thousand steps a match asks
//! the run's clock, a Lua function given to [`install`], whether it may go on.
//!
//! # Safety
//!
//! Lua raises errors with `longjmp`, which may cross the Rust frames of these functions. Rust
//! allows that only over frames with nothing to drop, so the frames here hold only integers,
//! slices into Lua strings that stay on the stack, and `lmatch`'s matcher (which owns nothing).
//! The matching itself, which could panic on a bug, runs inside `catch_unwind` and calls Lua
//! only through `lua_pcall` (the clock), so nothing jumps out of it.

use std::ffi::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua, Table};

use super::lmatch::{self, Budget, Capture, Malformed, Matcher, Stop};

unsafe extern "C-unwind" {
    // In Lua's auxiliary library, which mlua links, but not declared by mlua-sys.
    fn luaL_typeerror(state: *mut lua_State, arg: c_int, tname: *const c_char) -> c_int;
}

/// The upvalue of every function: the run's clock, `check(pattern)`, which returns nothing
/// while the run may go on, and else the message that stops it (the clock records the stop,
/// so the script cannot catch it).
const CLOCK: c_int = ffi::lua_upvalueindex(1);

/// The four functions, `{ find, match, gmatch, gsub }`, over the run's clock `check`.
pub(crate) fn install(lua: &Lua, check: &Function) -> mlua::Result<Table> {
    let functions = lua.create_table()?;
    let all: [(&str, ffi::lua_CFunction); 4] = [
        ("find", str_find),
        ("match", str_match),
        ("gmatch", gmatch),
        ("gsub", gsub),
    ];
    for (name, f) in all {
        // SAFETY: pops the clock (the argument, at index 1) into the closure it pushes.
        let closure: Function =
            unsafe { lua.exec_raw(check, |state| ffi::lua_pushcclosure(state, f, 1))? };
        functions.raw_set(name, closure)?;
    }
    Ok(functions)
}

/// What the message of a pattern that ran out of time shows of it.
pub(crate) fn shown(pattern: &[u8]) -> String {
    const MAX: usize = 40;
    let text = String::from_utf8_lossy(&pattern[..pattern.len().min(MAX)]).into_owned();
    if pattern.len() > MAX {
        format!("{text}...")
    } else {
        text
    }
}

/// Argument `arg` as bytes (a number is converted in place, as Lua does). The slice lives as
/// long as the value stays at that index.
unsafe fn check_bytes<'a>(state: *mut lua_State, arg: c_int) -> &'a [u8] {
    let mut len = 0;
    unsafe {
        let p = ffi::luaL_checklstring(state, arg, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// The string at `index` (known to be one).
unsafe fn bytes_at<'a>(state: *mut lua_State, index: c_int) -> &'a [u8] {
    let mut len = 0;
    unsafe {
        let p = ffi::lua_tolstring(state, index, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    unsafe { ffi::lua_pushlstring(state, bytes.as_ptr().cast::<c_char>(), bytes.len()) };
}

/// Raises `parts` as an error at the position of the caller (Lua's `luaL_error`).
unsafe fn raise(state: *mut lua_State, parts: &[&str]) -> ! {
    unsafe {
        ffi::luaL_checkstack(state, parts.len() as c_int + 1, std::ptr::null());
        ffi::luaL_where(state, 1);
        for part in parts {
            push_bytes(state, part.as_bytes());
        }
        ffi::lua_concat(state, parts.len() as c_int + 1);
        ffi::lua_error(state)
    }
}

unsafe fn raise_malformed(state: *mut lua_State, what: Malformed) -> ! {
    let (text, digit) = what.text();
    unsafe { raise(state, &[text, digit]) }
}

/// Asks the clock (with the pattern at `pattern`) whether the match may go on. When it may
/// not, the message is left on the stack. The call is protected, so that nothing jumps out.
unsafe fn may_go_on(state: *mut lua_State, pattern: c_int) -> bool {
    unsafe {
        if ffi::lua_checkstack(state, 3) == 0 {
            return true;
        }
        ffi::lua_pushvalue(state, CLOCK);
        ffi::lua_pushvalue(state, pattern);
        if ffi::lua_pcall(state, 1, 1, 0) != ffi::LUA_OK {
            return false;
        }
        if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
            ffi::lua_settop(state, -2);
            return true;
        }
        false
    }
}

/// Runs a match against the clock, with the pattern at stack index `pattern`. A malformed
/// pattern raises Lua's error; time running out raises the clock's message.
unsafe fn matching<T>(
    state: *mut lua_State,
    pattern: c_int,
    f: impl FnOnce(&mut Budget) -> Result<T, Stop>,
) -> T {
    let mut more = || unsafe { may_go_on(state, pattern) };
    let result = catch_unwind(AssertUnwindSafe(|| f(&mut Budget::new(&mut more))));
    match result {
        Ok(Ok(v)) => v,
        Ok(Err(Stop::Time)) => unsafe { ffi::lua_error(state) },
        Ok(Err(Stop::Error(what))) => unsafe { raise_malformed(state, what) },
        Err(panic) => {
            drop(panic);
            unsafe { raise(state, &["internal error in Warden's pattern matcher"]) }
        }
    }
}

/// Pushes capture `i` of the match `s..e` of `m` over `src`.
unsafe fn push_capture(
    state: *mut lua_State,
    src: &[u8],
    m: &Matcher,
    i: usize,
    s: usize,
    e: usize,
) {
    match m.capture(i, s, e) {
        Ok(Capture::Text(a, b)) => unsafe { push_bytes(state, &src[a..b]) },
        Ok(Capture::Position(at)) => unsafe { ffi::lua_pushinteger(state, at as i64 + 1) },
        Err(Stop::Error(what)) => unsafe { raise_malformed(state, what) },
        Err(Stop::Time) => unsafe { ffi::lua_error(state) },
    }
}

/// Pushes the captures of the match `s..e` (the whole match when there are none and `whole`).
unsafe fn push_captures(
    state: *mut lua_State,
    src: &[u8],
    m: &Matcher,
    (s, e): (usize, usize),
    whole: bool,
) -> c_int {
    let n = m.count(whole);
    unsafe {
        ffi::luaL_checkstack(state, n as c_int, c"too many captures".as_ptr());
        for i in 0..n {
            push_capture(state, src, m, i, s, e);
        }
    }
    n as c_int
}

fn strip_anchor(pat: &[u8]) -> (bool, &[u8]) {
    match pat.strip_prefix(b"^") {
        Some(rest) => (true, rest),
        None => (false, pat),
    }
}

unsafe extern "C-unwind" fn str_find(state: *mut lua_State) -> c_int {
    unsafe { find_aux(state, true) }
}

unsafe extern "C-unwind" fn str_match(state: *mut lua_State) -> c_int {
    unsafe { find_aux(state, false) }
}

/// `string.find` (`find`) and `string.match` (Lua's `str_find_aux`).
unsafe fn find_aux(state: *mut lua_State, find: bool) -> c_int {
    unsafe {
        let src = check_bytes(state, 1);
        let pat = check_bytes(state, 2);
        let init = lmatch::start_offset(ffi::luaL_optinteger(state, 3, 1), src.len());
        if init > src.len() {
            ffi::lua_pushnil(state);
            return 1;
        }
        if find && (ffi::lua_toboolean(state, 4) != 0 || lmatch::is_plain(pat)) {
            return match lmatch::find_plain(&src[init..], pat) {
                Some(i) => {
                    ffi::lua_pushinteger(state, (init + i + 1) as i64);
                    ffi::lua_pushinteger(state, (init + i + pat.len()) as i64);
                    2
                }
                None => {
                    ffi::lua_pushnil(state);
                    1
                }
            };
        }
        let (anchored, body) = strip_anchor(pat);
        let found = matching(state, 2, |budget| {
            lmatch::next_match(src, body, init, None, anchored, budget)
        });
        let Some((m, s, e)) = found else {
            ffi::lua_pushnil(state);
            return 1;
        };
        if find {
            ffi::lua_pushinteger(state, s as i64 + 1);
            ffi::lua_pushinteger(state, e as i64);
            2 + push_captures(state, src, &m, (s, e), false)
        } else {
            push_captures(state, src, &m, (s, e), true)
        }
    }
}

/// Where a `gmatch` iteration stands (in a userdata: plain integers).
#[repr(C)]
struct GmatchState {
    from: usize,
    /// The end of the last match, or `usize::MAX` before the first.
    last: usize,
}

/// `string.gmatch`: an iterator over the subject, the pattern (not anchored by `^`, as in Lua
/// 5.4) and where it stands.
unsafe extern "C-unwind" fn gmatch(state: *mut lua_State) -> c_int {
    unsafe {
        let len = check_bytes(state, 1).len();
        check_bytes(state, 2);
        let init = lmatch::start_offset(ffi::luaL_optinteger(state, 3, 1), len).min(len + 1);
        ffi::lua_settop(state, 2);
        let at = ffi::lua_newuserdatauv(state, std::mem::size_of::<GmatchState>(), 0)
            .cast::<GmatchState>();
        at.write(GmatchState {
            from: init,
            last: usize::MAX,
        });
        ffi::lua_pushvalue(state, CLOCK);
        // The clock is the iterator's first upvalue too.
        ffi::lua_rotate(state, 1, 1);
        ffi::lua_pushcclosure(state, gmatch_next, 4);
        1
    }
}

unsafe extern "C-unwind" fn gmatch_next(state: *mut lua_State) -> c_int {
    unsafe {
        let src = bytes_at(state, ffi::lua_upvalueindex(2));
        let pat = bytes_at(state, ffi::lua_upvalueindex(3));
        let at = ffi::lua_touserdata(state, ffi::lua_upvalueindex(4)).cast::<GmatchState>();
        if at.is_null() {
            return 0;
        }
        let (from, last) = ((*at).from, (*at).last);
        let last = (last != usize::MAX).then_some(last);
        let found = matching(state, ffi::lua_upvalueindex(3), |budget| {
            lmatch::next_match(src, pat, from, last, false, budget)
        });
        let Some((m, s, e)) = found else {
            return 0;
        };
        (*at).from = e;
        (*at).last = e;
        push_captures(state, src, &m, (s, e), true)
    }
}

/// Appends the replacement string (at index 3) for the match `s..e` (Lua's `add_s`).
unsafe fn add_string(
    state: *mut lua_State,
    b: &mut ffi::luaL_Buffer,
    src: &[u8],
    m: &Matcher,
    (s, e): (usize, usize),
) {
    unsafe {
        let mut rest = bytes_at(state, 3);
        while let Some(i) = memchr::memchr(b'%', rest) {
            ffi::luaL_addlstring(b, rest.as_ptr().cast::<c_char>(), i);
            match rest.get(i + 1) {
                Some(b'%') => ffi::luaL_addchar(b, b'%' as c_char),
                Some(b'0') => ffi::luaL_addlstring(b, src[s..].as_ptr().cast::<c_char>(), e - s),
                Some(d) if d.is_ascii_digit() => match m.capture(usize::from(d - b'1'), s, e) {
                    Ok(Capture::Text(x, y)) => {
                        ffi::luaL_addlstring(b, src[x..].as_ptr().cast::<c_char>(), y - x)
                    }
                    Ok(Capture::Position(at)) => {
                        ffi::lua_pushinteger(state, at as i64 + 1);
                        ffi::luaL_addvalue(b);
                    }
                    Err(Stop::Error(what)) => raise_malformed(state, what),
                    Err(Stop::Time) => ffi::lua_error(state),
                },
                _ => raise(state, &["invalid use of '%' in replacement string"]),
            }
            rest = &rest[i + 2..];
        }
        ffi::luaL_addlstring(b, rest.as_ptr().cast::<c_char>(), rest.len());
    }
}

/// Appends the replacement for the match `s..e`; whether it changed the subject (Lua's
/// `add_value`: a function or table giving `nil` or `false` keeps the match).
unsafe fn add_value(
    state: *mut lua_State,
    b: &mut ffi::luaL_Buffer,
    src: &[u8],
    m: &Matcher,
    (s, e): (usize, usize),
    kind: c_int,
) -> bool {
    unsafe {
        match kind {
            ffi::LUA_TFUNCTION => {
                ffi::lua_pushvalue(state, 3);
                let n = push_captures(state, src, m, (s, e), true);
                ffi::lua_call(state, n, 1);
            }
            ffi::LUA_TTABLE => {
                ffi::luaL_checkstack(state, 1, std::ptr::null());
                push_capture(state, src, m, 0, s, e);
                ffi::lua_gettable(state, 3);
            }
            _ => {
                add_string(state, b, src, m, (s, e));
                return true;
            }
        }
        if ffi::lua_toboolean(state, -1) == 0 {
            ffi::lua_settop(state, -2);
            ffi::luaL_addlstring(b, src[s..].as_ptr().cast::<c_char>(), e - s);
            false
        } else if ffi::lua_isstring(state, -1) == 0 {
            let name = std::ffi::CStr::from_ptr(ffi::luaL_typename(state, -1));
            let name = name.to_str().unwrap_or("value");
            raise(state, &["invalid replacement value (a ", name, ")"])
        } else {
            ffi::luaL_addvalue(b);
            true
        }
    }
}

/// How many positions `gsub` walks between two looks at the clock, a replacement by a function
/// or a table counting [`REPLACEMENT_CALL`].
const WALK_CHECK: u32 = 4096;
/// What a replacement that runs Lua (a function called, a table indexed) counts in `gsub`'s
/// walk: the clock is asked at least every 64 of them.
const REPLACEMENT_CALL: u32 = 64;

/// `string.gsub` (Lua's `str_gsub`).
unsafe extern "C-unwind" fn gsub(state: *mut lua_State) -> c_int {
    unsafe {
        let src = check_bytes(state, 1);
        let pat = check_bytes(state, 2);
        let kind = ffi::lua_type(state, 3);
        let max = ffi::luaL_optinteger(state, 4, src.len() as i64 + 1);
        if !matches!(
            kind,
            ffi::LUA_TNUMBER | ffi::LUA_TSTRING | ffi::LUA_TFUNCTION | ffi::LUA_TTABLE
        ) {
            luaL_typeerror(state, 3, c"string/function/table".as_ptr());
        }
        let mut b: ffi::luaL_Buffer = std::mem::zeroed();
        ffi::luaL_buffinit(state, &mut b);
        let (anchored, body) = strip_anchor(pat);
        let mut m = Matcher::new(src, body);
        let (mut s, mut last, mut n, mut changed) = (0, None, 0i64, false);
        // Each position is matched with a budget of its own, which a short match never spends,
        // and a replacement function or table runs Lua at each match (without the instruction
        // hook in a straight-line script): the walk itself asks the clock too, every so often.
        let mut walked = 0u32;
        let calls = matches!(kind, ffi::LUA_TFUNCTION | ffi::LUA_TTABLE);
        while n < max {
            walked += 1;
            if walked >= WALK_CHECK {
                walked = 0;
                if !may_go_on(state, 2) {
                    ffi::lua_error(state);
                }
            }
            let end = matching(state, 2, |budget| m.at(s, budget));
            match end {
                Some(e) if Some(e) != last => {
                    n += 1;
                    if calls {
                        walked += REPLACEMENT_CALL;
                    }
                    changed |= add_value(state, &mut b, src, &m, (s, e), kind);
                    s = e;
                    last = Some(e);
                }
                _ if s < src.len() => {
                    ffi::luaL_addchar(&mut b, src[s] as c_char);
                    s += 1;
                }
                _ => break,
            }
            if anchored {
                break;
            }
        }
        if changed {
            ffi::luaL_addlstring(&mut b, src[s..].as_ptr().cast::<c_char>(), src.len() - s);
            ffi::luaL_pushresult(&mut b);
        } else {
            ffi::lua_pushvalue(state, 1);
        }
        ffi::lua_pushinteger(state, n);
        2
    }
}
