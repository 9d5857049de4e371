//! Durable sessions: a session saved after every tick and read back before the next behaves
//! exactly as one that never stopped. Random traces over a rule set that uses every kind of
//! session memory (plugin state, decorators, exclusive groups, notifications waiting for their
//! delivery point, a behavior waiting across hooks and turns, a Lua script waiting across
//! hooks and turns with globals and random numbers, modes with hysteresis, decisions) are
//! replayed three times: once straight through, once with a save and a read-back between every
//! pair of events, and once as a Claude Code hook runs them (each event in a Warden of its
//! own, its rules compiled on demand, over a database file whose write-ahead log is left to the
//! next one). The outcomes must be identical.

use std::path::Path;

use proptest::prelude::*;
use serde_json::json;
use warden_core::{Event, Hook, SessionOptions, Store, Warden};
use warden_wire::v1::replay::outcome_lines;

fn data() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/durable"))
}

/// The history's bound in these tests: small, so that traces drop old entries from the front
/// of both lists (saved entry by entry) as they go.
const HISTORY: usize = 4;

fn warden() -> Warden {
    let w = Warden::builder()
        .history_limit(HISTORY)
        .rules_dir(data().join("rules"))
        .modes_file(data().join("modes.toml"))
        .store(Store::in_memory().unwrap())
        .build()
        .unwrap();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:?}",
        w.diagnostics()
    );
    w
}

/// A Warden over the database file `db`, its rules compiled as a service's are.
fn warden_on(db: &Path) -> Warden {
    Warden::builder()
        .history_limit(HISTORY)
        .rules_dir(data().join("rules"))
        .modes_file(data().join("modes.toml"))
        .store(Store::open(db).unwrap())
        .build()
        .unwrap()
}

/// A Warden as a hook process builds one for its one event: the rules compiled on demand, the
/// database's log checkpointed only past a few pages (so that the traces cross checkpoints).
fn warden_for_one_event(db: &Path) -> Warden {
    let mut store = Store::open(db).unwrap();
    store.checkpoint_past(4).unwrap();
    Warden::builder()
        .history_limit(HISTORY)
        .rules_dir(data().join("rules"))
        .modes_file(data().join("modes.toml"))
        .store(store)
        .compile_on_demand(true)
        .build()
        .unwrap()
}

/// One event of a random trace.
#[derive(Debug, Clone)]
enum Step {
    Query,
    TurnStart(u8),
    Call(u8, bool),
    Complete(u8, u8),
    Fail(u8),
    TurnEnd(bool),
}

const TOOLS: [&str; 3] = ["search", "shell", "web"];

fn event(step: &Step, time: f64) -> (Hook, Event) {
    let tool = |t: &u8| TOOLS[*t as usize % TOOLS.len()];
    let (hook, event) = match step {
        Step::Query => (Hook::OnQueryStart, Event::query("find the design notes")),
        Step::TurnStart(t) => (
            Hook::OnTurnStart,
            Event::new().with_token_usage(f64::from(*t % 101) / 100.0),
        ),
        Step::Call(t, danger) => (
            Hook::OnToolCall,
            Event::tool_call(
                tool(t),
                json!({"command": if *danger { "rm -rf /" } else { "ls" }}),
            ),
        ),
        Step::Complete(t, n) => (
            Hook::OnToolComplete,
            Event::tool_complete(tool(t), json!({"count": n % 6})),
        ),
        Step::Fail(t) => (Hook::OnToolFailure, Event::tool_failure(tool(t), "timeout")),
        Step::TurnEnd(true) => (Hook::OnTurnEnd, Event::new().final_turn()),
        Step::TurnEnd(false) => (Hook::OnTurnEnd, Event::new()),
    };
    (
        hook,
        Event {
            time: Some(time),
            ..event
        },
    )
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        1 => Just(Step::Query),
        3 => any::<u8>().prop_map(Step::TurnStart),
        3 => (any::<u8>(), proptest::bool::weighted(0.2)).prop_map(|(t, d)| Step::Call(t, d)),
        3 => (any::<u8>(), any::<u8>()).prop_map(|(t, n)| Step::Complete(t, n)),
        2 => any::<u8>().prop_map(Step::Fail),
        2 => any::<bool>().prop_map(Step::TurnEnd),
    ];
    proptest::collection::vec(step, 1..40)
}

