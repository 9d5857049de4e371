//! Message templates (minijinja). Compiled and checked once at load: syntax, and every path a
//! template reads is checked against the context schema like a condition's. Rendering is
//! strict: a template that reads a missing value fails, and the rule's effects are discarded.
//!
//! A template sees `context` (with `state`), `event`, `tool` and `result`, and has the filter
//! `percent` (`0.85 | percent` is `85%`) on top of minijinja's built-ins.

use std::sync::Arc;

use minijinja::value::ValueKind;
use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value};
use serde_json::Value as Json;
use warden_expr::{CompileOptions, Compiler, ExprError};

/// Most template instructions one render may take (stops runaway loops).
const FUEL: u64 = 100_000;

/// Names a template may use without them being context roots.
const TEMPLATE_GLOBALS: &[&str] = &[
    "range",
    "dict",
    "namespace",
    "loop",
    "self",
    "super",
    "varargs",
    "kwargs",
    "caller",
];

/// A string that may be a template.
#[derive(Debug, Clone)]
pub(crate) enum Text {
    /// No template syntax: used as is (and shared, not copied).
    Static(Arc<str>),
    /// A compiled template, by name in the environment.
    Template(String),
}

/// A value whose strings may be templates (a set_state value, an event payload).
#[derive(Debug, Clone)]
pub(crate) enum ValueTemplate {
    /// Nothing to render.
    Literal(Json),
    /// A string rendered as a string.
    Text(Text),
    /// `"{{ expr }}"` alone: the expression's value, with its type.
    Typed(String),
    Array(Vec<ValueTemplate>),
    Object(Vec<(String, ValueTemplate)>),
}

/// Why a template did not compile.
pub(crate) enum TemplateError {
    /// Bad syntax; the message, and the 1-based line within the template.
    Syntax(String, Option<usize>),
    /// A path the schema does not have.
    Path(ExprError),
}

/// All the templates of a program, in one environment.
pub(crate) struct Templates {
    env: Environment<'static>,
    next: usize,
}

impl std::fmt::Debug for Templates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Templates")
            .field("count", &self.next)
            .finish()
    }
}

fn percent(v: f64, digits: Option<u32>) -> String {
    let digits = digits.unwrap_or(0).min(6) as usize;
    format!("{:.*}%", digits, v * 100.0)
}

