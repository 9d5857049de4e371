//! Stage 1: classifying a query into domain tags, by keywords and a glossary that are data.
//!
//! A classification file has two tables:
//!
//! ```toml
//! # A tag applies when the query contains one of its keywords.
//! [keywords]
//! scripts = ["lua", "script", "scripts", "coroutine"]
//!
//! # A glossary term adds all of its tags.
//! [glossary]
//! "behavior tree" = ["behaviors", "rules"]
//! "FR-7" = ["rules"]
//! ```
//!
//! Matching is by whole words, in any case: the query and every keyword or term are cut into
//! words (runs of letters and digits; everything else separates), and a keyword matches where
//! its words appear one after the other in the query. So `rule` does not match "ruler", and
//! `FR-7` matches "fr 7" and "FR-7". There is no stemming: list every form that should match
//! (`rule`, `rules`). Every query also has the core tag ([`Settings::core_tag`]).
//!
//! [`Settings::core_tag`]: crate::Settings::core_tag

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::LoadError;
use crate::injection::words_with_offsets;
use crate::name::check_name;
use warden_input::{Doc, SourceFile, Table, kind, string_items};

/// What the query was classified as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// The query's tags, sorted; always includes the core tag.
    pub tags: Vec<String>,
    /// The keywords and glossary terms found in the query, in the order of the file.
    pub matches: Vec<TermMatch>,
}

/// A keyword or glossary term found in a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermMatch {
    /// The keyword or term, as written in the classification file.
    pub term: String,
    /// Whether it came from `[keywords]` or `[glossary]`.
    pub kind: TermKind,
    /// The tags it gave the query.
    pub tags: Vec<String>,
}

/// Where a [`TermMatch`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermKind {
    /// `[keywords]`: one tag, many keywords.
    Keyword,
    /// `[glossary]`: one term, many tags.
    Glossary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    text: String,
    words: Vec<String>,
    kind: TermKind,
    tags: Vec<String>,
}

/// Keywords and glossary terms, loaded from a classification file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classifier {
    terms: Vec<Term>,
    core_tag: String,
}

impl Classifier {
    /// A classifier that only gives the core tag.
    pub fn empty(core_tag: &str) -> Self {
        Classifier {
            terms: Vec::new(),
            core_tag: core_tag.to_string(),
        }
    }

    /// Reads a classification file's `text`; `path` names it in errors.
    pub fn parse(path: &Path, text: &str, core_tag: &str) -> Result<Self, LoadError> {
        let file = SourceFile::new(path, text);
        let mut doc = Doc::new(file.clone());
        let Some(root) = doc.parse(file.text()) else {
            return LoadError::or(doc, Classifier::empty(core_tag));
        };
        let mut top = Table::new(root.get_ref(), "", root.span());
        let mut terms = Vec::new();
        if let Some(keywords) = top.table(&mut doc, "keywords") {
            for (tag, words) in keywords.entries() {
                let field = keywords.field(tag.value);
                if let Err(why) = check_name(tag.value) {
                    doc.error(
                        tag.span.clone(),
                        &field,
                        format!("the tag `{}` {why}", tag.value),
                        Some("tags are letters, digits, `-`, `_` and `.`".into()),
                    );
                }
                let Some(list) = string_items(words.get_ref()) else {
                    doc.error(
                        words.span(),
                        &field,
                        format!(
                            "the keywords of `{}` must be an array of strings, not {}",
                            tag.value,
                            kind(words.get_ref())
                        ),
                        Some(format!("{} = [\"keyword\", \"another\"]", tag.value)),
                    );
                    continue;
                };
                for kw in list {
                    let words = words_of(&kw.value);
                    if words.is_empty() {
                        doc.error(
                            kw.span,
                            &field,
                            format!("the keyword `{}` has no letters or digits", kw.value),
                            Some("a keyword is matched by its words; remove it".into()),
                        );
                        continue;
                    }
                    terms.push(Term {
                        text: kw.value,
                        words,
                        kind: TermKind::Keyword,
                        tags: vec![tag.value.to_string()],
                    });
                }
            }
        }
        if let Some(glossary) = top.table(&mut doc, "glossary") {
            for (term, tags) in glossary.entries() {
                let field = glossary.field(term.value);
                let words = words_of(term.value);
                if words.is_empty() {
                    doc.error(
                        term.span.clone(),
                        &field,
                        format!("the term `{}` has no letters or digits", term.value),
                        Some("a term is matched by its words; remove it".into()),
                    );
                }
                let Some(list) = string_items(tags.get_ref()).filter(|l| !l.is_empty()) else {
                    doc.error(
                        tags.span(),
                        &field,
                        format!(
                            "the tags of `{}` must be a non-empty array of strings",
                            term.value
                        ),
                        Some(format!("\"{}\" = [\"tag\"]", term.value)),
                    );
                    continue;
                };
                let mut term_tags = Vec::new();
                for t in list {
                    if let Err(why) = check_name(&t.value) {
                        doc.error(
                            t.span,
                            &field,
                            format!("the tag `{}` {why}", t.value),
                            Some("tags are letters, digits, `-`, `_` and `.`".into()),
                        );
                    }
                    if !term_tags.contains(&t.value) {
                        term_tags.push(t.value);
                    }
                }
                if !words.is_empty() {
                    terms.push(Term {
                        text: term.value.to_string(),
                        words,
                        kind: TermKind::Glossary,
                        tags: term_tags,
                    });
                }
            }
        }
        top.finish(&mut doc, &["keywords", "glossary"]);
        LoadError::or(
            doc,
            Classifier {
                terms,
                core_tag: core_tag.to_string(),
            },
        )
    }

