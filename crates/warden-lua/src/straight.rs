//! Which scripts run without the instruction hook: the straight-line ones.
//!
//! The sandbox's hook (see `sandbox.rs`) checks the time limit, the stop flag and the depth of
//! calls every `CHECK_EVERY` Lua instructions. Any count hook makes Lua trace every instruction
//! it runs (about 40 machine instructions each), whether the hook then fires or not. A chunk
//! with no loop that defines no function runs each of its instructions at most once, and a
//! short one ([`MAX_STRAIGHT`] bytes) runs fewer than the hook counts between two checks: a
//! hooked run of it would not be checked either. Its run starts with its coroutine's hook
//! removed, and the hook is put back when the run ends.
//!
//! That holds only while the chunk reaches no Lua code that loops or loads more code: a Lua
//! function it calls would run unhooked too. So a script is straight-line only when every word
//! of its source (read naively: in strings and comments too, whole runs of letters, digits and
//! `_`) is neither a word that makes a loop or a function (`while`, `for`, `repeat`, `goto`,
//! `function`), nor `_ENV` or `_G` (which reach any global by a computed name), nor `gsub`
//! (whose replacement function or table runs Lua at every match: many calls for one
//! instruction of the chunk), nor a global of the sandbox outside [`REACHABLE`]; and it has no
//! `[` (an index by a computed name could reach `gsub` without naming it). A global of the sandbox is a key of its `base` table,
//! so a global the prelude adds later keeps scripts that name it hooked until it is listed.
//! A word read wrongly only keeps a script hooked; every doubt does.
//!
//! What a straight-line script can still reach, and why none of it loops over what the script
//! controls: the functions of [`REACHABLE`] (C functions, and the prelude's Lua functions that
//! run no loop and call only those); the libraries `string` (but `gsub`), `math`, `utf8` and
//! `os` (C functions; the host's pattern matcher, which counts its own steps against the time
//! limit; `string.rep`'s wrapper and `os`'s two Lua functions, which loop nowhere); the roots' data and their views, whose
//! metamethods are C functions or the prelude's read-only views' Lua functions, which loop
//! nowhere (walking a view needs `pairs` or `next`); and string methods (`string`'s). It
//! cannot set a metatable (`setmetatable` is not reachable), load code (`load`), make a
//! coroutine (`coroutine`) or reach `table.move`, whose pieces are a Lua loop. C functions run
//! outside any hook, for every script: they are bounded by the memory limit, as before.

/// Words that make a chunk run an instruction more than once, or define code it may call in
/// a loop; the names that reach any global by a computed name; and `gsub`, which calls Lua
/// once a match.
const LOOPING: [&str; 8] = [
    "while", "for", "repeat", "goto", "function", "_ENV", "_G", "gsub",
];

/// The sandbox's globals a straight-line script may name (see the module's comment). Each is
/// a C function, a library of C functions (and the pattern matcher, `os`'s clock and time), a
/// root, or one of the prelude's Lua functions that runs no loop and calls only C functions
/// and the roots. A global added here must be checked against `prelude.lua` the same way.
const REACHABLE: &[&str] = &[
    // C functions.
    "assert",
    "error",
    "select",
    "tonumber",
    "tostring",
    "type",
    "rawequal",
    "rawlen",
    "_VERSION",
    // Libraries: C functions, the host's matcher, `os.time` and `os.clock`.
    "string",
    "math",
    "utf8",
    "os",
    // The roots (`tool` and `result` through `base`'s `__index`).
    "context",
    "event",
    "tool",
    "result",
    "settings",
    // The prelude's decisions and helpers: no loop, no call but C functions and the roots.
    "decide",
    "allow",
    "ask",
    "deny",
    "stop",
    "failure_count",
    "tool_calls",
    "tool_completed",
    "tool_failed",
    "context_above_threshold",
    "iterations_above_threshold",
    "query_mentions",
];

/// The longest straight-line source. A chunk this short runs fewer Lua instructions than the
/// hook counts between two checks (`CHECK_EVERY`), so a hooked run of it would not be checked
/// either: what its statements may cost in C (a call on a string as large as the memory limit
/// allows) is what it was with the hook.
const MAX_STRAIGHT: usize = 512;

