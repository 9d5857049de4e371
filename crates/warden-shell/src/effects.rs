//! What one simple command does, by its program: the wrappers taken off, then the paths it
//! deletes and writes (its flags read the way the program reads them), what it reaches beyond
//! the project, the code it runs (handed to `runners.rs`), and what it prints, for the next
//! command of a pipeline.

use base64::Engine as _;

use crate::args::getopt;
use crate::collect::{Input, Op, Recurse, Run, shown};
use crate::model::{FindingKind, OpaqueKind};
use crate::runners;
use crate::words::{Expanded, ansi_c};
use crate::wrappers::{base, unwrap};

/// Runs one simple command (its words expanded): what it prints.
pub(crate) fn run(w: &mut dyn Recurse, argv: Vec<Expanded>, run: &Run, stdin: Input) -> Input {
    let Some(first) = argv.first() else {
        return Input::Unknown;
    };
    if !first.literal || first.process.is_some() {
        let text = words_text(&argv);
        w.opaque(OpaqueKind::DynamicCommand, &text);
        return Input::Unknown;
    }
    let u = unwrap(&argv);
    let mut run = run.clone();
    run.wrappers.extend(u.wrappers.iter().cloned());
    if let Some(dir) = &u.chdir {
        run.cwd = if dir.literal {
            Some(w.resolve(&dir.text, run.cwd.as_deref()).path)
        } else {
            None
        };
    }
    let argv: Vec<Expanded> = match u.split {
        Some(words) => words,
        None => argv[u.start.min(argv.len())..].to_vec(),
    };
    if u.runs_nothing || argv.is_empty() {
        return Input::Unknown;
    }
    if !argv[0].literal {
        w.opaque(OpaqueKind::DynamicCommand, &words_text(&argv));
        return Input::Unknown;
    }
    let program = base(&argv[0].text).to_string();
    let args = &argv[1..];
    let text = w.command(&program, args, &run);
    let text = text.as_str();
    if w.was_fetched(&argv[0].text) {
        // `curl -o install.sh URL && chmod +x install.sh && ./install.sh`.
        w.opaque(OpaqueKind::DownloadAndRun, text);
    }
    if runners::is_shell(&program) {
        runners::shell(w, &argv, &run, &stdin, text);
        return Input::Unknown;
    }
    if let Some((lang, flags)) = crate::inline::language(&program) {
        runners::interpreter(w, lang, flags, &argv, &run, &stdin, text);
        return Input::Unknown;
    }
    match program.as_str() {
        "eval" => runners::eval(w, args, &run, text),
        "source" | "." => runners::source(w, args, &run, &stdin, text),
        "watch" => runners::watch(w, args, &run, text),
        "xargs" => runners::xargs(w, args, &run, &stdin, text),
        "find" => return runners::find(w, args, &run, text),
        _ => return files(w, &program, args, &run, stdin, text),
    }
    Input::Unknown
}

