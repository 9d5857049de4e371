//! What only SQLite has: a file (WAL, foreign keys), a header that may be garbage, values that
//! may not be text, one connection behind a mutex.

use std::sync::Arc;

use serde_json::json;

use super::SqliteStore;
use super::tick::SqliteTick;
use crate::{Backend, ExecutionFilter, ExecutionRecord, StateScope, StateWrite, Store, StoreError};

/// A store that leaves its log to the next process ([`Store::checkpoint_past`]) loses
/// nothing: what it committed is read back from the log by the next store; the store that finds
/// the log past its size checkpoints and empties it; one that checkpoints at close removes it.
#[test]
fn a_log_left_to_the_next_process_is_read_back_and_emptied_past_its_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    let wal = dir.path().join("warden.db-wal");
    let sc = StateScope::new("u", "p", "x");
    let write = |n: usize| {
        let mut s = Store::open(&path).expect("open");
        s.checkpoint_past(8).expect("defer");
        // About a page a value.
        let big = "x".repeat(3000);
        let writes: Vec<_> = (0..n)
            .map(|i| vec![StateWrite::set(sc.clone(), format!("k{i}"), json!(big))])
            .collect();
        s.apply_writes(&writes).expect("write");
    };
    // Created (its schema checkpointed at close) by a store of the default kind.
    drop(Store::open(&path).expect("create"));
    write(1);
    let left = std::fs::metadata(&wal).expect("the log is left").len();
    assert!(left > 0, "the log holds the commit");
    {
        let s = Store::open(&path).expect("reopen");
        assert_eq!(
            s.state_get(&sc, "k0").expect("get"),
            Some(json!("x".repeat(3000)))
        );
        // A store that checkpoints at close (the default) does, and removes the log.
    }
    assert!(!wal.exists(), "checkpointed at close");
    write(1);
    write(1);
    assert!(std::fs::metadata(&wal).expect("left").len() > 0);
    // Past eight pages: the store that closes checkpoints the log and empties it.
    write(20);
    assert_eq!(std::fs::metadata(&wal).expect("kept").len(), 0);
    let s = Store::open(&path).expect("reopen");
    for i in 0..20 {
        assert!(s.state_get(&sc, &format!("k{i}")).expect("get").is_some());
    }
    assert_eq!(s.check_integrity().expect("check"), Vec::<String>::new());
}

/// A store that checkpoints in the background copies the log into the file on its own thread
/// (commits no longer do), and stops that thread when it is dropped.
#[test]
fn a_background_checkpoint_copies_the_log_and_stops_with_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    let sc = StateScope::new("u", "p", "x");
    let s = Store::open(&path).expect("open");
    s.checkpoint_in_background(std::time::Duration::from_millis(10))
        .expect("start");
    s.checkpoint_in_background(std::time::Duration::from_millis(10))
        .expect("a second start is a no-op");
    // Commits write to the log only; the database file grows when the log is copied into it,
    // which no commit does any more.
    let before = std::fs::metadata(&path).expect("file").len();
    let big = "x".repeat(3000);
    for i in 0..50 {
        s.apply_writes(&[vec![StateWrite::set(
            sc.clone(),
            format!("k{i}"),
            json!(big),
        )]])
        .expect("write");
    }
    let copied = crate::testdb::eventually(|| {
        std::fs::metadata(&path).expect("file").len() >= before + 50 * 3000
    });
    assert!(
        copied,
        "the log was never copied into the file by the background thread"
    );
    drop(s);
    let s = Store::open(&path).expect("reopen");
    assert_eq!(
        s.state_get(&sc, "k49").expect("get"),
        Some(json!("x".repeat(3000)))
    );
}

