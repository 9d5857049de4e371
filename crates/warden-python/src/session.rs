//! `Session`: one agent conversation, ticked at every hook. The tick runs with the GIL
//! released; the session is behind a mutex, so threads (and asyncio's worker threads) that
//! share it take turns.

use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use warden_core::{Event, Hook, Session, SessionOptions, Warden};

use crate::convert::{At, describe, dict_to_map, to_json, to_py};
use crate::errors::event_error;
use crate::outcome::{PyNotification, PyOutcome};

/// Opens a session on `warden`: the one place sessions are opened. With a database
/// (`durable`) and an id, the session is saved after every tick and read back when it was
/// saved before, by this process or another; otherwise it lives as long as this object.
pub(crate) fn open(
    warden: &Warden,
    opts: SessionOptions,
    durable: bool,
) -> Result<Session, warden_core::Error> {
    match opts.id.clone() {
        Some(id) if durable => warden.open_session(&id, opts),
        _ => Ok(warden.session_with(opts)),
    }
}

/// One agent conversation. Tick it at every hook with what just happened; every tick returns
/// an `Outcome`.
#[pyclass(frozen, module = "warden", name = "Session")]
pub struct PySession {
    id: String,
    inner: Mutex<Session>,
}

impl PySession {
    pub(crate) fn new(session: Session) -> Self {
        PySession {
            id: session.id().to_string(),
            inner: Mutex::new(session),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Session> {
        // A tick never panics; were one to, the session's state is still whole.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f`, a quick look at the session or change to it (no tick, no save), with the GIL
    /// held when no other thread has the session (the usual case), and released while waiting
    /// for the one that has it otherwise (a tick, which may run long). Releasing the GIL is not
    /// free: another Python thread waiting for it (in an agent, the framework's own) takes it,
    /// and this one waits until that thread lets it go, tens of microseconds for a read that
    /// takes one.
    fn quick<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Session) -> T + Send) -> T {
        match self.inner.try_lock() {
            Ok(mut session) => f(&mut session),
            Err(std::sync::TryLockError::Poisoned(p)) => f(&mut p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => py.detach(|| f(&mut self.lock())),
        }
    }
}

/// Reads the hook's name.
pub(crate) fn read_hook(py: Python<'_>, hook: &str) -> PyResult<Hook> {
    match Hook::from_str(hook) {
        Ok(h) if h.is_reported() => Ok(h),
        Ok(h) => Err(event_error(
            py,
            "hook",
            format!("`{h}` is Warden's own hook: an agent loop does not report it"),
        )),
        Err(e) => Err(event_error(py, "hook", e.to_string())),
    }
}

/// Reads an event: a dict in the trace format (or `None`, an empty event).
pub(crate) fn read_event(py: Python<'_>, event: Option<&Bound<'_, PyAny>>) -> PyResult<Event> {
    let Some(event) = event.filter(|e| !e.is_none()) else {
        return Ok(Event::new());
    };
    let Ok(dict) = event.cast::<PyDict>() else {
        let kind = describe(event);
        return Err(event_error(
            py,
            "",
            format!(
                "an event must be a dict such as {{\"tool\": {{\"name\": \"web_search\", \"arguments\": {{}}}}}}, not {kind}"
            ),
        ));
    };
    let map = dict_to_map(dict, &At::Root, 0).map_err(|e| event_error(py, &e.field, e.message))?;
    warden_wire::v1::read_event(map).map_err(|e| event_error(py, &e.field, e.message))
}

/// Reads a trace line: its hook and its event, or the field that is wrong and why.
fn read_line(text: &[u8]) -> Result<(Hook, Arc<Event>), (String, String)> {
    // An ordinary line is read straight into its event; anything else the checked way below,
    // which names what is wrong.
    if let Some((hook, event)) = warden_wire::v1::line::parse_ordinary_line(text)
        && hook.is_reported()
    {
        return Ok((hook, event));
    }
    let value =
        warden_wire::v1::line::read_json_value(text).map_err(|e| (String::new(), e.to_string()))?;
    let serde_json::Value::Object(mut map) = value else {
        return Err((String::new(), "each event must be a JSON object".into()));
    };
    let hook = match map.remove("hook") {
        Some(serde_json::Value::String(h)) => match Hook::from_str(&h) {
            Ok(h) if h.is_reported() => h,
            Ok(h) => {
                return Err((
                    "hook".into(),
                    format!("`{h}` is Warden's own hook: an agent loop does not report it"),
                ));
            }
            Err(e) => return Err(("hook".into(), e.to_string())),
        },
        Some(_) => {
            return Err((
                "hook".into(),
                "`hook` must be a string such as \"on_turn_start\"".into(),
            ));
        }
        None => return Err(("hook".into(), "the line has no `hook`".into())),
    };
    warden_wire::v1::read_event(map)
        .map(|event| (hook, Arc::new(event)))
        .map_err(|e| (e.field, e.message))
}

/// Warns (`UserWarning`) of a tool given a `command` that is not declared a shell: once per
/// tool, at its first call.
fn warn_undeclared_shell(py: Python<'_>, warning: Option<String>) -> PyResult<()> {
    let Some(warning) = warning else {
        return Ok(());
    };
    let message = std::ffi::CString::new(warning.replace('\0', " "))
        .unwrap_or_else(|_| c"a tool given a `command` is not declared a shell".into());
    PyErr::warn(
        py,
        &py.get_type::<pyo3::exceptions::PyUserWarning>(),
        &message,
        2,
    )
}

#[pymethods]
impl PySession {
    /// Handles one hook: `hook` is its name (`"on_tool_call"`, or a `Hook`), `event` what
    /// happened, as a dict in the trace format (`{"tool": {"name": ..., "arguments": ...}}`).
    ///
    /// Raises `EventError` (a `ValueError`) naming the field when the hook or the event is
    /// not what it must be. A rule that fails (a Lua error included) raises nothing: it is in
    /// `Outcome.errors`, and the other rules ran. The GIL is released while the tick runs.
    #[pyo3(signature = (hook, event = None))]
    fn tick(
        &self,
        py: Python<'_>,
        hook: &str,
        event: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyOutcome> {
        let hook = read_hook(py, hook)?;
        let event = read_event(py, event)?;
        let (outcome, warning) = py.detach(|| {
            let mut session = self.lock();
            let warning = session.undeclared_shell_tool(hook, &event);
            (session.tick(hook, event), warning)
        });
        warn_undeclared_shell(py, warning)?;
        Ok(PyOutcome(outcome))
    }

    /// Handles one line of a session trace: JSON text (`str` or `bytes`) holding the `hook`
    /// and the event's fields, as `warden replay` reads it. The JSON is read by the engine, so
    /// a host that has the event as text (from a file, a socket, another process) does not
    /// build a dict for it. Raises `EventError` naming the field when the line is not an
    /// event.
    fn tick_json(&self, py: Python<'_>, line: &Bound<'_, PyAny>) -> PyResult<PyOutcome> {
        let text: &[u8] = if let Ok(s) = line.cast::<PyString>() {
            s.to_str()?.as_bytes()
        } else if let Ok(b) = line.cast::<PyBytes>() {
            b.as_bytes()
        } else {
            return Err(event_error(
                py,
                "",
                format!("a trace line must be str or bytes, not {}", describe(line)),
            ));
        };
        let ticked = py.detach(|| {
            read_line(text).map(|(hook, event)| {
                let mut session = self.lock();
                let warning = session.undeclared_shell_tool(hook, &event);
                (session.tick_shared(hook, event), warning)
            })
        });
        let (outcome, warning) =
            ticked.map_err(|(field, message)| event_error(py, &field, message))?;
        warn_undeclared_shell(py, warning)?;
        Ok(PyOutcome(outcome))
    }

    /// `tick` for asyncio: awaitable, it runs the tick on a worker thread
    /// (`asyncio.to_thread`), so the event loop goes on meanwhile. Await each tick of a
    /// session before the next: ticks are applied in the order they reach the session.
    #[pyo3(signature = (hook, event = None))]
    fn atick<'py>(
        slf: &Bound<'py, Self>,
        hook: &Bound<'py, PyAny>,
        event: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let to_thread = py.import("asyncio")?.getattr("to_thread")?;
        to_thread.call1((slf.getattr("tick")?, hook, event))
    }

    /// The session id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// Whether `on_session_end` was handled (later ticks report an error in the outcome).
    #[getter]
    fn ended(&self, py: Python<'_>) -> bool {
        self.quick(py, |s| s.is_ended())
    }

    /// Notifications waiting for a later delivery point (`turn_start`, `turn_end`).
    #[getter]
    fn pending<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let pending = self.quick(py, |s| s.pending().to_vec());
        PyList::new(py, pending.into_iter().map(PyNotification))
    }

    /// What Warden knows about the session: turn values, user, project, history, counts, as
    /// the context API names them.
    #[getter]
    fn facts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let facts = py.detach(|| serde_json::to_value(self.lock().facts()));
        let facts = facts.map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        to_py(py, &facts)
    }

