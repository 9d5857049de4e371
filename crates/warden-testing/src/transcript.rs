//! A rule test whose events are a real session: `transcript = "session.jsonl"` names a Claude
//! Code transcript (relative to the test file), and the case runs through the events it makes,
//! as a backtest makes them (`warden replay --from claude-code`), on the case's own session with
//! its presets. The events are numbered from 0 in the order they are ticked, as `warden replay
//! --from claude-code --print-trace` prints them; `fires` and the other top-level expectations
//! check the last one.
//!
//! The events depend on the rules: a call the rules refuse gets no result event, as live. The
//! hook's settings are Claude Code's defaults (`[claude_code]` of a configuration is not read).

use std::path::{Path, PathBuf};

use warden_agents::{Backtest, Options};
use warden_core::{ClaudeCodeConfig, Outcome, Session, Warden};
use warden_input::{Doc, Table};
use warden_load::DEFAULT_ID;

use crate::{Expectation, LAST, check};

/// The largest transcript a test reads whole.
const MAX_TRANSCRIPT: u64 = 64 << 20;

/// The `transcript` of a case, resolved against the test file's folder; a transcript that
/// cannot be read is a diagnostic on the field. `Err(())`: the field is given, and wrong.
pub(crate) fn read_path(
    doc: &mut Doc,
    t: &mut Table<'_>,
    name: &str,
) -> Result<Option<PathBuf>, ()> {
    if !t.has("transcript") {
        return Ok(None);
    }
    let at = t.string(doc, "transcript").ok_or(())?;
    let base = doc.file.path().parent().unwrap_or(Path::new("."));
    let path = base.join(&at.value);
    let (why, help) = match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => return Ok(Some(path)),
        Ok(_) => (
            "is not a file".to_string(),
            "name a Claude Code transcript (a .jsonl file)",
        ),
        Err(e) => (
            format!("cannot be read: {e}"),
            "the path is relative to the test file's folder",
        ),
    };
    doc.error(
        at.span,
        &t.field("transcript"),
        format!("test `{name}`: the transcript `{}` {why}", path.display()),
        Some(help.into()),
    );
    Err(())
}

/// Runs a case through the events of the transcript at `path`, in `session`, checking each
/// event against its expectations (the `LAST` ones against the last event).
pub(crate) fn run(
    warden: &Warden,
    session: Session,
    user: &str,
    path: &Path,
    expect: &[Expectation],
    failures: &mut Vec<String>,
) {
    let text = match std::fs::metadata(path) {
        Ok(m) if m.len() > MAX_TRANSCRIPT => Err(format!(
            "it is {} MB; a test's transcript may be at most {} MB (cut the session to the part the test checks)",
            m.len() >> 20,
            MAX_TRANSCRIPT >> 20
        )),
        Ok(_) => std::fs::read(path).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            failures.push(format!(
                "the transcript {} cannot be read: {e}",
                path.display()
            ));
            return;
        }
    };
    let config = ClaudeCodeConfig::default();
    let opts = Options {
        user: user.to_string(),
        project: DEFAULT_ID.to_string(),
        project_dir: None,
    };
    let last: Vec<&Expectation> = expect.iter().filter(|x| x.event == LAST).collect();
    // What each event found, as an event in the middle and as the last one (known at the end).
    let mut found = Vec::new();
    let mut pending: Option<(Vec<String>, Vec<String>)> = None;
    let mut ticks = 0usize;
    let mut each = |hook: warden_core::Hook, outcome: &Outcome| {
        let _ = hook;
        let i = ticks;
        ticks += 1;
        let here: Vec<&Expectation> = expect.iter().filter(|x| x.event == i).collect();
        let mut as_middle = Vec::new();
        check(i, outcome, &here, &mut as_middle);
        let mut as_last = Vec::new();
        let with_last: Vec<&Expectation> = here.iter().chain(&last).copied().collect();
        check(i, outcome, &with_last, &mut as_last);
        if let Some((middle, _)) = pending.replace((as_middle, as_last)) {
            found.extend(middle);
        }
    };
    {
        let mut b = Backtest::in_session(warden, &config, opts, session).on_tick(&mut each);
        for line in text.split(|&c| c == b'\n') {
            b.line(line);
        }
        b.finish();
    }
    if let Some((_, as_last)) = pending {
        found.extend(as_last);
    }
    failures.extend(found);
    for x in expect {
        if x.event != LAST && x.event >= ticks {
            failures.push(format!(
                "there is no event {}: the transcript makes {ticks} (numbered from 0; `warden replay --from claude-code TRANSCRIPT --print-trace` lists them)",
                x.event
            ));
        }
    }
}
