//! The store under a tick, SQLite beside PostgreSQL, in one run (`benches/bench-postgres.sh`
//! starts a throw-away server and runs this; or set `WARDEN_BENCH_POSTGRES_URL` and run
//! `cargo bench --bench store`).
//!
//! Latency: a tick of a durable session (saved at every tick) whose rule reads and writes
//! plugin state (`count = get('count', 0) + 1`), measured tick by tick: p50, p90 and p99 on a
//! SQLite file and on PostgreSQL, beside the floor of a bare PostgreSQL transaction of four
//! statements (BEGIN, a SELECT, an UPDATE, COMMIT) on one connection, measured in alternation
//! with them.
//!
//! Throughput: ticks per second of one node alone, then of two nodes at once (two processes
//! of this program, each ticking sessions of its own): on sessions of different users (no lock
//! shared), and of one user and project (every tick takes that scope's state lock in turn).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use warden::store::Store;
use warden::{Event, Hook, SessionOptions, Warden};

const RULE: &str = r#"
[rule]
id = "count-calls"
trigger = "on_tool_complete"

[condition]
expression = "true"

[action]
type = "set_state"
key = "count"
value = "{{ context.state.get('count', 0) + 1 }}"
"#;

/// Ticks per measured round, and rounds (the two back ends and the floor take turns).
const TICKS: usize = 500;
const ROUNDS: usize = 5;
/// How long each node runs in the throughput measurement.
const THROUGHPUT_FOR: Duration = Duration::from_secs(5);

fn warden(db: &str, rules: &std::path::Path) -> Warden {
    Warden::builder()
        .rules_dir(rules)
        .store(Store::open(db).expect("open the store"))
        .build()
        .expect("build")
}

fn event() -> Event {
    Event::tool_complete("web", json!({"ok": true}))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Ticks `n` times; each tick's time.
fn ticks(session: &mut warden::Session, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            let outcome = session.tick(Hook::OnToolComplete, event());
            let took = t.elapsed();
            assert!(outcome.unsaved.is_none(), "{:?}", outcome.errors);
            took
        })
        .collect()
}

/// The floor: BEGIN, SELECT, UPDATE, COMMIT on one connection; each round trip's time.
fn floor(client: &mut postgres::Client, n: usize) -> Vec<Duration> {
    let select = client
        .prepare("SELECT v FROM bench_floor WHERE id = 1")
        .unwrap();
    let update = client
        .prepare("UPDATE bench_floor SET v = $1 WHERE id = 1")
        .unwrap();
    (0..n)
        .map(|_| {
            let t = Instant::now();
            client.batch_execute("BEGIN").unwrap();
            let v: i64 = client.query_one(&select, &[]).unwrap().get(0);
            client.execute(&update, &[&(v + 1)]).unwrap();
            client.batch_execute("COMMIT").unwrap();
            t.elapsed()
        })
        .collect()
}

/// One node of the throughput measurement: ticks its own session for `secs` seconds as
/// `user`; prints how many ticks it made.
fn node(db: &str, rules: &str, user: &str, secs: f64) {
    let w = warden(db, std::path::Path::new(rules));
    let id = format!("{user}-{}", std::process::id());
    let mut session = w
        .open_session(
            &id,
            SessionOptions {
                user: Some(user.to_string()),
                ..SessionOptions::default()
            },
        )
        .unwrap();
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < until {
        let outcome = session.tick(Hook::OnToolComplete, event());
        assert!(outcome.unsaved.is_none(), "{:?}", outcome.errors);
        n += 1;
    }
    println!("{n}");
}

