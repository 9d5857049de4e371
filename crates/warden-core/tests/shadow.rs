//! Shadow rules: evaluated at every tick, what they would have decided recorded (the outcome's
//! `shadow`, the execution log), nothing they decide applied. The property test: a rule in
//! shadow never changes an answer (the session answers exactly as it would with the rule off),
//! and its log rows are what it decides when it is on.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use proptest::prelude::*;
use serde_json::json;
use warden_core::{
    ControlError, Effect, Event, ExecutionFilter, Hook, Outcome, Proceed, RuleState, Store, Warden,
};

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap();
    }
}

fn logged(dir: &Path) -> Warden {
    let w = Warden::builder()
        .rules_dir(dir)
        .store(Store::open(dir.join("w.db")).unwrap())
        .execution_log_sample(1.0)
        .build()
        .unwrap();
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    w
}

const DENY_RM: &str = "[rule]\nid = \"deny-rm\"\ntrigger = \"on_tool_call\"\npriority = 50\n\
    condition = \"matches(tool.arguments.command, '^rm')\"\n\
    [action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"no rm\"\n";

fn rm() -> Event {
    Event::tool_call("Bash", json!({ "command": "rm -rf build" }))
}

#[test]
fn a_rule_in_shadow_by_its_file_decides_nothing_and_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let shadowed = DENY_RM.replace("priority = 50\n", "priority = 50\nshadow = true\n");
    let notify = "[rule]\nid = \"nag\"\ntrigger = \"on_tool_call\"\nshadow = true\ncondition = \"true\"\n\
        [action]\ntype = \"notify_self\"\nmessage = \"careful\"\n";
    write(
        dir.path(),
        &[("deny.toml", &shadowed), ("nag.toml", notify)],
    );
    let w = logged(dir.path());
    let info = w.rule_info("default", "default", "deny-rm").unwrap();
    assert_eq!(
        (info.state, info.default_state),
        (RuleState::Shadow, RuleState::Shadow)
    );

    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, rm());
    // The call runs, nothing is injected, nothing fired live.
    assert!(matches!(o.proceed(), Proceed::Yes), "{:?}", o.ruling);
    assert!(o.injected().is_empty() && o.effects.is_empty() && o.fired().is_empty());
    // What they would have done is in the outcome, marked.
    // In priority order (`nag` has the default priority, 100).
    assert_eq!(o.shadow_fired(), ["nag", "deny-rm"]);
    let decisions: Vec<_> = o.shadow_decisions().collect();
    assert_eq!(decisions, [("deny-rm", "deny", "no rm")]);
    assert!(
        o.shadow
            .iter()
            .any(|e| matches!(e, Effect::NotifySelf(n) if &*n.message == "careful"))
    );

    let rows = w
        .store()
        .executions(&ExecutionFilter {
            shadow_only: true,
            ..ExecutionFilter::default()
        })
        .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let deny = rows.iter().find(|r| r.record.rule_id == "deny-rm").unwrap();
    assert!(deny.record.shadow && deny.record.action_executed);
    assert_eq!(deny.record.decision.as_deref(), Some("deny"));
    assert_eq!(deny.record.live_decision.as_deref(), Some("none"));
}

#[test]
fn a_firing_in_shadow_is_logged_whatever_the_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let shadowed = DENY_RM.replace("priority = 50\n", "priority = 50\nshadow = true\n");
    write(dir.path(), &[("deny.toml", &shadowed)]);
    let w = Warden::builder()
        .rules_dir(dir.path())
        .store(Store::open(dir.path().join("w.db")).unwrap())
        .build()
        .unwrap();
    let mut s = w.session();
    s.tick(Hook::OnToolCall, rm());
    s.tick(
        Hook::OnToolCall,
        Event::tool_call("Bash", json!({ "command": "ls" })),
    );
    let rows = w.store().executions(&ExecutionFilter::default()).unwrap();
    // The firing, not the evaluation that did not match, and no live rule's.
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].record.shadow && rows[0].record.decision.as_deref() == Some("deny"));
}

