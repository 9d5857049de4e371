//! The lean leaves (`Tick::lone_expression` and `Tick::lone_script` in warden-session): a lone
//! expression rule, in a step where nothing runs, no rule is in shadow and the tick is not
//! sampled, and a lone rule whose script waits, resumed at its own hook in a step where no rule
//! is in shadow and the tick is not sampled, skip the general leaf's machinery (bonsai's
//! bridge, timing, shadow). A sampled tick always takes the general path (and evaluates every
//! rule, not only those the threshold index chooses), so a session whose every tick is sampled
//! is the general path's reference: random rule sets (thresholds exact or not, decorators,
//! tool filters, exclusive groups, conditions that cannot be decided or fail, scripts that
//! wait at their own hook or another, act while they wait, end or fail, fail-closed guards,
//! every kind of delivery) over random events must come to the same outcomes both ways.

use proptest::prelude::*;
use warden_core::{Event, Hook, Outcome, Store, Warden};

#[derive(Debug, Clone)]
struct Rule {
    tool_hook: bool,
    condition: u8,
    threshold: u8,
    decorator: u8,
    filter: bool,
    group: bool,
    action: u8,
    deny_on_error: bool,
    priority: u16,
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        any::<bool>(),
        0u8..11,
        0u8..10,
        0u8..4,
        any::<bool>(),
        prop::bool::weighted(0.2),
        0u8..5,
        any::<bool>(),
        1u16..5,
    )
        .prop_map(
            |(
                tool_hook,
                condition,
                threshold,
                decorator,
                filter,
                group,
                action,
                deny_on_error,
                priority,
            )| Rule {
                tool_hook,
                condition,
                threshold,
                decorator,
                filter,
                group,
                action,
                deny_on_error,
                priority,
            },
        )
}

/// The script of rule `i`'s condition, for the conditions from 5 on. (With them, this test was
/// seen to fail when the waiting script's lean leaf left a failure out of the outcome's errors
/// or out of the execution log, and when it recorded its own hook as the one to wake it where
/// the script waits for another.)
fn script(i: usize, r: &Rule) -> Option<String> {
    let t = f64::from(r.threshold) / 10.0;
    Some(match r.condition {
        // Waits a few ticks of its hook, then decides.
        5 => format!(
            "for _ = 1, {} do coroutine.yield() end\nreturn context.turn.token_usage > {t:.1}",
            r.threshold % 3 + 1
        ),
        // Acts while it waits.
        6 => format!("coroutine.yield()\nnotify('resumed r{i}')\ncoroutine.yield()\nreturn true"),
        // Waits at its own hook, then for another (a tree woken by a hook not its own).
        7 => "coroutine.yield()\nwait_for('on_turn_end')\nreturn true".into(),
        // Fails when it is resumed.
        8 => format!("coroutine.yield()\nerror('boom r{i}')"),
        // Never ends.
        9 => "while true do coroutine.yield() end".into(),
        // Waits for the next turn (at its own hook, or another's for a tool hook's rule).
        10 => "wait_turns(1)\nreturn true".into(),
        _ => return None,
    })
}

fn toml(i: usize, r: &Rule) -> String {
    let t = f64::from(r.threshold) / 10.0;
    let trigger = if r.tool_hook {
        "on_tool_call"
    } else {
        "on_turn_start"
    };
    let mut s = format!(
        "[rule]\nid = \"r{i}\"\ntrigger = \"{trigger}\"\npriority = {}\n",
        r.priority * 10
    );
    match r.decorator {
        1 => s.push_str("once_per_session = true\n"),
        2 => s.push_str("max_fires = 2\n"),
        3 => s.push_str("cooldown_turns = 2\n"),
        _ => {}
    }
    if r.tool_hook && r.filter {
        s.push_str("tool = [\"Bash\"]\n");
    }
    if r.group {
        s.push_str(&format!("exclusive = \"g{}\"\n", r.tool_hook));
    }
    if r.tool_hook && r.deny_on_error {
        s.push_str("on_error = \"deny\"\n");
    }
    let condition = match r.condition {
        // Exactly a threshold: the index's choice is the condition.
        0 => format!("context.turn.token_usage > {t:.1}"),
        1 => format!("context.turn.token_usage >= {t:.1}"),
        // A threshold and more: evaluated when chosen.
        2 => format!("context.turn.token_usage > {t:.1} and context.turn.number >= 2"),
        // Not indexed.
        3 => format!("context.turn.number >= {}", r.threshold % 4),
        // Fails (divides by zero) once the threshold part holds.
        _ => format!(
            "context.turn.token_usage > {t:.1} and 1 / (context.turn.number - context.turn.number) > 0"
        ),
    };
    let condition = match script(i, r) {
        Some(_) => format!("script = \"r{i}.lua\""),
        None => format!("expression = \"{condition}\""),
    };
    s.push_str(&format!("\n[condition]\n{condition}\n\n[action]\n"));
    let action = match (r.action, r.tool_hook) {
        (0, _) => "type = \"notify_self\"\nmessage = \"fixed\"\ndeliver_at = \"immediate\"".into(),
        (1, _) => "type = \"notify_self\"\nmessage = \"at turn start\"\ndeliver_at = \"turn_start\"".into(),
        (2, _) => "type = \"notify_self\"\nmessage = \"turn {{ context.turn.number }}\"\ndeliver_at = \"turn_end\"".into(),
        (3, true) => format!("type = \"decide\"\ndecision = \"deny\"\nreason = \"r{i}\""),
        _ => format!("type = \"log\"\nmessage = \"r{i} fired\""),
    };
    s.push_str(&action);
    s.push('\n');
    s
}

