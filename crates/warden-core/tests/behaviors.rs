//! The semantics of every node kind of a behavior tree, each with a running child where it
//! matters: what runs, what is resumed, what is halted, and what each node returns.

use std::fs;
use std::path::Path;

use serde_json::json;
use warden_core::NodeStatus;
use warden_core::{Effect, Event, Hook, Outcome, Session, SessionOptions, Warden};

/// A Warden with one behavior `b` (trigger `trigger`) whose `[tree]` is `tree`, plus `extra`
/// files.
fn warden_with(trigger: &str, tree: &str, extra: &[(&str, &str)]) -> (Warden, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        format!("[behavior]\nid = \"b\"\ntrigger = \"{trigger}\"\n\n[tree]\n{tree}\n"),
    )
    .unwrap();
    for (name, text) in extra {
        let p = dir.path().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    assert!(
        w.diagnostics().iter().all(|d| !d.is_error()),
        "{:#?}",
        w.diagnostics()
    );
    (w, dir)
}

fn session(w: &Warden) -> Session {
    w.session_with(SessionOptions {
        explain: true,
        ..Default::default()
    })
}

/// The messages and log lines a tick produced, in order.
fn said(o: &Outcome) -> Vec<String> {
    o.effects
        .iter()
        .filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(n.message.to_string()),
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

fn log(msg: &str) -> String {
    format!("{{ type = \"log\", message = \"{msg}\" }}")
}

fn turn() -> Event {
    Event::new()
}

#[test]
fn a_memory_sequence_resumes_at_its_running_child_without_re_running_the_others() {
    let (w, _d) = warden_with(
        "on_turn_start",
        &format!(
            "type = \"sequence\"\nchildren = [ {}, {{ type = \"wait_turns\", turns = 2 }}, {} ]",
            log("first"),
            log("after")
        ),
        &[],
    );
    let mut s = session(&w);
    let o = s.tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["first"]);
    assert_eq!(
        nodes(&o),
        [
            "action log=success",
            "wait_turns 2 turns=running",
            "sequence=running"
        ]
    );
    let o = s.tick(Hook::OnTurnStart, turn());
    assert!(said(&o).is_empty(), "the first child does not run again");
    assert_eq!(
        nodes(&o),
        ["wait_turns 2 turns=running", "sequence=running"],
        "resumed directly at the running child"
    );
    let o = s.tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["after"]);
    assert_eq!(o.fired(), ["b"]);
    // Done, it starts over at the next tick of its hook.
    assert_eq!(said(&s.tick(Hook::OnTurnStart, turn())), ["first"]);
}

#[test]
fn a_reactive_sequence_checks_its_conditions_again_and_halts_the_running_child() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"sequence\"\nreactive = true\nchildren = [\n  { type = \"condition\", expression = \"context.turn.token_usage < 0.9\" },\n  { type = \"wait_turns\", turns = 5, on_halted = { type = \"log\", message = \"wait halted\" } },\n]",
        &[],
    );
    let mut s = session(&w);
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.5));
    assert!(
        o.trace()
            .any(|(_, e)| *e == warden_core::Evaluation::Running)
    );
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.6));
    assert_eq!(
        nodes(&o),
        [
            "condition context.turn.token_usage < 0.9=success",
            "wait_turns 5 turns=running",
            "sequence reactive=running"
        ]
    );
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.95));
    assert_eq!(said(&o), ["wait halted"]);
    assert_eq!(
        nodes(&o),
        [
            "condition context.turn.token_usage < 0.9=failure",
            "wait_turns 5 turns=halted",
            "sequence reactive=failure"
        ]
    );
    assert!(o.fired().is_empty());
}