#[test]
fn a_user_puts_a_rule_in_shadow_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let allow = "[rule]\nid = \"allow-all\"\ntrigger = \"on_tool_call\"\npriority = 10\ncondition = \"true\"\n\
        [action]\ntype = \"decide\"\ndecision = \"allow\"\nreason = \"fine\"\n";
    write(dir.path(), &[("deny.toml", DENY_RM), ("allow.toml", allow)]);
    let w = logged(dir.path());
    let mut s = w.session();
    assert!(matches!(
        s.tick(Hook::OnToolCall, rm()).proceed(),
        Proceed::No { .. }
    ));

    let info = w
        .set_rule_state("default", "deny-rm", RuleState::Shadow)
        .unwrap();
    assert_eq!(info.state, RuleState::Shadow);
    assert!(info.enabled, "a rule in shadow is evaluated");
    let o = s.tick(Hook::OnToolCall, rm());
    assert!(matches!(o.proceed(), Proceed::Yes), "{:?}", o.ruling);
    assert_eq!(o.fired(), ["allow-all"]);
    assert_eq!(o.shadow_fired(), ["deny-rm"]);
    let row = &w
        .store()
        .executions(&ExecutionFilter {
            shadow_only: true,
            ..ExecutionFilter::default()
        })
        .unwrap()[0];
    // Beside what it would have decided, what the live rules decided.
    assert_eq!(row.record.decision.as_deref(), Some("deny"));
    assert_eq!(row.record.live_decision.as_deref(), Some("allow"));

    w.reset_rule("default", "deny-rm").unwrap();
    assert!(matches!(
        s.tick(Hook::OnToolCall, rm()).proceed(),
        Proceed::No { .. }
    ));
}

#[test]
fn a_rule_in_shadow_does_not_hold_its_exclusive_group() {
    let dir = tempfile::tempdir().unwrap();
    let first = "[rule]\nid = \"first\"\ntrigger = \"on_tool_call\"\npriority = 90\nexclusive = \"g\"\nshadow = true\n\
        condition = \"true\"\n[action]\ntype = \"decide\"\ndecision = \"allow\"\nreason = \"first\"\n";
    let second = "[rule]\nid = \"second\"\ntrigger = \"on_tool_call\"\npriority = 10\nexclusive = \"g\"\n\
        condition = \"true\"\n[action]\ntype = \"decide\"\ndecision = \"deny\"\nreason = \"second\"\n";
    write(dir.path(), &[("a.toml", first), ("b.toml", second)]);
    let w = logged(dir.path());
    let o = w.session().tick(Hook::OnToolCall, rm());
    // Live, `first` would have won the group; in shadow, the group goes on to `second`.
    assert_eq!(o.fired(), ["second"]);
    assert_eq!(o.refused(), Some("second"));
    assert_eq!(o.shadow_fired(), ["first"]);
}

#[test]
fn what_a_rule_in_shadow_writes_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let writer = "[rule]\nid = \"writer\"\ntrigger = \"on_turn_start\"\nshadow = true\ncondition = \"true\"\n\
        [action]\ntype = \"set_state\"\nkey = \"seen\"\nvalue = true\nscope = \"session\"\n";
    let reader = "[rule]\nid = \"reader\"\ntrigger = \"on_turn_end\"\n\
        condition = \"context.state.get('seen', false) == true\"\n\
        [action]\ntype = \"notify_self\"\nmessage = \"seen\"\n";
    write(dir.path(), &[("w.toml", writer), ("r.toml", reader)]);
    let w = logged(dir.path());
    let mut s = w.session();
    let o = s.tick(Hook::OnTurnStart, Event::new());
    assert!(
        matches!(&o.shadow[..], [Effect::SetState { .. }]),
        "{:?}",
        o.shadow
    );
    let o = s.tick(Hook::OnTurnEnd, Event::new());
    assert!(
        o.fired().is_empty(),
        "the write did not happen: {:?}",
        o.fired()
    );
}

