use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

fn scope(user: &str, project: &str, plugin: &str) -> StateScope {
    StateScope::new(user, project, plugin)
}

fn store() -> Store {
    Store::in_memory().expect("in-memory store")
}

fn apply_ok(store: &Store, groups: &[Vec<StateWrite>]) {
    let results = store.apply_writes(groups).expect("transaction");
    for r in results {
        r.expect("group");
    }
}

fn record(rule: &str, session: Option<&str>, error: Option<&str>) -> ExecutionRecord {
    ExecutionRecord {
        user_id: "alice".into(),
        project_id: "proj".into(),
        session_id: session.map(str::to_owned),
        rule_id: rule.into(),
        trigger: "pre_tool_use".into(),
        condition_result: true,
        action_executed: error.is_none(),
        execution_time_ms: 1.25,
        error_message: error.map(str::to_owned),
        decision: error.is_none().then(|| "deny".to_string()),
    }
}

#[test]
fn errors_stay_small() {
    // clippy::result_large_err fires at 128 bytes.
    assert!(std::mem::size_of::<StoreError>() <= 128);
}

#[test]
fn in_memory_store_is_migrated() {
    let s = store();
    assert_eq!(
        s.schema_version().expect("version"),
        Store::latest_schema_version()
    );
    assert_eq!(s.path(), None);
}

#[test]
fn state_round_trips_json_values() {
    let s = store();
    let sc = scope("u", "p", "x");
    let values = [
        ("string", json!("hello \"world\" ✓")),
        ("int", json!(42)),
        ("negative", json!(-7)),
        ("float", json!(1.5)),
        ("bool", json!(true)),
        ("array", json!([1, "two", null])),
        ("object", json!({"a": {"b": [1, 2]}, "c": null})),
        ("null", Value::Null),
    ];
    apply_ok(
        &s,
        &[values
            .iter()
            .map(|(k, v)| StateWrite::set(sc.clone(), *k, v.clone()))
            .collect()],
    );
    for (k, v) in &values {
        assert_eq!(s.state_get(&sc, k).expect("get").as_ref(), Some(v), "{k}");
    }
    let all = s.state_all(&sc).expect("all");
    assert_eq!(all.len(), values.len());
    assert_eq!(all["object"], json!({"a": {"b": [1, 2]}, "c": null}));
}

#[test]
fn null_value_is_not_deletion() {
    let s = store();
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", Value::Null)]]);
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(Value::Null));
    assert!(s.state_all(&sc).expect("all").contains_key("k"));

    apply_ok(&s, &[vec![StateWrite::delete(sc.clone(), "k")]]);
    assert_eq!(s.state_get(&sc, "k").expect("get"), None);
    assert!(s.state_all(&sc).expect("all").is_empty());

    // Deleting a missing key is fine.
    apply_ok(&s, &[vec![StateWrite::delete(sc.clone(), "never")]]);
}

#[test]
fn scopes_isolate() {
    let s = store();
    let scopes = [
        scope("u1", "p", "x"),
        scope("u2", "p", "x"),
        scope("u1", "p2", "x"),
        scope("u1", "p", "y"),
    ];
    apply_ok(
        &s,
        &[scopes
            .iter()
            .enumerate()
            .map(|(i, sc)| StateWrite::set(sc.clone(), "same", json!(i)))
            .collect()],
    );
    for (i, sc) in scopes.iter().enumerate() {
        assert_eq!(s.state_get(sc, "same").expect("get"), Some(json!(i)));
        assert_eq!(s.state_all(sc).expect("all").len(), 1);
    }
    apply_ok(&s, &[vec![StateWrite::delete(scopes[0].clone(), "same")]]);
    assert_eq!(s.state_get(&scopes[0], "same").expect("get"), None);
    for sc in &scopes[1..] {
        assert!(s.state_get(sc, "same").expect("get").is_some());
    }
    assert_eq!(
        s.state_get(&scope("nobody", "p", "x"), "same")
            .expect("get"),
        None
    );
}