/// The words of a command, as written (for a command that cannot be seen through).
fn words_text(argv: &[Expanded]) -> String {
    argv.iter()
        .map(|a| a.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The programs that change files, or reach beyond the project; what each prints.
fn files(
    w: &mut dyn Recurse,
    program: &str,
    args: &[Expanded],
    run: &Run,
    stdin: Input,
    text: &str,
) -> Input {
    let each = |w: &mut dyn Recurse, paths: &[Expanded], op: Op| {
        for p in paths {
            w.path(p, run, op, text);
        }
    };
    match program {
        "rm" | "unlink" => {
            let a = getopt(args, "", &[]);
            let recursive = a.has(&["r", "R", "recursive"]);
            each(w, &a.operands, Op::Delete { recursive });
        }
        "shred" => {
            let a = getopt(args, "ns", &["iterations", "size", "random-source"]);
            let op = if a.has(&["u", "remove"]) {
                Op::Delete { recursive: false }
            } else {
                Op::Overwrite
            };
            each(w, &a.operands, op);
        }
        "truncate" => {
            let a = getopt(args, "sr", &["size", "reference"]);
            each(w, &a.operands, Op::Overwrite);
        }
        "dd" => {
            for a in args {
                if let Some(of) = a.text.strip_prefix("of=") {
                    let target = Expanded {
                        text: of.to_string(),
                        ..a.clone()
                    };
                    w.path(&target, run, Op::Overwrite, text);
                }
            }
        }
        p if formats(p) => format(w, args, run, text),
        "chmod" | "chown" | "chgrp" => {
            // A mode like `-x` is an operand of chmod, not an option.
            let (opts, operands): (Vec<Expanded>, Vec<Expanded>) =
                args.iter().cloned().partition(|a| {
                    a.literal
                        && a.text.starts_with('-')
                        && a.text[1..]
                            .chars()
                            .all(|c| "Rvcfh-".contains(c) || a.text.starts_with("--"))
                });
            let flags = getopt(&opts, "", &[]);
            let recursive = flags.has(&["R", "recursive"]);
            let by_reference = flags.values.iter().any(|(n, _)| n == "reference");
            let targets = if by_reference {
                &operands[..]
            } else {
                operands.get(1..).unwrap_or(&[])
            };
            each(w, targets, Op::Permissions { recursive });
        }
        "mv" | "cp" | "install" | "ln" | "rsync" => {
            let a = getopt(
                args,
                "tSmog",
                &[
                    "target-directory",
                    "suffix",
                    "mode",
                    "owner",
                    "group",
                    "backup",
                ],
            );
            let (sources, dest) = match a.value(&["t", "target-directory"]) {
                Some(t) => (a.operands.clone(), Some(t.clone())),
                None if a.operands.len() >= 2 => {
                    let (dest, sources) = a
                        .operands
                        .split_last()
                        .map_or((None, Vec::new()), |(d, s)| (Some(d.clone()), s.to_vec()));
                    (sources, dest)
                }
                None => (Vec::new(), None),
            };
            if program == "mv" || (program == "rsync" && a.has(&["remove-source-files"])) {
                each(w, &sources, Op::MoveAway);
            }
            if let Some(dest) = dest {
                // Copying an empty or endless device over a file empties or fills it.
                let emptied = sources.iter().any(|s| {
                    matches!(
                        s.text.as_str(),
                        "/dev/null" | "/dev/zero" | "/dev/urandom" | "/dev/random"
                    )
                });
                let op = if program == "rsync" && a.has(&["delete"]) {
                    Op::Delete { recursive: true }
                } else if emptied && program != "mv" {
                    Op::Overwrite
                } else {
                    Op::Write
                };
                w.path(&dest, run, op, text);
            }
        }
        "tee" => {
            let a = getopt(args, "", &["output-error"]);
            let op = if a.has(&["a", "append"]) {
                Op::Write
            } else {
                Op::Overwrite
            };
            each(w, &a.operands, op);
            return stdin;
        }
        "touch" | "mkdir" | "mkfifo" | "mknod" => {
            let a = getopt(args, "mdrtZ", &["mode", "date", "reference", "context"]);
            let targets = if program == "mknod" {
                a.operands.get(..1).unwrap_or(&[])
            } else {
                &a.operands[..]
            };
            each(w, targets, Op::Write);
        }
        "sed" => {
            let in_place = args.iter().any(|a| {
                a.text.starts_with("-i")
                    || a.text.starts_with("--in-place")
                    || (a.text.starts_with('-')
                        && !a.text.starts_with("--")
                        && a.text.contains('i')
                        && a.text.len() <= 4)
            });
            if in_place {
                let a = getopt(args, "efl", &["expression", "file", "line-length"]);
                let files = if a.value(&["e", "f", "expression", "file"]).is_some() {
                    &a.operands[..]
                } else {
                    a.operands.get(1..).unwrap_or(&[])
                };
                each(w, files, Op::Write);
            }
        }
        "git" => git(w, args, run, text),
        "warden" => warden(w, args, text),
        "sqlite3" => {
            // The database file, changed by whatever SQL it is given (`-readonly` aside).
            let a = getopt(
                args,
                "",
                &["cmd", "separator", "newline", "nullvalue", "init"],
            );
            if !a.has(&["readonly"])
                && let Some(db) = a.operands.first()
            {
                w.path(db, run, Op::Write, text);
            }
        }
        "curl" | "wget" => return fetch(w, program, args, run, text),
        "crontab" => {
            let a = getopt(args, "u", &[]);
            let what = if a.has(&["r"]) {
                Some("removes the user's crontab")
            } else if a.has(&["e"]) || !a.operands.is_empty() {
                Some("replaces the user's crontab")
            } else {
                None
            };
            if let Some(what) = what {
                beyond(w, text, what);
            }
        }
        "kill" => {
            let mut pids = args
                .iter()
                .skip_while(|a| a.text.starts_with('-') && a.text != "-1" && a.text != "--");
            let every = args.len() == 1 && args[0].text == "-1"
                || pids.any(|a| a.text == "-1")
                || args
                    .windows(2)
                    .any(|p| p[0].text.starts_with('-') && p[1].text == "-1");
            if every {
                beyond(w, text, "signals every process the user runs");
            }
        }
        "killall5" => beyond(w, text, "signals every process"),
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            beyond(w, text, "shuts the machine down or restarts it")
        }
        "init" | "telinit" if args.iter().any(|a| matches!(a.text.as_str(), "0" | "6")) => {
            beyond(w, text, "shuts the machine down or restarts it");
        }
        "systemctl"
            if args.iter().any(|a| {
                matches!(
                    a.text.as_str(),
                    "poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate"
                )
            }) =>
        {
            beyond(w, text, "shuts the machine down or restarts it");
        }
        "echo" => return echo(args),
        "printf" => {
            return match args.split_first() {
                Some((format, rest)) if format.literal && rest.iter().all(|a| a.literal) => {
                    printf(&format.text, rest).map_or(Input::Unknown, Input::Literal)
                }
                _ => Input::Unknown,
            };
        }
        "cat" if args.is_empty() => return stdin,
        "pwd" => return run.cwd.clone().map_or(Input::Unknown, Input::Literal),
        "base64" => {
            let a = getopt(args, "w", &["wrap"]);
            if a.has(&["d", "decode", "D"]) && a.operands.is_empty() {
                return match stdin {
                    Input::Literal(s) => decode(&s),
                    _ => Input::Unknown,
                };
            }
        }
        "ls" => {
            let a = getopt(args, "", &[]);
            let dir = a.operands.first().map_or(".", |o| o.text.as_str());
            return Input::Paths(w.resolve(dir, run.cwd.as_deref()).path);
        }
        _ => {}
    }
    Input::Unknown
}

/// `warden` itself: the commands that change what supervises the agent (users' choices, saved
/// sessions, the store, the agent's hooks) or that answer a hook as the agent's host does (a
/// made-up prompt would lift a stop). Run by the agent, each could undo a refusal; reading
/// (`check`, `rules list`, `test`, `shell`...) is its to do.
fn warden(w: &mut dyn Recurse, args: &[Expanded], text: &str) {
    // The global options that take a value, which may come before the command.
    const VALUED: [&str; 9] = [
        "--config",
        "--rules",
        "--plugins",
        "--capability",
        "--db",
        "--user",
        "--project",
        "--modes",
        "--color",
    ];
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if VALUED.contains(&a.text.as_str()) {
            it.next();
        } else if !a.text.starts_with('-') || !a.literal {
            words.push(a);
            if words.len() == 2 {
                break;
            }
        }
    }
    if words.iter().any(|a| !a.literal) {
        // `warden rules $WHAT ...`: which command, Warden cannot tell.
        w.opaque(OpaqueKind::DynamicCommand, text);
        return;
    }
    let word = |i: usize| words.get(i).map(|a| a.text.as_str());
    let what = match (word(0), word(1)) {
        (Some("rules"), Some("enable" | "disable" | "shadow" | "reset" | "set" | "unset")) => {
            "switches a rule or changes a setting of Warden"
        }
        (Some("sessions"), Some("rm" | "prune")) => "deletes Warden's saved sessions",
        (Some("migrate"), _) => "writes Warden's store",
        (Some("init"), _) => "rewrites the agent's hooks",
        (Some("hook"), _) => "answers a hook in the agent's host's place",
        _ => return,
    };
    let c = shown(text);
    w.finding(
        FindingKind::WardenFiles,
        text,
        format!("`{c}` {what}: the supervisor is not the agent's to change; ask the user"),
    );
}

