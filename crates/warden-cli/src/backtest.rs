//! `warden replay --from claude-code` (or `codex`, `gemini-cli`): backtests. An agent's transcripts (a file, or every
//! `*.jsonl` under a folder) replayed as the hook payloads the live hook would have been sent,
//! each on a session of its own, against the configured rules in memory (the database is not
//! touched): what fired, one line per tick; `--summary`, per rule and per session; `--against`,
//! only what changes from another rule set.
//!
//! Transcripts are read a line at a time, so a history of any size takes the memory of one
//! session. The command exits 0 whatever the rules decided; 1 when a file cannot be read.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{Value, json};
use warden_agents::{Backtest, Options, Replayed};
use warden_core::{Config, Warden};

use crate::setup::build;

/// Agents whose transcripts Warden reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Agent {
    /// Claude Code's transcripts (`~/.claude/projects/*/*.jsonl`).
    ClaudeCode,
    /// Codex's session files (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`).
    Codex,
    /// Gemini CLI's chat records (`~/.gemini/tmp/*/chats/session-*.jsonl`).
    GeminiCli,
}

impl Agent {
    fn agent(self) -> warden_agents::Agent {
        match self {
            Agent::ClaudeCode => warden_agents::Agent::ClaudeCode,
            Agent::Codex => warden_agents::Agent::Codex,
            Agent::GeminiCli => warden_agents::Agent::GeminiCli,
        }
    }
}

/// How many examples the summary gives per rule.
const EXAMPLES: usize = 3;

/// What a backtest is asked for.
pub(crate) struct BacktestArgs<'a> {
    pub agent: Agent,
    pub path: &'a Path,
    pub summary: bool,
    pub json: bool,
    pub against: Option<&'a Path>,
    pub print_trace: bool,
}

pub(crate) fn run(config: &Config, a: &BacktestArgs<'_>) -> Result<ExitCode, String> {
    let (files, unlisted) = transcripts(a.path)?;
    let warden = build(config, true, false)?;
    report_load("the rules", &warden);
    // Which rules: a backtest that finds nothing should not be mistaken for rules that allow
    // everything when it ran with the built-in rules alone.
    let rules = warden.program().rule_keys().count();
    match &config.path {
        Some(p) => eprintln!("backtesting {rules} rule(s) of {}", p.display()),
        None => eprintln!(
            "backtesting {rules} rule(s): no warden.toml here, so the built-in rules alone (give --config, e.g. .warden/warden.toml)"
        ),
    }
    let old = match a.against {
        Some(path) => {
            let old_config = Config::load(path).map_err(|d| {
                let shown: Vec<String> = d.iter().map(ToString::to_string).collect();
                format!(
                    "--against {}: the configuration does not load:\n{}",
                    path.display(),
                    shown.join("\n")
                )
            })?;
            let w = build(&old_config, true, false)?;
            report_load(&format!("the rules of {}", path.display()), &w);
            Some((w, old_config))
        }
        None => None,
    };
    let opts = Options {
        user: config.user.clone(),
        project: config.project.clone(),
        project_dir: None,
    };
    let cc = &config.claude_code;
    let total_bytes: u64 = files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let mut progress = Progress::new(files.len(), total_bytes);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut summary = Summary::default();
    let mut changes = Changes::default();
    let mut unreadable = unlisted;
    let mut skipped = 0usize;
    let started = Instant::now();
    for file in &files {
        let shown = show(a.path, file);
        let session = session_id(file);
        let reader = match open_regular(file) {
            Ok(f) => std::io::BufReader::with_capacity(1 << 16, f),
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", file.display());
                unreadable += 1;
                continue;
            }
        };
        let agent = a.agent.agent();
        let mut new = Backtest::new(&warden, cc, opts.clone(), &session)
            .agent(agent)
            .keep_events(a.print_trace);
        // The other rule set runs with its own configuration's Claude Code settings, user and
        // project.
        let mut before = old.as_ref().map(|(w, c)| {
            let opts = Options {
                user: c.user.clone(),
                project: c.project.clone(),
                project_dir: None,
            };
            Backtest::new(w, &c.claude_code, opts, &session).agent(agent)
        });
        // Each line's payloads are reported as the line is read: nothing of a transcript is
        // kept but its session, whatever its size.
        let mut written: std::io::Result<()> = Ok(());
        let mut report = |now: Vec<Replayed>, then: Option<Vec<Replayed>>| match then {
            Some(then) => changes.compare(&shown, &then, &now),
            None => {
                for r in &now {
                    summary.add(&shown, r);
                    if written.is_ok() {
                        written = if a.print_trace {
                            write_trace(&mut out, r)
                        } else if !a.summary {
                            write_replayed(&mut out, a.json, &shown, r)
                        } else {
                            Ok(())
                        };
                    }
                }
            }
        };
        let read = each_line(reader, MAX_LINE, &mut progress, |line| {
            let now = new.line(line);
            let then = before.as_mut().map(|b| b.line(line));
            report(now, then);
        });
        match read {
            Ok(0) => {}
            Ok(n) => {
                eprintln!(
                    "warning: {}: {n} line(s) longer than {} MiB skipped",
                    file.display(),
                    MAX_LINE >> 20
                );
                skipped += n;
            }
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", file.display());
                unreadable += 1;
            }
        }
        if new.unread() > 0 {
            eprintln!(
                "warning: {}: {} line(s) of the conversation could not be read (not JSON, or fields of another shape); skipped",
                file.display(),
                new.unread()
            );
            skipped += new.unread();
        }
        let conversation = new.is_conversation();
        report(new.finish(), before.map(Backtest::finish));
        written.map_err(|e| e.to_string())?;
        if conversation {
            summary.transcripts += 1;
        } else {
            eprintln!(
                "warning: {} holds no {} conversation (no prompt or model line of the main session): passed over",
                file.display(),
                a.agent.agent().title()
            );
            summary.not_transcripts += 1;
        }
        progress.file_done();
    }
    progress.clear();
    summary.skipped_lines = skipped;
    summary.unreadable = unreadable;
    let seconds = started.elapsed().as_secs_f64();
    if old.is_some() {
        changes.write(&mut out, a.json).map_err(|e| e.to_string())?;
    } else if a.summary {
        summary
            .write(&mut out, a.json, seconds)
            .map_err(|e| e.to_string())?;
    }
    out.flush().map_err(|e| e.to_string())?;
    Ok(if unreadable > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Says on stderr when rule files did not load (the backtest runs with what did).
fn report_load(what: &str, warden: &Warden) {
    let errors = warden.diagnostics().iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        eprint!("{}", crate::render_diagnostics(&warden.diagnostics()));
        eprintln!(
            "warning: {what}: {errors} problem(s); the backtest runs with the rules that loaded"
        );
    }
}

