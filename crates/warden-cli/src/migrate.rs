//! `warden migrate`: copies a store into another: a SQLite file into PostgreSQL when an
//! installation grows to many nodes (or back, or one file into another).

use std::path::Path;
use std::process::ExitCode;

use warden_core::Store;

use crate::json_out;

/// What `warden migrate` takes.
#[derive(clap::Args, Debug)]
pub(crate) struct MigrateArgs {
    /// The store to copy: a SQLite file, or a PostgreSQL URL.
    #[arg(long, value_name = "FILE|URL")]
    from: String,
    /// The store to copy into: a PostgreSQL URL (`postgres://USER:PASSWORD@HOST/DB`), or a
    /// SQLite file; created and migrated if new. It must hold nothing, unless --replace.
    #[arg(long, value_name = "URL|FILE")]
    to: String,
    /// Empty the target first (in the same transaction as the copy).
    #[arg(long)]
    replace: bool,
    /// Print what was copied as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(a: &MigrateArgs) -> Result<ExitCode, String> {
    // A mistyped source must not become a new, empty database.
    if !warden_load::is_database_url(&a.from) && !Path::new(&a.from).is_file() {
        return Err(format!(
            "no database at {}: --from takes an existing SQLite file or a postgres:// URL",
            a.from
        ));
    }
    let source = Store::open(&a.from).map_err(|e| e.to_string())?;
    let target = Store::open(&a.to).map_err(|e| e.to_string())?;
    let report = source
        .copy_to(&target, a.replace)
        .map_err(|e| e.to_string())?;
    if a.json {
        json_out(&warden_wire::v1::Copied::from(&report))?;
    } else {
        println!(
            "copied {} into {}: {} key(s) of plugin state, {} rule toggle(s), {} setting override(s), {} saved session(s), {} execution-log row(s)",
            source.label(),
            target.label(),
            report.state,
            report.toggles,
            report.overrides,
            report.sessions,
            report.executions
        );
    }
    Ok(ExitCode::SUCCESS)
}
