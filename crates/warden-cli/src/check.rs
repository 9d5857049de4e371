//! `warden check`, `warden test`, `warden log` and `warden enrich`: checking rule files, rule
//! tests, the execution log, and what knowledge enrichment makes of a query.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use warden_core::{Config, ExecutionFilter, MANIFEST_FILE};
use warden_load::{BUILTIN_PREFIX, CONFIG_FILE};
use warden_testing::{
    BUILTIN_TESTS, TEST_SUFFIX, TestReport, discover_test_files, read_test_files, run_tests,
};
use warden_wire::v1;

use crate::folders::{folder_of, is_plugins_folder, plugin_of};
use crate::setup::{build, open_store};
use crate::{json_out, plural, render_diagnostics};

/// What `warden check PATH` loads for a path: a rule folder or file, or a folder of plugins.
enum Checked {
    Rules(PathBuf),
    Plugins(PathBuf),
}

fn what_to_check(p: &Path) -> Result<Checked, String> {
    if p.is_dir() {
        if is_plugins_folder(p) {
            return Ok(Checked::Plugins(p.to_path_buf()));
        }
        // A folder inside a plugin (its `rules/`) is checked with the plugin, whose
        // manifest declares the settings its rules read.
        return Ok(match plugin_of(p) {
            Some(plugin) if !p.join(MANIFEST_FILE).is_file() => {
                eprintln!(
                    "{} is inside the plugin in {}: checking the plugin",
                    p.display(),
                    plugin.display()
                );
                Checked::Rules(plugin)
            }
            _ => Checked::Rules(p.to_path_buf()),
        });
    }
    if !p.exists() {
        // The loader says it cannot be read, with the path.
        return Ok(Checked::Rules(p.to_path_buf()));
    }
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    if name.ends_with(TEST_SUFFIX) {
        return Err(format!(
            "{} holds rule tests, not a rule: run them with `warden test {}`",
            p.display(),
            p.display()
        ));
    }
    if name == CONFIG_FILE {
        return Err(format!(
            "{} is a configuration file: `warden check` without a path checks what it loads",
            p.display()
        ));
    }
    if !name.ends_with(".toml") {
        return Err(format!(
            "{} is not a rule file: rule and behavior files end in `.toml`",
            p.display()
        ));
    }
    // A manifest, or a rule of a plugin, is checked with its plugin: a plugin's rules read its
    // settings, which only its manifest declares.
    if let Some(plugin) = plugin_of(folder_of(p)) {
        if name != MANIFEST_FILE {
            eprintln!(
                "{} is a rule of the plugin in {}: checking the plugin",
                p.display(),
                plugin.display()
            );
        }
        return Ok(Checked::Rules(plugin));
    }
    Ok(Checked::Rules(p.to_path_buf()))
}

