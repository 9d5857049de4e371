//! What a tick returns, as Python objects: `Outcome` and the typed values it holds
//! (`Notification`, `Ruling`, `Proceed`, the effects, errors, halted scripts, the mode change).
//!
//! Every object wraps the engine's own value and builds Python values only when a field is
//! read, so a tick whose outcome is only glanced at costs little.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use warden_core::{Effect, Evaluation, Outcome, Proceed};

use crate::convert::to_py;
use crate::enums;

/// What the supervisor decided at one hook.
#[pyclass(frozen, module = "warden", name = "Outcome")]
pub struct PyOutcome(pub(crate) Outcome);

/// A notification for the agent's context.
#[pyclass(frozen, module = "warden", name = "Notification")]
pub struct PyNotification(pub(crate) warden_core::Notification);

/// The event's one ruling: the decisions and rewrites of the rules that fired, merged.
#[pyclass(frozen, module = "warden", name = "Ruling")]
pub struct PyRuling(warden_core::Ruling);

/// Whether the event may go on, and how: what the host must do after the tick.
#[pyclass(frozen, module = "warden", name = "Proceed")]
pub struct PyProceed {
    kind: &'static str,
    reason: Option<String>,
    input: Option<serde_json::Value>,
}

/// A failure isolated to one rule (or to the event, when `rule` is `None`).
#[pyclass(frozen, module = "warden", name = "RuleError")]
pub struct PyRuleError(warden_core::RuleError);

/// A script or behavior stopped before it finished, and why.
#[pyclass(frozen, module = "warden", name = "Halted")]
pub struct PyHalted(warden_core::Halted);

/// A decision or rewrite that lost to the ruling, and why.
#[pyclass(frozen, module = "warden", name = "Overridden")]
pub struct PyOverridden(warden_core::Overridden);

/// What evaluating one rule came to at this tick.
#[pyclass(frozen, module = "warden", name = "Evaluation")]
pub struct PyEvaluation {
    rule: String,
    result: &'static str,
    reason: Option<String>,
}

/// A change of mode, and the `on_mode_change` tick that ran for it.
#[pyclass(frozen, module = "warden", name = "ModeChange")]
pub struct PyModeChange {
    from: Arc<str>,
    to: Arc<str>,
    outcome: Py<PyOutcome>,
}

/// Knowledge for the agent's system prompt.
#[pyclass(frozen, module = "warden", name = "Enrichment")]
pub struct PyEnrichment(Arc<warden_core::knowledge_pipeline::Enrichment>);

/// `log`: a line a rule wrote to the log.
#[pyclass(frozen, module = "warden", name = "LogLine")]
pub struct PyLogLine(Effect);

/// `set_state`: a value a rule stored in its plugin's state.
#[pyclass(frozen, module = "warden", name = "StateWrite")]
pub struct PyStateWrite(Effect);

/// `emit_event`: an event a rule published on the bus.
#[pyclass(frozen, module = "warden", name = "EmittedEvent")]
pub struct PyEmittedEvent(Effect);

/// `decide`: what one rule decided (merged with the others' into `Outcome.ruling`).
#[pyclass(frozen, module = "warden", name = "Decided")]
pub struct PyDecided(Effect);

/// `rewrite`: the argument paths one rule set (merged into `Outcome.ruling`).
#[pyclass(frozen, module = "warden", name = "Rewrite")]
pub struct PyRewrite(Effect);

/// `enrich_context`: a rule enriched the query with knowledge.
#[pyclass(frozen, module = "warden", name = "Enriched")]
pub struct PyEnriched(Effect);

fn list<'py, T>(py: Python<'py>, items: impl IntoIterator<Item = T>) -> PyResult<Bound<'py, PyList>>
where
    T: IntoPyObject<'py>,
{
    PyList::new(py, items)
}

