//! Knowledge enrichment: classify a query, choose knowledge sources within a token budget,
//! and assemble them into a system-prompt section behind a trust boundary.
//!
//! An operator lists knowledge sources (Markdown notes in the project) in a sources file. At
//! the start of a query, [`Knowledge::enrich`] runs the pipeline:
//!
//! 1. **classify** the query into domain tags, by keywords and glossary terms that are data
//!    ([`classify`]);
//! 2. **budget and select**: pick the mode from the context window, compute the budget,
//!    rank the sources whose tags match, and fill the budget greedily, cutting the last source
//!    at a content boundary if it does not fit whole ([`select`], [`truncate`]);
//! 3. **assemble** the `<reference_material>` section: an anti-instruction preamble, then each
//!    source with an attribution comment ([`assemble`]);
//! 4. **integrate** it after the agent's system prompt ([`Enrichment::integrate`]).
//!
//! ```
//! use warden_knowledge::{Knowledge, Mode};
//!
//! let project = tempfile::tempdir()?;
//! let root = project.path();
//! std::fs::create_dir(root.join("notes"))?;
//! std::fs::write(root.join("notes/glossary.md"), "# Glossary\n\nA *hook* is a point where the agent loop reports to Warden.\n")?;
//! std::fs::write(root.join("notes/lua.md"), "# Lua\n\nScripts run in a sandbox, with a time limit.\n")?;
//! std::fs::write(root.join("classification.toml"), r#"
//! [keywords]
//! scripts = ["lua", "script"]
//! security = ["sandbox", "escape"]
//! "#)?;
//! std::fs::write(root.join("sources.toml"), r#"
//! [knowledge]
//! enabled = true
//! classification = "classification.toml"
//!
//! [[source]]
//! id = "glossary"
//! path = "notes/glossary.md"
//! tags = ["core"]
//!
//! [[source]]
//! id = "lua"
//! path = "notes/lua.md"
//! tags = ["scripts", "security"]
//! "#)?;
//!
//! let knowledge = Knowledge::load(root.join("sources.toml"), root)?;
//! let e = knowledge.enrich("Can a Lua script escape the sandbox?", 128_000);
//! assert_eq!(e.mode, Mode::Full);
//! assert_eq!(e.classification.tags, ["core", "scripts", "security"]);
//! assert_eq!(e.selected_ids(), ["lua", "glossary"]); // two matching tags beat one
//! let section = e.section.as_deref().unwrap();
//! assert!(section.starts_with("<reference_material>\nThe following is reference data"));
//! assert!(section.contains("<!-- source: lua tags: scripts,security -->\n# Lua\n"));
//! assert!(e.tokens_used <= e.budget);
//!
//! // Below 30 000 tokens of context there is no enrichment.
//! assert_eq!(knowledge.enrich("Can a Lua script escape the sandbox?", 16_000).section, None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The sources file
//!
//! TOML. Every path in it is relative to the project root given to [`Knowledge::load`].
//! Unknown keys, wrong types and bad values are errors naming the file, line and field, with a
//! suggestion; every mistake in the file is reported at once ([`LoadError`]).
//!
//! ```toml
//! [knowledge]
//! enabled = true                         # default false: the operator switches it on
//! classification = "knowledge/classification.toml"   # keywords and glossary; optional
//! budget_cap = 30000                     # tokens; default 30000
//! budget_percent = 15                    # budget = min(budget_cap, floor(window * 15 / 100))
//! min_truncated_tokens = 500             # cut a source to fit only if this many are left
//! core_tag = "core"                      # every query has it; reduced mode keeps to it
//!
//! [knowledge.modes]
//! reduced_from = 30000                   # below: unavailable
//! full_from = 100000                     # below: reduced; from here: full
//!
//! [knowledge.health]
//! required_sources = 3                   # sources marked `required` that must load
//! min_tokens = 5000                      # tokens the loaded sources must hold together
//!
//! [[source]]
//! id = "glossary"                        # unique; letters, digits, - _ .
//! path = "knowledge/glossary.md"         # UTF-8 text inside the project, at most 1 MiB
//! tags = ["core", "terminology"]         # at least one
//! priority = 10                          # default 0; HIGHER is chosen first on equal matches
//! curated = true                         # default false; see gate 5
//! required = true                        # default false; counts for the health gate
//! ```
//!
//! **Priority sorts descending**: among sources matching as many of the query's tags, the one
//! with the higher `priority` goes first (as a rule's priority does in Warden); equal
//! priorities go by id. The seed's code sorted ascending while its comment said "higher =
//! first"; here the code, the docs and a test agree.
//!
//! # The classification file
//!
//! `[keywords]` maps a tag to the words that give it; `[glossary]` maps a term to the tags it
//! gives. Both match whole words in any case; see [`classify`].
//!
//! # The trust boundary and the five gates
//!
//! Knowledge is data the model reads, never instructions it follows: the section opens with a
//! preamble saying so, and every source in it is attributed. Before a source is read, its path
//! must pass four gates ([`gates`]): **1** not absolute, **2** no `..`, **3** not a symbolic
//! link, **4** its real path inside the project root's real path. Its text then meets gate
//! **5**, injection detection ([`injection`], patterns listed in [`INJECTION_PATTERNS`]): a
//! match refuses a source unless it is `curated`, in which case it loads with an
//! [`Advisory`]. Each refusal names the source and the gate ([`Refusal`], [`Check`]). The
//! boundary's own tags are neutralised in every source's text, curated or not.
//!
//! # The health gate
//!
//! [`Knowledge::health`] says whether the capability should register: `enabled`, at least
//! `required_sources` required sources loaded, and at least `min_tokens` tokens loaded in all;
//! when it should not, [`Health::reasons`] says why.
//!
//! # Reloading
//!
//! A [`Knowledge`] never changes. [`Knowledge::watched_files`] lists what it read (for a file
//! watcher), [`Knowledge::changed_files`] says what changed since (for polling), and
//! [`Knowledge::reload`] loads everything again; swap the result in if it is `Ok`, and keep the
//! last good one if it is not.
//!
//! # Token counts
//!
//! Counts are an estimate ([`estimate_tokens`]) that leans high; its measured error against
//! `cl100k_base` and `o200k_base` is stated in [`tokens`].

#![warn(missing_docs)]

pub mod assemble;
pub mod classify;
mod error;
pub mod gates;
mod health;
pub mod injection;
mod knowledge;
mod name;
pub mod select;
mod settings;
mod sources;
pub mod tokens;
pub mod truncate;

pub use classify::{Classification, Classifier, TermKind, TermMatch};
pub use error::LoadError;
pub use gates::{Check, MAX_SOURCE_BYTES};
pub use health::Health;
pub use injection::{INJECTION_PATTERNS, InjectionPattern};
pub use knowledge::Knowledge;
pub use select::{Enrichment, Selected, SkipReason, Skipped};
pub use settings::{HealthThresholds, Mode, ModeThresholds, Settings};
pub use sources::{Advisory, Refusal, Source, SourceDef};
pub use tokens::estimate_tokens;
