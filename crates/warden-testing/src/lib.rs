//! Rule tests: test cases written as data next to the rules (`*.test.toml`), run by
//! `warden test` like a test runner.
//!
//! ```toml
//! [[test]]
//! name = "warns above the threshold"
//! events = [
//!   { hook = "on_turn_start", turn = { token_usage = 0.85 } },
//! ]
//! fires = ["token-budget-warning"]
//! messages = ["Token budget at 85%. Consider wrapping up or summarizing."]
//!
//! [[test]]
//! name = "a user's own threshold is used"
//! settings = { "builtin.token_budget_threshold" = 0.9 }
//! events = [{ hook = "on_turn_start", turn = { token_usage = 0.85 } }]
//! not_fires = ["token-budget-warning"]
//! ```
//!
//! Each case runs in a session of its own, on a fresh in-memory store, through the events in
//! order (the same JSON shape as a session trace line), or through the events a recorded Claude
//! Code transcript makes (`transcript = "session.jsonl"`, see [`transcript`]). `fires`, `not_fires`, `messages` and
//! `errors` check the last event; `[[test.expect]]` tables with an `event` index check
//! others. A tick with a rule error fails the case unless it expects that error.

#![warn(missing_docs)]

mod transcript;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use toml::de::DeValue;
use warden_store::{StateScope, StateWrite};

use warden_core::{Effect, Event, Hook, Outcome, SessionOptions, Warden};
use warden_input::{At, Diagnostic, Doc, SourceFile, Table, closest, to_json};
use warden_load::DEFAULT_ID;

/// The suffix of rule test files.
pub const TEST_SUFFIX: &str = ".test.toml";

/// The tests of Warden's built-in rules, embedded from `rules/`.
pub const BUILTIN_TESTS: &[(&str, &str)] = &[(
    "rules/builtin.test.toml",
    include_str!("../../../rules/builtin.test.toml"),
)];

/// The keys of a `[[test]]` table.
pub const TEST_FIELDS: &[&str] = &[
    "name",
    "events",
    "transcript",
    "settings",
    "disabled",
    "state",
    "session_state",
    "fires",
    "not_fires",
    "messages",
    "errors",
    "decision",
    "reason",
    "input",
    "expect",
];

const EXPECT_FIELDS: &[&str] = &[
    "event",
    "fires",
    "not_fires",
    "messages",
    "errors",
    "decision",
    "reason",
    "input",
];

/// What `decision` may expect: a decision, `rewrite` (the arguments only), or `none`.
const DECISION_WORDS: &[&str] = &[
    "allow", "ask", "deny", "continue", "stop", "rewrite", "none",
];

/// The index of "the last event" in a case whose events are known only when it runs (a
/// transcript's).
const LAST: usize = usize::MAX;

/// What a case expects of one event's outcome.
#[derive(Debug, Clone, Default)]
struct Expectation {
    /// The event (from 0), or [`LAST`].
    event: usize,
    fires: Vec<String>,
    not_fires: Vec<String>,
    messages: Vec<String>,
    /// Substrings of the rule errors the event must report (none expected when empty).
    errors: Vec<String>,
    /// The ruling's word (`deny`, `rewrite`, `none`...).
    decision: Option<String>,
    /// The ruling's reason, exactly.
    reason: Option<String>,
    /// The rewritten arguments, whole.
    input: Option<Json>,
}

/// One test case, read.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    events: Vec<(Hook, Arc<Event>)>,
    /// A Claude Code transcript whose events the case runs through instead of `events`.
    transcript: Option<PathBuf>,
    settings: Vec<(String, Json)>,
    disabled: Vec<String>,
    state: Vec<(String, String, Json)>,
    /// The session's own state before the first event (plugin, key, value).
    session_state: Vec<(String, String, Json)>,
    expect: Vec<Expectation>,
}

/// The result of one case.
#[derive(Debug, Clone)]
pub struct CaseReport {
    /// The case's name.
    pub name: String,
    /// Whether every expectation held.
    pub passed: bool,
    /// What did not hold, one entry per failed expectation (with what happened instead).
    pub failures: Vec<String>,
}

/// The results of one test file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file.
    pub file: PathBuf,
    /// Its cases, in order.
    pub cases: Vec<CaseReport>,
}

