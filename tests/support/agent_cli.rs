//! A real agent CLI for the end-to-end tests (`tests/*_cli.rs`): the executable an environment
//! variable names (`.ci/run` installs the CLIs with npm and names them), or why the tests skip.

use std::path::PathBuf;

/// The executable `var` names, or `None` after saying why `what`'s tests skip (a failure when
/// `WARDEN_REQUIRE_AGENT_CLIS` is set, as CI sets it).
pub fn executable(var: &str, what: &str, exe: &str) -> Option<PathBuf> {
    let found = std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        let why = format!(
            "skipped: the real {what} tests ({var} does not name the `{exe}` executable; .ci/run installs it with npm); CI runs them"
        );
        if std::env::var_os("WARDEN_REQUIRE_AGENT_CLIS").is_some() {
            panic!("{why}");
        }
        eprintln!("{why}");
    }
    found
}
