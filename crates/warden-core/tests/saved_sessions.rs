//! Sessions saved by earlier releases of Warden are read by this one, and go on exactly where
//! they stood. The fixtures in `tests/saved-sessions/format-N/` are real saves (a store's
//! snapshot and the history's entries beside it), each written by the release whose format it
//! holds, from one of the cases below: a session left with its trees running (an exclusive
//! group standing at its second leaf, woken at its own hook; another woken at another hook; a
//! waiting script with globals and random numbers; a behavior half-way), decorator memory,
//! queued notifications, session state, host data; a stopped session; a session carried across
//! a reload (its rules' indices moved); and the first case saved whole (`Session::snapshot`).
//!
//! Each fixture is read into a store and opened; the same case is run straight through by this
//! release, with no save in between; the two must then hold the same session and decide the
//! same on every event that follows (each case's continuations), and say what the case expects
//! (a group resumed at its running leaf, not at its first; falling through to its next rule
//! when that leaf fails). Its next save is in this release's format, and reads back the same.
//! A save of this release goes through the same checks whatever fixtures are kept; damaged
//! saves (a place past the tree's rules, a rule gone, a value of the wrong shape, a save cut
//! short) are refused or their tree halted, with a reason, never a panic.
//!
//! Writing the fixtures: `write_fixtures` (ignored) runs every case and writes what the store
//! holds after it into `tests/saved-sessions/format-N/` (N: the format the save is in):
//!
//! ```text
//! cargo test -p warden-core --test saved_sessions -- --ignored write_fixtures
//! ```
//!
//! Run it once against the release that writes a format, before the format changes, and keep
//! its output: the fixtures of older formats are never written again.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use warden_core::{Event, Hook, Session, SessionOptions, Store, Warden};
use warden_wire::v1::replay::outcome_lines;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/saved-sessions")
}

/// The history's bound: small, so that the saves have dropped entries from the front.
const HISTORY: usize = 4;

/// What happens to a session before it is saved.
#[derive(Clone)]
enum Step {
    Tick(Hook, Box<Event>),
    /// The rules folder gains the files of `reload/`, and the Warden reloads.
    Reload,
    /// The host keeps data with the session, and saves it.
    HostData(Value),
}

/// A session saved at the end of `prefix`, and what may follow.
struct Case {
    name: &'static str,
    prefix: Vec<Step>,
    /// Saved whole (`Session::snapshot`), not as a tick saves it.
    whole: bool,
    continuations: Vec<Continuation>,
}

struct Continuation {
    name: &'static str,
    events: Vec<(Hook, Event)>,
    /// What the continuation must say, and must not.
    says: &'static [&'static str],
    never: &'static [&'static str],
}

/// Event `i` of a case, at a time of its own.
fn at(i: u32, hook: Hook, event: Event) -> (Hook, Event) {
    (
        hook,
        Event {
            time: Some(1000.0 + f64::from(i)),
            ..event
        },
    )
}

fn tick(i: u32, hook: Hook, event: Event) -> Step {
    let (hook, event) = at(i, hook, event);
    Step::Tick(hook, Box::new(event))
}

/// The first case: everything a session keeps between events, left mid-way.
fn running_prefix() -> Vec<Step> {
    vec![
        tick(0, Hook::OnQueryStart, Event::query("plan the release")),
        // `triage-first` fails, `triage-wait` waits for the next turn: the group stands at
        // its second leaf. `cooldown` fires (its notification waits for the turn's end).
        tick(1, Hook::OnTurnStart, Event::new().with_token_usage(0.2)),
        // The behavior starts; `watch` stands at its second leaf until the call completes.
        tick(
            2,
            Hook::OnToolCall,
            Event::tool_call("search", json!({"q": "notes"})),
        ),
        tick(
            3,
            Hook::OnToolComplete,
            Event::tool_complete("search", json!({"count": 1})),
        ),
        tick(4, Hook::OnToolCall, Event::tool_call("search", json!({}))),
        // The behavior finds 5 and waits a turn; `workflow` waits two turns.
        tick(
            5,
            Hook::OnToolComplete,
            Event::tool_complete("search", json!({"count": 5})),
        ),
        tick(
            6,
            Hook::OnToolFailure,
            Event::tool_failure("web", "timeout"),
        ),
        tick(
            7,
            Hook::OnToolFailure,
            Event::tool_failure("web", "timeout"),
        ),
        tick(
            8,
            Hook::OnToolCall,
            Event::tool_call("shell", json!({"command": "ls"})),
        ),
        Step::HostData(json!({"adapter": {"last_call": "shell", "sent_back": 1}})),
    ]
}