/// `warden check`: loads the paths (or the configured folders) and prints every diagnostic and
/// a summary.
pub(crate) fn check(config: &Config, paths: &[PathBuf], json: bool) -> Result<ExitCode, String> {
    let mut config = config.clone();
    if !paths.is_empty() {
        config.builtin = false;
        config.rules.clear();
        config.plugins.clear();
        for p in paths {
            match what_to_check(p)? {
                Checked::Rules(p) => config.rules.push(p),
                Checked::Plugins(p) => config.plugins.push(p),
            }
        }
    }
    // Checking plugins away from their host: load them whatever they require, unless the
    // capabilities were named.
    let any = config.capabilities.is_empty();
    let warden = build(&config, true, any)?;
    let program = warden.program();
    // The rules' problems, and the knowledge sources' when enrichment is configured.
    let diagnostics = warden.diagnostics();
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    // A file's problems past the first 100 are one summary diagnostic: count what it stands for.
    let (mut error_count, mut warning_count) = (0, 0);
    for d in &diagnostics {
        if d.omitted() > 0 {
            error_count += d.omitted_errors();
            warning_count += d.omitted() - d.omitted_errors();
        } else if d.is_error() {
            error_count += 1;
        } else {
            warning_count += 1;
        }
    }
    if json {
        let items = v1::diagnostics(&diagnostics);
        json_out(&items)?;
    } else {
        eprint!("{}", render_diagnostics(&diagnostics));
        let loaded = program.rules().count();
        let plugins = program
            .plugins()
            .iter()
            .filter(|p| p.skipped.is_none())
            .count();
        // A rule written `enabled = false` is loaded but does nothing until someone switches
        // it on: say which, so that the count adds up.
        let listed = |what: &str, ids: Vec<&str>| match ids.as_slice() {
            [] => String::new(),
            few if few.len() <= 3 => format!(" ({} {what}: {})", few.len(), few.join(", ")),
            many => format!(
                " ({} {what}: {} and {} more)",
                many.len(),
                many[..3].join(", "),
                many.len() - 3
            ),
        };
        let off = format!(
            "{}{}",
            listed(
                "off until switched on",
                program.rules_off_in_their_files().collect()
            ),
            listed(
                "in shadow",
                program.rules_in_shadow_in_their_files().collect()
            )
        );
        println!(
            "{loaded} rule{} loaded{off}, {plugins} plugin{}, {error_count} error{}, {} warning{}",
            plural(loaded),
            plural(plugins),
            plural(error_count),
            warning_count,
            plural(warning_count),
        );
    }
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether `folder` is loaded by `config`: named in it, or inside a folder it names.
fn is_loaded(config: &Config, folder: &Path) -> bool {
    let Ok(folder) = std::fs::canonicalize(folder) else {
        return false;
    };
    config
        .rules
        .iter()
        .chain(&config.plugins)
        .any(|c| std::fs::canonicalize(c).is_ok_and(|c| folder == c || folder.parent() == Some(&c)))
}

/// The rules the tests at `paths` sit beside, when they are not loaded: the plugin a test
/// file is in, the folder of plugins, or the rule folder. (The folder of the tests is where
/// their rules are: a rule folder, a plugin, or a folder of plugins.)
fn homes_of_tests(config: &Config, paths: &[PathBuf]) -> Vec<Checked> {
    let mut homes = Vec::new();
    for p in paths {
        let dir = if p.is_dir() {
            p.as_path()
        } else {
            folder_of(p)
        };
        let home = if let Some(plugin) = plugin_of(dir) {
            Checked::Rules(plugin)
        } else if is_plugins_folder(dir) {
            Checked::Plugins(dir.to_path_buf())
        } else if has_rule_files(dir) {
            Checked::Rules(dir.to_path_buf())
        } else {
            continue;
        };
        let (Checked::Rules(h) | Checked::Plugins(h)) = &home;
        let named = homes.iter().any(|x: &Checked| {
            let (Checked::Rules(x) | Checked::Plugins(x)) = x;
            x == h
        });
        if !named && !is_loaded(config, h) {
            homes.push(home);
        }
    }
    homes
}

/// Whether `dir` holds rule files (a `*.toml` that is not a test, a manifest or a
/// configuration file).
fn has_rule_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".toml")
                && !name.ends_with(TEST_SUFFIX)
                && name != MANIFEST_FILE
                && name != CONFIG_FILE
                && !name.starts_with('.')
                && e.path().is_file()
        })
    })
}

