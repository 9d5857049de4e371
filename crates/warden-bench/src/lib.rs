//! Warden's benchmarks: the scenarios, each measured against a floor in the same run, because
//! the machines Warden is measured on are shared and noisy and only ratios carry over.
//!
//! `warden bench` prints [`run`]'s report; `cargo bench --bench tick` measures the same
//! scenarios with criterion.
//!
//! ```
//! let mut out = Vec::new();
//! warden_bench::run(&mut out, 50, 1).unwrap();
//! assert!(String::from_utf8(out).unwrap().contains("x the floor"));
//! ```

#![warn(missing_docs)]

mod measure;
mod scenarios;

pub use measure::run;
pub use scenarios::*;
