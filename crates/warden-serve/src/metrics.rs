//! What the server counts, and `GET /v1/metrics` in Prometheus's text format (version
//! 0.0.4): ticks per hook, firings per rule, decisions, rule errors, and a histogram of tick
//! latency. The same per-rule figures give the Settings page its "last fired" and fire count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use warden_core::{Hook, Outcome};

/// Upper bounds of the tick latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5,
];

/// A rule's firings since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RuleStats {
    /// How often it fired.
    pub fires: u64,
    /// When it last fired, in seconds since the Unix epoch.
    pub last_fired: f64,
    /// How often it fired in shadow (nothing it decided applied).
    pub shadow_fires: u64,
    /// How often, in shadow, it decided to refuse (`deny` or `stop`) what the live rules let
    /// run: the calls it would have newly refused.
    pub shadow_refusals: u64,
}

#[derive(Debug, Default)]
struct Tallies {
    ticks: BTreeMap<&'static str, u64>,
    rules: BTreeMap<String, RuleStats>,
    decisions: BTreeMap<&'static str, u64>,
    /// Decisions of rules in shadow, by rule and decision.
    shadow_decisions: BTreeMap<(String, &'static str), u64>,
    rule_errors: u64,
    shadow_errors: u64,
    /// Per bucket (the last one is +Inf), not cumulative.
    latency: [u64; BUCKETS.len() + 1],
    latency_sum: f64,
}

/// The server's counters. One lock per tick, held for a few map updates.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    tallies: Mutex<Tallies>,
    /// Requests answered with a 4xx or 5xx, by class.
    client_errors: AtomicU64,
    /// Ticks running now.
    in_flight: AtomicU64,
    server_errors: AtomicU64,
}

impl Metrics {
    /// Counts one tick: its hook, how long it took, what fired and what was decided.
    pub(crate) fn record_tick(&self, hook: Hook, took: Duration, outcome: &Outcome, now: f64) {
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(BUCKETS.len());
        let mut t = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        *t.ticks.entry(hook.name()).or_default() += 1;
        t.latency[bucket] += 1;
        t.latency_sum += seconds;
        let change = outcome.mode_change.as_ref().map(|c| &*c.outcome);
        for o in change.into_iter().chain([outcome]) {
            for rule in o.fired() {
                let s = match t.rules.get_mut(rule) {
                    Some(s) => s,
                    None => t.rules.entry(rule.to_string()).or_default(),
                };
                s.fires += 1;
                s.last_fired = now;
            }
            for rule in o.shadow_fired() {
                t.rules.entry(rule.to_string()).or_default().shadow_fires += 1;
            }
            let live_refuses = o.refused().is_some();
            for (rule, decision, _) in o.shadow_decisions() {
                *t.shadow_decisions
                    .entry((rule.to_string(), decision))
                    .or_default() += 1;
                if matches!(decision, "deny" | "stop") && !live_refuses {
                    t.rules.entry(rule.to_string()).or_default().shadow_refusals += 1;
                }
            }
            t.shadow_errors += o.shadow_errors.len() as u64;
        }
        if let Some(r) = &outcome.ruling {
            *t.decisions.entry(r.name()).or_default() += 1;
        }
        t.rule_errors += outcome.errors.len() as u64;
    }