/// The results of a test run.
#[derive(Debug, Clone, Default)]
pub struct TestReport {
    /// Per file.
    pub files: Vec<FileReport>,
    /// Problems in the test files themselves (a file with errors runs no case).
    pub diagnostics: Vec<Diagnostic>,
}

impl TestReport {
    /// How many cases passed.
    pub fn passed(&self) -> usize {
        self.cases().filter(|c| c.passed).count()
    }

    /// How many cases failed.
    pub fn failed(&self) -> usize {
        self.cases().filter(|c| !c.passed).count()
    }

    /// Whether every case passed and every test file was readable.
    pub fn ok(&self) -> bool {
        self.failed() == 0 && !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    fn cases(&self) -> impl Iterator<Item = &CaseReport> {
        self.files.iter().flat_map(|f| f.cases.iter())
    }
}

/// Finds the test files of rule and plugin folders: `*.test.toml` in each folder and up to two
/// levels below it (a plugin's `rules/`, a plugin of a folder of plugins). Sorted by path.
/// Entries that cannot be test files are left out; [`discover_test_files`] says why.
pub fn find_test_files(folders: &[PathBuf]) -> Vec<PathBuf> {
    discover_test_files(folders).0
}

/// Finds the test files of rule and plugin folders as [`find_test_files`] does, and reports
/// what is named like a test file but cannot be one: a pipe, a socket or a device (never
/// opened, so finding them never waits), or a link that leads nowhere or out of the folder
/// (a link to a test file inside the folder is found).
pub fn discover_test_files(folders: &[PathBuf]) -> (Vec<PathBuf>, Vec<Diagnostic>) {
    struct Walk<'a> {
        root: Option<PathBuf>,
        files: &'a mut Vec<PathBuf>,
        diagnostics: &'a mut Vec<Diagnostic>,
    }
    fn walk(dir: &Path, depth: usize, w: &mut Walk<'_>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if depth > 0 {
                    walk(&path, depth - 1, w);
                }
                continue;
            }
            if !name.ends_with(TEST_SUFFIX) {
                continue;
            }
            if kind.is_file() {
                w.files.push(path);
                continue;
            }
            let problem = if kind.is_symlink() {
                let followed = std::fs::metadata(&path)
                    .and_then(|meta| Ok((meta, std::fs::canonicalize(&path)?)));
                match followed {
                    Ok((meta, _)) if meta.is_dir() => continue,
                    Ok((meta, real)) if meta.is_file() => match &w.root {
                        Some(root) if !real.starts_with(root) => format!(
                            "a link to {}, outside the folder; test files must live in the folder",
                            real.display()
                        ),
                        _ => {
                            w.files.push(path);
                            continue;
                        }
                    },
                    Ok((meta, _)) => warden_input::not_regular(&meta).to_string(),
                    Err(e) => format!("a link that cannot be followed: {e}"),
                }
            } else {
                match std::fs::symlink_metadata(&path) {
                    Ok(meta) => warden_input::not_regular(&meta).to_string(),
                    Err(e) => format!("cannot read: {e}"),
                }
            };
            w.diagnostics.push(
                Diagnostic::io(&path, format!("{problem}, so its tests were not run")).with_help(
                    "a rule test file must be a regular file in the folder it is found in",
                ),
            );
        }
    }
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for f in folders {
        let mut w = Walk {
            root: std::fs::canonicalize(f).ok(),
            files: &mut files,
            diagnostics: &mut diagnostics,
        };
        walk(f, 2, &mut w);
    }
    files.sort();
    files.dedup();
    diagnostics.sort_by(|a, b| a.path().cmp(b.path()));
    diagnostics.dedup_by(|a, b| a.path() == b.path());
    (files, diagnostics)
}

/// The largest rule test file Warden reads (as for rule files).
pub const MAX_TEST_FILE_BYTES: u64 = warden_input::FileKind::RULES.limit;

/// Rule test files: read as rule files are.
const TEST_FILES: warden_input::FileKind = warden_input::FileKind {
    plural: "test files",
    folder: "the folder",
    limit: MAX_TEST_FILE_BYTES,
};

