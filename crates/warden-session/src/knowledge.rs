//! Knowledge enrichment, wired in: loading the sources file (its problems become diagnostics),
//! the health gate, reloading, and enriching a query for a session.
//!
//! The pipeline itself (gates, classification, selection, assembly) is `warden-knowledge`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use warden_knowledge::{Enrichment, Health, Knowledge, LoadError};

use warden_input::Diagnostic;

/// Where the knowledge sources are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnowledgeConfig {
    /// The sources file.
    pub sources: PathBuf,
    /// The project root every source path is relative to.
    pub root: PathBuf,
    /// Enrich every query at `on_query_start` (otherwise only rules' `enrich_context`).
    pub at_query_start: bool,
}

/// The knowledge in force, and what was said about it when it loaded.
#[derive(Default)]
pub struct KnowledgeState {
    /// The loaded pipeline (also when it did not register, for `warden enrich` to explain).
    pub knowledge: Option<Arc<Knowledge>>,
    /// Whether it passed the health gate.
    pub health: Option<Health>,
    /// Problems, refusals, advisories and the health gate's reasons.
    pub diagnostics: Vec<Diagnostic>,
}

impl KnowledgeState {
    /// The pipeline, if it registered.
    pub(crate) fn registered(&self) -> Option<&Arc<Knowledge>> {
        self.knowledge
            .as_ref()
            .filter(|_| self.health.as_ref().is_some_and(|h| h.registered))
    }

    /// Loads `config` afresh.
    pub fn load(config: &KnowledgeConfig) -> KnowledgeState {
        Self::from_result(Knowledge::load(&config.sources, &config.root))
    }

    /// Reloads from the files the current state was read from.
    pub(crate) fn reload(&self, config: &KnowledgeConfig) -> KnowledgeState {
        match &self.knowledge {
            Some(k) => Self::from_result(k.reload()),
            None => Self::load(config),
        }
    }

    fn from_result(result: Result<Knowledge, LoadError>) -> KnowledgeState {
        match result {
            Ok(k) => {
                let mut diagnostics = Vec::new();
                for r in k.refused() {
                    diagnostics.push(
                        Diagnostic::io_warning(k.sources_file(), r.to_string())
                            .with_help("the other sources load; fix or remove this one"),
                    );
                }
                for a in k.advisories() {
                    diagnostics.push(Diagnostic::io_warning(
                        k.sources_file(),
                        format!(
                            "curated source `{}` ({}) line {} looks like an instruction to the agent ({}); it is loaded because it is curated",
                            a.source, a.path, a.line, a.pattern
                        ),
                    ));
                }
                let health = k.health();
                if !health.registered {
                    diagnostics.push(
                        Diagnostic::io_warning(
                            k.sources_file(),
                            format!(
                                "knowledge enrichment is not registered: {}",
                                health.reasons.join("; ")
                            ),
                        )
                        .with_help(
                            "queries run without enrichment until the sources file is fixed",
                        ),
                    );
                }
                KnowledgeState {
                    knowledge: Some(Arc::new(k)),
                    health: Some(health),
                    diagnostics,
                }
            }
            Err(e) => KnowledgeState {
                knowledge: None,
                health: None,
                diagnostics: e.diagnostics,
            },
        }
    }

    /// The folders to watch for changes to the sources.
    pub(crate) fn folders(&self, config: &KnowledgeConfig) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        let mut add = |p: &Path| {
            if let Some(dir) = p.parent() {
                let dir = if dir.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    dir.to_path_buf()
                };
                if !out.contains(&dir) {
                    out.push(dir);
                }
            }
        };
        add(&config.sources);
        if let Some(k) = &self.knowledge {
            for f in k.watched_files() {
                add(f);
            }
        }
        out
    }
}

/// Enriches `query` for a session whose model has `context_window` tokens.
pub(crate) fn enrich(knowledge: &Knowledge, query: &str, context_window: u64) -> Arc<Enrichment> {
    Arc::new(knowledge.enrich(query, context_window))
}
