//! Reading operator TOML with a position for every value, so that each mistake is reported at
//! its line and field, and every unknown key is caught (with the nearest known key suggested).

use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::error::{LoadError, Problem, closest};

/// One file being read: its name, its text and the problems found so far.
pub(crate) struct Doc<'f> {
    pub path: &'f Path,
    pub text: &'f str,
    pub problems: Vec<Problem>,
}

impl<'f> Doc<'f> {
    pub(crate) fn new(path: &'f Path, text: &'f str) -> Self {
        Doc {
            path,
            text,
            problems: Vec::new(),
        }
    }

    pub(crate) fn error(
        &mut self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
        suggestion: Option<String>,
    ) {
        let mut p = Problem::at(self.path, self.text, span, Some(field), message);
        p.suggestion = suggestion;
        self.problems.push(p);
    }

    /// Parses the text; a syntax error is the one problem reported.
    pub(crate) fn parse(&self) -> Result<Spanned<DeTable<'f>>, LoadError> {
        DeTable::parse(self.text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            LoadError::one(
                Problem::at(
                    self.path,
                    self.text,
                    span,
                    None,
                    format!("this is not valid TOML: {}", e.message().trim()),
                )
                .suggest("see https://toml.io; strings need quotes, tables are written [name]"),
            )
        })
    }

    /// The problems found, or `ok` if there were none.
    pub(crate) fn finish<T>(self, ok: T) -> Result<T, LoadError> {
        if self.problems.is_empty() {
            Ok(ok)
        } else {
            Err(LoadError {
                problems: self.problems,
            })
        }
    }
}

/// A value with where it was written.
pub(crate) struct At<T> {
    pub value: T,
    pub span: Range<usize>,
}

pub(crate) fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// A TOML table being read: remembers which keys were used, to report the others.
pub(crate) struct Table<'a> {
    table: &'a DeTable<'a>,
    /// The table's dotted name, for messages (`knowledge`, `source[2]`).
    pub name: String,
    pub span: Range<usize>,
    used: Vec<&'a str>,
}

impl<'a> Table<'a> {
    pub(crate) fn new(table: &'a DeTable<'a>, name: impl Into<String>, span: Range<usize>) -> Self {
        Table {
            table,
            name: name.into(),
            span,
            used: Vec::new(),
        }
    }

    /// The dotted name of `key` in this table.
    pub(crate) fn field(&self, key: &str) -> String {
        if self.name.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.name)
        }
    }

    pub(crate) fn has(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// Every entry, in file order.
    pub(crate) fn entries(
        &self,
    ) -> impl Iterator<
        Item = (
            &'a Spanned<std::borrow::Cow<'a, str>>,
            &'a Spanned<DeValue<'a>>,
        ),
    > {
        self.table.iter()
    }

    pub(crate) fn raw(&mut self, key: &'a str) -> Option<&'a Spanned<DeValue<'a>>> {
        let (k, v) = self.table.get_key_value(key)?;
        self.used.push(k.get_ref().as_ref());
        Some(v)
    }

    fn typed<T>(
        &mut self,
        doc: &mut Doc<'_>,
        key: &'a str,
        want: &str,
        f: impl FnOnce(&'a DeValue<'a>) -> Option<T>,
    ) -> Option<At<T>> {
        let v = self.raw(key)?;
        match f(v.get_ref()) {
            Some(value) => Some(At {
                value,
                span: v.span(),
            }),
            None => {
                doc.error(
                    v.span(),
                    &self.field(key),
                    format!("`{key}` must be {want}, not {}", kind(v.get_ref())),
                    None,
                );
                None
            }
        }
    }

    pub(crate) fn string(&mut self, doc: &mut Doc<'_>, key: &'a str) -> Option<At<String>> {
        self.typed(doc, key, "a string", |v| match v {
            DeValue::String(s) => Some(s.to_string()),
            _ => None,
        })
    }

    pub(crate) fn boolean(&mut self, doc: &mut Doc<'_>, key: &'a str) -> Option<At<bool>> {
        self.typed(doc, key, "true or false", |v| match v {
            DeValue::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    /// An integer; one that does not fit in an `i64` is reported.
    pub(crate) fn integer(&mut self, doc: &mut Doc<'_>, key: &'a str) -> Option<At<i64>> {
        let at = self.typed(doc, key, "an integer", |v| match v {
            DeValue::Integer(i) => Some(i64::from_str_radix(i.as_str(), i.radix())),
            _ => None,
        })?;
        match at.value {
            Ok(value) => Some(At {
                value,
                span: at.span,
            }),
            Err(_) => {
                doc.error(
                    at.span,
                    &self.field(key),
                    format!("`{key}` does not fit in a 64-bit integer"),
                    None,
                );
                None
            }
        }
    }

    /// A non-negative integer.
    pub(crate) fn count(&mut self, doc: &mut Doc<'_>, key: &'a str) -> Option<At<u64>> {
        let at = self.integer(doc, key)?;
        match u64::try_from(at.value) {
            Ok(value) => Some(At {
                value,
                span: at.span,
            }),
            Err(_) => {
                doc.error(
                    at.span,
                    &self.field(key),
                    format!("`{key}` must not be negative"),
                    Some(format!("write a number of 0 or more for `{key}`")),
                );
                None
            }
        }
    }

    /// An array of strings (each with its span).
    pub(crate) fn strings(
        &mut self,
        doc: &mut Doc<'_>,
        key: &'a str,
    ) -> Option<At<Vec<At<String>>>> {
        self.typed(doc, key, "an array of strings", |v| strings_of(v))
    }

    pub(crate) fn table(&mut self, doc: &mut Doc<'_>, key: &'a str) -> Option<Table<'a>> {
        let name = self.field(key);
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(Table::new(t, name, v.span())),
            other => {
                doc.error(
                    v.span(),
                    &name,
                    format!("`{key}` must be a table, not {}", kind(other)),
                    Some(format!("write it as a table: [{name}]")),
                );
                None
            }
        }
    }

    /// Reports every key that was not read, suggesting the nearest of `known`.
    pub(crate) fn finish(self, doc: &mut Doc<'_>, known: &[&str]) {
        for (k, v) in self.table.iter() {
            let key: &str = k.get_ref().as_ref();
            if self.used.contains(&key) {
                continue;
            }
            let suggestion = closest(key, known.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| {
                    let place = if self.name.is_empty() {
                        "the top level".to_string()
                    } else {
                        format!("[{}]", self.name)
                    };
                    format!("the fields of {place} are {}", known.join(", "))
                });
            let place = if self.name.is_empty() {
                String::new()
            } else {
                format!(" in [{}]", self.name)
            };
            let span = k.span().start..v.span().end.max(k.span().end);
            doc.error(
                span,
                &self.field(key),
                format!("unknown field `{key}`{place}"),
                Some(suggestion),
            );
        }
    }
}

/// The strings of an array value, each with its span; `None` if it is not an array of strings.
pub(crate) fn strings_of(v: &DeValue<'_>) -> Option<Vec<At<String>>> {
    match v {
        DeValue::Array(items) => items
            .iter()
            .map(|i| match i.get_ref() {
                DeValue::String(s) => Some(At {
                    value: s.to_string(),
                    span: i.span(),
                }),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}