/// Reads a rule test file with the checks rule files get: it must be a regular file (a named
/// pipe is refused without being opened, so this never waits for a writer), of at most
/// [`MAX_TEST_FILE_BYTES`], in UTF-8. The error names the file.
pub fn read_test_file(path: &Path) -> Result<String, Box<Diagnostic>> {
    warden_input::read_text(path, None, &TEST_FILES).map_err(|message| {
        Box::new(Diagnostic::io(
            path,
            format!("cannot use this test file: {message}"),
        ))
    })
}

/// Reads test files with [`read_test_file`], for [`run_tests`]: those that could be read, and
/// a diagnostic for each of the others.
pub fn read_test_files(paths: &[PathBuf]) -> (Vec<(PathBuf, String)>, Vec<Diagnostic>) {
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for path in paths {
        match read_test_file(path) {
            Ok(text) => files.push((path.clone(), text)),
            Err(d) => diagnostics.push(*d),
        }
    }
    (files, diagnostics)
}

/// Runs the cases of `files` (path and text). `make` builds the Warden under test; it is
/// called once per file, and must use a fresh store (cases use their own user ids, so their
/// state and settings do not meet).
pub fn run_tests(
    files: &[(PathBuf, String)],
    make: &dyn Fn() -> Result<Warden, String>,
) -> TestReport {
    let mut report = TestReport::default();
    for (path, text) in files {
        let file = SourceFile::new(path, text.as_str());
        let warden = match make() {
            Ok(w) => w,
            Err(e) => {
                report.diagnostics.push(Diagnostic::io(path, e));
                continue;
            }
        };
        let keys: Vec<String> = warden.program().rule_keys().map(str::to_string).collect();
        let (cases, diagnostics) = parse_cases(file, &keys);
        let broken = diagnostics.iter().any(Diagnostic::is_error);
        report.diagnostics.extend(diagnostics);
        if broken {
            continue;
        }
        let cases = cases
            .iter()
            .enumerate()
            .map(|(i, case)| run_case(&warden, i, case))
            .collect();
        report.files.push(FileReport {
            file: path.clone(),
            cases,
        });
    }
    report
}

fn run_case(warden: &Warden, index: usize, case: &Case) -> CaseReport {
    let user = format!("warden-test-{index}");
    let mut failures = Vec::new();
    for (key, value) in &case.settings {
        if let Err(e) = warden.set_setting(&user, None, key, value) {
            failures.push(format!("setting `{key}`: {e}"));
        }
    }
    for rule in &case.disabled {
        if let Err(e) = warden.set_rule_enabled(&user, rule, false) {
            failures.push(format!("disabling `{rule}`: {e}"));
        }
    }
    if !case.state.is_empty() {
        let writes = vec![
            case.state
                .iter()
                .map(|(plugin, key, value)| {
                    StateWrite::set(
                        StateScope::new(user.as_str(), DEFAULT_ID, plugin.as_str()),
                        key.as_str(),
                        value.clone(),
                    )
                })
                .collect(),
        ];
        if let Err(e) = warden.store().apply_writes(&writes) {
            failures.push(format!("presetting state: {e}"));
        }
    }
    if failures.is_empty() {
        let mut session = warden.session_with(SessionOptions {
            id: Some(format!("{user}-session")),
            user: Some(user.clone()),
            ..SessionOptions::default()
        });
        for (plugin, key, value) in &case.session_state {
            session.set_session_state(plugin, key, value.clone());
        }
        match &case.transcript {
            Some(path) => {
                transcript::run(warden, session, &user, path, &case.expect, &mut failures);
            }
            None => {
                for (i, (hook, event)) in case.events.iter().enumerate() {
                    let outcome = session.tick_shared(*hook, Arc::clone(event));
                    let expectations: Vec<&Expectation> =
                        case.expect.iter().filter(|e| e.event == i).collect();
                    check(i, &outcome, &expectations, &mut failures);
                }
            }
        }
    }
    CaseReport {
        name: case.name.clone(),
        passed: failures.is_empty(),
        failures,
    }
}