/// Runs `users.len()` nodes at once (processes of this program); their ticks per second.
fn nodes(db: &str, rules: &std::path::Path, users: &[&str]) -> Vec<f64> {
    let me = std::env::current_exe().unwrap();
    let secs = THROUGHPUT_FOR.as_secs_f64();
    let children: Vec<_> = users
        .iter()
        .map(|user| {
            Command::new(&me)
                .args([
                    "--node",
                    db,
                    rules.to_str().unwrap(),
                    user,
                    &secs.to_string(),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            let n: f64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            n / secs
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--node") {
        let secs = args[5].parse().unwrap();
        node(&args[2], &args[3], &args[4], secs);
        return;
    }
    let Some(server) = std::env::var("WARDEN_BENCH_POSTGRES_URL")
        .ok()
        .or_else(|| std::env::var("WARDEN_TEST_POSTGRES_URL").ok())
        .filter(|u| !u.is_empty())
    else {
        eprintln!(
            "skipped: set WARDEN_BENCH_POSTGRES_URL (or run benches/bench-postgres.sh, which starts a server)"
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("count-calls.toml"), RULE).unwrap();
    let schema = format!("warden_bench_{}", std::process::id());
    let sep = if server.contains('?') { '&' } else { '?' };
    let pg_url = format!("{server}{sep}schema={schema}");
    let sqlite_path = dir.path().join("warden.db").display().to_string();

    let pg = warden(&pg_url, &rules);
    let lite = warden(&sqlite_path, &rules);
    let mut pg_session = pg.open_session("bench", SessionOptions::default()).unwrap();
    let mut lite_session = lite
        .open_session("bench", SessionOptions::default())
        .unwrap();
    let mut client: postgres::Client = server
        .parse::<postgres::Config>()
        .unwrap()
        .connect(postgres::NoTls)
        .unwrap();
    client
        .batch_execute(&format!(
            "SET search_path = {schema};
             CREATE TABLE bench_floor (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO bench_floor VALUES (1, 0);"
        ))
        .unwrap();
    // Warm up: connections, prepared statements, caches.
    ticks(&mut pg_session, 100);
    ticks(&mut lite_session, 100);
    floor(&mut client, 100);
    let (mut p, mut l, mut f) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        f.extend(floor(&mut client, TICKS));
        p.extend(ticks(&mut pg_session, TICKS));
        l.extend(ticks(&mut lite_session, TICKS));
    }
    for v in [&mut p, &mut l, &mut f] {
        v.sort();
    }
    println!(
        "tick of a durable session with a state read-modify-write ({} ticks each, {} rounds in alternation):",
        TICKS * ROUNDS,
        ROUNDS
    );
    println!(
        "  {:<44} {:>9} {:>9} {:>9}",
        "", "p50 ms", "p90 ms", "p99 ms"
    );
    for (name, v) in [
        ("floor: BEGIN, SELECT, UPDATE, COMMIT (PostgreSQL)", &f),
        ("tick on PostgreSQL", &p),
        ("tick on SQLite (a file, WAL)", &l),
    ] {
        println!(
            "  {:<44} {:>9.3} {:>9.3} {:>9.3}",
            name,
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.9)),
            ms(percentile(v, 0.99))
        );
    }
    let (pf, lf) = (percentile(&p, 0.5), percentile(&l, 0.5));
    let ff = percentile(&f, 0.5);
    println!(
        "  p50 ratios: PostgreSQL tick / floor = {:.2}; PostgreSQL tick / SQLite tick = {:.2}",
        pf.as_secs_f64() / ff.as_secs_f64(),
        pf.as_secs_f64() / lf.as_secs_f64()
    );
    drop(pg_session);
    drop(lite_session);

    println!(
        "\nthroughput, ticks per second (each node a process, {} s; the server, the nodes and this driver share the machine's cores):",
        THROUGHPUT_FOR.as_secs()
    );
    let one = nodes(&pg_url, &rules, &["ann"]);
    let apart = nodes(&pg_url, &rules, &["ann", "bob"]);
    let shared = nodes(&pg_url, &rules, &["cy", "cy"]);
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    println!("  one node alone:                          {:>8.0}", one[0]);
    println!(
        "  two nodes, different users:              {:>8.0} ({:.0} + {:.0}; {:.2}x one node)",
        sum(&apart),
        apart[0],
        apart[1],
        sum(&apart) / one[0]
    );
    println!(
        "  two nodes, one user (one state lock):    {:>8.0} ({:.0} + {:.0}; {:.2}x one node)",
        sum(&shared),
        shared[0],
        shared[1],
        sum(&shared) / one[0]
    );
    // Both nodes of one user counted every tick: nothing was lost under contention.
    let store = Store::open(&pg_url).unwrap();
    let counted = store
        .state_get(&warden::StateScope::new("cy", "default", "local"), "count")
        .unwrap()
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0);
    let ticked = sum(&shared) * THROUGHPUT_FOR.as_secs_f64();
    println!("  one user's counter: {counted:.0} for {ticked:.0} ticks (equal: no update lost)");
    let _ = client.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"));
}
