//! Ids: rules, plugins and modes are named in kebab-case, and rules are shown by a display id
//! that says which plugin they belong to.

use std::sync::Arc;

use warden_input::{At, Doc};

/// The plugin id of Warden's built-in rules.
pub const BUILTIN_PLUGIN: &str = "builtin";

/// The plugin id of rules loaded from a plain rule folder (not a plugin).
pub const LOCAL_PLUGIN: &str = "local";

/// The id used for a user or project nobody named.
pub const DEFAULT_ID: &str = "default";

/// A rule's display id: `id` for built-in and local rules, `plugin/id` for plugin rules.
pub fn rule_key(plugin: &str, id: &str) -> Arc<str> {
    if plugin == BUILTIN_PLUGIN || plugin == LOCAL_PLUGIN {
        Arc::from(id)
    } else {
        Arc::from(format!("{plugin}/{id}"))
    }
}

/// The id `at` holds (of a `what`: "rule", "plugin"), or `None` with an error if it is not
/// kebab-case.
pub fn kebab_id(doc: &mut Doc, at: At<String>, field: &str, what: &str) -> Option<String> {
    if is_kebab(&at.value) {
        return Some(at.value);
    }
    doc.error(
        at.span,
        field,
        format!("{what} id `{}` is not kebab-case", at.value),
        Some(format!(
            "use lowercase letters, digits and single hyphens, such as `{}`",
            to_kebab(&at.value)
        )),
    );
    None
}

/// Whether `id` is kebab-case: lowercase letters, digits and single inner hyphens.
pub fn is_kebab(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('-')
        && !id.ends_with('-')
        && !id.contains("--")
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `id` made kebab-case, for a suggestion (`TokenBudget` -> `token-budget`).
pub fn to_kebab(id: &str) -> String {
    let mut out = String::new();
    for c in id.trim().chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && !out.is_empty() && !out.ends_with('-') {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "my-rule".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kebab_suggestions() {
        assert_eq!(to_kebab("TokenBudget"), "token-budget");
        assert_eq!(to_kebab("token_budget warning"), "token-budget-warning");
        assert!(is_kebab("a-1-b") && !is_kebab("a--b") && !is_kebab("-a") && !is_kebab(""));
    }

    #[test]
    fn display_ids_name_the_plugin_unless_builtin_or_local() {
        assert_eq!(&*rule_key("builtin", "x"), "x");
        assert_eq!(&*rule_key("local", "x"), "x");
        assert_eq!(&*rule_key("research", "x"), "research/x");
    }
}
