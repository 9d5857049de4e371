//! "Did you mean ...?" for names an author mistyped.

/// The closest candidate to `name`, if one is close enough to be a likely typo.
pub(crate) fn closest<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, c)| {
            *d <= (name.len().max(c.len()) / 3).max(2)
                || (name.len() >= 3 && (c.starts_with(name) || c.ends_with(name)))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}