impl Templates {
    pub(crate) fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(64);
        env.add_filter("percent", percent);
        // `context.state.get('key', default)` as the conditions write it.
        env.set_unknown_method_callback(|_state, value, method, args| {
            if method == "get"
                && value.kind() == ValueKind::Map
                && !args.is_empty()
                && args.len() <= 2
            {
                let found = value.get_item(&args[0]).unwrap_or(Value::UNDEFINED);
                return Ok(if found.is_undefined() {
                    args.get(1).cloned().unwrap_or(Value::from(()))
                } else {
                    found
                });
            }
            Err(Error::from(ErrorKind::UnknownMethod))
        });
        Templates { env, next: 0 }
    }

    /// Compiles `src`, checking the paths it reads with `compiler` under `opts`.
    pub(crate) fn text(
        &mut self,
        src: &str,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<Text, TemplateError> {
        if !src.contains("{{") && !src.contains("{%") && !src.contains("{#") {
            return Ok(Text::Static(Arc::from(src)));
        }
        let name = format!("t{}", self.next);
        self.next += 1;
        self.env
            .add_template_owned(name.clone(), src.to_string())
            .map_err(|e| TemplateError::Syntax(describe(&e), e.line()))?;
        let template = self
            .env
            .get_template(&name)
            .map_err(|e| TemplateError::Syntax(describe(&e), e.line()))?;
        let mut paths: Vec<String> = template.undeclared_variables(true).into_iter().collect();
        paths.sort();
        for path in paths {
            let root = path.split('.').next().unwrap_or_default();
            if TEMPLATE_GLOBALS.contains(&root) {
                continue;
            }
            if let Some(helper) = compiler
                .schema()
                .helpers()
                .iter()
                .find(|h| h.name() == root)
            {
                return Err(TemplateError::Syntax(
                    format!(
                        "`{root}` is a condition helper; templates read values directly (it stands for `{}`)",
                        helper.body()
                    ),
                    None,
                ));
            }
            compiler.check(&path, opts).map_err(TemplateError::Path)?;
        }
        Ok(Text::Template(name))
    }

    /// Compiles a value: strings become templates; `"{{ expr }}"` alone keeps the type.
    pub(crate) fn value(
        &mut self,
        v: &Json,
        compiler: &Compiler,
        opts: &CompileOptions<'_>,
    ) -> Result<ValueTemplate, TemplateError> {
        Ok(match v {
            Json::String(s) => {
                if let Some(expr) = lone_expression(s) {
                    // Checked as a template; rendered through `tojson` to keep the type.
                    self.text(s, compiler, opts)?;
                    match self.text(&format!("{{{{ ({expr}) | tojson }}}}"), compiler, opts)? {
                        Text::Template(name) => ValueTemplate::Typed(name),
                        Text::Static(_) => ValueTemplate::Literal(v.clone()),
                    }
                } else {
                    match self.text(s, compiler, opts)? {
                        Text::Static(_) => ValueTemplate::Literal(v.clone()),
                        t => ValueTemplate::Text(t),
                    }
                }
            }
            Json::Array(items) => {
                let items = items
                    .iter()
                    .map(|i| self.value(i, compiler, opts))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.iter().all(|i| matches!(i, ValueTemplate::Literal(_))) {
                    ValueTemplate::Literal(v.clone())
                } else {
                    ValueTemplate::Array(items)
                }
            }
            Json::Object(map) => {
                let fields = map
                    .iter()
                    .map(|(k, v)| Ok((k.clone(), self.value(v, compiler, opts)?)))
                    .collect::<Result<Vec<_>, _>>()?;
                if fields
                    .iter()
                    .all(|(_, f)| matches!(f, ValueTemplate::Literal(_)))
                {
                    ValueTemplate::Literal(v.clone())
                } else {
                    ValueTemplate::Object(fields)
                }
            }
            other => ValueTemplate::Literal(other.clone()),
        })
    }

    /// Renders a text with `values` (built lazily: only templates need them).
    pub(crate) fn render(
        &self,
        text: &Text,
        values: &mut dyn FnMut() -> Value,
    ) -> Result<Arc<str>, String> {
        match text {
            Text::Static(s) => Ok(s.clone()),
            Text::Template(name) => self.render_named(name, values()).map(Arc::from),
        }
    }

    fn render_named(&self, name: &str, values: Value) -> Result<String, String> {
        let template = self.env.get_template(name).map_err(|e| describe(&e))?;
        template.render(values).map_err(|e| describe(&e))
    }

    /// Renders a value template.
    pub(crate) fn render_value(
        &self,
        v: &ValueTemplate,
        values: &mut dyn FnMut() -> Value,
    ) -> Result<Json, String> {
        Ok(match v {
            ValueTemplate::Literal(j) => j.clone(),
            ValueTemplate::Text(t) => Json::String(self.render(t, values)?.to_string()),
            ValueTemplate::Typed(name) => {
                let json = self.render_named(name, values())?;
                serde_json::from_str(&json)
                    .map_err(|e| format!("the value did not render to JSON: {e}"))?
            }
            ValueTemplate::Array(items) => Json::Array(
                items
                    .iter()
                    .map(|i| self.render_value(i, values))
                    .collect::<Result<_, _>>()?,
            ),
            ValueTemplate::Object(fields) => Json::Object(
                fields
                    .iter()
                    .map(|(k, f)| Ok((k.clone(), self.render_value(f, values)?)))
                    .collect::<Result<_, String>>()?,
            ),
        })
    }
}

/// The expression of a string that is exactly one `{{ expr }}`.
fn lone_expression(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.trim_start_matches('-').trim_end_matches('-');
    (!inner.contains("{{") && !inner.contains("}}") && !inner.contains("{%"))
        .then_some(inner.trim())
}