/// A finding that reaches beyond the project.
fn beyond(w: &mut dyn Recurse, text: &str, what: &str) {
    let c = shown(text);
    w.finding(
        FindingKind::BeyondProject,
        text,
        format!("`{c}` {what}, beyond the project: ask the user to do it"),
    );
}

/// The programs that make file systems, or partition or wipe disks.
fn formats(program: &str) -> bool {
    program.starts_with("mkfs")
        || matches!(
            program,
            "mke2fs"
                | "mkswap"
                | "mkntfs"
                | "mkdosfs"
                | "wipefs"
                | "fdisk"
                | "sfdisk"
                | "cfdisk"
                | "parted"
                | "sgdisk"
                | "gdisk"
                | "blkdiscard"
                | "cryptsetup"
        )
}

/// A file system made or a disk wiped: a finding for every device named (as an operand or an
/// option's value: `mkfs.ext4 -F /dev/sda1`, `dd`-like `of=` aside); a file (an image) is
/// overwritten.
fn format(w: &mut dyn Recurse, args: &[Expanded], run: &Run, text: &str) {
    let mut devices = 0;
    for target in args.iter().filter(|a| a.literal) {
        let path = target
            .text
            .split_once('=')
            .map_or(target.text.as_str(), |(_, v)| v);
        if !path.starts_with('/') && !path.starts_with('.') {
            continue;
        }
        if w.resolve(path, run.cwd.as_deref()).place == crate::model::Place::Device {
            devices += 1;
            let c = shown(text);
            w.finding(
                FindingKind::FormatDevice,
                text,
                format!(
                    "`{c}` formats, partitions or wipes `{path}`, which destroys what the disk holds: ask the user to do it"
                ),
            );
        }
    }
    if devices == 0 {
        // An image file, the last operand.
        if let Some(image) = args
            .iter()
            .rev()
            .find(|a| a.literal && !a.text.starts_with('-') && a.text.contains(['/', '.']))
        {
            w.path(image, run, Op::Overwrite, text);
        }
    }
}

