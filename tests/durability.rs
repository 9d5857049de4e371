//! What survives, and what is said, when the database is not there for a tick: a write lock
//! held by another process makes a tick fail visibly after a bounded wait (its state writes
//! lost, its decisions standing), and `warden replay` exits non-zero. A process killed with
//! SIGKILL at any moment leaves every tick it reported whole (state and execution-log rows) and
//! an intact file; several processes on one database lose no update; a database that is
//! read-only, full or damaged is said to be so, and the rules without state keep running.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// How long a test waits for what comes within a second (a line of a replay's output): a hang
/// detector, not a speed check; a wait ends as soon as what it waits for comes.
const PATIENCE: Duration = Duration::from_secs(60);

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

/// Another process holds the write lock: a tick's first use of the database waits for it, a
/// bounded wait (it fails while the lock is still held), and the rest of the tick fails at once
/// instead of waiting again (one wait per tick, not one per write): the lock, released as soon as
/// the first failure is reported, is not taken by the tick's later writes, which would get it at
/// once. Nothing of the tick is written; the next tick tries the lock again, takes it and is
/// saved; and `replay` exits non-zero for the lost tick.
#[test]
fn a_held_lock_fails_the_tick_visibly_and_replay_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/counter.toml"), COUNTER).unwrap();
    let db = dir.path().join("w.db");
    let holder = warden::Store::open(&db).unwrap();
    let held = holder.tick();
    held.begin().unwrap();
    // The trace comes through a pipe, an event at a time: each is ticked as it comes, and its
    // lines end with one saying it is done (`--all`).
    let mut child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["--rules"])
        .arg(dir.path().join("rules"))
        .arg("--db")
        .arg(&db)
        .args(["replay", "--all", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = |from: Box<dyn std::io::Read + Send>| {
        let (told, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines().map_while(Result::ok) {
                let _ = told.send(line);
            }
        });
        heard
    };
    let stdout = lines(Box::new(child.stdout.take().unwrap()));
    let stderr = lines(Box::new(child.stderr.take().unwrap()));
    let mut stdin = child.stdin.take().unwrap();
    let event = "{\"hook\":\"on_turn_start\"}\n";
    stdin.write_all(event.as_bytes()).unwrap();
    // The counter's read of the state waited for the lock, and failed while it was held.
    let mut logged = Vec::new();
    while !logged.iter().any(|l: &String| l.contains("a rule failed")) {
        logged.push(stderr.recv_timeout(PATIENCE).expect("no rule failed"));
    }
    drop(held);
    let mut printed: Vec<Value> = Vec::new();
    while !printed.iter().any(|l| l["done"] == true) {
        let line = stdout.recv_timeout(PATIENCE).expect("the tick never ended");
        printed.push(serde_json::from_str(&line).unwrap());
    }
    // The next event, after the lock was released.
    stdin.write_all(event.as_bytes()).unwrap();
    drop(stdin);
    let status = child.wait().unwrap();
    printed.extend(
        stdout
            .iter()
            .map(|l| serde_json::from_str::<Value>(&l).unwrap()),
    );
    logged.extend(stderr.iter());
    let (first, next): (Vec<&Value>, Vec<&Value>) = printed.iter().partition(|l| l["event"] == 0);
    assert!(
        first.iter().any(|l| l["rule"] == "counter"
            && l["error"]
                .as_str()
                .is_some_and(|e| e.contains("locked by another process"))),
        "{printed:?}"
    );
    assert!(
        first.iter().any(|l| l["unsaved"] == true
            && l["error"]
                .as_str()
                .is_some_and(|e| e.contains("locked by another process"))),
        "the first tick is not saved, though the lock was free before its end: {first:?}"
    );
    assert!(
        next.iter()
            .any(|l| l["rule"] == "counter" && l["action"] == "set_state")
            && next.iter().all(|l| l["error"].is_null()),
        "the next tick is saved: {next:?}"
    );
    assert_eq!(status.code(), Some(1), "a lost write is not a success");
    assert!(
        logged
            .iter()
            .any(|l| l.contains("1 event(s) could not be saved")),
        "{logged:?}"
    );
    // The next tick counted from nothing: the first one wrote nothing.
    assert_eq!(
        holder
            .state_get(&warden::StateScope::new("default", "default", "local"), "n")
            .unwrap(),
        Some(serde_json::json!(1))
    );
}

