//! Names written into the knowledge section: source ids and tags.

/// Checks an id or a tag: letters, digits, `-`, `_`, `.`, at most 64 characters. (They are
/// written into the section's attribution comments, so nothing else may reach it.)
pub(crate) fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("is empty")
    } else if name.len() > 64 {
        Err("is longer than 64 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Err("may only have letters, digits, `-`, `_` and `.`")
    } else {
        Ok(())
    }
}