    /// What the host keeps with the session (an agent adapter's own memory of it, such as the
    /// calls it is waiting on): a dict, saved with the session; rules do not see it.
    #[getter]
    fn host_data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let data = self.quick(py, |s| s.host_data().clone());
        to_py(py, &serde_json::Value::Object(data))
    }

    /// Sets `key` of the host's data to `value` (JSON-like; `None` removes the key). A
    /// durable session is saved now with it, unless `save=False` (then it is saved with the
    /// next tick), so a process that reads the session after this one finds it. Raises
    /// `EventError` when `value` is not JSON-like, `SessionError` when the save fails (the
    /// value stays set in this copy and is saved with the next tick that commits).
    #[pyo3(signature = (key, value, save = true))]
    fn set_host_data(
        &self,
        py: Python<'_>,
        key: &str,
        value: Option<&Bound<'_, PyAny>>,
        save: bool,
    ) -> PyResult<()> {
        let value = match value.filter(|v| !v.is_none()) {
            Some(v) => Some(
                to_json(v, &At::Key(&At::Root, key), 0)
                    .map_err(|e| event_error(py, &e.field, e.message))?,
            ),
            None => None,
        };
        let set = |session: &mut Session| match value {
            Some(v) => session.host_data_mut().insert(key.to_string(), v),
            None => session.host_data_mut().remove(key),
        };
        // A save writes to the database: with the GIL released. Without one, a quick change.
        let saved = if save {
            py.detach(|| {
                let mut session = self.lock();
                set(&mut session);
                session.save()
            })
        } else {
            self.quick(py, |session| {
                set(session);
                Ok(())
            })
        };
        saved.map_err(|e| crate::errors::SessionError::new_err(e.to_string()))
    }

    /// The memory of the session's Lua state, in bytes; `None` while no script has run.
    #[getter]
    fn script_memory(&self, py: Python<'_>) -> Option<usize> {
        self.quick(py, |s| s.script_memory())
    }

    fn __repr__(&self) -> String {
        format!("<Session {:?}>", self.id)
    }
}

