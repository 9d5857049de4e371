//! What survives, and what is said, when the database is not there for a tick: a write lock
//! held by another process makes a tick fail visibly after a bounded wait (its state writes
//! lost, its decisions standing), and `warden replay` exits non-zero.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const COUNTER: &str = r#"
[rule]
id = "counter"
trigger = "on_turn_start"

[condition]
expression = "true"

[action]
type = "set_state"
key = "n"
value = "{{ context.state.get('n', 0) + 1 }}"
"#;

#[test]
fn a_held_lock_fails_the_tick_visibly_and_replay_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/counter.toml"), COUNTER).unwrap();
    std::fs::write(
        dir.path().join("trace.jsonl"),
        "{\"hook\":\"on_turn_start\"}\n",
    )
    .unwrap();
    let db = dir.path().join("w.db");
    let holder = warden::Store::open(&db).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["--rules"])
        .arg(dir.path().join("rules"))
        .arg("--db")
        .arg(&db)
        .arg("replay")
        .arg(dir.path().join("trace.jsonl"))
        .output()
        .unwrap();
    let waited = started.elapsed();
    assert_eq!(out.status.code(), Some(1), "a lost write is not a success");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l["error"]
            .as_str()
            .is_some_and(|e| e.contains("locked by another process"))),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("could not be saved"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One bounded wait per tick (2 s by default), not one per write.
    assert!(waited < Duration::from_secs(8), "{waited:?}");
    drop(held);
    assert_eq!(
        holder
            .state_get(&warden::StateScope::new("default", "default", "local"), "n")
            .unwrap(),
        None
    );
}
