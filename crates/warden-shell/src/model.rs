//! What an analysis says: the commands that would run, the paths they write and delete, where
//! those are, what could not be seen through, and the findings a supervisor acts on.

use serde::Serialize;

/// Where a path is, against the project and the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// Below the project's folder.
    Inside,
    /// The project's folder itself.
    Root,
    /// Warden's own files, or an agent's hook configuration: `.warden/`, `.claude/settings.json`.
    Warden,
    /// A folder for temporary files: `/tmp`, `/var/tmp`, `/dev/shm`, `$TMPDIR`.
    Temp,
    /// The home folder itself.
    Home,
    /// `/`, or a folder of the system (`/etc`, `/usr`, `/var`...), or a file in one.
    System,
    /// A device (`/dev/sda`), but not the harmless ones (`/dev/null`, `/dev/stdout`...).
    Device,
    /// Anywhere else outside the project (in the home folder, another project).
    Outside,
    /// Not known: a relative path with no working folder known, or a value computed at run time.
    Unknown,
}

impl Place {
    /// Its name, as conditions compare it.
    pub fn name(self) -> &'static str {
        match self {
            Place::Inside => "inside",
            Place::Root => "root",
            Place::Warden => "warden",
            Place::Temp => "temp",
            Place::Home => "home",
            Place::System => "system",
            Place::Device => "device",
            Place::Outside => "outside",
            Place::Unknown => "unknown",
        }
    }

    /// Outside the project, and not a place for temporary files.
    pub fn is_outside(self) -> bool {
        matches!(
            self,
            Place::Home | Place::System | Place::Device | Place::Outside
        )
    }
}

/// A path an operation writes or deletes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathUse {
    /// The path resolved (absolute when the working folder or the home folder make it so).
    pub path: String,
    /// The path as written.
    pub written: String,
    /// Where it is.
    pub place: Place,
    /// Written with a glob (`*`, `?`, `[`): `path` is the folder the glob ranges over.
    pub glob: bool,
    /// The project's folder is inside it: deleting it deletes the project too.
    pub covers_project: bool,
    /// The command that does it, as the shell would run it.
    pub command: String,
}

/// One simple command that would run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    /// The program (its base name: `/bin/rm` and `\rm` are `rm`).
    pub program: String,
    /// Its arguments, unquoted.
    pub args: Vec<String>,
    /// The command as the shell would run it: the program and its arguments, quoted where
    /// needed.
    pub text: String,
    /// The wrappers it ran under (`sudo`, `timeout`, `xargs`...), outermost first.
    pub wrappers: Vec<String>,
    /// How it was reached when not written directly: `sh -c`, `eval`, `xargs`, `find -exec`,
    /// `python -c`...
    pub via: Option<String>,
}

/// What cannot be seen through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpaqueKind {
    /// The command could not be parsed (as a shell would refuse it, or too large, or nested too
    /// deep to be judged).
    Unparsed,
    /// A command name computed at run time (`$(...)`, a variable).
    DynamicCommand,
    /// `eval`, `sh -c` or `watch` of a string computed at run time.
    DynamicCode,
    /// Code read by a shell or an interpreter from a pipe or a process substitution.
    PipedCode,
    /// A script downloaded and run (`curl ... | sh`, `sh -c "$(curl ...)"`).
    DownloadAndRun,
    /// Inline interpreter code (`python -c`) that runs a command or touches a path Warden cannot
    /// read.
    InlineCode,
    /// Arguments read from an input Warden cannot see (`... | xargs rm -rf`).
    UnknownInput,
}

impl OpaqueKind {
    /// Its name, as conditions compare it.
    pub fn name(self) -> &'static str {
        match self {
            OpaqueKind::Unparsed => "unparsed",
            OpaqueKind::DynamicCommand => "dynamic_command",
            OpaqueKind::DynamicCode => "dynamic_code",
            OpaqueKind::PipedCode => "piped_code",
            OpaqueKind::DownloadAndRun => "download_and_run",
            OpaqueKind::InlineCode => "inline_code",
            OpaqueKind::UnknownInput => "unknown_input",
        }
    }
}

/// A part of the command that cannot be seen through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Opaque {
    /// What kind.
    pub kind: OpaqueKind,
    /// The part, as written.
    pub text: String,
}