/// An effect as its Python class.
fn effect<'py>(py: Python<'py>, e: &Effect) -> PyResult<Bound<'py, PyAny>> {
    let e = e.clone();
    Ok(match e {
        Effect::NotifySelf(n) => Bound::new(py, PyNotification(n))?.into_any(),
        Effect::Log { .. } => Bound::new(py, PyLogLine(e))?.into_any(),
        Effect::SetState { .. } => Bound::new(py, PyStateWrite(e))?.into_any(),
        Effect::EmitEvent { .. } => Bound::new(py, PyEmittedEvent(e))?.into_any(),
        Effect::Decide { .. } => Bound::new(py, PyDecided(e))?.into_any(),
        Effect::Rewrite { .. } => Bound::new(py, PyRewrite(e))?.into_any(),
        Effect::EnrichContext { .. } => Bound::new(py, PyEnriched(e))?.into_any(),
    })
}

/// Effects as a Python list of their classes.
fn effect_list<'py>(py: Python<'py>, effects: &[Effect]) -> PyResult<Bound<'py, PyList>> {
    let items = effects
        .iter()
        .map(|e| effect(py, e))
        .collect::<PyResult<Vec<_>>>()?;
    list(py, items)
}

impl PyProceed {
    fn of(p: Proceed<'_>) -> Self {
        let (kind, reason, input) = match p {
            Proceed::Yes => ("yes", None, None),
            Proceed::WithInput(input) => ("with_input", None, Some(input.clone())),
            Proceed::Ask { reason, input } => ("ask", Some(reason), input.cloned()),
            Proceed::No { reason } => ("no", Some(reason), None),
            Proceed::KeepWorking { reason } => ("keep_working", Some(reason), None),
            Proceed::Stop { reason } => ("stop", Some(reason), None),
        };
        PyProceed {
            kind,
            reason: reason.map(str::to_string),
            input,
        }
    }
}

