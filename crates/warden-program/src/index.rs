//! The threshold index: which trees of a hook can fire at all, found without evaluating the
//! rules that cannot.
//!
//! Most rules are thresholds on a fact (`context.turn.token_usage > 0.8`). A condition whose
//! truth needs such a threshold ([`warden_expr::Condition::necessary_threshold`]) is indexed
//! by it: per fact, the bounds are kept sorted, and a tick reads the fact once and finds the
//! thresholds that hold by binary search. A tree is ticked if one of its rules has no
//! threshold or has one that holds. So a tick costs in proportion to the rules that can
//! match, not to the rules loaded. Skipping is exact, never a guess: a rule is skipped only
//! when its condition is certainly false, and `explain` sessions evaluate every rule, which
//! the end-to-end tests use to check that both give the same outcomes.

use std::cmp::Ordering;

use warden_expr::{Bound, Comparison, Facts, Scalar, ScalarId, Threshold};

/// The indexed thresholds of one fact.
#[derive(Debug, Default)]
struct FactIndex {
    fact: Option<ScalarId>,
    /// `fact > bound` (`inclusive`: `>=`), sorted by bound.
    above: Vec<(Bound, bool, u32)>,
    /// `fact < bound` (`inclusive`: `<=`), sorted by bound.
    below: Vec<(Bound, bool, u32)>,
    /// `fact == bound`, sorted by bound.
    equal: Vec<(Bound, u32)>,
    /// The same thresholds as floats, for a fact whose value is one (`Floats`).
    floats: Floats,
}

/// A fact's thresholds laid out for a float value, the usual kind (a share of the token
/// budget, of the context): each list's bounds as floats, apart from its trees, in the same
/// order. A float compares with an integer bound as that bound's float (see [`order`]), so
/// these answer exactly as the bounds themselves do, with a comparison of two floats per
/// step of the search and the trees copied as one slice.
#[derive(Debug, Default)]
struct Floats {
    above: Vec<f64>,
    above_inclusive: Vec<bool>,
    above_trees: Vec<u32>,
    below: Vec<f64>,
    below_inclusive: Vec<bool>,
    below_trees: Vec<u32>,
    equal: Vec<f64>,
    equal_trees: Vec<u32>,
}

impl Floats {
    fn of(f: &FactIndex) -> Self {
        Floats {
            above: f.above.iter().map(|(b, _, _)| as_f64(b)).collect(),
            above_inclusive: f.above.iter().map(|(_, i, _)| *i).collect(),
            above_trees: f.above.iter().map(|(_, _, e)| *e).collect(),
            below: f.below.iter().map(|(b, _, _)| as_f64(b)).collect(),
            below_inclusive: f.below.iter().map(|(_, i, _)| *i).collect(),
            below_trees: f.below.iter().map(|(_, _, e)| *e).collect(),
            equal: f.equal.iter().map(|(b, _)| as_f64(b)).collect(),
            equal_trees: f.equal.iter().map(|(_, e)| *e).collect(),
        }
    }

    /// [`ThresholdIndex::candidates`] for one fact whose value is the float `x` (not NaN):
    /// each predicate is `order(Scalar::Float(x), bound)`'s, on the bound's float.
    fn candidates(&self, x: f64, out: &mut Vec<u32>) {
        let below_x = self.above.partition_point(|b| x > *b);
        out.extend_from_slice(&self.above_trees[..below_x]);
        for i in below_x..self.above.len() {
            if x != self.above[i] {
                break;
            }
            if self.above_inclusive[i] {
                out.push(self.above_trees[i]);
            }
        }
        let upto_x = self
            .below
            .partition_point(|b| x.partial_cmp(b) != Some(Ordering::Less));
        out.extend_from_slice(&self.below_trees[upto_x..]);
        for i in (0..upto_x).rev() {
            if x != self.below[i] {
                break;
            }
            if self.below_inclusive[i] {
                out.push(self.below_trees[i]);
            }
        }
        let from = self.equal.partition_point(|b| x > *b);
        for i in from..self.equal.len() {
            if x != self.equal[i] {
                break;
            }
            out.push(self.equal_trees[i]);
        }
    }
}

/// The threshold index of one hook's trees (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct ThresholdIndex {
    /// Trees with a rule that has no threshold: always ticked.
    always: Vec<u32>,
    facts: Vec<FactIndex>,
    /// Whether the candidates always come out in order, each tree once: the index is one
    /// fact's lower bounds (`fact > bound`, `fact >= bound`), whose trees are in order of
    /// their bounds too (rules of rising thresholds, written in that order). The trees chosen
    /// are then some of that list, in its order.
    in_order: bool,
}