/// Under a steady stream of commits, background checkpoints (which never wait for a writer)
/// never catch up, and the log would grow without end: past its bound the log starts over, so
/// the file stays near that size.
///
/// The commits, of two pages each, come a millisecond apart: a round of checkpoints comes
/// every 10 ms, so commits land in the middle of them. At most twenty come between two waits
/// for a finished round: however late the machine runs the checkpoint thread, no more than
/// forty-odd commits come between two rounds, and the log never holds more than their pages
/// past its bound of 64. Without the restart, the 600 commits leave it at 1,200 pages.
#[test]
fn a_background_checkpoint_starts_the_log_over_under_steady_commits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("warden.db");
    let wal = dir.path().join("warden.db-wal");
    let sc = StateScope::new("u", "p", "x");
    let big = "x".repeat(3000);
    // The keys are made first (their first writes take several pages each), by a store that
    // empties the log when it closes.
    let made: Vec<_> = (0..50)
        .map(|k| StateWrite::set(sc.clone(), format!("k{k}"), json!(big)))
        .collect();
    Store::open(&path)
        .expect("create")
        .apply_writes(&[made])
        .expect("make the keys");
    assert!(!wal.exists(), "the log was emptied at close");
    let s = Store::open(&path).expect("open");
    s.checkpoint_in_background_past(std::time::Duration::from_millis(10), 64)
        .expect("start");
    let crate::Inner::Sqlite(db) = &s.backend else {
        unreachable!("a SQLite store")
    };
    let mut finished = db.checkpoint_rounds();
    for i in 0..600 {
        if i % 20 == 19 {
            // A hang detector: the checkpoint thread finishes a round every 10 ms or so.
            assert!(
                crate::testdb::eventually(|| db.checkpoint_rounds() > finished),
                "the checkpoint thread finished no round"
            );
            finished = db.checkpoint_rounds();
        }
        s.apply_writes(&[vec![StateWrite::set(
            sc.clone(),
            format!("k{}", i % 50),
            json!(format!("{big}{i}")),
        )]])
        .expect("write");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let frames = std::fs::metadata(&wal).expect("log").len() / (4096 + 24);
    assert!(frames < 300, "the log grew to {frames} pages");
    drop(s);
    let s = Store::open(&path).expect("reopen");
    assert_eq!(
        s.state_get(&sc, "k49").expect("get"),
        Some(json!(format!("{big}599")))
    );
    assert_eq!(s.check_integrity().expect("check"), Vec::<String>::new());
}

fn save_of(id: &str, loaded: Option<i64>, entry: &str) -> crate::SessionSave {
    crate::SessionSave {
        id: id.to_string(),
        user: "u".to_string(),
        project: "p".to_string(),
        loaded,
        snapshot: format!("head of {id}"),
        events: 1,
        ended: false,
        updated_at: 1.0,
        touch: true,
        entries: vec![crate::SessionEntry {
            list: 0,
            n: 0,
            text: entry.to_string(),
        }],
        firsts: Vec::new(),
    }
}

