//! Load-time diagnostics: what is wrong in which file, at which line, in which field, and how
//! to fix it. They render as plain text (`Display`) or, through [`miette`], with the offending
//! line underlined.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{LabeledSpan, SourceCode};

use crate::printable::{printable, printable_name};
use crate::source::SourceFile;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth a look; the rule still loads.
    Warning,
    /// The rule (or file) is not loaded; the others are.
    Error,
}

/// One problem found while loading.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    severity: Severity,
    file: Option<Arc<SourceFile>>,
    path: PathBuf,
    span: Option<Range<usize>>,
    field: Option<String>,
    message: String,
    help: Option<String>,
    /// For the summary that stands for the diagnostics of a file past
    /// [`Diagnostic::MAX_PER_FILE`]: how many it stands for (0 otherwise).
    omitted: usize,
    /// Of those, how many are errors.
    omitted_errors: usize,
}

impl Diagnostic {
    /// The most diagnostics reported for one file; past them, one diagnostic says how many
    /// more there are (a file with thousands of mistakes would bury the first ones, and each
    /// is printed with its source line).
    pub const MAX_PER_FILE: usize = 100;

    /// An error in `file` at byte range `span`, about `field` (such as `rule.priority`).
    pub fn error(
        file: &Arc<SourceFile>,
        span: Option<Range<usize>>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Error,
            path: file.path().to_path_buf(),
            file: Some(file.clone()),
            span,
            field: field.map(str::to_string),
            message: message.into(),
            help: None,
            omitted: 0,
            omitted_errors: 0,
        }
    }

    /// A warning in `file`.
    pub fn warning(
        file: &Arc<SourceFile>,
        span: Option<Range<usize>>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::error(file, span, field, message)
        }
    }

    /// An error about a path that could not be read at all.
    pub fn io(path: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            file: None,
            path: path.to_path_buf(),
            span: None,
            field: None,
            message: message.into(),
            help: None,
            omitted: 0,
            omitted_errors: 0,
        }
    }

    /// A warning about a file or folder as a whole.
    pub fn io_warning(path: &Path, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Self::io(path, message)
        }
    }

    /// Adds a suggestion.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Adds a suggestion if there is one.
    pub fn with_help_opt(mut self, help: Option<impl Into<String>>) -> Self {
        self.help = help.map(Into::into);
        self
    }

    /// Error or warning.
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// Whether it stops the rule from loading.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The file concerned.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// 1-based line, if the problem has a place in the file.
    pub fn line(&self) -> Option<usize> {
        self.location().map(|(l, _)| l)
    }

    /// 1-based line and column, if the problem has a place in the file.
    pub fn location(&self) -> Option<(usize, usize)> {
        match (&self.file, &self.span) {
            (Some(f), Some(s)) => Some(f.line_col(s.start)),
            _ => None,
        }
    }

    /// The field concerned, as a dotted path (`rule.priority`, `condition.expression`).
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// How to fix it, when Warden can tell.
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }

    /// For the diagnostic that closes a file's list when it had more than
    /// [`Diagnostic::MAX_PER_FILE`]: how many were left out. 0 for any other.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// Of [`Diagnostic::omitted`], how many are errors (the rest are warnings).
    pub fn omitted_errors(&self) -> usize {
        self.omitted_errors
    }

    /// The order diagnostics are listed in: by file, then the file as a whole (no place), then
    /// by place, then the summary of those left out. Cheap: a place is compared by its byte
    /// offset, which orders as its line and column do.
    fn order(&self) -> (&Path, bool, Option<usize>) {
        let place = match (&self.file, &self.span) {
            (Some(f), Some(s)) => Some(f.char_offset(s.start)),
            _ => None,
        };
        (&self.path, self.omitted > 0, place)
    }
}

