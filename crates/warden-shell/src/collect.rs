//! What an analysis gathers as it walks a command, and what the parts of the walk share: where a
//! command runs ([`Run`]), what reaches it on its standard input ([`Input`]), and the way back
//! into the walk for code found inside a command ([`Recurse`]), so that the program semantics
//! (`effects.rs`) need not know the walk.

use crate::model::{Analysis, Command, Finding, FindingKind, Opaque, OpaqueKind, PathUse, Place};
use crate::paths::{Resolved, Resolver};
use crate::words::{Expanded, quote};

/// What reaches a command on its standard input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Input {
    /// Not a pipe: the agent's terminal, or nothing.
    Terminal,
    /// A file (`< script.sh`).
    File,
    /// A program's output Warden cannot tell.
    Unknown,
    /// This text (`echo ... |`, a here-string, a here-document).
    Literal(String),
    /// A document fetched from the network (`curl URL |`): the command that fetches it.
    Download(String),
    /// Paths below this folder, one per line (`find DIR |`, `ls DIR |`).
    Paths(String),
}

/// Where and how a command runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Run {
    /// Its working folder, when known.
    pub cwd: Option<String>,
    /// The wrappers it runs under, outermost first.
    pub wrappers: Vec<String>,
    /// How it was reached, when not written directly (`sh -c`, `xargs`...).
    pub via: Option<String>,
}

/// The walk, as the program semantics see it: what it gathers, and the way back into it for
/// the code a command carries.
pub(crate) trait Recurse {
    /// Records a path `command` uses (see [`Collector::path`]).
    fn path(&mut self, written: &Expanded, run: &Run, op: Op, command: &str) -> Resolved;
    /// Records a simple command that runs; its text.
    fn command(&mut self, program: &str, args: &[Expanded], run: &Run) -> String;
    /// Records what cannot be seen through.
    fn opaque(&mut self, kind: OpaqueKind, text: &str);
    /// Records a finding.
    fn finding(&mut self, kind: FindingKind, command: &str, message: String);
    /// `written` resolved in `cwd`, without recording it.
    fn resolve(&self, written: &str, cwd: Option<&str>) -> Resolved;
    /// Analyzes `code` as a shell runs it (`sh -c`, `eval`, `watch`), from `run`'s folder,
    /// with `args` as its positional parameters (`sh -c CODE $0 $1...`: `$1` onwards).
    fn code(&mut self, code: &str, run: &Run, via: &str, args: &[Expanded]);
    /// Analyzes one command (its words given) as if written in the command line; what it
    /// prints.
    fn argv(&mut self, argv: Vec<Expanded>, run: &Run, stdin: Input) -> Input;
    /// How many more levels of code may be read (the depth is bounded).
    fn depth_left(&self) -> u32;
    /// Records that the command downloads into the file written `written` (`curl -o`).
    fn fetched(&mut self, written: &str);
    /// Whether the command downloaded into the file written `written` earlier.
    fn was_fetched(&self, written: &str) -> bool;
}

/// What an analysis gathers.
pub(crate) struct Collector {
    pub(crate) analysis: Analysis,
}

/// The longest a command is shown in a message.
const SHOWN: usize = 120;

/// `text`, cut to `SHOWN` characters.
pub(crate) fn shown(text: &str) -> String {
    if text.chars().count() <= SHOWN {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(SHOWN).collect();
    cut.push('…');
    cut
}

/// A path as a message names it: as written, with where it leads when that says more
/// (`` `*` (everything in `/`) ``, `` `..` (`/home/ada`) ``).
fn named(r: &Resolved, written: &Expanded) -> String {
    let w = shown(&written.text);
    if r.glob {
        let what = if written.chosen {
            "files chosen in"
        } else {
            "everything in"
        };
        return format!("`{w}` ({what} `{}`)", r.path);
    }
    if r.path == written.text
        || r.place == Place::Unknown
        || crate::paths::normalize(&written.text, None) == r.path
    {
        format!("`{w}`")
    } else {
        format!("`{w}` (`{}`)", r.path)
    }
}

/// An operation on a path, for its finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Deleted (`rm`, `find -delete`, `shred -u`).
    Delete { recursive: bool },
    /// Overwritten or truncated (`>`, `truncate`, `tee`, `dd of=`, `shred`).
    Overwrite,
    /// Created, appended to, copied or moved to (`>>`, `cp`, `mkdir`).
    Write,
    /// Moved away (the source of `mv`).
    MoveAway,
    /// Its permissions or owners changed.
    Permissions { recursive: bool },
}