/// The facts as rules see them, for comparing.
fn facts(s: &warden_core::Session) -> String {
    serde_json::to_string(s.facts()).unwrap()
}

/// The outcome lines of a trace, and after each event the facts as saved: straight through,
/// with a save and read-back between every pair of events, and with a Warden of its own for
/// each event.
fn all_three(steps: &[Step], end: bool) -> [Vec<String>; 3] {
    let mut events: Vec<(Hook, Event)> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| event(s, 1000.0 + i as f64))
        .collect();
    if end {
        events.push((
            Hook::OnSessionEnd,
            Event {
                time: Some(5000.0),
                ..Event::new()
            },
        ));
    }
    let straight_warden = warden();
    let mut straight = straight_warden
        .open_session("s", SessionOptions::default())
        .unwrap();
    let resumed_warden = warden();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("warden.db");
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (hook, e)) in events.into_iter().enumerate() {
        let w = warden_for_one_event(&db);
        let o = w
            .open_session("s", SessionOptions::default())
            .unwrap()
            .tick(hook, e.clone());
        c.extend(outcome_lines(i, &o).iter().map(ToString::to_string));
        c.push(format!(
            "{i} inject {:?} ruling {:?}",
            o.injected().iter().map(|n| &n.message).collect::<Vec<_>>(),
            o.ruling.as_ref().map(|r| (r.decision, &r.reason))
        ));
        c.push(facts(
            &w.open_session("s", SessionOptions::default()).unwrap(),
        ));
        let o = straight.tick(hook, e.clone());
        a.extend(outcome_lines(i, &o).iter().map(ToString::to_string));
        a.push(format!(
            "{i} inject {:?} ruling {:?}",
            o.injected().iter().map(|n| &n.message).collect::<Vec<_>>(),
            o.ruling.as_ref().map(|r| (r.decision, &r.reason))
        ));
        a.push(facts(&straight));
        let mut s = resumed_warden
            .open_session("s", SessionOptions::default())
            .unwrap();
        let o = s.tick(hook, e);
        b.extend(outcome_lines(i, &o).iter().map(ToString::to_string));
        b.push(format!(
            "{i} inject {:?} ruling {:?}",
            o.injected().iter().map(|n| &n.message).collect::<Vec<_>>(),
            o.ruling.as_ref().map(|r| (r.decision, &r.reason))
        ));
        b.push(facts(
            &resumed_warden
                .open_session("s", SessionOptions::default())
                .unwrap(),
        ));
    }
    [a, b, c]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_session_read_back_at_every_event_decides_as_one_that_never_stopped(
        steps in steps(),
        end in any::<bool>(),
    ) {
        let [straight, resumed, one_event_each] = all_three(&steps, end);
        prop_assert_eq!(&straight, &resumed);
        prop_assert_eq!(&straight, &one_event_each);
    }
}

/// The random traces reach what they are meant to test: the script and the behavior wait
/// and finish, decorators and groups hold rules back, the mode changes.
#[test]
fn the_rule_set_exercises_what_is_saved() {
    use Step::*;
    let trace = [
        Query,
        TurnStart(20),
        Call(0, false),
        Complete(0, 5),
        Fail(2),
        Fail(2),
        Fail(2),
        TurnEnd(false),
        TurnStart(20),
        TurnStart(95),
        Call(1, true),
        TurnStart(40),
        TurnEnd(true),
        TurnStart(60),
        TurnStart(60),
    ];
    let [straight, resumed, one_event_each] = all_three(&trace, true);
    assert_eq!(straight, resumed);
    assert_eq!(straight, one_event_each);
    let all = straight.join("\n");
    for needle in [
        "query 1 roll",
        "search done at turn",
        "workflow_done",
        "found 5",
        "a turn after finding",
        "web failed 2 times",
        "once at turn 2",
        "\"decision\":\"deny\"",
        "now in tight",
        "\"message\":\"high\"",
        "tokens at 60%",
    ] {
        assert!(all.contains(needle), "missing {needle}:\n{all}");
    }
}

