//! `warden sessions`: the sessions saved in the database (durable sessions: Claude Code's,
//! the service's, and any an embedder opened with `Warden::open_session`).

use std::process::ExitCode;

use clap::Subcommand;
use warden_core::Config;

use warden_wire::v1;

use crate::json_out;
use crate::setup::open_store;

/// What to do with saved sessions.
#[derive(Subcommand)]
pub(crate) enum SessionsCommand {
    /// The saved sessions, most recently touched first.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One saved session: what Warden keeps of it (facts, mode, decorator memory, waiting
    /// notifications, running behaviors and scripts), as JSON.
    Show {
        /// The session id.
        id: String,
    },
    /// Delete a saved session (a process that has it open starts it afresh at its next tick).
    Rm {
        /// The session id.
        id: String,
    },
    /// Delete the sessions not touched for a number of days (`[sessions] retention_days`
    /// when not given).
    Prune {
        /// Days.
        #[arg(long)]
        days: Option<f64>,
    },
}

pub(crate) fn run(config: &Config, command: SessionsCommand) -> Result<ExitCode, String> {
    let store = open_store(config, "reading saved sessions")?;
    match command {
        SessionsCommand::List { limit, json } => {
            let sessions = store.sessions(limit).map_err(|e| e.to_string())?;
            if json {
                json_out(
                    &sessions
                        .iter()
                        .map(v1::SavedSession::from)
                        .collect::<Vec<_>>(),
                )?;
            } else if sessions.is_empty() {
                println!("no saved sessions");
            } else {
                println!(
                    "{:<38} {:>7} {:>5}  {:<19}  {:<12} {:<12}",
                    "session", "events", "ended", "last touched (UTC)", "user", "project"
                );
                for s in sessions {
                    println!(
                        "{:<38} {:>7} {:>5}  {:<19}  {:<12} {:<12}",
                        s.id,
                        s.events,
                        if s.ended { "yes" } else { "no" },
                        utc(s.updated_at),
                        s.user,
                        s.project
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SessionsCommand::Show { id } => match store.load_session(&id).map_err(|e| e.to_string())? {
            Some(s) => {
                let shown = match warden_core::saved_snapshot(&s) {
                    Ok(snapshot) => serde_json::json!({
                        "session": v1::SavedSession::from(&s.summary),
                        "saved": snapshot,
                    }),
                    // What a damaged save holds is what its owner needs to see: as stored.
                    Err(reason) => serde_json::json!({
                        "session": v1::SavedSession::from(&s.summary),
                        "unreadable": reason.to_string(),
                        "saved": serde_json::from_str::<serde_json::Value>(&s.snapshot)
                            .unwrap_or(serde_json::Value::String(s.snapshot.clone())),
                        "entries": s.entries,
                    }),
                };
                json_out(&shown)?;
                Ok(ExitCode::SUCCESS)
            }
            None => Err(format!(
                "no saved session {id:?}; `warden sessions list` shows the saved ones"
            )),
        },
        SessionsCommand::Rm { id } => {
            if store.delete_session(&id).map_err(|e| e.to_string())? {
                println!("deleted session {id}");
                Ok(ExitCode::SUCCESS)
            } else {
                Err(format!(
                    "no saved session {id:?}; `warden sessions list` shows the saved ones"
                ))
            }
        }
        SessionsCommand::Prune { days } => {
            let days = days.or(config.retention_days).ok_or_else(|| {
                "say how old: `--days 30`, or `[sessions] retention_days` in warden.toml"
                    .to_string()
            })?;
            if days.is_nan() || days < 0.0 {
                return Err("--days must be 0 or more".into());
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            let n = store
                .prune_sessions(now - days * 86_400.0)
                .map_err(|e| e.to_string())?;
            println!("deleted {n} session(s) not touched for {days} day(s)");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
fn utc(secs: f64) -> String {
    let secs = secs.max(0.0) as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc_dates() {
        assert_eq!(super::utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(super::utc(1_764_000_000.0), "2025-11-24 16:00:00");
    }
}
