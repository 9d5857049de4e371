//! Durable sessions in the store: rows, versions, entries, saves in batches (run against both
//! back ends, as the rest of the suite).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use serde_json::json;

use crate::testdb::TestDb;
use crate::*;

pub(super) fn write<'a>(id: &'a str, loaded: Option<i64>, snapshot: &'a str) -> SessionWrite<'a> {
    SessionWrite {
        id,
        user: "ann",
        project: "p",
        loaded,
        snapshot,
        events: 3,
        ended: false,
        updated_at: 100.0,
        touch: true,
        entries: &[],
        firsts: &[],
    }
}

pub(super) fn entry(list: u8, n: i64, text: &str) -> SessionEntry {
    SessionEntry {
        list,
        n,
        text: text.to_string(),
    }
}

pub(super) fn owned(id: &str, loaded: Option<i64>, snapshot: &str) -> SessionSave {
    let w = write(id, loaded, snapshot);
    SessionSave {
        id: id.to_string(),
        user: w.user.to_string(),
        project: w.project.to_string(),
        loaded,
        snapshot: snapshot.to_string(),
        events: w.events,
        ended: w.ended,
        updated_at: w.updated_at,
        touch: w.touch,
        entries: Vec::new(),
        firsts: Vec::new(),
    }
}

/// Saves `saves` in batches; each one's result, in order, once each has been told.
pub(super) fn save_batched(store: &Store, saves: Vec<SessionSave>) -> Vec<Result<i64, StoreError>> {
    let (told, results) = std::sync::mpsc::channel();
    let n = saves.len();
    for (i, save) in saves.into_iter().enumerate() {
        let told = told.clone();
        store.save_in_batch(save, move |r| told.send((i, r)).unwrap());
    }
    drop(told);
    let mut all: Vec<_> = results.iter().collect();
    assert_eq!(all.len(), n, "every save is told once");
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

pub(super) fn save(store: &Store, w: SessionWrite<'_>) -> Result<i64, StoreError> {
    store.tick().commit(Some(w)).map(|v| v.unwrap_or(0))
}

pub(super) fn a_session_round_trips_and_its_version_grows(db: &TestDb) {
    let store = db.open();
    assert!(store.load_session("s1").unwrap().is_none());
    assert_eq!(save(&store, write("s1", None, "{\"a\":1}")).unwrap(), 1);
    assert_eq!(save(&store, write("s1", Some(1), "{\"a\":2}")).unwrap(), 2);
    let s = store.load_session("s1").unwrap().unwrap();
    assert_eq!(s.snapshot, "{\"a\":2}");
    assert_eq!(s.summary.version, 2);
    assert_eq!(s.summary.events, 3);
    assert_eq!(s.summary.size, 7);
    assert_eq!(store.session_version("s1").unwrap(), Some(2));
    assert_eq!(store.sessions(10).unwrap().len(), 1);
    let tx = store.tick();
    assert_eq!(tx.session_version("s1").unwrap(), Some(2));
    assert_eq!(tx.load_session("s1").unwrap(), Some(s));
    assert_eq!(tx.session_version("nobody").unwrap(), None);
}

pub(super) fn a_stale_save_is_a_conflict_and_writes_nothing(db: &TestDb) {
    let store = db.open();
    save(&store, write("s1", None, "one")).unwrap();
    save(&store, write("s1", Some(1), "two")).unwrap();
    // A process that loaded version 1 tries to save over version 2.
    let err = save(&store, write("s1", Some(1), "stale")).unwrap_err();
    assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
    // Two processes that both started a new session.
    let err = save(&store, write("s1", None, "new")).unwrap_err();
    assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
    assert_eq!(store.load_session("s1").unwrap().unwrap().snapshot, "two");
    // A conflicting tick writes none of its state either.
    let sc = StateScope::new("ann", "p", "x");
    let tx = store.tick();
    tx.write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .unwrap();
    let err = tx.commit(Some(write("s1", Some(1), "stale"))).unwrap_err();
    assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
    assert_eq!(store.state_get(&sc, "k").unwrap(), None);
}

pub(super) fn sessions_are_deleted_and_pruned(db: &TestDb) {
    let store = db.open();
    save(&store, write("old", None, "x")).unwrap();
    let mut recent = write("new", None, "y");
    recent.updated_at = 200.0;
    save(&store, recent).unwrap();
    assert_eq!(store.sessions(10).unwrap()[0].id, "new");
    assert_eq!(store.prune_sessions(150.0).unwrap(), 1);
    assert!(store.load_session("old").unwrap().is_none());
    assert!(store.delete_session("new").unwrap());
    assert!(!store.delete_session("new").unwrap());
}

pub(super) fn entries_are_written_replaced_and_dropped_with_their_session(db: &TestDb) {
    let store = db.open();
    let first = [entry(0, 0, "m0"), entry(1, 0, "t0"), entry(1, 1, "t1")];
    save(
        &store,
        SessionWrite {
            entries: &first,
            ..write("s1", None, "h1")
        },
    )
    .unwrap();
    save(
        &store,
        SessionWrite {
            entries: &first[..1],
            ..write("other", None, "o")
        },
    )
    .unwrap();
    let s = store.load_session("s1").unwrap().unwrap();
    assert_eq!(s.entries, first);
    assert_eq!(s.summary.size, 2 + 6);
    // The pending tool call completes (replaced), one more arrives, the first message drops.
    let second = [entry(1, 1, "t1 done"), entry(1, 2, "t2")];
    let v = save(
        &store,
        SessionWrite {
            entries: &second,
            firsts: &[(0, 1)],
            ..write("s1", Some(1), "h2")
        },
    )
    .unwrap();
    assert_eq!(v, 2);
    let in_tick = store.tick().load_session("s1").unwrap().unwrap();
    assert_eq!(
        in_tick.entries,
        [entry(1, 0, "t0"), entry(1, 1, "t1 done"), entry(1, 2, "t2")]
    );
    assert_eq!(store.load_session("s1").unwrap().unwrap(), in_tick);
    // A stale save writes none of its entries.
    let stale = [entry(1, 0, "stale")];
    let err = save(
        &store,
        SessionWrite {
            entries: &stale,
            firsts: &[(1, 5)],
            ..write("s1", Some(1), "x")
        },
    )
    .unwrap_err();
    assert!(matches!(err, StoreError::SessionConflict { .. }), "{err}");
    assert_eq!(
        store.load_session("s1").unwrap().unwrap().entries,
        in_tick.entries
    );
    // Entries go with their session, and only theirs.
    assert!(store.delete_session("s1").unwrap());
    save(&store, write("s1", None, "again")).unwrap();
    assert!(
        store
            .load_session("s1")
            .unwrap()
            .unwrap()
            .entries
            .is_empty()
    );
    assert_eq!(
        store.load_session("other").unwrap().unwrap().entries.len(),
        1
    );
    let mut old = write("gone", None, "g");
    old.updated_at = 10.0;
    save(
        &store,
        SessionWrite {
            entries: &first,
            ..old
        },
    )
    .unwrap();
    assert_eq!(store.prune_sessions(50.0).unwrap(), 1);
    save(&store, write("gone", None, "back")).unwrap();
    assert!(
        store
            .load_session("gone")
            .unwrap()
            .unwrap()
            .entries
            .is_empty()
    );
}

pub(super) fn updated_at_is_left_as_stored_when_not_touched(db: &TestDb) {
    let store = db.open();
    save(&store, write("s1", None, "a")).unwrap();
    let mut later = write("s1", Some(1), "b");
    later.updated_at = 100.5;
    later.touch = false;
    save(&store, later).unwrap();
    let row = store.load_session("s1").unwrap().unwrap();
    assert_eq!(
        (row.snapshot.as_str(), row.summary.updated_at),
        ("b", 100.0)
    );
    let mut touched = write("s1", Some(2), "c");
    touched.updated_at = 102.0;
    save(&store, touched).unwrap();
    assert_eq!(
        store
            .load_session("s1")
            .unwrap()
            .unwrap()
            .summary
            .updated_at,
        102.0
    );
    // A new row always gets its time.
    let mut fresh = write("s2", None, "x");
    fresh.touch = false;
    fresh.updated_at = 7.0;
    save(&store, fresh).unwrap();
    assert_eq!(
        store
            .load_session("s2")
            .unwrap()
            .unwrap()
            .summary
            .updated_at,
        7.0
    );
}

pub(super) fn batched_saves_are_committed_and_each_told_once(db: &TestDb) {
    let store = db.open();
    let firsts = (0..20)
        .map(|i| owned(&format!("s{i}"), None, "one"))
        .collect();
    assert!(
        save_batched(&store, firsts)
            .iter()
            .all(|r| matches!(r, Ok(1)))
    );
    let seconds = (0..20)
        .map(|i| owned(&format!("s{i}"), Some(1), &format!("two {i}")))
        .collect();
    assert!(
        save_batched(&store, seconds)
            .iter()
            .all(|r| matches!(r, Ok(2)))
    );
    let other = db.open();
    for i in 0..20 {
        let row = other.load_session(&format!("s{i}")).unwrap().unwrap();
        assert_eq!((row.snapshot, row.summary.version), (format!("two {i}"), 2));
    }
}

pub(super) fn a_batched_save_over_a_newer_version_fails_alone(db: &TestDb) {
    let store = db.open();
    save(&store, write("taken", None, "theirs")).unwrap();
    save(&store, write("taken", Some(1), "theirs again")).unwrap();
    let results = save_batched(
        &store,
        vec![
            owned("a", None, "a"),
            owned("taken", Some(1), "stale"),
            owned("taken2", None, "b"),
        ],
    );
    assert!(matches!(results[0], Ok(1)), "{:?}", results[0]);
    assert!(
        matches!(results[1], Err(StoreError::SessionConflict { .. })),
        "{:?}",
        results[1]
    );
    assert!(matches!(results[2], Ok(1)), "{:?}", results[2]);
    assert_eq!(
        store.load_session("taken").unwrap().unwrap().snapshot,
        "theirs again"
    );
    assert_eq!(store.load_session("a").unwrap().unwrap().snapshot, "a");
}

pub(super) fn batched_saves_still_queued_are_committed_when_the_store_is_dropped(db: &TestDb) {
    let store = db.open();
    let told = Arc::new(AtomicUsize::new(0));
    for i in 0..200 {
        let told = told.clone();
        store.save_in_batch(owned(&format!("s{i}"), None, "x"), move |r| {
            r.unwrap();
            told.fetch_add(1, AtomicOrdering::SeqCst);
        });
    }
    drop(store);
    assert_eq!(told.load(AtomicOrdering::SeqCst), 200);
    assert_eq!(db.open().sessions(1000).unwrap().len(), 200);
}

pub(super) fn a_batch_that_cannot_begin_fails_every_save_and_writes_none(db: &TestDb) {
    let mut store = db.open();
    store.set_lock_timeout(Duration::from_millis(100)).unwrap();
    crate::testdb::warm(&store);
    // Another connection holds the write lock (PostgreSQL: the sessions' rows).
    let holder = db.open();
    save(&holder, write("held", None, "h")).unwrap();
    let tx = holder.tick();
    tx.session_version("held").unwrap();
    tx.begin().unwrap();
    let results = save_batched(&store, vec![owned("held", Some(1), "mine")]);
    drop(tx);
    let e = results[0].as_ref().unwrap_err();
    assert!(matches!(e, StoreError::Busy { .. }), "{e}");
    assert_eq!(store.load_session("held").unwrap().unwrap().snapshot, "h");
}
