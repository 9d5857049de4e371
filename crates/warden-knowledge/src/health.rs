//! The health gate: whether the enrichment capability should register at all.

use crate::settings::Settings;
use crate::sources::{Refusal, Source};

/// Whether the capability registers, with the numbers it was decided on and, when it does not
/// register, every reason why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// `enabled`, all required sources counted and enough tokens: the capability registers.
    pub registered: bool,
    /// Whether `[knowledge] enabled` is true.
    pub enabled: bool,
    /// Sources marked `required` that loaded.
    pub required_loaded: u64,
    /// How many had to (`[knowledge.health] required_sources`).
    pub required_sources: u64,
    /// Ids of required sources that did not load.
    pub missing_required: Vec<String>,
    /// Estimated tokens of all loaded sources.
    pub total_tokens: u64,
    /// How many there had to be (`[knowledge.health] min_tokens`).
    pub min_tokens: u64,
    /// Why it does not register (empty when it does).
    pub reasons: Vec<String>,
}

pub(crate) fn check(settings: &Settings, sources: &[Source], refused: &[Refusal]) -> Health {
    let required_loaded = sources.iter().filter(|s| s.def.required).count() as u64;
    let total_tokens = sources.iter().map(|s| s.tokens).sum();
    let missing_required: Vec<String> = refused
        .iter()
        .filter(|r| r.required)
        .map(|r| r.source.clone())
        .collect();
    let t = settings.health;
    let mut reasons = Vec::new();
    if !settings.enabled {
        reasons.push("it is not enabled: set `enabled = true` in [knowledge]".to_string());
    }
    if required_loaded < t.required_sources {
        let missing = if missing_required.is_empty() {
            String::new()
        } else {
            format!(" (not loaded: {})", missing_required.join(", "))
        };
        reasons.push(format!(
            "{required_loaded} of the {} required sources loaded{missing}",
            t.required_sources
        ));
    }
    if total_tokens < t.min_tokens {
        reasons.push(format!(
            "the loaded sources hold {total_tokens} tokens, {} needed",
            t.min_tokens
        ));
    }
    Health {
        registered: reasons.is_empty(),
        enabled: settings.enabled,
        required_loaded,
        required_sources: t.required_sources,
        missing_required,
        total_tokens,
        min_tokens: t.min_tokens,
        reasons,
    }
}