fn running_continuations() -> Vec<Continuation> {
    vec![
        Continuation {
            name: "tokens high: the waiting leaf holds the group",
            events: vec![
                at(9, Hook::OnTurnEnd, Event::new()),
                at(10, Hook::OnTurnStart, Event::new().with_token_usage(0.95)),
                at(
                    11,
                    Hook::OnToolComplete,
                    Event::tool_complete("shell", json!({})),
                ),
                at(12, Hook::OnTurnStart, Event::new().with_token_usage(0.95)),
                at(13, Hook::OnTurnEnd, Event::new()),
                at(14, Hook::OnTurnStart, Event::new().with_token_usage(0.95)),
                at(15, Hook::OnQueryStart, Event::query("ship it")),
            ],
            says: &[
                "triage: held at turn 2",
                "watched shell complete",
                "a turn after finding",
                "triage: first at turn 3",
                "tokens at 20%",
                "web failed 2 times",
                "first completion, at turn 1",
                "now in tight",
                "query 2 roll",
            ],
            // Resumed at its running leaf, the group does not evaluate its first rule again.
            never: &["triage: first at turn 2", "triage: fell through at turn 2"],
        },
        Continuation {
            name: "tokens low: the waiting leaf fails, the group falls through",
            events: vec![
                at(9, Hook::OnTurnStart, Event::new().with_token_usage(0.3)),
                // The `watch` tree waits for `on_tool_complete`: this call does not tick it.
                at(10, Hook::OnToolCall, Event::tool_call("web", json!({}))),
                at(
                    11,
                    Hook::OnToolComplete,
                    Event::tool_complete("web", json!({})),
                ),
                at(12, Hook::OnSessionEnd, Event::new()),
            ],
            says: &["triage: fell through at turn 2", "watched shell complete"],
            never: &["triage: first at turn 2", "triage: held", "watch: web"],
        },
    ]
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "running",
            prefix: running_prefix(),
            whole: false,
            continuations: running_continuations(),
        },
        Case {
            name: "whole",
            prefix: running_prefix(),
            whole: true,
            continuations: running_continuations(),
        },
        Case {
            name: "stopped",
            prefix: vec![
                tick(0, Hook::OnQueryStart, Event::query("clean up")),
                tick(1, Hook::OnTurnStart, Event::new().with_token_usage(0.2)),
                tick(
                    2,
                    Hook::OnToolCall,
                    Event::tool_call("shell", json!({"command": "rm -rf /"})),
                ),
            ],
            whole: false,
            continuations: vec![Continuation {
                name: "the stop holds until the next prompt",
                events: vec![
                    at(
                        3,
                        Hook::OnToolCall,
                        Event::tool_call("shell", json!({"command": "ls"})),
                    ),
                    at(4, Hook::OnTurnEnd, Event::new()),
                    at(5, Hook::OnQueryStart, Event::query("look again")),
                    at(
                        6,
                        Hook::OnToolCall,
                        Event::tool_call("shell", json!({"command": "ls"})),
                    ),
                ],
                says: &[
                    "ruling Some((Some(Deny), \"no rm -rf: a person looks first\"))",
                    "3 inject [] ruling None",
                ],
                never: &[],
            }],
        },
        Case {
            name: "reloaded",
            prefix: vec![
                tick(0, Hook::OnTurnStart, Event::new().with_token_usage(0.2)),
                Step::Reload,
                // The session takes the new program at this tick: the group left running is
                // carried over, its leaves mapped onto the rules' new indices.
                tick(
                    1,
                    Hook::OnToolComplete,
                    Event::tool_complete("search", json!({"count": 0})),
                ),
            ],
            whole: false,
            continuations: vec![
                Continuation {
                    name: "tokens low: falls through",
                    events: vec![
                        at(2, Hook::OnTurnStart, Event::new().with_token_usage(0.3)),
                        at(3, Hook::OnTurnEnd, Event::new()),
                    ],
                    says: &["triage: fell through at turn 2", "early"],
                    never: &["triage: first", "triage: held"],
                },
                Continuation {
                    name: "tokens high: holds",
                    events: vec![at(
                        2,
                        Hook::OnTurnStart,
                        Event::new().with_token_usage(0.95),
                    )],
                    says: &["triage: held at turn 2"],
                    never: &["triage: first", "triage: fell through"],
                },
            ],
        },
    ]
}

