//! Stage 2: the mode, the budget, and which sources go in.
//!
//! **Mode** by context window ([`ModeThresholds`](crate::ModeThresholds)): unavailable, reduced
//! (core-tagged sources only) or full (every source with a matching tag).
//!
//! **Candidates**: sources sharing at least one tag with the query (a source sharing none is
//! skipped as [`SkipReason::NoMatchingTag`], even though every query has the core tag); in
//! reduced mode, only those with the core tag ([`SkipReason::NotCore`]).
//!
//! **Ranking**, a total order: more matching tags first; then **higher priority first**; then
//! id in byte order (`a` before `b`).
//!
//! **Greedy fill**: in rank order, a candidate goes in whole if its item (attribution comment,
//! text, blank line) fits in what is left of the budget; otherwise, if at least
//! `min_truncated_tokens` are left, it goes in cut at the last content boundary that fits
//! ([`crate::truncate`]), marked truncated; otherwise it is skipped, and later (smaller)
//! candidates are still tried. The section's opening and closing are paid for first.
//!
//! **One ledger**: every token is counted once, here, on the exact text assembly will emit, and
//! the section's tokens are the sum of what was counted (the estimate is additive over lines).

use crate::assemble::{self, CLOSING, OPENING};
use crate::classify::Classification;
use crate::settings::{Mode, Settings};
use crate::sources::{Refusal, Source};
use crate::tokens::estimate_tokens;
use crate::truncate::truncate;

/// The result of enriching one query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enrichment {
    /// The mode the context window gave.
    pub mode: Mode,
    /// The context window, in tokens, as given.
    pub context_window: u64,
    /// The knowledge budget: `min(budget_cap, floor(context_window × budget_percent / 100))`.
    pub budget: u64,
    /// Tokens of the section (0 when there is none); never more than `budget`.
    pub tokens_used: u64,
    /// The query's tags and what gave them.
    pub classification: Classification,
    /// The sources that went in, in the order of the section (rank order).
    pub selected: Vec<Selected>,
    /// Loaded sources that did not go in, and why.
    pub skipped: Vec<Skipped>,
    /// Sources that did not load at all (refused by a gate, missing, unreadable).
    pub refused: Vec<Refusal>,
    /// The `<reference_material>` section, or `None` when no source went in.
    pub section: Option<String>,
}

impl Enrichment {
    /// Stage 4: `system_prompt` (the persona) with the section after it, as the agent loop
    /// should send it. Without a section, `system_prompt` unchanged.
    pub fn integrate(&self, system_prompt: &str) -> String {
        assemble::integrate(system_prompt, self.section.as_deref())
    }

    /// The ids of the selected sources, in order.
    pub fn selected_ids(&self) -> Vec<&str> {
        self.selected.iter().map(|s| s.id.as_str()).collect()
    }
}

/// A source that went into the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// Its id.
    pub id: String,
    /// Its path.
    pub path: String,
    /// Its tags, as declared.
    pub tags: Vec<String>,
    /// Those of its tags the query has (how it ranked first).
    pub matched_tags: Vec<String>,
    /// Its priority (higher ranks first among equal matches).
    pub priority: i64,
    /// Whether it was cut to fit.
    pub truncated: bool,
    /// Tokens its item costs in the section (attribution, text, blank line).
    pub tokens: u64,
    /// Tokens of its whole text, before any cut.
    pub source_tokens: u64,
}

/// A loaded source left out of the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its id.
    pub id: String,
    /// Why (in JSON, its fields are beside `id`: `{"id": "x", "reason": "no-room", ...}`).
    pub reason: SkipReason,
}