/// Runs rule tests: the files or folders given, or else the tests beside every configured
/// rule and plugin folder (and the built-in rules' tests, when they are loaded). Tests given
/// by path run against the rules they sit beside, loaded if the configuration does not load
/// them; as with `--rules`, the built-in rules are then left out unless the configuration or
/// `--builtin` asks for them (`builtin_by_default`: only the default had them in).
pub(crate) fn test(
    config: &Config,
    builtin_by_default: bool,
    paths: &[PathBuf],
    json: bool,
) -> Result<ExitCode, String> {
    let mut config = config.clone();
    let homes = homes_of_tests(&config, paths);
    if !homes.is_empty() && builtin_by_default {
        config.builtin = false;
    }
    for home in homes {
        match home {
            Checked::Rules(p) => config.rules.push(p),
            Checked::Plugins(p) => config.plugins.push(p),
        }
    }
    let config = &config;
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    // Files named like tests that cannot be read as one (a pipe, a link out of its folder, too
    // large): reported with the results, and the run fails.
    let mut problems = Vec::new();
    let on_disk = if paths.is_empty() {
        // What ships with Warden is named as it is configured (`builtin:...`), never as a
        // path the user does not have.
        if config.builtin {
            files.extend(
                BUILTIN_TESTS
                    .iter()
                    .map(|(p, t)| (PathBuf::from(format!("{BUILTIN_PREFIX}{p}")), t.to_string())),
            );
        }
        for spec in &config.plugins {
            if let Some(Ok(plugin)) = spec.to_str().and_then(warden_load::builtin_plugin) {
                files.extend(
                    plugin
                        .files
                        .iter()
                        .filter(|(p, _)| p.ends_with(TEST_SUFFIX))
                        .map(|(p, t)| (PathBuf::from(plugin.file_name(p)), t.to_string())),
                );
            }
        }
        let folders: Vec<PathBuf> = config
            .rules
            .iter()
            .chain(&config.plugins)
            .filter(|p| !p.to_string_lossy().starts_with(BUILTIN_PREFIX))
            .cloned()
            .collect();
        let (found, skipped) = discover_test_files(&folders);
        problems.extend(skipped);
        found
    } else {
        let mut found = Vec::new();
        for p in paths {
            if p.is_dir() {
                let (more, skipped) = discover_test_files(std::slice::from_ref(p));
                found.extend(more);
                problems.extend(skipped);
            } else if p.to_string_lossy().ends_with(TEST_SUFFIX) {
                found.push(p.clone());
            } else {
                return Err(format!(
                    "{} is not a test file (`*{TEST_SUFFIX}`) or a folder",
                    p.display()
                ));
            }
        }
        found
    };
    let (read, unreadable) = read_test_files(&on_disk);
    files.extend(read);
    problems.extend(unreadable);
    if files.is_empty() && !problems.is_empty() {
        eprint!("{}", render_diagnostics(&problems));
        if json {
            // Nothing ran: an empty report, so that the output is still JSON.
            json_out(&v1::TestRun { files: Vec::new() })?;
        }
        return Ok(ExitCode::FAILURE);
    }
    if files.is_empty() {
        return Err(format!(
            "no rule tests found: write them beside the rules as `*{TEST_SUFFIX}`"
        ));
    }
    // Each file gets a fresh Warden on an in-memory store: tests never touch real state.
    let make = || {
        // A test runs a plugin's rules whatever the host offers.
        let w = build(config, true, true)?;
        let broken: Vec<_> = w
            .diagnostics()
            .into_iter()
            .filter(|d| d.is_error())
            .collect();
        if !broken.is_empty() {
            eprint!("{}", render_diagnostics(&broken));
        }
        Ok(w)
    };
    let mut report = run_tests(&files, &make);
    report.diagnostics.extend(problems);
    if !report.diagnostics.is_empty() {
        eprint!("{}", render_diagnostics(&report.diagnostics));
    }
    if json {
        json_out(&test_run(&report))?;
    } else {
        print!("{}", human(&report));
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn human(report: &TestReport) -> String {
    let mut out = String::new();
    for f in &report.files {
        out.push_str(&format!("{}\n", f.file.display()));
        for c in &f.cases {
            out.push_str(&format!(
                "  {} {}\n",
                if c.passed { "ok  " } else { "FAIL" },
                c.name
            ));
            for failure in &c.failures {
                for (i, line) in failure.lines().enumerate() {
                    out.push_str(if i == 0 { "       " } else { "         " });
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    let broken = report.diagnostics.iter().filter(|d| d.is_error()).count();
    out.push_str(&format!(
        "\n{} passed, {} failed{}\n",
        report.passed(),
        report.failed(),
        if broken > 0 {
            format!(", {broken} problem(s) in test files (above)")
        } else {
            String::new()
        }
    ));
    out
}

/// What `warden log` filters by.
#[derive(clap::Args, Debug)]
pub(crate) struct LogQuery {
    /// Only this rule (`id` or `plugin/id`).
    #[arg(long)]
    rule: Option<String>,
    /// Only this session.
    #[arg(long)]
    session: Option<String>,
    /// Only evaluations that ended in an error.
    #[arg(long)]
    failures: bool,
    /// Only evaluations of rules in shadow, each with what the live rules decided at the
    /// same event.
    #[arg(long)]
    shadow: bool,
    /// Only this user's (all users when absent; --user is not a filter here).
    #[arg(long = "of-user", value_name = "USER")]
    of_user: Option<String>,
    /// At most this many rows, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn log(config: &Config, q: &LogQuery) -> Result<ExitCode, String> {
    let store = open_store(config, "reading the execution log")?;
    let rows = store
        .executions(&ExecutionFilter {
            rule_id: q.rule.clone(),
            session_id: q.session.clone(),
            user_id: q.of_user.clone(),
            failures_only: q.failures,
            shadow_only: q.shadow,
            limit: Some(q.limit),
        })
        .map_err(|e| e.to_string())?;
    if q.json {
        let items: Vec<v1::LogRow> = rows.iter().map(v1::LogRow::from).collect();
        json_out(&items)?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        if q.rule.is_some() || q.session.is_some() || q.of_user.is_some() || q.failures {
            println!("no recorded evaluation matches");
        } else if q.shadow {
            println!(
                "no rule in shadow has fired; put one in shadow with `warden rules shadow RULE` (or `shadow = true` in its file), and its firings are logged whatever `[log] sample` says"
            );
        } else {
            println!(
                "no evaluations recorded; turn the log on with `[log] sample = 1` in warden.toml (`[log]` goes below the top-level keys)"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let width = rows
        .iter()
        .map(|r| r.record.rule_id.len())
        .max()
        .unwrap_or(0);
    for r in &rows {
        let rec = &r.record;
        let result = match (
            &rec.error_message,
            rec.action_executed,
            rec.condition_result,
        ) {
            (Some(e), _, _) => format!("error: {e}"),
            (None, true, _) => match (&rec.decision, rec.shadow) {
                (Some(d), false) => format!("fired, decided {d}"),
                (Some(d), true) => format!("would have decided {d}"),
                (None, false) => "fired".to_string(),
                (None, true) => "would have fired".to_string(),
            },
            (None, false, true) => "matched".to_string(),
            (None, false, false) => "not matched".to_string(),
        };
        // A rule in shadow: marked, with what the live rules decided at the same event.
        let result = match (&rec.live_decision, rec.shadow) {
            (Some(live), true) => format!("[shadow] {result}; live rules: {}", live_words(live)),
            (None, true) => format!("[shadow] {result}"),
            _ => result,
        };
        println!(
            "{}  {:<width$}  {:<17} {:>8.3} ms  {}  [{} / {}]",
            r.created_at,
            rec.rule_id,
            rec.trigger,
            rec.execution_time_ms,
            result,
            rec.session_id.as_deref().unwrap_or("-"),
            rec.user_id
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What the live rules' ruling at an event reads as, beside a rule in shadow.
fn live_words(live: &str) -> String {
    match live {
        "none" => "nothing decided".to_string(),
        d => format!("decided {d}"),
    }
}

/// What `warden enrich` takes.
#[derive(clap::Args, Debug)]
pub(crate) struct EnrichQuery {
    /// The query to classify and enrich.
    query: String,
    /// The model's context window, in tokens (the mode and the budget depend on it).
    #[arg(long, default_value_t = 128_000)]
    window: u64,
    /// The sources file (instead of `[knowledge] sources` in warden.toml).
    #[arg(long, value_name = "FILE")]
    sources: Option<PathBuf>,
    /// The project root source paths are relative to (default: the sources file's folder).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Print the whole result as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn enrich(config: &Config, q: &EnrichQuery) -> Result<ExitCode, String> {
    let (sources, root) = match (&q.sources, &config.knowledge) {
        (Some(s), _) => {
            let root = q.root.clone().unwrap_or_else(|| match s.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            });
            (s.clone(), root)
        }
        (None, Some((s, r))) => (s.clone(), q.root.clone().unwrap_or_else(|| r.clone())),
        (None, None) => {
            return Err(
                "no knowledge sources: give --sources FILE, or `[knowledge] sources = \"...\"` in warden.toml"
                    .into(),
            );
        }
    };
    let warden = warden_core::Warden::builder()
        .knowledge(&sources, &root)
        .build()
        .map_err(|e| e.to_string())?;
    let diagnostics = warden.diagnostics();
    if !diagnostics.is_empty() {
        eprint!("{}", render_diagnostics(&diagnostics));
    }
    let Some((knowledge, health)) = warden.knowledge() else {
        return Err(format!("{} did not load (see above)", sources.display()));
    };
    let e = knowledge.enrich(&q.query, q.window);
    if q.json {
        #[derive(serde::Serialize)]
        struct Enriched<'a> {
            health: v1::knowledge::Health<'a>,
            enrichment: v1::knowledge::Enrichment<'a>,
        }
        json_out(&Enriched {
            health: v1::knowledge::Health::from(&health),
            enrichment: v1::knowledge::Enrichment::from(&e),
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "mode {} (context window {} tokens): budget {}, used {}",
        e.mode, e.context_window, e.budget, e.tokens_used
    );
    let matches: Vec<String> = e
        .classification
        .matches
        .iter()
        .map(|m| format!("`{}` -> {}", m.term, m.tags.join(", ")))
        .collect();
    println!(
        "tags: {}{}",
        e.classification.tags.join(", "),
        if matches.is_empty() {
            String::new()
        } else {
            format!("  ({})", matches.join("; "))
        }
    );
    if !e.selected.is_empty() {
        println!("selected, in order:");
        for s in &e.selected {
            println!(
                "  {:<20} {:>6} tokens{}  [{}]",
                s.id,
                s.tokens,
                if s.truncated {
                    format!(" (cut from {})", s.source_tokens)
                } else {
                    String::new()
                },
                s.matched_tags.join(", ")
            );
        }
    }
    if !e.skipped.is_empty() {
        println!("left out:");
        for s in &e.skipped {
            println!("  {:<20} {}", s.id, s.reason);
        }
    }
    if !health.registered {
        println!(
            "not registered, so an agent gets no enrichment: {}",
            health.reasons.join("; ")
        );
    }
    match &e.section {
        Some(section) => println!("\n{section}"),
        None if e.mode == warden_core::knowledge_pipeline::Mode::Unavailable => println!(
            "\nno section: a context window of {} tokens is below the {} that enrichment needs ([knowledge.modes] reduced_from)",
            e.context_window,
            knowledge.settings().modes.reduced_from
        ),
        None => println!("\nno section: no source matched the query within the budget"),
    }
    Ok(ExitCode::SUCCESS)
}

/// A test run as `warden test --json` prints it.
fn test_run(report: &TestReport) -> v1::TestRun<'_> {
    v1::TestRun {
        files: report
            .files
            .iter()
            .map(|f| v1::TestFile {
                file: &f.file,
                cases: f
                    .cases
                    .iter()
                    .map(|c| v1::TestCase {
                        name: &c.name,
                        passed: c.passed,
                        failures: &c.failures,
                    })
                    .collect(),
            })
            .collect(),
    }
}
