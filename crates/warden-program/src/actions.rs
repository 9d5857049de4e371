//! A rule's actions (and a behavior's action nodes), compiled: templates checked against the
//! context schema and compiled once; scripts found and their syntax checked; every problem a
//! diagnostic at the template's or script's line.

use std::ops::Range;
use std::sync::Arc;

use serde_json::Value as Json;
use warden_expr::{CompileOptions, Compiler, ExprError};
use warden_input::{Diagnostic, SourceFile};
use warden_load::{
    ActionDef, BUILTIN_PLUGIN, Decision, DeliverAt, LogLevel, Priority, RuleDef, Scope,
};

use warden_context::template::{TemplateError, Templates, Text, ValueTemplate};

/// An action, compiled.
pub enum CompiledAction {
    /// `notify_self`: a notification to the agent.
    Notify {
        /// The text, rendered at the tick.
        message: Text,
        /// Groups notifications (`category`).
        category: Arc<str>,
        /// Orders notifications delivered together.
        priority: Priority,
        /// When the agent reads it.
        deliver_at: DeliverAt,
    },
    /// `log`: a line in the supervisor's log.
    Log {
        /// The line, rendered at the tick.
        message: Text,
        /// Its level.
        level: LogLevel,
    },
    /// `set_state`: a write of plugin state.
    SetState {
        /// The key, rendered at the tick.
        key: Text,
        /// The value, rendered at the tick.
        value: ValueTemplate,
        /// Session or global state.
        scope: Scope,
    },
    /// `emit_event`: an event for the host.
    Emit {
        /// The event's type.
        event_type: Arc<str>,
        /// Its payload, rendered at the tick.
        payload: ValueTemplate,
    },
    /// `enrich_context`: a knowledge lookup.
    Enrich {
        /// The query, rendered at the tick (the event's own text when none).
        query: Option<Text>,
    },
    /// `decide`: a ruling on the call or the session.
    Decide {
        /// What it decides.
        decision: Decision,
        /// Why, rendered at the tick.
        reason: Text,
    },
    /// `rewrite`: new values for parts of a tool call's arguments.
    Rewrite {
        /// Paths below `arguments`, each with its value.
        set: Vec<(Vec<String>, ValueTemplate)>,
    },
}

impl CompiledAction {
    /// The action type's name as written in files.
    pub fn type_name(&self) -> &'static str {
        match self {
            CompiledAction::Notify { .. } => "notify_self",
            CompiledAction::Log { .. } => "log",
            CompiledAction::SetState { .. } => "set_state",
            CompiledAction::Emit { .. } => "emit_event",
            CompiledAction::Enrich { .. } => "enrich_context",
            CompiledAction::Decide { .. } => "decide",
            CompiledAction::Rewrite { .. } => "rewrite",
        }
    }
}

