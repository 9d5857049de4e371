//! The exceptions the package raises, and the diagnostics they carry.
//!
//! - `EventError` (a `ValueError`): a tick's hook or event is not what it must be; `field` is
//!   the dotted path of the offending field (`tool.name`, `turn.number`, `hook`).
//! - `SessionError`: a saved session could not be read back from the database, or saved.
//! - `LoadError`: a configuration, rule file or database could not be loaded; `file`, `line`
//!   and `field` say where (of the first error), `diagnostics` lists every problem.
//!
//! A rule that fails while a tick runs (a Lua error, a condition that breaks) raises nothing:
//! it is reported in `Outcome.errors` and the other rules run.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use warden_core::{Diagnostic, Severity};

create_exception!(
    warden,
    EventError,
    PyValueError,
    "A tick's hook or event is not what it must be. `field` names the offending field (its dotted path, such as `tool.name`, or `hook`)."
);
create_exception!(
    warden,
    LoadError,
    PyException,
    "Warden could not be built: the configuration, a rule file or the database has an error. `file`, `line` and `field` locate the first error; `diagnostics` lists every problem found."
);

create_exception!(
    warden,
    SessionError,
    PyException,
    "A saved session could not be read back from the database (or the database failed)."
);

/// An `EventError` naming `field`.
pub(crate) fn event_error(py: Python<'_>, field: &str, message: String) -> PyErr {
    let err = EventError::new_err(message);
    // Setting an attribute on a fresh exception instance cannot fail but for memory.
    let _ = err.value(py).setattr("field", field);
    err
}

/// A `LoadError` with `message`, located at the first error of `diagnostics` (or at `file`
/// when there is none).
pub(crate) fn load_error(
    py: Python<'_>,
    message: String,
    diagnostics: &[Diagnostic],
    file: Option<String>,
) -> PyErr {
    let err = LoadError::new_err(message);
    let value = err.value(py);
    let first = diagnostics.iter().find(|d| d.is_error());
    let file = first
        .map(|d| d.path().display().to_string())
        .or(file)
        .map_or_else(
            || py.None(),
            |f| {
                f.into_pyobject(py)
                    .map_or_else(|_| py.None(), |s| s.into_any().unbind())
            },
        );
    let line = first.and_then(Diagnostic::line);
    let field = first.and_then(Diagnostic::field);
    let list: Vec<PyDiagnostic> = diagnostics.iter().cloned().map(PyDiagnostic).collect();
    let _ = value.setattr("file", file);
    let _ = value.setattr("line", line);
    let _ = value.setattr("field", field);
    let _ = value.setattr("diagnostics", list);
    err
}

/// One problem found while loading: a file, a line, a field, what is wrong, and a suggestion.
#[pyclass(frozen, module = "warden", name = "Diagnostic")]
pub struct PyDiagnostic(pub(crate) Diagnostic);

#[pymethods]
impl PyDiagnostic {
    /// `"error"` (the rule or file is not loaded) or `"warning"` (it is).
    #[getter]
    fn severity(&self) -> &'static str {
        match self.0.severity() {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }

    /// The file concerned.
    #[getter]
    fn file(&self) -> String {
        self.0.path().display().to_string()
    }

    /// The line (from 1), when the problem is at a place in the file.
    #[getter]
    fn line(&self) -> Option<usize> {
        self.0.line()
    }

    /// The column (from 1), when the problem is at a place in the file.
    #[getter]
    fn column(&self) -> Option<usize> {
        self.0.location().map(|(_, c)| c)
    }

    /// The field concerned (`rule.priority`, `condition.expression`), when there is one.
    #[getter]
    fn field(&self) -> Option<&str> {
        self.0.field()
    }

    /// What is wrong.
    #[getter]
    fn message(&self) -> &str {
        self.0.message()
    }

    /// How to fix it, when Warden knows.
    #[getter]
    fn help(&self) -> Option<&str> {
        self.0.help()
    }

    /// Whether it stops the rule (or file) from loading.
    #[getter]
    fn is_error(&self) -> bool {
        self.0.is_error()
    }

    /// `path:line:column: error: field: message`, then `help: ...` when there is a suggestion.
    fn __str__(&self) -> String {
        self.0.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<Diagnostic {}>", self.0)
    }
}