impl Collector {
    pub(crate) fn new(command: &str) -> Collector {
        Collector {
            analysis: Analysis {
                command: command.to_string(),
                ..Analysis::default()
            },
        }
    }

    /// A simple command that runs; its text.
    pub(crate) fn command(&mut self, program: &str, args: &[Expanded], run: &Run) -> String {
        let text = std::iter::once(program.to_string())
            .chain(args.iter().map(|a| {
                if a.glob {
                    a.text.clone()
                } else {
                    quote(&a.text)
                }
            }))
            .collect::<Vec<_>>()
            .join(" ");
        self.analysis.commands.push(Command {
            program: program.to_string(),
            args: args.iter().map(|a| a.text.clone()).collect(),
            text: text.clone(),
            wrappers: run.wrappers.clone(),
            via: run.via.clone(),
        });
        text
    }

    /// Code that was not parsed, and why; a finding says so.
    pub(crate) fn unparsed(&mut self, code: &str, why: &str) {
        self.opaque_because(OpaqueKind::Unparsed, code, Some(why));
    }

    /// Something that cannot be seen through; a finding says so.
    pub(crate) fn opaque(&mut self, kind: OpaqueKind, text: &str) {
        self.opaque_because(kind, text, None);
    }

    fn opaque_because(&mut self, kind: OpaqueKind, text: &str, why: Option<&str>) {
        if self
            .analysis
            .opaque
            .iter()
            .any(|o| o.kind == kind && o.text == text)
        {
            return;
        }
        self.analysis.opaque.push(Opaque {
            kind,
            text: text.to_string(),
        });
        let t = shown(text);
        let message = match kind {
            OpaqueKind::Unparsed => format!(
                "Warden cannot read `{t}` as a shell would ({}), so it cannot tell what it does: write it more simply",
                why.unwrap_or("it nests deeper than Warden reads")
            ),
            OpaqueKind::DynamicCommand => format!(
                "`{t}`: the command's name is made when it runs, so Warden cannot tell what it does: write the command out"
            ),
            OpaqueKind::DynamicCode => format!(
                "`{t}` runs code made when it runs, which Warden cannot read: write the commands out"
            ),
            OpaqueKind::PipedCode => format!(
                "`{t}` feeds code to a shell or an interpreter through a pipe, which Warden cannot read: write it to a file in the project, read it, then run that"
            ),
            OpaqueKind::DownloadAndRun => format!(
                "`{t}` runs a script downloaded from the network, unread: download it, read it, then run it"
            ),
            OpaqueKind::InlineCode => format!(
                "`{t}` runs inline code that runs commands or changes files in a way Warden cannot read: put it in a script file in the project"
            ),
            OpaqueKind::UnknownInput => format!(
                "`{t}` changes files Warden cannot tell before it runs (from a pipe, a variable or an unknown folder): name the files"
            ),
        };
        self.finding(FindingKind::UnseenCode, text, "", message);
    }

    pub(crate) fn finding(
        &mut self,
        kind: FindingKind,
        command: &str,
        path: &str,
        message: String,
    ) {
        if self
            .analysis
            .findings
            .iter()
            .any(|f| f.kind == kind && f.command == command && f.path == path)
        {
            return;
        }
        self.analysis.findings.push(Finding {
            kind,
            command: command.to_string(),
            path: path.to_string(),
            message,
        });
    }

