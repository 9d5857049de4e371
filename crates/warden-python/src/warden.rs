//! `Warden`: the supervisor, built from the same configuration as the `warden` command
//! (`warden.toml`, or rule and plugin folders given as keyword arguments), shared by every
//! session and every thread.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pyo3::exceptions::{PyFileNotFoundError, PyTypeError, PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use warden_core::{Config, ModeSource, SessionOptions, Warden, WardenBuilder};

use crate::errors::{PyDiagnostic, SessionError, load_error};
use crate::outcome::PyNotification;
use crate::session::{PySession, open};

/// The supervisor. Build it once and share it: it is safe to use from many threads, and every
/// session it opens shares its compiled rules and its store.
#[pyclass(frozen, module = "warden", name = "Warden")]
pub struct PyWarden {
    inner: Warden,
    config: Config,
}

/// What the keyword arguments of `Warden()` and `Warden.from_config()` add to a
/// configuration, as the `warden` command's flags do.
#[derive(Default)]
struct Overrides {
    rules: Vec<PathBuf>,
    plugins: Vec<PathBuf>,
    builtin: Option<bool>,
    capabilities: Vec<String>,
    database: Option<PathBuf>,
    modes: Option<String>,
    log_sample: Option<f64>,
    script_timeout: Option<f64>,
    script_memory: Option<usize>,
    shell_tools: Vec<(String, String)>,
}

/// How the supervisor is built beyond its configuration.
struct BuildOptions {
    strict: bool,
    any_capability: bool,
    history_limit: Option<usize>,
}

/// One path or a list of paths (`str` or `os.PathLike`).
fn paths(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<PathBuf>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    if v.cast::<PyString>().is_ok() || v.hasattr("__fspath__")? {
        return Ok(vec![v.extract::<PathBuf>()?]);
    }
    v.try_iter()
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "`{name}` must be a folder (str or path) or a list of them"
            ))
        })?
        .map(|p| {
            p?.extract::<PathBuf>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "every item of `{name}` must be a folder (str or path)"
                ))
            })
        })
        .collect()
}

/// A name or a list of names.
fn names(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(vec![s.to_str()?.to_string()]);
    }
    v.try_iter()
        .map_err(|_| PyTypeError::new_err(format!("`{name}` must be a str or a list of str")))?
        .map(|p| p?.extract::<String>())
        .collect()
}

/// `shell_tools`: tool names (their `command` field holds the command), or a dict of names to
/// the field that holds it.
fn shell_tools(v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(Vec::new());
    };
    let wrong = || {
        PyTypeError::new_err(
            "`shell_tools` must be a tool name, a list of tool names (their `command` field holds the command), or a dict of tool names to the field that holds it: shell_tools={\"run_shell\": \"cmd\"}",
        )
    };
    let check = |name: String, field: String| -> PyResult<(String, String)> {
        if name.trim().is_empty() || field.trim().is_empty() {
            return Err(PyValueError::new_err(
                "`shell_tools`: a tool's name and its field must not be empty",
            ));
        }
        Ok((name, field))
    };
    if let Ok(d) = v.cast::<pyo3::types::PyDict>() {
        return d
            .iter()
            .map(|(k, f)| {
                let (Ok(k), Ok(f)) = (k.extract::<String>(), f.extract::<String>()) else {
                    return Err(wrong());
                };
                check(k, f)
            })
            .collect();
    }
    names("shell_tools", Some(v))
        .map_err(|_| wrong())?
        .into_iter()
        .map(|n| check(n, "command".into()))
        .collect()
}

impl Overrides {
    /// Applies the overrides to `config`, as the `warden` command applies its flags.
    fn apply(self, config: &mut Config) -> PyResult<()> {
        if let Some(b) = self.builtin {
            config.builtin = b;
        }
        config.rules.extend(self.rules);
        config.plugins.extend(self.plugins);
        config.capabilities.extend(self.capabilities);
        if let Some(db) = self.database {
            config.database = Some(db);
        }
        if let Some(m) = self.modes {
            config.modes = Some(match m.strip_prefix("builtin:") {
                Some(name) => ModeSource::Builtin(name.to_string()),
                None => ModeSource::File(PathBuf::from(m)),
            });
        }
        if let Some(s) = self.log_sample {
            if !(0.0..=1.0).contains(&s) {
                return Err(PyValueError::new_err(format!(
                    "`log_sample` must be a share from 0 to 1 (0.1 records one tick in ten), not {s}"
                )));
            }
            config.log_sample = s;
        }
        if let Some(t) = self.script_timeout {
            if !(t.is_finite() && t > 0.0 && t <= 3600.0) {
                return Err(PyValueError::new_err(format!(
                    "`script_timeout` must be a number of seconds above 0 and at most 3600, not {t}"
                )));
            }
            config.script_timeout = Some(Duration::from_secs_f64(t));
        }
        if let Some(m) = self.script_memory {
            config.script_memory = Some(m);
        }
        for (tool, field) in self.shell_tools {
            config.shell.declare(tool, field);
        }
        Ok(())
    }
}

