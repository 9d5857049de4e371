//! What went wrong reading a sources or classification file: which file, line and field, and
//! how to fix it.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// One mistake in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file, as it was named to [`Knowledge::load`](crate::Knowledge::load).
    pub file: PathBuf,
    /// 1-based line, when the problem has a place in the file.
    pub line: Option<usize>,
    /// 1-based column (in characters), when the problem has a place in the file.
    pub column: Option<usize>,
    /// Byte range in the file, for renderers that underline it.
    pub span: Option<Range<usize>>,
    /// The field concerned, as a dotted path (`knowledge.budget_cap`, `source[2].path`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when it can be told.
    pub suggestion: Option<String>,
}

impl Problem {
    /// A problem with the file as a whole (it could not be read).
    pub(crate) fn file(file: &Path, message: impl Into<String>) -> Self {
        Problem {
            file: file.to_path_buf(),
            line: None,
            column: None,
            span: None,
            field: None,
            message: message.into(),
            suggestion: None,
        }
    }

    /// A problem at byte range `span` of `text` (the file's contents), in `field`.
    pub(crate) fn at(
        file: &Path,
        text: &str,
        span: Range<usize>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        let (line, column) = line_col(text, span.start);
        Problem {
            file: file.to_path_buf(),
            line: Some(line),
            column: Some(column),
            span: Some(span),
            field: field.map(str::to_string),
            message: message.into(),
            suggestion: None,
        }
    }

    /// Adds a suggestion.
    pub(crate) fn suggest(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let (Some(line), Some(col)) = (self.line, self.column) {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": error: ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(s) = &self.suggestion {
            write!(f, "\n  help: {s}")?;
        }
        Ok(())
    }
}

/// A sources or classification file that could not be loaded. Every mistake found in it is
/// listed, not only the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct LoadError {
    /// The mistakes, in the order of the file.
    pub problems: Vec<Problem>,
}

impl LoadError {
    pub(crate) fn one(problem: Problem) -> Self {
        LoadError {
            problems: vec![problem],
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The closest of `candidates` to `name`, if it is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, c)| {
            *d <= (name.len().max(c.len()) / 3).max(2)
                || (name.len() >= 3 && (c.starts_with(name) || c.ends_with(name)))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_field_and_help() {
        let text = "[knowledge]\nbudget_capp = 5\n";
        let p = Problem::at(
            Path::new("sources.toml"),
            text,
            12..23,
            Some("knowledge.budget_capp"),
            "unknown field `budget_capp`",
        )
        .suggest("did you mean `budget_cap`?");
        assert_eq!(
            p.to_string(),
            "sources.toml:2:1: error: knowledge.budget_capp: unknown field `budget_capp`\n  help: did you mean `budget_cap`?"
        );
    }

    #[test]
    fn columns_count_characters_and_survive_bad_offsets() {
        assert_eq!(line_col("é = 1\nab", 3), (1, 3));
        assert_eq!(line_col("é = 1\nab", 1), (1, 1));
        assert_eq!(line_col("é", 99), (1, 2));
    }

    #[test]
    fn closest_suggests_typos_only() {
        let known = ["budget_cap", "budget_percent", "enabled"];
        assert_eq!(closest("budget_capp", known), Some("budget_cap"));
        assert_eq!(closest("enabeld", known), Some("enabled"));
        assert_eq!(closest("colour", known), None);
    }
}
