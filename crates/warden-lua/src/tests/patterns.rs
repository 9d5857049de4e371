//! The matcher against Lua's own: every case is run through the original C `string.find`,
//! `match`, `gmatch` and `gsub` of a plain Lua state and through Warden's, and the results (or
//! the errors, with their positions) must be the same. Hand-written cases from the reference
//! manual, then random subjects and patterns drawn from a grammar of patterns.

use std::time::{Duration, Instant};

use mlua::{Function, Lua, LuaString, Table, Value};
use proptest::prelude::*;

use super::HANG;
use crate::strings::{install, shown};

/// A clock that stops matches at `deadline` (never, without one).
fn clock(lua: &Lua, deadline: Option<Instant>) -> Function {
    lua.create_function(move |_, pattern: LuaString| {
        Ok(deadline
            .filter(|d| Instant::now() >= *d)
            .map(|_| format!("out of time in '{}'", shown(&pattern.as_bytes()))))
    })
    .unwrap()
}

/// Runs the same calls on Lua's functions (`c`) and Warden's (`w`), each result shown as text.
struct Both {
    lua: Lua,
    c: Table,
    w: Table,
    calls: Table,
}

const CALLS: &str = r##"
local function show(...)
  local parts = { tostring(select("#", ...)) }
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "string" then
      parts[#parts + 1] = string.format("%q", v)
    elseif type(v) == "table" then
      parts[#parts + 1] = "table"
    else
      parts[#parts + 1] = type(v) .. ":" .. tostring(v)
    end
  end
  return table.concat(parts, " ")
end

local replacers = {
  function(a) return a end,
  function(a, b) return b end,
  function() return false end,
  function(a) return #tostring(a) end,
  function() return {} end,
  function(...) return select("#", ...) .. "<" .. table.concat({ ... }, ",") .. ">" end,
}
local tables = {
  { a = "A", b = false, ["1"] = "one", [1] = "ONE", ab = 7.5 },
  setmetatable({}, { __index = function(_, k) return "[" .. tostring(k) .. "]" end }),
  { a = {} },
}

return {
  find = function(lib, s, p, init, plain)
    return show(pcall(lib.find, s, p, init, plain))
  end,
  match = function(lib, s, p, init)
    return show(pcall(lib.match, s, p, init))
  end,
  -- Not in tail position: errors carry this chunk's position.
  at = function(lib, name, ...)
    local args = table.pack(...)
    return show(pcall(function()
      local r = table.pack(lib[name](table.unpack(args, 1, args.n)))
      return table.unpack(r, 1, r.n)
    end))
  end,
  gmatch = function(lib, s, p, init)
    local out = {}
    local ok, err = pcall(function()
      local it = lib.gmatch(s, p, init)
      for _ = 1, 40 do
        local r = table.pack(it())
        out[#out + 1] = show(table.unpack(r, 1, r.n))
        if r.n == 0 then break end
      end
    end)
    out[#out + 1] = tostring(ok) .. " " .. tostring(err)
    return table.concat(out, " | ")
  end,
  gsub = function(lib, s, p, repl, n)
    return show(pcall(lib.gsub, s, p, repl, n))
  end,
  gsub_function = function(lib, s, p, which, n)
    return show(pcall(lib.gsub, s, p, replacers[which], n))
  end,
  gsub_table = function(lib, s, p, which, n)
    return show(pcall(lib.gsub, s, p, tables[which], n))
  end,
}
"##;

impl Both {
    fn new() -> Self {
        let lua = Lua::new();
        let c = lua.create_table().unwrap();
        let string: Table = lua.globals().get("string").unwrap();
        for name in ["find", "match", "gmatch", "gsub"] {
            c.set(name, string.get::<Function>(name).unwrap()).unwrap();
        }
        let w = install(&lua, &clock(&lua, None)).unwrap();
        let calls = lua.load(CALLS).set_name("=cases").eval().unwrap();
        Both { lua, c, w, calls }
    }

    /// The results of `call` on Lua's functions and on Warden's.
    fn run(&self, call: &str, args: impl IntoLuaMulti + Clone) -> (String, String) {
        let f: Function = self.calls.get(call).unwrap();
        let text = |v: mlua::LuaString| String::from_utf8_lossy(&v.as_bytes()).into_owned();
        let c = text(f.call((self.c.clone(), args.clone())).unwrap());
        let w = text(f.call((self.w.clone(), args)).unwrap());
        (c, w)
    }

    fn same(&self, call: &str, args: impl IntoLuaMulti + Clone) -> String {
        let (c, w) = self.run(call, args);
        assert_eq!(w, c, "{call}");
        c
    }
}

use mlua::IntoLuaMulti;

#[test]
fn the_reference_manuals_examples_give_lua_s_results() {
    let b = Both::new();
    let str_ = |t: &str| b.lua.create_string(t).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("find", "hello Lua user", "Lua"),
        ("find", "hello Lua user", "l"),
        ("find", "hello Lua user", "lua"),
        ("find", "hello", "()ll()"),
        ("find", "  x", "^%s*"),
        ("find", "a.b", "."),
        ("match", "hello world", "(h)(ello)"),
        ("match", "key = value", "(%w+)%s*=%s*(%w+)"),
        ("match", "THE (quick) fox", "%b()"),
        ("match", "[[x]]", "%[(=*)%["),
        ("match", "  trim me  ", "^%s*(.-)%s*$"),
        ("match", "abc", "()a()"),
        ("match", "hello", "(l)%1"),
        ("match", "x = 'a' and \"b\"", "([\"'])(.-)%1"),
        ("match", "2024-01-31", "(%d+)-(%d+)-(%d+)"),
        ("match", "0x1F", "^0[xX](%x+)$"),
        ("match", "f(a(b)c)d", "%b()"),
        ("match", "THE (quick) fox", "%f[%a]%a+"),
        ("match", "hello", ""),
        ("match", "hello", "$"),
        ("match", "a$b", "a$b"),
        ("match", "a-b", "a%-b"),
        ("match", "a]b", "[]]"),
        ("match", "a^b", "[%^]"),
        ("match", "a^b", "[b^]"),
        ("match", "x-y", "[a%-z]+"),
        ("match", "\0a\0", "%z"),
        ("match", "a\0b", "a\0b"),
    ];
    for (call, subject, pattern) in cases {
        b.same(call, (str_(subject), str_(pattern)));
    }
    assert_eq!(
        b.same("find", (str_("hello Lua user"), str_("Lua"))),
        "3 boolean:true number:7 number:9"
    );
    assert_eq!(
        b.same("find", (str_("hello"), str_("()ll()"))),
        "5 boolean:true number:3 number:4 number:3 number:5"
    );
    let gsubs: &[(&str, &str, &str, Option<i64>)] = &[
        ("hello world", "(%w+)", "%1 %1", None),
        ("hello world", "%w+", "%0 %0", Some(1)),
        ("hello world from Lua", "(%w+)%s*(%w+)", "%2 %1", None),
        ("abc", "%w*", "-", None),
        ("hello world", "o*", "x", None),
        ("", "", "x", None),
        ("abc", "", "-", None),
        ("abc", "^", "-", None),
        ("abc", "$", "-", None),
        ("abc", ".", "%%", None),
        ("hello", "()", "%1", None),
        ("abc", "b", "%2", None),
        ("abc", "z", "%2", None),
        ("abc", "b", "%", None),
        ("abc", "b", "%x", None),
        ("abc", ".", "x", Some(0)),
        ("abc", ".", "x", Some(-1)),
    ];
    for (subject, pattern, repl, n) in gsubs {
        b.same("gsub", (str_(subject), str_(pattern), str_(repl), *n));
    }
    assert_eq!(
        b.same(
            "gsub",
            (
                str_("hello world"),
                str_("(%w+)"),
                str_("%1 %1"),
                None::<i64>
            )
        ),
        "3 boolean:true \"hello hello world world\" number:2"
    );
    for (subject, pattern, init) in [
        ("one two three", "%a+", None),
        ("from=world, to=Lua", "(%w+)=(%w+)", None),
        ("abc", ".", Some(2)),
        ("abc", "", None),
        ("abc", "%w*", None),
        ("abc", "^a", None),
        ("hello", "()l", Some(-3)),
        ("abc", "x*", Some(10)),
    ] {
        b.same("gmatch", (str_(subject), str_(pattern), init));
    }
    for which in 1..=6 {
        b.same(
            "gsub_function",
            (
                str_("hello world from Lua"),
                str_("(%w+)"),
                which,
                None::<i64>,
            ),
        );
        b.same(
            "gsub_function",
            (
                str_("4+5 = $return 4+5$"),
                str_("%$(.-)%$"),
                which,
                None::<i64>,
            ),
        );
    }
    for which in 1..=3 {
        b.same(
            "gsub_table",
            (str_("$a-$b.$1.$ab"), str_("%$(%w+)"), which, None::<i64>),
        );
        b.same("gsub_table", (str_("a b a"), str_("%w"), which, Some(2)));
        // Only the first capture is a key: an unfinished second one is not an error.
        b.same(
            "gsub_table",
            (str_("ab"), str_("(a)(b"), which, None::<i64>),
        );
    }
}

#[test]
fn malformed_patterns_fail_with_lua_s_messages_and_positions() {
    let b = Both::new();
    let str_ = |t: &str| b.lua.create_string(t).unwrap();
    for (pattern, message) in [
        ("%", "malformed pattern (ends with '%')"),
        ("[a", "malformed pattern (missing ']')"),
        ("[]", "malformed pattern (missing ']')"),
        ("[^]", "malformed pattern (missing ']')"),
        ("[%]", "malformed pattern (missing ']')"),
        ("%b", "malformed pattern (missing arguments to '%b')"),
        ("%bx", "malformed pattern (missing arguments to '%b')"),
        ("%f", "missing '[' after '%f' in pattern"),
        ("%fa", "missing '[' after '%f' in pattern"),
        ("(a", "unfinished capture"),
        ("a)", "invalid pattern capture"),
        ("%1", "invalid capture index %1"),
        ("(a%1)", "invalid capture index %1"),
        ("(a)%2", "invalid capture index %2"),
        ("%0", "invalid capture index %0"),
        (&"a-".repeat(300), "pattern too complex"),
        (&"()".repeat(33), "too many captures"),
    ] {
        let (c, w) = b.run("find", (str_("aaa"), str_(pattern)));
        assert_eq!(w, c, "find {pattern}");
        let (c, w) = b.run("match", (str_("aaa"), str_(pattern)));
        assert_eq!(w, c, "match {pattern}");
        assert!(c.contains(message), "match {pattern}: {c}");
        let (c, w) = b.run("at", ("match", str_("aaa"), str_(pattern)));
        assert_eq!(w, c, "{pattern}");
        assert!(
            c.contains("\"cases:") && c.contains(message),
            "{pattern}: {c}"
        );
        b.same("gmatch", (str_("aaa"), str_(pattern)));
        b.same("gsub", (str_("aaa"), str_(pattern), str_("x"), None::<i64>));
        b.same(
            "gsub_function",
            (str_("aaa"), str_(pattern), 1, None::<i64>),
        );
    }
    b.same("gsub_function", (str_("abc"), str_("%w"), 5, None::<i64>));
    b.same("at", ("gsub", str_("abc"), str_("%w"), true));
}

#[test]
fn arguments_are_converted_and_checked_as_lua_does() {
    let b = Both::new();
    let s = |text: &str| Value::String(b.lua.create_string(text).unwrap());
    for (call, args) in [
        ("at", vec![s("find"), Value::Integer(12345), s("3")]),
        ("at", vec![s("find"), s("a1.5b"), Value::Number(1.5)]),
        ("at", vec![s("find"), s("abc"), s("b"), s("2")]),
        ("at", vec![s("find"), s("abc"), s("b"), s("x")]),
        ("at", vec![s("find"), s("abc"), s("b"), Value::Number(1.5)]),
        ("at", vec![s("find"), s("abc"), s("b"), Value::Number(2.0)]),
        (
            "at",
            vec![s("find"), s("abc"), s("b"), Value::Boolean(true)],
        ),
        ("at", vec![s("find"), s("abc"), Value::Nil]),
        ("at", vec![s("find"), Value::Boolean(false), s("b")]),
        (
            "at",
            vec![s("match"), s("abc"), s("(b)"), Value::Integer(i64::MIN)],
        ),
        (
            "at",
            vec![s("match"), s("abc"), s("(b)"), Value::Integer(i64::MAX)],
        ),
        ("at", vec![s("gsub"), Value::Integer(123), s("x"), s("y")]),
        ("at", vec![s("gsub"), Value::Integer(123), s("2"), s("y")]),
        ("at", vec![s("gsub"), s("abc"), s("b"), Value::Integer(7)]),
        ("at", vec![s("gsub"), s("abc"), s("b"), Value::Number(0.5)]),
        (
            "at",
            vec![s("gsub"), s("abc"), s("b"), s("x"), Value::Number(0.5)],
        ),
        (
            "at",
            vec![s("gsub"), s("abc"), s("b"), Value::Nil, Value::Number(0.5)],
        ),
    ] {
        let (c, w) = b.run(call, mlua::MultiValue::from_vec(args.clone()));
        assert_eq!(w, c, "{args:?}");
    }
    // Lua names a function by how it was called (here `lib[name]`, which it cannot name).
    let (c, w) = b.run("at", mlua::MultiValue::from_vec(vec![s("find")]));
    assert_eq!(w, c);
    assert!(
        c.contains("bad argument #1 to '?' (string expected, got no value)"),
        "{c}"
    );
    for code in [
        "return pcall(function() local x = lib.find() end)",
        "return pcall(function() local x = lib.gsub('a', 'a', true) end)",
        "return pcall(function() local t = { find = lib.find }; local x = t:find() end)",
        "return pcall(function() local x = ('x'):rep(2):find({}) end)",
    ] {
        let f = b.lua.load(code).set_name("=call").into_function().unwrap();
        let run = |lib: &Table| -> String {
            let env = b.lua.create_table().unwrap();
            env.set("lib", lib.clone()).unwrap();
            env.set("pcall", b.lua.globals().get::<Function>("pcall").unwrap())
                .unwrap();
            f.set_environment(env).unwrap();
            let (_, e): (bool, String) = f.call(()).unwrap();
            e
        };
        assert_eq!(run(&b.w), run(&b.c), "{code}");
    }
}

#[test]
fn a_match_that_runs_past_the_deadline_stops_with_the_clock_s_message() {
    let lua = Lua::new();
    let soon = clock(&lua, Some(Instant::now() + Duration::from_millis(50)));
    let w = install(&lua, &soon).unwrap();
    lua.globals().set("w", w).unwrap();
    for call in [
        "w.match(('a'):rep(40), ('a?'):rep(40) .. ('a'):rep(40))",
        "w.find(('a'):rep(40), '^' .. ('a?'):rep(40) .. ('a'):rep(40))",
        "w.gsub(('a'):rep(40), ('[%w]?'):rep(40) .. ('a'):rep(40), 'x')",
        "w.gsub(('a'):rep(40), ('a?'):rep(40) .. ('a'):rep(40), function() end)",
        "w.gmatch(('a'):rep(40), ('a?'):rep(40) .. ('a'):rep(40))()",
        "w.match(('a'):rep(30000), '(.-)b(.-)c')",
    ] {
        let start = Instant::now();
        let e = lua.load(call).exec().unwrap_err().to_string();
        assert!(e.contains("out of time in"), "{call}: {e}");
        assert!(start.elapsed() < HANG, "{call}");
    }
}

#[test]
fn a_gsub_result_counts_against_the_memory_limit() {
    let lua = Lua::new();
    let w = install(&lua, &clock(&lua, None)).unwrap();
    lua.globals().set("w", w).unwrap();
    lua.set_memory_limit(lua.used_memory() + (4 << 20)).unwrap();
    let e = lua
        .load("return w.gsub(('a'):rep(1000), 'a', ('b'):rep(10000))")
        .exec()
        .unwrap_err()
        .to_string();
    assert!(e.contains("not enough memory"), "{e}");
    let ok: String = lua
        .load("return (w.gsub(('a'):rep(1000), 'a', 'bb'))")
        .eval()
        .unwrap();
    assert_eq!(ok.len(), 2000);
}

// ---- random cases from a grammar of patterns ----

fn pick(items: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(items).prop_map(String::from).boxed()
}

/// One character class item: a character, `.`, `%x`, or a set.
fn single() -> BoxedStrategy<String> {
    let set_item = pick(&[
        "a", "b", "c", "a-c", "b-a", "%a", "%d", "%s", "%]", "]", "-", "(", "%%", ".", "1-9", "%W",
    ]);
    let set = (any::<bool>(), prop::collection::vec(set_item, 1..4))
        .prop_map(|(neg, items)| format!("[{}{}]", if neg { "^" } else { "" }, items.concat()));
    prop_oneof![
        4 => pick(&["a", "b", "c", "1", " ", "(", "$", "^"][..])
            .prop_map(|c| if c == "(" { "%(".to_string() } else { c }),
        2 => Just(".".to_string()),
        3 => pick(&[
            "%a", "%c", "%d", "%g", "%l", "%p", "%s", "%u", "%w", "%x", "%A", "%D", "%S", "%W",
            "%.", "%%", "%(", "%)", "%-", "%]", "%z",
        ]),
        2 => set,
    ]
    .boxed()
}

fn item(depth: u32) -> BoxedStrategy<String> {
    let quantified = (single(), pick(&["", "", "", "*", "+", "-", "?"]))
        .prop_map(|(a, q)| a + &q)
        .boxed();
    let special = pick(&[
        "()", "%1", "%2", "%b()", "%bab", "%f[%w]", "%f[^a]", "%f[a-b]", "%f[%s]",
    ]);
    if depth == 0 {
        return prop_oneof![6 => quantified, 1 => special].boxed();
    }
    let capture =
        prop::collection::vec(item(depth - 1), 0..3).prop_map(|v| format!("({})", v.concat()));
    prop_oneof![6 => quantified, 1 => special, 2 => capture].boxed()
}

/// A pattern: mostly well formed, sometimes with a malformed piece somewhere.
fn pattern() -> impl Strategy<Value = String> {
    let broken = prop_oneof![
        8 => Just(String::new()),
        1 => pick(&["%", "[a", "(", ")", "%9", "%f", "%fa", "%b", "%bx", "[^", "%0"]),
    ];
    (
        prop::bool::weighted(0.25),
        prop::collection::vec(item(2), 0..6),
        prop::bool::weighted(0.25),
        broken,
        any::<prop::sample::Index>(),
    )
        .prop_map(|(anchor, items, dollar, broken, at)| {
            let mut items = items;
            if !broken.is_empty() {
                let i = at.index(items.len() + 1);
                items.insert(i, broken);
            }
            format!(
                "{}{}{}",
                if anchor { "^" } else { "" },
                items.concat(),
                if dollar { "$" } else { "" }
            )
        })
}

fn subject() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(
            &[
                "a", "b", "c", "a", "b", "1", " ", "(", ")", ".", "%", "-", "]", "$", "^",
                "\u{e9}", "\0", "A",
            ][..],
        ),
        0..14,
    )
    .prop_map(|v| v.concat())
}

fn replacement() -> impl Strategy<Value = String> {
    prop::collection::vec(
        pick(&["x", "-", "%0", "%1", "%2", "%3", "%%", "%a", "%"]),
        0..4,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn find_and_match_agree_with_lua(
        s in subject(),
        p in pattern(),
        init in prop::option::of(-16i64..18),
        plain in prop::option::of(any::<bool>()),
    ) {
        let b = both();
        let (c, w) = b.run("find", (s.clone(), p.clone(), init, plain));
        prop_assert_eq!(w, c, "find {:?} {:?} {:?} {:?}", s, p, init, plain);
        let (c, w) = b.run("match", (s.clone(), p.clone(), init));
        prop_assert_eq!(w, c, "match {:?} {:?} {:?}", s, p, init);
    }

    #[test]
    fn gmatch_agrees_with_lua(s in subject(), p in pattern(), init in prop::option::of(-16i64..18)) {
        let b = both();
        let (c, w) = b.run("gmatch", (s.clone(), p.clone(), init));
        prop_assert_eq!(w, c, "gmatch {:?} {:?} {:?}", s, p, init);
    }

    #[test]
    fn gsub_agrees_with_lua(
        s in subject(),
        p in pattern(),
        r in replacement(),
        n in prop::option::of(-1i64..4),
        which in 1usize..=6,
    ) {
        let b = both();
        let (c, w) = b.run("gsub", (s.clone(), p.clone(), r.clone(), n));
        prop_assert_eq!(w, c, "gsub {:?} {:?} {:?} {:?}", s, p, r, n);
        let (c, w) = b.run("gsub_function", (s.clone(), p.clone(), which, n));
        prop_assert_eq!(w, c, "gsub function {} {:?} {:?} {:?}", which, s, p, n);
        let (c, w) = b.run("gsub_table", (s.clone(), p.clone(), which % 3 + 1, n));
        prop_assert_eq!(w, c, "gsub table {} {:?} {:?} {:?}", which % 3 + 1, s, p, n);
    }
}

thread_local! {
    static BOTH: std::rc::Rc<Both> = std::rc::Rc::new(Both::new());
}

/// One pair of states per test thread (a state costs more to make than a case to run).
fn both() -> std::rc::Rc<Both> {
    BOTH.with(|b| b.clone())
}
