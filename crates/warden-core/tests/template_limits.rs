//! Template limits: a template deep enough to overflow minijinja's recursion (a long chain of
//! filters, attributes, operators) is refused at load with a diagnostic, before minijinja
//! compiles it. The hostile loads run on a thread with a 2 MiB stack, the size of the
//! hot-reload watcher's and of tokio's workers, so a crash here is the crash the limit prevents.

use std::fs;

use warden_core::{Event, Hook, Warden};

/// What a test looks at in a diagnostic: message, line, field, whether it is an error.
#[derive(Debug)]
struct Diag {
    message: String,
    line: Option<usize>,
    field: Option<String>,
    error: bool,
}

/// A TOML basic string holding `s`.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A rule on `on_turn_start` whose `log` action has `message`.
fn rule_with_message(message: &str) -> String {
    format!(
        "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = {}\n",
        toml_str(message)
    )
}

/// Loads `rule` (a whole rule file) on a thread with a 2 MiB stack, and returns its diagnostics.
fn load(rule: String) -> Vec<Diag> {
    std::thread::Builder::new()
        .name("template-limits".into())
        .stack_size(2 << 20)
        .spawn(move || {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("rule.toml"), rule).unwrap();
            let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
            w.diagnostics()
                .iter()
                .map(|d| Diag {
                    message: d.message().to_string(),
                    line: d.line(),
                    field: d.field().map(str::to_string),
                    error: d.is_error(),
                })
                .collect()
        })
        .unwrap()
        .join()
        .expect("the load thread panicked or overflowed")
}

/// Asserts that `message` is refused with a "too complex" error on `action.message`.
fn assert_too_complex(message: &str) {
    let diags = load(rule_with_message(message));
    let d = diags
        .iter()
        .find(|d| d.error && d.message.contains("too complex"))
        .unwrap_or_else(|| panic!("no `too complex` error: {diags:#?}"));
    assert!(
        d.message.contains("more than 256 tokens") && d.message.contains("{% set %}"),
        "{d:#?}"
    );
    assert_eq!(d.field.as_deref(), Some("action.message"), "{d:#?}");
}

#[test]
fn a_long_filter_chain_is_refused() {
    assert_too_complex(&format!("{{{{ 1{} }}}}", "|e".repeat(5000)));
}

#[test]
fn a_long_attribute_chain_is_refused() {
    assert_too_complex(&format!("{{{{ context{} }}}}", ".a".repeat(5000)));
}

#[test]
fn a_long_sum_is_refused() {
    assert_too_complex(&format!("{{{{ 1{} }}}}", "+1".repeat(10_000)));
}

#[test]
fn a_long_chain_of_nots_is_refused() {
    assert_too_complex(&format!("{{{{ {}true }}}}", "not ".repeat(10_000)));
}

#[test]
fn a_long_concatenation_is_refused() {
    assert_too_complex(&format!(
        "{{{{ context.mode{} }}}}",
        " ~ context.mode".repeat(5000)
    ));
}

#[test]
fn a_long_statement_is_refused() {
    let diags = load(rule_with_message(&format!(
        "{{% set n = 1{} %}}{{{{ n }}}}",
        "+1".repeat(10_000)
    )));
    assert!(
        diags.iter().any(|d| d.error
            && d.message.contains("this `{% %}` tag is too complex")
            && d.field.as_deref() == Some("action.message")),
        "{diags:#?}"
    );
}

#[test]
fn deep_nesting_is_refused() {
    let shapes = [
        // Blocks and calls, within 256 tokens a tag and within minijinja's own guard (150
        // levels), overflow a 2 MiB stack: a call level costs minijinja ~22 KiB in a debug build.
        format!(
            "{}{{{{ {}1{} }}}}{}",
            "{% for i in range(1) %}".repeat(50),
            "f(".repeat(80),
            ")".repeat(80),
            "{% endfor %}".repeat(50)
        ),
        // `elif`s, which minijinja nests.
        format!(
            "{{% if true %}}a{}{{% endif %}}",
            "{% elif true %}b".repeat(5000)
        ),
        // Brackets alone, and blocks alone.
        format!("{{{{ {}1{} }}}}", "[".repeat(100), "]".repeat(100)),
        format!(
            "{}x{}",
            "{% if true %}".repeat(100),
            "{% endif %}".repeat(100)
        ),
        // A block `set` whose filter takes a keyword argument, then `elif`s: the `=` of the
        // argument once made the `set` pass for an assignment, its `endset` closed the `if`,
        // and the `elif`s went uncounted (5000 of them aborted `warden check`).
        format!(
            "{{% if 1 %}}{{% set y | indent(width=2) %}}{{% endset %}}{}{{% endif %}}",
            "{% elif 1 %}".repeat(5000)
        ),
    ];
    for shape in shapes {
        let diags = load(rule_with_message(&shape));
        assert!(
            diags.iter().any(|d| d.error
                && d.message.contains("nests too deeply")
                && d.message.contains("more than 32 levels")),
            "{diags:#?}"
        );
    }
}

