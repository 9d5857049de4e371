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

/// A plugin that ships with Warden, compiled into the binary from a plugin folder of the
/// repository: it is named `builtin:NAME` wherever a plugins folder is (`plugins =
/// ["builtin:guardrails"]`), and its files are named `builtin:NAME/...` in messages.
#[derive(Debug)]
pub struct EmbeddedPlugin {
    /// Its name after `builtin:`.
    pub name: &'static str,
    /// Its `manifest.toml`.
    pub manifest: &'static str,
    /// Its rule files (and rule tests, `*.test.toml`), by their path in the plugin folder.
    pub files: &'static [(&'static str, &'static str)],
    /// Its scripts, by the path its rules name them with.
    pub scripts: &'static [(&'static str, &'static str)],
}

impl EmbeddedPlugin {
    /// How one of its files is named in messages: `builtin:guardrails/rules/x.toml`.
    pub fn file_name(&self, path: &str) -> String {
        format!("{BUILTIN_PREFIX}{}/{path}", self.name)
    }
}

/// What names a plugin that ships with Warden instead of a folder: `builtin:guardrails`.
pub const BUILTIN_PREFIX: &str = "builtin:";

/// The plugins that ship with Warden (`builtin:NAME`).
pub const BUILTIN_PLUGINS: &[EmbeddedPlugin] = &[EmbeddedPlugin {
    name: "guardrails",
    manifest: include_str!("../../../examples/plugins/guardrails/manifest.toml"),
    files: &[
        (
            "rules/ask-unseen-shell.toml",
            include_str!("../../../examples/plugins/guardrails/rules/ask-unseen-shell.toml"),
        ),
        (
            "rules/ask-write-outside-project.toml",
            include_str!(
                "../../../examples/plugins/guardrails/rules/ask-write-outside-project.toml"
            ),
        ),
        (
            "rules/clamp-search-limit.toml",
            include_str!("../../../examples/plugins/guardrails/rules/clamp-search-limit.toml"),
        ),
        (
            "rules/deny-destructive-shell.toml",
            include_str!("../../../examples/plugins/guardrails/rules/deny-destructive-shell.toml"),
        ),
        (
            "rules/guardrails.test.toml",
            include_str!("../../../examples/plugins/guardrails/rules/guardrails.test.toml"),
        ),
        (
            "rules/keep-working-while-tests-fail.toml",
            include_str!(
                "../../../examples/plugins/guardrails/rules/keep-working-while-tests-fail.toml"
            ),
        ),
        (
            "rules/protect-warden-files-in-shell-patches.toml",
            include_str!(
                "../../../examples/plugins/guardrails/rules/protect-warden-files-in-shell-patches.toml"
            ),
        ),
        (
            "rules/protect-warden-files.toml",
            include_str!("../../../examples/plugins/guardrails/rules/protect-warden-files.toml"),
        ),
        (
            "rules/record-test-failure.toml",
            include_str!("../../../examples/plugins/guardrails/rules/record-test-failure.toml"),
        ),
        (
            "rules/record-test-success.toml",
            include_str!("../../../examples/plugins/guardrails/rules/record-test-success.toml"),
        ),
        (
            "rules/reset-denials-on-query.toml",
            include_str!("../../../examples/plugins/guardrails/rules/reset-denials-on-query.toml"),
        ),
        (
            "rules/reset-denials.toml",
            include_str!("../../../examples/plugins/guardrails/rules/reset-denials.toml"),
        ),
        (
            "rules/stop-after-denials.toml",
            include_str!("../../../examples/plugins/guardrails/rules/stop-after-denials.toml"),
        ),
    ],
    scripts: &[
        (
            "scripts/guard.lua",
            include_str!("../../../examples/plugins/guardrails/scripts/guard.lua"),
        ),
        (
            "scripts/warden-files.lua",
            include_str!("../../../examples/plugins/guardrails/scripts/warden-files.lua"),
        ),
    ],
}];

/// The plugin that ships with Warden named by `spec` (`builtin:guardrails`), when `spec` names
/// one that way; `Err` with the names there are when it names none.
pub fn builtin_plugin(spec: &str) -> Option<Result<&'static EmbeddedPlugin, String>> {
    let name = spec.strip_prefix(BUILTIN_PREFIX)?;
    Some(
        BUILTIN_PLUGINS
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                let names: Vec<String> = BUILTIN_PLUGINS
                    .iter()
                    .map(|p| format!("{BUILTIN_PREFIX}{}", p.name))
                    .collect();
                format!(
                    "Warden ships no plugin `{spec}`; it ships {}",
                    names.join(", ")
                )
            }),
    )
}

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

    #[test]
    fn the_embedded_plugins_are_exactly_their_folders() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/plugins");
        for plugin in BUILTIN_PLUGINS {
            let dir = root.join(plugin.name);
            assert_eq!(
                fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap(),
                plugin.manifest
            );
            for (sub, table) in [("rules", plugin.files), ("scripts", plugin.scripts)] {
                let mut on_disk: Vec<String> = fs::read_dir(dir.join(sub))
                    .unwrap()
                    .map(|e| format!("{sub}/{}", e.unwrap().file_name().to_string_lossy()))
                    .collect();
                on_disk.sort();
                let embedded: Vec<&str> = table.iter().map(|(p, _)| *p).collect();
                assert_eq!(
                    on_disk, embedded,
                    "add the files of {} to BUILTIN_PLUGINS, in order",
                    plugin.name
                );
                for (p, text) in table {
                    assert_eq!(&fs::read_to_string(dir.join(p)).unwrap(), text, "{p}");
                }
            }
        }
    }
}