#[pymethods]
impl PyOutcome {
    /// The hook that was handled.
    #[getter]
    fn hook<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enums::hook(py, self.0.hook)
    }

    /// Whether what this tick wrote (plugin state, the execution log, a durable session) was
    /// saved. Its decision and notifications stand either way.
    #[getter]
    fn saved(&self) -> bool {
        self.0.unsaved.is_none()
    }

    /// Why nothing this tick wrote was saved (`the disk is full: ...`), or `None` when it was.
    #[getter]
    fn unsaved(&self) -> Option<&str> {
        self.0.unsaved.as_deref()
    }

    /// The merged decision (`None` when no rule decided, or when rules only rewrote the
    /// call's arguments: see `updated_input`).
    #[getter]
    fn decision<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0
            .ruling
            .as_ref()
            .and_then(|r| r.decision)
            .map(|d| enums::decision(py, d))
            .transpose()
    }

    /// Why the ruling was made, for the agent or the person asked (`None` without a decision).
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.0
            .ruling
            .as_ref()
            .filter(|r| r.decision.is_some())
            .map(|r| &*r.reason)
    }

    /// The whole rewritten arguments, when a rewrite applies: the call runs (or is asked
    /// about) with these instead of the reported ones.
    #[getter]
    fn updated_input<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0
            .ruling
            .as_ref()
            .and_then(|r| r.input.as_ref())
            .map(|v| to_py(py, v))
            .transpose()
    }

    /// The ruling itself (decision, rule, reason, input), or `None`.
    #[getter]
    fn ruling(&self) -> Option<PyRuling> {
        self.0.ruling.clone().map(PyRuling)
    }

    /// What the host must do: `proceed.kind` is a `ProceedKind`; `reason` and `input` go with
    /// it. A tool call runs only on `yes` or `with_input` (or on a person's yes to `ask`).
    #[getter]
    fn proceed(&self) -> PyProceed {
        PyProceed::of(self.0.proceed())
    }

    /// Notifications due now, most urgent first: put these into the agent's context.
    #[getter]
    fn inject<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list(py, self.0.injected().iter().cloned().map(PyNotification))
    }

    /// The notifications due now, written as one block for the agent's context (most urgent
    /// first, each message once; an operator's `[render] template` when set), or `None` when
    /// there is nothing to inject. Every host injects this same text.
    #[getter]
    fn rendered(&self) -> Option<&str> {
        self.0.rendered()
    }

    /// The notifications fired at this hook, whenever they are due.
    #[getter]
    fn notifications<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list(py, self.0.notifications().cloned().map(PyNotification))
    }

    /// Every effect applied, in the order applied: `Notification`, `LogLine`, `StateWrite`,
    /// `EmittedEvent`, `Decided`, `Rewrite`, `Enriched`.
    #[getter]
    fn effects<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        effect_list(py, &self.0.effects)
    }

    /// Failures isolated to a rule (a Lua error, a condition that broke): the other rules ran.
    #[getter]
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list(py, self.0.errors.iter().cloned().map(PyRuleError))
    }

    /// Scripts and behaviors stopped at this tick before they finished.
    #[getter]
    fn halted<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list(py, self.0.halted.iter().cloned().map(PyHalted))
    }

    /// Decisions and rewrites the ruling overrode, and why.
    #[getter]
    fn overridden<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        list(py, self.0.overridden.iter().cloned().map(PyOverridden))
    }

    /// The ids of the rules that fired, in order.
    #[getter]
    fn fired(&self) -> Vec<String> {
        self.0.fired().into_iter().map(str::to_string).collect()
    }

    /// The ids of the rules in shadow that fired, in order: what would have fired had they
    /// been on.
    #[getter]
    fn shadow_fired(&self) -> Vec<String> {
        self.0
            .shadow_fired()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    /// What the rules in shadow rendered (the same kinds as `effects`), none of it applied.
    #[getter]
    fn shadow<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        effect_list(py, &self.0.shadow)
    }

    /// Every rule evaluated and what it came to (all of them in explain mode; otherwise the
    /// rules that could fire).
    #[getter]
    fn evaluations(&self) -> Vec<PyEvaluation> {
        self.0
            .trace()
            .map(|(rule, e)| {
                let (result, reason) = match e {
                    Evaluation::Fired => ("fired", None),
                    Evaluation::NotMatched => ("not_matched", None),
                    Evaluation::Undetermined(r) => ("undetermined", Some(r.clone())),
                    Evaluation::Failed(r) => ("failed", Some(r.clone())),
                    Evaluation::Suppressed(r) => ("suppressed", Some((*r).to_string())),
                    Evaluation::Running => ("running", None),
                    Evaluation::Disabled => ("disabled", None),
                    Evaluation::Inactive(m) => {
                        ("inactive", Some(format!("not active in mode `{m}`")))
                    }
                };
                PyEvaluation {
                    rule: rule.to_string(),
                    result,
                    reason,
                }
            })
            .collect()
    }

    /// The mode this hook ran in (`default` without modes).
    #[getter]
    fn mode(&self) -> &str {
        &self.0.mode
    }

    /// Set when this event changed the mode.
    #[getter]
    fn mode_change(&self, py: Python<'_>) -> PyResult<Option<PyModeChange>> {
        self.0
            .mode_change
            .as_ref()
            .map(|c| {
                Ok(PyModeChange {
                    from: c.from.clone(),
                    to: c.to.clone(),
                    outcome: Py::new(py, PyOutcome((*c.outcome).clone()))?,
                })
            })
            .transpose()
    }

    /// Knowledge for the system prompt, when this tick enriched the query.
    #[getter]
    fn enrichment(&self) -> Option<PyEnrichment> {
        self.0.enrichment.clone().map(PyEnrichment)
    }

    /// Whether nothing fired, failed or was delivered.
    #[getter]
    fn quiet(&self) -> bool {
        self.0.is_quiet()
    }

    /// The lines `warden replay` prints for this outcome as event number `event`: one JSON
    /// text per applied action, the ruling, then one per error.
    fn replay_lines(&self, event: usize) -> Vec<String> {
        String::from_utf8_lossy(&self.replay_text(event))
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The same lines as one UTF-8 text, each ending in a newline (empty when there are none):
    /// `bytes`, ready for a binary file (`sys.stdout.buffer`), with no Python string made per
    /// line. A replay writes this.
    fn replay_output<'py>(&self, py: Python<'py>, event: usize) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.replay_text(event))
    }

    fn __repr__(&self) -> String {
        let o = &self.0;
        let ruling = o
            .ruling
            .as_ref()
            .map_or(String::new(), |r| format!(" ruling={}", r.name()));
        format!(
            "<Outcome {} fired={:?}{ruling} inject={} errors={}>",
            o.hook,
            o.fired(),
            o.injected().len(),
            o.errors.len()
        )
    }
}