#[test]
fn a_memory_selector_takes_the_first_success_and_resumes_its_running_child() {
    let (w, _d) = warden_with(
        "on_turn_start",
        &format!(
            "type = \"selector\"\nchildren = [\n  {{ type = \"condition\", expression = \"context.turn.number > 10\" }},\n  {{ type = \"sequence\", children = [ {{ type = \"wait_turns\", turns = 1 }}, {} ] }},\n  {},\n]",
            log("second"),
            log("third")
        ),
        &[],
    );
    let mut s = session(&w);
    let o = s.tick(Hook::OnTurnStart, turn());
    assert!(
        said(&o).is_empty(),
        "the second child runs; the third is not tried"
    );
    let o = s.tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["second"]);
    assert!(
        !nodes(&o).iter().any(|n| n.starts_with("condition")),
        "a memory selector does not try the first child again: {:?}",
        nodes(&o)
    );
    assert_eq!(o.fired(), ["b"]);
}

#[test]
fn a_guard_that_aborts_lower_priorities_preempts_a_running_later_child() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"selector\"\nchildren = [\n  { type = \"guard\", abort = \"lower\", condition = \"context.turn.token_usage > 0.8\", child = { type = \"log\", message = \"budget first\" } },\n  { type = \"wait_turns\", turns = 10, name = \"long task\", on_halted = { type = \"log\", message = \"long task halted\" } },\n]",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn().with_token_usage(0.1));
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.2));
    assert_eq!(
        nodes(&o),
        ["long task (wait_turns)=running", "selector=running"]
    );
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.85));
    assert_eq!(said(&o), ["long task halted", "budget first"]);
    assert_eq!(
        nodes(&o),
        [
            "long task (wait_turns)=halted",
            "action log=success",
            "guard context.turn.token_usage > 0.8 abort lower=success",
            "selector=success"
        ]
    );
    assert_eq!(o.fired(), ["b"]);
}

#[test]
fn a_reactive_selector_tries_earlier_children_at_every_tick() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"selector\"\nreactive = true\nchildren = [\n  { type = \"sequence\", children = [ { type = \"condition\", expression = \"context.turn.token_usage > 0.8\" }, { type = \"log\", message = \"wrap up\" } ] },\n  { type = \"wait_turns\", turns = 10, on_halted = { type = \"log\", message = \"exploring halted\" } },\n]",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn().with_token_usage(0.1));
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.2));
    assert!(
        nodes(&o).iter().any(|n| n.starts_with("condition")),
        "the first child is tried again: {:?}",
        nodes(&o)
    );
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.9));
    assert_eq!(said(&o), ["wrap up", "exploring halted"]);
    assert_eq!(o.fired(), ["b"]);
}

#[test]
fn parallel_nodes_succeed_on_all_or_any_and_halt_the_rest() {
    let any = "type = \"parallel\"\nsucceed = \"any\"\nchildren = [\n  { type = \"wait_for\", hook = \"on_tool_complete\", tool = \"vault_search\", name = \"vault\" },\n  { type = \"wait_for\", hook = \"on_tool_complete\", tool = \"web_search\", name = \"web\" },\n]";
    let (w, _d) = warden_with("on_query_start", any, &[]);
    let mut s = session(&w);
    s.tick(Hook::OnQueryStart, Event::query("q"));
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("web_search", json!({})),
    );
    assert_eq!(
        nodes(&o),
        [
            "vault (wait_for)=running",
            "web (wait_for)=success",
            "vault (wait_for)=halted",
            "parallel succeed any=success"
        ]
    );
    assert_eq!(o.fired(), ["b"]);

    let all = any.replace("\"any\"", "\"all\"");
    let (w, _d) = warden_with("on_query_start", &all, &[]);
    let mut s = session(&w);
    s.tick(Hook::OnQueryStart, Event::query("q"));
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("web_search", json!({})),
    );
    assert_eq!(
        nodes(&o),
        [
            "vault (wait_for)=running",
            "web (wait_for)=success",
            "parallel succeed all=running"
        ]
    );
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("vault_search", json!({})),
    );
    assert_eq!(
        nodes(&o),
        ["vault (wait_for)=success", "parallel succeed all=success"]
    );
    assert_eq!(o.fired(), ["b"]);
}