/// Saves in batches; each one's result, in order.
fn batch(s: &Store, saves: Vec<crate::SessionSave>) -> Vec<Result<i64, StoreError>> {
    let (told, results) = std::sync::mpsc::channel();
    for (i, save) in saves.into_iter().enumerate() {
        let told = told.clone();
        s.save_in_batch(save, move |r| told.send((i, r)).unwrap());
    }
    drop(told);
    let mut all: Vec<_> = results.iter().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

/// A save of a batch that fails half-way (its row written, one of its entries refused) leaves
/// nothing of itself: the session is as it was, and the others of the batch are saved.
#[test]
fn a_save_that_fails_half_way_in_a_batch_leaves_nothing_of_itself() {
    let s = Store::in_memory().expect("store");
    s.exec(
        "CREATE TRIGGER refuse BEFORE INSERT ON session_entry WHEN NEW.entry LIKE 'bad%'
         BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END;",
    )
    .expect("trigger");
    let first = batch(&s, vec![save_of("a", None, "ok"), save_of("b", None, "ok")]);
    assert!(first.iter().all(Result::is_ok), "{first:?}");
    // Too large to stay in the row: the save moves its entries to their table, where the
    // trigger refuses this one after the row was written.
    let bad = format!("bad{}", "x".repeat(super::sessions::RECENT_MAX_BYTES));
    let second = batch(
        &s,
        vec![save_of("a", Some(1), "ok 2"), save_of("b", Some(1), &bad)],
    );
    assert!(matches!(second[0], Ok(2)), "{:?}", second[0]);
    let e = second[1].as_ref().expect_err("refused").to_string();
    assert!(e.contains("refused by a trigger"), "{e}");
    let b = s.load_session("b").expect("load").expect("saved");
    assert_eq!((b.summary.version, b.entries[0].text.as_str()), (1, "ok"));
    let a = s.load_session("a").expect("load").expect("saved");
    assert_eq!((a.summary.version, a.entries[0].text.as_str()), (2, "ok 2"));
}

/// A caller's handler that panics takes neither the batching thread nor the other saves of
/// its batch with it.
#[test]
fn a_panicking_handler_does_not_stop_the_batching_thread() {
    let s = Store::in_memory().expect("store");
    s.save_in_batch(save_of("a", None, "x"), |_| panic!("a handler's bug"));
    let after = batch(&s, vec![save_of("b", None, "y"), save_of("c", None, "z")]);
    assert!(after.iter().all(|r| matches!(r, Ok(1))), "{after:?}");
    assert!(s.load_session("a").expect("load").is_some());
}

#[test]
fn a_file_store_persists_across_reopen_in_wal_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join("warden.db");
    let sc = StateScope::new("u", "p", "x");
    {
        let s = SqliteStore::open(&path, crate::DEFAULT_LOCK_TIMEOUT).expect("open");
        assert_eq!(s.path(), Some(path.as_path()));
        let conn = s.lock();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .expect("mode");
        assert_eq!(mode, "wal");
        let fk: i64 = conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .expect("fk");
        assert_eq!(fk, 1);
        drop(conn);
        s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!({"n": 1}))]])
            .expect("write");
    }
    let s = Store::open(&path).expect("reopen");
    assert_eq!(s.backend(), Backend::Sqlite);
    assert_eq!(s.label(), path.display().to_string());
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!({"n": 1})));
    assert_eq!(s.check_integrity().expect("check"), Vec::<String>::new());
}

#[test]
fn a_garbage_file_is_an_open_error_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("not-a.db");
    std::fs::write(&path, vec![b'x'; 4096]).expect("write");
    let err = Store::open(&path).expect_err("garbage");
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains("not-a.db"), "{err}");
}

#[test]
fn a_value_that_is_not_text_is_corrupt() {
    let s = SqliteStore::in_memory().expect("store");
    let sc = StateScope::new("u", "p", "x");
    s.apply_writes(&[vec![StateWrite::set(sc.clone(), "bad", json!(1))]])
        .expect("write");
    s.exec("UPDATE plugin_state SET value_json = x'00'")
        .expect("blob");
    let err = s.state_get(&sc, "bad").expect_err("blob");
    assert!(err.to_string().contains("Blob"), "{err}");
}

#[test]
fn a_poisoned_mutex_is_recovered() {
    let s = Arc::new(SqliteStore::in_memory().expect("store"));
    let s2 = Arc::clone(&s);
    let joined = std::thread::spawn(move || {
        let _guard = s2.conn.lock();
        panic!("poison the mutex");
    })
    .join();
    assert!(joined.is_err());
    assert!(s.conn.is_poisoned());
    let sc = StateScope::new("u", "p", "x");
    s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect("write");
    assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(1)));
    assert!(
        s.executions(&ExecutionFilter::default())
            .expect("log")
            .is_empty()
    );
}

#[test]
fn a_path_that_looks_like_nothing_special_is_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A folder named `postgres:` is still a folder.
    let path = dir.path().join("postgres:").join("w.db");
    let s = Store::open(&path).expect("open");
    assert_eq!(s.backend(), Backend::Sqlite);
    assert!(path.is_file());
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
    let s = SqliteStore::in_memory().expect("store");
    let sc = StateScope::new("a", "p", "x");
    s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
        .expect("seed");
    // A connection that may not write stands for a read-only or damaged file.
    s.exec("PRAGMA query_only = 1").expect("query_only");
    let tx = SqliteTick::new(&s);
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
        shadow: false,
        live_decision: None,
    }]);
    assert!(matches!(log, Err(StoreError::Refused { .. })), "{log:?}");
    let commit = tx.commit(None).expect_err("the commit says so");
    assert!(
        commit.to_string().contains("refused this tick's writes")
            && commit.to_string().contains("readonly"),
        "{commit}"
    );
    s.exec("PRAGMA query_only = 0").expect("query_only off");
    assert_eq!(s.state_get(&sc, "k").expect("read"), Some(json!(1)));
    assert!(
        s.executions(&ExecutionFilter::default())
            .expect("log")
            .is_empty()
    );
}

