//! The book cannot drift from the code: every rule it shows must load (or, when marked
//! `toml,invalid`, must be refused; `toml,excerpt` marks a rule that needs a file the chapter
//! does not show, such as its script), and the context API chapter must document every field
//! of the context schema. Every link between chapters must reach its page and heading.

use std::fs;
use std::path::{Path, PathBuf};

fn chapters() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src"),
        &mut out,
    );
    out.sort();
    out
}

/// The fenced blocks of a markdown file: (info string, body, line of the fence).
fn blocks(text: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut current {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    current = Some((info.trim().to_string(), String::new(), i + 1));
                }
            }
            Some((_, body, _)) => {
                if trimmed.starts_with("```") {
                    out.push(current.take().unwrap());
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    out
}

#[test]
fn every_rule_behavior_and_modes_file_in_the_book_loads() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for chapter in chapters() {
        let text = fs::read_to_string(&chapter).unwrap();
        for (info, body, line) in blocks(&text) {
            let lang: Vec<&str> = info.split(',').map(str::trim).collect();
            let is_rule = body.contains("[rule]") || body.contains("[behavior]");
            let is_modes = body.contains("[[mode]]");
            if lang.first() != Some(&"toml")
                || !(is_rule || is_modes)
                || body.contains("{{#include")
                || lang.contains(&"excerpt")
            {
                continue;
            }
            let invalid = lang.contains(&"invalid");
            let dir = tempfile::tempdir().unwrap();
            // `with=ID`: the example needs a behavior shown earlier in the chapter.
            for id in lang.iter().filter_map(|l| l.strip_prefix("with=")) {
                let defines = format!("id = \"{id}\"");
                let earlier = blocks(&text)
                    .into_iter()
                    .rev()
                    .find(|(_, b, l)| *l < line && b.contains(&defines))
                    .unwrap_or_else(|| panic!("{}:{line}: no earlier `{id}`", chapter.display()));
                fs::write(dir.path().join(format!("{id}.toml")), earlier.1).unwrap();
            }
            let mut builder = warden::Warden::builder();
            if is_modes {
                // A modes file is checked against the built-in rules it chooses among.
                fs::write(dir.path().join("modes.toml"), &body).unwrap();
                builder = builder.modes_file(dir.path().join("modes.toml"));
            } else {
                fs::write(dir.path().join("example.toml"), &body).unwrap();
                builder = builder.rules_dir(dir.path());
            }
            let warden = builder.build().unwrap();
            let errors: Vec<String> = warden
                .diagnostics()
                .iter()
                .filter(|d| d.is_error())
                .map(ToString::to_string)
                .collect();
            checked += 1;
            match (invalid, errors.is_empty()) {
                (false, false) => failures.push(format!(
                    "{}:{line}: {}",
                    chapter.display(),
                    errors.join("; ")
                )),
                (true, true) => failures.push(format!(
                    "{}:{line}: marked invalid, but it loads",
                    chapter.display()
                )),
                _ => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 20,
        "only {checked} rule, behavior and modes examples found in the book"
    );
}

/// A block fenced `toml,config` is (part of) a `warden.toml`: it must read without an error.
#[test]
fn every_configuration_in_the_book_reads() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for chapter in chapters() {
        let text = fs::read_to_string(&chapter).unwrap();
        for (info, body, line) in blocks(&text) {
            let lang: Vec<&str> = info.split(',').map(str::trim).collect();
            if lang.first() != Some(&"toml") || !lang.contains(&"config") {
                continue;
            }
            checked += 1;
            if let Err(d) = warden::Config::parse(Path::new("warden.toml"), &body) {
                let all: Vec<String> = d.iter().map(ToString::to_string).collect();
                failures.push(format!("{}:{line}: {}", chapter.display(), all.join("; ")));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 1, "no `toml,config` block found in the book");
}

#[test]
fn the_context_api_chapter_documents_every_field() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/reference/context-api.md");
    let text = fs::read_to_string(&path).unwrap();
    let missing: Vec<String> = warden::schema()
        .paths()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| !text.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not document: {}",
        path.display(),
        missing.join(", ")
    );
    for helper in warden::schema().helpers() {
        assert!(
            text.contains(&format!("`{}(", helper.name())),
            "the helper {} is not documented",
            helper.name()
        );
    }
}

#[test]
fn the_conditions_chapter_documents_every_function() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/reference/conditions.md");
    let text = fs::read_to_string(&path).unwrap();
    let missing: Vec<&str> = warden::expr::builtin_functions()
        .map(|(name, _)| name)
        .filter(|name| !text.contains(&format!("`{name}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "{} does not document: {}",
        path.display(),
        missing.join(", ")
    );
}

/// Every Lua block of the book compiles, and runs without error as the script of a rule at a
/// turn start (blocks fenced ```lua,norun are only compiled: they show a failure on purpose,
/// or need a tool event).
#[test]
fn every_lua_example_in_the_book_runs() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for chapter in chapters() {
        let text = fs::read_to_string(&chapter).unwrap();
        for (info, body, line) in blocks(&text) {
            let lang: Vec<&str> = info.split(',').map(str::trim).collect();
            if lang.first() != Some(&"lua") || body.contains("{{#include") {
                continue;
            }
            checked += 1;
            let place = format!("{}:{line}", chapter.display());
            if let Err(e) = warden::lua::check_syntax("example.lua", &body) {
                failures.push(format!("{place}: {e}"));
                continue;
            }
            if lang.contains(&"norun") {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir(dir.path().join("scripts")).unwrap();
            fs::write(dir.path().join("scripts/example.lua"), &body).unwrap();
            fs::write(
                dir.path().join("example.toml"),
                "[rule]\nid = \"example\"\ntrigger = \"on_turn_start\"\n[condition]\nscript = \"scripts/example.lua\"\n",
            )
            .unwrap();
            // A minute for each script (a hang detector): an example runs in milliseconds,
            // which the clock of a loaded machine must not turn into a time limit.
            let warden = warden::Warden::builder()
                .rules_dir(dir.path())
                .script_limits(warden::ScriptLimits {
                    timeout: std::time::Duration::from_secs(60),
                    ..warden::ScriptLimits::default()
                })
                .build()
                .unwrap();
            if let Some(d) = warden.diagnostics().first() {
                failures.push(format!("{place}: {d}"));
                continue;
            }
            let mut session = warden.session();
            session.tick(
                warden::Hook::OnQueryStart,
                warden::Event::query("Research Lua sandboxes"),
            );
            let outcome = session.tick(
                warden::Hook::OnTurnStart,
                warden::Event::new()
                    .with_turn(1)
                    .with_token_usage(0.5)
                    .with_iterations(2, 10),
            );
            for e in &outcome.errors {
                failures.push(format!("{place}: {}", e.error));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 10,
        "only {checked} Lua examples found in the book"
    );
}

/// mdBook's id for a heading: its text (without markup) lowercased, spaces as hyphens, only
/// letters, digits, `_` and `-` kept.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](url)` reads as `text`.
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids a chapter defines: its headings' (outside code blocks) and `<a id="...">`.
fn ids(text: &str) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if let Some(h) = line.strip_prefix('#') {
            let id = heading_id(h.trim_start_matches('#').trim());
            let mut unique = id.clone();
            let mut n = 1;
            while out.contains(&unique) {
                unique = format!("{id}-{n}");
                n += 1;
            }
            out.insert(unique);
        }
        let mut rest = line;
        while let Some(at) = rest.find("<a id=\"") {
            let after = &rest[at + 7..];
            let end = after.find('"').unwrap_or(after.len());
            out.insert(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_link_between_chapters_reaches_its_page_and_heading() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src");
    let chapters = chapters();
    let defined: std::collections::HashMap<PathBuf, _> = chapters
        .iter()
        .map(|c| (c.clone(), ids(&fs::read_to_string(c).unwrap())))
        .collect();
    let mut failures = Vec::new();
    let mut checked = 0;
    for chapter in &chapters {
        let text = fs::read_to_string(chapter).unwrap();
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            let mut rest = line;
            while let Some(at) = rest.find("](") {
                let after = &rest[at + 2..];
                let end = after.find(')').unwrap_or(after.len());
                let target = &after[..end];
                rest = &after[end..];
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let page = if path.is_empty() {
                    chapter.clone()
                } else if path.ends_with(".md") {
                    let joined = chapter.parent().unwrap().join(path);
                    match joined.canonicalize() {
                        Ok(p) => p,
                        Err(_) => {
                            failures.push(format!(
                                "{}:{}: `{target}`: no such chapter",
                                chapter.strip_prefix(&root).unwrap().display(),
                                n + 1
                            ));
                            continue;
                        }
                    }
                } else {
                    // A file of the repository (an example, a script): it must exist.
                    if !chapter.parent().unwrap().join(path).exists() {
                        failures.push(format!(
                            "{}:{}: `{target}`: no such file",
                            chapter.strip_prefix(&root).unwrap().display(),
                            n + 1
                        ));
                    }
                    continue;
                };
                checked += 1;
                if anchor.is_empty() {
                    continue;
                }
                let page = defined
                    .keys()
                    .find(|k| k.canonicalize().ok().as_ref() == Some(&page))
                    .cloned()
                    .unwrap_or(page);
                if !defined.get(&page).is_some_and(|ids| ids.contains(anchor)) {
                    failures.push(format!(
                        "{}:{}: `{target}`: {} has no heading with the id `{anchor}`",
                        chapter.strip_prefix(&root).unwrap().display(),
                        n + 1,
                        page.strip_prefix(&root).unwrap_or(&page).display()
                    ));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the book there?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The lines of `actual` match `expected`, where a line `...` of `expected` stands for any
/// number of lines (trailing spaces do not count).
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| matches(rest, &actual[skip..])),
        Some((line, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| a.trim_end() == line.trim_end() && matches(rest, more)),
    }
}

/// Plays a chapter in `dir`, in order: a block fenced ```LANG,file=PATH is written to PATH
/// (a later block of the same file replaces it; a block that is an `{{#include FILE}}`, the
/// file), and each `$ COMMAND` line of a ```text block
/// for which `runs` holds is run by `sh` in `dir`, with the `warden` under test first on the
/// PATH (`cargo run -q --` stands for it too). The lines after a command, up to the next
/// `$ `, are what it prints: standard error and standard output into one pipe, in the order
/// written. Returns the commands whose output differs, with both outputs.
fn play(chapter: &str, dir: &Path, runs: &dyn Fn(&str) -> bool) -> (usize, Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("book/src")
        .join(chapter);
    let text = fs::read_to_string(&path).unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_warden")).parent().unwrap();
    let search = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (mut ran, mut failures) = (0, Vec::new());
    for (info, body, line) in blocks(&text) {
        if let Some(file) = info.split(',').find_map(|a| a.trim().strip_prefix("file=")) {
            // A block that includes a file of the book's sources is that file.
            let body = match body
                .trim()
                .strip_prefix("{{#include ")
                .and_then(|r| r.strip_suffix("}}"))
            {
                Some(included) => {
                    fs::read_to_string(path.parent().unwrap().join(included.trim())).unwrap()
                }
                None => body,
            };
            let target = dir.join(file);
            fs::create_dir_all(target.parent().unwrap()).unwrap();
            fs::write(target, &body).unwrap();
            continue;
        }
        if info != "text" || !body.starts_with("$ ") {
            continue;
        }
        let mut commands: Vec<(&str, Vec<&str>)> = Vec::new();
        for l in body.lines() {
            match l.strip_prefix("$ ") {
                Some(c) => commands.push((c, Vec::new())),
                None => commands.last_mut().unwrap().1.push(l),
            }
        }
        for (command, mut expected) in commands {
            if !runs(command) {
                continue;
            }
            while expected.last().is_some_and(|l| l.trim().is_empty()) {
                expected.pop();
            }
            let command = command.replace("cargo run -q -- ", "warden ");
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{{ {command} ; }} 2>&1"))
                .current_dir(dir)
                .env("PATH", &search)
                .env("NO_COLOR", "1")
                .env_remove("WARDEN_CONFIG")
                .env_remove("WARDEN_LOG")
                .output()
                .unwrap();
            ran += 1;
            let printed = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut actual: Vec<&str> = printed.lines().collect();
            while actual.last().is_some_and(|l| l.trim().is_empty()) {
                actual.pop();
            }
            if !matches(&expected, &actual) {
                failures.push(format!(
                    "{chapter}:{line}: `$ {command}` prints\n{}\n--- where the book says\n{}",
                    actual.join("\n"),
                    expected.join("\n")
                ));
            }
        }
    }
    (ran, failures)
}

#[test]
fn the_first_rule_chapter_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (ran, failures) = play("first-rule.md", dir.path(), &|_| true);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 7, "only {ran} commands in the first-rule chapter");
    // Every command it shows was run, and the files it saved are the ones the test loaded.
    assert!(dir.path().join("my-rules/empty-search.test.toml").is_file());
}

#[test]
fn the_codex_and_gemini_cli_chapters_run_as_written() {
    for (chapter, hook_file) in [
        ("codex.md", ".codex/hooks.json"),
        ("gemini-cli.md", ".gemini/settings.json"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (ran, failures) = play(chapter, dir.path(), &|_| true);
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
        assert_eq!(ran, 2, "{chapter}: `warden init` and a hook");
        assert!(dir.path().join(hook_file).is_file(), "{chapter}");
    }
}

#[test]
fn the_plugin_tutorial_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (ran, failures) = play("plugins/tutorial.md", dir.path(), &|_| true);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 14, "only {ran} commands in the plugin tutorial");
}

#[test]
fn the_introduction_the_command_reference_the_traces_and_the_shell_chapters_print_what_they_quote()
{
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (ran, mut failures) = play("introduction.md", root, &|_| true);
    assert!(ran >= 2, "only {ran} commands in the introduction");
    let (help, more) = play("reference/cli.md", root, &|c| c == "warden --help");
    assert_eq!(help, 1, "the reference quotes `warden --help`");
    failures.extend(more);
    let scratch = tempfile::tempdir().unwrap();
    let (ran, more) = play("reference/cli.md", scratch.path(), &|c| {
        c.starts_with("warden new")
    });
    assert_eq!(ran, 1, "the reference shows `warden new`");
    failures.extend(more);
    // Of the traces chapter, the commands that need no file of another chapter.
    let (ran, more) = play("traces.md", root, &|c| {
        c.starts_with("printf") || c.contains("--format text")
    });
    assert_eq!(ran, 2, "the pipe and the text of the traces chapter");
    failures.extend(more);
    // What `warden shell` prints, as the shell commands chapter quotes it.
    let (ran, more) = play("shell.md", root, &|c| c.contains("warden shell"));
    assert_eq!(ran, 3, "the three commands of the shell commands chapter");
    failures.extend(more);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