impl PyOutcome {
    /// What `warden replay` prints for this outcome as event `event`, written as it writes it
    /// (no JSON value in between).
    fn replay_text(&self, event: usize) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing to memory does not fail.
        let _ = warden_wire::v1::replay::write_outcome_lines(&mut out, event, &self.0);
        out
    }
}

#[pymethods]
impl PyNotification {
    /// Always `"notify_self"`: the action that made it.
    #[getter]
    fn action(&self) -> &'static str {
        "notify_self"
    }

    /// The rule that fired it.
    #[getter]
    fn rule(&self) -> &str {
        &self.0.rule
    }

    /// The rendered message.
    #[getter]
    fn message(&self) -> &str {
        &self.0.message
    }

    /// Its category (`warning`, `hint`...), free text chosen by the rule.
    #[getter]
    fn category(&self) -> &str {
        &self.0.category
    }

    /// How urgent it is.
    #[getter]
    fn priority<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enums::priority(py, self.0.priority)
    }

    /// When it is to be injected.
    #[getter]
    fn deliver_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enums::deliver_at(py, self.0.deliver_at)
    }

    /// The hook it was fired at.
    #[getter]
    fn fired_at<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enums::hook(py, self.0.fired_at)
    }

    fn __repr__(&self) -> String {
        let n = &self.0;
        format!(
            "<Notification {} [{}, {}] {:?}>",
            n.rule,
            n.category,
            n.priority.name(),
            &*n.message
        )
    }
}

#[pymethods]
impl PyRuling {
    /// The decision; `None` when the rules only rewrote the call's arguments.
    #[getter]
    fn decision<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0.decision.map(|d| enums::decision(py, d)).transpose()
    }

    /// The rule that decided (for a rewrite alone, the first rule that rewrote).
    #[getter]
    fn rule(&self) -> &str {
        &self.0.rule
    }

    /// What the agent (or the person asked) is told; empty for a rewrite alone.
    #[getter]
    fn reason(&self) -> &str {
        &self.0.reason
    }

    /// The whole rewritten arguments, when a rewrite applies.
    #[getter]
    fn input<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.0.input.as_ref().map(|v| to_py(py, v)).transpose()
    }

    /// The decision's name, or `"rewrite"` for rewrites alone (as `warden replay` prints).
    #[getter]
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn __repr__(&self) -> String {
        format!(
            "<Ruling {} by {}: {:?}>",
            self.0.name(),
            self.0.rule,
            &*self.0.reason
        )
    }
}

#[pymethods]
impl PyProceed {
    /// What to do: a `ProceedKind`.
    #[getter]
    fn kind<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        enums::proceed(py, self.kind)
    }

    /// Why (for `ask`, `no`, `keep_working` and `stop`).
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The arguments to run the call with (for `with_input`, and `ask` with a rewrite).
    #[getter]
    fn input<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.input.as_ref().map(|v| to_py(py, v)).transpose()
    }

    /// Whether the call may run without asking anyone (`yes` or `with_input`).
    #[getter]
    fn runs(&self) -> bool {
        matches!(self.kind, "yes" | "with_input")
    }

    fn __repr__(&self) -> String {
        match &self.reason {
            Some(r) => format!("<Proceed {}: {r:?}>", self.kind),
            None => format!("<Proceed {}>", self.kind),
        }
    }
}