/// What a supervisor acts on, found in the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A recursive or forced delete outside the project (or of a file there that is not
    /// temporary), `find -delete`, `find -exec rm`, `shred`.
    DeleteOutside,
    /// A file outside the project overwritten or truncated (`>`, `truncate`, `tee`, `dd of=`).
    OverwriteOutside,
    /// A device written to (`dd of=/dev/sda`, `> /dev/sda`).
    DeviceWrite,
    /// A file system made, or a disk partitioned or wiped (`mkfs`, `wipefs`, `fdisk`).
    FormatDevice,
    /// Permissions or owners changed recursively on the home folder, a system folder or one
    /// holding the project (`chmod -R 777 /`).
    PermissionChange,
    /// The home folder, a system folder or one holding the project moved away (`mv ~ ...`).
    MoveAway,
    /// A function that starts itself in the background or a pipeline: a fork bomb.
    ForkBomb,
    /// Warden's own files or an agent's hook configuration written, deleted or moved, or
    /// changed through `warden` itself (`warden rules disable`, `warden hook`...).
    WardenFiles,
    /// A forced push to `main` or `master`.
    ForcedPush,
    /// The project's folder itself deleted.
    DeleteProject,
    /// A file outside the project written (not overwritten: created, appended, copied or moved
    /// there, permissions changed).
    WriteOutside,
    /// Code that cannot be seen through (see [`OpaqueKind`]).
    UnseenCode,
    /// Something that reaches beyond the project without naming a path: the user's crontab
    /// removed or replaced, every process signalled (`kill -1`), the machine shut down.
    BeyondProject,
    /// A forced push that names no branch (it pushes the current one).
    ForcedPushUnnamed,
}

impl FindingKind {
    /// Its name, as conditions compare it.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::DeleteOutside => "delete_outside",
            FindingKind::OverwriteOutside => "overwrite_outside",
            FindingKind::DeviceWrite => "device_write",
            FindingKind::FormatDevice => "format_device",
            FindingKind::PermissionChange => "permission_change",
            FindingKind::MoveAway => "move_away",
            FindingKind::ForkBomb => "fork_bomb",
            FindingKind::WardenFiles => "warden_files",
            FindingKind::ForcedPush => "forced_push",
            FindingKind::DeleteProject => "delete_project",
            FindingKind::WriteOutside => "write_outside",
            FindingKind::UnseenCode => "unseen_code",
            FindingKind::BeyondProject => "beyond_project",
            FindingKind::ForcedPushUnnamed => "forced_push_unnamed",
        }
    }

    /// Whether it destroys what is outside the project (or Warden itself, or shared history):
    /// what a guard refuses outright, rather than asks about.
    pub fn destroys(self) -> bool {
        matches!(
            self,
            FindingKind::DeleteOutside
                | FindingKind::OverwriteOutside
                | FindingKind::DeviceWrite
                | FindingKind::FormatDevice
                | FindingKind::PermissionChange
                | FindingKind::MoveAway
                | FindingKind::ForkBomb
                | FindingKind::WardenFiles
                | FindingKind::ForcedPush
        )
    }
}

/// One finding: what, in which command, on which path, and a message that says what to do
/// instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is.
    pub kind: FindingKind,
    /// The command, as the shell would run it.
    pub command: String,
    /// The path concerned, when there is one (as written).
    pub path: String,
    /// What it does, and what to do instead, for the agent.
    pub message: String,
}

/// What a shell command would do.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Analysis {
    /// The command analyzed.
    pub command: String,
    /// Every simple command that would run, in order.
    pub commands: Vec<Command>,
    /// The paths deleted.
    pub deletes: Vec<PathUse>,
    /// The paths written (overwritten, created, appended to, moved to, changed).
    pub writes: Vec<PathUse>,
    /// What cannot be seen through.
    pub opaque: Vec<Opaque>,
    /// What a supervisor acts on.
    pub findings: Vec<Finding>,
}

impl Analysis {
    /// The programs that would run, in order, each once.
    pub fn programs(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.commands {
            if !out.contains(&c.program.as_str()) {
                out.push(&c.program);
            }
        }
        out
    }

    /// Whether it deletes something outside the project (temporary files aside).
    pub fn deletes_outside_project(&self) -> bool {
        self.deletes.iter().any(|p| p.place.is_outside())
    }

    /// Whether it writes something outside the project (temporary files aside).
    pub fn writes_outside_project(&self) -> bool {
        self.writes.iter().any(|p| p.place.is_outside())
    }

    /// Whether it runs code Warden cannot see.
    pub fn runs_unseen_code(&self) -> bool {
        !self.opaque.is_empty()
    }

    /// Whether a finding destroys what is outside the project (see [`FindingKind::destroys`]).
    pub fn destroys(&self) -> bool {
        self.findings.iter().any(|f| f.kind.destroys())
    }

    /// Whether it reaches beyond the project without naming a path (crontab, every process,
    /// the machine).
    pub fn reaches_beyond_project(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.kind == FindingKind::BeyondProject)
    }

    /// Whether it writes, deletes or moves Warden's own files or an agent's hook configuration.
    pub fn touches_warden(&self) -> bool {
        self.findings
            .iter()
            .any(|f| f.kind == FindingKind::WardenFiles)
    }

    /// The message of the first finding that destroys, or an empty string.
    pub fn destruction(&self) -> &str {
        self.findings
            .iter()
            .find(|f| f.kind.destroys())
            .map_or("", |f| f.message.as_str())
    }

    /// The message of the first finding that does not destroy but is worth a person's look
    /// (code it cannot see, a write outside the project, something beyond the project), or an
    /// empty string.
    pub fn concern(&self) -> &str {
        self.findings
            .iter()
            .find(|f| !f.kind.destroys())
            .map_or("", |f| f.message.as_str())
    }
}