#[test]
fn a_guard_checks_at_start_or_every_tick_with_abort_self() {
    let tree = |abort: &str| {
        format!(
            "type = \"guard\"\nabort = \"{abort}\"\ncondition = \"context.turn.token_usage < 0.5\"\nchild = {{ type = \"wait_turns\", turns = 3, on_halted = {{ type = \"log\", message = \"halted\" }} }}"
        )
    };
    let (w, _d) = warden_with("on_turn_start", &tree("none"), &[]);
    let mut s = session(&w);
    assert!(
        nodes(&s.tick(Hook::OnTurnStart, turn().with_token_usage(0.9)))
            .contains(&"guard context.turn.token_usage < 0.5=failure".to_string())
    );
    s.tick(Hook::OnTurnStart, turn().with_token_usage(0.1));
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.9));
    assert!(
        said(&o).is_empty(),
        "without abort, the condition is not checked again"
    );

    let (w, _d) = warden_with("on_turn_start", &tree("self"), &[]);
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn().with_token_usage(0.1));
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.9));
    assert_eq!(said(&o), ["halted"]);
    assert!(
        nodes(&o).contains(&"guard context.turn.token_usage < 0.5 abort self=failure".to_string())
    );
}

#[test]
fn invert_force_success_and_force_failure() {
    for (kind, child_true, expect) in [
        ("invert", true, false),
        ("invert", false, true),
        ("force_success", false, true),
        ("force_failure", true, false),
    ] {
        let tree = format!(
            "type = \"{kind}\"\nchild = {{ type = \"condition\", expression = \"{child_true}\" }}"
        );
        let (w, _d) = warden_with("on_turn_start", &tree, &[]);
        let o = session(&w).tick(Hook::OnTurnStart, turn());
        assert_eq!(o.fired().len() == 1, expect, "{kind} over {child_true}");
    }
}

#[test]
fn cooldowns_in_turns_and_seconds_once_and_max_fires_remember_across_runs() {
    let (w, _d) = warden_with(
        "on_turn_start",
        &format!("type = \"cooldown\"\nturns = 2\nchild = {}", log("hi")),
        &[],
    );
    let mut s = session(&w);
    let fired: Vec<usize> = (0..5)
        .map(|_| s.tick(Hook::OnTurnStart, turn()).fired().len())
        .collect();
    assert_eq!(fired, [1, 0, 1, 0, 1]);

    let (w, _d) = warden_with(
        "on_turn_start",
        &format!("type = \"cooldown\"\nseconds = 60\nchild = {}", log("hi")),
        &[],
    );
    let mut s = session(&w);
    let fired: Vec<usize> = [0.0, 30.0, 59.0, 61.0]
        .iter()
        .map(|t| {
            s.tick(Hook::OnTurnStart, turn().at(1000.0 + t))
                .fired()
                .len()
        })
        .collect();
    assert_eq!(fired, [1, 0, 0, 1]);

    for (kind, extra, expect) in [
        ("once", "", [1, 0, 0, 0]),
        ("max_fires", "max = 3\n", [1, 1, 1, 0]),
    ] {
        let (w, _d) = warden_with(
            "on_turn_start",
            &format!("type = \"{kind}\"\n{extra}child = {}", log("hi")),
            &[],
        );
        let mut s = session(&w);
        let fired: Vec<usize> = (0..4)
            .map(|_| s.tick(Hook::OnTurnStart, turn()).fired().len())
            .collect();
        assert_eq!(fired, expect, "{kind}");
    }
}

#[test]
fn a_timeout_halts_its_child_at_the_turn_start_after_its_limit() {
    let (w, _d) = warden_with(
        "on_query_start",
        "type = \"timeout\"\nturns = 2\nchild = { type = \"wait_for\", hook = \"on_tool_complete\", on_halted = { type = \"log\", message = \"gave up waiting\" } }",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnQueryStart, Event::query("q").with_turn(1));
    let o = s.tick(Hook::OnTurnStart, turn().with_turn(2));
    assert!(said(&o).is_empty());
    assert_eq!(
        nodes(&o),
        [
            "wait_for on_tool_complete=running",
            "timeout 2 turns=running"
        ]
    );
    let o = s.tick(Hook::OnTurnStart, turn().with_turn(3));
    assert_eq!(said(&o), ["gave up waiting"]);
    assert_eq!(
        nodes(&o),
        [
            "wait_for on_tool_complete=halted",
            "timeout 2 turns=failure"
        ]
    );
}

