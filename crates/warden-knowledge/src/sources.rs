//! The sources file: its `[knowledge]` settings and its `[[source]]` list, and loading each
//! source through the five gates.

use std::ops::Range;
use std::path::Path;

use toml::de::DeValue;

use crate::error::LoadError;
use crate::gates::{self, Check, Root};
use crate::injection::{self, INJECTION_PATTERNS};
use crate::name::check_name;
use crate::settings::Settings;
use crate::tokens::estimate_tokens;
use warden_input::{At, Doc, SourceFile, Table, kind};

/// A knowledge source as the sources file declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDef {
    /// Unique name, shown in the attribution of the assembled section.
    pub id: String,
    /// Path of a UTF-8 text file, relative to the project root.
    pub path: String,
    /// Domain tags; a source is a candidate for a query sharing at least one.
    pub tags: Vec<String>,
    /// Rank among sources matching as many of the query's tags: **higher is chosen first**.
    pub priority: i64,
    /// Whether an operator vouches for the text: injection patterns found in it are reported
    /// as advisories instead of refusing it.
    pub curated: bool,
    /// Whether it counts towards the health gate's `required_sources`.
    pub required: bool,
    /// Line of its `[[source]]` entry in the sources file.
    pub line: usize,
}

/// A source that passed every gate and was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// As declared.
    pub def: SourceDef,
    /// The text: UTF-8, line ends as `\n`, no byte-order mark, no leading blank lines or
    /// trailing whitespace, the trust boundary's tags neutralised.
    pub text: String,
    /// Estimated tokens of `text`.
    pub tokens: u64,
}

/// A source that did not load, and the check that refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The source's id.
    pub source: String,
    /// Its path, as written in the sources file.
    pub path: String,
    /// The gate or check that refused it.
    pub check: Check,
    /// Whether the source was marked `required`.
    pub required: bool,
    /// What was found.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = self.path.escape_debug();
        match self.check.gate() {
            Some(n) => write!(
                f,
                "source `{}` ({path}) refused by {} (gate {n}): {}",
                self.source,
                self.check.name(),
                self.message
            ),
            None => write!(
                f,
                "source `{}` ({path}) not loaded, by {}: {}",
                self.source,
                self.check.name(),
                self.message
            ),
        }
    }
}

/// An injection pattern found in a curated source, which loaded anyway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advisory {
    /// The source's id.
    pub source: String,
    /// Its path.
    pub path: String,
    /// The [`InjectionPattern::id`](crate::InjectionPattern::id) found.
    pub pattern: String,
    /// 1-based line of the source file where it was found.
    pub line: usize,
}

impl std::fmt::Display for Advisory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "source `{}` ({}:{}) matches the injection pattern `{}`; loaded because it is \
             curated (advisory)",
            self.source, self.path, self.line, self.pattern
        )
    }
}

/// What a sources file says.
pub(crate) struct SourcesFile {
    pub settings: Settings,
    pub classification: Option<At<String>>,
    pub sources: Vec<SourceDef>,
}

const TOP_KEYS: &[&str] = &["knowledge", "source"];
const KNOWLEDGE_KEYS: &[&str] = &[
    "enabled",
    "classification",
    "budget_cap",
    "budget_percent",
    "min_truncated_tokens",
    "core_tag",
    "modes",
    "health",
];
const MODES_KEYS: &[&str] = &["reduced_from", "full_from"];
const HEALTH_KEYS: &[&str] = &["required_sources", "min_tokens"];
const SOURCE_KEYS: &[&str] = &["id", "path", "tags", "priority", "curated", "required"];

/// Reads a sources file's `text`; `path` names it in errors.
pub(crate) fn parse(path: &Path, text: &str) -> Result<SourcesFile, LoadError> {
    let file = SourceFile::new(path, text);
    let mut doc = Doc::new(file.clone());
    let Some(root) = doc.parse(file.text()) else {
        return Err(LoadError {
            diagnostics: doc.diagnostics,
        });
    };
    let mut top = Table::new(root.get_ref(), "", root.span());
    let mut settings = Settings::default();
    let mut classification = None;
    if let Some(mut k) = top.table(&mut doc, "knowledge") {
        read_settings(&mut doc, &mut k, &mut settings);
        classification = k.string(&mut doc, "classification");
        k.finish(&mut doc, KNOWLEDGE_KEYS);
    }
    let mut sources: Vec<SourceDef> = Vec::new();
    match top.raw("source") {
        None => doc.error(
            0..0,
            "source",
            "the sources file lists no sources",
            Some(
                "add one: [[source]] with id = \"glossary\", path = \"notes/glossary.md\", \
                 tags = [\"core\"]"
                    .into(),
            ),
        ),
        Some(v) => match v.get_ref() {
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let name = format!("source[{i}]");
                    let DeValue::Table(t) = item.get_ref() else {
                        doc.error(
                            item.span(),
                            &name,
                            format!("each source must be a table, not {}", kind(item.get_ref())),
                            Some("write each source as a [[source]] table".into()),
                        );
                        continue;
                    };
                    let mut table = Table::new(t, name, item.span());
                    if let Some(def) = read_source(&mut doc, &mut table, &sources) {
                        sources.push(def);
                    }
                    table.finish(&mut doc, SOURCE_KEYS);
                }
            }
            other => doc.error(
                v.span(),
                "source",
                format!("`source` must be an array of tables, not {}", kind(other)),
                Some("write each source as a [[source]] table".into()),
            ),
        },
    }
    top.finish(&mut doc, TOP_KEYS);
    LoadError::or(
        doc,
        SourcesFile {
            settings,
            classification,
            sources,
        },
    )
}

