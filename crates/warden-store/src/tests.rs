//! The store's test suite, run against both back ends (see `testdb.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::testdb::{TestDb, both_backends, eventually};

mod sessions;
use sessions::*;

fn scope(user: &str, project: &str, plugin: &str) -> StateScope {
    StateScope::new(user, project, plugin)
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
        shadow: false,
        live_decision: None,
    }
}

#[test]
fn errors_stay_small() {
    // clippy::result_large_err fires at 128 bytes.
    assert!(std::mem::size_of::<StoreError>() <= 128);
}

#[test]
fn in_memory_store_is_migrated() {
    let s = Store::in_memory().expect("in-memory store");
    assert_eq!(
        s.schema_version().expect("version"),
        Store::latest_schema_version()
    );
    assert_eq!(s.path(), None);
    assert_eq!(s.backend(), Backend::Sqlite);
}

both_backends!(
    a_store_is_migrated_and_reopening_is_idempotent,
    a_newer_schema_is_refused,
    state_round_trips_json_values,
    null_value_is_not_deletion,
    scopes_isolate,
    upsert_keeps_created_at_and_bumps_updated_at,
    later_write_in_a_group_wins,
    failed_group_rolls_back_alone,
    empty_groups_are_fine,
    corrupt_value_names_scope_and_key,
    execution_log_round_trips_and_filters,
    execution_default_limit_is_100,
    a_bare_rule_id_finds_the_rule_in_any_plugin,
    store_works_from_two_threads,
    two_stores_on_one_database_share_data,
    toggles_round_trip_and_report_changes,
    overrides_round_trip,
    a_corrupt_override_names_itself,
    another_stores_changes_are_noticed,
    a_session_round_trips_and_its_version_grows,
    a_stale_save_is_a_conflict_and_writes_nothing,
    sessions_are_deleted_and_pruned,
    entries_are_written_replaced_and_dropped_with_their_session,
    updated_at_is_left_as_stored_when_not_touched,
    batched_saves_are_committed_and_each_told_once,
    a_batched_save_over_a_newer_version_fails_alone,
    batched_saves_still_queued_are_committed_when_the_store_is_dropped,
    a_batch_that_cannot_begin_fails_every_save_and_writes_none,
    ticks_on_two_connections_lose_no_update,
    two_connections_ticking_one_session_take_turns,
    a_held_lock_fails_the_tick_after_its_timeout,
    a_tick_dropped_uncommitted_writes_nothing,
    a_copy_holds_every_row,
    a_copy_refuses_a_target_that_holds_data,
    hostile_strings_are_only_data,
);

fn a_store_is_migrated_and_reopening_is_idempotent(db: &TestDb) {
    let latest = Store::latest_schema_version_of(db.backend);
    let s = db.open();
    assert_eq!(s.schema_version().expect("version"), latest);
    drop(s);
    let s = db.open();
    assert_eq!(s.schema_version().expect("version"), latest);
    assert_eq!(s.contents().expect("contents"), "nothing");
}

fn a_newer_schema_is_refused(db: &TestDb) {
    let s = db.open();
    db.exec(
        &s,
        "PRAGMA user_version = 99",
        "INSERT INTO schema_version (version) VALUES (99)",
    );
    drop(s);
    let err = Store::open(&db.location).expect_err("refused");
    assert!(
        matches!(err, StoreError::SchemaTooNew { found: 99, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("database schema version 99 is newer than this build knows")
            && msg.contains("upgrade warden"),
        "{msg}"
    );
}

fn state_round_trips_json_values(db: &TestDb) {
    let s = db.open();
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
        ("quote'in key", json!("it's")),
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
    // Inside a tick too.
    let tx = s.tick();
    assert_eq!(tx.state_get(&sc, "int").expect("get"), Some(json!(42)));
    assert_eq!(tx.state_all(&sc).expect("all"), all);
    tx.commit(None).expect("commit");
}

fn null_value_is_not_deletion(db: &TestDb) {
    let s = db.open();
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

fn scopes_isolate(db: &TestDb) {
    let s = db.open();
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

fn upsert_keeps_created_at_and_bumps_updated_at(db: &TestDb) {
    let s = db.open();
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(1))]]);
    // Backdate the row so a same-second update is distinguishable.
    let backdate = "UPDATE plugin_state SET created_at = '2000-01-01 00:00:00', \
                    updated_at = '2000-01-01 00:00:00'";
    db.exec(&s, backdate, backdate);
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(2))]]);
    let dump = s.dump();
    assert_eq!(dump.state.len(), 1);
    assert_eq!(dump.state[0].created_at, "2000-01-01 00:00:00");
    assert_ne!(dump.state[0].updated_at, "2000-01-01 00:00:00");
    assert_eq!(dump.state[0].updated_at.len(), "2000-01-01 00:00:00".len());
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(2)));
}