#[test]
fn upsert_keeps_created_at_and_bumps_updated_at() {
    let s = store();
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(1))]]);
    // Backdate the row so a same-second update is distinguishable.
    s.with_conn(|c| {
        c.execute(
            "UPDATE plugin_state SET created_at = '2000-01-01 00:00:00', \
             updated_at = '2000-01-01 00:00:00'",
            [],
        )
    })
    .expect("backdate");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(2))]]);
    let (count, created, updated): (i64, String, String) = s
        .with_conn(|c| {
            c.query_row(
                "SELECT count(*), min(created_at), min(updated_at) FROM plugin_state",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        })
        .expect("read");
    assert_eq!(count, 1);
    assert_eq!(created, "2000-01-01 00:00:00");
    assert_ne!(updated, "2000-01-01 00:00:00");
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(2)));
}

#[test]
fn later_write_in_a_group_wins() {
    let s = store();
    let sc = scope("u", "p", "x");
    apply_ok(
        &s,
        &[vec![
            StateWrite::set(sc.clone(), "k", json!(1)),
            StateWrite::set(sc.clone(), "k", json!(2)),
            StateWrite::delete(sc.clone(), "gone"),
            StateWrite::set(sc.clone(), "gone", json!("x")),
            StateWrite::delete(sc.clone(), "gone"),
        ]],
    );
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(2)));
    assert_eq!(s.state_get(&sc, "gone").expect("get"), None);
}

#[test]
fn failed_group_rolls_back_alone() {
    let s = store();
    s.with_conn(|c| {
        c.execute_batch(
            "CREATE TRIGGER boom BEFORE INSERT ON plugin_state \
             WHEN NEW.key = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        )
    })
    .expect("trigger");
    let sc = scope("u", "p", "x");
    apply_ok(
        &s,
        &[vec![StateWrite::set(sc.clone(), "existing", json!(0))]],
    );

    let results = s
        .apply_writes(&[
            vec![StateWrite::set(sc.clone(), "first", json!(1))],
            vec![
                StateWrite::set(sc.clone(), "a", json!("a")),
                StateWrite::set(sc.clone(), "existing", json!(99)),
                StateWrite::delete(sc.clone(), "first"),
                StateWrite::set(sc.clone(), "boom", json!(true)),
                StateWrite::set(sc.clone(), "after", json!(1)),
            ],
            vec![StateWrite::set(sc.clone(), "third", json!(3))],
        ])
        .expect("transaction commits");
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok());
    assert!(results[2].is_ok());
    let err = results[1].as_ref().expect_err("group 2 fails");
    match err {
        StoreError::Write { key, scope, .. } => {
            assert_eq!(key, "boom");
            assert_eq!(**scope, sc);
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains("boom"), "{err}");

    let all = s.state_all(&sc).expect("all");
    let expected: BTreeMap<String, Value> = [
        ("existing".to_owned(), json!(0)),
        ("first".to_owned(), json!(1)),
        ("third".to_owned(), json!(3)),
    ]
    .into_iter()
    .collect();
    assert_eq!(all, expected);
}

#[test]
fn empty_groups_are_fine() {
    let s = store();
    assert!(s.apply_writes(&[]).expect("tx").is_empty());
    let results = s.apply_writes(&[vec![], vec![]]).expect("tx");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(Result::is_ok));
}

#[test]
fn corrupt_value_names_scope_and_key() {
    let s = store();
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "bad", json!(1))]]);
    s.with_conn(|c| c.execute("UPDATE plugin_state SET value_json = '{nope'", []))
        .expect("corrupt");
    let err = s.state_get(&sc, "bad").expect_err("corrupt");
    assert!(
        matches!(&err, StoreError::CorruptValue { key, scope, .. } if key == "bad" && **scope == sc),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("\"bad\"") && msg.contains("\"x\""), "{msg}");
    assert!(s.state_all(&sc).is_err());

    s.with_conn(|c| c.execute("UPDATE plugin_state SET value_json = x'00'", []))
        .expect("blob");
    let err = s.state_get(&sc, "bad").expect_err("blob");
    assert!(err.to_string().contains("Blob"), "{err}");
}