#[test]
fn the_deepest_templates_within_the_limits_load() {
    let shapes = [
        // 32 levels of blocks, and a 252-token chain inside them.
        format!(
            "{}{{{{ {}true }}}}{}",
            "{% for i in range(1) %}".repeat(32),
            "not ".repeat(250),
            "{% endfor %}".repeat(32)
        ),
        // 32 levels of brackets, with a chain at each level and inside the last (249 tokens).
        format!(
            "{{{{ {}{}1{} }}}}",
            "range(- ".repeat(32),
            "- ".repeat(120),
            ")".repeat(32)
        ),
        // Half and half.
        format!(
            "{}{{{{ {}{}1{} }}}}{}",
            "{% if true %}".repeat(16),
            "range(- ".repeat(16),
            "- ".repeat(180),
            ")".repeat(16),
            "{% endif %}".repeat(16)
        ),
    ];
    for shape in shapes {
        let diags = load(rule_with_message(&shape));
        assert!(diags.iter().all(|d| !d.error), "{diags:#?}");
    }
}

#[test]
fn a_set_state_value_is_checked_too() {
    let value = format!("{{{{ 1{} }}}}", "|e".repeat(5000));
    let diags = load(format!(
        "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"set_state\"\nkey = \"k\"\nvalue = {}\n",
        toml_str(&value)
    ));
    assert!(
        diags
            .iter()
            .any(|d| d.error && d.message.contains("too complex")),
        "{diags:#?}"
    );
}

#[test]
fn the_error_points_at_the_line_of_the_tag() {
    // The message starts on line 7 of the file; the hostile tag is on its third line.
    let message = format!(
        "first line {{{{ context.mode }}}}\nsecond\nthird {{{{ 1{} }}}}",
        "+1".repeat(1000)
    );
    let rule = format!(
        "[rule]\nid = \"r\"\ntrigger = \"on_turn_start\"\ncondition = \"true\"\n[action]\ntype = \"log\"\nmessage = '''{message}'''\n"
    );
    let diags = load(rule);
    let d = diags
        .iter()
        .find(|d| d.error && d.message.contains("too complex"))
        .unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(d.line, Some(9), "{d:#?}");
    assert_eq!(d.field.as_deref(), Some("action.message"), "{d:#?}");
}

#[test]
fn a_long_ordinary_template_loads_and_renders() {
    // Many tags, a moderately long expression, a few levels of blocks and brackets.
    let mut message = String::new();
    for i in 0..300 {
        message.push_str(&format!(
            "line {i}: {{{{ context.mode | upper }}}} {{% if context.turn.number > {i} %}}later{{% elif context.turn.number == {i} %}}now{{% else %}}earlier{{% endif %}}\n"
        ));
    }
    message.push_str(&format!(
        "{{{{ ((context.turn.number + 1) * 2){} }}}}\n",
        " + 1".repeat(100)
    ));
    message.push_str(
        "{% for i in range(2) %}{% for j in range(2) %}{% if i == j %}{% set k = [[i, j], [j, i]] %}{{ k[0][1] }}{% endif %}{% endfor %}{% endfor %}",
    );
    let diags = load(rule_with_message(&message));
    assert!(diags.iter().all(|d| !d.error), "{diags:#?}");

    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("rule.toml"), rule_with_message(&message)).unwrap();
    let w = Warden::builder().rules_dir(dir.path()).build().unwrap();
    let o = w.session().tick(Hook::OnTurnStart, Event::new());
    assert_eq!(o.fired(), ["r"]);
    let logged = o
        .effects
        .iter()
        .find_map(|e| match e {
            warden_core::Effect::Log { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(logged.starts_with("line 0: "), "{logged}");
    assert!(logged.ends_with("01"), "{logged}");
}

#[test]
fn string_literals_comments_and_raw_blocks_are_not_counted() {
    let bars = "|".repeat(5000);
    let pluses = "+".repeat(5000);
    let brackets = "(".repeat(500);
    let message = format!(
        "{{{{ '{bars}' ~ \"{pluses}\" ~ 'it\\'s {brackets}' }}}}{{# {{{{ 1{} }}}} #}}{{% raw %}}{{{{ 1{} }}}}{{% endraw %}}{{% set s = '{bars}' %}}{{{{ s | length }}}}",
        "|e".repeat(5000),
        "+1".repeat(5000)
    );
    let diags = load(rule_with_message(&message));
    assert!(diags.iter().all(|d| !d.error), "{diags:#?}");
}
