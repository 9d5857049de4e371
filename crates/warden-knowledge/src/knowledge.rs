//! [`Knowledge`]: a sources file loaded, ready to enrich queries, and able to tell when it
//! should be loaded again.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::classify::{Classification, Classifier};
use warden_input::{Diagnostic, SourceFile};

use crate::error::LoadError;
use crate::gates::{self, Root};
use crate::health::{self, Health};
use crate::select::{self, Enrichment};
use crate::settings::Settings;
use crate::sources::{self, Advisory, Refusal, Source};

/// A sources file loaded: settings, classifier, the sources that passed the gates, and those
/// that did not. Immutable; to pick up changes, load again ([`Knowledge::reload`]) and swap.
#[derive(Debug, Clone)]
pub struct Knowledge {
    sources_file: PathBuf,
    project_root: PathBuf,
    settings: Settings,
    classifier: Classifier,
    sources: Vec<Source>,
    refused: Vec<Refusal>,
    advisories: Vec<Advisory>,
    watched: Vec<(PathBuf, Fingerprint)>,
}

/// What a file looked like when it was read: enough to notice that it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint(Option<(u64, Option<SystemTime>, bool)>);

impl Fingerprint {
    fn of(path: &Path) -> Self {
        Fingerprint(
            fs::symlink_metadata(path)
                .ok()
                .map(|m| (m.len(), m.modified().ok(), m.file_type().is_symlink())),
        )
    }
}

impl Knowledge {
    /// Loads `sources_file`; every path in it is relative to `project_root`.
    ///
    /// A mistake in the sources or classification file is an error naming its file, line and
    /// field. A source refused by a gate, missing or unreadable is not an error: it is listed
    /// in [`Knowledge::refused`] and the others load.
    pub fn load(
        sources_file: impl AsRef<Path>,
        project_root: impl AsRef<Path>,
    ) -> Result<Knowledge, LoadError> {
        let file = sources_file.as_ref();
        let mut watched = vec![(file.to_path_buf(), Fingerprint::of(file))];
        let text = gates::read_config(file)
            .map_err(|why| LoadError::one(Diagnostic::io(file, why.to_string())))?;
        let parsed = sources::parse(file, &text)?;
        let root_path = project_root.as_ref();
        let root = Root::new(root_path).map_err(|e| {
            LoadError::one(
                Diagnostic::io(root_path, format!("the project root cannot be used: {e}"))
                    .with_help(
                        "pass the folder that the paths in the sources file are relative to",
                    ),
            )
        })?;
        let core_tag = &parsed.settings.core_tag;
        let classifier = match &parsed.classification {
            None => Classifier::empty(core_tag),
            Some(at) => {
                let path = root.given.join(&at.value);
                watched.push((path.clone(), Fingerprint::of(&path)));
                let text = gates::open(&root, &at.value).map_err(|(check, message)| {
                    LoadError::one(
                        Diagnostic::error(
                            &SourceFile::new(file, text.as_str()),
                            Some(at.span.clone()),
                            Some("knowledge.classification"),
                            format!(
                                "the classification file is refused by {}: {message}",
                                check.name()
                            ),
                        )
                        .with_help(
                            "name a TOML file inside the project root, relative to it, such as \
                             \"classification.toml\"",
                        ),
                    )
                })?;
                Classifier::parse(&path, &text, core_tag)?
            }
        };
        let mut knowledge = Knowledge {
            sources_file: file.to_path_buf(),
            project_root: root_path.to_path_buf(),
            settings: parsed.settings,
            classifier,
            sources: Vec::new(),
            refused: Vec::new(),
            advisories: Vec::new(),
            watched,
        };
        for def in &parsed.sources {
            if gates::check_shape(&def.path).is_ok() {
                let path = root.given.join(&def.path);
                if !knowledge.watched.iter().any(|(p, _)| *p == path) {
                    let fingerprint = Fingerprint::of(&path);
                    knowledge.watched.push((path, fingerprint));
                }
            }
            match sources::load(&root, def) {
                Ok((source, advisories)) => {
                    knowledge.sources.push(source);
                    knowledge.advisories.extend(advisories);
                }
                Err(refusal) => knowledge.refused.push(refusal),
            }
        }
        Ok(knowledge)
    }

    /// Loads the same sources file under the same project root again.
    pub fn reload(&self) -> Result<Knowledge, LoadError> {
        Knowledge::load(&self.sources_file, &self.project_root)
    }

    /// Classifies `query`, then chooses and assembles sources for a model with a context
    /// window of `context_window` tokens. Deterministic: the same knowledge, query and window
    /// give the same result, byte for byte.
    ///
    /// It does not look at [`Knowledge::health`]: an embedder registers the capability only
    /// when the health gate passes, and calls this only then.
    pub fn enrich(&self, query: &str, context_window: u64) -> Enrichment {
        select::enrich(
            &self.settings,
            &self.sources,
            &self.refused,
            self.classify(query),
            context_window,
        )
    }

    /// Stage 1 alone: the tags of `query`.
    pub fn classify(&self, query: &str) -> Classification {
        self.classifier.classify(query)
    }

    /// The health gate: whether the capability should register, and why not.
    pub fn health(&self) -> Health {
        health::check(&self.settings, &self.sources, &self.refused)
    }

    /// The settings of the `[knowledge]` table (defaults where it is silent).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The keywords and glossary terms.
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The sources that loaded, in the order of the sources file.
    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    /// The sources that did not load, and which check refused each.
    pub fn refused(&self) -> &[Refusal] {
        &self.refused
    }

    /// Injection patterns found in curated sources, which loaded anyway.
    pub fn advisories(&self) -> &[Advisory] {
        &self.advisories
    }

    /// The sources file this was loaded from.
    pub fn sources_file(&self) -> &Path {
        &self.sources_file
    }

    /// The project root the source paths are relative to.
    pub fn project_root(&self) -> &Path {
        &self.project_root
    }

    /// Every file this knowledge depends on, for a watcher: the sources file, the
    /// classification file, and every source path that is inside the project (loaded or not,
    /// so that creating a missing source or fixing a refused one is noticed). Paths refused
    /// as absolute or leaving the project are not listed.
    pub fn watched_files(&self) -> Vec<&Path> {
        self.watched.iter().map(|(p, _)| p.as_path()).collect()
    }

    /// The watched files that changed (size, modification time, appearing, disappearing or
    /// becoming a link) since they were read: when this is not empty, it is time to
    /// [`reload`](Knowledge::reload). For embedders that poll instead of watching.
    pub fn changed_files(&self) -> Vec<&Path> {
        self.watched
            .iter()
            .filter(|(p, f)| Fingerprint::of(p) != *f)
            .map(|(p, _)| p.as_path())
            .collect()
    }
}