#[pymethods]
impl PyRuleError {
    /// The rule concerned, or `None` for a problem with the event itself.
    #[getter]
    fn rule(&self) -> Option<&str> {
        self.0.rule.as_deref()
    }

    /// What went wrong.
    #[getter]
    fn error(&self) -> &str {
        &self.0.error
    }

    fn __str__(&self) -> String {
        match &self.0.rule {
            Some(r) => format!("{r}: {}", self.0.error),
            None => self.0.error.clone(),
        }
    }

    fn __repr__(&self) -> String {
        format!("<RuleError {}>", self.__str__())
    }
}

#[pymethods]
impl PyHalted {
    /// The rule whose script or behavior was stopped.
    #[getter]
    fn rule(&self) -> &str {
        &self.0.rule
    }

    /// Why.
    #[getter]
    fn reason(&self) -> &str {
        &self.0.reason
    }

    fn __repr__(&self) -> String {
        format!("<Halted {}: {}>", self.0.rule, self.0.reason)
    }
}

#[pymethods]
impl PyOverridden {
    /// The rule whose decision or rewrite lost.
    #[getter]
    fn rule(&self) -> &str {
        &self.0.rule
    }

    /// The rule that won.
    #[getter]
    fn by(&self) -> &str {
        &self.0.by
    }

    /// What it had decided, in words (`deny`, `rewrite`, `rewrite arguments.limit`).
    #[getter]
    fn what(&self) -> String {
        self.0.what()
    }

    /// Why it lost, in words.
    #[getter]
    fn why(&self) -> String {
        self.0.why()
    }

    fn __repr__(&self) -> String {
        format!(
            "<Overridden {} ({}) by {}: {}>",
            self.0.rule,
            self.0.what(),
            self.0.by,
            self.0.why()
        )
    }
}

#[pymethods]
impl PyEvaluation {
    /// The rule.
    #[getter]
    fn rule(&self) -> &str {
        &self.rule
    }

    /// `fired`, `not_matched`, `undetermined`, `failed`, `suppressed`, `running`, `disabled`
    /// or `inactive`.
    #[getter]
    fn result(&self) -> &'static str {
        self.result
    }

    /// Why, for `undetermined`, `failed`, `suppressed` and `inactive`.
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    fn __repr__(&self) -> String {
        format!("<Evaluation {} {}>", self.rule, self.result)
    }
}

#[pymethods]
impl PyModeChange {
    /// The mode before.
    #[getter(from_mode)]
    fn before(&self) -> &str {
        &self.from
    }

    /// The mode now.
    #[getter(to_mode)]
    fn after(&self) -> &str {
        &self.to
    }

    /// The `on_mode_change` tick that ran first (its notifications are also in the outer
    /// outcome's `inject`).
    #[getter]
    fn outcome(&self, py: Python<'_>) -> Py<PyOutcome> {
        self.outcome.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!("<ModeChange {} -> {}>", self.from, self.to)
    }
}

#[pymethods]
impl PyEnrichment {
    /// The `<reference_material>` section, or `None` when no source went in.
    #[getter]
    fn section(&self) -> Option<&str> {
        self.0.section.as_deref()
    }

    /// The ids of the sources that went in, in order.
    #[getter]
    fn selected(&self) -> Vec<String> {
        self.0
            .selected_ids()
            .into_iter()
            .map(str::to_string)
            .collect()
    }

    /// Tokens of the section.
    #[getter]
    fn tokens_used(&self) -> u64 {
        self.0.tokens_used
    }

    /// The knowledge budget, in tokens.
    #[getter]
    fn budget(&self) -> u64 {
        self.0.budget
    }