/// An author-facing description of a template error (minijinja's own names the internal
/// template, which means nothing to the author).
fn describe(e: &Error) -> String {
    if e.kind() == ErrorKind::UndefinedError
        && let Some(name) = e.detail().and_then(|d| d.strip_suffix(" is undefined"))
    {
        return format!("the template reads {name}, which is missing");
    }
    let what = match e.kind() {
        ErrorKind::UndefinedError => "the template reads a value that is not there".to_string(),
        ErrorKind::OutOfFuel => format!("the template ran more than {FUEL} steps and was stopped"),
        ErrorKind::SyntaxError => "template syntax error".to_string(),
        ErrorKind::UnknownMethod => "unknown method".to_string(),
        ErrorKind::UnknownFilter => "unknown filter".to_string(),
        other => format!("{other}"),
    };
    match e.detail() {
        Some(d) => format!("{what}: {d}"),
        None => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::schema;

    fn compile(t: &mut Templates, src: &str) -> Result<Text, String> {
        let c = Compiler::new(schema().clone());
        t.text(src, &c, &CompileOptions::default())
            .map_err(|e| match e {
                TemplateError::Syntax(m, line) => format!("syntax: {m} (line {line:?})"),
                TemplateError::Path(e) => format!("path: {e}"),
            })
    }

    #[test]
    fn static_text_is_not_a_template() {
        let mut t = Templates::new();
        assert!(matches!(compile(&mut t, "plain").unwrap(), Text::Static(_)));
    }

    #[test]
    fn the_seed_template_renders() {
        let mut t = Templates::new();
        let text = compile(&mut t, "Token budget at {{ (context.turn.token_usage * 100) | int }}% ({{ context.turn.token_usage | percent }})").unwrap();
        let mut values = || minijinja::context! { context => minijinja::context! { turn => minijinja::context! { token_usage => 0.85 } } };
        assert_eq!(
            &*t.render(&text, &mut values).unwrap(),
            "Token budget at 85% (85%)"
        );
    }

    #[test]
    fn paths_are_checked_at_load() {
        let mut t = Templates::new();
        let err = compile(&mut t, "{{ context.turn.tokn_usage }}").unwrap_err();
        assert!(
            err.contains("did you mean `context.turn.token_usage`"),
            "{err}"
        );
        let err = compile(&mut t, "{{ contxt.turn }}").unwrap_err();
        assert!(err.contains("did you mean `context`"), "{err}");
        let err = compile(&mut t, "{{ unclosed ").unwrap_err();
        assert!(err.starts_with("syntax"), "{err}");
        compile(
            &mut t,
            "{% for x in range(3) %}{{ x }}{% endfor %}{{ result.anything }}",
        )
        .unwrap();
        let err = compile(&mut t, "{{ failure_count('x') }}").unwrap_err();
        assert!(
            err.contains("condition helper") && err.contains("context.history.failures"),
            "{err}"
        );
    }

    #[test]
    fn strict_rendering_and_state_get() {
        let mut t = Templates::new();
        let text = compile(&mut t, "{{ result.count }}").unwrap();
        let err = t
            .render(
                &text,
                &mut || minijinja::context! { result => minijinja::context! {} },
            )
            .unwrap_err();
        assert_eq!(err, "the template reads `result.count`, which is missing");
        let text = compile(
            &mut t,
            "{{ context.state.get('n', 0) + 1 }}/{{ context.state.get('m') }}",
        )
        .unwrap();
        let out = t
            .render(&text, &mut || minijinja::context! { context => minijinja::context! { state => minijinja::context! { m => "x" } } })
            .unwrap();
        assert_eq!(&*out, "1/x");
    }

    #[test]
    fn a_lone_expression_keeps_its_type() {
        let c = Compiler::new(schema().clone());
        let mut t = Templates::new();
        let v = t
            .value(&serde_json::json!({"n": "{{ context.turn.number + 1 }}", "s": "turn {{ context.turn.number }}", "k": 3}), &c, &CompileOptions::default())
            .ok()
            .unwrap();
        let out = t
            .render_value(&v, &mut || minijinja::context! { context => minijinja::context! { turn => minijinja::context! { number => 4 } } })
            .unwrap();
        assert_eq!(out, serde_json::json!({"n": 5, "s": "turn 4", "k": 3}));
    }

    #[test]
    fn runaway_templates_are_stopped() {
        let mut t = Templates::new();
        let text = compile(
            &mut t,
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        let err = t.render(&text, &mut || minijinja::context! {}).unwrap_err();
        assert!(err.contains("stopped") || err.contains("range"), "{err}");
    }
}