pub(crate) fn check(
    event: usize,
    outcome: &Outcome,
    expected: &[&Expectation],
    failures: &mut Vec<String>,
) {
    let at = format!("event {event} ({})", outcome.hook);
    let fired = outcome.fired();
    let fired_list = if fired.is_empty() {
        "no rule fired".to_string()
    } else {
        format!("fired: {}", fired.join(", "))
    };
    let messages: Vec<&str> = outcome
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(&*n.message),
            _ => None,
        })
        .collect();
    let errors: Vec<String> = outcome
        .errors
        .iter()
        .map(|e| match &e.rule {
            Some(r) => format!("{r}: {}", e.error),
            None => e.error.clone(),
        })
        .collect();
    let mut errors_expected = false;
    for x in expected {
        for rule in &x.fires {
            if !fired.contains(&rule.as_str()) {
                failures.push(format!("{at}: expected `{rule}` to fire ({fired_list})"));
            }
        }
        for rule in &x.not_fires {
            if fired.contains(&rule.as_str()) {
                failures.push(format!("{at}: expected `{rule}` not to fire, but it fired"));
            }
        }
        for m in &x.messages {
            if !messages.contains(&m.as_str()) {
                let mut diff = format!(
                    "{at}: no notification reads exactly the expected one\n  expected: {m}"
                );
                if messages.is_empty() {
                    diff.push_str("\n  actual:   (no notification was sent)");
                }
                for got in &messages {
                    diff.push_str(&format!("\n  actual:   {got}"));
                }
                failures.push(diff);
            }
        }
        for want in &x.errors {
            errors_expected = true;
            if !errors.iter().any(|e| e.contains(want.as_str())) {
                failures.push(format!(
                    "{at}: expected an error containing {want:?}; errors: {}",
                    if errors.is_empty() {
                        "none".to_string()
                    } else {
                        errors.join("; ")
                    }
                ));
            }
        }
    }
    let ruling = outcome.ruling.as_ref();
    let decided = ruling.map_or("none", |r| r.name());
    for x in expected {
        if let Some(want) = &x.decision
            && want != decided
        {
            let by = ruling
                .map(|r| format!(" by `{}`", r.rule))
                .unwrap_or_default();
            failures.push(format!(
                "{at}: expected the decision `{want}`, got `{decided}`{by}"
            ));
        }
        if let Some(want) = &x.reason {
            let got = ruling.map_or("", |r| &*r.reason);
            if want != got {
                failures.push(format!(
                    "{at}: the decision's reason differs\n  expected: {want}\n  actual:   {got}"
                ));
            }
        }
        if let Some(want) = &x.input {
            match ruling.and_then(|r| r.input.as_ref()) {
                Some(got) if got == want => {}
                Some(got) => failures.push(format!(
                    "{at}: the rewritten arguments differ\n  expected: {want}\n  actual:   {got}"
                )),
                None => failures.push(format!(
                    "{at}: expected the arguments rewritten to {want}, but they were not rewritten"
                )),
            }
        }
    }
    if !errors_expected {
        for e in &errors {
            failures.push(format!("{at}: {e}"));
        }
    }
}

fn parse_cases(file: Arc<SourceFile>, keys: &[String]) -> (Vec<Case>, Vec<Diagnostic>) {
    let mut doc = Doc::new(file.clone());
    let mut cases = Vec::new();
    if let Some(root) = doc.parse(file.text()) {
        let root = root.get_ref();
        let mut top = Table::new(root, "", 0..0);
        match top.raw("test").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Array(items), _)) => {
                for (i, item) in items.iter().enumerate() {
                    let field = format!("test[{i}]");
                    match item.get_ref() {
                        DeValue::Table(t) => {
                            if let Some(c) = read_case(&mut doc, t, &field, item.span(), keys) {
                                cases.push(c);
                            }
                        }
                        _ => doc.error(
                            item.span(),
                            &field,
                            "each test is a table: write [[test]]",
                            None,
                        ),
                    }
                }
            }
            Some((_, span)) => doc.error(span, "test", "write each case as a [[test]] table", None),
            None => doc.error(
                0..0,
                "test",
                "this test file has no [[test]] cases",
                Some("start a case with [[test]], a `name` and `events`".into()),
            ),
        }
        top.finish(&mut doc, &["test"]);
    }
    (cases, doc.diagnostics)
}

