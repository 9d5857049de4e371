//! Hostile commands stay within bounds: whatever the input up to 100 KB, the analysis never
//! panics, never holds more than 64 MB at once, and calls opaque what it does not read. Memory
//! is counted by a global allocator of this test binary (the peak of bytes held), so the bound
//! does not depend on the machine. Time is measured by `warden bench`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use warden_shell::{Env, OpaqueKind, analyze, parses};

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MB: usize = 1024 * 1024;

fn hostile() -> Vec<(&'static str, String)> {
    let nested = |open: &str, close: &str, n: usize| open.repeat(n) + "ls" + &close.repeat(n);
    vec![
        (
            "10,000 nested substitutions",
            format!("echo {}", nested("$(", ")", 10_000)),
        ),
        (
            "10,000 quoted nested substitutions",
            format!("echo {}", nested("\"$(", ")\"", 10_000)),
        ),
        ("10,000 nested groups", nested("{ ", "; }", 10_000)),
        ("10,000 nested subshells", nested("(", ")", 10_000)),
        ("5,000 nested ifs", nested("if true; then ", "; fi", 5_000)),
        ("100 KB of one word", "x".repeat(100_000)),
        (
            "an unterminated quote",
            format!("echo '{}", "a".repeat(100_000)),
        ),
        (
            "an unterminated substitution",
            format!("echo $({}", "b ".repeat(50_000)),
        ),
        ("3,000 commands", "rm -rf ./a; ".repeat(3_000)),
        // Each level quotes the one inside: 10 levels are 88 KB.
        ("10 nested sh -c", {
            let mut c = "rm -rf /".to_string();
            for _ in 0..10 {
                c = format!("sh -c {}", shell_quote(&c));
            }
            c
        }),
        ("1,000 nested evals", "eval ".repeat(1_000) + "rm -rf /"),
        (
            "a 30 KB command of pipes",
            "echo a | ".repeat(3_000) + "cat",
        ),
        (
            "a here-document of 90 KB",
            format!("cat > f <<'EOF'\n{}\nEOF\n", "{ $( `".repeat(15_000)),
        ),
    ]
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn hostile_commands_stay_within_bounds_and_are_never_harmless_when_unread() {
    let env = Env {
        follow_links: false,
        ..Env::for_project("/home/ada/app").with_home("/home/ada")
    };
    for (what, command) in hostile() {
        assert!(
            command.len() <= 100_000 + 64,
            "{what}: {} bytes",
            command.len()
        );
        let before = HELD.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let a = analyze(&command, &env);
        let peak = PEAK.load(Ordering::Relaxed) - before;
        assert!(peak < 64 * MB, "{what}: {} MB at its peak", peak / MB);
        if !parses(&command) {
            assert!(
                a.opaque.iter().any(|o| o.kind == OpaqueKind::Unparsed),
                "{what}: not read, and not said to be opaque"
            );
            assert!(!a.concern().is_empty() || a.destroys(), "{what}");
        }
        drop(a);
    }
}