/// Compiles the templates of `defs` (a rule's actions, or a behavior node's); problems are
/// reported with `prefix` as the field (`action`, `tree.children[2].on_success`).
pub(crate) fn compile_actions(
    defs: &[ActionDef],
    prefix: &str,
    file: &Arc<SourceFile>,
    compiler: &Compiler,
    opts: &CompileOptions<'_>,
    templates: &Templates,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<CompiledAction> {
    let mut actions = Vec::new();
    for (i, action) in defs.iter().enumerate() {
        let field = |name: &str| {
            if defs.len() == 1 {
                format!("{prefix}.{name}")
            } else {
                format!("{prefix}[{i}].{name}")
            }
        };
        let mut text = |loc: &warden_load::Located| match templates.text(&loc.text, compiler, opts)
        {
            Ok(t) => Some(t),
            Err(e) => {
                diagnostics.push(template_diagnostic(
                    file, &loc.span, &loc.text, &loc.field, e,
                ));
                None
            }
        };
        let compiled = match action {
            ActionDef::NotifySelf {
                message,
                category,
                priority,
                deliver_at,
            } => text(message).map(|message| CompiledAction::Notify {
                message,
                category: Arc::from(category.as_str()),
                priority: *priority,
                deliver_at: *deliver_at,
            }),
            ActionDef::Log { message, level } => text(message).map(|message| CompiledAction::Log {
                message,
                level: *level,
            }),
            ActionDef::SetState {
                key,
                scope,
                value,
                value_span,
            } => {
                let key = text(key);
                let value = value_template(
                    templates,
                    compiler,
                    opts,
                    value,
                    file,
                    value_span,
                    &field("value"),
                    diagnostics,
                );
                key.zip(value).map(|(key, value)| CompiledAction::SetState {
                    key,
                    value,
                    scope: *scope,
                })
            }
            ActionDef::EmitEvent {
                event_type,
                payload,
                payload_span,
            } => value_template(
                templates,
                compiler,
                opts,
                payload,
                file,
                payload_span,
                &field("payload"),
                diagnostics,
            )
            .map(|payload| CompiledAction::Emit {
                event_type: Arc::from(event_type.text.as_str()),
                payload,
            }),
            ActionDef::EnrichContext { query } => match query {
                Some(q) => text(q).map(|t| CompiledAction::Enrich { query: Some(t) }),
                None => Some(CompiledAction::Enrich { query: None }),
            },
            ActionDef::Decide {
                decision, reason, ..
            } => text(reason).map(|reason| CompiledAction::Decide {
                decision: *decision,
                reason,
            }),
            ActionDef::Rewrite { set, .. } => {
                let compiled: Vec<_> = set
                    .iter()
                    .map(|s| {
                        value_template(
                            templates,
                            compiler,
                            opts,
                            &s.value,
                            file,
                            &s.span,
                            &s.field,
                            diagnostics,
                        )
                        .map(|v| (s.path.clone(), v))
                    })
                    .collect();
                compiled
                    .into_iter()
                    .collect::<Option<Vec<_>>>()
                    .map(|set| CompiledAction::Rewrite { set })
            }
        };
        actions.extend(compiled);
    }
    actions
}

/// Finds and checks the script of a rule; problems are reported against the rule file (not
/// found, not allowed) or against the script itself (syntax, at its line).
pub(crate) fn compile_script(
    def: &RuleDef,
    key: u64,
    path: &warden_load::Located,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(warden_lua::Script, Option<std::path::PathBuf>)> {
    let rule_file = (&*def.plugin != BUILTIN_PLUGIN).then(|| def.source.path());
    let found = match warden_load::scripts::find(rule_file, &path.text) {
        Ok(f) => f,
        Err(why) => {
            diagnostics.push(Diagnostic::error(
                &def.source,
                Some(path.span.clone()),
                Some(&path.field),
                why.to_string(),
            ));
            return None;
        }
    };
    if let Err(e) = warden_lua::check_syntax(&path.text, &found.text) {
        let script_file = SourceFile::new(found.path.clone(), found.text.clone());
        let span = e.line.map(|line| {
            let start: usize = found
                .text
                .split_inclusive('\n')
                .take(line.saturating_sub(1))
                .map(str::len)
                .sum();
            let len = found.text[start..]
                .find('\n')
                .unwrap_or(found.text.len() - start);
            start..start + len
        });
        diagnostics.push(
            Diagnostic::error(
                &script_file,
                span,
                Some("script"),
                format!("Lua syntax error: {}", e.message),
            )
            .with_help(format!(
                "used by rule `{}` in {}",
                def.id,
                def.source.path().display()
            )),
        );
        return None;
    }
    // Messages name the script as the rule does (short and the same on every machine).
    Some((
        warden_lua::Script::new(key, &path.text, &found.text),
        found.on_disk.then_some(found.path),
    ))
}

#[allow(clippy::too_many_arguments)]
fn value_template(
    templates: &Templates,
    compiler: &Compiler,
    opts: &CompileOptions<'_>,
    value: &Json,
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    field: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ValueTemplate> {
    match templates.value(value, compiler, opts) {
        Ok(v) => Some(v),
        Err(e) => {
            diagnostics.push(template_diagnostic(file, span, "", field, e));
            None
        }
    }
}

/// Where the text of a string value starts in the file, if it can be mapped exactly (no
/// escapes changed its length).
fn text_start(file: &SourceFile, span: &Range<usize>, text: &str) -> Option<usize> {
    let raw = file.text().get(span.clone())?;
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if let Some(inner) = raw.strip_prefix(quote).and_then(|r| r.strip_suffix(quote)) {
            return (inner == text).then_some(span.start + quote.len());
        }
    }
    None
}

pub(crate) fn expr_diagnostic(
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    text: &str,
    field: &str,
    e: &ExprError,
) -> Diagnostic {
    let at = match text_start(file, span, text) {
        Some(start) => start + e.span().start..start + e.span().end.max(e.span().start),
        None => span.clone(),
    };
    Diagnostic::error(file, Some(at), Some(field), e.message().to_string()).with_help_opt(e.help())
}

fn template_diagnostic(
    file: &Arc<SourceFile>,
    span: &Range<usize>,
    text: &str,
    field: &str,
    e: TemplateError,
) -> Diagnostic {
    match e {
        TemplateError::Path(e) => Diagnostic::error(
            file,
            Some(span.clone()),
            Some(field),
            format!("in the template: {}", e.message()),
        )
        .with_help_opt(e.help()),
        TemplateError::Syntax(message, line) => {
            let at = match (text_start(file, span, text), line) {
                (Some(start), Some(line)) if line > 1 => {
                    let offset: usize = text
                        .split_inclusive('\n')
                        .take(line - 1)
                        .map(str::len)
                        .sum();
                    start + offset..start + offset
                }
                _ => span.clone(),
            };
            Diagnostic::error(file, Some(at), Some(field), message).with_help(
                "templates use minijinja (Jinja2) syntax: {{ value }}, {% if ... %}...{% endif %}",
            )
        }
    }
}