#[test]
fn retry_runs_a_failed_child_again_and_repeat_a_successful_one() {
    // The child fails until the third run of the tick (its count is in plugin state).
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"retry\"\nattempts = 3\nchild = { type = \"sequence\", children = [ { type = \"log\", message = \"attempt\" }, { type = \"condition\", expression = \"false\" } ] }",
        &[],
    );
    let o = session(&w).tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["attempt", "attempt", "attempt"]);
    assert!(o.fired().is_empty());

    let (w, _d) = warden_with(
        "on_turn_start",
        &format!("type = \"repeat\"\ntimes = 3\nchild = {}", log("again")),
        &[],
    );
    let o = session(&w).tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["again", "again", "again"]);
    assert_eq!(o.fired(), ["b"]);

    // A running child keeps its place in the count.
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"repeat\"\ntimes = 2\nchild = { type = \"sequence\", children = [ { type = \"wait_turns\", turns = 1 }, { type = \"log\", message = \"round\" } ] }",
        &[],
    );
    let mut s = session(&w);
    let rounds: Vec<Vec<String>> = (0..4)
        .map(|_| said(&s.tick(Hook::OnTurnStart, turn())))
        .collect();
    assert_eq!(
        rounds,
        [
            vec![],
            vec!["round".to_string()],
            vec!["round".to_string()],
            vec![]
        ]
    );
}

#[test]
fn wait_for_takes_a_later_event_of_its_hook_tool_and_condition() {
    let (w, _d) = warden_with(
        "on_tool_complete",
        "type = \"sequence\"\nchildren = [\n  { type = \"wait_for\", hook = \"on_tool_complete\", tool = [\"vault_search\"], condition = \"result.count > 3\" },\n  { type = \"log\", message = \"found {{ result.count }}\" },\n]",
        &[],
    );
    let mut s = session(&w);
    let done = |s: &mut Session, tool: &str, n: i64| {
        said(&s.tick(
            Hook::OnToolComplete,
            Event::tool_complete(tool, json!({"count": n})),
        ))
    };
    assert!(
        done(&mut s, "vault_search", 9).is_empty(),
        "the event that starts it does not count"
    );
    assert!(done(&mut s, "web_search", 9).is_empty(), "another tool");
    assert!(
        done(&mut s, "vault_search", 2).is_empty(),
        "its condition does not hold"
    );
    assert_eq!(done(&mut s, "vault_search", 5), ["found 5"]);
}

#[test]
fn skip_if_while_and_the_result_actions() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"sequence\"\nchildren = [\n  { type = \"log\", message = \"skippable\", skip_if = \"context.turn.number == 1\" },\n  { type = \"wait_turns\", turns = 3, while = \"context.turn.token_usage < 0.5\", on_halted = { type = \"log\", message = \"stopped\" }, on_failure = { type = \"log\", message = \"failed\" } },\n]\non_success = { type = \"log\", message = \"done\" }\non_failure = { type = \"log\", message = \"tree failed\" }",
        &[],
    );
    let mut s = session(&w);
    let o = s.tick(Hook::OnTurnStart, turn());
    assert!(said(&o).is_empty());
    assert!(nodes(&o).contains(&"action log=skipped".to_string()));
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.7));
    assert_eq!(said(&o), ["stopped", "failed", "tree failed"]);
}