/// A stateless rule beside the counter: it must keep firing whatever the database does.
const HELLO: &str = r#"
[rule]
id = "hello"
trigger = "on_turn_start"

[condition]
expression = "true"

[action]
type = "notify_self"
message = "turn {{ context.turn.number }}"
"#;

/// An installation in `dir`: the counter and hello rules, `w.db`, every tick in the execution
/// log, and a trace of `events` turn starts.
fn installation(dir: &Path, events: usize) {
    std::fs::create_dir_all(dir.join("rules")).unwrap();
    std::fs::write(dir.join("rules/counter.toml"), COUNTER).unwrap();
    std::fs::write(dir.join("rules/hello.toml"), HELLO).unwrap();
    std::fs::write(
        dir.join("warden.toml"),
        "builtin = false\nrules = [\"rules\"]\ndatabase = \"w.db\"\n[log]\nsample = 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("trace.jsonl"),
        "{\"hook\":\"on_turn_start\"}\n".repeat(events),
    )
    .unwrap();
}

fn replay(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_warden"));
    c.arg("--config")
        .arg(dir.join("warden.toml"))
        .arg("replay")
        .arg(dir.join("trace.jsonl"));
    c
}

/// What a replay's output says, event by event: the counter values it committed (a `set_state`
/// line of an event with no "could not be saved" error: replay prints an event once its tick
/// has committed), the events whose tick was refused, and the events `hello` fired at.
#[derive(Debug, Default)]
struct Report {
    committed: Vec<i64>,
    unsaved: usize,
    hello: usize,
    errors: Vec<String>,
}

fn report(stdout: &str) -> Report {
    let mut events: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for line in stdout.lines() {
        // A line cut by the kill is not a report.
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        events
            .entry(v["event"].as_u64().unwrap())
            .or_default()
            .push(v);
    }
    let mut r = Report::default();
    for lines in events.values() {
        let unsaved = lines
            .iter()
            .any(|l| l["rule"].is_null() && l["error"].as_str().is_some());
        r.unsaved += usize::from(unsaved);
        for l in lines {
            if let Some(e) = l["error"].as_str() {
                r.errors.push(e.to_string());
            }
            match (l["rule"].as_str(), l["action"].as_str()) {
                (Some("counter"), Some("set_state")) if !unsaved => {
                    r.committed.push(l["value"].as_i64().unwrap());
                }
                (Some("hello"), Some("notify_self")) => r.hello += 1,
                _ => {}
            }
        }
    }
    r
}

fn counter(store: &warden::Store) -> i64 {
    store
        .state_get(&warden::StateScope::new("default", "default", "local"), "n")
        .unwrap()
        .map_or(0, |v| v.as_i64().unwrap())
}

/// The execution-log rows of the counter's fired ticks.
fn counter_rows(store: &warden::Store) -> i64 {
    let rows = store
        .executions(&warden::ExecutionFilter {
            rule_id: Some("counter".into()),
            limit: Some(usize::MAX >> 1),
            ..Default::default()
        })
        .unwrap();
    rows.iter().filter(|r| r.record.action_executed).count() as i64
}

/// A tiny generator for kill times, seeded from the clock (the seed is printed).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