/// For the agent benchmark (`python/bench/agent.py`): `Session.tick`, the same steps, timed:
/// the outcome, and the nanoseconds spent reading the event (the dict into the engine's
/// event), in the engine (the session's lock taken and the tick, with the GIL released), and
/// releasing and taking back the GIL around it (waiting for another thread that took it).
#[pyfunction]
#[pyo3(signature = (session, hook, event = None))]
pub(crate) fn _timed_tick(
    py: Python<'_>,
    session: &PySession,
    hook: &str,
    event: Option<&Bound<'_, PyAny>>,
) -> PyResult<(PyOutcome, u64, u64, u64)> {
    let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let start = Instant::now();
    let hook = read_hook(py, hook)?;
    let event = read_event(py, event)?;
    let read = start.elapsed();
    let before = Instant::now();
    let (outcome, warning, engine) = py.detach(|| {
        let start = Instant::now();
        let mut s = session.lock();
        let warning = s.undeclared_shell_tool(hook, &event);
        let outcome = s.tick(hook, event);
        (outcome, warning, start.elapsed())
    });
    let detached = before.elapsed();
    warn_undeclared_shell(py, warning)?;
    Ok((
        PyOutcome(outcome),
        nanos(read),
        nanos(engine),
        nanos(detached.saturating_sub(engine)),
    ))
}

/// For the benchmark (`python/bench/tick.py`): ticks `session` `n` times with the same hook
/// and event from Rust, without Python in the loop, and returns the nanoseconds per tick. It
/// measures in the same process, on the same session, what a tick costs without the binding.
#[pyfunction]
pub(crate) fn _rust_ticks(
    py: Python<'_>,
    session: &PySession,
    hook: &str,
    event: Option<&Bound<'_, PyAny>>,
    n: u32,
) -> PyResult<f64> {
    let hook = read_hook(py, hook)?;
    let event = read_event(py, event)?;
    let n = n.max(1);
    Ok(py.detach(|| {
        let mut s = session.lock();
        let mut sink = 0usize;
        let start = Instant::now();
        for _ in 0..n {
            sink += s.tick(hook, event.clone()).effects.len();
        }
        let elapsed = start.elapsed().as_nanos() as f64;
        std::hint::black_box(sink);
        elapsed / f64::from(n)
    }))
}