fn read_case(
    doc: &mut Doc,
    table: &toml::de::DeTable<'_>,
    field: &str,
    span: std::ops::Range<usize>,
    keys: &[String],
) -> Option<Case> {
    let mut t = Table::new(table, field, span.clone());
    let name = match t.string(doc, "name") {
        Some(at) => at.value,
        None => {
            if !t.has("name") {
                doc.error(
                    span.clone(),
                    &t.field("name"),
                    "the test has no `name`",
                    Some("add `name = \"what it checks\"`".into()),
                );
            }
            return None;
        }
    };
    let mut events = Vec::new();
    let read = transcript::read_path(doc, &mut t, &name);
    let transcript = read.clone().ok().flatten();
    match t.raw("events").map(|v| (v.get_ref(), v.span())) {
        // Said already, on the field.
        None if read.is_err() => {}
        Some((_, s)) if transcript.is_some() => doc.error(
            s,
            &t.field("events"),
            "a test takes its events from `events` or from `transcript`, not both",
            Some("keep one of them".into()),
        ),
        None if transcript.is_some() => {}
        Some((DeValue::Array(items), _)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                match warden_wire::v1::line::parse_value(i, to_json(item.get_ref())) {
                    Ok(e) => events.push((e.hook, e.event)),
                    Err(e) => doc.error(
                        item.span(),
                        &format!("{field}.events[{i}]"),
                        e.message,
                        Some("an event is a table like a trace line: { hook = \"on_turn_start\", turn = { token_usage = 0.85 } }".into()),
                    ),
                }
            }
        }
        Some((_, s)) => doc.error(
            s,
            &t.field("events"),
            "`events` must be a non-empty array of events",
            None,
        ),
        None => doc.error(
            span.clone(),
            &t.field("events"),
            format!("test `{name}` has no `events`"),
            Some(
                "add `events = [{ hook = \"on_turn_start\", turn = { token_usage = 0.85 } }]`, or `transcript = \"session.jsonl\"` for a recorded Claude Code session"
                    .into(),
            ),
        ),
    }
    let mut settings = Vec::new();
    if let Some(s) = t.table(doc, "settings") {
        for (k, v) in s.entries() {
            settings.push((k.value.to_string(), to_json(v.get_ref())));
        }
    }
    let disabled = rule_list(doc, &mut t, "disabled", keys);
    let state = preset_state(doc, &mut t, field, "state");
    let session_state = preset_state(doc, &mut t, field, "session_state");
    let last = if transcript.is_some() {
        LAST
    } else {
        events.len().saturating_sub(1)
    };
    let mut expect = vec![read_expectation(doc, &mut t, last, keys)];
    if let Some(raw) = t.raw("expect") {
        match raw.get_ref() {
            DeValue::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let f = format!("{field}.expect[{i}]");
                    let DeValue::Table(x) = item.get_ref() else {
                        doc.error(
                            item.span(),
                            &f,
                            "write each expectation as [[test.expect]]",
                            None,
                        );
                        continue;
                    };
                    let mut xt = Table::new(x, f.clone(), item.span());
                    let event = match xt.integer(doc, "event") {
                        Some(At { value, span }) => match usize::try_from(value) {
                            // A transcript's events are counted when the case runs.
                            Ok(n) if transcript.is_some() || n < events.len().max(1) => n,
                            _ => {
                                doc.error(span, &format!("{f}.event"), format!("there is no event {value}: the test has {} (numbered from 0)", events.len()), None);
                                continue;
                            }
                        },
                        None => {
                            doc.error(
                                item.span(),
                                &format!("{f}.event"),
                                "say which event this checks: `event = 0` is the first",
                                None,
                            );
                            continue;
                        }
                    };
                    let x = read_expectation(doc, &mut xt, event, keys);
                    xt.finish(doc, EXPECT_FIELDS);
                    expect.push(x);
                }
            }
            _ => doc.error(
                raw.span(),
                &t.field("expect"),
                "write each expectation as [[test.expect]]",
                None,
            ),
        }
    }
    t.finish(doc, TEST_FIELDS);
    Some(Case {
        name,
        events,
        transcript,
        settings,
        disabled,
        state,
        session_state,
        expect,
    })
}

/// State to set before a case's first event (`state` or `session_state`), per plugin: `(plugin,
/// key, value)`.
fn preset_state(
    doc: &mut Doc,
    t: &mut Table<'_>,
    field: &str,
    key: &'static str,
) -> Vec<(String, String, Json)> {
    let mut state = Vec::new();
    if let Some(s) = t.table(doc, key) {
        for (plugin, v) in s.entries() {
            match v.get_ref() {
                DeValue::Table(kv) => {
                    for (k, val) in kv.iter() {
                        state.push((
                            plugin.value.to_string(),
                            k.get_ref().to_string(),
                            to_json(val.get_ref()),
                        ));
                    }
                }
                _ => doc.error(
                    v.span(),
                    &format!("{field}.{key}.{}", plugin.value),
                    format!("{key} is given per plugin: `{key} = {{ my-plugin = {{ key = 1 }} }}`"),
                    None,
                ),
            }
        }
    }
    state
}