#[test]
fn file_store_persists_across_reopen_in_wal_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join("warden.db");
    let sc = scope("u", "p", "x");
    {
        let s = Store::open(&path).expect("open");
        assert_eq!(s.path(), Some(path.as_path()));
        let mode: String = s
            .with_conn(|c| c.pragma_query_value(None, "journal_mode", |r| r.get(0)))
            .expect("mode");
        assert_eq!(mode, "wal");
        let fk: i64 = s
            .with_conn(|c| c.pragma_query_value(None, "foreign_keys", |r| r.get(0)))
            .expect("fk");
        assert_eq!(fk, 1);
        apply_ok(
            &s,
            &[vec![StateWrite::set(sc.clone(), "k", json!({"n": 1}))]],
        );
        s.record_executions(&[record("r1", Some("s1"), None)])
            .expect("log");
    }
    let s = Store::open(&path).expect("reopen");
    assert_eq!(
        s.schema_version().expect("version"),
        Store::latest_schema_version()
    );
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!({"n": 1})));
    assert_eq!(
        s.executions(&ExecutionFilter::default())
            .expect("log")
            .len(),
        1
    );
}

#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    drop(Store::open(&path).expect("create"));
    {
        let c = Connection::open(&path).expect("raw open");
        c.pragma_update(None, "user_version", 99).expect("bump");
    }
    let err = Store::open(&path).expect_err("refused");
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("database schema version 99 is newer than this build knows")
            && msg.contains("upgrade warden")
            && msg.contains(&path.display().to_string()),
        "{msg}"
    );
}

#[test]
fn garbage_file_is_an_open_error_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("not-a.db");
    std::fs::write(&path, vec![b'x'; 4096]).expect("write");
    let err = Store::open(&path).expect_err("garbage");
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("not-a.db"), "{err}");
}

#[test]
fn execution_log_round_trips_and_filters() {
    let s = store();
    s.record_executions(&[]).expect("empty");
    s.record_executions(&[
        record("r1", Some("s1"), None),
        record("r2", Some("s1"), Some("lua error")),
        record("r1", Some("s2"), Some("timeout")),
        record("r1", None, None),
    ])
    .expect("insert");
    let mut other_user = record("r1", Some("s1"), None);
    other_user.user_id = "bob".into();
    other_user.condition_result = false;
    s.record_executions(std::slice::from_ref(&other_user))
        .expect("insert");

    let ids = |f: ExecutionFilter| -> Vec<i64> {
        s.executions(&f)
            .expect("query")
            .iter()
            .map(|r| r.id)
            .collect()
    };

    let all = s.executions(&ExecutionFilter::default()).expect("all");
    assert_eq!(all.len(), 5);
    // Newest first.
    assert!(all.windows(2).all(|w| w[0].id > w[1].id));
    assert_eq!(all[0].record, other_user);
    assert_eq!(all[4].record, record("r1", Some("s1"), None));
    assert!(!all[0].created_at.is_empty());
    let (newest, oldest) = (all[0].id, all[4].id);

    assert_eq!(
        ids(ExecutionFilter {
            rule_id: Some("r1".into()),
            ..Default::default()
        })
        .len(),
        4
    );
    assert_eq!(
        ids(ExecutionFilter {
            session_id: Some("s1".into()),
            ..Default::default()
        })
        .len(),
        3
    );
    assert_eq!(
        ids(ExecutionFilter {
            user_id: Some("bob".into()),
            ..Default::default()
        }),
        vec![newest]
    );
    let failures = s
        .executions(&ExecutionFilter {
            failures_only: true,
            ..Default::default()
        })
        .expect("failures");
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0].record.error_message.as_deref(), Some("timeout"));
    assert_eq!(
        failures[1].record.error_message.as_deref(),
        Some("lua error")
    );
    assert_eq!(
        ids(ExecutionFilter {
            rule_id: Some("r1".into()),
            session_id: Some("s2".into()),
            failures_only: true,
            ..Default::default()
        })
        .len(),
        1
    );
    assert_eq!(
        ids(ExecutionFilter {
            limit: Some(2),
            ..Default::default()
        }),
        vec![newest, newest - 1]
    );
    assert!(
        ids(ExecutionFilter {
            limit: Some(0),
            ..Default::default()
        })
        .is_empty()
    );
    assert_eq!(
        ids(ExecutionFilter {
            limit: Some(usize::MAX),
            ..Default::default()
        })
        .last(),
        Some(&oldest)
    );
}