/// A rules folder as the case starts with it (`reloaded`: as it ends), in a folder of its own.
fn rules_folder(reloaded: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let copy = |from: &Path, to: &Path| {
        fs::create_dir_all(to).unwrap();
        for f in fs::read_dir(from).unwrap() {
            let f = f.unwrap();
            fs::copy(f.path(), to.join(f.file_name())).unwrap();
        }
    };
    copy(&data().join("rules"), &dir.path().join("rules"));
    copy(&data().join("scripts"), &dir.path().join("scripts"));
    if reloaded {
        copy(&data().join("reload"), &dir.path().join("rules"));
    }
    dir
}

fn warden(folder: &Path, store: Store) -> Warden {
    let w = Warden::builder()
        .history_limit(HISTORY)
        .rules_dir(folder.join("rules"))
        .modes_file(data().join("modes.toml"))
        .store(store)
        .build()
        .unwrap();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:?}",
        w.diagnostics()
    );
    w
}

const ID: &str = "saved";

/// Runs `case`'s prefix in a durable session of its own; the Warden (and its folder) too.
fn run_prefix(case: &Case) -> (Warden, Session, tempfile::TempDir) {
    let folder = rules_folder(false);
    let w = warden(folder.path(), Store::in_memory().unwrap());
    let mut s = w.open_session(ID, SessionOptions::default()).unwrap();
    for step in &case.prefix {
        match step {
            Step::Tick(hook, event) => {
                let o = s.tick(*hook, Event::clone(event));
                assert_eq!(o.unsaved, None, "{}: {:?}", case.name, o.errors);
            }
            Step::Reload => {
                for f in fs::read_dir(data().join("reload")).unwrap() {
                    let f = f.unwrap();
                    fs::copy(f.path(), folder.path().join("rules").join(f.file_name())).unwrap();
                }
                let reload = w.reload();
                assert!(reload.applied, "{:?}", reload.diagnostics);
            }
            Step::HostData(data) => {
                for (k, v) in data.as_object().unwrap() {
                    s.host_data_mut().insert(k.clone(), v.clone());
                }
                s.save().unwrap();
            }
        }
    }
    (w, s, folder)
}

/// A saved session as a fixture keeps it.
struct Fixture {
    snapshot: String,
    entries: Vec<warden_store::SessionEntry>,
    events: u64,
    ended: bool,
}

impl Fixture {
    fn read(path: &Path) -> Fixture {
        let v: Value = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        Fixture {
            snapshot: v["snapshot"].to_string(),
            entries: v["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| warden_store::SessionEntry {
                    list: u8::try_from(e["list"].as_u64().unwrap()).unwrap(),
                    n: e["n"].as_i64().unwrap(),
                    text: e["text"].to_string(),
                })
                .collect(),
            events: v["events"].as_u64().unwrap(),
            ended: v["ended"].as_bool().unwrap(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "events": self.events,
            "ended": self.ended,
            "snapshot": serde_json::from_str::<Value>(&self.snapshot).unwrap(),
            "entries": self.entries.iter().map(|e| json!({
                "list": e.list,
                "n": e.n,
                "text": serde_json::from_str::<Value>(&e.text).unwrap(),
            })).collect::<Vec<_>>(),
        })
    }

    /// Puts it into `store`, as the session [`ID`].
    fn store_in(&self, store: &Store) {
        store
            .tick()
            .commit(Some(warden_store::SessionWrite {
                id: ID,
                user: "default",
                project: "default",
                loaded: None,
                snapshot: &self.snapshot,
                events: self.events,
                ended: self.ended,
                updated_at: 2000.0,
                touch: true,
                entries: &self.entries,
                firsts: &[],
            }))
            .unwrap();
    }
}