#[test]
fn action_nodes_apply_together_and_a_failing_one_fails_its_node() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"selector\"\nchildren = [\n  { type = \"action\", actions = [ { type = \"log\", message = \"one\" }, { type = \"log\", message = \"{{ result.count }}\" } ] },\n  { type = \"log\", message = \"fallback\" },\n]",
        &[],
    );
    let o = session(&w).tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["fallback"], "the failed node applied nothing");
    assert_eq!(o.errors.len(), 1);
    assert!(
        o.errors[0].error.contains("action 2 (log)"),
        "{}",
        o.errors[0].error
    );
}

#[test]
fn a_script_node_waits_across_hooks_and_is_closed_when_preempted() {
    let (w, _d) = warden_with(
        "on_query_start",
        "type = \"selector\"\nchildren = [\n  { type = \"guard\", abort = \"lower\", condition = \"context.turn.token_usage > 0.9\", child = { type = \"log\", message = \"stop\" } },\n  { type = \"script\", script = \"scripts/watch.lua\" },\n]",
        &[(
            "scripts/watch.lua",
            "notify('watching')\nlocal ev = wait_for('on_tool_complete')\nnotify('saw ' .. ev.tool_name)\nwait_turns(5)\nreturn true",
        )],
    );
    let mut s = session(&w);
    assert_eq!(
        said(&s.tick(Hook::OnQueryStart, Event::query("q"))),
        ["watching"]
    );
    let o = s.tick(
        Hook::OnToolComplete,
        Event::tool_complete("vault_search", json!({})),
    );
    assert_eq!(said(&o), ["saw vault_search"]);
    let o = s.tick(Hook::OnTurnStart, turn().with_token_usage(0.95));
    assert_eq!(said(&o), ["stop"]);
    assert_eq!(o.halted.len(), 1, "{:?}", o.halted);
    assert_eq!(o.halted[0].reason, "its node was halted");
}

#[test]
fn subtrees_are_inlined_and_cycles_refused() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"sequence\"\nchildren = [ { type = \"subtree\", behavior = \"greet\" }, { type = \"log\", message = \"after\" } ]",
        &[(
            "greet.toml",
            "[behavior]\nid = \"greet\"\ntrigger = \"on_session_end\"\n[tree]\ntype = \"log\"\nmessage = \"hello\"\n",
        )],
    );
    let o = session(&w).tick(Hook::OnTurnStart, turn());
    assert_eq!(said(&o), ["hello", "after"]);

    let dir = tempfile::tempdir().unwrap();
    for (id, other) in [("a", "b"), ("b", "a")] {
        fs::write(
            dir.path().join(format!("{id}.toml")),
            format!("[behavior]\nid = \"{id}\"\ntrigger = \"on_turn_start\"\n[tree]\ntype = \"subtree\"\nbehavior = \"{other}\"\n"),
        )
        .unwrap();
    }
    fs::write(
        dir.path().join("c.toml"),
        "[behavior]\nid = \"c\"\ntrigger = \"on_turn_start\"\n[tree]\ntype = \"subtree\"\nbehavior = \"nowhere\"\n",
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter()
            .any(|d| d.contains("subtrees form a cycle: a -> b -> a")),
        "{d:#?}"
    );
    assert!(
        d.iter().any(|d| d.contains("no behavior `nowhere`")),
        "{d:#?}"
    );
}