fn later_write_in_a_group_wins(db: &TestDb) {
    let s = db.open();
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

fn failed_group_rolls_back_alone(db: &TestDb) {
    let s = db.open();
    db.exec(
        &s,
        "CREATE TRIGGER boom BEFORE INSERT ON plugin_state \
         WHEN NEW.key = 'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN IF NEW.key = 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$; \
         CREATE TRIGGER boom BEFORE INSERT ON plugin_state FOR EACH ROW EXECUTE FUNCTION boom();",
    );
    let sc = scope("u", "p", "x");
    apply_ok(
        &s,
        &[vec![StateWrite::set(sc.clone(), "existing", json!(0))]],
    );
    let groups = [
        vec![StateWrite::set(sc.clone(), "first", json!(1))],
        vec![
            StateWrite::set(sc.clone(), "a", json!("a")),
            StateWrite::set(sc.clone(), "existing", json!(99)),
            StateWrite::delete(sc.clone(), "first"),
            StateWrite::set(sc.clone(), "boom", json!(true)),
            StateWrite::set(sc.clone(), "after", json!(1)),
        ],
        vec![StateWrite::set(sc.clone(), "third", json!(3))],
    ];
    let check = |results: Vec<Result<(), StoreError>>| {
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
    };
    check(s.apply_writes(&groups).expect("transaction commits"));
    // The same inside a tick, which goes on to commit what did not fail.
    apply_ok(&s, &[vec![StateWrite::delete(sc.clone(), "third")]]);
    let tx = s.tick();
    let results = tx.write_groups(&groups).expect("transaction goes on");
    tx.commit(None).expect("commit");
    check(results);
}

fn empty_groups_are_fine(db: &TestDb) {
    let s = db.open();
    assert!(s.apply_writes(&[]).expect("tx").is_empty());
    let results = s.apply_writes(&[vec![], vec![]]).expect("tx");
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(Result::is_ok));
}

fn corrupt_value_names_scope_and_key(db: &TestDb) {
    let s = db.open();
    let sc = scope("u", "p", "x");
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "bad", json!(1))]]);
    let corrupt = "UPDATE plugin_state SET value_json = '{nope'";
    db.exec(&s, corrupt, corrupt);
    let err = s.state_get(&sc, "bad").expect_err("corrupt");
    assert!(
        matches!(&err, StoreError::CorruptValue { key, scope, .. } if key == "bad" && **scope == sc),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("\"bad\"") && msg.contains("\"x\""), "{msg}");
    assert!(s.state_all(&sc).is_err());
    assert!(s.tick().state_all(&sc).is_err());
}

fn execution_log_round_trips_and_filters(db: &TestDb) {
    let s = db.open();
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
    assert_eq!(all[0].created_at.len(), "2000-01-01 00:00:00".len());
    let (newest, oldest) = (all[0].id, all[4].id);

    let count = |f| ids(f).len();
    assert_eq!(
        count(ExecutionFilter {
            rule_id: Some("r1".into()),
            ..Default::default()
        }),
        4
    );
    assert_eq!(
        count(ExecutionFilter {
            session_id: Some("s1".into()),
            ..Default::default()
        }),
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
        count(ExecutionFilter {
            rule_id: Some("r1".into()),
            session_id: Some("s2".into()),
            failures_only: true,
            ..Default::default()
        }),
        1
    );
    let two = ids(ExecutionFilter {
        limit: Some(2),
        ..Default::default()
    });
    assert_eq!(two.len(), 2);
    assert_eq!(two[0], newest);
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
    // Inside a tick, committed with it.
    let tx = s.tick();
    tx.record_executions(&[record("in-tick", None, None)])
        .expect("record");
    tx.commit(None).expect("commit");
    assert_eq!(
        count(ExecutionFilter {
            rule_id: Some("in-tick".into()),
            ..Default::default()
        }),
        1
    );
    // A rule in shadow: marked, with what the live rules decided, and found on its own.
    let mut shadow = record("guard", Some("s3"), None);
    shadow.shadow = true;
    shadow.live_decision = Some("none".into());
    s.record_executions(std::slice::from_ref(&shadow))
        .expect("insert");
    let only = s
        .executions(&ExecutionFilter {
            shadow_only: true,
            ..Default::default()
        })
        .expect("shadow rows");
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].record, shadow);
    assert!(only[0].record.shadow);
    assert_eq!(only[0].record.live_decision.as_deref(), Some("none"));
}