/// What `echo` prints, when its words are literal.
fn echo(args: &[Expanded]) -> Input {
    let mut words = args;
    let mut escapes = false;
    while let Some(first) = words.first() {
        match first.text.as_str() {
            "-n" | "-E" => words = &words[1..],
            "-e" | "-ne" | "-en" => {
                escapes = true;
                words = &words[1..];
            }
            _ => break,
        }
    }
    if !words.iter().all(|w| w.literal) {
        return Input::Unknown;
    }
    let text = words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    Input::Literal(if escapes { ansi_c(&text) } else { text })
}

/// What `printf FORMAT ARGS...` prints, when its format has only `%s` (and `%%`): the format
/// is used again while arguments are left, as printf does.
fn printf(format: &str, args: &[Expanded]) -> Option<String> {
    let format = ansi_c(format);
    let specs = format.matches('%').count() - 2 * format.matches("%%").count();
    if specs != format.matches("%s").count() {
        return None;
    }
    let mut out = String::new();
    let mut args = args.iter().map(|a| a.text.as_str());
    loop {
        let mut used = false;
        let mut rest = format.as_str();
        while let Some(at) = rest.find('%') {
            out.push_str(&rest[..at]);
            if rest[at..].starts_with("%%") {
                out.push('%');
            } else {
                out.push_str(args.next().unwrap_or(""));
                used = true;
            }
            rest = &rest[at + 2..];
        }
        out.push_str(rest);
        if !used || args.len() == 0 || out.len() > crate::MAX_COMMAND {
            return Some(out);
        }
    }
}

/// What `base64 -d` of literal text prints.
fn decode(text: &str) -> Input {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .map_or(Input::Unknown, Input::Literal)
}