    /// `written` (expanded) resolved in `run`, used by `op` in `command`: recorded, with the
    /// finding it makes.
    pub(crate) fn path(
        &mut self,
        paths: &Resolver,
        written: &Expanded,
        run: &Run,
        op: Op,
        command: &str,
    ) -> Resolved {
        let r = if written.literal {
            paths.resolve(&written.text, run.cwd.as_deref(), written.glob)
        } else {
            // Known only when it runs; but a home folder Warden was not told of is still the
            // home folder.
            let t = written.text.as_str();
            let home = ["~", "$HOME", "${HOME}"]
                .iter()
                .find_map(|h| t.strip_prefix(h))
                .filter(|rest| rest.is_empty() || rest.starts_with('/'));
            let place = match home {
                Some(rest) if rest.trim_matches('/').is_empty() => Place::Home,
                Some(_) => Place::Outside,
                None => Place::Unknown,
            };
            Resolved {
                path: written.text.clone(),
                place,
                glob: written.glob,
                covers_project: place == Place::Home,
            }
        };
        let used = PathUse {
            path: r.path.clone(),
            written: written.text.clone(),
            place: r.place,
            glob: r.glob,
            covers_project: r.covers_project,
            command: command.to_string(),
        };
        match op {
            Op::Delete { .. } | Op::MoveAway => self.analysis.deletes.push(used),
            _ => self.analysis.writes.push(used),
        }
        self.judge(&r, written, op, command);
        r
    }

    /// The finding an operation on a placed path makes, if any.
    fn judge(&mut self, r: &Resolved, written: &Expanded, op: Op, command: &str) {
        let c = shown(command);
        let p = named(r, written);
        let place = r.place;
        let (kind, message) = match (op, place) {
            (_, Place::Warden) => (
                FindingKind::WardenFiles,
                format!(
                    "`{c}` changes {p}, Warden's own files or the agent's hook configuration: the supervisor is not the agent's to change; ask the user"
                ),
            ),
            (Op::Delete { .. }, Place::Root) if !written.chosen => (
                FindingKind::DeleteProject,
                format!(
                    "`{c}` deletes the whole project ({p}): delete only what you mean to, by name"
                ),
            ),
            (Op::Delete { recursive: true }, Place::Unknown) => {
                self.opaque(OpaqueKind::UnknownInput, command);
                return;
            }
            (Op::Delete { .. }, _) if r.covers_project => (
                FindingKind::DeleteOutside,
                format!(
                    "`{c}` deletes {p}, everything outside the project and the project with it: delete only what is inside the project, and name it"
                ),
            ),
            (Op::Delete { .. }, _) if place.is_outside() => (
                FindingKind::DeleteOutside,
                format!(
                    "`{c}` deletes {p}, outside the project: delete only what is inside the project, and name it"
                ),
            ),
            (Op::Overwrite | Op::Write, Place::Device) => (
                FindingKind::DeviceWrite,
                format!(
                    "`{c}` writes to the device {p}, which can destroy a disk: ask the user to do it"
                ),
            ),
            (Op::Overwrite, _) if place.is_outside() => (
                FindingKind::OverwriteOutside,
                format!(
                    "`{c}` overwrites {p}, outside the project: change only files inside the project, or ask the user"
                ),
            ),
            (Op::MoveAway, _)
                if matches!(place, Place::Home | Place::System) || r.covers_project =>
            {
                (
                    FindingKind::MoveAway,
                    format!(
                        "`{c}` moves {p} away, which breaks the system, the user's home or the project: move only files inside the project"
                    ),
                )
            }
            (Op::Permissions { recursive: true }, _)
                if matches!(place, Place::Home | Place::System) || r.covers_project =>
            {
                (
                    FindingKind::PermissionChange,
                    format!(
                        "`{c}` changes permissions or owners of everything under {p}, outside the project: change only files inside the project"
                    ),
                )
            }
            (Op::Write | Op::MoveAway | Op::Permissions { .. }, _) if place.is_outside() => (
                FindingKind::WriteOutside,
                format!("`{c}` writes {p}, outside the project: is that what you want?"),
            ),
            _ => return,
        };
        self.finding(kind, command, &r.path, message);
    }

    pub(crate) fn finish(self, _paths: &Resolver) -> Analysis {
        let mut a = self.analysis;
        // The refusals first, in the order found; then what to ask about.
        a.findings.sort_by_key(|f| !f.kind.destroys());
        a
    }
}