    /// How many keywords and glossary terms there are: `(keywords, terms)`.
    pub fn counts(&self) -> (usize, usize) {
        let keywords = self
            .terms
            .iter()
            .filter(|t| t.kind == TermKind::Keyword)
            .count();
        (keywords, self.terms.len() - keywords)
    }

    /// Whether there are no keywords and no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The tags of `query`, and what gave them.
    pub fn classify(&self, query: &str) -> Classification {
        let words = words_of(query);
        let mut tags = BTreeSet::from([self.core_tag.clone()]);
        let mut matches = Vec::new();
        for term in &self.terms {
            if words.windows(term.words.len()).any(|w| w == term.words) {
                tags.extend(term.tags.iter().cloned());
                matches.push(TermMatch {
                    term: term.text.clone(),
                    kind: term.kind,
                    tags: term.tags.clone(),
                });
            }
        }
        Classification {
            tags: tags.into_iter().collect(),
            matches,
        }
    }
}

/// The words of `text`, lowercased (see [`words_with_offsets`]).
fn words_of(text: &str) -> Vec<String> {
    words_with_offsets(text)
        .into_iter()
        .map(|(w, _)| w)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[keywords]
rules = ["rule", "rules", "priority"]
scripts = ["lua", "coroutine"]

[glossary]
"behavior tree" = ["behaviors", "rules"]
"FR-7" = ["rules", "semantics"]
"#;

    fn classifier() -> Classifier {
        Classifier::parse(Path::new("c.toml"), FILE, "core").unwrap()
    }

    #[test]
    fn keywords_and_terms_match_whole_words_in_any_case() {
        let c = classifier();
        assert_eq!(c.counts(), (5, 2));
        let got = c.classify("How does a Behavior  Tree run a LUA script?");
        assert_eq!(got.tags, ["behaviors", "core", "rules", "scripts"]);
        let terms: Vec<_> = got.matches.iter().map(|m| m.term.as_str()).collect();
        assert_eq!(terms, ["lua", "behavior tree"]);
        assert_eq!(c.classify("a ruler, a lunar rover").tags, ["core"]);
        assert_eq!(
            c.classify("what does fr-7 say?").tags,
            ["core", "rules", "semantics"]
        );
    }

    #[test]
    fn every_query_has_the_core_tag() {
        assert_eq!(classifier().classify("").tags, ["core"]);
        assert_eq!(Classifier::empty("base").classify("rules").tags, ["base"]);
    }

    #[test]
    fn mistakes_name_line_and_field() {
        let text = "[keywords]\nrules = \"rule\"\n\"bad tag\" = [\"x\"]\n[glosary]\n";
        let err = Classifier::parse(Path::new("c.toml"), text, "core").unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains("c.toml:2:9: error: keywords.rules: the keywords of `rules` must be an array of strings"),
            "{shown}"
        );
        assert!(
            shown.contains("c.toml:3:1: error: keywords.bad tag: the tag `bad tag`"),
            "{shown}"
        );
        assert!(
            shown.contains("c.toml:4:2: error: glosary: unknown field `glosary`")
                && shown.contains("did you mean `glossary`?"),
            "{shown}"
        );
    }
}