fn read_settings<'a>(doc: &mut Doc, k: &mut Table<'a>, s: &mut Settings) {
    if let Some(v) = k.boolean(doc, "enabled") {
        s.enabled = v.value;
    }
    if let Some(v) = k.count(doc, "budget_cap") {
        s.budget_cap = v.value;
    }
    if let Some(v) = k.count(doc, "budget_percent") {
        if (1..=100).contains(&v.value) {
            s.budget_percent = v.value;
        } else {
            doc.error(
                v.span,
                &k.field("budget_percent"),
                format!("`budget_percent` is {}; it must be from 1 to 100", v.value),
                Some("the seed's share is 15".into()),
            );
        }
    }
    if let Some(v) = k.count(doc, "min_truncated_tokens") {
        s.min_truncated_tokens = v.value;
    }
    if let Some(v) = k.string(doc, "core_tag") {
        match check_name(&v.value) {
            Ok(()) => s.core_tag = v.value,
            Err(why) => doc.error(
                v.span,
                &k.field("core_tag"),
                format!("the tag `{}` {why}", v.value),
                Some("tags are letters, digits, `-`, `_` and `.`".into()),
            ),
        }
    }
    if let Some(mut m) = k.table(doc, "modes") {
        let reduced = m.count(doc, "reduced_from");
        let full = m.count(doc, "full_from");
        if let Some(r) = &reduced {
            s.modes.reduced_from = r.value;
        }
        if let Some(f) = &full {
            s.modes.full_from = f.value;
        }
        if s.modes.reduced_from > s.modes.full_from {
            // Point at what was written: `full_from` if it was, else `reduced_from`.
            let (key, span) = match (full, reduced) {
                (Some(f), _) => ("full_from", f.span),
                (None, Some(r)) => ("reduced_from", r.span),
                (None, None) => ("full_from", m.span.clone()),
            };
            doc.error(
                span,
                &m.field(key),
                format!(
                    "`full_from` ({}) is below `reduced_from` ({}), so reduced mode could never \
                     apply",
                    s.modes.full_from, s.modes.reduced_from
                ),
                Some("make `full_from` at least `reduced_from`".into()),
            );
        }
        m.finish(doc, MODES_KEYS);
    }
    if let Some(mut h) = k.table(doc, "health") {
        if let Some(v) = h.count(doc, "required_sources") {
            s.health.required_sources = v.value;
        }
        if let Some(v) = h.count(doc, "min_tokens") {
            s.health.min_tokens = v.value;
        }
        h.finish(doc, HEALTH_KEYS);
    }
}

fn read_source(doc: &mut Doc, t: &mut Table<'_>, before: &[SourceDef]) -> Option<SourceDef> {
    let line = doc.file.line_col(t.span.start).0;
    let id = t.string(doc, "id");
    let path = t.string(doc, "path");
    let tags = t.string_items(doc, "tags");
    let priority = t.integer(doc, "priority").map_or(0, |v| v.value);
    let curated = t.boolean(doc, "curated").is_some_and(|v| v.value);
    let required_flag = t.boolean(doc, "required").is_some_and(|v| v.value);
    let id = required(doc, t, "id", id).and_then(|id| read_id(doc, t, id, before));
    let path = required(doc, t, "path", path);
    let tags = required(doc, t, "tags", tags).and_then(|tags| read_tags(doc, t, tags));
    Some(SourceDef {
        id: id?,
        path: path?.value,
        tags: tags?,
        priority,
        curated,
        required: required_flag,
        line,
    })
}

fn read_id(doc: &mut Doc, t: &Table<'_>, id: At<String>, before: &[SourceDef]) -> Option<String> {
    if let Err(why) = check_name(&id.value) {
        doc.error(
            id.span,
            &t.field("id"),
            format!("the id `{}` {why}", id.value.escape_debug()),
            Some("ids are letters, digits, `-`, `_` and `.`, such as `lua-scripts`".into()),
        );
        return None;
    }
    if let Some(first) = before.iter().find(|s| s.id == id.value) {
        doc.error(
            id.span,
            &t.field("id"),
            format!("the id `{}` is already used", id.value),
            Some(format!(
                "the source on line {} has it; give this one another id",
                first.line
            )),
        );
        return None;
    }
    Some(id.value)
}

