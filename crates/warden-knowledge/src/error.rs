//! What went wrong reading a sources or classification file: every mistake found in it, each a
//! [`Diagnostic`] naming the file, line and field, and how to fix it.

use std::fmt;

use warden_input::{Diagnostic, Doc};

/// A sources or classification file that could not be loaded. Every mistake found in it is
/// listed, not only the first.
#[derive(Debug, Clone, thiserror::Error)]
pub struct LoadError {
    /// The mistakes, in the order of the file.
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadError {
    pub(crate) fn one(diagnostic: Diagnostic) -> Self {
        LoadError {
            diagnostics: vec![diagnostic],
        }
    }

    /// The problems `doc` found, or `ok` if there were none.
    pub(crate) fn or<T>(doc: Doc, ok: T) -> Result<T, LoadError> {
        if doc.diagnostics.is_empty() {
            Ok(ok)
        } else {
            Err(LoadError {
                diagnostics: doc.diagnostics,
            })
        }
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}