// Issue 17: `replay` of a long trace with a state-writing rule, killed with SIGKILL at random
// moments, many times over one database: after each kill the file is intact, every value the
// process reported as committed is there, and the counter equals its execution-log rows (a
// tick is whole or absent).
#[test]
fn a_process_killed_at_any_moment_loses_no_committed_write() {
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 20_000);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill times seeded with {seed}");
    let mut rng = Lcg(seed);
    let mut reported = 0;
    let mut killed_mid_run = 0;
    for round in 0..25 {
        let mut child = replay(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        // Each line is told as it comes, and handed over (the reader reads no further until it
        // is): the process cannot run further ahead of what was heard than its output pipe
        // holds, a few hundred events of the 20,000.
        let (told, heard) = std::sync::mpsc::sync_channel(0);
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        text.push_str(&l);
                        text.push('\n');
                        // No one listens once the process is to be killed.
                        let _ = told.send(());
                    }
                    Err(_) => break,
                }
            }
            text
        });
        if round < 3 {
            // The first rounds die early, in the opening and migration (or wherever the
            // process is by then: what is checked holds wherever it dies).
            std::thread::sleep(Duration::from_millis(rng.below(40)));
        } else {
            // The others mid-run, whatever the machine's speed: after a random number of the
            // lines it reported, while it works on (at a moment of its work just as random).
            for _ in 0..4 + rng.below(3000) {
                heard
                    .recv_timeout(PATIENCE)
                    .expect("the replay stopped reporting");
            }
        }
        drop(heard);
        let finished = child.try_wait().unwrap().is_some();
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        killed_mid_run += usize::from(!finished);
        let out = report(&reader.join().unwrap());
        assert_eq!(out.unsaved, 0, "round {round}: {:?}", out.errors);
        if let Some(&last) = out.committed.last() {
            reported = last;
        }
        let store = warden::Store::open(dir.path().join("w.db")).unwrap();
        assert_eq!(
            store.check_integrity().unwrap(),
            Vec::<String>::new(),
            "round {round}"
        );
        let n = counter(&store);
        assert!(
            n >= reported,
            "round {round}: the process reported {reported} committed, the database has {n}"
        );
        assert_eq!(
            counter_rows(&store),
            n,
            "round {round}: a tick's state and its execution-log rows are one"
        );
    }
    assert!(reported > 0, "no round got as far as a tick");
    assert!(
        killed_mid_run >= 20,
        "only {killed_mid_run} rounds were killed while running"
    );
}

// Issue 17: four processes replaying the counter on one database: every tick any of them
// committed is counted once (no lost update), and none is dropped silently (a tick that could
// not be saved says so and is not counted).
#[test]
fn several_processes_on_one_database_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 150);
    // The schema is made once, so the processes race on ticks, not on migrations.
    drop(warden::Store::open(dir.path().join("w.db")).unwrap());
    let children: Vec<_> = (0..4)
        .map(|_| {
            replay(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut committed = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let r = report(&String::from_utf8(out.stdout).unwrap());
        assert_eq!(r.committed.len() + r.unsaved, 150, "{:?}", r.errors);
        assert_eq!(
            out.status.code(),
            Some(if r.unsaved > 0 { 1 } else { 0 }),
            "{:?}",
            r.errors
        );
        assert!(
            r.committed.windows(2).all(|w| w[0] < w[1]),
            "one process saw the counter go back"
        );
        committed += r.committed.len() as i64;
    }
    let store = warden::Store::open(dir.path().join("w.db")).unwrap();
    assert_eq!(counter(&store), committed);
    assert_eq!(counter_rows(&store), committed);
    assert!(committed > 0);
}

/// A replay of `dir` after making `dir` writable by anyone or by no one but its owner, run as a
/// user who cannot write what root owns when the tests run as root (root writes any file, so a
/// read-only file is read-only for root's tests only through another user). That user runs a
/// copy of the binary kept in `dir`: the build's own folder may be closed to it.
fn replay_as_other_user(dir: &Path, dir_mode: u32) -> Command {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        let copy = dir.join("warden-bin");
        if !copy.exists() {
            std::fs::copy(env!("CARGO_BIN_EXE_warden"), &copy).unwrap();
        }
        let mut c = Command::new(copy);
        c.uid(65534).gid(65534);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_warden"))
    };
    cmd.arg("--config")
        .arg(dir.join("warden.toml"))
        .arg("replay")
        .arg(dir.join("trace.jsonl"));
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
    cmd
}

// Issue 17: a database file that is read-only (in a folder its process may write, where SQLite
// keeps its write-ahead log): every tick that writes fails visibly (exit 1, the error names the
// database and says why), nothing is written, and the stateless rule fires at every event. In a
// folder it may not write either, SQLite cannot even read a database in WAL mode: a clear error
// at the start.
#[test]
fn a_read_only_database_fails_writes_visibly_and_stateless_rules_run() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 5);
    let first = replay(dir.path()).output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    let db = dir.path().join("w.db");
    // The last connection to close (SQLite's default) checkpoints the log and removes its files.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
        .unwrap();
    drop(conn);
    assert!(!dir.path().join("w.db-wal").exists());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();

    let out = replay_as_other_user(dir.path(), 0o555).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot open database")
            && stderr.contains("w.db")
            && stderr.contains("readonly"),
        "{stderr}"
    );

    let out = replay_as_other_user(dir.path(), 0o777).output().unwrap();
    let r = report(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{:?} {}",
        r.errors,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r.hello, 5, "the stateless rule stopped: {:?}", r.errors);
    assert_eq!((r.committed.len(), r.unsaved), (0, 5), "{:?}", r.errors);
    assert!(
        r.errors
            .iter()
            .any(|e| e.contains("w.db refused this tick's writes")
                && e.contains("readonly database")),
        "{:?}",
        r.errors
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("5 event(s) could not be saved"));
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let store = warden::Store::open(&db).unwrap();
    assert_eq!((counter(&store), counter_rows(&store)), (5, 5));
}