/// Reports a missing required field of a source.
fn required<T>(doc: &mut Doc, t: &Table<'_>, key: &str, v: Option<At<T>>) -> Option<At<T>> {
    if v.is_none() && !t.has(key) {
        let example = match key {
            "id" => "id = \"glossary\"",
            "path" => "path = \"notes/glossary.md\"",
            _ => "tags = [\"core\"]",
        };
        doc.error(
            header_span(doc.file.text(), &t.span),
            &t.field(key),
            format!("this source has no `{key}`"),
            Some(format!("add {example}")),
        );
    }
    v
}

/// The span of the first line of a table (its `[[source]]` header), for problems about the
/// table as a whole.
fn header_span(text: &str, span: &Range<usize>) -> Range<usize> {
    let start = span.start.min(text.len());
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    start..end.max(start)
}

fn read_tags(doc: &mut Doc, t: &Table<'_>, tags: At<Vec<At<String>>>) -> Option<Vec<String>> {
    let field = t.field("tags");
    if tags.value.is_empty() {
        doc.error(
            tags.span,
            &field,
            "a source without tags is never chosen",
            Some("give it at least one tag, such as \"core\"".into()),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::new();
    let mut ok = true;
    for tag in tags.value {
        if let Err(why) = check_name(&tag.value) {
            doc.error(
                tag.span,
                &field,
                format!("the tag `{}` {why}", tag.value.escape_debug()),
                Some("tags are letters, digits, `-`, `_` and `.`".into()),
            );
            ok = false;
        } else if out.contains(&tag.value) {
            doc.error(
                tag.span,
                &field,
                format!("the tag `{}` is listed twice", tag.value),
                Some("remove one".into()),
            );
            ok = false;
        } else {
            out.push(tag.value);
        }
    }
    ok.then_some(out)
}

/// Loads `def` under `root` through the five gates.
pub(crate) fn load(root: &Root, def: &SourceDef) -> Result<(Source, Vec<Advisory>), Refusal> {
    let refuse = |(check, message): (Check, String)| Refusal {
        source: def.id.clone(),
        path: def.path.clone(),
        check,
        required: def.required,
        message,
    };
    let raw = gates::open(root, &def.path).map_err(refuse)?;
    let text = normalize(&raw);
    if text.is_empty() {
        return Err(refuse((
            Check::Unreadable,
            format!("`{}` is empty", def.path),
        )));
    }
    let findings = injection::scan(&text);
    if let (Some(first), false) = (findings.first(), def.curated) {
        let what = INJECTION_PATTERNS
            .iter()
            .find(|p| p.id == first.pattern)
            .map_or("", |p| p.description);
        let more = match findings.len() {
            1 => String::new(),
            2 => " (and 1 more pattern)".to_string(),
            n => format!(" (and {} more patterns)", n - 1),
        };
        return Err(refuse((
            Check::Injection,
            format!(
                "line {} matches `{}`: {what}{more}; a source that is not curated may not \
                 contain it (mark it `curated = true` only if you vouch for its text)",
                first.line, first.pattern
            ),
        )));
    }
    let advisories = findings
        .iter()
        .map(|f| Advisory {
            source: def.id.clone(),
            path: def.path.clone(),
            pattern: f.pattern.to_string(),
            line: f.line,
        })
        .collect();
    let text = injection::neutralize_markers(&text);
    let tokens = estimate_tokens(&text);
    Ok((
        Source {
            def: def.clone(),
            text,
            tokens,
        },
        advisories,
    ))
}

/// Line ends as `\n`, no byte-order mark, no leading blank lines, no trailing whitespace.
fn normalize(raw: &str) -> String {
    let text = raw.strip_prefix('\u{FEFF}').unwrap_or(raw);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let trimmed = text.trim_end();
    let start = trimmed
        .char_indices()
        .find(|&(_, c)| !c.is_whitespace())
        .map_or(trimmed.len(), |(i, _)| i);
    // Keep the indentation of the first line: drop whole blank lines only.
    let start = trimmed[..start].rfind('\n').map_or(0, |i| i + 1);
    trimmed[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizing() {
        assert_eq!(normalize("\u{FEFF}\n\n  a\r\nb  \r\n\n"), "  a\nb");
        assert_eq!(normalize("   \n\t\n"), "");
        assert_eq!(normalize("x"), "x");
    }

    #[test]
    fn names() {
        assert!(check_name("lua-scripts_2.x").is_ok());
        for bad in ["", "a b", "a-->", "tag,other", "é", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
