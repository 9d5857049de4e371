//! Behavior node semantics that replay data cannot express. Every other case is a folder of
//! `tests/nodes/` (a tree, the events, the expected node trace), run by `tests/scenarios.rs`
//! and shown in the book's node reference. What stays here, and why:
//! - a running behavior switched off by the user mid-session: a trace has no event for a
//!   user's choice, and the scenario runner only sets choices before the session starts;
//! - a long chain of subtrees: 400 generated behavior files, loaded on a thread with a small
//!   stack to check the bound holds there (the runner does not choose its thread's stack).

use std::fs;

use warden_core::{Effect, Event, Hook, Outcome, Session, SessionOptions, Warden};

/// A Warden with one behavior `b` (trigger `on_turn_start`) whose `[tree]` is `tree`, plus
/// `extra` files.
fn warden_with(tree: &str, extra: &[(&str, &str)]) -> (Warden, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        format!("[behavior]\nid = \"b\"\ntrigger = \"on_turn_start\"\n\n[tree]\n{tree}\n"),
    )
    .unwrap();
    for (name, text) in extra {
        fs::write(dir.path().join(name), text).unwrap();
    }
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    assert!(w.diagnostics().is_empty(), "{:#?}", w.diagnostics());
    (w, dir)
}

fn session(w: &Warden) -> Session {
    w.session_with(SessionOptions {
        explain: true,
        ..Default::default()
    })
}

/// The log lines a tick produced, in order.
fn said(o: &Outcome) -> Vec<String> {
    o.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Log { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The nodes that ran, as `label=status`, labels without their `#n`.
fn nodes(o: &Outcome) -> Vec<String> {
    o.node_trace()
        .map(|(_, label, status)| {
            let label = label.split_once(' ').map_or(label, |(_, l)| l);
            format!("{label}={}", status.name())
        })
        .collect()
}

/// The behaviors halted at a tick, with why.
fn halted(o: &Outcome) -> Vec<(&str, &str)> {
    o.halted
        .iter()
        .map(|h| (&*h.rule, h.reason.as_str()))
        .collect()
}

#[test]
fn a_running_behavior_switched_off_is_halted_with_its_on_halted_actions() {
    let (w, _d) = warden_with(
        "type = \"sequence\"\non_halted = { type = \"log\", message = \"outer halted\" }\nchildren = [\n  { type = \"wait_turns\", turns = 5, on_halted = { type = \"log\", message = \"wait halted\" } },\n]",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, Event::new());
    w.set_rule_enabled("default", "b", false).unwrap();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(halted(&o), [("b", "its rule was switched off")]);
    assert_eq!(said(&o), ["wait halted", "outer halted"], "deepest first");
    assert_eq!(nodes(&o), ["wait_turns 5 turns=halted", "sequence=halted"]);
    assert!(
        said(&s.tick(Hook::OnTurnStart, Event::new())).is_empty(),
        "once: it no longer runs"
    );
}

#[test]
fn a_behavior_switched_off_with_a_waiting_script_is_reported_once_with_the_reason() {
    // The same behavior halted by the session end is the case
    // tests/nodes/session-end-halts-a-waiting-script-node-once.
    let (w, _d) = warden_with(
        "type = \"script\"\nscript = \"wait.lua\"",
        &[("wait.lua", "wait_turns(5)\nreturn true\n")],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, Event::new());
    w.set_rule_enabled("default", "b", false).unwrap();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert_eq!(halted(&o), [("b", "its rule was switched off")]);
}

#[test]
fn a_long_chain_of_subtrees_is_refused_not_a_stack_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let n = 400;
    for i in 0..n {
        let tree = if i + 1 < n {
            format!("type = \"subtree\"\nbehavior = \"c{}\"", i + 1)
        } else {
            "type = \"condition\"\nexpression = \"true\"".to_string()
        };
        fs::write(
            dir.path().join(format!("c{i}.toml")),
            format!("[behavior]\nid = \"c{i}\"\ntrigger = \"on_turn_start\"\n\n[tree]\n{tree}\n"),
        )
        .unwrap();
    }
    let path = dir.path().to_path_buf();
    // A reload watcher's or a tokio worker's stack: the bound must hold there too.
    let diagnostics = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let w = Warden::builder().rules_dir(&path).build().unwrap();
            w.diagnostics()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        })
        .unwrap()
        .join()
        .expect("loading does not overflow the stack");
    let too_deep = diagnostics
        .iter()
        .filter(|d| {
            d.contains("the tree nests more than 128 levels deep once its subtrees are inlined")
        })
        .count();
    // c0 .. c(n-129) reach more than 128 levels; the last 128 behaviors load.
    assert_eq!(
        too_deep,
        n - 128,
        "{:#?}",
        &diagnostics[..3.min(diagnostics.len())]
    );
    assert!(diagnostics.iter().all(|d| d.contains("levels deep")));
}