/// Opens a transcript: a regular file only (a link to one is followed), without blocking, so
/// that a FIFO or a device named `*.jsonl` is refused rather than read forever.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// The transcripts at `path`: the file itself, or every `*.jsonl` under the folder (other
/// files skipped; links to folders not followed), in name order; and how many folders under
/// it could not be listed (each said on stderr; the others are still replayed).
fn transcripts(path: &Path) -> Result<(Vec<PathBuf>, usize), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Ok((vec![path.to_path_buf()], 0));
    }
    let mut found = Vec::new();
    let mut unlisted = 0;
    let mut folders = vec![path.to_path_buf()];
    while let Some(dir) = folders.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("error: cannot read the folder {}: {e}", dir.display());
                unlisted += 1;
                continue;
            }
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let p = entry.path();
            if kind.is_dir() {
                folders.push(p);
            } else if p.extension().is_some_and(|e| e == "jsonl") {
                // A link to a file is followed when it is read; one to a folder is passed
                // over; a broken one is a file that cannot be read.
                let is_folder =
                    kind.is_symlink() && std::fs::metadata(&p).is_ok_and(|m| m.is_dir());
                if !is_folder {
                    found.push(p);
                }
            }
        }
    }
    found.sort();
    if found.is_empty() {
        eprintln!("warning: no *.jsonl transcript under {}", path.display());
    }
    Ok((found, unlisted))
}

/// A transcript's session: its file name without `.jsonl` (Claude Code names them by session
/// id), kept to what a session id may be.
fn session_id(file: &Path) -> String {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let clean: String = stem.chars().filter(|c| !c.is_control()).take(200).collect();
    if clean.is_empty() {
        "transcript".to_string()
    } else {
        clean
    }
}

/// A file as it is shown: relative to the folder given, or as given.
fn show(root: &Path, file: &Path) -> String {
    match file.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => file.display().to_string(),
    }
}

/// The longest transcript line read, in bytes: a longer one (no line Claude Code writes is
/// near it) is skipped without being held in memory, and counted.
const MAX_LINE: usize = 64 << 20;