/// `curl` and `wget`: the files they write; what they print (the document, when it goes to
/// standard output).
fn fetch(w: &mut dyn Recurse, program: &str, args: &[Expanded], run: &Run, text: &str) -> Input {
    let (a, to_stdout) = if program == "curl" {
        let a = getopt(
            args,
            "odHXuAebcFxwmrTKEUzYyCtQP",
            &[
                "output",
                "data",
                "header",
                "request",
                "user",
                "user-agent",
                "referer",
                "cookie",
                "cookie-jar",
                "form",
                "proxy",
                "write-out",
                "max-time",
                "range",
                "upload-file",
                "config",
                "output-dir",
                "connect-timeout",
                "retry",
                "data-raw",
                "data-binary",
                "data-urlencode",
                "cacert",
                "cert",
                "key",
            ],
        );
        let written =
            a.value(&["o", "output"]).is_some() || a.has(&["O", "remote-name", "remote-name-all"]);
        (a, !written)
    } else {
        let a = getopt(
            args,
            "OoaPUeTtwQ",
            &[
                "output-document",
                "output-file",
                "append-output",
                "directory-prefix",
                "user-agent",
                "execute",
                "timeout",
                "tries",
                "wait",
                "quota",
            ],
        );
        let stdout = a
            .value(&["O", "output-document"])
            .is_some_and(|o| o.text == "-");
        (a, stdout)
    };
    for name in [
        "o",
        "output",
        "O",
        "output-document",
        "c",
        "cookie-jar",
        "output-file",
        "a",
        "append-output",
    ] {
        if program == "curl" && name == "O" {
            continue;
        }
        for (n, v) in &a.values {
            if n == name && v.text != "-" {
                w.path(v, run, Op::Overwrite, text);
                if matches!(name, "o" | "output" | "O" | "output-document") {
                    w.fetched(&v.text);
                }
            }
        }
    }
    // A document saved under the name its URL ends with (`curl -O`, `wget URL`).
    let remote_name = if program == "curl" {
        a.has(&["O", "remote-name", "remote-name-all"])
    } else {
        a.value(&["O", "output-document"]).is_none()
    };
    if remote_name {
        for url in a.operands.iter().filter(|o| o.text.contains("://")) {
            let path = url.text.split(['?', '#']).next().unwrap_or("");
            if let Some(name) = path.rsplit('/').next().filter(|n| !n.is_empty()) {
                w.fetched(name);
            }
        }
    }
    if to_stdout {
        Input::Download(text.to_string())
    } else {
        Input::Unknown
    }
}

/// `git`: a forced push to `main` or `master` rewrites shared history; one that names no branch
/// pushes the current one.
fn git(w: &mut dyn Recurse, args: &[Expanded], run: &Run, text: &str) {
    // Global options before the subcommand.
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" => i += 2,
            t if t.starts_with('-') => i += 1,
            _ => break,
        }
    }
    if args.get(i).is_some_and(|a| a.text == "clone") {
        // `git clone URL DIR` writes DIR (the URL's name in the working folder without one).
        let clone = getopt(
            &args[i + 1..],
            "obujc",
            &[
                "origin",
                "branch",
                "upload-pack",
                "reference",
                "depth",
                "config",
                "jobs",
                "template",
                "separate-git-dir",
                "filter",
            ],
        );
        if let [_, dir, ..] = &clone.operands[..] {
            w.path(dir, run, Op::Write, text);
        }
        return;
    }
    if args.get(i).is_none_or(|a| a.text != "push") {
        return;
    }
    let push = getopt(
        &args[i + 1..],
        "o",
        &["repo", "receive-pack", "exec", "push-option", "signed"],
    );
    let plus = push.operands.iter().any(|o| o.text.starts_with('+'));
    let forced = plus
        || push.has(&["f", "force"])
        || push
            .flags
            .iter()
            .any(|f| f.starts_with("force-with-lease") || f == "force-if-includes")
        || push
            .values
            .iter()
            .any(|(n, _)| n.starts_with("force-with-lease"));
    if !forced {
        return;
    }
    let all = push.has(&["all", "mirror"]);
    // The first operand is the remote when more follow.
    let refs: Vec<String> = push
        .operands
        .iter()
        .skip(usize::from(push.operands.len() > 1))
        .map(|o| {
            let r = o.text.trim_start_matches('+');
            let dest = r.rsplit_once(':').map_or(r, |(_, d)| d);
            dest.trim_start_matches("refs/heads/").to_string()
        })
        .collect();
    if let Some(branch) = refs
        .iter()
        .find(|b| matches!(b.as_str(), "main" | "master"))
    {
        w.finding(
            FindingKind::ForcedPush,
            text,
            format!(
                "a forced push to `{branch}` rewrites shared history: push to a branch of your own and open a pull request"
            ),
        );
    } else if refs.is_empty() || all {
        w.finding(
            FindingKind::ForcedPushUnnamed,
            text,
            "a forced push without a branch named pushes the current branch: check it is not main or master".into(),
        );
    }
}