/// What `t` (a `[[test]]`, or one of its `[[test.expect]]`) expects of event `event`.
fn read_expectation(
    doc: &mut Doc,
    t: &mut Table<'_>,
    event: usize,
    keys: &[String],
) -> Expectation {
    Expectation {
        event,
        fires: rule_list(doc, t, "fires", keys),
        not_fires: rule_list(doc, t, "not_fires", keys),
        messages: t
            .strings(doc, "messages")
            .map(|a| a.value)
            .unwrap_or_default(),
        errors: t
            .strings(doc, "errors")
            .map(|a| a.value)
            .unwrap_or_default(),
        decision: t.string(doc, "decision").and_then(|at| {
            if DECISION_WORDS.contains(&at.value.as_str()) {
                return Some(at.value);
            }
            let help = closest(&at.value, DECISION_WORDS.iter().copied())
                .map(|c| format!("did you mean `{c}`?"))
                .unwrap_or_else(|| format!("expect one of {}", DECISION_WORDS.join(", ")));
            doc.error(
                at.span,
                &t.field("decision"),
                format!("`{}` is not a decision", at.value),
                Some(help),
            );
            None
        }),
        reason: t.string(doc, "reason").map(|a| a.value),
        input: t.json(doc, "input").map(|a| a.value),
    }
}

/// A list of rule ids, each checked against the loaded rules.
fn rule_list<'a>(doc: &mut Doc, t: &mut Table<'a>, key: &'a str, keys: &[String]) -> Vec<String> {
    let Some(at) = t.strings(doc, key) else {
        return Vec::new();
    };
    for rule in &at.value {
        if !keys.iter().any(|k| k == rule) {
            let in_plugin = format!("/{rule}");
            let help = keys
                .iter()
                .find(|k| k.ends_with(&in_plugin))
                .map(|k| format!("did you mean `{k}`? a plugin's rules are named `plugin/rule`"))
                .or_else(|| {
                    closest(rule, keys.iter().map(String::as_str))
                        .map(|c| format!("did you mean `{c}`?"))
                })
                .unwrap_or_else(|| not_loaded_help(rule));
            doc.error(
                at.span.clone(),
                &t.field(key),
                format!("no rule `{rule}` is loaded"),
                Some(help),
            );
        }
    }
    at.value
}

