//! The promise a supervisor keeps, checked over random rule sets: a tool call runs only if no
//! rule that fired on it decided `deny`, `stop`, or an unanswered `ask`; a `stop` both refuses
//! the call and ends the session; and a stopped session refuses every later call. Checked in two
//! hosts at once, on the same rules and events: the Rust API (`Outcome::proceed`) and Claude
//! Code's answer (`permissionDecision`, `continue`); and in the answers of Codex and Gemini CLI,
//! which cannot ask (an `ask`, and for Codex a rewrite it is not let apply, must be a refusal)
//! and, for Codex, must hold nothing it would reject and then run the call for.
//!
//! The rules are written to files whose ids are shuffled against their priorities (ties
//! included), so the order rules are loaded and evaluated in varies; the merge must not care.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};
use warden_agents::{Agent, Options, answer};
use warden_core::{ClaudeCodeConfig, Event, Hook, Warden};

/// What a generated rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Act {
    Allow,
    Ask,
    Deny,
    Stop,
    Rewrite,
    Notify,
}

/// A rule: what it does, its priority (few values, so ties happen), and the tool it watches
/// (`None`: every tool).
#[derive(Debug, Clone)]
struct Rule {
    act: Act,
    priority: u8,
    tool: Option<u8>,
}

fn rule() -> impl Strategy<Value = Rule> {
    (
        prop_oneof![
            Just(Act::Allow),
            Just(Act::Ask),
            Just(Act::Deny),
            Just(Act::Stop),
            Just(Act::Rewrite),
            Just(Act::Notify),
        ],
        1u8..4,
        prop::option::of(0u8..3),
    )
        .prop_map(|(act, priority, tool)| Rule {
            act,
            priority,
            tool,
        })
}

fn rule_file(id: &str, r: &Rule) -> String {
    let tool = r
        .tool
        .map(|t| format!("tool = \"t{t}\"\n"))
        .unwrap_or_default();
    let action = match r.act {
        Act::Allow | Act::Ask | Act::Deny | Act::Stop => {
            let d = format!("{:?}", r.act).to_lowercase();
            format!("type = \"decide\"\ndecision = \"{d}\"\nreason = \"{id} says {d}\"\n")
        }
        Act::Rewrite => "type = \"rewrite\"\n[action.set]\n\"arguments.checked\" = true\n".into(),
        Act::Notify => format!("type = \"notify_self\"\nmessage = \"{id} noticed\"\n"),
    };
    format!(
        "[rule]\nid = \"{id}\"\ntrigger = \"on_tool_call\"\npriority = {}\n{tool}condition = \"true\"\n\n[action]\n{action}",
        r.priority
    )
}