#[test]
fn execution_default_limit_is_100() {
    let s = store();
    let records: Vec<_> = (0..150)
        .map(|i| record(&format!("r{i}"), None, None))
        .collect();
    s.record_executions(&records).expect("insert");
    let rows = s.executions(&ExecutionFilter::default()).expect("read");
    assert_eq!(rows.len(), DEFAULT_EXECUTION_LIMIT);
    assert_eq!(rows[0].record.rule_id, "r149");
}

#[test]
fn store_is_send_and_sync_and_works_from_two_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();

    let dir = tempfile::tempdir().expect("tempdir");
    let s = Arc::new(Store::open(dir.path().join("warden.db")).expect("open"));
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                let sc = scope("u", "p", &format!("plugin{t}"));
                for i in 0..50 {
                    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "n", json!(i))]]);
                    s.record_executions(&[record(&format!("t{t}"), None, None)])
                        .expect("log");
                    assert_eq!(s.state_get(&sc, "n").expect("get"), Some(json!(i)));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("thread");
    }
    for t in 0..2 {
        assert_eq!(
            s.state_get(&scope("u", "p", &format!("plugin{t}")), "n")
                .expect("get"),
            Some(json!(49))
        );
    }
    assert_eq!(
        s.executions(&ExecutionFilter {
            limit: Some(1000),
            ..Default::default()
        })
        .expect("log")
        .len(),
        100
    );
}

#[test]
fn two_stores_on_one_file_share_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    let a = Store::open(&path).expect("a");
    let b = Store::open(&path).expect("b");
    let sc = scope("u", "p", "x");
    apply_ok(
        &a,
        &[vec![StateWrite::set(sc.clone(), "k", json!("from a"))]],
    );
    assert_eq!(b.state_get(&sc, "k").expect("get"), Some(json!("from a")));
}

#[test]
fn poisoned_mutex_is_recovered() {
    let s = Arc::new(store());
    let s2 = Arc::clone(&s);
    let joined = std::thread::spawn(move || {
        let _guard = s2.conn.lock();
        panic!("poison the mutex");
    })
    .join();
    assert!(joined.is_err());
    assert!(s.conn.is_poisoned());
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(1))]]);
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(1)));
}

#[test]
fn a_bare_rule_id_finds_the_rule_in_any_plugin() {
    let s = store();
    s.record_executions(&[
        record("research/search-first", Some("s1"), None),
        record("search-first", Some("s1"), None),
        record("research/not-search-first", Some("s1"), None),
        record("other/first", Some("s1"), None),
    ])
    .expect("insert");
    let rules = |id: &str| -> Vec<String> {
        let mut v: Vec<String> = s
            .executions(&ExecutionFilter {
                rule_id: Some(id.into()),
                ..ExecutionFilter::default()
            })
            .expect("query")
            .into_iter()
            .map(|r| r.record.rule_id)
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        rules("search-first"),
        ["research/search-first", "search-first"]
    );
    assert_eq!(rules("research/search-first"), ["research/search-first"]);
    assert_eq!(rules("first"), ["other/first"]);
}

