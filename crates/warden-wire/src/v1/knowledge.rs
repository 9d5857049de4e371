//! Knowledge enrichment as JSON: what an outcome's `enrichment` (and an `enrich_context`
//! effect) says of a query enriched, and the health of the knowledge sources
//! (`warden enrich --json`).

use serde::{Serialize, Serializer};

use warden_knowledge as engine;
use warden_knowledge::{Check, Mode, SkipReason, TermKind};

/// The result of enriching one query.
#[derive(Debug, Serialize)]
pub struct Enrichment<'a> {
    /// `unavailable`, `reduced` or `full`.
    pub mode: &'static str,
    /// The context window, in tokens, as given.
    pub context_window: u64,
    /// The knowledge budget, in tokens.
    pub budget: u64,
    /// Tokens of the section (0 when there is none).
    pub tokens_used: u64,
    /// The query's tags and what gave them.
    pub classification: Classification<'a>,
    /// The sources that went in, in the order of the section.
    #[serde(serialize_with = "selected")]
    pub selected: &'a [engine::Selected],
    /// Loaded sources that did not go in, and why.
    #[serde(serialize_with = "skipped")]
    pub skipped: &'a [engine::Skipped],
    /// Sources that did not load at all.
    #[serde(serialize_with = "refusals")]
    pub refused: &'a [engine::Refusal],
    /// The `<reference_material>` section, or `null` when no source went in.
    pub section: Option<&'a str>,
}

impl<'a> From<&'a engine::Enrichment> for Enrichment<'a> {
    fn from(e: &'a engine::Enrichment) -> Self {
        Enrichment {
            mode: mode(e.mode),
            context_window: e.context_window,
            budget: e.budget,
            tokens_used: e.tokens_used,
            classification: Classification::from(&e.classification),
            selected: &e.selected,
            skipped: &e.skipped,
            refused: &e.refused,
            section: e.section.as_deref(),
        }
    }
}

/// Writes an enrichment as [`Enrichment`] (for a `serialize_with` field).
pub fn enrichment<S: Serializer>(e: &&engine::Enrichment, s: S) -> Result<S::Ok, S::Error> {
    Enrichment::from(*e).serialize(s)
}

/// The word a knowledge mode is written as.
pub fn mode(m: Mode) -> &'static str {
    match m {
        Mode::Unavailable => "unavailable",
        Mode::Reduced => "reduced",
        Mode::Full => "full",
    }
}

/// What the query was classified as.
#[derive(Debug, Serialize)]
pub struct Classification<'a> {
    /// The query's tags, sorted.
    pub tags: &'a [String],
    /// The keywords and glossary terms found in the query.
    #[serde(serialize_with = "term_matches")]
    pub matches: &'a [engine::TermMatch],
}

impl<'a> From<&'a engine::Classification> for Classification<'a> {
    fn from(c: &'a engine::Classification) -> Self {
        Classification {
            tags: &c.tags,
            matches: &c.matches,
        }
    }
}

/// A keyword or glossary term found in a query.
#[derive(Debug, Serialize)]
struct TermMatch<'a> {
    term: &'a str,
    /// `keyword` or `glossary`.
    kind: &'static str,
    tags: &'a [String],
}

fn term_matches<S: Serializer>(list: &&[engine::TermMatch], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|m| TermMatch {
        term: &m.term,
        kind: match m.kind {
            TermKind::Keyword => "keyword",
            TermKind::Glossary => "glossary",
        },
        tags: &m.tags,
    }))
}

/// A source that went into the section.
#[derive(Debug, Serialize)]
struct Selected<'a> {
    id: &'a str,
    path: &'a str,
    tags: &'a [String],
    matched_tags: &'a [String],
    priority: i64,
    truncated: bool,
    tokens: u64,
    source_tokens: u64,
}

fn selected<S: Serializer>(list: &&[engine::Selected], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|x| Selected {
        id: &x.id,
        path: &x.path,
        tags: &x.tags,
        matched_tags: &x.matched_tags,
        priority: x.priority,
        truncated: x.truncated,
        tokens: x.tokens,
        source_tokens: x.source_tokens,
    }))
}

/// A loaded source left out: its id, then why (`reason`, and the figures of that reason).
#[derive(Debug, Serialize)]
struct Skipped<'a> {
    id: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    needed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining: Option<u64>,
}

fn skipped<S: Serializer>(list: &&[engine::Skipped], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|x| {
        let (reason, needed, remaining) = match x.reason {
            SkipReason::NoMatchingTag => ("no-matching-tag", None, None),
            SkipReason::NotCore => ("not-core", None, None),
            SkipReason::NoRoom { needed, remaining } => ("no-room", Some(needed), Some(remaining)),
            SkipReason::FirstBlockTooLarge { remaining } => {
                ("first-block-too-large", None, Some(remaining))
            }
        };
        Skipped {
            id: &x.id,
            reason,
            needed,
            remaining,
        }
    }))
}

/// A source that did not load: which, by what check, and why.
#[derive(Debug, Serialize)]
struct Refusal<'a> {
    source: &'a str,
    path: &'a str,
    check: &'static str,
    required: bool,
    message: &'a str,
}

/// The word a knowledge check is written as.
pub fn check(c: Check) -> &'static str {
    match c {
        Check::MalformedPath => "malformed-path",
        Check::AbsolutePath => "absolute-path",
        Check::Traversal => "traversal",
        Check::Symlink => "symlink",
        Check::RealPathEscape => "real-path-escape",
        Check::Injection => "injection",
        Check::Missing => "missing",
        Check::Unreadable => "unreadable",
    }
}

fn refusals<S: Serializer>(list: &&[engine::Refusal], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|r| Refusal {
        source: &r.source,
        path: &r.path,
        check: check(r.check),
        required: r.required,
        message: &r.message,
    }))
}

/// Whether the knowledge capability registers, and why not.
#[derive(Debug, Serialize)]
pub struct Health<'a> {
    /// Whether it registers.
    pub registered: bool,
    /// Whether `[knowledge]` enables it.
    pub enabled: bool,
    /// Required sources loaded.
    pub required_loaded: u64,
    /// Required sources needed.
    pub required_sources: u64,
    /// Required sources that did not load.
    pub missing_required: &'a [String],
    /// Tokens of the loaded sources.
    pub total_tokens: u64,
    /// Tokens needed.
    pub min_tokens: u64,
    /// Why it does not register, in sentences.
    pub reasons: &'a [String],
}

impl<'a> From<&'a engine::Health> for Health<'a> {
    fn from(h: &'a engine::Health) -> Self {
        Health {
            registered: h.registered,
            enabled: h.enabled,
            required_loaded: h.required_loaded,
            required_sources: h.required_sources,
            missing_required: &h.missing_required,
            total_tokens: h.total_tokens,
            min_tokens: h.min_tokens,
            reasons: &h.reasons,
        }
    }
}