/// What the hosts must answer at one tool call.
#[derive(Debug, PartialEq)]
struct Expected {
    refused: bool,
    asked: bool,
    stops: bool,
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_refused_call_never_runs_in_any_host(
        rules in prop::collection::vec(rule(), 1..7),
        ids in Just(()).prop_perturb(|_, mut rng| {
            let mut ids: Vec<usize> = (0..7).collect();
            for i in (1..ids.len()).rev() {
                ids.swap(i, rng.random_range(0..=i));
            }
            ids
        }),
        calls in prop::collection::vec(0u8..3, 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        for (i, r) in rules.iter().enumerate() {
            let id = format!("r-{}", ids[i]);
            std::fs::write(dir.path().join(format!("{id}.toml")), rule_file(&id, r)).unwrap();
        }
        let warden = Warden::builder().rules_dir(dir.path()).build().unwrap();
        prop_assert!(warden.diagnostics().is_empty(), "{:?}", warden.diagnostics());
        let mut session = warden.session();
        let config = ClaudeCodeConfig::default();
        let opts = Options::default();
        let mut stopped = false;
        for (j, tool) in calls.iter().enumerate() {
            let fired: BTreeSet<_> = rules
                .iter()
                .filter(|r| r.tool.is_none_or(|t| t == *tool))
                .map(|r| r.act as u8)
                .collect();
            let has = |a: Act| fired.contains(&(a as u8));
            let refused = stopped || has(Act::Deny) || has(Act::Stop);
            let want = Expected {
                refused,
                asked: !refused && has(Act::Ask),
                stops: has(Act::Stop),
            };
            stopped |= has(Act::Stop);

            // The Rust API.
            let o = session.tick(
                Hook::OnToolCall,
                Event::tool_call(format!("t{tool}"), json!({ "n": j })),
            );
            let got = Expected {
                refused: o.refused().is_some(),
                asked: matches!(o.proceed(), warden_core::Proceed::Ask { .. }),
                stops: o.ends_session().is_some(),
            };
            prop_assert_eq!(&got, &want, "Rust API, call {}: {:?}", j, o.ruling);
            prop_assert_eq!(o.proceed().runs(), !want.refused && !want.asked);

            // Claude Code's answer to the same call, on a session of its own.
            let payload = json!({
                "session_id": "invariant", "hook_event_name": "PreToolUse",
                "tool_name": format!("t{tool}"), "tool_input": { "n": j },
            });
            let a = answer(
                Agent::ClaudeCode,
                &warden,
                &config,
                &opts,
                payload.to_string().as_bytes(),
            )
                .json
                .unwrap_or(Value::Null);
            let decision = &a["hookSpecificOutput"]["permissionDecision"];
            let got = Expected {
                refused: decision == "deny",
                asked: decision == "ask",
                stops: a["continue"] == false,
            };
            // Claude Code applies a rewrite only with a decision: Warden asks (unless the
            // operator let it allow), so that the person sees the rewritten call.
            let want = Expected {
                asked: want.asked || (!want.refused && has(Act::Rewrite)),
                ..want
            };
            prop_assert_eq!(&got, &want, "Claude Code, call {}: {}", j, a);
            if want.refused {
                prop_assert!(a["hookSpecificOutput"].get("updatedInput").is_none(), "{a}");
            }

            // Codex's and Gemini CLI's answers to the same call, each on a session of its own.
            let must_refuse = want.refused || has(Act::Ask);
            for agent in [Agent::Codex, Agent::GeminiCli] {
                let payload = json!({
                    "session_id": format!("invariant-{}", agent.name()),
                    "hook_event_name": agent.event_name(warden_agents::HookEvent::ToolCall),
                    "tool_name": format!("t{tool}"), "tool_input": { "n": j },
                });
                let a = answer(agent, &warden, &config, &opts, payload.to_string().as_bytes())
                    .json
                    .unwrap_or(Value::Null);
                let (refused, reason) = match agent {
                    Agent::Codex => {
                        let s = &a["hookSpecificOutput"];
                        // Codex runs the call when the answer holds what it does not take.
                        for key in ["continue", "stopReason", "suppressOutput", "decision"] {
                            prop_assert!(a.get(key).is_none(), "Codex, call {}: {}", j, a);
                        }
                        prop_assert!(s["permissionDecision"] != "ask", "Codex, call {}: {}", j, a);
                        (s["permissionDecision"] == "deny", &s["permissionDecisionReason"])
                    }
                    _ => {
                        prop_assert!(a["decision"] != "ask", "Gemini CLI, call {}: {}", j, a);
                        if want.stops {
                            prop_assert_eq!(&a["continue"], &json!(false), "Gemini CLI, call {}", j);
                        }
                        (a["decision"] == "deny", &a["reason"])
                    }
                };
                // Codex applies a rewrite only with `allow`, which Warden is not let say here.
                let refuse = must_refuse
                    || (agent == Agent::Codex && !want.refused && has(Act::Rewrite));
                prop_assert_eq!(refused, refuse, "{}, call {}: {}", agent, j, a);
                if refused {
                    prop_assert!(
                        reason.as_str().is_some_and(|r| !r.trim().is_empty()),
                        "{}: a refusal without a reason: {}", agent, a
                    );
                }
            }
        }
    }
}
