//! The `[knowledge]` table of a sources file: budget, modes and health thresholds.

/// How enrichment behaves; every number the seed hard-coded is here, with its default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Whether the operator switched enrichment on (`enabled`, default `false`).
    pub enabled: bool,
    /// The configured cap on the knowledge budget, in tokens (`budget_cap`, default 30 000).
    pub budget_cap: u64,
    /// The share of the context window the budget may take, in percent (`budget_percent`,
    /// default 15). Kept as an integer so that `floor(window × 0.15)` is exact.
    pub budget_percent: u64,
    /// A source that does not fit whole is cut to fit only if at least this many tokens are
    /// left (`min_truncated_tokens`, default 500); a smaller piece is not worth its header.
    pub min_truncated_tokens: u64,
    /// The tag every query has and reduced mode keeps to (`core_tag`, default `core`).
    pub core_tag: String,
    /// Context-window thresholds of the modes (`[knowledge.modes]`).
    pub modes: ModeThresholds,
    /// When the capability registers (`[knowledge.health]`).
    pub health: HealthThresholds,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enabled: false,
            budget_cap: 30_000,
            budget_percent: 15,
            min_truncated_tokens: 500,
            core_tag: "core".into(),
            modes: ModeThresholds::default(),
            health: HealthThresholds::default(),
        }
    }
}

impl Settings {
    /// The knowledge budget for a context window: `min(budget_cap, floor(window ×
    /// budget_percent / 100))`, computed in integers.
    pub fn budget(&self, context_window: u64) -> u64 {
        let share = u128::from(context_window) * u128::from(self.budget_percent) / 100;
        u64::try_from(share)
            .unwrap_or(u64::MAX)
            .min(self.budget_cap)
    }
}

/// Context-window thresholds: below `reduced_from` tokens enrichment is unavailable; from
/// `reduced_from` to below `full_from` only core-tagged sources are used; from `full_from` on,
/// every source with a matching tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeThresholds {
    /// First window size of reduced mode (`reduced_from`, default 30 000).
    pub reduced_from: u64,
    /// First window size of full mode (`full_from`, default 100 000).
    pub full_from: u64,
}

impl Default for ModeThresholds {
    fn default() -> Self {
        ModeThresholds {
            reduced_from: 30_000,
            full_from: 100_000,
        }
    }
}

impl ModeThresholds {
    /// The mode for a context window of `tokens`.
    pub fn mode(&self, tokens: u64) -> Mode {
        if tokens < self.reduced_from {
            Mode::Unavailable
        } else if tokens < self.full_from {
            Mode::Reduced
        } else {
            Mode::Full
        }
    }
}

/// When the capability registers: enough required sources loaded, and enough tokens in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthThresholds {
    /// How many sources marked `required` must have loaded (`required_sources`, default 3).
    pub required_sources: u64,
    /// How many tokens the loaded sources must hold together (`min_tokens`, default 5 000).
    pub min_tokens: u64,
}

impl Default for HealthThresholds {
    fn default() -> Self {
        HealthThresholds {
            required_sources: 3,
            min_tokens: 5_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_the_smaller_of_cap_and_share() {
        let s = Settings {
            budget_cap: 10_000,
            ..Settings::default()
        };
        assert_eq!(s.budget(30_000), 4_500);
        assert_eq!(s.budget(66_666), 9_999);
        assert_eq!(s.budget(66_667), 10_000);
        assert_eq!(s.budget(1_000_000), 10_000);
        assert_eq!(s.budget(0), 0);
        assert_eq!(Settings::default().budget(u64::MAX), 30_000);
    }

    #[test]
    fn budget_is_floor_of_fifteen_percent() {
        let s = Settings {
            budget_cap: u64::MAX,
            ..Settings::default()
        };
        for w in [0, 1, 6, 7, 19, 20, 29_999, 30_000, 99_999, 100_000, 133_333] {
            assert_eq!(s.budget(w), (w as f64 * 0.15).floor() as u64, "{w}");
        }
    }
}

/// How much knowledge a context window allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// The window is too small: no enrichment.
    Unavailable,
    /// Only sources tagged with the core tag.
    Reduced,
    /// Every source with a tag the query has.
    Full,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Unavailable => "unavailable",
            Mode::Reduced => "reduced",
            Mode::Full => "full",
        })
    }
}