/// Orders bounds of one fact (all of one kind in practice; mixed kinds by value).
fn cmp_bound(a: &Bound, b: &Bound) -> Ordering {
    match (a, b) {
        (Bound::Int(x), Bound::Int(y)) => x.cmp(y),
        (x, y) => as_f64(x).total_cmp(&as_f64(y)),
    }
}

fn as_f64(b: &Bound) -> f64 {
    match b {
        Bound::Int(i) => *i as f64,
        Bound::Float(f) => *f,
    }
}

/// How `value` compares with `bound`, as the condition compares them; `None` if they cannot
/// be ordered (NaN, or not a number): then no threshold on it holds.
fn order(value: Scalar<'_>, bound: &Bound) -> Option<Ordering> {
    match (value, bound) {
        (Scalar::Int(x), Bound::Int(k)) => Some(x.cmp(k)),
        (Scalar::Int(x), Bound::Float(k)) => (x as f64).partial_cmp(k),
        (Scalar::Float(x), Bound::Int(k)) => x.partial_cmp(&(*k as f64)),
        (Scalar::Float(x), Bound::Float(k)) => x.partial_cmp(k),
        _ => None,
    }
}

impl ThresholdIndex {
    /// Builds the index of trees whose rules have the given thresholds: `trees[e]` lists the
    /// necessary threshold of each rule of tree `e` (`None`: the rule has none).
    pub(crate) fn build(trees: &[Vec<Option<Threshold>>]) -> Option<Self> {
        let mut index = ThresholdIndex::default();
        for (e, rules) in trees.iter().enumerate() {
            let e = e as u32;
            if rules.iter().any(Option::is_none) {
                index.always.push(e);
                continue;
            }
            for t in rules.iter().flatten() {
                let slot = match index.facts.iter().position(|f| f.fact == Some(t.fact)) {
                    Some(i) => i,
                    None => {
                        index.facts.push(FactIndex {
                            fact: Some(t.fact),
                            ..FactIndex::default()
                        });
                        index.facts.len() - 1
                    }
                };
                let f = &mut index.facts[slot];
                match t.comparison {
                    Comparison::Gt => f.above.push((t.bound, false, e)),
                    Comparison::Ge => f.above.push((t.bound, true, e)),
                    Comparison::Lt => f.below.push((t.bound, false, e)),
                    Comparison::Le => f.below.push((t.bound, true, e)),
                    Comparison::Eq => f.equal.push((t.bound, e)),
                }
            }
        }
        if index.facts.is_empty() {
            return None;
        }
        for f in &mut index.facts {
            f.above.sort_by(|a, b| cmp_bound(&a.0, &b.0));
            f.below.sort_by(|a, b| cmp_bound(&a.0, &b.0));
            f.equal.sort_by(|a, b| cmp_bound(&a.0, &b.0));
            f.floats = Floats::of(f);
        }
        index.in_order = match &index.facts[..] {
            [f] => {
                index.always.is_empty()
                    && f.below.is_empty()
                    && f.equal.is_empty()
                    && f.floats.above_trees.is_sorted_by(|a, b| a < b)
            }
            _ => false,
        };
        Some(index)
    }

