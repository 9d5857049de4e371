//! One ruling per event: what the rules of a step decided, merged. The most restrictive
//! decision wins (`stop` over `deny` over `ask` over `allow`; `continue` is made only at
//! `on_turn_end`, where only `stop` beats it), ties go to the rule evaluated first (the higher
//! priority). Rewrites apply in priority order to the call's arguments when the call may run;
//! a path set by two rules keeps the first rule's value, and the other is reported as
//! overridden.

use std::sync::Arc;

use serde_json::{Map, Value as Json};
use warden_load::Decision;

use warden_program::outcome::{Effect, Lost, Overridden, RuleError, Ruling};

/// A step's ruling, and what it overrode.
#[derive(Default)]
pub(crate) struct Merged {
    pub ruling: Option<Ruling>,
    pub overridden: Vec<Overridden>,
}

/// Merges the decisions and rewrites among `effects` (applied, in priority order) for a call
/// with `arguments`. A rewrite that cannot apply is a rule error, and leaves the arguments as
/// they were. (A step calls it only when it rendered a decision or a rewrite: its
/// `effects::Kinds` says so, from the one look at what it rendered.)
pub(crate) fn merge(
    effects: &[Effect],
    arguments: Option<&Json>,
    errors: &mut Vec<RuleError>,
) -> Merged {
    let mut out = Merged::default();
    let mut winner: Option<(&Arc<str>, Decision, &Arc<str>)> = None;
    let mut count = 0;
    for e in effects {
        if let Effect::Decide {
            rule,
            decision,
            reason,
        } = e
        {
            count += 1;
            if winner.is_none_or(|(_, w, _)| decision.rank() > w.rank()) {
                winner = Some((rule, *decision, reason));
            }
        }
    }
    if let Some((by, won, _)) = winner {
        out.overridden.reserve(count - 1);
        let mut first = true;
        let decided = effects.iter().filter_map(|e| match e {
            Effect::Decide { rule, decision, .. } => Some((rule, *decision)),
            _ => None,
        });
        for (rule, decision) in decided {
            // The winner itself: the first of its rank.
            if first && decision == won && Arc::ptr_eq(rule, by) {
                first = false;
                continue;
            }
            out.overridden.push(Overridden {
                rule: rule.clone(),
                lost: Lost::Decision(decision),
                by: by.clone(),
                won: Some(won),
            });
        }
    }
    let call_runs = winner.is_none_or(|(_, d, _)| matches!(d, Decision::Allow | Decision::Ask));
    let mut input: Option<Json> = None;
    let mut first_rewrite: Option<Arc<str>> = None;
    let mut set_by: Vec<(Vec<String>, Arc<str>)> = Vec::new();
    for e in effects {
        let Effect::Rewrite { rule, set } = e else {
            continue;
        };
        if let Some((by, won, _)) = winner.filter(|_| !call_runs) {
            out.overridden.push(Overridden {
                rule: rule.clone(),
                lost: Lost::Rewrite,
                by: by.clone(),
                won: Some(won),
            });
            continue;
        }
        let mut scratch = input.clone().unwrap_or_else(|| match arguments {
            None | Some(Json::Null) => Json::Object(Map::new()),
            Some(args) => args.clone(),
        });
        let mut failed = None;
        let mut applied = Vec::new();
        for (path, value) in set {
            if let Some((_, by)) = set_by.iter().find(|(p, _)| overlaps(p, path)) {
                out.overridden.push(Overridden {
                    rule: rule.clone(),
                    lost: Lost::Path(path.clone()),
                    by: by.clone(),
                    won: None,
                });
                continue;
            }
            if let Err(why) = set_path(&mut scratch, path, value.clone()) {
                failed = Some(why);
                break;
            }
            applied.push(path.clone());
        }
        if let Some(why) = failed {
            errors.push(RuleError {
                rule: Some(rule.clone()),
                error: format!(
                    "rewrite action: {why}; its rewrite does not apply (the arguments stay as they were)"
                ),
            });
            continue;
        }
        if applied.is_empty() {
            continue;
        }
        set_by.extend(applied.into_iter().map(|p| (p, rule.clone())));
        first_rewrite.get_or_insert_with(|| rule.clone());
        input = Some(scratch);
    }
    out.ruling = match (winner, first_rewrite) {
        (Some((rule, decision, reason)), _) => Some(Ruling {
            decision: Some(decision),
            rule: rule.clone(),
            reason: reason.clone(),
            input: input.filter(|_| call_runs),
        }),
        (None, Some(rule)) => Some(Ruling {
            decision: None,
            rule,
            reason: Arc::from(""),
            input,
        }),
        (None, None) => None,
    };
    out
}