fn execution_default_limit_is_100(db: &TestDb) {
    let s = db.open();
    let records: Vec<_> = (0..150)
        .map(|i| record(&format!("r{i}"), None, None))
        .collect();
    s.record_executions(&records).expect("insert");
    let rows = s.executions(&ExecutionFilter::default()).expect("read");
    assert_eq!(rows.len(), DEFAULT_EXECUTION_LIMIT);
    assert_eq!(rows[0].record.rule_id, "r149");
}

fn a_bare_rule_id_finds_the_rule_in_any_plugin(db: &TestDb) {
    let s = db.open();
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
    assert!(rules("%").is_empty(), "a pattern character is a character");
}

fn store_works_from_two_threads(db: &TestDb) {
    let s = db.open_arc();
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
    let log = s
        .executions(&ExecutionFilter {
            limit: Some(1000),
            ..Default::default()
        })
        .expect("log");
    assert_eq!(log.len(), 100);
}

fn two_stores_on_one_database_share_data(db: &TestDb) {
    let a = db.open();
    let b = db.open();
    let sc = scope("u", "p", "x");
    apply_ok(
        &a,
        &[vec![StateWrite::set(sc.clone(), "k", json!("from a"))]],
    );
    assert_eq!(b.state_get(&sc, "k").expect("get"), Some(json!("from a")));
}

fn toggles_round_trip_and_report_changes(db: &TestDb) {
    let s = db.open();
    assert!(s.toggles().unwrap().is_empty());
    assert!(
        s.set_toggle("ann", "research/cite", Some(RuleState::Off))
            .unwrap()
    );
    assert!(
        !s.set_toggle("ann", "research/cite", Some(RuleState::Off))
            .unwrap()
    );
    assert!(
        s.set_toggle("ann", "research/cite", Some(RuleState::On))
            .unwrap()
    );
    // The third state: a rule in shadow. Changing between on and shadow is a change.
    assert!(
        s.set_toggle("ann", "research/cite", Some(RuleState::Shadow))
            .unwrap()
    );
    assert!(
        !s.set_toggle("ann", "research/cite", Some(RuleState::Shadow))
            .unwrap()
    );
    assert_eq!(s.toggles().unwrap()[0].state, RuleState::Shadow);
    assert!(
        s.set_toggle("ann", "research/cite", Some(RuleState::On))
            .unwrap()
    );
    assert!(s.set_toggle("bob", "x", Some(RuleState::Off)).unwrap());
    assert!(s.set_toggle("Zed", "x", Some(RuleState::Off)).unwrap());
    let t = s.toggles().unwrap();
    assert_eq!(t.len(), 3);
    // Byte order, on both back ends.
    let users: Vec<&str> = t.iter().map(|t| t.user_id.as_str()).collect();
    assert_eq!(users, ["Zed", "ann", "bob"]);
    assert_eq!(
        (t[1].user_id.as_str(), t[1].rule_id.as_str(), t[1].state),
        ("ann", "research/cite", RuleState::On)
    );
    assert!(s.set_toggle("ann", "research/cite", None).unwrap());
    assert!(!s.set_toggle("ann", "research/cite", None).unwrap());
    assert_eq!(s.toggles().unwrap().len(), 2);
}