#[test]
fn core_rules_cannot_be_put_in_shadow_and_plugins_can() {
    let dir = tempfile::tempdir().unwrap();
    let core = DENY_RM.replace("priority = 50\n", "priority = 50\ncore = true\n");
    write(dir.path(), &[("deny.toml", &core)]);
    let w = logged(dir.path());
    let err = w
        .set_rule_state("default", "deny-rm", RuleState::Shadow)
        .unwrap_err();
    assert!(matches!(
        err,
        ControlError::CoreRule {
            to: RuleState::Shadow,
            ..
        }
    ));
    assert!(err.to_string().contains("cannot be put in shadow"), "{err}");

    // A whole plugin: by its manifest, and by a user's choice.
    let plugins = tempfile::tempdir().unwrap();
    let p = plugins.path().join("guard");
    fs::create_dir_all(p.join("rules")).unwrap();
    fs::write(
        p.join("manifest.toml"),
        "[plugin]\nid = \"guard\"\nname = \"Guard\"\nversion = \"1.0.0\"\nshadow = true\n\n[rules]\ninclude = [\"rules/*.toml\"]\n",
    )
    .unwrap();
    fs::write(p.join("rules/deny.toml"), DENY_RM).unwrap();
    let w = Warden::builder()
        .plugins_dir(plugins.path())
        .build()
        .unwrap();
    assert!(w.diagnostics().is_empty(), "{:?}", w.diagnostics());
    let mut s = w.session();
    let o = s.tick(Hook::OnToolCall, rm());
    assert!(matches!(o.proceed(), Proceed::Yes));
    assert_eq!(o.shadow_fired(), ["guard/deny-rm"]);
    let infos = w
        .set_plugin_state("default", "guard", Some(RuleState::On))
        .unwrap();
    assert_eq!(infos[0].state, RuleState::On);
    assert!(matches!(
        s.tick(Hook::OnToolCall, rm()).proceed(),
        Proceed::No { .. }
    ));
    let err = w.set_plugin_state("default", "gaurd", None).unwrap_err();
    assert!(err.to_string().contains("did you mean `guard`"), "{err}");
}

// The property: random rules, some in shadow; the same events to a session where those rules
// are off. Every answer is the same.

#[derive(Debug, Clone, Copy)]
enum Act {
    Allow,
    Ask,
    Deny,
    Stop,
    Rewrite,
    Notify,
    Write,
}

#[derive(Debug, Clone)]
struct Rule {
    act: Act,
    priority: u8,
    tool: Option<u8>,
    group: Option<u8>,
    once: bool,
    /// Reads the session state the `Write` rules set.
    reads: bool,
    shadow: bool,
}

fn rule() -> impl Strategy<Value = Rule> {
    let act = prop_oneof![
        Just(Act::Allow),
        Just(Act::Ask),
        Just(Act::Deny),
        Just(Act::Stop),
        Just(Act::Rewrite),
        Just(Act::Notify),
        Just(Act::Write),
    ];
    (
        act,
        1u8..6,
        prop::option::of(0u8..3),
        prop::option::weighted(0.4, 0u8..2),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(act, priority, tool, group, once, reads, shadow)| Rule {
            act,
            priority,
            tool,
            group,
            once,
            reads,
            shadow,
        })
}

/// The rule's file; `state` says what its `shadow` rules become (`shadow = true` or
/// `enabled = false`), and `None` leaves every rule on.
fn rule_file(id: &str, r: &Rule, state: Option<&str>) -> String {
    let mut head = format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"on_tool_call\"\npriority = {}\n",
        u32::from(r.priority) * 10
    );
    if let Some(t) = r.tool {
        head += &format!("tool = \"t{t}\"\n");
    }
    if let Some(g) = r.group {
        head += &format!("exclusive = \"g{g}\"\n");
    }
    if r.once {
        head += "once_per_session = true\n";
    }
    if r.shadow
        && let Some(state) = state
    {
        head += state;
        head += "\n";
    }
    let condition = if r.reads {
        "context.state.get('marked', 0) < 2"
    } else {
        "true"
    };
    let action = match r.act {
        Act::Allow | Act::Ask | Act::Deny | Act::Stop => {
            let d = format!("{:?}", r.act).to_lowercase();
            format!("type = \"decide\"\ndecision = \"{d}\"\nreason = \"{id} says {d}\"\n")
        }
        Act::Rewrite => "type = \"rewrite\"\n[action.set]\n\"arguments.checked\" = true\n".into(),
        Act::Notify => format!("type = \"notify_self\"\nmessage = \"{id} noticed\"\n"),
        Act::Write => "type = \"set_state\"\nkey = \"marked\"\nscope = \"session\"\n\
            value = \"{{ context.state.get('marked', 0) + 1 }}\"\n"
            .into(),
    };
    format!("{head}condition = \"{condition}\"\n\n[action]\n{action}")
}