/// Calls `each` with every line of `reader` (its bytes, without its end; blank ones too, so
/// that lines keep their numbers): straight from the reader's buffer when the line is whole in
/// it, else gathered in one reused buffer. A line longer than `max` bytes is passed on empty;
/// the count of those is returned.
fn each_line(
    mut reader: impl BufRead,
    max: usize,
    progress: &mut Progress,
    mut each: impl FnMut(&[u8]),
) -> std::io::Result<usize> {
    let mut carried: Vec<u8> = Vec::new();
    let mut too_long = 0usize;
    // Within a line too long to keep: its bytes are dropped up to its end.
    let mut dropping = false;
    let emit = |line: &[u8], each: &mut dyn FnMut(&[u8])| {
        let mut line = line;
        while let [rest @ .., b'\r'] = line {
            line = rest;
        }
        each(line);
    };
    loop {
        let available = match reader.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            if dropping {
                emit(&[], &mut each);
            } else if !carried.is_empty() {
                emit(&carried, &mut each);
            }
            return Ok(too_long);
        }
        let (used, end) = match memchr::memchr(b'\n', available) {
            Some(end) => (end + 1, Some(end)),
            None => (available.len(), None),
        };
        let piece = &available[..end.unwrap_or(used)];
        if !dropping && carried.len() + piece.len() > max {
            dropping = true;
            too_long += 1;
            carried = Vec::new();
        }
        match (end, dropping) {
            (Some(_), true) => {
                emit(&[], &mut each);
                dropping = false;
            }
            (Some(_), false) if carried.is_empty() => emit(piece, &mut each),
            (Some(_), false) => {
                carried.extend_from_slice(piece);
                emit(&carried, &mut each);
                carried.clear();
            }
            (None, true) => {}
            (None, false) => carried.extend_from_slice(piece),
        }
        reader.consume(used);
        progress.bytes(used as u64);
    }
}

/// The summary of a payload's tool call: the command, the path, or the tool alone.
fn call_summary(r: &Replayed) -> String {
    let p = &r.payload;
    let Some(tool) = &p.tool_name else {
        return match &p.prompt {
            Some(prompt) => format!("prompt `{}`", clip(prompt, 60)),
            None => p.event_name.clone(),
        };
    };
    let input = p.tool_input.as_ref();
    let detail = ["command", "file_path", "path", "url", "pattern"]
        .iter()
        .find_map(|k| input.and_then(|i| i.get(*k)).and_then(Value::as_str));
    match detail {
        Some(d) => format!("{tool} `{}`", clip(d, 80)),
        None => tool.clone(),
    }
}

fn clip(s: &str, n: usize) -> String {
    let one_line = s.replace('\n', " ");
    if one_line.chars().count() <= n {
        one_line
    } else {
        let cut: String = one_line.chars().take(n).collect();
        format!("{cut}…")
    }
}

/// One JSON line (or text line) per tick that fired, decided, or failed.
fn write_replayed(
    out: &mut impl Write,
    json: bool,
    file: &str,
    r: &Replayed,
) -> std::io::Result<()> {
    if let Some(error) = &r.error {
        return if json {
            writeln!(
                out,
                "{}",
                json!({"transcript": file, "session": r.payload.session_id, "line": r.line, "event": r.payload.event_name, "error": error})
            )
        } else {
            writeln!(out, "{file}:{}: not replayed: {error}", r.line)
        };
    }
    for t in &r.ticks {
        if t.fired.is_empty() && t.decision.is_none() && t.errors.is_empty() && t.shadow.is_empty()
        {
            continue;
        }
        if json {
            let mut line = json!({
                "transcript": file,
                "session": r.payload.session_id,
                "line": r.line,
                "event": r.payload.event_name,
                "hook": t.hook.name(),
                "fired": t.fired,
            });
            if let Some(tool) = &r.payload.tool_name {
                line["tool"] = json!(tool);
                line["input"] = r.payload.tool_input.clone().unwrap_or(Value::Null);
                line["tool_use_id"] = json!(r.payload.tool_use_id);
            }
            if r.refused {
                line["refused"] = json!(true);
            }
            if let Some((decision, rule, reason)) = &t.decision {
                line["decision"] = json!(decision);
                line["rule"] = json!(rule);
                line["reason"] = json!(reason);
            }
            if t.stops {
                line["stops_session"] = json!(true);
            }
            if !t.notifications.is_empty() {
                line["notifications"] = json!(t.notifications);
            }
            if !t.errors.is_empty() {
                line["errors"] = json!(t.errors);
            }
            if !t.shadow.is_empty() {
                let shadow: Vec<Value> = t
                    .shadow
                    .iter()
                    .map(|(rule, decided)| match decided {
                        Some((d, why)) => json!({"rule": rule, "decision": d, "reason": why}),
                        None => json!({"rule": rule}),
                    })
                    .collect();
                line["shadow"] = json!(shadow);
            }
            writeln!(out, "{line}")?;
        } else {
            write!(
                out,
                "{file}:{} {} {}",
                r.line,
                r.payload.event_name,
                call_summary(r)
            )?;
            match &t.decision {
                Some((decision, rule, reason)) => {
                    writeln!(out, ": {decision} ({rule}): {}", clip(reason, 160))?
                }
                None if t.fired.is_empty() => writeln!(out, ": nothing live fired")?,
                None => writeln!(out, ": {} fired", t.fired.join(", "))?,
            }
            for (rule, decided) in &t.shadow {
                match decided {
                    Some((d, why)) => writeln!(
                        out,
                        "  shadow: {rule} would have decided {d}: {}",
                        clip(why, 160)
                    )?,
                    None => writeln!(out, "  shadow: {rule} would have fired")?,
                }
            }
            for e in &t.errors {
                writeln!(out, "  error: {e}")?;
            }
        }
    }
    Ok(())
}