/// Why a loaded source was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// It shares no tag with the query.
    NoMatchingTag,
    /// Reduced mode, and it does not have the core tag.
    NotCore,
    /// It does not fit whole, and fewer than `min_truncated_tokens` were left to cut it to.
    NoRoom {
        /// Tokens its whole item would cost.
        needed: u64,
        /// Tokens left in the budget.
        remaining: u64,
    },
    /// Enough was left to cut it, but not even its first block fits.
    FirstBlockTooLarge {
        /// Tokens left in the budget.
        remaining: u64,
    },
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SkipReason::NoMatchingTag => f.write_str("shares no tag with the query"),
            SkipReason::NotCore => f.write_str("not core-tagged, and the mode is reduced"),
            SkipReason::NoRoom { needed, remaining } => write!(
                f,
                "needs {needed} tokens, {remaining} left (too few to cut it to fit)"
            ),
            SkipReason::FirstBlockTooLarge { remaining } => {
                write!(
                    f,
                    "its first block does not fit in the {remaining} tokens left"
                )
            }
        }
    }
}

/// Tokens of the section's opening and closing, paid for before any source.
fn frame_tokens() -> u64 {
    estimate_tokens(OPENING) + estimate_tokens(CLOSING)
}

/// Runs stages 2 and 3 for a classified query over the loaded `sources`.
pub(crate) fn enrich(
    settings: &Settings,
    sources: &[Source],
    refused: &[Refusal],
    classification: Classification,
    context_window: u64,
) -> Enrichment {
    let mode = settings.modes.mode(context_window);
    let budget = settings.budget(context_window);
    let mut out = Enrichment {
        mode,
        context_window,
        budget,
        tokens_used: 0,
        classification,
        selected: Vec::new(),
        skipped: Vec::new(),
        refused: refused.to_vec(),
        section: None,
    };
    if mode == Mode::Unavailable {
        return out;
    }
    let query_tags = &out.classification.tags;
    let mut candidates = Vec::new();
    for source in sources {
        let matched: Vec<String> = source
            .def
            .tags
            .iter()
            .filter(|t| query_tags.contains(t))
            .cloned()
            .collect();
        let reason = if mode == Mode::Reduced && !source.def.tags.contains(&settings.core_tag) {
            Some(SkipReason::NotCore)
        } else if matched.is_empty() {
            Some(SkipReason::NoMatchingTag)
        } else {
            None
        };
        match reason {
            Some(reason) => out.skipped.push(Skipped {
                id: source.def.id.clone(),
                reason,
            }),
            None => candidates.push((source, matched)),
        }
    }
    candidates.sort_by(|(a, am), (b, bm)| {
        bm.len()
            .cmp(&am.len())
            .then(b.def.priority.cmp(&a.def.priority))
            .then(a.def.id.cmp(&b.def.id))
    });

    let mut used = frame_tokens();
    let mut items = Vec::new();
    for (source, matched) in candidates {
        let remaining = budget.saturating_sub(used);
        let def = &source.def;
        let whole = assemble::item(&def.id, &def.tags, false, &source.text);
        let whole_tokens = estimate_tokens(&whole);
        let (text, tokens, truncated) = if whole_tokens <= remaining {
            (whole, whole_tokens, false)
        } else if remaining < settings.min_truncated_tokens.max(1) {
            out.skipped.push(Skipped {
                id: def.id.clone(),
                reason: SkipReason::NoRoom {
                    needed: whole_tokens,
                    remaining,
                },
            });
            continue;
        } else {
            let cost =
                |text: &str| estimate_tokens(&assemble::item(&def.id, &def.tags, true, text));
            match truncate(&source.text, |prefix| cost(prefix) <= remaining) {
                Some(prefix) => (
                    assemble::item(&def.id, &def.tags, true, prefix),
                    cost(prefix),
                    true,
                ),
                None => {
                    out.skipped.push(Skipped {
                        id: def.id.clone(),
                        reason: SkipReason::FirstBlockTooLarge { remaining },
                    });
                    continue;
                }
            }
        };
        used += tokens;
        items.push(text);
        out.selected.push(Selected {
            id: def.id.clone(),
            path: def.path.clone(),
            tags: def.tags.clone(),
            matched_tags: matched,
            priority: def.priority,
            truncated,
            tokens,
            source_tokens: source.tokens,
        });
    }
    if !items.is_empty() {
        out.tokens_used = used;
        out.section = Some(assemble::section(items.iter().map(String::as_str)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::Classifier;
    use crate::sources::SourceDef;
    use proptest::prelude::*;

    fn source(id: &str, tags: &[&str], priority: i64, text: &str) -> Source {
        Source {
            def: SourceDef {
                id: id.into(),
                path: format!("notes/{id}.md"),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                priority,
                curated: false,
                required: false,
                line: 1,
            },
            text: text.into(),
            tokens: estimate_tokens(text),
        }
    }

    fn classifier() -> Classifier {
        Classifier::parse(
            std::path::Path::new("c.toml"),
            "[keywords]\nrules = [\"rule\"]\nscripts = [\"lua\"]\n",
            "core",
        )
        .unwrap()
    }

    fn run(settings: &Settings, sources: &[Source], query: &str, window: u64) -> Enrichment {
        enrich(settings, sources, &[], classifier().classify(query), window)
    }

    fn budget(budget_cap: u64, min_truncated_tokens: u64) -> Settings {
        Settings {
            budget_cap,
            min_truncated_tokens,
            ..Settings::default()
        }
    }

    fn roomy() -> Settings {
        Settings {
            budget_cap: 100_000,
            ..Settings::default()
        }
    }

    #[test]
    fn ranking_is_matches_then_higher_priority_then_id() {
        let sources = [
            source("b-low", &["rules"], 1, "B low."),
            source("a-high", &["rules"], 9, "A high."),
            source("c-high", &["rules"], 9, "C high."),
            source("both", &["rules", "scripts"], -5, "Both."),
            source("glossary", &["core"], 100, "Terms."),
        ];
        let e = run(&roomy(), &sources, "a lua rule", 200_000);
        assert_eq!(e.classification.tags, ["core", "rules", "scripts"]);
        // Two matching tags first; then, among one match each, priority 100 > 9 > 1, and the
        // two of priority 9 by id.
        assert_eq!(
            e.selected_ids(),
            ["both", "glossary", "a-high", "c-high", "b-low"]
        );
        assert_eq!(e.selected[0].matched_tags, ["rules", "scripts"]);
    }

    #[test]
    fn modes_filter_candidates() {
        let sources = [
            source("glossary", &["core"], 0, "Terms."),
            source("lua", &["scripts"], 0, "Lua."),
            source("other", &["storage"], 0, "SQLite."),
        ];
        let full = run(&roomy(), &sources, "lua", 100_000);
        assert_eq!(full.mode, Mode::Full);
        assert_eq!(full.selected_ids(), ["glossary", "lua"]); // one match each, equal priority: by id
        assert_eq!(
            full.skipped,
            [Skipped {
                id: "other".into(),
                reason: SkipReason::NoMatchingTag
            }]
        );
        let reduced = run(&roomy(), &sources, "lua", 99_999);
        assert_eq!(reduced.mode, Mode::Reduced);
        assert_eq!(reduced.selected_ids(), ["glossary"]);
        assert!(
            reduced
                .skipped
                .iter()
                .all(|s| s.reason == SkipReason::NotCore)
        );
        let none = run(&roomy(), &sources, "lua", 29_999);
        assert_eq!(none.mode, Mode::Unavailable);
        assert_eq!((none.section, none.selected.len()), (None, 0));
    }

    #[test]
    fn greedy_fill_cuts_at_a_boundary_and_keeps_trying_smaller_sources() {
        let long = (1..=40)
            .map(|i| format!("Paragraph {i} has a few words in it."))
            .collect::<Vec<_>>()
            .join("\n\n");
        let sources = [
            source("first", &["rules"], 9, "Short first source."),
            source("long", &["rules"], 5, &long),
            source("tiny", &["rules"], 1, "Tiny."),
        ];
        let e = run(&budget(frame_tokens() + 150, 50), &sources, "rule", 200_000);
        assert_eq!(e.selected_ids(), ["first", "long"]);
        let cut = &e.selected[1];
        assert!(cut.truncated && cut.tokens < cut.source_tokens);
        let section = e.section.unwrap();
        assert!(section.contains("<!-- source: long tags: rules truncated -->\nParagraph 1 "));
        assert!(section.contains("in it.\n\n</reference_material>"));
        assert_eq!(e.tokens_used, estimate_tokens(&section));
        // What was left was too little to cut `tiny` to, and `tiny` does not fit whole.
        assert!(matches!(
            e.skipped[0].reason,
            SkipReason::NoRoom { .. } | SkipReason::FirstBlockTooLarge { .. }
        ));

        // With room for `tiny` but not `long`, `long` is skipped and `tiny` still goes in.
        let e = run(
            &budget(frame_tokens() + 40, 1_000),
            &sources,
            "rule",
            200_000,
        );
        assert_eq!(e.selected_ids(), ["first", "tiny"]);
        assert_eq!(e.skipped[0].id, "long");
    }

    #[test]
    fn a_budget_smaller_than_the_frame_gives_no_section() {
        let settings = Settings {
            budget_cap: 10,
            ..Settings::default()
        };
        let e = run(
            &settings,
            &[source("g", &["core"], 0, "Terms.")],
            "",
            200_000,
        );
        assert_eq!((e.section, e.tokens_used), (None, 0));
        assert!(matches!(e.skipped[0].reason, SkipReason::NoRoom { .. }));
    }

    fn note() -> impl Strategy<Value = String> {
        let word = "[a-zA-Z]{1,10}";
        let line = prop::collection::vec(word, 1..12).prop_map(|w| w.join(" "));
        let block = prop_oneof![
            3 => prop::collection::vec(line.clone(), 1..5).prop_map(|l| l.join("\n")),
            1 => line.clone().prop_map(|l| format!("## {l}")),
            1 => prop::collection::vec(prop_oneof![line, Just(String::new())], 1..6)
                .prop_map(|l| format!("```rust\n{}\n```", l.join("\n"))),
        ];
        prop::collection::vec(block, 1..10).prop_map(|b| b.join("\n\n"))
    }

    fn sources() -> impl Strategy<Value = Vec<Source>> {
        let tags = prop::sample::subsequence(vec!["core", "rules", "scripts", "storage"], 1..3);
        prop::collection::vec((tags, -3i64..3, note()), 0..8).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (tags, p, text))| source(&format!("s{i}"), &tags, p, &text))
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn one_ledger_within_budget_cut_at_boundaries_and_deterministic(
            sources in sources(),
            cap in 0u64..3_000,
            min_cut in 0u64..300,
            window in 0u64..250_000,
            query in prop::sample::select(vec!["", "rule", "lua rule", "sqlite"]),
        ) {
            let settings = budget(cap, min_cut);
            let e = run(&settings, &sources, query, window);
            prop_assert!(e.tokens_used <= e.budget);
            match &e.section {
                None => prop_assert_eq!(e.tokens_used, 0),
                Some(section) => {
                    let items: u64 = e.selected.iter().map(|s| s.tokens).sum();
                    prop_assert_eq!(estimate_tokens(section), e.tokens_used);
                    prop_assert_eq!(e.tokens_used, frame_tokens() + items);
                    prop_assert_eq!(section.matches("</reference_material>").count(), 1);
                }
            }
            for s in &e.selected {
                let text = &sources.iter().find(|x| x.def.id == s.id).unwrap().text;
                let section = e.section.as_deref().unwrap();
                let header = format!("<!-- source: {} tags: {}{} -->\n", s.id, s.tags.join(","),
                    if s.truncated { " truncated" } else { "" });
                let start = section.find(&header).unwrap() + header.len();
                let end = start + section[start..].find("\n\n<!-- source: ")
                    .or_else(|| section[start..].find("\n\n</reference_material>")).unwrap();
                let body = &section[start..end];
                prop_assert!(text.starts_with(body));
                if s.truncated {
                    prop_assert!(body.len() < text.len());
                    prop_assert!(text[body.len()..].starts_with('\n'), "cut inside a line");
                    prop_assert_eq!(body.matches("```").count() % 2, 0, "cut inside code");
                    prop_assert!(!body.lines().last().unwrap_or("").starts_with("## "));
                } else {
                    prop_assert_eq!(body, text.as_str());
                }
            }
            prop_assert_eq!(&e, &run(&settings, &sources, query, window));
        }
    }
}