// Issue 17: a full disk (the process may not grow a file past a few pages, as on a full
// filesystem): the ticks that fit are saved whole, the rest fail visibly, the stateless rule
// keeps firing, and the file stays intact with state and log in step.
#[test]
fn a_full_disk_fails_writes_visibly_and_stateless_rules_run() {
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 200);
    drop(warden::Store::open(dir.path().join("w.db")).unwrap());
    // Room for the files as they are (the database, SQLite's 32 KiB index of the log) and a
    // few ticks' worth of log.
    let size = |name: &str| std::fs::metadata(dir.path().join(name)).map_or(0, |m| m.len());
    let limit = size("w.db").max(size("w.db-wal")).max(32 << 10) + (24 << 10);
    let mut cmd = replay(dir.path());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let l = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let r = report(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        out.status.code(),
        Some(1),
        "{:?} {}",
        r.errors,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r.hello, 200, "the stateless rule stopped: {:?}", r.errors);
    assert!(r.unsaved > 0, "the limit was never reached");
    assert_eq!(r.committed.len() + r.unsaved, 200);
    assert!(
        r.errors.iter().all(|e| e.contains("w.db")),
        "an error that does not name the database: {:?}",
        r.errors
    );
    let store = warden::Store::open(dir.path().join("w.db")).unwrap();
    assert_eq!(store.check_integrity().unwrap(), Vec::<String>::new());
    let n = counter(&store);
    assert_eq!(n, r.committed.len() as i64);
    assert_eq!(counter_rows(&store), n);
}

// Issue 17: a database file that is not one (garbage bytes): a clear error that names the file
// and says what is wrong, before any rule runs (running on as if nothing were saved would lose
// every write silently).
#[test]
fn a_garbage_database_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 3);
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(dir.path().join("w.db"), garbage).unwrap();
    let out = replay(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("w.db") && stderr.contains("file is not a database"),
        "{stderr}"
    );
}

// Issue 17: a database damaged inside (the page of its plugin state overwritten): the ticks that
// need it fail visibly, saying the database is damaged, and the stateless rule keeps firing.
#[test]
fn a_damaged_database_fails_its_ticks_visibly_and_stateless_rules_run() {
    let dir = tempfile::tempdir().unwrap();
    installation(dir.path(), 3);
    assert_eq!(replay(dir.path()).output().unwrap().status.code(), Some(0));
    let db = dir.path().join("w.db");
    // The page of the plugin state table, once the log is checkpointed into the file.
    let (root, page) = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let root: i64 = conn
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'plugin_state'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let page: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        (root as usize, page as usize)
    };
    let mut bytes = std::fs::read(&db).unwrap();
    for (i, b) in bytes[(root - 1) * page..root * page].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2654435761).to_le_bytes()[1];
    }
    std::fs::write(&db, bytes).unwrap();
    let out = replay(dir.path()).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = report(&stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(r.hello, 3, "the stateless rule stopped: {stdout}");
    assert!(r.committed.is_empty(), "{stdout}");
    assert!(
        r.errors
            .iter()
            .any(|e| e.contains("w.db") && e.contains("malformed")),
        "{:?}",
        r.errors
    );
}

// `[database] synchronous = "full"` in warden.toml reaches the store an installation opens.
#[test]
fn an_operator_can_make_commits_durable_on_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("warden.toml");
    for (text, full) in [
        ("database = \"w.db\"\n", false),
        (
            "[database]\npath = \"w.db\"\nsynchronous = \"full\"\n",
            true,
        ),
    ] {
        std::fs::write(&path, text).unwrap();
        let config = warden::Config::load(&path).unwrap();
        let w = warden::WardenBuilder::from_config(&config)
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(w.store().is_synchronous_full().unwrap(), full, "{text}");
    }
}