#[test]
fn mistakes_in_trees_name_their_field() {
    let cases: &[(&str, &str)] = &[
        (
            "type = \"sequense\"\nchildren = []",
            "did you mean `sequence`?",
        ),
        (
            "type = \"sequence\"\nchildren = []",
            "a sequence needs at least one child",
        ),
        ("type = \"selector\"", "tree.children"),
        (
            "type = \"guard\"\ncondition = \"true\"",
            "a guard node needs a `child`",
        ),
        (
            "type = \"retry\"\nattempts = 0\nchild = { type = \"log\", message = \"x\" }",
            "from 1 to 100",
        ),
        (
            "type = \"wait_for\"\nhook = \"on_tool_complet\"",
            "did you mean `on_tool_complete`?",
        ),
        (
            "type = \"wait_for\"\nhook = \"on_turn_start\"\ntool = \"x\"",
            "a tool filter only applies to tool hooks",
        ),
        (
            "type = \"condition\"\nexpression = \"context.turn.nubmer > 1\"",
            "did you mean `context.turn.number`?",
        ),
        (
            "type = \"sequence\"\nchildren = [ { type = \"log\", mesage = \"x\" } ]",
            "tree.children[0].mesage",
        ),
        (
            "type = \"cooldown\"\nchild = { type = \"log\", message = \"x\" }",
            "a cooldown needs `turns` or `seconds`",
        ),
        (
            "type = \"guard\"\nabort = \"always\"\ncondition = \"true\"\nchild = { type = \"log\", message = \"x\" }",
            "unknown abort mode",
        ),
    ];
    for (tree, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("b.toml"),
            format!("[behavior]\nid = \"b\"\ntrigger = \"on_turn_start\"\n[tree]\n{tree}\n"),
        )
        .unwrap();
        let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
        let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
        assert!(
            d.iter().any(|d| d.contains(want)),
            "{tree}\nwant {want}\n{d:#?}"
        );
        assert!(
            w.program().rules().next().is_none(),
            "{tree}: a broken behavior does not load"
        );
    }
    // Nesting beyond the limit is refused, not a stack overflow.
    let mut tree = String::from("{ type = \"log\", message = \"x\" }");
    for _ in 0..40 {
        tree = format!("{{ type = \"invert\", child = {tree} }}");
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        format!("tree = {tree}\n[behavior]\nid = \"b\"\ntrigger = \"on_turn_start\"\n"),
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    assert!(
        w.diagnostics()
            .iter()
            .any(|d| d.message().contains("more than 32 levels"))
    );
}

#[test]
fn a_guard_that_can_never_pass_is_a_warning() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"selector\"\nchildren = [ { type = \"guard\", condition = \"false\", child = { type = \"log\", message = \"x\" } }, { type = \"log\", message = \"y\" } ]",
        &[],
    );
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter().any(|d| d.contains("this guard can never pass")),
        "{d:#?}"
    );
}

#[test]
fn a_running_behavior_switched_off_is_halted_with_its_on_halted_actions() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"sequence\"\non_halted = { type = \"log\", message = \"outer halted\" }\nchildren = [\n  { type = \"wait_turns\", turns = 5, on_halted = { type = \"log\", message = \"wait halted\" } },\n]",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn());
    w.set_rule_enabled("default", "b", false).unwrap();
    let o = s.tick(Hook::OnTurnStart, turn());
    assert_eq!(o.halted.len(), 1);
    assert_eq!(o.halted[0].reason, "its rule was switched off");
    assert_eq!(said(&o), ["wait halted", "outer halted"], "deepest first");
    assert_eq!(nodes(&o), ["wait_turns 5 turns=halted", "sequence=halted"]);
    assert!(
        said(&s.tick(Hook::OnTurnStart, turn())).is_empty(),
        "once: it no longer runs"
    );
    let _ = NodeStatus::Halted;
}

#[test]
fn the_session_end_halts_running_trees_with_their_on_halted_actions() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"wait_turns\"\nturns = 5\non_halted = [{ type = \"log\", message = \"unfinished at the end\" }, { type = \"set_state\", key = \"unfinished\", value = \"yes\" }]",
        &[],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn());
    let o = s.tick(Hook::OnSessionEnd, Event::new());
    assert_eq!(said(&o), ["unfinished at the end"]);
    assert!(
        o.effects
            .iter()
            .any(|e| matches!(e, Effect::SetState { key, .. } if key == "unfinished")),
        "{:?}",
        o.effects
    );
    assert_eq!(o.halted.len(), 1, "{:?}", o.halted);
    assert_eq!(o.halted[0].reason, "the session ended");
    assert_eq!(nodes(&o), ["wait_turns 5 turns=halted"]);
}

