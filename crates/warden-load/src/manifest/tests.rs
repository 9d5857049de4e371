use super::*;
use serde_json::json;

fn parse(text: &str) -> (Option<Manifest>, Vec<String>) {
    let (m, d) = parse_manifest(SourceFile::new("plugins/p/manifest.toml", text));
    (m, d.iter().map(ToString::to_string).collect())
}

const SEED: &str = r#"# plugins/research-assistant/manifest.toml

[plugin]
id = "research-assistant"
name = "Research Assistant"
version = "1.0.0"
description = "Enhanced research workflow with multi-step guidance"

[capabilities]
requires = ["vault_search", "web_search"]

[rules]
# Rules are loaded from ./rules/*.toml
include = ["rules/*.toml"]

[settings]
# User-configurable settings

[settings.max_sources]
type = "integer"
default = 10
min = 1
max = 50
description = "Maximum sources to gather before synthesizing"

[settings.auto_summarize]
type = "boolean"
default = true
description = "Automatically summarize large result sets"
"#;

#[test]
fn the_data_models_manifest_loads_unchanged() {
    let (m, d) = parse(SEED);
    assert!(d.is_empty(), "{d:#?}");
    let m = m.unwrap();
    assert_eq!(m.id, "research-assistant");
    assert_eq!(m.requires, ["vault_search", "web_search"]);
    assert_eq!(m.include, ["rules/*.toml"]);
    assert_eq!(m.settings.len(), 2);
    let s = &m.settings[0];
    assert_eq!(
        (s.name.as_str(), s.kind, &s.default, s.min, s.max),
        (
            "max_sources",
            SettingKind::Integer,
            &SettingValue::Integer(10),
            Some(1.0),
            Some(50.0)
        )
    );
    assert_eq!(m.settings[1].default, SettingValue::Boolean(true));
}

#[test]
fn values_are_checked_against_type_and_bounds() {
    let (m, _) = parse(SEED);
    let m = m.unwrap();
    let max_sources = &m.settings[0];
    assert_eq!(max_sources.check(&json!(20)), Ok(SettingValue::Integer(20)));
    let e = max_sources.check(&json!(80)).unwrap_err().0;
    assert_eq!(
        e,
        "`max_sources` must be at most 50 (the manifest's max), not 80"
    );
    let e = max_sources.check(&json!(0)).unwrap_err().0;
    assert!(e.contains("at least 1 (the manifest's min)"), "{e}");
    let e = max_sources.check(&json!(2.5)).unwrap_err().0;
    assert!(e.contains("whole number"), "{e}");
    let e = max_sources.check(&json!("ten")).unwrap_err().0;
    assert!(e.contains("integer setting"), "{e}");
    assert_eq!(max_sources.parse_text("12"), Ok(SettingValue::Integer(12)));
    assert!(max_sources.parse_text("12x").is_err());
    let flag = &m.settings[1];
    assert_eq!(flag.parse_text("false"), Ok(SettingValue::Boolean(false)));
    assert!(
        flag.parse_text("yes")
            .unwrap_err()
            .0
            .contains("true or false")
    );
}

#[test]
fn options_bound_string_settings() {
    let (m, d) = parse(
        "[plugin]\nid = \"p\"\n[settings.style]\ntype = \"string\"\ndefault = \"brief\"\noptions = [\"brief\", \"detailed\"]\n",
    );
    assert!(d.is_empty(), "{d:?}");
    let s = &m.unwrap().settings[0];
    assert!(s.check(&json!("detailed")).is_ok());
    let e = s.check(&json!("detaild")).unwrap_err();
    assert!(
        e.0.contains("one of \"brief\", \"detailed\"") && e.0.contains("did you mean \"detailed\""),
        "{e}"
    );
}

#[test]
fn mistakes_name_their_field() {
    let cases: &[(&str, &str)] = &[
        (
            "[plugin]\nname = \"x\"\n",
            "manifest.toml:1:1: error: plugin.id:",
        ),
        ("[plugin]\nid = \"My Plugin\"\n", "not kebab-case"),
        (
            "[plugin]\nid = \"local\"\n",
            "reserved for the rules of plain rule folders",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.style]\ntype = \"string\"\noptions = []\ndefault = \"z\"\n",
            "`options` is empty, so no value would be allowed",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.t]\ntype = \"float\"\ndefault = nan\n",
            "`default` holds `nan`, which JSON (and so Warden) cannot hold",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.t]\ntype = \"integer\"\ndefault = 99999999999999999999\n",
            "`default` holds the integer 99999999999999999999",
        ),
        (
            "[plugin]\nid = \"builtin\"\n",
            "the plugin id `builtin` is reserved for Warden's built-in rules",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.get]\ntype = \"integer\"\ndefault = 1\n",
            "choose another name",
        ),
        (
            "[plugin]\nid = \"p\"\nversoin = \"1\"\n",
            "did you mean `version`?",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"int\"\ndefault = 1\n",
            "unknown setting type `int`",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"integer\"\n",
            "settings.n.default",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"integer\"\ndefault = 99\nmax = 10\n",
            "must be at most 10",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"integer\"\ndefault = 5\nmin = 10\nmax = 1\n",
            "`max` (1) is below `min` (10)",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"boolean\"\ndefault = true\nmin = 0\n",
            "`min` applies to integer and float",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"integer\"\ndefault = 1\noptions = [\"a\"]\n",
            "`options` applies to string",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.max-sources]\ntype = \"integer\"\ndefault = 1\n",
            "such as `max_sources`",
        ),
        (
            "[plugin]\nid = \"p\"\n[settings.n]\ntype = \"integer\"\ndefault = 1\nrange = 3\n",
            "settings.n.range",
        ),
        (
            "[plugin]\nid = \"p\"\n[rules]\ninclude = [\"../x/*.toml\"]\n",
            "leaves the plugin folder",
        ),
        (
            "[plugin]\nid = \"p\"\n[rules]\ninclude = [\"/etc/*.toml\"]\n",
            "is absolute",
        ),
        (
            "[plugin]\nid = \"p\"\n[rules]\ninclude = [\"rules/**/*.toml\"]\n",
            "`**` is not supported",
        ),
        (
            "[plugin]\nid = \"p\"\n[capabilities]\nneeds = [\"x\"]\n",
            "unknown field `needs` in [capabilities]",
        ),
    ];
    for (text, want) in cases {
        let (m, d) = parse(text);
        assert!(m.is_none(), "{text}");
        assert!(
            d.iter().any(|d| d.contains(want)),
            "{text}\nwant {want}\ngot {d:#?}"
        );
    }
}

#[test]
fn globs_match_within_a_segment() {
    assert!(glob_match("*.toml", "a.toml"));
    assert!(glob_match("rule-?.toml", "rule-1.toml"));
    assert!(!glob_match("*.toml", "a.toml.bak"));
    assert!(glob_match("*", ""));
    assert!(!glob_match("a*b", "acb.c"));
    assert!(glob_match("a*b*c", "aXbYbZc"));
}