/// Several processes (here, threads with a connection each) ticking one session at once: each
/// tick that finds the session saved by another since it read it runs again on the newer
/// session, so no event and no count is lost or counted twice.
#[test]
fn ticks_of_one_session_from_many_connections_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let rules = dir.path().join("rules");
    std::fs::create_dir(&rules).unwrap();
    std::fs::write(
        rules.join("count.toml"),
        "[rule]\nid = \"count\"\ntrigger = \"on_tool_complete\"\n\n[condition]\nexpression = \"true\"\n\n[action]\ntype = \"set_state\"\nkey = \"n\"\nvalue = \"{{ context.state.get('n', 0) + 1 }}\"\n",
    )
    .unwrap();
    Store::open(&db).unwrap();
    // Half the connections live long (a service); the other half tick once each, as hooks do,
    // on a connection of their own that leaves the log to the next one up to a few pages.
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (db, rules) = (db.clone(), rules.clone());
            std::thread::spawn(move || {
                let warden = || {
                    let mut store = Store::open(&db).unwrap();
                    store
                        .set_lock_timeout(std::time::Duration::from_secs(30))
                        .unwrap();
                    if i % 2 == 1 {
                        store.checkpoint_past(4).unwrap();
                    }
                    Warden::builder()
                        .rules_dir(&rules)
                        .store(store)
                        .compile_on_demand(i % 2 == 1)
                        .build()
                        .unwrap()
                };
                let tick = |s: &mut warden_core::Session| {
                    let o = s.tick(Hook::OnToolComplete, Event::tool_complete("t", json!({})));
                    assert_eq!(o.unsaved, None, "{:?}", o.errors);
                };
                let open =
                    |w: &Warden| w.open_session("shared", SessionOptions::default()).unwrap();
                if i % 2 == 1 {
                    for _ in 0..40 {
                        tick(&mut open(&warden()));
                    }
                } else {
                    // One session, which catches up with the others' ticks before each of its own.
                    let w = warden();
                    let mut s = open(&w);
                    for _ in 0..40 {
                        tick(&mut s);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let w = Warden::builder()
        .rules_dir(&rules)
        .store(Store::open(&db).unwrap())
        .build()
        .unwrap();
    let s = w.open_session("shared", SessionOptions::default()).unwrap();
    assert_eq!(s.events(), 240);
    assert_eq!(s.facts().history.counts.tool_calls, 240);
    assert_eq!(
        w.store()
            .state_get(
                &warden_core::StateScope::new("default", "default", "local"),
                "n"
            )
            .unwrap(),
        Some(json!(240))
    );
}

/// A session saved whole (the history inside the snapshot, as `Session::snapshot` writes it,
/// and as Warden saved it before the history was kept entry by entry: format 1, read in
/// `tests/saved_sessions.rs`) is read back as it was; its next save keeps the history entry by
/// entry, and `saved_snapshot` puts the entries back inside for a reader. A save whose entries are missing is refused with a reason.
#[test]
fn a_whole_snapshot_is_read_and_the_history_is_then_saved_entry_by_entry() {
    let trace = [
        Step::Query,
        Step::TurnStart(10),
        Step::Call(0, false),
        Step::Complete(0, 2),
        Step::Call(2, false),
        Step::Fail(2),
        Step::Call(1, false),
        Step::Complete(1, 1),
        Step::TurnEnd(false),
    ];
    let w = warden();
    let mut s = w.open_session("s", SessionOptions::default()).unwrap();
    for (i, step) in trace.iter().enumerate() {
        let (hook, e) = event(step, 1000.0 + i as f64);
        s.tick(hook, e);
    }
    let whole = s.snapshot();
    assert!(whole.contains("\"format\":3"), "{whole}");
    assert!(!whole.contains("\"lists\""), "{whole}");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let store = Store::open(&db).unwrap();
    let events = s.events();
    let write = |snapshot: &str,
                 loaded: Option<i64>,
                 firsts: &[(u8, i64)]|
     -> Result<Option<i64>, warden_store::StoreError> {
        store.tick().commit(Some(warden_store::SessionWrite {
            id: "old",
            user: "default",
            project: "default",
            loaded,
            snapshot,
            events,
            ended: false,
            updated_at: 2000.0,
            touch: true,
            entries: &[],
            firsts,
        }))
    };
    write(&whole, None, &[]).unwrap();
    let later = warden_on(&db);
    let mut read = later
        .open_session("old", SessionOptions::default())
        .unwrap();
    assert_eq!(facts(&read), facts(&s));
    let (hook, e) = event(&Step::Call(0, false), 2000.0);
    assert_eq!(
        outcome_lines(0, &read.tick(hook, e.clone())),
        outcome_lines(0, &s.tick(hook, e))
    );
    let stored = store.load_session("old").unwrap().unwrap();
    assert!(
        stored.snapshot.contains("\"format\":3") && stored.snapshot.contains("\"lists\""),
        "{}",
        stored.snapshot
    );
    let head: serde_json::Value = serde_json::from_str(&stored.snapshot).unwrap();
    assert_eq!(head["facts"]["history"]["messages"], json!([]));
    assert_eq!(head["facts"]["history"]["tools"], json!([]));
    let history = &s.facts().history;
    assert_eq!(
        stored.entries.len(),
        history.messages.len() + history.tools.len()
    );
    let shown = warden_core::saved_snapshot(&stored).unwrap();
    assert_eq!(
        shown["facts"]["history"],
        serde_json::to_value(&s.facts().history).unwrap()
    );
    // The tool calls' entries dropped, the snapshot still naming them: refused, said why.
    write(&stored.snapshot, Some(stored.summary.version), &[(1, 1000)]).unwrap();
    let err = later
        .open_session("old", SessionOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("history is incomplete: 0 of its"), "{err}");
    assert!(err.contains("tool calls"), "{err}");
}

/// A saved session whose history does not add up (written by hand, a damaged database, a
/// hostile one) is refused with a reason when it is opened; it never panics, and an entry
/// beside the places the snapshot names is ignored.
#[test]
fn a_saved_history_that_does_not_add_up_is_refused_with_a_reason() {
    let w = warden();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let store = Store::open(&db).unwrap();
    let mut s = w.open_session("s", SessionOptions::default()).unwrap();
    for (i, step) in [Step::Query, Step::Call(0, false), Step::Complete(0, 1)]
        .iter()
        .enumerate()
    {
        let (hook, e) = event(step, 1000.0 + i as f64);
        s.tick(hook, e);
    }
    // The session as a format-2 save: its head, and its entries.
    let whole: serde_json::Value = serde_json::from_str(&s.snapshot()).unwrap();
    let mut head = whole.clone();
    head["format"] = json!(2);
    head["facts"]["history"]["messages"] = json!([]);
    head["facts"]["history"]["tools"] = json!([]);
    head["lists"] = json!([[0, 1], [0, 1]]);
    let message = whole["facts"]["history"]["messages"][0].to_string();
    let tool = whole["facts"]["history"]["tools"][0].to_string();
    let entry = |list: u8, n: i64, text: &str| warden_store::SessionEntry {
        list,
        n,
        text: text.to_string(),
    };
    let good = vec![entry(0, 0, &message), entry(1, 0, &tool)];
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut h = head.clone();
        f(&mut h);
        h.to_string()
    };
    let cases: Vec<(&str, String, Vec<warden_store::SessionEntry>)> = vec![
        ("", head.to_string(), good.clone()),
        (
            "",
            head.to_string(),
            [
                good.clone(),
                vec![entry(1, 7, "junk"), entry(9, -3, "junk")],
            ]
            .concat(),
        ),
        (
            "does not say where",
            with(&|h| h["lists"] = serde_json::Value::Null),
            good.clone(),
        ),
        (
            "starts past",
            with(&|h| h["lists"] = json!([[0, 1], [u64::MAX, 1]])),
            good.clone(),
        ),
        (
            "incomplete: 1 of its 5 tool calls",
            with(&|h| h["lists"] = json!([[0, 1], [0, 5]])),
            good.clone(),
        ),
        (
            "incomplete: 0 of its 1 messages",
            head.to_string(),
            vec![entry(1, 0, &tool)],
        ),
        (
            "not readable (tool calls, entry 0)",
            head.to_string(),
            vec![entry(0, 0, &message), entry(1, 0, "{")],
        ),
        (
            "not readable",
            with(&|h| h["lists"] = json!("many")),
            good.clone(),
        ),
    ];
    for (i, (expected, snapshot, entries)) in cases.into_iter().enumerate() {
        let id = format!("case-{i}");
        store
            .tick()
            .commit(Some(warden_store::SessionWrite {
                id: &id,
                user: "default",
                project: "default",
                loaded: None,
                snapshot: &snapshot,
                events: 3,
                ended: false,
                updated_at: 2000.0,
                touch: true,
                entries: &entries,
                firsts: &[],
            }))
            .unwrap();
        let opened = warden_on(&db).open_session(&id, SessionOptions::default());
        match opened {
            Ok(read) if expected.is_empty() => assert_eq!(facts(&read), facts(&s), "case {i}"),
            Ok(_) => panic!("case {i}: opened, expected {expected:?}"),
            Err(e) => assert!(
                !expected.is_empty() && e.to_string().contains(expected),
                "case {i}: {e}"
            ),
        }
    }
}

/// A host that ticks a session again before settling its batched save (it should wait) does
/// not break it: the late result leaves the session as the later tick left it, and what the
/// store holds reads back as the session in memory.
#[test]
fn a_batched_save_settled_late_leaves_the_session_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.db");
    let build = || warden_on(&db);
    let w = build();
    let mut s = w.open_session("s", SessionOptions::default()).unwrap();
    let steps = [
        Step::Query,
        Step::Call(0, false),
        Step::Complete(0, 3),
        Step::Call(1, false),
    ];
    let (hook, e) = event(&steps[0], 1000.0);
    s.tick(hook, e);
    let (told, result) = std::sync::mpsc::channel();
    let (hook, e) = event(&steps[1], 1001.0);
    let pending = match s.tick_batched(hook, e, move |r| told.send(r).unwrap()) {
        warden_core::Ticked::Saving(p) => p,
        warden_core::Ticked::Done(_) => panic!("a durable tick on SQLite saves in a batch"),
    };
    let (hook, e) = event(&steps[2], 1002.0);
    s.tick(hook, e);
    let late = s.saved(pending, result.recv().unwrap());
    assert!(
        late.unsaved.is_none()
            || late
                .unsaved
                .as_deref()
                .is_some_and(|u| u.contains("ticked again"))
    );
    let (hook, e) = event(&steps[3], 1003.0);
    let last = s.tick(hook, e);
    assert!(last.unsaved.is_none(), "{:?}", last.unsaved);
    let read = build()
        .open_session("s", SessionOptions::default())
        .unwrap();
    assert_eq!(facts(&read), facts(&s));
    assert_eq!(read.events(), s.events());
}