fn overrides_round_trip(db: &TestDb) {
    let s = db.open();
    s.set_override(
        "ann",
        ALL_PROJECTS,
        "builtin",
        "token_threshold",
        Some(&json!(0.9)),
    )
    .unwrap();
    s.set_override("ann", "p1", "builtin", "token_threshold", Some(&json!(0.7)))
        .unwrap();
    s.set_override(
        "ann",
        "p1",
        "builtin",
        "token_threshold",
        Some(&json!(0.75)),
    )
    .unwrap();
    let o = s.overrides().unwrap();
    assert_eq!(o.len(), 2);
    assert_eq!(
        (o[0].project_id.as_str(), &o[0].value),
        (ALL_PROJECTS, &json!(0.9))
    );
    assert_eq!(
        (o[1].project_id.as_str(), &o[1].value),
        ("p1", &json!(0.75))
    );
    assert!(
        s.set_override("ann", "p1", "builtin", "token_threshold", None)
            .unwrap()
    );
    assert_eq!(s.overrides().unwrap().len(), 1);
    // Several at once, in one transaction: two set, one removed.
    let changed = s
        .set_overrides(
            "ann",
            "p2",
            "research",
            &[
                ("a", Some(&json!(1))),
                ("b", Some(&json!("x"))),
                ("c", None),
            ],
        )
        .unwrap();
    assert_eq!(changed, 2);
    let o = s.overrides().unwrap();
    let p2: Vec<(&str, &serde_json::Value)> = o
        .iter()
        .filter(|o| o.project_id == "p2")
        .map(|o| (o.name.as_str(), &o.value))
        .collect();
    assert_eq!(p2, [("a", &json!(1)), ("b", &json!("x"))]);
    s.set_overrides("ann", "p2", "research", &[("a", None), ("b", None)])
        .unwrap();
    assert_eq!(s.overrides().unwrap().len(), 1);
}

fn a_corrupt_override_names_itself(db: &TestDb) {
    let s = db.open();
    let insert = "INSERT INTO setting_override (user_id, project_id, plugin_id, name, value_json) \
                  VALUES ('ann', '*', 'p', 'limit', '{not json')";
    db.exec(&s, insert, insert);
    let e = s.overrides().unwrap_err().to_string();
    assert!(
        e.contains("limit") && e.contains("ann") && e.contains("`p`"),
        "{e}"
    );
}

/// What another process changes in users' choices is noticed through `data_version`:
/// SQLite's counter of other connections' commits, PostgreSQL's notifications (heard by a
/// listener on its own thread: waited for, since how soon is up to the machine).
fn another_stores_changes_are_noticed(db: &TestDb) {
    let a = db.open();
    let b = db.open();
    let before = a.data_version().unwrap();
    if db.backend == Backend::Sqlite {
        a.set_toggle("ann", "x", Some(RuleState::Off)).unwrap();
        assert_eq!(a.data_version().unwrap(), before, "own writes do not count");
    } else {
        // The listener is in place (its connection counts once), then quiet.
        assert!(
            eventually(|| a.data_version().unwrap() != before),
            "the listener never connected"
        );
    }
    for change in 0..2 {
        let seen = a.data_version().unwrap();
        if change == 0 {
            b.set_toggle("ann", "y", Some(RuleState::Off)).unwrap();
        } else {
            b.set_override("ann", "*", "p", "n", Some(&json!(1)))
                .unwrap();
        }
        assert!(
            eventually(|| a.data_version().unwrap() != seen),
            "change {change} was never noticed"
        );
    }
    assert!(a.toggles().unwrap().iter().any(|t| t.rule_id == "y"));
}

