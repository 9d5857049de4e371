//! End-to-end scenarios, as data: each folder of `tests/scenarios/` holds rules, one or more
//! session traces, and the output expected from replaying them. Adding a case needs no code.
//! The folders of `tests/nodes/` are cases of the same form, one per semantic point of the
//! behavior nodes (what runs, resumes, halts, and what each node returns); the node reference
//! of the book shows them.
//!
//! A scenario folder may hold:
//! - `rules/`: rule files (the built-in rules are used when there is no `rules/` folder, or
//!   when `scenario.toml` says `builtin = true`);
//! - `NAME.jsonl`: a session trace; several run in name order, as separate sessions sharing one
//!   store (so plugin state carries from one to the next);
//! - `NAME.expected.jsonl`: the replay output of that session (one line per applied action and
//!   per error, as `warden replay` prints it);
//! - `NAME.explain.jsonl` (optional): the evaluation of every rule at every event, as
//!   `warden replay --explain` prints it, to pin "false" apart from "could not evaluate";
//! - `NAME.nodes.jsonl` (optional in `tests/scenarios/`, required in `tests/nodes/`): the nodes
//!   of behaviors that ran at every event and what each returned, as `warden replay --trace`
//!   prints them before the evaluations;
//! - `diagnostics.txt` (optional): the load diagnostics, one per line (paths relative to the
//!   scenario folder). Without it, the rules must load cleanly.
//!
//! Run with `WARDEN_BLESS=1` to write the expected files from the current behavior, then read
//! every changed line before committing it.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use warden::trace::parse_trace;
use warden::wire::v1::replay::{explain_lines, node_lines, outcome_lines};
use warden::{Store, Warden};

fn jsonl(values: &[Value]) -> String {
    values.iter().map(|v| format!("{v}\n")).collect()
}

fn compare(path: &Path, actual: &str, bless: bool, failures: &mut Vec<String>) {
    if bless {
        fs::write(path, actual).unwrap();
        return;
    }
    let expected = fs::read_to_string(path).unwrap_or_default();
    let parse = |s: &str| -> Vec<Value> {
        s.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or(Value::String(l.to_string())))
            .collect()
    };
    let (want, got) = (parse(&expected), parse(actual));
    if want != got {
        let mut diff = String::new();
        for i in 0..want.len().max(got.len()) {
            match (want.get(i), got.get(i)) {
                (Some(w), Some(g)) if w == g => {}
                (w, g) => {
                    if let Some(w) = w {
                        diff.push_str(&format!("  - {w}\n"));
                    }
                    if let Some(g) = g {
                        diff.push_str(&format!("  + {g}\n"));
                    }
                }
            }
        }
        failures.push(format!("{}:\n{diff}", path.display()));
    }
}

