//! Reading operator TOML with a position for every value, so each problem is reported at its
//! line and field, and every unknown key is caught (with the nearest known key suggested).
//!
//! A [`Doc`] collects the diagnostics of one file; a [`Table`] reads the keys of one table and,
//! when [`Table::finish`] is called, reports every key nobody read.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use serde_json::Value as Json;
use toml::Spanned;
use toml::de::{DeFloat, DeInteger, DeTable, DeValue};

use crate::diagnostic::Diagnostic;
use crate::source::SourceFile;
use crate::suggest::closest;

/// Collects the diagnostics of one file.
pub struct Doc {
    /// The file being read.
    pub file: Arc<SourceFile>,
    /// What was found wrong so far.
    pub diagnostics: Vec<Diagnostic>,
}

impl Doc {
    /// Where the file's text ends (after its last character that is not blank): where a table
    /// the file lacks is reported, since a file cut short by a write still under way lacks its
    /// last tables, and its end is what the reader should look at.
    pub fn end(&self) -> Range<usize> {
        let end = self.file.text().trim_end().len();
        end..end
    }

    /// Starts reading `file`.
    pub fn new(file: Arc<SourceFile>) -> Self {
        Doc {
            file,
            diagnostics: Vec::new(),
        }
    }

    /// Reports an error at `span`, about `field`, with an optional suggestion.
    pub fn error(
        &mut self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        self.diagnostics.push(
            Diagnostic::error(&self.file, Some(span), Some(field), message).with_help_opt(help),
        );
    }

    /// Reports a warning at `span`, about `field`.
    pub fn warning(
        &mut self,
        span: Range<usize>,
        field: &str,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        self.diagnostics.push(
            Diagnostic::warning(&self.file, Some(span), Some(field), message).with_help_opt(help),
        );
    }

    /// Whether an error (not only warnings) was reported.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Parses `text` (this document's contents); a syntax error is reported and yields `None`.
    pub fn parse<'t>(&mut self, text: &'t str) -> Option<Spanned<DeTable<'t>>> {
        match DeTable::parse(text) {
            Ok(table) => Some(table),
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                let message = e.message().trim().to_string();
                self.diagnostics.push(
                    Diagnostic::error(
                        &self.file,
                        Some(span),
                        None,
                        format!("this is not valid TOML: {message}"),
                    )
                    .with_help(
                        "see https://toml.io; strings need quotes, tables are written [name]",
                    ),
                );
                None
            }
        }
    }
}

/// A TOML table being read: remembers which keys were used, to report the rest.
pub struct Table<'a> {
    table: &'a DeTable<'a>,
    /// The table's dotted name, for messages (`rule`, `action`, `source[2]`).
    pub name: String,
    /// Where the table is written.
    pub span: Range<usize>,
    used: Vec<&'a str>,
}

/// A value with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct At<T> {
    /// The value.
    pub value: T,
    /// The byte range it was written at.
    pub span: Range<usize>,
}

/// A string from a file with where it was written and the field it was written in: what a
/// later stage (compiling a condition, a template, a script path) needs to report a problem
/// with it at its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The string value.
    pub text: String,
    /// The byte range of the value in the file, quotes included.
    pub span: Range<usize>,
    /// The dotted field name (`condition.expression`).
    pub field: String,
}

impl Located {
    /// `at`, written in `field`.
    pub fn new(at: At<String>, field: impl Into<String>) -> Self {
        Located {
            text: at.value,
            span: at.span,
            field: field.into(),
        }
    }
}

