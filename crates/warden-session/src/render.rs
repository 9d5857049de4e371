//! The notifications due at a hook written as one block for the agent's context, the same for
//! every host (the Rust API, `replay --render`, Claude Code, the service, Python): most urgent
//! first, each message once, in few tokens. Operators can write their own template
//! (`[render] template` in `warden.toml`); it sees `notifications`, each with `message`,
//! `category`, `priority` and `rule`.
//!
//! Warden's own rendering, for two notifications:
//!
//! ```text
//! [warden]
//! - HIGH warning: Token budget at 85%. Consider wrapping up or summarizing.
//! - vault_search returned 9 results. Summarize the key findings before going on.
//! ```

use warden_context::notification::{Notification, once_each, plain, plain_block};

/// How notifications are written into the agent's context.
#[derive(Clone)]
pub struct Renderer {
    /// An operator's template; Warden's own rendering when absent.
    template: Option<minijinja::Environment<'static>>,
}

impl std::fmt::Debug for Renderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Renderer")
            .field("custom", &self.template.is_some())
            .finish()
    }
}

/// The name of an operator's template, in its error messages.
const TEMPLATE: &str = "[render] template";

impl Renderer {
    /// Warden's own rendering, or `template` (a minijinja template); an error says what is
    /// wrong with the template.
    pub fn new(template: Option<&str>) -> Result<Renderer, String> {
        let Some(text) = template else {
            return Ok(Renderer { template: None });
        };
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_fuel(Some(100_000));
        env.add_template_owned(TEMPLATE, text.to_string())
            .map_err(|e| format!("{TEMPLATE}: {e}"))?;
        Ok(Renderer {
            template: Some(env),
        })
    }

    /// Whether an operator's template writes the block (else Warden's own, [`plain_block`]).
    pub(crate) fn is_custom(&self) -> bool {
        self.template.is_some()
    }

    /// The block for `notifications` (most urgent first; a message a rule gave twice is
    /// written once), or `None` when there is nothing to say. An operator's template that
    /// fails falls back to Warden's own rendering, and the error is returned beside it.
    pub fn render<'a>(
        &self,
        notifications: impl IntoIterator<Item = &'a Notification>,
    ) -> (Option<String>, Option<String>) {
        let Some(env) = &self.template else {
            return (plain_block(notifications), None);
        };
        let notes = once_each(notifications);
        if notes.is_empty() {
            return (None, None);
        }
        let rendered = env.get_template(TEMPLATE).and_then(|t| {
            t.render(minijinja::context! {
                notifications => notes
                    .iter()
                    .map(|n| minijinja::context! {
                        message => &*n.message,
                        category => &*n.category,
                        priority => n.priority.name(),
                        rule => &*n.rule,
                    })
                    .collect::<Vec<_>>(),
            })
        });
        match rendered {
            Ok(text) if text.trim().is_empty() => (None, None),
            Ok(text) => (Some(text), None),
            Err(e) => (Some(plain(&notes)), Some(format!("{TEMPLATE}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use warden_load::{DeliverAt, Hook, Priority};

    use super::*;

    fn note(rule: &str, message: &str, category: &str, priority: Priority) -> Notification {
        Notification {
            rule: Arc::from(rule),
            message: Arc::from(message),
            category: Arc::from(category),
            priority,
            deliver_at: DeliverAt::Immediate,
            fired_at: Hook::OnTurnStart,
        }
    }

    #[test]
    fn most_urgent_first_each_message_once_in_few_words() {
        let r = Renderer::new(None).unwrap();
        let (text, error) = r.render(&[
            note("a", "search returned 9 results", "hint", Priority::Normal),
            note("b", "Token budget at 85%", "warning", Priority::High),
            note("a", "search returned 9 results", "hint", Priority::Normal),
            note("c", "plain", "info", Priority::Low),
        ]);
        assert_eq!(error, None);
        assert_eq!(
            text.as_deref(),
            Some(
                "[warden]\n- HIGH warning: Token budget at 85%\n- hint: search returned 9 results\n- plain"
            )
        );
        assert_eq!(r.render(&[]), (None, None));
    }

    #[test]
    fn an_operators_template_is_used_and_its_failure_falls_back() {
        let r = Renderer::new(Some(
            "{% for n in notifications %}<{{ n.priority }}> {{ n.message }}\n{% endfor %}",
        ))
        .unwrap();
        let notes = [note("a", "hello", "info", Priority::Critical)];
        assert_eq!(r.render(&notes).0.as_deref(), Some("<critical> hello\n"));
        let broken = Renderer::new(Some("{{ notifications[0].nope }}")).unwrap();
        let (text, error) = broken.render(&notes);
        assert_eq!(text.as_deref(), Some("[warden]\n- CRITICAL hello"));
        assert!(error.unwrap().contains("[render] template"));
        assert!(Renderer::new(Some("{% for %}")).is_err());
    }
}