/// A tick's read-modify-write holds the write lock from its read to its commit: two
/// connections (as two processes would) incrementing one counter lose no update.
#[test]
fn ticks_on_two_connections_lose_no_update() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    Store::open(&path).expect("create");
    let sc = scope("ann", "p", "counter");
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            let sc = sc.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&path).expect("open");
                s.set_lock_timeout(std::time::Duration::from_secs(30))
                    .expect("timeout");
                for _ in 0..300 {
                    let tx = s.tick();
                    let n = tx
                        .state_get(&sc, "n")
                        .expect("read")
                        .and_then(|v| v.as_i64())
                        .unwrap_or(0);
                    let results = tx
                        .write_groups(&[vec![StateWrite::set(sc.clone(), "n", json!(n + 1))]])
                        .expect("write");
                    assert!(results.iter().all(Result::is_ok));
                    tx.commit(None).expect("commit");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let s = Store::open(&path).expect("reopen");
    assert_eq!(s.state_get(&sc, "n").expect("read"), Some(json!(600)));
}

/// Another connection holding the write lock makes a tick fail after the lock timeout with
/// `Busy`, which says how long it waited; the tick's writes are not half-applied.
#[test]
fn a_held_lock_fails_the_tick_after_its_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    let holder = Store::open(&path).expect("create");
    let mut s = Store::open(&path).expect("open");
    s.set_lock_timeout(std::time::Duration::from_millis(50))
        .expect("timeout");
    let held = holder.tick();
    held.begin().expect("hold the lock");
    let tx = s.tick();
    let err = tx
        .write_groups(&[vec![StateWrite::set(scope("a", "p", "x"), "k", json!(1))]])
        .expect_err("locked");
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    assert!(err.to_string().contains("waited 50 ms"), "{err}");
    drop(tx);
    drop(held);
    assert_eq!(s.state_get(&scope("a", "p", "x"), "k").expect("read"), None);
}

#[test]
fn commits_can_be_made_durable_on_power_loss() {
    let dir = tempfile::tempdir().expect("dir");
    let s = Store::open(dir.path().join("w.db")).expect("open");
    assert!(!s.is_synchronous_full().expect("read"), "NORMAL by default");
    s.set_synchronous_full(true).expect("set");
    assert!(s.is_synchronous_full().expect("read"));
    s.set_synchronous_full(false).expect("set");
    assert!(!s.is_synchronous_full().expect("read"));
}

#[test]
fn a_write_the_database_refuses_as_a_whole_fails_the_tick() {
    let s = Store::in_memory().expect("store");
    let sc = scope("a", "p", "x");
    s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect("seed");
    // A connection that may not write stands for a read-only or damaged file.
    s.with_conn(|c| c.pragma_update(None, "query_only", true))
        .expect("query_only");
    let tx = s.tick();
    let err = tx
        .write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(2))]])
        .expect_err("the write fails the tick");
    assert!(err.to_string().contains("readonly"), "{err}");
    // Nothing more is written in the tick's name, not even outside a transaction.
    let log = tx.record_executions(&[ExecutionRecord {
        user_id: "a".into(),
        project_id: "p".into(),
        session_id: None,
        rule_id: "r".into(),
        trigger: "on_turn_start".into(),
        condition_result: true,
        action_executed: true,
        execution_time_ms: 0.1,
        error_message: None,
        decision: None,
    }]);
    assert!(matches!(log, Err(StoreError::Refused { .. })), "{log:?}");
    let commit = tx.commit(None).expect_err("the commit says so");
    assert!(
        commit.to_string().contains("refused this tick's writes")
            && commit.to_string().contains("readonly"),
        "{commit}"
    );
    s.with_conn(|c| c.pragma_update(None, "query_only", false))
        .expect("query_only off");
    assert_eq!(s.state_get(&sc, "k").expect("read"), Some(json!(1)));
    assert!(
        s.executions(&ExecutionFilter::default())
            .expect("log")
            .is_empty()
    );
}