    /// `system_prompt` with the section after it, as the model should get it.
    fn integrate(&self, system_prompt: &str) -> String {
        self.0.integrate(system_prompt)
    }

    fn __repr__(&self) -> String {
        format!(
            "<Enrichment {:?} {} tokens>",
            self.0.selected_ids(),
            self.0.tokens_used
        )
    }
}

/// An effect class: the fields every effect shares (the rule, the action's name), then its
/// own.
macro_rules! effect_class {
    ($class:ident { $($own:tt)* }) => {
        #[pymethods]
        impl $class {
            /// The rule that produced it.
            #[getter]
            fn rule(&self) -> &str {
                self.0.rule()
            }

            /// The action's name (`log`, `set_state`, `emit_event`, `decide`, `rewrite`,
            /// `enrich_context`).
            #[getter]
            fn action(&self) -> &'static str {
                self.0.action()
            }

            fn __repr__(&self) -> String {
                format!("<{} {}>", self.0.action(), self.0.rule())
            }

            $($own)*
        }
    };
}

/// The fields of an effect, read from Python by name: `None` when the effect has no such
/// field (which cannot happen for the class that holds it).
fn field<'py>(py: Python<'py>, e: &Effect, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let none = || py.None().into_bound(py);
    Ok(match (e, name) {
        (Effect::Log { level, .. }, "level") => enums::log_level(py, *level)?,
        (Effect::Log { message, .. }, "message") => message.into_pyobject(py)?.into_any(),
        (Effect::SetState { plugin, .. }, "plugin") => (&**plugin).into_pyobject(py)?.into_any(),
        (Effect::SetState { key, .. }, "key") => key.into_pyobject(py)?.into_any(),
        (Effect::SetState { value, .. }, "value") => to_py(py, value)?,
        (Effect::EmitEvent { event_type, .. }, "event_type") => {
            (&**event_type).into_pyobject(py)?.into_any()
        }
        (Effect::EmitEvent { payload, .. }, "payload") => to_py(py, payload)?,
        (Effect::Decide { decision, .. }, "decision") => enums::decision(py, *decision)?,
        (Effect::Decide { reason, .. }, "reason") => (&**reason).into_pyobject(py)?.into_any(),
        (Effect::Rewrite { set, .. }, "set") => {
            let d = PyDict::new(py);
            for (path, value) in set {
                d.set_item(format!("arguments.{}", path.join(".")), to_py(py, value)?)?;
            }
            d.into_any()
        }
        (Effect::EnrichContext { enrichment, .. }, "enrichment") => {
            Bound::new(py, PyEnrichment(enrichment.clone()))?.into_any()
        }
        _ => none(),
    })
}

effect_class!(PyLogLine {
    /// The level: a `LogLevel`.
    #[getter]
    fn level<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "level")
    }

    /// The rendered message.
    #[getter]
    fn message<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "message")
    }
});

effect_class!(PyStateWrite {
    /// The plugin whose state it is.
    #[getter]
    fn plugin<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "plugin")
    }

    /// The key.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "key")
    }

    /// The value stored (any JSON value).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "value")
    }
});

effect_class!(PyEmittedEvent {
    /// The event type.
    #[getter]
    fn event_type<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "event_type")
    }

    /// The rendered payload (any JSON value).
    #[getter]
    fn payload<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "payload")
    }
});

effect_class!(PyDecided {
    /// What the rule decided: a `Decision`.
    #[getter]
    fn decision<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "decision")
    }

    /// The rendered reason.
    #[getter]
    fn reason<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "reason")
    }
});

effect_class!(PyRewrite {
    /// The paths set (`"arguments.limit"`) and their rendered values, in order.
    #[getter]
    fn set<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "set")
    }
});

effect_class!(PyEnriched {
    /// The enrichment: mode, sources, the section.
    #[getter]
    fn enrichment<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        field(py, &self.0, "enrichment")
    }
});