#[derive(Debug, Clone)]
struct Step {
    hook: u8,
    usage: Option<u8>,
    tool: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..3, prop::option::weighted(0.9, 0u8..12), any::<bool>())
        .prop_map(|(hook, usage, tool)| Step { hook, usage, tool })
}

fn warden(dir: &std::path::Path, sampled: bool) -> Warden {
    Warden::builder()
        .rules_dir(dir)
        .store(Store::in_memory().unwrap())
        .execution_log_sample(if sampled { 1.0 } else { 0.0 })
        .build()
        .unwrap()
}

/// What a host sees of an outcome, and the rules that fired or failed in its trace (a sampled
/// tick evaluates every rule: the others are in its trace only).
fn seen(o: &Outcome) -> String {
    let trace: Vec<_> = o
        .trace
        .iter()
        .filter(|t| {
            matches!(
                t.evaluation,
                warden_core::Evaluation::Fired | warden_core::Evaluation::Failed(_)
            )
        })
        .map(|t| (t.rule, t.evaluation.clone()))
        .collect();
    format!(
        "effects {:?}\ninject {:?}\nerrors {:?}\nruling {:?}\noverridden {:?}\nhalted {:?}\ntrace {:?}",
        o.effects,
        o.injected().to_vec(),
        o.errors,
        o.ruling,
        o.overridden,
        o.halted,
        trace
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_lean_leaf_decides_as_the_general_path(
        rules in prop::collection::vec(rule(), 1..10),
        steps in prop::collection::vec(step(), 1..16),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, r) in rules.iter().enumerate() {
            std::fs::write(dir.path().join(format!("r{i}.toml")), toml(i, r)).unwrap();
            if let Some(lua) = script(i, r) {
                std::fs::write(dir.path().join(format!("r{i}.lua")), lua).unwrap();
            }
        }
        let (lean, general) = (warden(dir.path(), false), warden(dir.path(), true));
        prop_assert!(lean.diagnostics().iter().all(|d| !d.is_error()), "{:?}", lean.diagnostics());
        let (mut a, mut b) = (lean.session(), general.session());
        let mut turn = 0;
        for s in &steps {
            let (hook, mut event) = match s.hook {
                0 => {
                    turn += 1;
                    (Hook::OnTurnStart, Event::new())
                }
                1 => (
                    Hook::OnToolCall,
                    Event::tool_call(if s.tool { "Bash" } else { "Read" }, serde_json::Value::Null),
                ),
                _ => (Hook::OnTurnEnd, Event::new()),
            };
            event = event.with_turn(turn);
            if let Some(u) = s.usage {
                event = event.with_token_usage(f64::from(u) / 10.0);
            }
            let (x, y) = (a.tick(hook, event.clone()), b.tick(hook, event));
            prop_assert_eq!(seen(&x), seen(&y));
        }
        // A failure goes into the execution log whatever the sampling: both ways log the same.
        prop_assert_eq!(failures(&lean), failures(&general));
    }
}

/// The execution log's failures, in the order they were logged: rule, hook, error, decision.
fn failures(w: &Warden) -> Vec<(String, String, Option<String>, Option<String>)> {
    let mut rows = w
        .store()
        .executions(&warden_core::ExecutionFilter {
            failures_only: true,
            limit: Some(10_000),
            ..warden_core::ExecutionFilter::default()
        })
        .unwrap();
    rows.sort_by_key(|r| r.id);
    rows.into_iter()
        .map(|r| {
            let r = r.record;
            (r.rule_id, r.trigger, r.error_message, r.decision)
        })
        .collect()
}