/// What to do about a rule a test names that is not loaded, and resembles none that is.
fn not_loaded_help(rule: &str) -> String {
    match rule.split_once('/') {
        Some((plugin, _)) => format!(
            "is the plugin `{plugin}` loaded? pass `--plugins DIR` for its folder of plugins, or `--rules DIR` for the plugin's own folder"
        ),
        None => "is its rule folder loaded? pass `--rules DIR` (a plugin's rules are named `plugin/rule`)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Result<Warden, String> {
        Warden::builder()
            .builtin_rules()
            .build()
            .map_err(|e| e.to_string())
    }

    fn run(text: &str) -> TestReport {
        run_tests(
            &[(PathBuf::from("rules/x.test.toml"), text.to_string())],
            &builtin,
        )
    }

    #[test]
    fn the_builtin_rules_pass_their_tests() {
        let files: Vec<(PathBuf, String)> = BUILTIN_TESTS
            .iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect();
        let report = run_tests(&files, &builtin);
        assert!(report.diagnostics.is_empty(), "{:#?}", report.diagnostics);
        assert!(report.ok(), "{report:#?}");
        assert!(report.passed() >= 8);
    }

    #[test]
    fn a_failing_case_says_what_happened_instead() {
        let r = run(r#"
[[test]]
name = "wrong message"
events = [{ hook = "on_turn_start", turn = { token_usage = 0.85 } }]
fires = ["iteration-budget-warning"]
not_fires = ["token-budget-warning"]
messages = ["Token budget at 90%. Consider wrapping up or summarizing."]
"#);
        assert_eq!((r.passed(), r.failed()), (0, 1));
        let f = &r.files[0].cases[0].failures;
        assert_eq!(f.len(), 3, "{f:#?}");
        assert!(
            f[0].contains(
                "expected `iteration-budget-warning` to fire (fired: token-budget-warning)"
            ),
            "{}",
            f[0]
        );
        assert!(
            f[1].contains("expected `token-budget-warning` not to fire"),
            "{}",
            f[1]
        );
        assert!(
            f[2].contains("expected: Token budget at 90%")
                && f[2].contains("actual:   Token budget at 85%"),
            "{}",
            f[2]
        );
    }

    #[test]
    fn settings_and_disabled_rules_apply_to_the_case_only() {
        let r = run(r#"
[[test]]
name = "a higher threshold"
settings = { "builtin.token_budget_threshold" = 0.9 }
events = [{ hook = "on_turn_start", turn = { token_usage = 0.85 } }]
not_fires = ["token-budget-warning"]

[[test]]
name = "the default again"
events = [{ hook = "on_turn_start", turn = { token_usage = 0.85 } }]
fires = ["token-budget-warning"]

[[test]]
name = "switched off"
disabled = ["large-result-summary"]
events = [{ hook = "on_tool_complete", tool = { name = "vault_search" }, result = { count = 9 } }]
not_fires = ["large-result-summary"]

[[test]]
name = "a bad setting fails the case"
settings = { "builtin.token_budget_threshold" = 3 }
events = [{ hook = "on_turn_start" }]
"#);
        let cases = &r.files[0].cases;
        assert!(
            cases[0].passed && cases[1].passed && cases[2].passed,
            "{cases:#?}"
        );
        assert!(!cases[3].passed);
        assert!(
            cases[3].failures[0].contains("at most 1 (the manifest's max)"),
            "{:?}",
            cases[3].failures
        );
    }

    #[test]
    fn per_event_expectations() {
        let r = run(r#"
[[test]]
name = "third failure"
events = [
  { hook = "on_tool_failure", tool = { name = "web_search" }, error = "timeout" },
  { hook = "on_tool_failure", tool = { name = "web_search" }, error = "timeout" },
  { hook = "on_tool_failure", tool = { name = "web_search" }, error = "503" },
]
fires = ["repeated-failure-warning"]
[[test.expect]]
event = 1
not_fires = ["repeated-failure-warning"]
"#);
        assert!(r.ok(), "{r:#?}");
    }

    #[test]
    fn mistakes_in_test_files_are_diagnostics() {
        for (text, want) in [
            (
                "[[test]]\nname = \"x\"\nevents = [{ hook = \"on_turn_start\" }]\nfires = [\"token-budget-warnin\"]\n",
                "did you mean `token-budget-warning`?",
            ),
            (
                "[[test]]\nname = \"x\"\nevents = [{ hook = \"on_turn_begin\" }]\n",
                "test[0].events[0]",
            ),
            ("[[test]]\nname = \"x\"\n", "has no `events`"),
            (
                "[[test]]\nname = \"x\"\nevents = [{ hook = \"on_turn_start\" }]\nfire = [\"a\"]\n",
                "did you mean `fires`?",
            ),
            (
                "[[test]]\nname = \"x\"\nevents = [{ hook = \"on_turn_start\" }]\n[[test.expect]]\nevent = 3\n",
                "there is no event 3",
            ),
            ("title = \"no cases\"\n", "no [[test]] cases"),
        ] {
            let r = run(text);
            let all: Vec<String> = r.diagnostics.iter().map(ToString::to_string).collect();
            assert!(
                all.iter().any(|d| d.contains(want)),
                "{text}\nwant {want}\n{all:#?}"
            );
            assert!(r.files.is_empty() && !r.ok());
        }
    }

    #[test]
    fn finding_test_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join("plugin/rules")).unwrap();
        std::fs::write(p.join("a.test.toml"), "").unwrap();
        std::fs::write(p.join("a.toml"), "").unwrap();
        std::fs::write(p.join("plugin/rules/b.test.toml"), "").unwrap();
        let found = find_test_files(&[p.to_path_buf()]);
        assert_eq!(
            found,
            [p.join("a.test.toml"), p.join("plugin/rules/b.test.toml")]
        );
    }
}
