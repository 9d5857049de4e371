//! Warden for Python: the extension module `warden._native`, which the `warden` package
//! (`python/warden`) re-exports. It translates Python to the engine and back, and nothing else:
//! a `Warden` built from the same configuration as the `warden` command, sessions ticked with
//! the trace format's events as dicts, and outcomes as typed objects.
//!
//! ```python
//! import warden
//!
//! w = warden.Warden()                      # the built-in rules
//! session = w.session("conversation-42")
//! outcome = session.tick("on_turn_start", {"turn": {"token_usage": 0.85}})
//! assert outcome.fired == ["token-budget-warning"]
//! print(outcome.inject[0].message)
//! ```
//!
//! Modules, lowest first: `convert` (Python values to JSON and back), `enums` (the string
//! enums of `warden._enums`), `errors` (the exceptions and `Diagnostic`), `outcome` (the
//! outcome's classes), `session` (`Session`, where sessions are opened), `warden` (`Warden`).
//!
//! Invariants: the GIL is released while the engine works (building, ticking); no Python
//! object crosses into the engine; a failing rule is an entry of `Outcome.errors`, never an
//! exception; bad input is an exception naming the field, never a panic.

use pyo3::prelude::*;

mod convert;
mod enums;
mod errors;
mod outcome;
mod session;
mod warden;

/// The native half of the `warden` package; import `warden` instead.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("EventError", py.get_type::<errors::EventError>())?;
    m.add("LoadError", py.get_type::<errors::LoadError>())?;
    m.add("SessionError", py.get_type::<errors::SessionError>())?;
    m.add_class::<warden::PyWarden>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<errors::PyDiagnostic>()?;
    m.add_class::<outcome::PyOutcome>()?;
    m.add_class::<outcome::PyNotification>()?;
    m.add_class::<outcome::PyRuling>()?;
    m.add_class::<outcome::PyProceed>()?;
    m.add_class::<outcome::PyRuleError>()?;
    m.add_class::<outcome::PyHalted>()?;
    m.add_class::<outcome::PyOverridden>()?;
    m.add_class::<outcome::PyEvaluation>()?;
    m.add_class::<outcome::PyModeChange>()?;
    m.add_class::<outcome::PyEnrichment>()?;
    m.add_class::<outcome::PyLogLine>()?;
    m.add_class::<outcome::PyStateWrite>()?;
    m.add_class::<outcome::PyEmittedEvent>()?;
    m.add_class::<outcome::PyDecided>()?;
    m.add_class::<outcome::PyRewrite>()?;
    m.add_class::<outcome::PyEnriched>()?;
    m.add_function(wrap_pyfunction!(session::_rust_ticks, m)?)?;
    m.add_function(wrap_pyfunction!(session::_timed_tick, m)?)?;
    Ok(())
}