#[test]
fn a_behavior_file_needs_a_tree() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        "[behavior]\nid = \"b\"\ntrigger = \"on_turn_start\"\n",
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert!(
        d.iter().any(|d| d.contains("the behavior has no [tree]")),
        "{d:#?}"
    );
    let _ = Path::new(".");
}

#[test]
fn a_rule_shadowed_in_an_exclusive_group_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    for (id, priority, condition) in [
        ("always", 200, "true"),
        ("never-reached", 100, "context.turn.number > 1"),
    ] {
        fs::write(
            dir.path().join(format!("{id}.toml")),
            format!("[rule]\nid = \"{id}\"\ntrigger = \"on_turn_start\"\npriority = {priority}\nexclusive = \"g\"\ncondition = \"{condition}\"\n[action]\ntype = \"log\"\nmessage = \"x\"\n"),
        )
        .unwrap();
    }
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let d: Vec<String> = w.diagnostics().iter().map(ToString::to_string).collect();
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].contains("never-reached.toml") && d[0].contains("`never-reached` is never evaluated: `always`, before it in exclusive group `g`, always matches"), "{}", d[0]);
}

#[test]
fn a_running_tree_or_script_resumes_at_its_hook_whatever_the_tool_its_filter_named() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        "[behavior]\nid = \"b\"\ntrigger = \"on_tool_complete\"\ntool = \"vault_search\"\n\n\
         [tree]\ntype = \"sequence\"\nchildren = [\n  { type = \"wait_for\", hook = \"on_tool_complete\" },\n  \
         { type = \"log\", message = \"then {{ tool.name }}\" },\n]\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("s.toml"),
        "[rule]\nid = \"s\"\ntrigger = \"on_tool_complete\"\ntool = \"vault_search\"\n\
         [condition]\nscript = \"s.lua\"\n[action]\ntype = \"log\"\nmessage = \"script done\"\n",
    )
    .unwrap();
    fs::write(dir.path().join("s.lua"), "coroutine.yield()\nreturn true\n").unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    assert!(w.diagnostics().iter().all(|d| !d.is_error()));
    let mut s = session(&w);
    let done = |s: &mut Session, tool: &str| {
        said(&s.tick(
            Hook::OnToolComplete,
            Event::tool_complete(tool, json!({"count": 1})),
        ))
    };
    assert!(
        done(&mut s, "web_search").is_empty(),
        "the filter gates the start"
    );
    assert!(
        done(&mut s, "vault_search").is_empty(),
        "both start and wait"
    );
    let mut next = done(&mut s, "web_search");
    next.sort();
    assert_eq!(
        next,
        ["script done", "then web_search"],
        "checked when they started, not when they resume"
    );
    assert!(done(&mut s, "web_search").is_empty(), "both are over");
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

/// The errors of loading one behavior file `b.toml` with this `[tree]`.
fn tree_errors(tree: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("b.toml"),
        format!("[behavior]\nid = \"b\"\ntrigger = \"on_tool_complete\"\n\n[tree]\n{tree}\n"),
    )
    .unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    w.diagnostics()
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect()
}

#[test]
fn nothing_in_a_tree_is_dropped_without_an_error() {
    // An empty action list once made its whole behavior vanish, with "0 errors".
    let e = tree_errors(
        "type = \"sequence\"\nchildren = [{ type = \"log\", message = \"a\" }, { type = \"action\", actions = [] }]",
    );
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].contains("`actions` is empty: an action node needs at least one action"));
    // An empty tool list would match no tool (a rule's `tool = []` is refused too).
    let e = tree_errors("type = \"wait_for\"\nhook = \"on_tool_complete\"\ntool = []");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].contains("`tool` is empty, so it would match no tool"));
    // A number JSON cannot hold is refused once, not also taken for a missing key.
    let e = tree_errors(
        "type = \"cooldown\"\nseconds = nan\nchild = { type = \"log\", message = \"x\" }",
    );
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].contains("`seconds` holds `nan`"), "{e:#?}");
}

