//! Load-time errors of the condition language. Each points at a byte span of the expression
//! so the caller can map it into the file the expression came from.

use std::fmt;

/// A byte range `start..end` in the expression source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// What kind of mistake an [`ExprError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text is not an expression of the language.
    Syntax,
    /// A field path names a field the context schema does not have.
    UnknownField,
    /// A name that is neither a root of the context nor a bound variable.
    UnknownName,
    /// A function the language does not have, or the wrong number of arguments.
    UnknownFunction,
    /// Operand types that can never work together (comparing a number with a string).
    Type,
    /// A root that exists but is not available where the expression is used
    /// (`result` in a rule of a hook that has no tool result).
    Unavailable,
    /// The expression is well-formed but too large or deep to compile.
    Limit,
}

/// A load-time error in an expression: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    kind: ErrorKind,
    span: Span,
    message: String,
    help: Option<String>,
}

impl ExprError {
    pub(crate) fn new(
        kind: ErrorKind,
        span: Span,
        message: impl Into<String>,
        help: Option<&str>,
    ) -> Self {
        ExprError {
            kind,
            span,
            message: message.into(),
            help: help.map(str::to_string),
        }
    }

    pub(crate) fn syntax(span: Span, message: impl Into<String>, help: Option<&str>) -> Self {
        Self::new(ErrorKind::Syntax, span, message, help)
    }

    /// What kind of mistake this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Where in the expression source the mistake is.
    pub fn span(&self) -> Span {
        self.span
    }

    /// The message, without the help.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// A suggestion for fixing it, when there is one ("did you mean `token_usage`?").
    pub fn help(&self) -> Option<&str> {
        self.help.as_deref()
    }

    pub(crate) fn at(mut self, span: Span) -> Self {
        self.span = span;
        self
    }
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, " ({help})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ExprError {}