/// A save of session `id` loaded at `loaded`, with these entries and list fronts.
fn with_entries(
    id: &str,
    loaded: Option<i64>,
    entries: &[(u8, i64, &str)],
    firsts: &[(u8, i64)],
) -> crate::SessionSave {
    crate::SessionSave {
        entries: entries
            .iter()
            .map(|&(list, n, text)| crate::SessionEntry {
                list,
                n,
                text: text.to_string(),
            })
            .collect(),
        firsts: firsts.to_vec(),
        ..save_of(id, loaded, "")
    }
}

/// What the store holds of session `id`: its entries as loaded, its size, how many rows of
/// `session_entry` it has and whether its row holds newest entries.
fn held(s: &Store, id: &str) -> (Vec<(u8, i64, String)>, u64, i64, bool) {
    let loaded = s.load_session(id).expect("load").expect("saved");
    let listed = s.sessions(10).expect("list");
    let size = listed.iter().find(|m| m.id == id).expect("listed").size;
    assert_eq!(size, loaded.summary.size, "the listing and the load agree");
    let crate::Inner::Sqlite(db) = &s.backend else {
        unreachable!("a SQLite store")
    };
    let conn = db.lock();
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM session_entry WHERE session_id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("rows");
    let in_row: bool = conn
        .query_row(
            "SELECT recent IS NOT NULL FROM session WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .expect("recent");
    let entries = loaded
        .entries
        .into_iter()
        .map(|e| (e.list, e.n, e.text))
        .collect();
    (entries, size, rows, in_row)
}

/// A session's newest entries stay in its row (a save writes one page) until they pass the
/// budget, then move to `session_entry` together; an entry replaced after it moved, and a list
/// whose front was dropped, read the same wherever the entries are; the dropped rows go when the
/// entries next move. The size counts the text of what is read, once.
#[test]
fn newest_entries_stay_in_the_row_until_they_move_together() {
    let s = Store::in_memory().expect("store");
    let big = "x".repeat(super::sessions::RECENT_MAX_BYTES / 3);
    let owned = |v: &[(u8, i64, &str)]| -> Vec<(u8, i64, String)> {
        v.iter().map(|&(l, n, t)| (l, n, t.to_string())).collect()
    };
    let head = "head of s".len() as u64;

    let r = batch(
        &s,
        vec![with_entries("s", None, &[(0, 0, "m0"), (1, 0, "t0")], &[])],
    );
    assert!(matches!(r[0], Ok(1)), "{r:?}");
    let (entries, size, rows, in_row) = held(&s, "s");
    assert_eq!(entries, owned(&[(0, 0, "m0"), (1, 0, "t0")]));
    assert_eq!((size, rows, in_row), (head + 4, 0, true));

    // Past the budget: everything moves, the row holds none.
    let r = batch(
        &s,
        vec![with_entries(
            "s",
            Some(1),
            &[(1, 1, &big), (1, 2, &big), (1, 3, &big)],
            &[],
        )],
    );
    assert!(matches!(r[0], Ok(2)), "{r:?}");
    let (entries, size, rows, in_row) = held(&s, "s");
    let moved = [
        (0, 0, "m0"),
        (1, 0, "t0"),
        (1, 1, &big[..]),
        (1, 2, &big[..]),
        (1, 3, &big[..]),
    ];
    assert_eq!(entries, owned(&moved));
    assert_eq!(
        (size, rows, in_row),
        (head + 4 + 3 * big.len() as u64, 5, false)
    );

    // One moved entry replaced, list 1's front dropped to 2: read at once, rows kept for now.
    let r = batch(
        &s,
        vec![with_entries("s", Some(2), &[(0, 0, "m0 again")], &[(1, 2)])],
    );
    assert!(matches!(r[0], Ok(3)), "{r:?}");
    let (entries, size, rows, _) = held(&s, "s");
    let now = [(0, 0, "m0 again"), (1, 2, &big[..]), (1, 3, &big[..])];
    assert_eq!(entries, owned(&now));
    assert_eq!((size, rows), (head + 8 + 2 * big.len() as u64, 5));

    // The next move writes the replacement and deletes the dropped rows.
    let r = batch(
        &s,
        vec![with_entries(
            "s",
            Some(3),
            &[(1, 4, &big), (1, 5, &big), (1, 6, &big)],
            &[],
        )],
    );
    assert!(matches!(r[0], Ok(4)), "{r:?}");
    let (entries, _, rows, _) = held(&s, "s");
    let last = [
        (0, 0, "m0 again"),
        (1, 2, &big[..]),
        (1, 3, &big[..]),
        (1, 4, &big[..]),
        (1, 5, &big[..]),
        (1, 6, &big[..]),
    ];
    assert_eq!(entries, owned(&last));
    assert_eq!(rows, 6);
}

/// A row whose newest entries are not what Warden writes is an error that says so (the
/// session's other reads, and the listing, still work); deleting the session clears it.
#[test]
fn a_damaged_recent_column_is_an_error_that_names_it() {
    let s = Store::in_memory().expect("store");
    let r = batch(
        &s,
        vec![
            with_entries("s", None, &[(0, 0, "m0")], &[]),
            save_of("t", None, "ok"),
        ],
    );
    assert!(r.iter().all(Result::is_ok), "{r:?}");
    for damage in [
        r#"{"e": [[0, "zero""#,
        r#"{"e": ["abc"], "f": [{"x": 1}]}"#,
        "[1]",
    ] {
        s.exec(&format!(
            "UPDATE session SET recent = '{damage}' WHERE id = 's'"
        ))
        .expect("damage");
        let e = s.load_session("s").expect_err(damage).to_string();
        assert!(
            e.contains("session \"s\"")
                && e.contains("column `recent`")
                && e.contains("warden sessions delete s"),
            "{damage}: {e}"
        );
        assert_eq!(s.sessions(10).expect("the listing still works").len(), 2);
    }
    assert!(s.load_session("t").expect("the other loads").is_some());
    assert_eq!(s.session_version("s").expect("version"), Some(1));
    assert!(s.delete_session("s").expect("delete"));
}

/// A database of schema 5 (before a row held newest entries) opens, migrates, and reads its
/// sessions' entries as they were.
#[test]
fn a_schema_5_database_reads_its_entries_after_the_migration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("old.db");
    {
        let conn = rusqlite::Connection::open(&path).expect("open");
        for sql in &super::migrations::MIGRATIONS[..5] {
            conn.execute_batch(sql).expect("old schema");
        }
        conn.pragma_update(None, "user_version", 5)
            .expect("version");
        conn.execute_batch(
            "INSERT INTO session (id, user_id, project_id, version, snapshot, events, updated_at)
                 VALUES ('old', 'u', 'p', 3, 'head', 3, 1.0);
             INSERT INTO session_entry VALUES ('old', 1, 0, 't0'), ('old', 1, 1, 't1');",
        )
        .expect("old rows");
    }
    let s = Store::open_sqlite(&path).expect("migrates");
    let (entries, size, rows, in_row) = held(&s, "old");
    assert_eq!(
        entries,
        vec![(1, 0, "t0".to_string()), (1, 1, "t1".to_string())]
    );
    assert_eq!((size, rows, in_row), (4 + 4, 2, false));
    let r = batch(
        &s,
        vec![with_entries("old", Some(3), &[(1, 2, "t2")], &[(1, 1)])],
    );
    assert!(matches!(r[0], Ok(4)), "{r:?}");
    let (entries, ..) = held(&s, "old");
    assert_eq!(
        entries,
        vec![(1, 1, "t1".to_string()), (1, 2, "t2".to_string())]
    );
}

