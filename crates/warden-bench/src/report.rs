//! Where the scenarios write what they measured: the text report `warden bench` prints (the
//! scenarios write its lines as before, through [`std::io::Write`]) and, beside it, each
//! figure with a stable id, its unit, and the floor or baseline it is compared with, which
//! `warden bench --json` prints for scripts and CI.

use std::io::{self, Write};

use serde_json::Value;
use warden_wire::v1;

/// One measured figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// A stable id: the scenario and what was measured, dotted (`tick.hundred_rules.warden`).
    pub id: String,
    /// The figure.
    pub value: f64,
    /// Its unit: `ns`, `us`, `ms`, `KB`, `bytes` or `x` (a ratio).
    pub unit: &'static str,
    /// The id of the figure it is compared with, measured in the same run.
    pub baseline: Option<String>,
}

/// The report of a run: text lines for a reader, figures for a program.
pub struct Report<'a> {
    text: Box<dyn Write + 'a>,
    figures: Vec<Figure>,
}

impl<'a> Report<'a> {
    /// A report whose text goes to `out`.
    pub fn text(out: &'a mut dyn Write) -> Self {
        Report {
            text: Box::new(out),
            figures: Vec::new(),
        }
    }

    /// A report that keeps the figures only (the text is dropped): for `--json`.
    pub fn figures_only() -> Report<'static> {
        Report {
            text: Box::new(io::sink()),
            figures: Vec::new(),
        }
    }

    /// Records a figure.
    pub fn figure(&mut self, id: &str, value: f64, unit: &'static str) {
        self.figures.push(Figure {
            id: id.to_string(),
            value,
            unit,
            baseline: None,
        });
    }

    /// Records a figure measured beside `baseline` (the id of a figure recorded before it).
    pub fn beside(&mut self, id: &str, value: f64, unit: &'static str, baseline: &str) {
        self.figures.push(Figure {
            id: id.to_string(),
            value,
            unit,
            baseline: Some(baseline.to_string()),
        });
    }

    /// The figures recorded so far.
    pub fn figures(&self) -> &[Figure] {
        &self.figures
    }

    /// The figures as `warden bench --json` prints them: each with its id, value and unit, and
    /// where it was measured beside another, that one's id and the ratio of the two.
    pub fn to_json(&self, ticks: u32, rounds: u32) -> Value {
        let finite = |x: f64| x.is_finite().then_some(x);
        let figures = self
            .figures
            .iter()
            .map(|f| v1::BenchFigure {
                id: &f.id,
                value: finite(f.value),
                unit: f.unit,
                baseline: f.baseline.as_deref(),
                ratio: f.baseline.as_ref().and_then(|b| {
                    let base = self.figures.iter().find(|g| &g.id == b)?;
                    Some(finite(f.value / base.value))
                }),
            })
            .collect();
        // Numbers, text and nulls: writing them does not fail.
        serde_json::to_value(v1::BenchRun {
            ticks,
            rounds,
            figures,
        })
        .unwrap_or_default()
    }
}

impl Write for Report<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.text.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.text.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn figures_carry_their_baseline_and_ratio() {
        let mut text = Vec::new();
        let mut r = Report::text(&mut text);
        writeln!(r, "a line").unwrap();
        r.figure("t.floor", 100.0, "ns");
        r.beside("t.warden", 250.0, "ns", "t.floor");
        r.figure("t.nothing", f64::NAN, "ns");
        let j = r.to_json(10, 3);
        drop(r);
        assert_eq!(text, b"a line\n");
        assert_eq!(j["figures"][1]["ratio"], json!(2.5));
        assert_eq!(j["figures"][1]["baseline"], json!("t.floor"));
        assert_eq!(j["figures"][2]["value"], Value::Null);
        assert_eq!(
            (j["ticks"].clone(), j["rounds"].clone()),
            (json!(10), json!(3))
        );
    }
}