/// The session `case` leaves, saved as this release saves it.
fn save_of(case: &Case) -> Fixture {
    let (w, s, _folder) = run_prefix(case);
    if case.whole {
        return Fixture {
            snapshot: s.snapshot(),
            entries: Vec::new(),
            events: s.events(),
            ended: s.is_ended(),
        };
    }
    let stored = w.store().load_session(ID).unwrap().unwrap();
    Fixture {
        snapshot: stored.snapshot,
        entries: stored.entries,
        events: stored.summary.events,
        ended: stored.summary.ended,
    }
}

/// The format of a saved snapshot.
fn format_of(snapshot: &str) -> u64 {
    serde_json::from_str::<Value>(snapshot).unwrap()["format"]
        .as_u64()
        .unwrap()
}

/// Writes every case's save into `tests/saved-sessions/format-N/`.
#[test]
#[ignore = "writes the fixtures of the format this release saves in; run by hand"]
fn write_fixtures() {
    for case in cases() {
        let fixture = save_of(&case);
        let dir = data().join(format!("format-{}", format_of(&fixture.snapshot)));
        fs::create_dir_all(&dir).unwrap();
        let mut text = serde_json::to_string_pretty(&fixture.to_json()).unwrap();
        text.push('\n');
        fs::write(dir.join(format!("{}.json", case.name)), text).unwrap();
    }
}

/// What a session is, for comparing: everything a host or a rule can see of it.
fn state(s: &Session) -> Vec<String> {
    vec![
        serde_json::to_string(s.facts()).unwrap(),
        format!("pending {:?}", s.pending()),
        format!("stopped {:?}", s.stopped()),
        format!("running {:?}", s.running()),
        format!("host {}", Value::Object(s.host_data().clone())),
        format!("events {} ended {}", s.events(), s.is_ended()),
    ]
}

/// What a session says at each event, and is after it.
fn go_on(s: &mut Session, events: &[(Hook, Event)]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (hook, event)) in events.iter().enumerate() {
        let o = s.tick(*hook, event.clone());
        assert_eq!(o.unsaved, None, "{:?}", o.errors);
        out.extend(outcome_lines(i, &o).iter().map(ToString::to_string));
        out.push(format!(
            "{i} inject {:?} ruling {:?}",
            o.injected().iter().map(|n| &*n.message).collect::<Vec<_>>(),
            o.ruling.as_ref().map(|r| (r.decision, &*r.reason))
        ));
        out.push(format!("{i} halted {:?}", o.halted));
        out.extend(state(s));
    }
    out
}

/// The format this release saves in.
const FORMAT: u64 = 3;

/// Reads `fixture`, a save of `case`, and checks it is the session the case leaves and goes on
/// as that session does, in each of the case's continuations; and that what it saves then is
/// in this release's format, read back as the same session.
fn check(case: &Case, fixture: &Fixture, name: &str) {
    for cont in &case.continuations {
        let what = format!("{name} ({})", cont.name);
        let (_w, mut straight, _f) = run_prefix(case);
        let folder = rules_folder(case.prefix.iter().any(|s| matches!(s, Step::Reload)));
        let store = Store::in_memory().unwrap();
        fixture.store_in(&store);
        let w = warden(folder.path(), store);
        let mut restored = w.open_session(ID, SessionOptions::default()).unwrap();
        assert_eq!(state(&restored), state(&straight), "{what}");
        let expected = go_on(&mut straight, &cont.events);
        let got = go_on(&mut restored, &cont.events);
        assert_eq!(got, expected, "{what}");
        let all = got.join("\n");
        for needle in cont.says {
            assert!(all.contains(needle), "{what}: missing {needle:?}:\n{all}");
        }
        for needle in cont.never {
            assert!(!all.contains(needle), "{what}: {needle:?} said:\n{all}");
        }
        let saved = w.store().load_session(ID).unwrap().unwrap();
        assert_eq!(format_of(&saved.snapshot), FORMAT, "{what}");
        assert!(!saved.snapshot.contains("\"bt\""), "{what}");
        let again = w.open_session(ID, SessionOptions::default()).unwrap();
        assert_eq!(state(&again), state(&straight), "{what}");
    }
}