/// The events a payload ticked, as trace lines (`{"hook": ..., ...the event}`).
fn write_trace(out: &mut impl Write, r: &Replayed) -> std::io::Result<()> {
    for t in &r.ticks {
        let Some(event) = &t.event else { continue };
        let line = warden_wire::v1::line::trace_line(t.hook, event);
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// What a rule did over the transcripts.
#[derive(Default)]
struct RuleSummary {
    fired: usize,
    decisions: BTreeMap<&'static str, usize>,
    stopped: BTreeSet<String>,
    examples: Vec<String>,
}

/// The summary of a backtest: per rule, and per session what would have been refused.
#[derive(Default)]
struct Summary {
    transcripts: usize,
    events: usize,
    rules: BTreeMap<String, RuleSummary>,
    /// Per transcript: (line, call, rule, reason) of each call that would have been refused.
    refused: BTreeMap<String, Vec<(usize, String, String, String)>>,
    errors: usize,
    /// Lines skipped as unreadable (too long, not JSON, another shape).
    skipped_lines: usize,
    /// Files (or folders) that could not be read.
    unreadable: usize,
    /// Files with no line of a Claude Code conversation.
    not_transcripts: usize,
}

impl Summary {
    fn add(&mut self, file: &str, r: &Replayed) {
        self.events += 1;
        if r.error.is_some() {
            self.errors += 1;
        }
        let at = format!("{file}:{}", r.line);
        for t in &r.ticks {
            self.errors += t.errors.len();
            for rule in &t.fired {
                let s = self.rules.entry(rule.clone()).or_default();
                s.fired += 1;
                if s.examples.len() < EXAMPLES {
                    s.examples.push(format!("{at} {}", call_summary(r)));
                }
            }
            if let Some((decision, rule, reason)) = &t.decision {
                let s = self.rules.entry(rule.clone()).or_default();
                *s.decisions.entry(decision).or_default() += 1;
                if t.stops {
                    s.stopped.insert(file.to_string());
                }
                if r.refused && t.hook == warden_core::Hook::OnToolCall {
                    self.refused.entry(file.to_string()).or_default().push((
                        r.line,
                        call_summary(r),
                        rule.clone(),
                        reason.clone(),
                    ));
                }
            }
        }
    }

    fn write(&self, out: &mut impl Write, json: bool, seconds: f64) -> std::io::Result<()> {
        if json {
            let rules: serde_json::Map<String, Value> = self
                .rules
                .iter()
                .map(|(id, s)| {
                    (
                        id.clone(),
                        json!({
                            "fired": s.fired,
                            "decisions": s.decisions,
                            "sessions_stopped": s.stopped,
                            "examples": s.examples,
                        }),
                    )
                })
                .collect();
            let v = json!({
                "transcripts": self.transcripts,
                "events": self.events,
                "seconds": seconds,
                "errors": self.errors,
                "skipped_lines": self.skipped_lines,
                "unreadable_files": self.unreadable,
                "not_transcripts": self.not_transcripts,
                "rules": rules,
                "refused": self
                    .refused
                    .iter()
                    .map(|(file, calls)| {
                        let calls: Vec<Value> = calls
                            .iter()
                            .map(|(line, call, rule, reason)| {
                                json!({"line": line, "call": call, "rule": rule, "reason": reason})
                            })
                            .collect();
                        (file.clone(), Value::Array(calls))
                    })
                    .collect::<serde_json::Map<String, Value>>(),
            });
            return writeln!(out, "{v:#}");
        }
        writeln!(
            out,
            "{} transcript(s), {} hook events replayed in {seconds:.2} s{}",
            self.transcripts,
            self.events,
            if self.errors > 0 {
                format!("; {} rule error(s)", self.errors)
            } else {
                String::new()
            }
        )?;
        if self.unreadable > 0 {
            writeln!(
                out,
                "{} file(s) or folder(s) could not be read (see the errors)",
                self.unreadable
            )?;
        }
        if self.not_transcripts > 0 {
            writeln!(
                out,
                "{} file(s) held no conversation of the agent and were passed over",
                self.not_transcripts
            )?;
        }
        if self.skipped_lines > 0 {
            writeln!(
                out,
                "{} line(s) could not be read and were skipped (see the warnings)",
                self.skipped_lines
            )?;
        }
        if self.rules.is_empty() {
            return writeln!(out, "no rule fired");
        }
        writeln!(out, "\nper rule:")?;
        for (id, s) in &self.rules {
            let decisions: Vec<String> = s
                .decisions
                .iter()
                .map(|(d, n)| format!("{d} {n}"))
                .collect();
            write!(out, "  {id}: fired on {} event(s)", s.fired)?;
            if !decisions.is_empty() {
                write!(out, "; {}", decisions.join(", "))?;
            }
            if !s.stopped.is_empty() {
                write!(out, "; would have stopped {} session(s)", s.stopped.len())?;
            }
            writeln!(out)?;
            for e in &s.examples {
                writeln!(out, "      e.g. {e}")?;
            }
        }
        if !self.refused.is_empty() {
            writeln!(out, "\nwould have been refused, per session:")?;
            for (file, calls) in &self.refused {
                writeln!(out, "  {file}: {} call(s)", calls.len())?;
                for (line, call, rule, reason) in calls {
                    writeln!(
                        out,
                        "    line {line}: {call} ({rule}): {}",
                        clip(reason, 120)
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// A payload's place in its transcript, to match the same payload under two rule sets.
fn key(r: &Replayed) -> (usize, String, String) {
    (
        r.line,
        r.payload.event_name.clone(),
        r.payload.tool_use_id.clone().unwrap_or_default(),
    )
}

/// What the decisive part of a payload's answer was: refused, asked, stopped the session, or
/// sent the agent back to work.
///
/// As the agent would have taken the answer (a `continue` past `max_continues` lets the agent
/// stop; a rewrite without `allow` is asked about; an ask where the agent cannot ask is a
/// refusal), with the rule that decided.
fn verdict(r: &Replayed) -> Option<(&'static str, String)> {
    let word = if r.stopped {
        "stop the session at"
    } else if r.refused || r.prompt_refused {
        "refuse"
    } else if r.asked {
        "ask about"
    } else if r.sent_back {
        "send the agent back at"
    } else {
        return None;
    };
    let rule = r
        .ticks
        .iter()
        .rev()
        .find_map(|t| t.decision.as_ref().map(|d| d.1.clone()))
        .unwrap_or_else(|| "warden".to_string());
    Some((word, rule))
}

/// What changes between two rule sets, per rule: (rule, what, newly or no longer) to the
/// places.
#[derive(Default)]
struct Changes {
    by: BTreeMap<Change, Vec<Place>>,
}

/// A change: the rule, what it does (`refuse`...), and whether it now does it (or no longer).
type Change = (String, &'static str, bool);
/// Where: `file:line`, and the call.
type Place = (String, String);

impl Changes {
    fn compare(&mut self, file: &str, old: &[Replayed], new: &[Replayed]) {
        let before: HashMap<_, _> = old.iter().map(|r| (key(r), verdict(r))).collect();
        let after: HashMap<_, _> = new.iter().map(|r| (key(r), verdict(r))).collect();
        let mut places: BTreeSet<_> = before.keys().cloned().collect();
        places.extend(after.keys().cloned());
        let payload_of = |k: &(usize, String, String)| {
            new.iter()
                .chain(old)
                .find(|r| &key(r) == k)
                .map(call_summary)
                .unwrap_or_default()
        };
        for k in places {
            let (b, a) = (
                before.get(&k).cloned().flatten(),
                after.get(&k).cloned().flatten(),
            );
            // The same verdict by the same rule is no change; the same verdict by another
            // rule is one (the rule that took it over newly does it, the other no longer).
            if b == a {
                continue;
            }
            let place = (format!("{file}:{}", k.0), payload_of(&k));
            if let Some((word, rule)) = a {
                self.by
                    .entry((rule, word, true))
                    .or_default()
                    .push(place.clone());
            }
            if let Some((word, rule)) = b {
                self.by.entry((rule, word, false)).or_default().push(place);
            }
        }
    }

    fn write(&self, out: &mut impl Write, json: bool) -> std::io::Result<()> {
        if json {
            let list: Vec<Value> = self
                .by
                .iter()
                .map(|((rule, word, newly), places)| {
                    json!({
                        "rule": rule,
                        "change": format!("{} {word}", if *newly { "newly" } else { "no longer" }),
                        "events": places.len(),
                        "sessions": places.iter().map(|p| p.0.rsplit_once(':').map_or(p.0.as_str(), |(f, _)| f)).collect::<BTreeSet<_>>().len(),
                        "places": places.iter().map(|(at, what)| json!({"at": at, "call": what})).collect::<Vec<_>>(),
                    })
                })
                .collect();
            return writeln!(out, "{:#}", json!({ "changes": list }));
        }
        if self.by.is_empty() {
            return writeln!(out, "no decision changes between the two rule sets");
        }
        for ((rule, word, newly), places) in &self.by {
            let sessions: BTreeSet<&str> = places
                .iter()
                .map(|p| p.0.rsplit_once(':').map_or(p.0.as_str(), |(f, _)| f))
                .collect();
            writeln!(
                out,
                "{rule} would {} {word} {} call(s) in {} session(s):",
                if *newly { "newly" } else { "no longer" },
                places.len(),
                sessions.len()
            )?;
            for (at, what) in places.iter().take(10) {
                writeln!(out, "  {at} {what}")?;
            }
            if places.len() > 10 {
                writeln!(out, "  ... and {} more", places.len() - 10)?;
            }
        }
        Ok(())
    }
}

/// A progress line on stderr, when it is a terminal: files and bytes done.
struct Progress {
    on: bool,
    files: usize,
    done_files: usize,
    total: u64,
    done: u64,
    shown_at: u64,
}

impl Progress {
    fn new(files: usize, total: u64) -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            files,
            done_files: 0,
            total,
            done: 0,
            shown_at: 0,
        }
    }

    fn bytes(&mut self, n: u64) {
        self.done += n;
        if self.on && self.done - self.shown_at >= 1 << 20 {
            self.show();
        }
    }

    fn file_done(&mut self) {
        self.done_files += 1;
        if self.on {
            self.show();
        }
    }

    fn show(&mut self) {
        self.shown_at = self.done;
        let share = if self.total == 0 {
            1.0
        } else {
            (self.done as f64 / self.total as f64).min(1.0)
        };
        let width = 30;
        let filled = (share * width as f64) as usize;
        eprint!(
            "\r[{}{}] {}/{} files, {:.1}/{:.1} MB ",
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.done_files,
            self.files,
            self.done as f64 / 1e6,
            self.total as f64 / 1e6
        );
    }

    fn clear(&self) {
        if self.on {
            eprint!("\r{}\r", " ".repeat(70));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_whole_across_the_readers_buffer_and_without_their_ends() {
        let text = b"first line\r\n\nsecond, longer than the buffer\nlast without an end";
        for capacity in [1, 3, 7, 64] {
            let reader = std::io::BufReader::with_capacity(capacity, &text[..]);
            let mut progress = Progress::new(1, text.len() as u64);
            progress.on = false;
            let mut lines = Vec::new();
            let too_long = each_line(reader, 25, &mut progress, |l| {
                lines.push(String::from_utf8(l.to_vec()).unwrap())
            })
            .unwrap();
            // The blank line keeps its number; the line over the limit is passed on empty.
            assert_eq!(
                lines,
                ["first line", "", "", "last without an end"],
                "capacity {capacity}"
            );
            assert_eq!(too_long, 1);
            assert_eq!(progress.done, text.len() as u64);
        }
    }
}