#[test]
fn a_bad_policy_or_abort_mode_is_the_only_error_not_its_children_too() {
    let e = tree_errors(
        "type = \"guard\"\ncondition = \"true\"\nabort = \"sometimes\"\nchild = { type = \"log\", message = \"x\" }",
    );
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].contains("unknown abort mode `sometimes`"));
    let e = tree_errors(
        "type = \"parallel\"\nsucceed = \"most\"\nchildren = [{ type = \"log\", message = \"x\" }]",
    );
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].contains("unknown policy `most`"));
}

#[test]
fn a_problem_inside_a_subtree_is_reported_in_the_file_that_uses_it_too() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| fs::write(dir.path().join(name), text).unwrap();
    write(
        "a.toml",
        "[behavior]\nid = \"a\"\ntrigger = \"on_turn_start\"\n[tree]\ntype = \"subtree\"\nbehavior = \"b\"\n",
    );
    write(
        "b.toml",
        "[behavior]\nid = \"b\"\ntrigger = \"on_turn_start\"\n[tree]\ntype = \"subtree\"\nbehavior = \"a\"\n",
    );
    write(
        "broken.toml",
        "[behavior]\nid = \"broken\"\ntrigger = \"on_turn_start\"\nenabled = false\n[tree]\ntype = \"condition\"\nexpression = \"context.turn.nubmer > 1\"\n",
    );
    write(
        "user.toml",
        "[behavior]\nid = \"user\"\ntrigger = \"on_turn_start\"\n[tree]\ntype = \"sequence\"\nchildren = [\n  { type = \"subtree\", behavior = \"a\" },\n  { type = \"subtree\", behavior = \"broken\" },\n]\n",
    );
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let in_file = |file: &str| -> Vec<String> {
        w.diagnostics()
            .iter()
            .filter(|d| d.path().ends_with(file))
            .map(|d| {
                format!(
                    "{}:{} {}",
                    d.line().unwrap_or(0),
                    d.field().unwrap_or(""),
                    d.message()
                )
            })
            .collect()
    };
    let user = in_file("user.toml");
    assert_eq!(user.len(), 2, "{user:#?}");
    assert!(
        user[0].starts_with(
            "7:tree.children[0].behavior subtree `a`: subtrees form a cycle: a -> b -> a (at "
        ) && user[0].ends_with("b.toml:6:12)"),
        "{}",
        user[0]
    );
    assert!(
        user[1].starts_with("8:tree.children[1].behavior subtree `broken`: ")
            && user[1].contains("nubmer")
            && user[1].ends_with("broken.toml:7:28)"),
        "{}",
        user[1]
    );
    // Each file reports its own problems once: a and b their cycle, broken its field.
    assert_eq!(in_file("a.toml").len(), 1);
    assert_eq!(in_file("b.toml").len(), 1);
    assert_eq!(
        in_file("broken.toml").len(),
        1,
        "{:#?}",
        in_file("broken.toml")
    );
}

#[test]
fn a_behavior_halted_with_a_waiting_script_is_reported_once_with_the_reason() {
    let (w, _d) = warden_with(
        "on_turn_start",
        "type = \"script\"\nscript = \"wait.lua\"",
        &[("wait.lua", "wait_turns(5)\nreturn true\n")],
    );
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn());
    let o = s.tick(Hook::OnSessionEnd, Event::new());
    let halted: Vec<(&str, &str)> = o
        .halted
        .iter()
        .map(|h| (&*h.rule, h.reason.as_str()))
        .collect();
    assert_eq!(halted, [("b", "the session ended")]);
    let mut s = session(&w);
    s.tick(Hook::OnTurnStart, turn());
    w.set_rule_enabled("default", "b", false).unwrap();
    let o = s.tick(Hook::OnTurnStart, turn());
    let halted: Vec<(&str, &str)> = o
        .halted
        .iter()
        .map(|h| (&*h.rule, h.reason.as_str()))
        .collect();
    assert_eq!(halted, [("b", "its rule was switched off")]);
}
