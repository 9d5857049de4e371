//! Warden's built-in files, compiled into the binary from the repository's `rules/`,
//! `behaviors/`, `scripts/` and `modes/` folders, so the built-in rules need no files at run
//! time. The tests keep them identical to the files.

/// The manifest of Warden's built-in rules (their settings), embedded from `rules/`.
pub const BUILTIN_MANIFEST: (&str, &str) = (
    "rules/manifest.toml",
    include_str!("../../../rules/manifest.toml"),
);

/// The built-in rules, embedded from the repository's `rules/` folder.
pub const BUILTIN_RULES: &[(&str, &str)] = &[
    (
        "rules/token-budget-warning.toml",
        include_str!("../../../rules/token-budget-warning.toml"),
    ),
    (
        "rules/iteration-budget-warning.toml",
        include_str!("../../../rules/iteration-budget-warning.toml"),
    ),
    (
        "rules/large-result-summary.toml",
        include_str!("../../../rules/large-result-summary.toml"),
    ),
    (
        "rules/repeated-failure-warning.toml",
        include_str!("../../../rules/repeated-failure-warning.toml"),
    ),
    (
        "behaviors/research-then-synthesize.toml",
        include_str!("../../../behaviors/research-then-synthesize.toml"),
    ),
];

/// Warden's built-in scripts, embedded from the repository's `scripts/` folder.
pub const BUILTIN_SCRIPTS: &[(&str, &str)] = &[(
    "scripts/research-workflow.lua",
    include_str!("../../../scripts/research-workflow.lua"),
)];

/// The built-in mode files, embedded from the repository's `modes/` folder.
pub const BUILTIN_MODES: &[(&str, &str)] = &[
    (
        "context-window",
        include_str!("../../../modes/context-window.toml"),
    ),
    (
        "research-or-coding",
        include_str!("../../../modes/research-or-coding.toml"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::Path;

    use crate::manifest::MANIFEST_FILE;

    #[test]
    fn the_embedded_rules_are_exactly_the_rules_folder() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut on_disk: Vec<String> = ["rules", "behaviors"]
            .iter()
            .flat_map(|d| {
                fs::read_dir(root.join(d))
                    .unwrap()
                    .map(move |e| format!("{d}/{}", e.unwrap().file_name().to_string_lossy()))
            })
            .filter(|n| {
                n.ends_with(".toml") && !n.ends_with(".test.toml") && !n.ends_with(MANIFEST_FILE)
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = BUILTIN_RULES.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "add new built-in rule files to BUILTIN_RULES"
        );
        for (path, text) in BUILTIN_RULES {
            let on_disk = fs::read_to_string(root.join(path)).unwrap();
            assert_eq!(&on_disk, text);
        }
    }

    #[test]
    fn the_embedded_scripts_are_exactly_the_scripts_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts");
        let mut on_disk: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| format!("scripts/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|n| n.ends_with(".lua"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = BUILTIN_SCRIPTS.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            on_disk, embedded,
            "add new built-in scripts to BUILTIN_SCRIPTS"
        );
        for (p, text) in BUILTIN_SCRIPTS {
            assert_eq!(
                fs::read_to_string(dir.join(p.trim_start_matches("scripts/"))).unwrap(),
                *text
            );
        }
    }
}
