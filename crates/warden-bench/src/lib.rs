//! Warden's benchmarks: the scenarios, each measured against a floor in the same run, because
//! the machines Warden is measured on are shared and noisy and only ratios carry over.
//!
//! `warden bench` prints [`run`]'s report: the tick scenarios ([`run_ticks`]) and the
//! realistic ones ([`run_realistic`]: a long session, many sessions, plugin state that grows,
//! loading rules cold); `cargo bench --bench tick` measures the tick scenarios with criterion.
//!
//! Each scenario writes its text lines to a [`Report`] and records its figures in it, each
//! with a stable id and the floor it is compared with (what `warden bench --json` prints).
//!
//! ```
//! let mut out = Vec::new();
//! let mut report = warden_bench::Report::text(&mut out);
//! warden_bench::run_ticks(&mut report, 50, 1).unwrap();
//! warden_bench::run_realistic(&mut report, 1, warden_bench::Sizes::SMALL).unwrap();
//! assert!(report.figures().iter().any(|f| f.id == "tick.hundred_rules.warden"));
//! drop(report);
//! assert!(String::from_utf8(out).unwrap().contains("x the floor"));
//! ```

#![warn(missing_docs)]

mod long_session;
mod measure;
mod realistic;
mod repeat;
mod report;
mod scenarios;
mod shell;

pub use long_session::long_session;
pub use measure::run_ticks;
pub use realistic::{Sizes, run_realistic};
pub use repeat::{REPEATABLE, RepeatError, repeat};
pub use report::{Figure, Report};
pub use shell::{TYPICAL, hostile_commands, run_shell};

/// Measures every scenario and writes the report to `out` (its text, and its figures): the ticks ([`run_ticks`]: `ticks`
/// ticks per round, the median of `rounds` rounds), then the realistic scenarios at full size
/// ([`run_realistic`], the median of `rounds` rounds), then judging shell commands
/// ([`run_shell`]).
pub fn run(out: &mut Report<'_>, ticks: u32, rounds: u32) -> std::io::Result<()> {
    run_ticks(out, ticks, rounds)?;
    run_realistic(out, rounds, Sizes::FULL)?;
    run_shell(out, rounds)
}
pub use scenarios::*;