fn warden_of(rules: &[Rule], state: Option<&str>) -> (tempfile::TempDir, Warden) {
    let dir = tempfile::tempdir().unwrap();
    for (i, r) in rules.iter().enumerate() {
        let id = format!("r-{i}");
        fs::write(
            dir.path().join(format!("{id}.toml")),
            rule_file(&id, r, state),
        )
        .unwrap();
    }
    let w = Warden::builder()
        .rules_dir(dir.path())
        .store(Store::open(dir.path().join("w.db")).unwrap())
        .execution_log_sample(1.0)
        .build()
        .unwrap();
    (dir, w)
}

/// Everything a host reads of an outcome.
fn answer(o: &Outcome) -> String {
    format!(
        "{:?} | {:?} | {:?} | {:?} | {:?} | {:?} | {:?}",
        o.proceed(),
        o.ruling,
        o.rendered(),
        o.effects,
        o.errors,
        o.halted,
        o.fired()
    )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_rule_in_shadow_never_changes_an_answer(
        rules in prop::collection::vec(rule(), 1..7),
        calls in prop::collection::vec(0u8..3, 1..6),
    ) {
        let (_a, shadowed) = warden_of(&rules, Some("shadow = true"));
        let (_b, off) = warden_of(&rules, Some("enabled = false"));
        // (Warnings allowed: a rule that always matches hides the rest of its group.)
        prop_assert!(
            shadowed.diagnostics().iter().all(|d| !d.is_error()),
            "{:?}",
            shadowed.diagnostics()
        );
        let (mut s, mut t) = (shadowed.session(), off.session());
        for tool in &calls {
            let event = || Event::tool_call(format!("t{tool}"), json!({ "command": "ls" }));
            let (a, b) = (s.tick(Hook::OnToolCall, event()), t.tick(Hook::OnToolCall, event()));
            prop_assert_eq!(answer(&a), answer(&b));
            let only_shadow = a
                .shadow_fired()
                .iter()
                .all(|r| rules[r[2..].parse::<usize>().unwrap()].shadow);
            prop_assert!(only_shadow, "{:?}", a.shadow_fired());
        }
    }

    #[test]
    fn the_log_rows_of_a_rule_in_shadow_are_what_it_decides_when_on(
        rules in prop::collection::vec(rule(), 1..6),
        calls in prop::collection::vec(0u8..3, 1..5),
    ) {
        // Without groups or state, what a rule decides at an event does not depend on the
        // other rules, so the same rule on (in a session of its own) decides the same.
        let rules: Vec<Rule> = rules
            .into_iter()
            .map(|r| Rule { group: None, reads: false, act: match r.act {
                Act::Write | Act::Stop => Act::Deny,
                a => a,
            }, ..r })
            .collect();
        let (_a, shadowed) = warden_of(&rules, Some("shadow = true"));
        let (_b, on) = warden_of(&rules, None);
        let (mut s, mut t) = (shadowed.session(), on.session());
        let mut expected: Vec<(String, Option<String>)> = Vec::new();
        for tool in &calls {
            let event = || Event::tool_call(format!("t{tool}"), json!({ "command": "ls" }));
            s.tick(Hook::OnToolCall, event());
            let live = t.tick(Hook::OnToolCall, event());
            let decided: BTreeMap<&str, &str> = live
                .effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Decide { rule, decision, .. } => Some((&**rule, decision.name())),
                    Effect::Rewrite { rule, .. } => Some((&**rule, "rewrite")),
                    _ => None,
                })
                .collect();
            for (rule, evaluation) in live.trace() {
                if rules[rule[2..].parse::<usize>().unwrap()].shadow
                    && *evaluation == warden_core::Evaluation::Fired
                {
                    expected.push((rule.to_string(), decided.get(rule).map(|d| d.to_string())));
                }
            }
        }
        let mut rows = shadowed
            .store()
            .executions(&ExecutionFilter {
                shadow_only: true,
                limit: Some(1000),
                ..ExecutionFilter::default()
            })
            .unwrap();
        rows.reverse();
        let got: Vec<(String, Option<String>)> = rows
            .iter()
            .filter(|r| r.record.action_executed)
            .map(|r| (r.record.rule_id.clone(), r.record.decision.clone()))
            .collect();
        prop_assert_eq!(got, expected);
    }
}