fn build(py: Python<'_>, config: Config, opts: BuildOptions) -> PyResult<PyWarden> {
    let built = py.detach(|| -> Result<Warden, warden_core::Error> {
        let mut b = WardenBuilder::from_config(&config)?;
        if opts.any_capability {
            b = b.any_capability();
        }
        if let Some(n) = opts.history_limit {
            b = b.history_limit(n);
        }
        b.strict(opts.strict).build()
    });
    let built = built.map_err(|e| {
        let message = e.to_string();
        match e {
            // A path that names nothing is Python's own error, with the path.
            warden_core::Error::Missing { path, .. } => Err(PyFileNotFoundError::new_err((
                ENOENT,
                message,
                path.display().to_string(),
            ))),
            warden_core::Error::Rules(d) => Ok((message, d)),
            _ => Ok((message, Vec::new())),
        }
    });
    match built {
        Ok(inner) => {
            if inner.program().rule_keys().next().is_none() {
                PyErr::warn(
                    py,
                    &py.get_type::<PyUserWarning>(),
                    c"this Warden has no rules: it decides nothing, and every call it is asked about goes on (give rules=, plugins= or builtin=True)",
                    1,
                )?;
            }
            Ok(PyWarden { inner, config })
        }
        Err(Err(not_found)) => Err(not_found),
        Err(Ok((message, diagnostics))) => {
            let file = if diagnostics.is_empty() {
                config.database.as_ref().map(|p| p.display().to_string())
            } else {
                None
            };
            Err(load_error(py, message, &diagnostics, file))
        }
    }
}

/// ENOENT, the errno of a path that names nothing (`FileNotFoundError.errno`).
const ENOENT: i32 = 2;

/// Reads the keyword arguments shared by `Warden()` and `Warden.from_config()`.
#[allow(clippy::too_many_arguments)]
fn overrides(
    rules: Option<&Bound<'_, PyAny>>,
    plugins: Option<&Bound<'_, PyAny>>,
    builtin: Option<bool>,
    capabilities: Option<&Bound<'_, PyAny>>,
    database: Option<PathBuf>,
    modes: Option<String>,
    log_sample: Option<f64>,
    script_timeout: Option<f64>,
    script_memory: Option<usize>,
    shell: Option<&Bound<'_, PyAny>>,
) -> PyResult<Overrides> {
    Ok(Overrides {
        rules: paths("rules", rules)?,
        plugins: paths("plugins", plugins)?,
        builtin,
        capabilities: names("capabilities", capabilities)?,
        database,
        modes,
        log_sample,
        script_timeout,
        script_memory,
        shell_tools: shell_tools(shell)?,
    })
}