/// What a save asks is what a load gives, wherever the entries are between moves: a list's
/// front dropped while its entries are in the row; an entry written below a first recorded in
/// the row (kept when the entries move, as the table kept it); a first that goes back down
/// (the rows before the higher one stay dropped).
#[test]
fn dropped_fronts_read_the_same_before_and_after_the_entries_move() {
    let s = Store::in_memory().expect("store");
    let big = "x".repeat(super::sessions::RECENT_MAX_BYTES);
    let texts = |id: &str| -> Vec<(u8, i64, String)> { held(&s, id).0 };
    let owned = |v: &[(u8, i64, &str)]| -> Vec<(u8, i64, String)> {
        v.iter().map(|&(l, n, t)| (l, n, t.to_string())).collect()
    };
    let saved = |save| assert!(batch(&s, vec![save])[0].is_ok());

    // In the row: the front drops there.
    saved(with_entries("a", None, &[(1, 0, "t0"), (1, 1, "t1")], &[]));
    saved(with_entries("a", Some(1), &[], &[(1, 1)]));
    assert_eq!(texts("a"), owned(&[(1, 1, "t1")]));

    // A first recorded in the row, then an entry below it, then a move.
    saved(with_entries("b", None, &[(1, 0, "t0"), (1, 6, &big)], &[]));
    assert_eq!(held(&s, "b").2, 2, "moved");
    saved(with_entries("b", Some(1), &[], &[(1, 5)]));
    saved(with_entries("b", Some(2), &[(1, 3, "t3")], &[]));
    assert_eq!(texts("b"), owned(&[(1, 3, "t3"), (1, 6, &big)]));
    saved(with_entries("b", Some(3), &[(1, 7, &big)], &[]));
    let moved = held(&s, "b");
    assert_eq!((moved.2, moved.3), (3, false), "moved, t0 deleted");
    assert_eq!(moved.0, owned(&[(1, 3, "t3"), (1, 6, &big), (1, 7, &big)]));

    // A first that goes back down keeps the higher one's drop.
    let seven: Vec<(u8, i64, &str)> = (0..7).map(|n| (1, n, "t")).collect();
    saved(with_entries("c", None, &seven, &[]));
    saved(with_entries("c", Some(1), &[(1, 7, &big)], &[]));
    assert_eq!(held(&s, "c").2, 8, "moved");
    saved(with_entries("c", Some(2), &[], &[(1, 5)]));
    saved(with_entries("c", Some(3), &[], &[(1, 3)]));
    let want = owned(&[(1, 5, "t"), (1, 6, "t"), (1, 7, &big)]);
    assert_eq!(texts("c"), want);
    saved(with_entries("c", Some(4), &[(1, 8, &big)], &[]));
    let mut after = want.clone();
    after.push((1, 8, big.clone()));
    assert_eq!(texts("c"), after);
}

