//! Reading operator input for Warden: the files operators write (rules, behaviors, plugin
//! manifests, modes, `warden.toml`, rule tests, knowledge sources, scripts), read defensively
//! and reported precisely.
//!
//! - [`read_text`]: a file read confined to its folder, bounded, never blocking on a pipe.
//! - [`SourceFile`]: the text read, kept to point into.
//! - [`Doc`] and [`Table`]: TOML read with a span for every value; every unknown key is
//!   reported with the nearest known one.
//! - [`Diagnostic`]: what is wrong, at which file, line and field, and how to fix it; rendered
//!   as plain text or, through [`Report`], by miette with the line underlined.
//! - [`closest`]: "did you mean ...?" for a mistyped name.
//!
//! ```
//! use warden_input::{Doc, SourceFile, Table};
//!
//! let file = SourceFile::new("rules/x.toml", "[rule]\nid = \"x\"\npriorty = 5\n");
//! let mut doc = Doc::new(file.clone());
//! let root = doc.parse(file.text()).unwrap();
//! let mut top = Table::new(root.get_ref(), "", 0..0);
//! let mut rule = top.table(&mut doc, "rule").unwrap();
//! assert_eq!(rule.string(&mut doc, "id").unwrap().value, "x");
//! rule.finish(&mut doc, &["id", "priority"]);
//! assert_eq!(
//!     doc.diagnostics[0].to_string(),
//!     "rules/x.toml:3:1: error: rule.priorty: unknown field `priorty` in [rule]\n  help: did you mean `priority`?"
//! );
//! ```
//!
//! Invariants: nothing here knows what a rule is; a read never blocks and never holds more
//! than its limit; a diagnostic never prints a control character from a file or its name.

#![warn(missing_docs)]

mod diagnostic;
mod printable;
mod read;
mod source;
mod suggest;
mod toml;

pub use diagnostic::{Diagnostic, Report, Severity, sort_and_cap};
pub use printable::{printable, printable_name};
pub use read::{FileKind, ReadError, not_regular, read_entry, read_text};
pub use source::SourceFile;
pub use suggest::closest;
pub use toml::{At, Doc, Located, Table, kind, string_items, to_json};
