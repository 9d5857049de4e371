//! What every command that loads rules shares: where the rules, plugins and database are
//! (`warden.toml`, overridden by flags), and building a `Warden` from that.

use std::path::{Path, PathBuf};

use clap::Args;
use warden_core::{Config, Store, Warden};
use warden_load::CONFIG_FILE;

use crate::render_diagnostics;

/// Where the rules, plugins and database are.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct Setup {
    /// The configuration file (default: ./warden.toml when it exists, or $WARDEN_CONFIG).
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        help_heading = "Global options"
    )]
    config: Option<PathBuf>,
    /// A rule folder (repeatable). Without a configuration file, giving --rules or --plugins
    /// leaves the built-in rules out unless --builtin is given too.
    #[arg(
        long = "rules",
        value_name = "DIR",
        global = true,
        help_heading = "Global options"
    )]
    rules: Vec<PathBuf>,
    /// A folder of plugins, or a plugin that ships with Warden (`builtin:guardrails`)
    /// (repeatable).
    #[arg(
        long = "plugins",
        value_name = "DIR",
        global = true,
        help_heading = "Global options"
    )]
    plugins: Vec<PathBuf>,
    /// Load the built-in rules too.
    #[arg(long, global = true, help_heading = "Global options")]
    builtin: bool,
    /// A capability the host provides, for plugins that require it (repeatable, or
    /// comma-separated).
    #[arg(
        long = "capability",
        value_name = "NAME",
        value_delimiter = ',',
        global = true,
        help_heading = "Global options"
    )]
    capabilities: Vec<String>,
    /// The database (plugin state, users' choices, the execution log, saved sessions): a
    /// SQLite file, or a PostgreSQL URL (`postgres://USER:PASSWORD@HOST:PORT/DB`).
    #[arg(
        long,
        value_name = "FILE|URL",
        global = true,
        help_heading = "Global options"
    )]
    db: Option<PathBuf>,
    /// The user to act for or show.
    #[arg(long, global = true, help_heading = "Global options")]
    user: Option<String>,
    /// The project to act in or show.
    #[arg(long, global = true, help_heading = "Global options")]
    project: Option<String>,
    /// The modes: a modes file, or `builtin:context-window` / `builtin:research-or-coding`.
    #[arg(
        long,
        value_name = "FILE|builtin:NAME",
        global = true,
        help_heading = "Global options"
    )]
    modes: Option<String>,
}

impl Setup {
    /// The configuration file: --config, else $WARDEN_CONFIG, else ./warden.toml if any.
    fn file(&self) -> Option<PathBuf> {
        self.config
            .clone()
            .or_else(|| std::env::var_os("WARDEN_CONFIG").map(PathBuf::from))
            .or_else(|| {
                Path::new(CONFIG_FILE)
                    .is_file()
                    .then(|| PathBuf::from(CONFIG_FILE))
            })
    }

    /// Whether the built-in rules are in only by default: no configuration file, and neither
    /// --builtin nor --rules nor --plugins given. A command that loads folders of its own
    /// accord (`warden test DIR`) then leaves them out, as --rules would.
    pub(crate) fn builtin_by_default(&self) -> bool {
        !self.builtin && self.rules.is_empty() && self.plugins.is_empty() && self.file().is_none()
    }

    /// The configuration: the file (if any), then the flags.
    pub(crate) fn config(&self) -> Result<Config, String> {
        let file = self.file();
        let mut config = match &file {
            Some(path) => Config::load(path).map_err(|d| {
                format!("the configuration has errors:\n{}", render_diagnostics(&d))
            })?,
            None => {
                let mut c = Config::default();
                if !self.rules.is_empty() || !self.plugins.is_empty() {
                    c.builtin = false;
                }
                c
            }
        };
        config.builtin |= self.builtin;
        config.rules.extend(self.rules.iter().cloned());
        config.plugins.extend(self.plugins.iter().cloned());
        config
            .capabilities
            .extend(self.capabilities.iter().cloned());
        if let Some(db) = &self.db {
            config.database = Some(db.clone());
        }
        if let Some(u) = &self.user {
            config.user = u.clone();
        }
        if let Some(p) = &self.project {
            config.project = p.clone();
        }
        // A folder named both in warden.toml and on the command line is read once.
        let same = |a: &PathBuf, b: &PathBuf| {
            a == b
                || std::fs::canonicalize(a)
                    .ok()
                    .is_some_and(|x| std::fs::canonicalize(b).ok() == Some(x))
        };
        for list in [&mut config.rules, &mut config.plugins] {
            let mut kept: Vec<PathBuf> = Vec::new();
            for p in list.drain(..) {
                if !kept.iter().any(|k| same(k, &p)) {
                    kept.push(p);
                }
            }
            *list = kept;
        }
        if let Some(m) = &self.modes {
            config.modes = Some(match m.strip_prefix("builtin:") {
                Some(name) => warden_core::ModeSource::Builtin(name.to_string()),
                None => warden_core::ModeSource::File(PathBuf::from(m)),
            });
        }
        Ok(config)
    }
}

/// Builds a Warden from `config`; `memory` leaves the database out (an in-memory store), and
/// `any_capability` loads plugins whatever they require.
pub(crate) fn build(config: &Config, memory: bool, any_capability: bool) -> Result<Warden, String> {
    let mut config = config.clone();
    if memory {
        config.database = None;
    }
    let mut b = warden_core::WardenBuilder::from_config(&config).map_err(|e| e.to_string())?;
    if any_capability {
        b = b.any_capability();
    }
    b.build().map_err(|e| e.to_string())
}

/// Opens the configured database, or says how to name one.
pub(crate) fn open_store(config: &Config, what: &str) -> Result<Store, String> {
    match &config.database {
        Some(db) => Store::open_with_lock_timeout(
            db,
            config
                .lock_timeout
                .unwrap_or(warden_store::DEFAULT_LOCK_TIMEOUT),
        )
        .and_then(|s| {
            if config.synchronous_full {
                s.set_synchronous_full(true)?;
            }
            Ok(s)
        })
        .map_err(|e| e.described()),
        None => Err(format!(
            "{what} needs a database: give --db FILE, or `database = \"...\"` in {CONFIG_FILE}"
        )),
    }
}