    /// A tick starts; the guard counts it until it is dropped.
    pub(crate) fn tick_started(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// Counts a request's status.
    pub(crate) fn record_status(&self, status: u16) {
        match status {
            400..=499 => self.client_errors.fetch_add(1, Ordering::Relaxed),
            500..=599 => self.server_errors.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
    }

    /// A rule's firings so far.
    pub(crate) fn rule(&self, key: &str) -> RuleStats {
        let t = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        t.rules.get(key).copied().unwrap_or_default()
    }

    /// The exposition: every counter, with `sessions` (open now) and `uptime` as gauges.
    pub(crate) fn render(&self, sessions: usize, uptime: Duration, generation: u64) -> String {
        let t = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        let o = &mut out;
        family(o, "warden_ticks_total", "counter", "Ticks run, by hook.");
        for (hook, n) in &t.ticks {
            let _ = writeln!(o, "warden_ticks_total{{hook=\"{hook}\"}} {n}");
        }
        family(
            o,
            "warden_rule_firings_total",
            "counter",
            "Firings, by rule.",
        );
        for (rule, s) in t.rules.iter().filter(|(_, s)| s.fires > 0) {
            let _ = writeln!(
                o,
                "warden_rule_firings_total{{rule=\"{}\"}} {}",
                label(rule),
                s.fires
            );
        }
        family(
            o,
            "warden_shadow_firings_total",
            "counter",
            "Firings of rules in shadow (nothing they decided applied), by rule.",
        );
        for (rule, s) in t.rules.iter().filter(|(_, s)| s.shadow_fires > 0) {
            let _ = writeln!(
                o,
                "warden_shadow_firings_total{{rule=\"{}\"}} {}",
                label(rule),
                s.shadow_fires
            );
        }
        family(
            o,
            "warden_shadow_decisions_total",
            "counter",
            "What rules in shadow would have decided, by rule and decision.",
        );
        for ((rule, d), n) in &t.shadow_decisions {
            let _ = writeln!(
                o,
                "warden_shadow_decisions_total{{rule=\"{}\",decision=\"{d}\"}} {n}",
                label(rule)
            );
        }
        family(
            o,
            "warden_shadow_errors_total",
            "counter",
            "Errors of rules in shadow.",
        );
        let _ = writeln!(o, "warden_shadow_errors_total {}", t.shadow_errors);
        family(
            o,
            "warden_decisions_total",
            "counter",
            "Rulings, by decision (rewrite: arguments only).",
        );
        for (d, n) in &t.decisions {
            let _ = writeln!(o, "warden_decisions_total{{decision=\"{d}\"}} {n}");
        }
        family(
            o,
            "warden_rule_errors_total",
            "counter",
            "Errors isolated to a rule, or to an event.",
        );
        let _ = writeln!(o, "warden_rule_errors_total {}", t.rule_errors);
        family(
            o,
            "warden_http_errors_total",
            "counter",
            "Requests answered with an error, by class.",
        );
        for (class, n) in [("4xx", &self.client_errors), ("5xx", &self.server_errors)] {
            let _ = writeln!(
                o,
                "warden_http_errors_total{{class=\"{class}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        family(
            o,
            "warden_tick_duration_seconds",
            "histogram",
            "Time a tick took in the engine.",
        );
        let mut cumulative = 0;
        for (i, n) in t.latency.iter().enumerate() {
            cumulative += n;
            let le = BUCKETS.get(i).map_or("+Inf".to_string(), f64::to_string);
            let _ = writeln!(
                o,
                "warden_tick_duration_seconds_bucket{{le=\"{le}\"}} {cumulative}"
            );
        }
        let _ = writeln!(o, "warden_tick_duration_seconds_sum {}", t.latency_sum);
        let _ = writeln!(o, "warden_tick_duration_seconds_count {cumulative}");
        family(
            o,
            "warden_sessions",
            "gauge",
            "Sessions open in this server.",
        );
        let _ = writeln!(o, "warden_sessions {sessions}");
        family(o, "warden_ticks_in_flight", "gauge", "Ticks running now.");
        let _ = writeln!(
            o,
            "warden_ticks_in_flight {}",
            self.in_flight.load(Ordering::Relaxed)
        );
        family(
            o,
            "warden_program_generation",
            "gauge",
            "The rules' generation, bumped by each applied reload.",
        );
        let _ = writeln!(o, "warden_program_generation {generation}");
        family(
            o,
            "warden_uptime_seconds",
            "gauge",
            "Seconds since the server started.",
        );
        let _ = writeln!(o, "warden_uptime_seconds {}", uptime.as_secs_f64());
        out
    }
}

/// A tick in flight, counted until dropped.
#[derive(Debug)]
pub(crate) struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value as the text format requires: backslash, double quote and line feed escaped.
fn label(value: &str) -> String {
    let mut s = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
