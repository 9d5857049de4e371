//! Warden supervising Claude Code, end to end: the built binary is run exactly as Claude Code
//! runs a command hook (the payload on stdin; the answer read from stdout, and the exit code),
//! one process per hook.
//!
//! - A whole scripted session of 30 hooks in 30 processes (`tests/claude-code/session.jsonl`,
//!   answers in `session.expected.jsonl`): decisions, injected context, the token-budget
//!   warning read from the transcript, a Lua workflow that waits two turns across processes,
//!   the agent sent back to work while its tests fail and let go after three times.
//! - Every payload kind of `tests/claude-code/payloads/` is answered with exit 0.
//! - Eight processes ticking one session at once lose no update.
//! - A hook process killed (`kill -9`) in the middle of its tick loses nothing.
//!
//! Run with `WARDEN_BLESS=1` to write the expected answers from the current behavior, then read
//! every changed line before committing it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "support/claude_code.rs"]
mod support;

use support::{Project, data};

/// How long a test waits for what comes within seconds (a hook process that opens the
/// database, or reaches its tick): a hang detector, not a speed check; a wait ends as soon as
/// what it waits for comes.
const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until the process `pid` has the file `path` open. Linux says which files a process has
/// open (in /proc); elsewhere this returns at once.
fn wait_until_open(pid: u32, path: &Path) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let path = path.canonicalize().unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == path))
    {
        assert!(
            Instant::now() < deadline,
            "process {pid} never opened {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Settings under which a process waits a minute for another's lock on the database (a hang
/// detector): for the tests that prove processes wait for each other, not how long the
/// default timeout lets them wait on a loaded machine.
const LONG_LOCK_TIMEOUT: &str = "[database]\nlock_timeout = 60\n";

/// A store on `project`'s database whose ticks do not wait for its lock at all: its tick begins
/// at once, or fails with `Busy` at once while another process holds the lock.
fn lock_probe(project: &Project) -> warden::Store {
    let mut probe = warden::Store::open(project.db()).unwrap();
    probe.set_lock_timeout(Duration::ZERO).unwrap();
    probe
}

/// Whether another process holds the database's write lock (the probe's tick, begun, is
/// dropped at once: it holds the lock no longer than that).
fn lock_is_held(probe: &warden::Store) -> bool {
    match probe.tick().begin() {
        Ok(()) => false,
        Err(e) => {
            assert!(matches!(e, warden::store::StoreError::Busy { .. }), "{e}");
            true
        }
    }
}

#[test]
fn a_whole_session_in_thirty_processes() {
    let project = Project::new("e2e-session");
    let script = std::fs::read_to_string(data().join("session.jsonl")).unwrap();
    let mut answers = Vec::new();
    for (i, line) in script.lines().enumerate() {
        let step: Value = serde_json::from_str(line).unwrap();
        if let Some(call) = step.get("call") {
            project.model_call(call[0].as_str().unwrap(), call[1].as_u64().unwrap());
        }
        let payload = project.payload(step["payload"].as_str().unwrap(), step.get("set"));
        let answer = project.normalize(&project.hook(&payload));
        answers
            .push(json!({ "step": i + 1, "event": payload["hook_event_name"], "answer": answer }));
    }
    assert_eq!(answers.len(), 30);
    let expected_file = data().join("session.expected.jsonl");
    let actual: String = answers.iter().map(|a| format!("{a}\n")).collect();
    if std::env::var_os("WARDEN_BLESS").is_some() {
        std::fs::write(&expected_file, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_file).unwrap();
    for (want, got) in expected.lines().zip(actual.lines()) {
        let (w, g): (Value, Value) = (
            serde_json::from_str(want).unwrap(),
            serde_json::from_str(got).unwrap(),
        );
        assert_eq!(g, w, "the answer of step {}", w["step"]);
    }
    assert_eq!(expected.lines().count(), actual.lines().count());

    // The session was carried from process to process: every hook Warden acts on ticked it.
    let shown: Value =
        serde_json::from_str(&project.warden(&["sessions", "show", "e2e-session"])).unwrap();
    assert_eq!(shown["session"]["ended"], true);
    // Ten model calls after prompts and the two prompts' own turns, less the first call of each
    // prompt (its turn is the prompt's).
    assert_eq!(shown["saved"]["facts"]["history"]["counts"]["turns"], 11);
    // The subagent's stop is in the execution log, not a turn of the session.
    let log: Value =
        serde_json::from_str(&project.warden(&["log", "--json", "--rule", "claude-code/subagent"]))
            .unwrap();
    assert_eq!(log.as_array().map(Vec::len), Some(1), "{log}");
}

#[test]
fn a_model_call_past_its_window_is_reported_not_refused() {
    // 341,200 tokens against a 200,000-token window: 171% of the budget, a fact to warn about.
    let project = Project::new("over-budget");
    for (call, payload) in [
        (None, "SessionStart"),
        (None, "UserPromptSubmit"),
        (Some(("msg_02", 30_000)), "PreToolUse"),
        (Some(("msg_03", 341_200)), "PreToolUse"),
    ] {
        if let Some((id, tokens)) = call {
            project.model_call(id, tokens);
        }
        let answer = project.hook(&project.payload(payload, None));
        if call.is_some_and(|(_, tokens)| tokens > 200_000) {
            let context = answer["hookSpecificOutput"]["additionalContext"].as_str();
            assert!(
                context.is_some_and(|c| c.contains("- HIGH warning: Token budget at 170%.")),
                "{answer}"
            );
            assert_eq!(answer.get("systemMessage"), None, "{answer}");
        }
    }
}

#[test]
fn every_payload_kind_is_answered_with_exit_zero() {
    let project = Project::new("kinds");
    let mut names: Vec<String> = std::fs::read_dir(data().join("payloads"))
        .unwrap()
        .map(|e| {
            e.unwrap()
                .path()
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .to_string()
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10);
    for name in &names {
        let answer = project.hook(&project.payload(name, None));
        if ["Notification", "PreCompact", "SessionStart", "SubagentStop"].contains(&name.as_str()) {
            assert_eq!(answer, Value::Null, "{name}");
        }
    }
    // What is not Claude Code's payload is answered too: the agent goes on, told why.
    for bad in [
        "not json",
        "[1,2]",
        r#"{"hook_event_name":"PreToolUse","session_id":"s"}"#,
    ] {
        let mut child = project.hook_command().spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(bad.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["systemMessage"]
                .as_str()
                .unwrap()
                .contains("Warden could not supervise this event"),
            "{bad}: {v}"
        );
    }
}

/// Eight hook processes at once, three times, on one session: every tick saved once, none
/// over another, and the counter in plugin state lost no update. They wait for each other's
/// lock up to a minute (a hang detector): what is proved is that they wait, not how long a
/// loaded machine makes them.
#[test]
fn eight_processes_on_one_session_lose_no_update() {
    let project = Project::new("parallel").with_settings(LONG_LOCK_TIMEOUT);
    let payload = project.payload(
        "PostToolUse",
        Some(&json!({"tool_name": "Count", "tool_input": {}, "tool_response": {"ok": true}})),
    );
    for _ in 0..3 {
        let children: Vec<_> = (0..8)
            .map(|_| project.spawn_hook(payload.to_string().as_bytes()))
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success());
            assert!(
                out.stdout.is_empty(),
                "stdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let shown: Value =
        serde_json::from_str(&project.warden(&["sessions", "show", "parallel"])).unwrap();
    assert_eq!(
        shown["session"]["events"], 24,
        "every tick was saved, none over another"
    );
    let store = warden::Store::open(project.db()).unwrap();
    let count = store
        .state_get(
            &warden::StateScope::new("default", "default", "local"),
            "count",
        )
        .unwrap();
    assert_eq!(count, Some(json!(24)), "the counter lost no update");
}

/// Another process holding the database's write lock for three seconds (longer than a tick of
/// a long-running process waits, 2 s): a hook process waits it out rather than letting the
/// event through unsupervised, and its tick is saved. A hook waits 10 s by default, as its
/// answer says when the lock is held past that; the one that waits the lock out is given a
/// minute, so that the lock is released before it gives up however slow the machine.
#[test]
fn a_hook_waits_out_a_lock_held_longer_than_a_tick_waits() {
    let payload = |project: &Project| {
        project.payload(
            "PostToolUse",
            Some(&json!({"tool_name": "Count", "tool_input": {}, "tool_response": {"ok": true}})),
        )
    };
    // By default, a hook waits 10 s for the lock: held throughout, the hook says so.
    let project = Project::new("held-default");
    project.hook(&payload(&project));
    let holder = warden::Store::open(project.db()).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let answer = project.hook(&payload(&project));
    drop(held);
    let message = answer["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("locked by another process (waited 10000 ms)"),
        "{answer}"
    );
    // Waited out.
    let project = Project::new("held").with_settings(LONG_LOCK_TIMEOUT);
    let payload = payload(&project);
    project.hook(&payload);
    let holder = warden::Store::open(project.db()).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let child = project.spawn_hook(payload.to_string().as_bytes());
    // The three seconds count from when the hook has opened the database (its tick follows
    // the loading of its rules), not from its start, which a loaded machine makes slow.
    wait_until_open(child.id(), Path::new(project.db()));
    std::thread::sleep(Duration::from_secs(3));
    drop(held);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty(),
        "the hook answered: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let count = holder
        .state_get(
            &warden::StateScope::new("default", "default", "local"),
            "count",
        )
        .unwrap();
    assert_eq!(count, Some(json!(2)), "the second hook's tick was saved");
}

/// A session whose save is damaged (its history's entries gone, from its row and their table)
/// is still shown, as stored, with why it cannot be read: that is when its owner needs to see
/// it.
#[test]
fn a_damaged_session_is_still_shown_as_stored() {
    let project = Project::new("damaged");
    project.hook(&project.payload("UserPromptSubmit", None));
    let conn = rusqlite::Connection::open(project.db()).unwrap();
    let rows = conn
        .execute("DELETE FROM session_entry WHERE session_id = 'damaged'", [])
        .unwrap();
    let newest = conn
        .execute(
            "UPDATE session SET recent = NULL WHERE id = 'damaged' AND recent IS NOT NULL",
            [],
        )
        .unwrap();
    assert!(rows + newest > 0, "the prompt was in the history's entries");
    drop(conn);
    let shown: Value =
        serde_json::from_str(&project.warden(&["sessions", "show", "damaged"])).unwrap();
    let reason = shown["unreadable"].as_str().unwrap();
    assert!(reason.contains("history is incomplete"), "{reason}");
    assert_eq!(shown["saved"]["format"], 3);
    assert_eq!(shown["entries"], json!([]));
}

/// A hook process killed (`kill -9`) while its tick holds the database loses nothing: the lock
/// goes with the process, the next hook goes on from the session as it was, and nothing of the
/// killed tick is stored.
#[test]
fn a_hook_killed_mid_tick_loses_nothing() {
    // The slow guard runs until its process is killed: its time limit is ten minutes (a hang
    // detector), which no tick of this test reaches.
    let project = Project::new("crash").with_settings("[scripts]\ntimeout_seconds = 600\n");
    let prompt = project.payload("UserPromptSubmit", None);
    project.hook(&prompt);
    let before: Value =
        serde_json::from_str(&project.warden(&["sessions", "show", "crash"])).unwrap();
    // A guard that never ends: the process is killed while its tick holds the database (the
    // guard reads plugin state first, which takes the lock, and holds it until the kill),
    // however long it took to get there.
    let slow = project.payload(
        "PreToolUse",
        Some(&json!({"tool_name": "Slow", "tool_input": {}})),
    );
    let probe = lock_probe(&project);
    let mut child = project.spawn_hook(slow.to_string().as_bytes());
    let deadline = Instant::now() + PATIENCE;
    while !lock_is_held(&probe) {
        assert!(Instant::now() < deadline, "the hook never began its tick");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The lock was released with the process: a tick that does not wait at all takes it.
    assert!(!lock_is_held(&probe), "the lock outlived the process");
    // The next hook goes on, from the session as it was before the killed tick.
    let answer = project.hook(&project.payload("PostToolUseFailure", None));
    assert_eq!(answer, Value::Null);
    let after: Value =
        serde_json::from_str(&project.warden(&["sessions", "show", "crash"])).unwrap();
    assert_eq!(
        after["session"]["version"].as_i64(),
        before["session"]["version"].as_i64().map(|v| v + 1),
        "the killed tick saved nothing; the next one saved once"
    );
    assert_eq!(
        after["saved"]["facts"]["history"]["counts"]["tool_calls"], 1,
        "the killed call is not in the session"
    );
    let store = warden::Store::open(project.db()).unwrap();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    assert_eq!(
        store
            .state_get(
                &warden::StateScope::new("default", "default", "local"),
                "slow_started"
            )
            .unwrap(),
        None,
        "the killed tick's state write is not there"
    );
}

/// The book's chapter, followed as written: `warden init claude-code`, the first rule, its
/// check, and the hook answering the payload the chapter pipes in, print what the chapter
/// quotes.
#[test]
fn the_chapter_runs_as_written() {
    let chapter = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/claude-code.md"),
    )
    .unwrap();
    let fence = |start: &str| -> String {
        let at = chapter
            .find(start)
            .unwrap_or_else(|| panic!("no block starting {start:?}"));
        let body = &chapter[at..];
        body[..body.find("\n```").unwrap()].to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("my-project");
    std::fs::create_dir(&project).unwrap();
    let warden = |args: &[&str], stdin: Option<&str>| -> String {
        let mut c = Command::new(env!("CARGO_BIN_EXE_warden"));
        c.args(args)
            .current_dir(&project)
            .env_remove("WARDEN_CONFIG")
            .env_remove("CLAUDE_PROJECT_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // `init` prints what the chapter shows (the path to `warden` in the hook aside).
    let quoted = fence("$ cd my-project\n$ warden init claude-code\n");
    let printed = warden(&["init", "claude-code"], None);
    let want: Vec<&str> = quoted.lines().skip(2).collect();
    assert_eq!(printed.trim_end().lines().collect::<Vec<_>>(), want);
    // The guard is on out of the box: `rm -rf /` is refused before any rule of one's own.
    let hook = fence("$ echo '{\"session_id\": \"try-0\"");
    let payload = hook.split('\'').nth(1).unwrap();
    let printed = warden(
        &["hook", "claude-code", "--config", ".warden/warden.toml"],
        Some(payload),
    );
    assert_eq!(printed.trim_end(), hook.lines().last().unwrap());
    // The first rule, saved where the chapter says.
    let rule = fence("[rule]\nid = \"no-env-files\"");
    std::fs::write(project.join(".warden/rules/no-env-files.toml"), rule).unwrap();
    let check = fence("$ warden --config .warden/warden.toml check\n");
    let printed = warden(&["--config", ".warden/warden.toml", "check"], None);
    assert_eq!(printed.trim_end(), check.lines().nth(1).unwrap());
    // The payload piped into the hook, and its answer.
    let hook = fence("$ echo '{\"session_id\": \"try-1\"");
    let payload = hook.split('\'').nth(1).unwrap();
    let answer = hook.lines().last().unwrap();
    let printed = warden(
        &["hook", "claude-code", "--config", ".warden/warden.toml"],
        Some(payload),
    );
    assert_eq!(printed.trim_end(), answer);
    let disable = fence("$ warden --config .warden/warden.toml rules disable no-env-files\n");
    let printed = warden(
        &[
            "--config",
            ".warden/warden.toml",
            "rules",
            "disable",
            "no-env-files",
        ],
        None,
    );
    assert_eq!(printed.trim_end(), disable.lines().nth(1).unwrap());
}

/// Runs `script` with `sh` in a mount namespace of its own, where `dir` is a tmpfs of 256 KiB,
/// as root of a user namespace (`unshare -rm`): a disk that can really be filled, without
/// touching the machine's. `None` where namespaces cannot be made (the test says it skips).
fn on_a_small_disk(dir: &Path, script: &str) -> Option<std::process::Output> {
    let probe = Command::new("unshare").args(["-rm", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "skipped: a full disk needs `unshare -rm` (a user and mount namespace), which this machine refuses; CI runs it"
        );
        return None;
    }
    let full = format!(
        "mount -t tmpfs -o size=256k none '{}' && {script}",
        dir.display()
    );
    Some(
        Command::new("unshare")
            .args(["-rm", "sh", "-c", &full, "sh"])
            .arg(env!("CARGO_BIN_EXE_warden"))
            .output()
            .unwrap(),
    )
}

/// A hook whose database cannot be opened or written (the disk is full) still decides on
/// every rule that needs no stored state (`rm -rf /` is denied by a guard that reads none),
/// says the disk is full, and keeps its failure policy for the rest: open lets a harmless call
/// go on, closed denies it.
#[test]
fn a_full_disk_still_denies_what_a_stateless_rule_denies_and_says_the_disk_is_full() {
    let project = Project::new("full-disk");
    let disk = project.dir.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let write = |name: &str, payload: &Value| {
        let p = project.dir.path().join(name);
        std::fs::write(&p, payload.to_string()).unwrap();
        p
    };
    let rm = write(
        "rm.json",
        &project.payload(
            "PreToolUse",
            Some(&json!({"tool_input": {"command": "rm -rf /"}})),
        ),
    );
    let ls = write(
        "ls.json",
        &project.payload(
            "PreToolUse",
            Some(&json!({"tool_input": {"command": "ls"}})),
        ),
    );
    let config = data().join("warden.toml");
    let hook = |db: &str, input: &Path, out: &str, flags: &str| {
        format!(
            "\"$1\" hook claude-code {flags} --config '{}' --db '{}/{db}' < '{}' > '{}/{out}' 2>/dev/null",
            config.display(),
            disk.display(),
            input.display(),
            project.dir.path().display()
        )
    };
    let fill = format!(
        "dd if=/dev/zero of='{}/fill' bs=1k count=1024 2>/dev/null; true",
        disk.display()
    );
    // A database made while there was room, then the disk filled; and one never made.
    let script = [
        hook("made.db", &ls, "first.json", ""),
        fill,
        hook("made.db", &rm, "made-rm.json", ""),
        hook("never.db", &rm, "never-rm.json", ""),
        hook("never.db", &ls, "open-ls.json", ""),
        hook("never.db", &ls, "closed-ls.json", "--fail-closed"),
    ]
    .join(" && ");
    let Some(out) = on_a_small_disk(&disk, &script) else {
        return;
    };
    assert!(out.status.success(), "{out:?}");
    let read = |name: &str| -> Value {
        let text = std::fs::read_to_string(project.dir.path().join(name)).unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    };
    for name in ["made-rm.json", "never-rm.json"] {
        let a = read(name);
        assert_eq!(
            a["hookSpecificOutput"]["permissionDecision"], "deny",
            "{name}: {a}"
        );
        let why = a["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap();
        assert!(why.contains("outside the project"), "{name}: {why}");
        let message = a["systemMessage"].as_str().unwrap();
        assert!(message.contains("the disk is full"), "{name}: {message}");
    }
    let open = read("open-ls.json");
    assert!(
        open["hookSpecificOutput"]["permissionDecision"].is_null(),
        "{open}"
    );
    assert!(
        open["systemMessage"]
            .as_str()
            .unwrap()
            .contains("disk is full")
    );
    let closed = read("closed-ls.json");
    assert_eq!(
        closed["hookSpecificOutput"]["permissionDecision"], "deny",
        "{closed}"
    );
    assert!(
        closed["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("fail closed"),
        "{closed}"
    );
}

/// A hook that cannot take the database's lock within its timeout still decides on the rules
/// that need no stored state, and says the database is locked.
#[test]
fn a_locked_database_still_denies_and_says_it_is_locked() {
    let project = Project::new("locked");
    let config = project.dir.path().join("warden.toml");
    std::fs::write(
        &config,
        format!(
            "builtin = true\nplugins = [{:?}]\n[database]\nlock_timeout = 1\n",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/plugins")
                .display()
                .to_string()
        ),
    )
    .unwrap();
    let ls = project.payload(
        "PreToolUse",
        Some(&json!({"tool_input": {"command": "ls"}})),
    );
    project.hook(&ls);
    let holder = warden::Store::open(project.db()).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    let rm = project.payload(
        "PreToolUse",
        Some(&json!({"tool_input": {"command": "rm -rf /"}})),
    );
    // The project's hook, with this test's configuration (its one-second lock timeout).
    let mut command = Command::new(env!("CARGO_BIN_EXE_warden"));
    command
        .args(["hook", "claude-code", "--config"])
        .arg(&config)
        .arg("--db")
        .arg(project.db());
    let mut child = command
        .env("CLAUDE_PROJECT_DIR", project.dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(rm.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    drop(held);
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "deny",
        "{answer}"
    );
    let message = answer["systemMessage"].as_str().unwrap();
    assert!(message.contains("locked by another process"), "{message}");
}

/// Claude Code runs the hooks of parallel tool calls together, and the first of them may find
/// no database yet: eight hooks and two `warden replay` processes start at once on a database
/// nobody made, fifty times over. Every process opens it (waiting for the others under the lock
/// timeout, as for any write), every refusal is made, and the counter they share is exact. The
/// lock timeout is a minute (a hang detector): what is proved is that they wait for each
/// other, not how long the default timeout lets them wait on a loaded machine.
#[test]
fn hooks_and_replays_at_once_on_a_fresh_database_all_decide_and_count() {
    let rounds: usize = std::env::var("WARDEN_FRESH_DB_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    for round in 0..rounds {
        let project = Project::new(&format!("fresh-{round}")).with_settings(LONG_LOCK_TIMEOUT);
        let count = project.payload(
            "PostToolUse",
            Some(&json!({"tool_name": "Count", "tool_input": {}, "tool_response": {"ok": true}})),
        );
        let rm = project.payload(
            "PreToolUse",
            Some(&json!({"tool_input": {"command": "rm -rf /"}})),
        );
        let trace = project.dir.path().join("count.jsonl");
        std::fs::write(
            &trace,
            "{\"hook\": \"on_tool_complete\", \"tool\": {\"name\": \"Count\"}, \"result\": {\"ok\": true}}\n",
        )
        .unwrap();
        let hooks: Vec<_> = (0..8)
            .map(|i| {
                let payload = if i % 2 == 0 { &rm } else { &count };
                let mut p = payload.clone();
                p["session_id"] = json!(format!("s{i}"));
                project.spawn_hook(p.to_string().as_bytes())
            })
            .collect();
        let replays: Vec<_> = (0..2)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_warden"))
                    .arg("--config")
                    .arg(project.config())
                    .arg("--db")
                    .arg(project.db())
                    .env_remove("WARDEN_CONFIG")
                    .arg("replay")
                    .arg(&trace)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (i, child) in hooks.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            if i % 2 == 0 {
                assert!(
                    stdout.contains("\"permissionDecision\":\"deny\""),
                    "round {round}, hook {i}: not refused: {stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            assert!(
                !stdout.contains("could not"),
                "round {round}, hook {i}: {stdout}"
            );
        }
        for (i, child) in replays.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}, replay {i}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let store = warden::Store::open(project.db()).unwrap();
        let counted = store
            .state_get(
                &warden::StateScope::new("default", "default", "local"),
                "count",
            )
            .unwrap();
        assert_eq!(
            counted,
            Some(json!(6)),
            "round {round}: four hooks and two replays counted"
        );
    }
}