/// What kind of value `v` is, for messages ("an integer").
pub fn kind(v: &DeValue<'_>) -> &'static str {
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

impl<'a> Table<'a> {
    /// Reads `table`, named `name` in messages, written at `span`.
    pub fn new(table: &'a DeTable<'a>, name: impl Into<String>, span: Range<usize>) -> Self {
        Table {
            table,
            name: name.into(),
            span,
            used: Vec::new(),
        }
    }

    /// The dotted name of `key` in this table (`rule.priority`).
    pub fn field(&self, key: &str) -> String {
        if self.name.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.name)
        }
    }

    /// Whether the table has `key` (read or not).
    pub fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// The entry of `key`. The tables of operator files hold a few keys each: comparing them is
    /// cheaper than hashing the key (which was a tenth of loading a rule file).
    fn entry(&self, key: &str) -> Option<(&'a Spanned<Cow<'a, str>>, &'a Spanned<DeValue<'a>>)> {
        let table: &'a DeTable<'a> = self.table;
        if table.len() <= 16 {
            table.iter().find(|(k, _)| k.get_ref() == key)
        } else {
            table.get_key_value(key)
        }
    }

    /// The value of `key`, as TOML, marked as read.
    pub fn raw(&mut self, key: &'a str) -> Option<&'a Spanned<DeValue<'a>>> {
        let (k, v) = self.entry(key)?;
        self.used.push(k.get_ref().as_ref());
        Some(v)
    }

    fn typed<T>(
        &mut self,
        doc: &mut Doc,
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

    /// A string; another type is reported.
    pub fn string(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<String>> {
        self.typed(doc, key, "a string", |v| match v {
            DeValue::String(s) => Some(s.to_string()),
            _ => None,
        })
    }

    /// An integer; another type, or one past 64 bits, is reported.
    pub fn integer(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<i64>> {
        let at = self.typed(doc, key, "an integer", |v| match v {
            DeValue::Integer(i) => Some(int(i)),
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

    /// `true` or `false`; another type is reported.
    pub fn boolean(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<bool>> {
        self.typed(doc, key, "true or false", |v| match v {
            DeValue::Boolean(b) => Some(*b),
            _ => None,
        })
    }

    /// A string, or an array of strings (an item that is not a string is reported there).
    pub fn strings(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<Vec<String>>> {
        let at = self.typed(doc, key, "a string or an array of strings", |v| match v {
            DeValue::String(s) => Some(Ok(vec![s.to_string()])),
            DeValue::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| match item.get_ref() {
                        DeValue::String(s) => Ok(s.to_string()),
                        _ => Err((i, item)),
                    })
                    .collect(),
            ),
            _ => None,
        })?;
        match at.value {
            Ok(value) => Some(At {
                value,
                span: at.span,
            }),
            Err((i, bad)) => {
                doc.error(
                    bad.span(),
                    &format!("{}[{i}]", self.field(key)),
                    format!(
                        "each item of `{key}` must be a string; item {} is {}",
                        i + 1,
                        kind(bad.get_ref())
                    ),
                    None,
                );
                None
            }
        }
    }

    /// A table; another type is reported.
    pub fn table(&mut self, doc: &mut Doc, key: &'a str) -> Option<Table<'a>> {
        let name = self.field(key);
        let v = self.raw(key)?;
        match v.get_ref() {
            DeValue::Table(t) => Some(Table::new(t, name, v.span())),
            other => {
                doc.error(
                    v.span(),
                    &name,
                    format!("`{key}` must be a table, not {}", kind(other)),
                    None,
                );
                None
            }
        }
    }

    /// Any value, as JSON (dates become strings). A number JSON cannot hold (`nan`, `inf`, an integer beyond 64
    /// bits) is an error where it is written, not a silent `null`.
    pub fn json(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<Json>> {
        let v = self.raw(key)?;
        if let Some((bad, span)) = unrepresentable(v) {
            doc.error(
                span,
                &self.field(key),
                format!("`{key}` holds {bad}, which JSON (and so Warden) cannot hold"),
                Some("write a finite number, within 64 bits for an integer".into()),
            );
            return None;
        }
        Some(At {
            value: to_json(v.get_ref()),
            span: v.span(),
        })
    }

    /// An integer of 0 or more; a negative one is reported.
    pub fn count(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<u64>> {
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

    /// An array of strings, each with where it was written.
    pub fn string_items(&mut self, doc: &mut Doc, key: &'a str) -> Option<At<Vec<At<String>>>> {
        self.typed(doc, key, "an array of strings", string_items)
    }

    /// An array of tables (`[[key]]`), each named `key[i]` in messages. Absent, it is empty;
    /// one table alone (`[key]`) counts as an array of one; an item that is not a table is
    /// reported, and the others are read.
    pub fn tables(&mut self, doc: &mut Doc, key: &'a str) -> Vec<Table<'a>> {
        let name = self.field(key);
        let Some(raw) = self.raw(key) else {
            return Vec::new();
        };
        match raw.get_ref() {
            DeValue::Table(t) => vec![Table::new(t, name, raw.span())],
            DeValue::Array(items) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let item_name = format!("{name}[{i}]");
                    match item.get_ref() {
                        DeValue::Table(t) => out.push(Table::new(t, item_name, item.span())),
                        other => doc.error(
                            item.span(),
                            &item_name,
                            format!("each [[{key}]] must be a table, not {}", kind(other)),
                            None,
                        ),
                    }
                }
                out
            }
            other => {
                doc.error(
                    raw.span(),
                    &name,
                    format!(
                        "`{key}` must be a table ([{key}]) or tables ([[{key}]]), not {}",
                        kind(other)
                    ),
                    None,
                );
                Vec::new()
            }
        }
    }

    /// The table's entries, in file order: each key with where it is written, and its value.
    pub fn entries(&self) -> impl Iterator<Item = (At<&'a str>, &'a Spanned<DeValue<'a>>)> {
        self.table.iter().map(|(k, v)| {
            (
                At {
                    value: k.get_ref().as_ref(),
                    span: k.span(),
                },
                v,
            )
        })
    }

    /// Reports every key that was not read, suggesting the nearest of `known`.
    pub fn finish(self, doc: &mut Doc, known: &[&str]) {
        for (k, v) in self.table.iter() {
            let key: &str = k.get_ref().as_ref();
            if self.used.contains(&key) {
                continue;
            }
            let place = if self.name.is_empty() {
                "at the top of the file".to_string()
            } else {
                format!("in [{}]", self.name)
            };
            let help = closest(key, known.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| format!("the keys allowed {place} are {}", known.join(", ")));
            let span = k.span().start..v.span().end.max(k.span().end);
            doc.error(
                span,
                &self.field(key),
                format!("unknown field `{key}` {place}"),
                Some(help),
            );
        }
    }
}

/// The first number in `v` that JSON cannot hold, described, and where it is.
fn unrepresentable(v: &Spanned<DeValue<'_>>) -> Option<(String, Range<usize>)> {
    match v.get_ref() {
        DeValue::Integer(i) if int(i).is_err() => {
            Some((format!("the integer {}", i.as_str()), v.span()))
        }
        DeValue::Float(f) if finite(f).is_none() => Some((format!("`{}`", f.as_str()), v.span())),
        DeValue::Array(items) => items.iter().find_map(unrepresentable),
        DeValue::Table(t) => t.values().find_map(unrepresentable),
        _ => None,
    }
}

/// The strings of an array value, each with its span; `None` if it is not an array of strings.
pub fn string_items(v: &DeValue<'_>) -> Option<Vec<At<String>>> {
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

/// A TOML value as JSON (a number JSON cannot hold becomes `null`: see [`Table::json`]).
pub fn to_json(v: &DeValue<'_>) -> Json {
    match v {
        DeValue::String(s) => Json::String(s.to_string()),
        DeValue::Integer(i) => int(i).map_or(Json::Null, Json::from),
        DeValue::Float(f) => finite(f)
            .and_then(serde_json::Number::from_f64)
            .map_or(Json::Null, Json::Number),
        DeValue::Boolean(b) => Json::Bool(*b),
        DeValue::Datetime(d) => Json::String(d.to_string()),
        DeValue::Array(items) => Json::Array(items.iter().map(|i| to_json(i.get_ref())).collect()),
        DeValue::Table(t) => Json::Object(
            t.iter()
                .map(|(k, v)| (k.get_ref().to_string(), to_json(v.get_ref())))
                .collect(),
        ),
    }
}

/// A TOML integer's value (an error beyond 64 bits).
fn int(i: &DeInteger<'_>) -> Result<i64, std::num::ParseIntError> {
    i64::from_str_radix(i.as_str(), i.radix())
}

/// A TOML float's value, unless it is `nan` or infinite.
fn finite(f: &DeFloat<'_>) -> Option<f64> {
    f.as_str()
        .replace('_', "")
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}
