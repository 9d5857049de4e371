//! What a shell command would do, seen the way a shell would run it, without running anything.
//!
//! An agent asks to run `timeout 5 sh -c 'cd / && rm -rf *'`. A supervisor that matches strings
//! sees `timeout`; this crate sees `rm -rf /*` run from `/`, under `timeout` and `sh -c`, and says
//! it deletes `/`, outside the project. The command is parsed by a real parser of bash syntax
//! ([`brush_parser`], the brush shell's own), and from its syntax tree:
//!
//! - every simple command that would run, through lists (`&&`, `||`, `;`, `&`), pipelines,
//!   subshells, groups, `if`/`for`/`while`/`case` bodies, functions, command substitutions, and
//!   the code given to `sh -c` (any flags around `-c`), `eval`, `watch` and `find -exec`, parsed
//!   again, to a bounded depth; a `for` loop over literal words runs its body once per word;
//! - the program behind wrappers (`sudo`, `env`, `nice`, `timeout`, `nohup`, `xargs`...), with the
//!   arguments `xargs` gets from a literal pipe, here-string or here-document;
//! - the paths each command deletes and writes (its flags read the way the program reads them:
//!   `-rf`, `-r -f`, `--recursive --force`), resolved against the working folder as `cd` moves
//!   it, `~`, `$HOME` and `$PWD`, `..`, and symbolic links inside the project that lead out of
//!   it; globs are marked (`/*` ranges over `/`);
//! - what cannot be seen through, named: a command name computed at run time, `eval` of a value
//!   computed at run time, code piped into a shell or an interpreter, a script downloaded and
//!   run; inline interpreter code (`python -c`) is read for the commands it runs and the paths it
//!   deletes or writes where they are literal, and is opaque only when it does such things in a
//!   way that cannot be read;
//! - findings a supervisor acts on ([`FindingKind`]), each with a message that names the command
//!   and the path and says what to do instead.
//!
//! A command that cannot be parsed, is larger than [`MAX_COMMAND`], or nests deeper than Warden
//! judges is [`OpaqueKind::Unparsed`]: a risk, never harmless.
//!
//! ```
//! use warden_shell::{Env, FindingKind, Place, analyze};
//!
//! let env = Env::for_project("/home/ada/app").with_home("/home/ada");
//! let a = analyze("timeout 5 sh -c 'cd / && rm -rf *'", &env);
//! assert_eq!(a.deletes[0].path, "/");
//! assert_eq!(a.deletes[0].place, Place::System);
//! assert_eq!(a.findings[0].kind, FindingKind::DeleteOutside);
//! assert!(a.destroys());
//!
//! // Everyday work is left alone.
//! let a = analyze("rm -rf target && git commit -m 'guard against rm -rf /'", &env);
//! assert!(a.findings.is_empty());
//! ```
//!
//! It knows nothing of rules, hooks or agents.

#![warn(missing_docs)]

mod args;
mod collect;
mod effects;
mod inline;
mod model;
mod paths;
mod runners;
mod syntax;
mod walk;
mod words;
mod wrappers;

use std::path::PathBuf;

pub use model::{Analysis, Command, Finding, FindingKind, Opaque, OpaqueKind, PathUse, Place};

/// The largest command analyzed, in bytes; a larger one is [`OpaqueKind::Unparsed`].
pub const MAX_COMMAND: usize = 32 * 1024;

/// What a command is judged against: where it runs, the project, the home folder.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// The folder the command starts in (the project's folder when not given).
    pub cwd: Option<PathBuf>,
    /// The project's folder: paths are inside or outside it.
    pub project: Option<PathBuf>,
    /// The home folder (`~`, `$HOME`).
    pub home: Option<PathBuf>,
    /// `$TMPDIR`, a folder of temporary files besides `/tmp` and `/var/tmp`.
    pub tmpdir: Option<PathBuf>,
    /// Read symbolic links on disk: a path inside the project that leads out of it through a
    /// link is outside. (Off for a command judged away from its machine.)
    pub follow_links: bool,
}

impl Env {
    /// A command run in the project's folder `root`, links followed.
    pub fn for_project(root: impl Into<PathBuf>) -> Env {
        let root = root.into();
        Env {
            cwd: Some(root.clone()),
            project: Some(root),
            follow_links: true,
            ..Env::default()
        }
    }

    /// The same, with `home` as the home folder.
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Env {
        self.home = Some(home.into());
        self
    }

    /// The same, started in `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Env {
        self.cwd = Some(cwd.into());
        self
    }
}

/// Whether Warden reads `command` as a shell would: within [`MAX_COMMAND`] and the nesting
/// bounds, and valid bash. A command it does not read is [`OpaqueKind::Unparsed`] in its
/// analysis.
pub fn parses(command: &str) -> bool {
    syntax::parse(command).is_ok()
}

/// What `command` would do, run as a shell would in `env`. Never fails and never panics: what
/// cannot be seen through is said in [`Analysis::opaque`].
pub fn analyze(command: &str, env: &Env) -> Analysis {
    let mut out = collect::Collector::new(command);
    let paths = paths::Resolver::new(env);
    walk::analyze(command, &paths, &mut out);
    out.finish(&paths)
}