/// Processes that open a database nobody made yet, all at once (Claude Code runs the hooks of
/// parallel tool calls together), each wait for the others under the lock timeout: the file's
/// creation, the switch to WAL and the migrations are waited for like any write, and every
/// store opens and writes. The lock timeout is a minute (a hang detector): what is proved is
/// that they wait for each other, not how long the default timeout lets them wait.
#[test]
fn stores_opening_a_fresh_database_at_once_all_open_and_write() {
    for round in 0..50 {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = Arc::new(dir.path().join("warden.db"));
        let barrier = Arc::new(std::sync::Barrier::new(10));
        let threads: Vec<_> = (0..10)
            .map(|i| {
                let (path, barrier) = (path.clone(), barrier.clone());
                std::thread::spawn(move || -> Result<(), StoreError> {
                    barrier.wait();
                    let store = Store::open_with_lock_timeout(&*path, crate::testdb::PATIENCE)?;
                    let sc = StateScope::new("u", "p", "x");
                    store.apply_writes(&[vec![StateWrite::set(sc, format!("k{i}"), json!(i))]])?;
                    Ok(())
                })
            })
            .collect();
        for (i, t) in threads.into_iter().enumerate() {
            if let Err(e) = t.join().expect("thread") {
                panic!("round {round}, store {i}: {e}");
            }
        }
        let store = Store::open(&*path).expect("open");
        let all = store
            .state_all(&StateScope::new("u", "p", "x"))
            .expect("read");
        assert_eq!(all.len(), 10, "round {round}: every write is there");
    }
}