    /// The trees that may fire given `facts`, sorted, into `out` (cleared first).
    pub(crate) fn candidates(&self, facts: &dyn Facts, out: &mut Vec<u32>) {
        out.clear();
        out.extend_from_slice(&self.always);
        for f in &self.facts {
            let Some(id) = f.fact else { continue };
            let v = facts.scalar(id);
            let comparable = match v {
                Scalar::Int(_) => true,
                Scalar::Float(x) => !x.is_nan(),
                _ => false,
            };
            if !comparable {
                // NaN, or not a number at all: no threshold on it holds.
                continue;
            }
            if let Scalar::Float(x) = v {
                f.floats.candidates(x, out);
                continue;
            }
            // `fact > bound` holds for every bound below the value.
            let below_v = f
                .above
                .partition_point(|(b, _, _)| order(v, b) == Some(Ordering::Greater));
            out.extend(f.above[..below_v].iter().map(|(_, _, e)| *e));
            out.extend(
                f.above[below_v..]
                    .iter()
                    .take_while(|(b, _, _)| order(v, b) == Some(Ordering::Equal))
                    .filter(|(_, inclusive, _)| *inclusive)
                    .map(|(_, _, e)| *e),
            );
            // `fact < bound` holds for every bound above the value.
            let upto_v = f
                .below
                .partition_point(|(b, _, _)| order(v, b) != Some(Ordering::Less));
            out.extend(f.below[upto_v..].iter().map(|(_, _, e)| *e));
            out.extend(
                f.below[..upto_v]
                    .iter()
                    .rev()
                    .take_while(|(b, _, _)| order(v, b) == Some(Ordering::Equal))
                    .filter(|(_, inclusive, _)| *inclusive)
                    .map(|(_, _, e)| *e),
            );
            let from = f
                .equal
                .partition_point(|(b, _)| order(v, b) == Some(Ordering::Greater));
            out.extend(
                f.equal[from..]
                    .iter()
                    .take_while(|(b, _)| order(v, b) == Some(Ordering::Equal))
                    .map(|(_, e)| *e),
            );
        }
        // Usually in order already, each tree once (one fact, each tree's bound after the
        // last's): then neither sorting nor removing duplicates changes anything.
        if !self.in_order && !out.is_sorted_by(|a, b| a < b) {
            out.sort_unstable();
            out.dedup();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct One(Scalar<'static>);
    impl Facts for One {
        fn scalar(&self, _: ScalarId) -> Scalar<'_> {
            self.0
        }
        fn map_get(&self, _: warden_expr::MapId, _: &str) -> Option<Scalar<'_>> {
            None
        }
        fn root(&self, _: &str) -> warden_expr::rhai::Dynamic {
            warden_expr::rhai::Dynamic::UNIT
        }
    }

    fn comparison() -> impl Strategy<Value = Comparison> {
        prop_oneof![
            Just(Comparison::Lt),
            Just(Comparison::Le),
            Just(Comparison::Gt),
            Just(Comparison::Ge),
            Just(Comparison::Eq)
        ]
    }

    fn value() -> impl Strategy<Value = Scalar<'static>> {
        prop_oneof![
            (-3i64..4).prop_map(Scalar::Int),
            prop_oneof![
                Just(-1.5f64),
                Just(0.0),
                Just(0.5),
                Just(2.0),
                Just(f64::NAN),
                Just(f64::INFINITY)
            ]
            .prop_map(Scalar::Float),
            Just(Scalar::Null),
        ]
    }

    fn bound() -> impl Strategy<Value = Bound> {
        prop_oneof![
            (-3i64..4).prop_map(Bound::Int),
            prop_oneof![Just(-1.5f64), Just(0.0), Just(0.5), Just(2.0)].prop_map(Bound::Float)
        ]
    }

    proptest! {
        /// The index offers exactly the trees with a rule whose threshold holds, plus the
        /// trees with a rule that has none.
        #[test]
        fn candidates_are_exactly_the_trees_that_can_fire(
            trees in proptest::collection::vec(
                proptest::collection::vec(proptest::option::weighted(0.9, (comparison(), bound())), 1..3),
                0..40,
            ),
            v in value(),
        ) {
            let trees: Vec<Vec<Option<Threshold>>> = trees
                .into_iter()
                .map(|rules| rules.into_iter().map(|r| r.map(|(comparison, bound)| Threshold { fact: ScalarId(0), comparison, bound })).collect())
                .collect();
            let expected: Vec<u32> = trees
                .iter()
                .enumerate()
                .filter(|(_, rules)| rules.iter().any(|t| t.is_none_or(|t| t.holds(v))))
                .map(|(e, _)| e as u32)
                .collect();
            let mut got = Vec::new();
            match ThresholdIndex::build(&trees) {
                Some(index) => index.candidates(&One(v), &mut got),
                None => got = (0..trees.len() as u32).collect(),
            }
            prop_assert_eq!(got, expected);
        }

        /// Rules of rising lower bounds, written in that order (`fact > 0.1`, `fact > 0.2`...,
        /// the index then trusts its candidates to be in order): still exactly the trees that
        /// can fire, in order.
        #[test]
        fn rising_lower_bounds_come_out_in_order(
            rules in proptest::collection::vec((any::<bool>(), bound()), 1..40),
            v in value(),
        ) {
            let mut rules = rules;
            rules.sort_by(|a, b| cmp_bound(&a.1, &b.1));
            let trees: Vec<Vec<Option<Threshold>>> = rules
                .iter()
                .map(|&(inclusive, bound)| {
                    let comparison = if inclusive { Comparison::Ge } else { Comparison::Gt };
                    vec![Some(Threshold { fact: ScalarId(0), comparison, bound })]
                })
                .collect();
            let expected: Vec<u32> = trees
                .iter()
                .enumerate()
                .filter(|(_, rules)| rules.iter().flatten().any(|t| t.holds(v)))
                .map(|(e, _)| e as u32)
                .collect();
            let index = ThresholdIndex::build(&trees).expect("every rule has a threshold");
            prop_assert!(index.in_order);
            let mut got = Vec::new();
            index.candidates(&One(v), &mut got);
            prop_assert_eq!(got, expected);
        }
    }
}