/// Whether `source` is straight-line (see the module's comment), `is_global` saying whether a
/// word names a global of the sandbox. Besides the words, it keeps the hook for a source
/// longer than [`MAX_STRAIGHT`], one that names `gsub` (whose replacement function or table
/// runs Lua at every match: many calls for one instruction of the chunk), and one with a `[`
/// (an index by a computed name, which could reach `gsub` without naming it).
pub(crate) fn straight_line(source: &[u8], is_global: impl Fn(&str) -> bool) -> bool {
    if source.len() > MAX_STRAIGHT || source.contains(&b'[') {
        return false;
    }
    source
        .split(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .filter(|w| !w.is_empty())
        .all(|w| {
            // Only ASCII bytes are left in a word.
            let Ok(w) = std::str::from_utf8(w) else {
                return false;
            };
            !LOOPING.contains(&w) && (REACHABLE.contains(&w) || !is_global(w))
        })
}

/// Whether `source` assigns nothing: every `=` in it (read naively, as for [`straight_line`])
/// is part of `==`, `~=`, `<=` or `>=`. No assignment, global or local, field or table
/// constructor, is written without an `=` of its own (`local x <const>= v` aside, which is a
/// local's). A straight-line script that assigns nothing keeps nothing after its run: it sets
/// no global, fills no table, makes no closure, and what it may call stores nothing it is
/// given (see the module's comment), so the record views it was handed are out of its reach
/// when it ends (see `Runtime::release_views`).
pub(crate) fn assigns_nothing(source: &[u8]) -> bool {
    source.iter().enumerate().all(|(i, &b)| {
        b != b'='
            || source.get(i + 1) == Some(&b'=')
            || i.checked_sub(1)
                .and_then(|j| source.get(j))
                .is_some_and(|p| matches!(p, b'=' | b'~' | b'<' | b'>'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globals(w: &str) -> bool {
        matches!(
            w,
            "load" | "pairs" | "next" | "table" | "coroutine" | "print" | "pcall" | "context"
        )
    }

    #[test]
    fn a_condition_without_loops_or_functions_is_straight_line() {
        for src in [
            "return context.turn.number >= 0 and context.mode ~= '' and context.turn.token_usage > 0.9",
            "local n = context.turn.number; if n > 3 then return deny('too many') end return false",
            "return ('x'):rep(3) == string.rep('x', 3) and math.max(1, 2) == 2",
            "x = (x or 0) + 1; return x > 2",
        ] {
            assert!(straight_line(src.as_bytes(), globals), "{src}");
        }
    }

    #[test]
    fn only_comparisons_are_not_assignments() {
        for src in [
            "return context.turn.number >= 0 and context.mode ~= '' and context.turn.token_usage > 0.9",
            "return 1 == 1 and 2 <= 3",
            // A local's, which ends with the run.
            "local x <const>= context.turn; return x.number > 0",
        ] {
            assert!(assigns_nothing(src.as_bytes()), "{src}");
        }
        for src in [
            "x = context.turn",
            "local t = { context.turn }; return t",
            "return { a = 1 }",
            "x=1",
            "=",
        ] {
            assert!(!assigns_nothing(src.as_bytes()), "{src}");
        }
    }

    #[test]
    fn loops_functions_and_reaching_names_keep_the_hook() {
        for src in [
            "while true do end",
            "for i = 1, 10 do end",
            "repeat until false",
            "::top:: goto top",
            "local f = function() end",
            "local function f() return f() end return f()",
            "return load('while true do end')()",
            "return pairs(context)",
            "return next(context)",
            "table.move({}, 1, 1e12, 2)",
            "return _G['lo' .. 'ad']",
            "return _ENV['lo' .. 'ad']",
            "print(1)",
            "return pcall(error)",
            "return coroutine.wrap(error)",
            // Even in a string or a comment: the scan does not parse.
            "return 'for'",
            "return 1 -- while",
            // A word glued to a number does not hide it.
            "return 1;while true do end",
            // `gsub` runs Lua at every match, by its name or by a computed one.
            "return (('x'):rep(1e7)):gsub('', context.x)",
            "return string.gsub('xx', '.', context.x)",
            "return ('x')['g' .. 'sub']('x', '.', context.x)",
            "return context[1]",
        ] {
            assert!(!straight_line(src.as_bytes(), globals), "{src}");
        }
        // Longer than a hooked run would go unchecked.
        let long = format!(
            "return {}",
            "context.turn.number > 1 and ".repeat(20) + "true"
        );
        assert!(long.len() > MAX_STRAIGHT);
        assert!(!straight_line(long.as_bytes(), globals));
        let short = format!(
            "return {}",
            "context.turn.number > 1 and ".repeat(10) + "true"
        );
        assert!(straight_line(short.as_bytes(), globals), "{short}");
    }
}
