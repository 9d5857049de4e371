//! "Did you mean ...?" for names an author mistyped.

/// The closest candidate to `name`, if one is close enough to be a likely typo. Case does not
/// count (`SEQUENCE` is a typo of `sequence`).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let name = &name.to_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, &c.to_lowercase()), c))
        .filter(|(d, c)| {
            *d <= (name.len().max(c.len()) / 3).max(2)
                || (name.len() >= 3 && (c.starts_with(name) || c.ends_with(name)))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn typos_and_case_find_the_name_meant_and_strangers_find_none() {
        let names = ["sequence", "selector", "priority", "wait_for"];
        assert_eq!(closest("sequense", names), Some("sequence"));
        assert_eq!(closest("SEQUENCE", names), Some("sequence"));
        assert_eq!(closest("Priorty", names), Some("priority"));
        assert_eq!(closest("wait", names), Some("wait_for"));
        assert_eq!(closest("banana", names), None);
    }
}
