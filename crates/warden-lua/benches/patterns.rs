//! Warden's bounded pattern matcher against Lua's own C functions, on typical patterns, in the
//! same run: each case is a Lua loop of 100 calls, run once with Lua's `string.find`, `match`,
//! `gmatch` and `gsub` (`lua`) and once with Warden's (`warden`). Run with
//! `cargo bench -p warden-lua --bench patterns`; the ratio of the two times of a case is the
//! cost of bounding the matcher.

// The matcher's modules, compiled into the benchmark itself (they are private to the crate).
#[path = "../src/lmatch.rs"]
#[allow(dead_code)]
mod lmatch;
#[path = "../src/strings.rs"]
#[allow(dead_code)]
mod strings;

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mlua::{Function, Lua, LuaString, Table};

const CASES: &[(&str, &str)] = &[
    (
        "find a word",
        "for i = 1, 100 do local a = TEXT:find('needle') end",
    ),
    (
        "find a word in text, plain",
        "for i = 1, 100 do local a = TEXT:find('needle', 1, true) end",
    ),
    (
        "match key=value",
        "for i = 1, 100 do local k, v = ('budget=0.8'):match('^(%w+)=(.*)$') end",
    ),
    (
        "match digits",
        "for i = 1, 100 do local n = ('turn 42 of 100'):match('(%d+)') end",
    ),
    (
        "match trim",
        "for i = 1, 100 do local t = ('   hello world   '):match('^%s*(.-)%s*$') end",
    ),
    (
        "match an address in text",
        "for i = 1, 100 do local u, d = TEXT:match('(%w+)@(%w+)%.com') end",
    ),
    (
        "gmatch words in text",
        "for i = 1, 100 do local n = 0; for w in LINE:gmatch('%a+') do n = n + 1 end end",
    ),
    (
        "gsub spaces in text",
        "for i = 1, 100 do local s = TEXT:gsub('%s+', ' ') end",
    ),
    (
        "gsub with a function",
        "for i = 1, 100 do local s = LINE:gsub('%w+', string.upper) end",
    ),
    (
        "gsub with a table",
        "for i = 1, 100 do local s = ('$a and $b'):gsub('%$(%w+)', VARS) end",
    ),
];

fn setup() -> (Lua, Table, Table) {
    let lua = Lua::new();
    // Scripts run under a memory limit, which makes Lua's allocations go through a check.
    lua.set_memory_limit(64 << 20).expect("limit");
    let text = format!(
        "{} roberto@lua.com needle",
        "The quick brown fox jumps over the lazy dog.  ".repeat(20)
    );
    lua.globals().set("TEXT", text).expect("set");
    lua.globals()
        .set("LINE", "The quick brown fox jumps over the lazy dog")
        .expect("set");
    let vars = lua.create_table().expect("table");
    vars.set("a", "one").expect("set");
    vars.set("b", "two").expect("set");
    lua.globals().set("VARS", vars).expect("set");
    let string: Table = lua.globals().get("string").expect("string");
    let c = lua.create_table().expect("table");
    for name in ["find", "match", "gmatch", "gsub", "upper"] {
        c.set(name, string.get::<Function>(name).expect("a function"))
            .expect("set");
    }
    // A deadline far away, behind a lock, checked as a run's would be.
    let deadline = Arc::new(Mutex::new(Instant::now() + Duration::from_secs(3600)));
    let clock = lua
        .create_function(move |_, _: LuaString| {
            let at = *deadline.lock().expect("lock");
            Ok((Instant::now() >= at).then(|| "out of time".to_string()))
        })
        .expect("clock");
    let w = strings::install(&lua, &clock).expect("install");
    w.set("upper", string.get::<Function>("upper").expect("upper"))
        .expect("set");
    (lua, c, w)
}

/// A case's loop, run with `lib` as the string table (and the string metatable's `__index`).
fn compile(lua: &Lua, body: &str) -> Function {
    lua.load(format!(
        "local lib = ...; local mt = getmetatable(''); local saved = mt.__index; mt.__index = lib; \
         local string = lib; {body}; mt.__index = saved"
    ))
    .into_function()
    .expect("compiles")
}

fn patterns(c: &mut Criterion) {
    let (lua, lua_lib, warden_lib) = setup();
    for (name, body) in CASES {
        let f = compile(&lua, body);
        let mut group = c.benchmark_group(format!("patterns/{name}"));
        group.bench_function("lua", |b| {
            b.iter(|| f.call::<()>(black_box(lua_lib.clone())).expect("runs"))
        });
        group.bench_function("warden", |b| {
            b.iter(|| f.call::<()>(black_box(warden_lib.clone())).expect("runs"))
        });
        group.finish();
    }
}

criterion_group!(benches, patterns);
criterion_main!(benches);