/// Every fixture of every format: read, it is the session its case leaves, and goes on as
/// that session does; the next save is in this release's format.
#[test]
fn saved_sessions_of_every_format_go_on_where_they_stood() {
    let mut read = Vec::new();
    let mut formats: Vec<_> = fs::read_dir(data())
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("format-"))
        })
        .collect();
    formats.sort();
    for dir in formats {
        for case in cases() {
            let path = dir.join(format!("{}.json", case.name));
            if path.exists() {
                check(&case, &Fixture::read(&path), &path.display().to_string());
                read.push(format!("{}", path.display()));
            }
        }
    }
    for format in [
        "format-1/whole",
        "format-2/running",
        "format-2/stopped",
        "format-2/reloaded",
        "format-3/running",
        "format-3/whole",
        "format-3/stopped",
        "format-3/reloaded",
    ] {
        assert!(
            read.iter().any(|p| p.ends_with(&format!("{format}.json"))),
            "{format} not read: {read:?}"
        );
    }
}

/// A save of this release, of every case (whatever fixtures are kept), round trip.
#[test]
fn a_save_of_this_release_goes_on_where_it_stood() {
    for case in cases() {
        let fixture = save_of(&case);
        assert_eq!(format_of(&fixture.snapshot), FORMAT);
        check(&case, &fixture, case.name);
    }
}

/// The save of the `running` case, changed by `change`, stored and opened.
fn opened_after(
    fixture: &Fixture,
    change: impl FnOnce(&mut Value),
) -> Result<(Session, Warden, tempfile::TempDir), String> {
    let mut snapshot: Value = serde_json::from_str(&fixture.snapshot).unwrap();
    change(&mut snapshot);
    opened(&Fixture {
        snapshot: snapshot.to_string(),
        entries: fixture.entries.clone(),
        events: fixture.events,
        ended: fixture.ended,
    })
}

/// `fixture`, stored and opened.
fn opened(fixture: &Fixture) -> Result<(Session, Warden, tempfile::TempDir), String> {
    let folder = rules_folder(false);
    let store = Store::in_memory().unwrap();
    fixture.store_in(&store);
    let w = warden(folder.path(), store);
    let s = w
        .open_session(ID, SessionOptions::default())
        .map_err(|e| e.to_string())?;
    Ok((s, w, folder))
}

/// The running tree of `entry` in a snapshot.
fn tree<'a>(snapshot: &'a mut Value, entry: &str) -> &'a mut Value {
    snapshot["running"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["entry"] == entry)
        .unwrap()
}

/// What the first tick after reading reports halted, as (rule, reason).
fn halted_at_next_tick(s: &mut Session) -> Vec<(String, String)> {
    let o = s.tick(Hook::OnToolFailure, Event::tool_failure("web", "timeout"));
    o.halted
        .iter()
        .map(|h| (h.rule.to_string(), h.reason.clone()))
        .collect()
}