#[pymethods]
impl PyWarden {
    /// A supervisor. Without arguments, Warden's built-in rules. `rules` and `plugins` are
    /// folders (one, or a list); given either, the built-in rules are left out unless
    /// `builtin=True`, as with the `warden` command's flags. `database` is the SQLite file for
    /// plugin state, users' choices and the execution log (in memory when absent). `modes` is
    /// a modes file or `"builtin:context-window"`. A folder or modes file that does not exist
    /// raises `FileNotFoundError` naming it; a rule file with an error raises `LoadError`
    /// unless `strict=False` (then such rules are skipped and listed in `diagnostics`). A
    /// Warden with no rules at all warns (`UserWarning`): it would decide nothing.
    #[new]
    #[pyo3(signature = (*, rules = None, plugins = None, builtin = None, capabilities = None,
        database = None, modes = None, strict = true, any_capability = false,
        history_limit = None, log_sample = None, script_timeout = None, script_memory = None,
        shell_tools = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rules: Option<&Bound<'_, PyAny>>,
        plugins: Option<&Bound<'_, PyAny>>,
        builtin: Option<bool>,
        capabilities: Option<&Bound<'_, PyAny>>,
        database: Option<PathBuf>,
        modes: Option<String>,
        strict: bool,
        any_capability: bool,
        history_limit: Option<usize>,
        log_sample: Option<f64>,
        script_timeout: Option<f64>,
        script_memory: Option<usize>,
        shell_tools: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut o = overrides(
            rules,
            plugins,
            builtin,
            capabilities,
            database,
            modes,
            log_sample,
            script_timeout,
            script_memory,
            shell_tools,
        )?;
        let mut config = Config::default();
        if o.builtin.is_none() && !(o.rules.is_empty() && o.plugins.is_empty()) {
            o.builtin = Some(false);
        }
        o.apply(&mut config)?;
        build(
            py,
            config,
            BuildOptions {
                strict,
                any_capability,
                history_limit,
            },
        )
    }

    /// A supervisor from a configuration file (`warden.toml`), read exactly as the `warden`
    /// command reads it (relative paths are taken from the file's folder). The keyword
    /// arguments add to it as the command's flags do. Raises `LoadError` (with `file`, `line`
    /// and `field`) when the file has an error.
    #[staticmethod]
    #[pyo3(signature = (path, *, rules = None, plugins = None, builtin = None,
        capabilities = None, database = None, modes = None, strict = true,
        any_capability = false, history_limit = None, log_sample = None,
        script_timeout = None, script_memory = None, shell_tools = None))]
    #[allow(clippy::too_many_arguments)]
    fn from_config(
        py: Python<'_>,
        path: PathBuf,
        rules: Option<&Bound<'_, PyAny>>,
        plugins: Option<&Bound<'_, PyAny>>,
        builtin: Option<bool>,
        capabilities: Option<&Bound<'_, PyAny>>,
        database: Option<PathBuf>,
        modes: Option<String>,
        strict: bool,
        any_capability: bool,
        history_limit: Option<usize>,
        log_sample: Option<f64>,
        script_timeout: Option<f64>,
        script_memory: Option<usize>,
        shell_tools: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let o = overrides(
            rules,
            plugins,
            builtin,
            capabilities,
            database,
            modes,
            log_sample,
            script_timeout,
            script_memory,
            shell_tools,
        )?;
        let mut config = read_config(py, &path)?;
        o.apply(&mut config)?;
        build(
            py,
            config,
            BuildOptions {
                strict,
                any_capability,
                history_limit,
            },
        )
    }

    /// Opens a session: one agent conversation. `id` names it (generated when absent); `user`
    /// and `project` say whose it is (`default` otherwise; an event's `user` and `project`
    /// change them). `explain=True` evaluates every rule at every tick and records why each
    /// did or did not fire (`Outcome.evaluations`).
    ///
    /// With a `database`, a session with an id is durable: saved after every tick, and
    /// resumed where it stood by any `Warden` on the same file, in this process or another
    /// (waiting Lua scripts included). Raises `SessionError` when a saved session cannot be
    /// read back.
    #[pyo3(signature = (id = None, *, user = None, project = None, explain = false))]
    fn session(
        &self,
        py: Python<'_>,
        id: Option<String>,
        user: Option<String>,
        project: Option<String>,
        explain: bool,
    ) -> PyResult<PySession> {
        let opts = SessionOptions {
            id,
            user,
            project,
            explain,
        };
        let durable = self.config.database.is_some();
        py.detach(|| open(&self.inner, opts, durable))
            .map(PySession::new)
            .map_err(|e| SessionError::new_err(e.to_string()))
    }

    /// Writes notifications (from several ticks, say) as one block for the agent's context,
    /// as `Outcome.rendered` does for one tick; `None` when there are none.
    fn render(&self, notifications: Vec<PyRef<'_, PyNotification>>) -> Option<String> {
        let notes: Vec<warden_core::Notification> =
            notifications.iter().map(|n| n.0.clone()).collect();
        self.inner.render(&notes)
    }

    /// Problems found in the rule files (the rules without problems are loaded), and in the
    /// knowledge sources when enrichment is configured.
    #[getter]
    fn diagnostics(&self) -> Vec<PyDiagnostic> {
        self.inner
            .diagnostics()
            .into_iter()
            .map(PyDiagnostic)
            .collect()
    }

    /// The ids of the rules loaded (`plugin/id` for a plugin's rules), in priority order per
    /// hook.
    #[getter]
    fn rules(&self, py: Python<'_>) -> Vec<String> {
        let user = &self.config.user;
        let project = &self.config.project;
        py.detach(|| {
            self.inner
                .rule_list(user, project)
                .into_iter()
                .map(|r| r.key)
                .collect()
        })
    }

    /// The SQLite database in use, or `None` for an in-memory store.
    #[getter]
    fn database(&self) -> Option<PathBuf> {
        self.config.database.clone()
    }

    fn __repr__(&self) -> String {
        let rules = self.inner.program().rules().count();
        match &self.config.path {
            Some(p) => format!("<Warden {rules} rules from {}>", p.display()),
            None => format!("<Warden {rules} rules>"),
        }
    }
}

/// Reads a configuration file, or raises `LoadError` naming the file, line and field.
fn read_config(py: Python<'_>, path: &Path) -> PyResult<Config> {
    py.detach(|| Config::load(path)).map_err(|diagnostics| {
        let shown: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        load_error(
            py,
            format!("the configuration has errors:\n{}", shown.join("\n")),
            &diagnostics,
            Some(path.display().to_string()),
        )
    })
}