/// Sorts diagnostics by file and place (keeping the order of those at the same place), and
/// keeps the first [`Diagnostic::MAX_PER_FILE`] of each file, followed by one that says how
/// many more there are. Summaries already in the list (from an earlier pass) are merged into
/// the new one, so the count stays right when diagnostics are added and the list is sorted
/// again.
pub fn sort_and_cap(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|a, b| a.order().cmp(&b.order()));
    let mut all = std::mem::take(diagnostics).into_iter().peekable();
    while let Some(path) = all.peek().map(|d| d.path.clone()) {
        let (mut kept, mut left, mut left_errors) = (0, 0, 0);
        while let Some(d) = all.next_if(|d| d.path == path) {
            if d.omitted > 0 {
                left += d.omitted;
                left_errors += d.omitted_errors;
            } else if kept < Diagnostic::MAX_PER_FILE {
                kept += 1;
                diagnostics.push(d);
            } else {
                left += 1;
                left_errors += usize::from(d.is_error());
            }
        }
        if left > 0 {
            diagnostics.push(Diagnostic {
                severity: if left_errors > 0 {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                file: None,
                path,
                span: None,
                field: None,
                message: format!(
                    "… and {left} more problem{} in this file (only the first {} are reported)",
                    if left == 1 { "" } else { "s" },
                    Diagnostic::MAX_PER_FILE
                ),
                help: Some(
                    "fix the problems above and check the file again to see the rest".into(),
                ),
                omitted: left,
                omitted_errors: left_errors,
            });
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", printable_name(&self.path.display().to_string()))?;
        if let Some((line, col)) = self.location() {
            write!(f, ":{line}:{col}")?;
        }
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {level}: ")?;
        if let Some(field) = &self.field {
            write!(f, "{}: ", printable_name(field))?;
        }
        write!(f, "{}", printable(&self.message))?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {}", printable(help))?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// A [`Diagnostic`] as miette renders it: the location and the help are drawn by miette, so
/// the headline is only the field and the message.
pub struct Report<'a>(pub &'a Diagnostic);

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.file.is_none() || d.span.is_none() {
            write!(f, "{}: ", printable_name(&d.path.display().to_string()))?;
        }
        if let Some(field) = &d.field {
            write!(f, "{}: ", printable_name(field))?;
        }
        f.write_str(&printable(&d.message))
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.0.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.0
            .help
            .as_ref()
            .map(|h| Box::new(printable(h).into_owned()) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.0.file.as_ref().map(|f| f.named() as &dyn SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.0.span.clone()?;
        let label = self
            .0
            .field
            .as_deref()
            .map_or_else(|| "here".into(), |f| printable_name(f).into_owned());
        Some(Box::new(std::iter::once(LabeledSpan::new_with_span(
            Some(label),
            span.start..span.end.max(span.start),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_field_and_help() {
        let file = SourceFile::new("rules/x.toml", "[rule]\nid = \"x\"\npriorty = 5\n");
        let d = Diagnostic::error(
            &file,
            Some(16..23),
            Some("rule.priorty"),
            "unknown field `priorty`",
        )
        .with_help("did you mean `priority`?");
        assert_eq!(
            d.to_string(),
            "rules/x.toml:3:1: error: rule.priorty: unknown field `priorty`\n  help: did you mean `priority`?"
        );
        assert_eq!(d.line(), Some(3));
    }

    #[test]
    fn lists_are_capped_per_file_and_summaries_merge() {
        let a = SourceFile::new("a.toml", "x\n".repeat(300));
        let b = SourceFile::new("b.toml", "y\n");
        let warn = |i: usize| Diagnostic::warning(&a, Some(2 * i..2 * i + 1), None, "w");
        // Given in reverse order: sorted by place, the first 100 kept.
        let mut list: Vec<Diagnostic> = (0..150).rev().map(warn).collect();
        list.push(Diagnostic::error(&b, Some(0..1), None, "e"));
        sort_and_cap(&mut list);
        assert_eq!(list.len(), Diagnostic::MAX_PER_FILE + 2);
        assert_eq!(list[0].location(), Some((1, 1)));
        assert_eq!(list[99].location(), Some((100, 1)));
        let summary = &list[100];
        assert_eq!(
            (summary.omitted(), summary.severity()),
            (50, Severity::Warning)
        );
        assert_eq!(summary.path(), Path::new("a.toml"));
        assert!(summary.message().contains("and 50 more problems"));
        assert_eq!(list[101].path(), Path::new("b.toml"));
        // Sorted and capped again with more (one an error): the count carries over.
        list.push(warn(0));
        list.push(Diagnostic::error(&a, Some(598..599), None, "late"));
        sort_and_cap(&mut list);
        assert_eq!(list.len(), Diagnostic::MAX_PER_FILE + 2);
        let summary = &list[100];
        assert_eq!(
            (summary.omitted(), summary.severity()),
            (52, Severity::Error)
        );
        assert!(list[..100].iter().all(|d| d.omitted() == 0));
    }
}