/// A save written by hand, damaged or hostile: a tree's place past its rules, a rule that is no
/// longer there, bonsai's value of an older save in a shape it never had, a save cut short or
/// of the wrong shape. Each is a clear error when the session is opened, or the tree halted
/// (with its waiting script) and said why at the next tick; never a panic, and the rest of the
/// session is read as saved.
#[test]
fn a_damaged_save_is_refused_or_its_tree_halted_with_a_reason() {
    let running = &cases()[0];
    let fixture = save_of(running);
    let holds_the_rest = |s: &Session| {
        assert_eq!(s.pending().len(), 5);
        assert_eq!(s.host_data()["adapter"]["sent_back"], 1);
    };

    // A place past the tree's leaves: the tree and its waiting script are halted.
    let (mut s, _w, _f) = opened_after(&fixture, |v| tree(v, "triage")["at"] = json!(7)).unwrap();
    holds_the_rest(&s);
    assert!(!s.running().contains(&"triage-wait"));
    let halted = halted_at_next_tick(&mut s);
    assert_eq!(halted.len(), 1, "{halted:?}");
    assert_eq!(halted[0].0, "triage-wait");
    assert!(
        halted[0].1.contains("(leaf 7) is not one of its 3 rules"),
        "{halted:?}"
    );
    assert!(!s.running().contains(&"triage-wait"));
    // The other trees go on.
    assert!(s.running().contains(&"watch-wait"));

    // A rule that is no longer there: the tree is halted as a reload halts it.
    let (mut s, _w, _f) = opened_after(&fixture, |v| {
        tree(v, "triage")["rules"][0]["key"] = json!("gone");
    })
    .unwrap();
    let halted = halted_at_next_tick(&mut s);
    assert!(
        halted.contains(&(
            "gone".into(),
            "its rule changed while the session was saved".into()
        )),
        "{halted:?}"
    );

    // No hooks to wake it: its own.
    let (mut s, _w, _f) =
        opened_after(&fixture, |v| tree(v, "triage")["wake"] = json!([])).unwrap();
    let o = s.tick(Hook::OnTurnStart, Event::new().with_token_usage(0.95));
    assert!(o.halted.is_empty(), "{:?}", o.halted);
    let said: Vec<_> = o.injected().iter().map(|n| n.message.to_string()).collect();
    assert!(
        said.contains(&"triage: held at turn 2".to_string()),
        "{said:?}"
    );

    // Refused with a reason.
    for (change, why) in [
        (
            Box::new(|v: &mut Value| tree(v, "triage")["at"] = json!(-1))
                as Box<dyn Fn(&mut Value)>,
            "not readable",
        ),
        (
            Box::new(|v: &mut Value| tree(v, "triage")["wake"] = json!(["on_nothing"])),
            "not readable",
        ),
        (
            Box::new(|v: &mut Value| tree(v, "triage")["hook"] = json!(3)),
            "not readable",
        ),
        (
            Box::new(|v: &mut Value| v["running"] = json!("many")),
            "not readable",
        ),
        (
            Box::new(|v: &mut Value| v["format"] = json!(9)),
            "in format 9, which this Warden does not read",
        ),
        (Box::new(|v: &mut Value| *v = json!([1, 2])), "not readable"),
    ] {
        let err = opened_after(&fixture, change).map(|_| ()).unwrap_err();
        assert!(err.contains(why), "{why}: {err}");
    }
    for mut cut in [
        Fixture::read(&data().join("format-2/running.json")),
        save_of(running),
    ] {
        let mut half = cut.snapshot.len() / 2;
        while !cut.snapshot.is_char_boundary(half) {
            half -= 1;
        }
        cut.snapshot.truncate(half);
        let err = opened(&cut).map(|_| ()).unwrap_err();
        assert!(err.contains("not readable"), "{err}");
    }
    let err = opened_after(&fixture, |v| *v = json!("not a session"))
        .map(|_| ())
        .unwrap_err();
    assert!(err.contains("not readable"), "{err}");
}

/// An older save whose bonsai value has a shape bonsai never gave a hook's tree: that tree is
/// halted (with its waiting script), said why; the rest is read as saved.
#[test]
fn an_older_save_whose_tree_cannot_be_read_halts_that_tree() {
    for file in ["format-2/running.json", "format-1/whole.json"] {
        let fixture = Fixture::read(&data().join(file));
        let (mut s, _w, _f) = opened_after(&fixture, |v| {
            tree(v, "triage")["bt"]["state"] = json!({"Sequence": {"current_index": 0}});
        })
        .unwrap();
        assert_eq!(s.pending().len(), 5, "{file}");
        let halted = halted_at_next_tick(&mut s);
        assert_eq!(halted.len(), 1, "{file}: {halted:?}");
        assert_eq!(halted[0].0, "triage-wait");
        assert!(
            halted[0]
                .1
                .contains("could not be read from the older save"),
            "{file}: {halted:?}"
        );
        assert!(s.running().contains(&"watch-wait"), "{file}");
        assert!(!s.running().contains(&"triage-wait"), "{file}");
    }
}
