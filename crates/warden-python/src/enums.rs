//! The string enums of `warden._enums` (`Hook`, `Decision`, `Priority`...), their members
//! looked up once and handed out by index, so an outcome's named values cost a reference count,
//! not a call.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use warden_core::{Decision, DeliverAt, Hook, LogLevel, Priority};

/// The members of each enum, in the order of the Rust names (`Hook::NAMES`...).
struct Members {
    hook: Vec<Py<PyAny>>,
    decision: Vec<Py<PyAny>>,
    priority: Vec<Py<PyAny>>,
    deliver_at: Vec<Py<PyAny>>,
    log_level: Vec<Py<PyAny>>,
    proceed: Vec<Py<PyAny>>,
}

static MEMBERS: PyOnceLock<Members> = PyOnceLock::new();

/// The names of `ProceedKind`, in the order of [`Proceed`](crate::outcome) kinds.
pub(crate) const PROCEED_NAMES: &[&str] =
    &["yes", "with_input", "ask", "no", "keep_working", "stop"];

fn load(py: Python<'_>) -> PyResult<Members> {
    let module = py.import("warden._enums")?;
    let members = |class: &str, names: &[&str]| -> PyResult<Vec<Py<PyAny>>> {
        let cls = module.getattr(class)?;
        names
            .iter()
            .map(|n| cls.call1((*n,)).map(Bound::unbind))
            .collect()
    };
    Ok(Members {
        hook: members("Hook", Hook::NAMES)?,
        decision: members("Decision", Decision::NAMES)?,
        priority: members("Priority", Priority::NAMES)?,
        deliver_at: members("DeliverAt", DeliverAt::NAMES)?,
        log_level: members("LogLevel", LogLevel::NAMES)?,
        proceed: members("ProceedKind", PROCEED_NAMES)?,
    })
}

fn pick<'py>(
    py: Python<'py>,
    get: impl Fn(&Members) -> &Vec<Py<PyAny>>,
    names: &[&str],
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let members = MEMBERS.get_or_try_init(py, || load(py))?;
    let i = names.iter().position(|n| *n == name).unwrap_or(0);
    Ok(get(members)[i].bind(py).clone())
}

/// `warden.Hook` member for `hook`.
pub(crate) fn hook(py: Python<'_>, hook: Hook) -> PyResult<Bound<'_, PyAny>> {
    let members = MEMBERS.get_or_try_init(py, || load(py))?;
    Ok(members.hook[hook.index()].bind(py).clone())
}

/// `warden.Decision` member for `d`.
pub(crate) fn decision(py: Python<'_>, d: Decision) -> PyResult<Bound<'_, PyAny>> {
    pick(py, |m| &m.decision, Decision::NAMES, d.name())
}

/// `warden.Priority` member for `p`.
pub(crate) fn priority(py: Python<'_>, p: Priority) -> PyResult<Bound<'_, PyAny>> {
    pick(py, |m| &m.priority, Priority::NAMES, p.name())
}

/// `warden.DeliverAt` member for `d`.
pub(crate) fn deliver_at(py: Python<'_>, d: DeliverAt) -> PyResult<Bound<'_, PyAny>> {
    pick(py, |m| &m.deliver_at, DeliverAt::NAMES, d.name())
}

/// `warden.LogLevel` member for `l`.
pub(crate) fn log_level(py: Python<'_>, l: LogLevel) -> PyResult<Bound<'_, PyAny>> {
    pick(py, |m| &m.log_level, LogLevel::NAMES, l.name())
}

/// `warden.ProceedKind` member named `name` (one of [`PROCEED_NAMES`]).
pub(crate) fn proceed<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    pick(py, |m| &m.proceed, PROCEED_NAMES, name)
}