/// Replays one case folder. `nodes_required`: every session must have its node trace (a node
/// case is about what its nodes did); blessing writes a missing one.
fn run_scenario(dir: &Path, nodes_required: bool, bless: bool, failures: &mut Vec<String>) {
    let config: toml::Table = fs::read_to_string(dir.join("scenario.toml"))
        .ok()
        .map(|t| {
            toml::from_str(&t).unwrap_or_else(|e| panic!("{}: scenario.toml: {e}", dir.display()))
        })
        .unwrap_or_default();
    let rules = dir.join("rules");
    // Plugin folders: `plugins/` in the scenario, and any named in scenario.toml (relative to
    // the scenario), with the capabilities the host declares.
    let mut plugins: Vec<PathBuf> = config
        .get("plugins")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str())
                .map(|p| dir.join(p))
                .collect()
        })
        .unwrap_or_default();
    if dir.join("plugins").is_dir() {
        plugins.push(dir.join("plugins"));
    }
    let capabilities: Vec<String> = config
        .get("capabilities")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let builtin = config
        .get("builtin")
        .and_then(|v| v.as_bool())
        .unwrap_or(!rules.is_dir() && plugins.is_empty());
    let make = || {
        let mut builder = Warden::builder()
            .store(Store::in_memory().unwrap())
            .capabilities(capabilities.iter().cloned());
        if builtin {
            builder = builder.builtin_rules();
        }
        if rules.is_dir() {
            builder = builder.rules_dir(&rules);
        }
        for p in &plugins {
            builder = builder.plugins_dir(p);
        }
        // Modes: `modes = "builtin:context-window"`, or a modes file of the scenario.
        if let Some(m) = config.get("modes").and_then(|v| v.as_str()) {
            builder = match m.strip_prefix("builtin:") {
                Some(name) => builder.builtin_modes(name),
                None => builder.modes_file(dir.join(m)),
            };
        }
        // Knowledge enrichment: `knowledge = ["sources.toml", "project root"]`.
        if let Some(k) = config.get("knowledge").and_then(|v| v.as_array()) {
            let path = |i: usize| dir.join(k[i].as_str().expect("knowledge paths are strings"));
            builder = builder.knowledge(path(0), path(1));
        }
        let warden = builder.build().unwrap();
        // Users' choices made before the session starts: `[settings]`, `enabled` and `disabled`.
        if let Some(settings) = config.get("settings").and_then(|v| v.as_table()) {
            for (key, value) in settings {
                let value = serde_json::to_value(value).unwrap();
                warden
                    .set_setting(warden::DEFAULT_ID, None, key, &value)
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            }
        }
        for (list, on) in [("enabled", true), ("disabled", false)] {
            for rule in config
                .get(list)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str())
            {
                warden
                    .set_rule_enabled(warden::DEFAULT_ID, rule, on)
                    .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            }
        }
        warden
    };
    let warden = make();
    let twin = make();
    // A third run saves the session after every event and reads it back before the next, as
    // a process per hook would: it must decide exactly as the session that never stopped.
    let resumed = make();

    let prefix = format!("{}/", dir.display());
    let diagnostics: String = warden
        .diagnostics()
        .iter()
        .map(|d| {
            format!(
                "{}\n",
                d.to_string().replace(&prefix, "").replace('\n', " ")
            )
        })
        .collect();
    let diag_file = dir.join("diagnostics.txt");
    if diag_file.exists() || (bless && !diagnostics.is_empty()) {
        if bless {
            fs::write(&diag_file, &diagnostics).unwrap();
        } else if fs::read_to_string(&diag_file).unwrap() != diagnostics {
            failures.push(format!(
                "{}:\n  expected:\n{}  actual:\n{}",
                diag_file.display(),
                fs::read_to_string(&diag_file).unwrap(),
                diagnostics
            ));
        }
    } else if !diagnostics.is_empty() {
        failures.push(format!(
            "{}: unexpected diagnostics:\n{diagnostics}",
            dir.display()
        ));
    }

    let mut traces: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".jsonl")
                && !name.ends_with(".expected.jsonl")
                && !name.ends_with(".explain.jsonl")
                && !name.ends_with(".nodes.jsonl")
        })
        .collect();
    traces.sort();
    assert!(!traces.is_empty(), "{}: no session trace", dir.display());
    for trace in traces {
        let stem = trace.file_stem().unwrap().to_string_lossy().to_string();
        // Each trace runs twice: as an agent loop would, and in explain mode, which evaluates
        // every rule instead of skipping those the threshold index rules out. Both must
        // decide the same. They use separate stores so state writes do not count twice.
        let mut session = warden.session_with(warden::SessionOptions {
            id: Some(stem.clone()),
            ..Default::default()
        });
        let mut explained = twin.session_with(warden::SessionOptions {
            id: Some(stem.clone()),
            explain: true,
            ..Default::default()
        });
        let (mut output, mut explain, mut nodes) = (Vec::new(), Vec::new(), Vec::new());
        let mut saved_output = Vec::new();
        for (index, parsed) in parse_trace(&fs::read_to_string(&trace).unwrap()) {
            let e = parsed.unwrap_or_else(|e| panic!("{}: {e}", trace.display()));
            let outcome = session.tick_shared(e.hook, e.event.clone());
            let mut reopened = resumed
                .open_session(&stem, warden::SessionOptions::default())
                .unwrap_or_else(|err| panic!("{}: event {index}: {err}", trace.display()));
            saved_output.extend(outcome_lines(
                index,
                &reopened.tick_shared(e.hook, e.event.clone()),
            ));
            let full = explained.tick_shared(e.hook, e.event);
            output.extend(outcome_lines(index, &outcome));
            explain.extend(explain_lines(index, &full));
            // Nodes are recorded in explain mode only.
            nodes.extend(node_lines(index, &full));
            if outcome_lines(index, &full) != outcome_lines(index, &outcome) {
                failures.push(format!(
                    "{}: event {index} decided differently in explain mode",
                    trace.display()
                ));
            }
        }
        if saved_output != output {
            let mut diff = String::new();
            for i in 0..output.len().max(saved_output.len()) {
                match (output.get(i), saved_output.get(i)) {
                    (Some(a), Some(b)) if a == b => {}
                    (a, b) => diff.push_str(&format!("  straight: {a:?}\n  resumed:  {b:?}\n")),
                }
            }
            failures.push(format!(
                "{}: a session saved and read back at every event decided differently:\n{diff}",
                trace.display()
            ));
        }
        compare(
            &dir.join(format!("{stem}.expected.jsonl")),
            &jsonl(&output),
            bless,
            failures,
        );
        let explain_file = dir.join(format!("{stem}.explain.jsonl"));
        if explain_file.exists() {
            compare(&explain_file, &jsonl(&explain), bless, failures);
        }
        let nodes_file = dir.join(format!("{stem}.nodes.jsonl"));
        if nodes_file.exists() || (nodes_required && bless) {
            compare(&nodes_file, &jsonl(&nodes), bless, failures);
        } else if nodes_required {
            failures.push(format!("{}: no node trace", nodes_file.display()));
        }
    }
}

/// Replays every case folder of `folder`, which must hold at least `min_cases`.
fn run_suite(folder: &str, min_cases: usize, nodes_required: bool) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let bless = std::env::var_os("WARDEN_BLESS").is_some();
    let mut dirs: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= min_cases, "{folder} lost cases");
    let mut failures = Vec::new();
    for dir in &dirs {
        run_scenario(dir, nodes_required, bless, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} mismatch(es) in {folder}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn scenarios() {
    run_suite("tests/scenarios", 10, false);
}

#[test]
fn nodes() {
    run_suite("tests/nodes", 30, true);
}