/// Whether `s`'s schema is still to be made.
fn unmade(s: &Store) -> bool {
    let crate::Inner::Sqlite(db) = &s.backend else {
        unreachable!("a SQLite store")
    };
    db.is_unmade()
}

/// An in-memory store makes its schema at its first use, whichever use comes first: opening it
/// costs no migrations (a replay whose rules never touch the store does not pay for them), and
/// each way in finds its tables.
#[test]
fn an_in_memory_store_makes_its_schema_at_its_first_use() {
    let sc = StateScope::new("u", "p", "x");
    type Use<'a> = Box<dyn Fn(&Store) + 'a>;
    let uses: Vec<(&str, Use)> = vec![
        (
            "a read of state",
            Box::new(|s| {
                assert_eq!(s.state_get(&sc, "k").expect("get"), None);
            }),
        ),
        (
            "a write of state",
            Box::new(|s| {
                s.apply_writes(&[vec![StateWrite::set(sc.clone(), "k", json!(1))]])
                    .expect("write");
                assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(1)));
            }),
        ),
        (
            "a tick's read",
            Box::new(|s| {
                let tick = s.tick();
                assert_eq!(tick.state_get(&sc, "k").expect("get"), None);
                tick.commit(None).expect("commit");
            }),
        ),
        (
            "a tick's write",
            Box::new(|s| {
                let tick = s.tick();
                tick.write_groups(&[vec![StateWrite::set(sc.clone(), "k", json!(2))]])
                    .expect("write");
                tick.commit(None).expect("commit");
                assert_eq!(s.state_get(&sc, "k").expect("get"), Some(json!(2)));
            }),
        ),
        (
            "a tick that touches nothing, then a read",
            Box::new(|s| {
                s.tick().commit(None).expect("commit");
                assert!(unmade(s), "a tick that touched nothing made no schema");
                assert_eq!(s.state_get(&sc, "k").expect("get"), None);
            }),
        ),
        (
            "the users' choices, then a toggle",
            Box::new(|s| {
                // Read at every start: an unmade schema holds none, and makes none.
                assert!(s.toggles().expect("toggles").is_empty());
                assert!(s.overrides().expect("overrides").is_empty());
                assert!(unmade(s), "reading no choices made no schema");
                assert!(
                    s.set_toggle("u", "r", Some(crate::RuleState::Off))
                        .expect("toggle")
                );
                assert_eq!(s.toggles().expect("toggles").len(), 1);
            }),
        ),
        (
            "the saved sessions",
            Box::new(|s| {
                assert!(s.sessions(10).expect("sessions").is_empty());
                assert_eq!(s.load_session("a").expect("load"), None);
            }),
        ),
        (
            "the schema's version",
            Box::new(|s| {
                assert_eq!(
                    s.schema_version().expect("version"),
                    super::migrations::latest_version()
                );
            }),
        ),
        (
            "a save in a batch",
            Box::new(|s| {
                let (tx, rx) = std::sync::mpsc::channel();
                let save = crate::SessionSave {
                    id: "a".into(),
                    snapshot: "{}".into(),
                    ..Default::default()
                };
                s.save_in_batch(save, move |r| tx.send(r).expect("send"));
                assert_eq!(rx.recv().expect("saved").expect("the save"), 1);
                assert!(s.load_session("a").expect("load").is_some());
            }),
        ),
    ];
    for (what, use_it) in uses {
        let s = Store::in_memory().expect("open");
        assert!(unmade(&s), "{what}: no schema made at open");
        use_it(&s);
        assert!(!unmade(&s), "{what}: the schema was made");
    }
}

/// A file's schema is made when it opens, where a migration's failure belongs.
#[test]
fn a_file_store_makes_its_schema_when_it_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Store::open(dir.path().join("warden.db")).expect("open");
    assert!(!unmade(&s));
}