/// Whether two paths touch the same value (one is the other, or inside it).
fn overlaps(a: &[String], b: &[String]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// `arguments.a.b`, as written.
fn shown(path: &[String]) -> String {
    format!("arguments.{}", path.join("."))
}

/// Sets `path` inside `root` to `value`, making the tables on the way that are missing.
fn set_path(root: &mut Json, path: &[String], value: Json) -> Result<(), String> {
    let mut at = root;
    let mut walked = String::from("arguments");
    for (i, key) in path.iter().enumerate() {
        let Json::Object(map) = at else {
            return Err(format!(
                "cannot set `{}`: `{walked}` is {}, not a table",
                shown(path),
                kind(at)
            ));
        };
        if i + 1 == path.len() {
            map.insert(key.clone(), value);
            return Ok(());
        }
        walked.push('.');
        walked.push_str(key);
        at = map
            .entry(key.clone())
            .or_insert_with(|| Json::Object(Map::new()));
    }
    Ok(())
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "true or false",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "a list",
        Json::Object(_) => "a table",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decide(rule: &str, d: Decision) -> Effect {
        Effect::Decide {
            rule: Arc::from(rule),
            decision: d,
            reason: Arc::from(format!("{rule} says {}", d.name())),
        }
    }

    fn rewrite(rule: &str, set: &[(&str, Json)]) -> Effect {
        Effect::Rewrite {
            rule: Arc::from(rule),
            set: set
                .iter()
                .map(|(p, v)| (p.split('.').map(String::from).collect(), v.clone()))
                .collect(),
        }
    }

    #[test]
    fn the_most_restrictive_decision_wins_and_ties_go_to_the_first() {
        let mut errors = Vec::new();
        let m = merge(
            &[
                decide("a", Decision::Allow),
                decide("b", Decision::Deny),
                decide("c", Decision::Ask),
                decide("d", Decision::Deny),
            ],
            None,
            &mut errors,
        );
        let r = m.ruling.unwrap();
        assert_eq!((r.decision, &*r.rule), (Some(Decision::Deny), "b"));
        let lost: Vec<(&str, String)> = m.overridden.iter().map(|o| (&*o.rule, o.why())).collect();
        assert_eq!(
            lost,
            [
                ("a", "deny beats allow".to_string()),
                ("c", "deny beats ask".to_string()),
                (
                    "d",
                    "`b` decided deny first (it has the higher priority)".to_string()
                ),
            ]
        );
        let m = merge(
            &[decide("a", Decision::Deny), decide("s", Decision::Stop)],
            None,
            &mut errors,
        );
        assert_eq!(m.ruling.unwrap().decision, Some(Decision::Stop));
    }

    #[test]
    fn rewrites_apply_in_priority_order_and_the_first_keeps_a_path() {
        let mut errors = Vec::new();
        let args = json!({"query": "x", "limit": 500});
        let m = merge(
            &[
                rewrite("a", &[("limit", json!(50))]),
                rewrite(
                    "b",
                    &[("limit", json!(10)), ("options.dry_run", json!(true))],
                ),
            ],
            Some(&args),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
        let r = m.ruling.unwrap();
        assert_eq!((r.decision, &*r.rule), (None, "a"));
        assert_eq!(
            r.input.unwrap(),
            json!({"query": "x", "limit": 50, "options": {"dry_run": true}})
        );
        assert_eq!(m.overridden.len(), 1);
        assert_eq!(m.overridden[0].what(), "rewrite arguments.limit");
    }

    #[test]
    fn a_denied_call_is_not_rewritten_and_a_bad_path_leaves_the_arguments() {
        let mut errors = Vec::new();
        let m = merge(
            &[
                rewrite("a", &[("limit", json!(50))]),
                decide("d", Decision::Deny),
            ],
            Some(&json!({})),
            &mut errors,
        );
        let r = m.ruling.unwrap();
        assert_eq!((r.decision, r.input), (Some(Decision::Deny), None));
        assert!(m.overridden[0].why().contains("does not run"));
        let m = merge(
            &[rewrite("a", &[("query.text", json!("y"))])],
            Some(&json!({"query": "x"})),
            &mut errors,
        );
        assert!(m.ruling.is_none());
        assert!(
            errors[0]
                .error
                .contains("`arguments.query` is a string, not a table"),
            "{errors:?}"
        );
        // Allowed or asked about, the call runs with the rewritten arguments.
        let m = merge(
            &[
                decide("k", Decision::Ask),
                rewrite("a", &[("limit", json!(5))]),
            ],
            Some(&json!({"limit": 9})),
            &mut errors,
        );
        let r = m.ruling.unwrap();
        assert_eq!(
            (r.decision, r.input),
            (Some(Decision::Ask), Some(json!({"limit": 5})))
        );
    }

    proptest::proptest! {
        /// No merge drops a refusal: whatever the decisions and rewrites, in whatever order,
        /// the ruling is at least as restrictive as each decision made, a refused call carries
        /// no rewritten arguments, and every decision that lost is reported overridden.
        #[test]
        fn no_merge_drops_a_refusal(
            made in proptest::collection::vec((0u8..6, 0u8..3), 0..8),
        ) {
            use proptest::prop_assert;
            let effects: Vec<Effect> = made
                .iter()
                .enumerate()
                .map(|(i, (what, key))| {
                    let rule = format!("r{i}");
                    match what {
                        0 => decide(&rule, Decision::Allow),
                        1 => decide(&rule, Decision::Ask),
                        2 => decide(&rule, Decision::Deny),
                        3 => decide(&rule, Decision::Stop),
                        4 => decide(&rule, Decision::Continue),
                        _ => rewrite(&rule, &[(["a", "b", "c"][*key as usize], json!(i))]),
                    }
                })
                .collect();
            let mut errors = Vec::new();
            let m = merge(&effects, Some(&json!({})), &mut errors);
            let decided: Vec<Decision> = effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Decide { decision, .. } => Some(*decision),
                    _ => None,
                })
                .collect();
            let strongest = decided.iter().map(|d| d.rank()).max();
            let rank = m.ruling.as_ref().map_or(0, Ruling::rank);
            prop_assert!(strongest.is_none_or(|s| rank == s), "{:?} from {:?}", m.ruling, decided);
            let refused = decided.iter().any(|d| matches!(d, Decision::Deny | Decision::Stop));
            if refused {
                let r = m.ruling.as_ref().unwrap();
                prop_assert!(matches!(r.decision, Some(Decision::Deny | Decision::Stop)), "{r:?}");
                prop_assert!(r.input.is_none(), "a refused call is rewritten: {r:?}");
            }
            let lost = m
                .overridden
                .iter()
                .filter(|o| matches!(o.lost, Lost::Decision(_)))
                .count();
            prop_assert!(decided.is_empty() || lost == decided.len() - 1);
        }
    }
}