/// A tick's read-modify-write holds its lock from its read to its commit: two connections
/// (as two processes or two nodes would) incrementing one counter lose no update.
fn ticks_on_two_connections_lose_no_update(db: &TestDb) {
    let sc = scope("ann", "p", "counter");
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let mut s = db.open();
            let sc = sc.clone();
            std::thread::spawn(move || {
                s.set_lock_timeout(Duration::from_secs(30))
                    .expect("timeout");
                for _ in 0..300 {
                    let tx = s.tick();
                    let n = tx
                        .state_all(&sc)
                        .expect("read")
                        .get("n")
                        .and_then(Value::as_i64)
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
    let s = db.open();
    assert_eq!(s.state_get(&sc, "n").expect("read"), Some(json!(600)));
}

/// Two connections ticking one durable session, as two nodes would: each tick reads the
/// session's version under the tick's lock and catches up when the other saved, so no save
/// conflicts and none is lost, the very first (which creates the row) included.
fn two_connections_ticking_one_session_take_turns(db: &TestDb) {
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let mut s = db.open();
            std::thread::spawn(move || {
                s.set_lock_timeout(Duration::from_secs(30))
                    .expect("timeout");
                let (mut version, mut count) = (None, 0u64);
                for _ in 0..150 {
                    let tx = s.tick();
                    tx.begin().expect("begin");
                    let saved = tx.session_version("shared").expect("version");
                    if saved != version {
                        let stored = tx.load_session("shared").expect("load").expect("row");
                        count = stored.snapshot.parse().expect("a count");
                        version = saved;
                    }
                    count += 1;
                    let text = count.to_string();
                    let w = SessionWrite {
                        loaded: version,
                        events: count,
                        ..write("shared", None, &text)
                    };
                    version = tx.commit(Some(w)).expect("no conflict");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let s = db.open();
    let stored = s.load_session("shared").unwrap().unwrap();
    assert_eq!(stored.snapshot, "300");
    assert_eq!(stored.summary.version, 300);
}

/// Another connection holding the lock a tick needs makes the tick fail after the lock
/// timeout with `Busy`, which says how long it waited; what follows in the tick fails at once,
/// alike, without trying the lock again; the tick's writes are not half-applied.
fn a_held_lock_fails_the_tick_after_its_timeout(db: &TestDb) {
    let holder = db.open();
    let mut s = db.open();
    s.set_lock_timeout(Duration::from_millis(50))
        .expect("timeout");
    crate::testdb::warm(&s);
    let sc = scope("a", "p", "x");
    let held = holder.tick();
    held.state_all(&sc).expect("hold the lock");
    let tx = s.tick();
    let err = tx
        .write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect_err("locked");
    assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    assert!(err.to_string().contains("waited 50 ms"), "{err}");
    // What follows in the tick fails at once, alike: it does not try the lock again, which,
    // released now, it would get at once (a tick that waited for it again would go through).
    drop(held);
    let again = tx
        .write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(2))]])
        .expect_err("still refused");
    assert!(matches!(again, StoreError::Busy { .. }), "{again}");
    let again = tx.commit(None).expect_err("still refused");
    assert!(matches!(again, StoreError::Busy { .. }), "{again}");
    assert_eq!(s.state_get(&sc, "k").expect("read"), None);
    // The next tick goes through.
    let tx = s.tick();
    tx.write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect("write");
    tx.commit(None).expect("commit");
    assert_eq!(s.state_get(&sc, "k").expect("read"), Some(json!(1)));
}

fn a_tick_dropped_uncommitted_writes_nothing(db: &TestDb) {
    let s = db.open();
    let sc = scope("a", "p", "x");
    let tx = s.tick();
    tx.write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect("write");
    tx.record_executions(&[record("r", None, None)])
        .expect("log");
    drop(tx);
    assert_eq!(s.state_get(&sc, "k").expect("read"), None);
    assert!(
        s.executions(&ExecutionFilter::default())
            .expect("log")
            .is_empty()
    );
    // The connection is fine afterwards.
    apply_ok(&s, &[vec![StateWrite::set(sc.clone(), "k", json!(2))]]);
    assert_eq!(s.state_get(&sc, "k").expect("read"), Some(json!(2)));
}

/// Fills a store with a little of everything.
fn fill(s: &Store) {
    apply_ok(
        s,
        &[vec![
            StateWrite::set(scope("ann", "p", "x"), "n", json!(3)),
            StateWrite::set(scope("bob", "*", "y"), "o", json!({"k": [1, "✓"]})),
        ]],
    );
    s.set_toggle("ann", "research/cite", Some(RuleState::Off))
        .unwrap();
    s.set_override("ann", ALL_PROJECTS, "builtin", "t", Some(&json!(0.5)))
        .unwrap();
    save(s, write("s1", None, "{\"snapshot\":\"é\"}")).unwrap();
    save(
        s,
        SessionWrite {
            entries: &[entry(0, 0, "{\"é\":1}"), entry(1, 3, "[]")],
            ..write("s1", Some(1), "{\"snapshot\":\"é2\"}")
        },
    )
    .unwrap();
    let records: Vec<_> = (0..2500)
        .map(|i| record(&format!("r{i}"), Some("s1"), (i % 7 == 0).then_some("e")))
        .collect();
    s.record_executions(&records).unwrap();
}

/// Copying a store (into the same kind, and into the other kind when PostgreSQL is there)
/// moves every row as it is, the execution log across pages, and the copy goes on working.
fn a_copy_holds_every_row(db: &TestDb) {
    let source = db.open();
    fill(&source);
    let mut targets = vec![TestDb::sqlite()];
    targets.extend(TestDb::postgres());
    for target_db in &targets {
        let target = target_db.open();
        let report = source.copy_to(&target, false).expect("copy");
        assert_eq!(
            report,
            CopyReport {
                state: 2,
                toggles: 1,
                overrides: 1,
                sessions: 1,
                executions: 2500,
            }
        );
        assert_eq!(target.dump(), source.dump());
        let all = ExecutionFilter {
            limit: Some(5000),
            ..Default::default()
        };
        assert_eq!(
            target.executions(&all).unwrap(),
            source.executions(&all).unwrap()
        );
        // New rows continue after the copied ids; the session carries on at its version.
        target
            .record_executions(&[record("after", None, None)])
            .unwrap();
        let newest = &target.executions(&ExecutionFilter::default()).unwrap()[0];
        assert_eq!(newest.record.rule_id, "after");
        assert_eq!(save(&target, write("s1", Some(2), "3")).unwrap(), 3);
        apply_ok(
            &target,
            &[vec![StateWrite::set(scope("ann", "p", "x"), "m", json!(1))]],
        );
    }
}

fn a_copy_refuses_a_target_that_holds_data(db: &TestDb) {
    let source = db.open();
    fill(&source);
    let target_db = TestDb::sqlite();
    let target = target_db.open();
    target.set_toggle("zed", "x", Some(RuleState::On)).unwrap();
    let err = source.copy_to(&target, false).expect_err("refused");
    assert!(matches!(err, StoreError::NotEmpty { .. }), "{err}");
    assert!(
        err.to_string().contains("(1 rule toggle)") && err.to_string().contains("--replace"),
        "{err}"
    );
    assert_eq!(target.toggles().unwrap().len(), 1, "nothing was written");
    let report = source.copy_to(&target, true).expect("replace");
    assert_eq!(report.toggles, 1);
    assert_eq!(target.dump(), source.dump());
    // A store is never copied into itself.
    let err = source.copy_to(&source, true).expect_err("itself");
    assert!(err.to_string().contains("same database"), "{err}");
}

/// What users, projects, keys and session ids may hold (they come from events and payloads)
/// is data: quotes, SQL, `LIKE` patterns, any script, long text. A NUL character, which
/// PostgreSQL cannot store in text, fails the write plainly there, never the process.
fn hostile_strings_are_only_data(db: &TestDb) {
    let s = db.open();
    let nasty = [
        "'; DROP TABLE plugin_state; --",
        "\" OR 1=1 --",
        "%_\\",
        "ünïcødé ✓ 🦀",
        "$1 $$ $tag$",
        &"x".repeat(10_000),
    ];
    for (i, text) in nasty.iter().enumerate() {
        let sc = scope(text, text, text);
        apply_ok(&s, &[vec![StateWrite::set(sc.clone(), *text, json!(text))]]);
        assert_eq!(s.state_get(&sc, text).unwrap(), Some(json!(text)), "{i}");
        let tx = s.tick();
        assert_eq!(tx.state_all(&sc).unwrap().len(), 1);
        tx.write_groups(&[vec![StateWrite::set(sc.clone(), *text, json!(i))]])
            .unwrap();
        tx.record_executions(&[ExecutionRecord {
            user_id: text.to_string(),
            session_id: Some(text.to_string()),
            ..record(text, None, Some(text))
        }])
        .unwrap();
        let w = SessionWrite {
            user: text,
            project: text,
            ..write(text, None, text)
        };
        assert_eq!(tx.commit(Some(w)).unwrap(), Some(1));
        assert_eq!(s.load_session(text).unwrap().unwrap().snapshot, *text);
        assert!(s.set_toggle(text, text, Some(RuleState::Off)).unwrap());
        let found = s
            .executions(&ExecutionFilter {
                rule_id: Some(text.to_string()),
                session_id: Some(text.to_string()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(found.len(), 1, "{i}");
    }
    assert_eq!(s.toggles().unwrap().len(), nasty.len());
    let sc = scope("nul\0user", "p", "x");
    let result = s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]]);
    match db.backend {
        Backend::Sqlite => assert!(result.unwrap()[0].is_ok()),
        Backend::Postgres => {
            let e = result
                .expect_err("PostgreSQL text holds no NUL")
                .to_string();
            assert!(e.contains("0x00"), "{e}");
        }
    }
    // The store goes on working.
    apply_ok(
        &s,
        &[vec![StateWrite::set(scope("a", "b", "c"), "k", json!(1))]],
    );
}
