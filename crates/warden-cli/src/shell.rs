//! `warden shell COMMAND`: what Warden sees in a shell command, the way `tool.shell` shows it to
//! rules: the commands that would run, the paths they delete and write and where those are,
//! what it cannot see through, and the findings guards act on. Nothing is run.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use warden_shell::{Analysis, Env};

/// `warden shell`'s arguments.
#[derive(Args)]
pub struct ShellArgs {
    /// The command, as an agent would give it to its shell tool.
    pub command: String,
    /// The project's folder: paths are inside or outside it (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The folder the command starts in (default: the project's).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Print the analysis as JSON (the fields of `tool.shell`, without its booleans).
    #[arg(long)]
    pub json: bool,
}

/// Runs `warden shell`.
pub fn run(args: &ShellArgs) -> Result<ExitCode, String> {
    let project = match &args.root {
        Some(p) => std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))?,
        None => std::env::current_dir().map_err(|e| format!("the current folder: {e}"))?,
    };
    let mut env = Env::for_project(project);
    if let Some(cwd) = &args.cwd {
        env.cwd = Some(std::path::absolute(cwd).map_err(|e| format!("{}: {e}", cwd.display()))?);
    }
    env.home = std::env::var_os("HOME").map(PathBuf::from);
    env.tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
    let analysis = warden_shell::analyze(&args.command, &env);
    if args.json {
        let json = serde_json::to_string_pretty(&analysis).map_err(|e| e.to_string())?;
        println!("{json}");
    } else {
        print!("{}", report(&analysis));
    }
    Ok(ExitCode::SUCCESS)
}

/// The analysis as a person reads it.
pub fn report(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "runs");
    if a.commands.is_empty() {
        let _ = writeln!(out, "  nothing Warden can see");
    }
    for c in &a.commands {
        let mut how = Vec::new();
        if !c.wrappers.is_empty() {
            how.push(format!("under {}", c.wrappers.join(", ")));
        }
        if let Some(via) = &c.via {
            how.push(format!("via {via}"));
        }
        if how.is_empty() {
            let _ = writeln!(out, "  {}", c.text);
        } else {
            let _ = writeln!(out, "  {}    ({})", c.text, how.join("; "));
        }
    }
    for (title, uses) in [("deletes", &a.deletes), ("writes", &a.writes)] {
        if uses.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{title}");
        for u in uses {
            let written = if u.written == u.path {
                String::new()
            } else {
                format!("{} → ", u.written)
            };
            let covers = if u.covers_project {
                ", holds the project"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {written}{}: {}{covers}    (by {})",
                u.path,
                u.place.name(),
                u.command
            );
        }
    }
    if !a.opaque.is_empty() {
        let _ = writeln!(out, "cannot see");
        for o in &a.opaque {
            let _ = writeln!(out, "  {}: {}", o.kind.name(), o.text);
        }
    }
    let verdict = if a.destroys() {
        "destroys (the guardrails deny it)"
    } else if !a.findings.is_empty() {
        "deserves a look (the guardrails ask)"
    } else {
        "nothing to say (the guardrails let it run)"
    };
    let _ = writeln!(out, "verdict: {verdict}");
    for f in &a.findings {
        let _ = writeln!(out, "  {}: {}", f.kind.name(), f.message);
    }
    out
}
