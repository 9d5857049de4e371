//! The programs that run more code: shells (`sh -c`, a script piped in), `eval`, `source`,
//! `watch`, `xargs`, `find -exec`, and interpreters with inline code. What they run is analyzed
//! in turn (through [`Recurse`]), to a bounded depth; what cannot be read is opaque.

use crate::args::getopt;
use crate::collect::{Input, Op, Recurse, Run, shown};
use crate::inline::{self, Act, Lang};
use crate::model::OpaqueKind;
use crate::words::{Expanded, quote};

/// The shells, which run `-c CODE` or a script read from their standard input.
pub(crate) fn is_shell(program: &str) -> bool {
    matches!(
        program,
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "fish" | "busybox" | "rbash"
    )
}

/// The programs that fetch from the network.
fn fetches(code: &str) -> bool {
    code.split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .any(|w| matches!(w, "curl" | "wget" | "fetch" | "aria2c" | "http" | "httpie"))
}

/// The words of `args` as one line of code.
fn joined(args: &[Expanded]) -> Expanded {
    Expanded {
        text: args
            .iter()
            .map(|a| a.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        literal: args.iter().all(|a| a.literal),
        substitutions: args.iter().flat_map(|a| a.substitutions.clone()).collect(),
        ..Expanded::default()
    }
}

/// Code given as a word (`sh -c WORD`, `eval WORDS`): analyzed when literal; otherwise opaque,
/// as a download run when what computes it fetches from the network.
fn code_word(
    w: &mut dyn Recurse,
    code: &Expanded,
    args: &[Expanded],
    run: &Run,
    via: &str,
    text: &str,
) {
    if code.literal && code.process.is_none() {
        w.code(&code.text, run, via, args);
    } else if code.substitutions.iter().any(|s| fetches(s))
        || code.process.as_deref().is_some_and(fetches)
    {
        w.opaque(OpaqueKind::DownloadAndRun, text);
    } else {
        w.opaque(OpaqueKind::DynamicCode, text);
    }
}

/// Code read from standard input by a shell or an interpreter: analyzed when it is literal.
fn piped(w: &mut dyn Recurse, stdin: &Input, run: &Run, via: &str, text: &str, lang: Option<Lang>) {
    match stdin {
        Input::Literal(code) => match lang {
            None => w.code(code, run, via, &[]),
            Some(lang) => inline_code(w, lang, code, run, via, text),
        },
        Input::Download(fetch) => {
            w.opaque(
                OpaqueKind::DownloadAndRun,
                &format!("{} | {text}", shown(fetch)),
            );
        }
        Input::Unknown | Input::Paths(_) => w.opaque(OpaqueKind::PipedCode, &format!("… | {text}")),
        // A terminal (an interactive shell) or a file read as a script.
        Input::Terminal | Input::File => {}
    }
}

/// `sh -c CODE`, `bash -lc CODE`, `bash script.sh`, `curl ... | sh`.
pub(crate) fn shell(w: &mut dyn Recurse, argv: &[Expanded], run: &Run, stdin: &Input, text: &str) {
    let program = argv[0].text.as_str();
    let mut i = 1;
    let (mut has_c, mut has_s) = (false, false);
    // `busybox sh ...` is `sh ...`.
    if program == "busybox" {
        if argv.get(1).is_none_or(|a| !is_shell(&a.text)) {
            return;
        }
        i = 2;
    }
    while let Some(a) = argv.get(i) {
        let t = a.text.as_str();
        if t == "--" {
            i += 1;
            break;
        }
        if !a.literal || !(t.starts_with('-') || t.starts_with('+')) || t == "-" {
            break;
        }
        if matches!(t, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if !t.starts_with("--") && t[1..].contains('c') {
            has_c = true;
        }
        if !t.starts_with("--") && t[1..].contains('s') {
            has_s = true;
        }
        i += 1;
    }
    if has_c {
        if let Some(code) = argv.get(i) {
            // `sh -c CODE NAME ARGS...`: NAME is `$0`, ARGS `$1` onwards.
            let args = argv.get(i + 2..).unwrap_or(&[]);
            code_word(w, code, args, run, &format!("{program} -c"), text);
        }
        return;
    }
    match argv.get(i) {
        // `sh -s ARGS...` reads its code from standard input; the words are its parameters.
        _ if has_s => piped(w, stdin, run, &format!("piped into {program}"), text, None),
        // A script read from a process substitution: `bash <(curl ...)`.
        Some(a) if a.process.is_some() => {
            let fetched = a.process.as_deref().is_some_and(fetches);
            let kind = if fetched {
                OpaqueKind::DownloadAndRun
            } else {
                OpaqueKind::PipedCode
            };
            w.opaque(kind, text);
        }
        // A script this command downloaded: `curl -o x.sh URL; bash x.sh`.
        Some(a) if w.was_fetched(&a.text) => w.opaque(OpaqueKind::DownloadAndRun, text),
        // A script file, or `-` for standard input.
        Some(a) if a.text != "-" && a.text != "/dev/stdin" => {}
        _ => piped(w, stdin, run, &format!("piped into {program}"), text, None),
    }
}

/// `eval WORDS`: the words joined, as one line of code.
pub(crate) fn eval(w: &mut dyn Recurse, args: &[Expanded], run: &Run, text: &str) {
    let code = joined(args);
    code_word(w, &code, &[], run, "eval", text);
}

/// `source FILE`, `. FILE`: a file, or code from a process substitution or standard input.
pub(crate) fn source(w: &mut dyn Recurse, args: &[Expanded], run: &Run, stdin: &Input, text: &str) {
    match args.first() {
        Some(a) if a.process.is_some() => {
            let kind = if a.process.as_deref().is_some_and(fetches) {
                OpaqueKind::DownloadAndRun
            } else {
                OpaqueKind::PipedCode
            };
            w.opaque(kind, text);
        }
        Some(a) if a.text == "/dev/stdin" || a.text == "-" => {
            piped(w, stdin, run, "source", text, None);
        }
        Some(a) if w.was_fetched(&a.text) => w.opaque(OpaqueKind::DownloadAndRun, text),
        _ => {}
    }
}

/// `watch [options] COMMAND...`: run again and again, through `sh -c` (or directly with `-x`).
pub(crate) fn watch(w: &mut dyn Recurse, args: &[Expanded], run: &Run, text: &str) {
    let mut i = 0;
    let mut direct = false;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if !t.starts_with('-') {
            break;
        }
        if matches!(t, "-x" | "--exec") {
            direct = true;
        }
        if matches!(t, "-n" | "--interval" | "-q" | "--equexit") {
            i += 1;
        }
        i += 1;
    }
    let words = &args[i.min(args.len())..];
    if words.is_empty() {
        return;
    }
    let run = Run {
        wrappers: [run.wrappers.clone(), vec!["watch".into()]].concat(),
        via: Some("watch".into()),
        ..run.clone()
    };
    if direct {
        w.argv(words.to_vec(), &run, Input::Terminal);
    } else {
        code_word(w, &joined(words), &[], &run, "watch", text);
    }
}

/// The programs whose arguments are files they change: a target from an input Warden cannot
/// see is a risk for these.
fn changes_files(program: &str) -> bool {
    matches!(
        program,
        "rm" | "unlink"
            | "shred"
            | "mv"
            | "cp"
            | "ln"
            | "chmod"
            | "chown"
            | "chgrp"
            | "truncate"
            | "dd"
            | "tee"
            | "sed"
            | "install"
            | "rsync"
    )
}

/// `xargs [options] [COMMAND...]`: the command, with arguments read from standard input (or
/// `-a FILE`).
pub(crate) fn xargs(w: &mut dyn Recurse, args: &[Expanded], run: &Run, stdin: &Input, text: &str) {
    // Its options stop at the first operand: what follows is the command, with its own.
    let mut cut = 0;
    while let Some(a) = args.get(cut) {
        let t = a.text.as_str();
        if !a.literal || !t.starts_with('-') || t == "-" {
            break;
        }
        let separate = matches!(
            t,
            "-d" | "-E"
                | "-I"
                | "-L"
                | "-n"
                | "-P"
                | "-s"
                | "-a"
                | "--arg-file"
                | "--delimiter"
                | "--max-args"
                | "--max-procs"
                | "--max-lines"
                | "--replace"
        );
        cut += if separate { 2 } else { 1 };
    }
    let cut = cut.min(args.len());
    let opts = getopt(
        &args[..cut],
        "dEILnPsa",
        &["arg-file", "delimiter", "replace"],
    );
    let replace = opts
        .value(&["I", "replace"])
        .map(|r| r.text.clone())
        .or_else(|| opts.has(&["i"]).then(|| "{}".to_string()));
    let mut command: Vec<Expanded> = args[cut..].to_vec();
    if command.is_empty() {
        command.push(Expanded::literal("echo"));
    }
    let input = if opts.value(&["a", "arg-file"]).is_some() {
        Input::File
    } else {
        stdin.clone()
    };
    let items: Option<Vec<Expanded>> = match &input {
        Input::Literal(s) => {
            let items: Vec<&str> = if opts.has(&["0", "null"]) {
                s.split('\0').collect()
            } else if opts.value(&["d", "delimiter"]).is_some() || replace.is_some() {
                s.lines().collect()
            } else {
                s.split_whitespace().collect()
            };
            Some(
                items
                    .into_iter()
                    .filter(|i| !i.is_empty())
                    .take(64)
                    .map(Expanded::literal)
                    .collect(),
            )
        }
        Input::Paths(root) => Some(vec![Expanded {
            text: format!("{}/*", root.trim_end_matches('/')),
            literal: true,
            glob: true,
            ..Expanded::default()
        }]),
        _ => None,
    };
    let program = crate::wrappers::base(&command[0].text).to_string();
    let run = Run {
        wrappers: [run.wrappers.clone(), vec!["xargs".into()]].concat(),
        via: Some("xargs".into()),
        ..run.clone()
    };
    match items {
        Some(items) => match &replace {
            Some(r) => {
                for item in items.iter().take(16) {
                    let argv = command
                        .iter()
                        .map(|c| Expanded {
                            text: c.text.replace(r.as_str(), &item.text),
                            glob: c.glob || (item.glob && c.text.contains(r.as_str())),
                            ..c.clone()
                        })
                        .collect();
                    w.argv(argv, &run, Input::Terminal);
                }
            }
            None => {
                command.extend(items);
                w.argv(command, &run, Input::Terminal);
            }
        },
        None => {
            if changes_files(&program) {
                w.opaque(OpaqueKind::UnknownInput, text);
            }
            command.push(Expanded {
                text: "<input>".into(),
                ..Expanded::default()
            });
            w.argv(command, &run, Input::Terminal);
        }
    }
}

/// `find [ROOTS] [EXPRESSION]`: `-delete` deletes what it finds below each root; `-exec`,
/// `-execdir`, `-ok` run their command on each; `-fprint FILE` writes. What it prints: the
/// paths below the first root.
pub(crate) fn find(w: &mut dyn Recurse, args: &[Expanded], run: &Run, command: &str) -> Input {
    let mut i = 0;
    // Its own options before the roots.
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let mut roots: Vec<&Expanded> = Vec::new();
    while let Some(a) = args.get(i) {
        if a.literal && (a.text.starts_with('-') || matches!(a.text.as_str(), "(" | "!" | ",")) {
            break;
        }
        roots.push(a);
        i += 1;
    }
    let dot = Expanded::literal(".");
    if roots.is_empty() {
        roots.push(&dot);
    }
    // What it finds: the paths below each root.
    let below = |root: &Expanded| Expanded {
        text: if root.text == "/" {
            "/*".into()
        } else {
            format!("{}/*", root.text.trim_end_matches('/'))
        },
        glob: true,
        ..root.clone()
    };
    let expr = &args[i.min(args.len())..];
    // Whether the tests before an action choose only some of what is below the roots (by
    // name, age, size...): `find . -name '*.pyc' -delete` is not `find . -delete`.
    let chosen = |k: usize| expr[..k].iter().any(|e| chooses(&e.text));
    let mut k = 0;
    while let Some(a) = expr.get(k) {
        let below = |root: &Expanded| Expanded {
            chosen: chosen(k),
            ..below(root)
        };
        match a.text.as_str() {
            "-delete" => {
                for root in &roots {
                    w.path(&below(root), run, Op::Delete { recursive: true }, command);
                }
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = expr[k + 1..]
                    .iter()
                    .position(|e| matches!(e.text.as_str(), ";" | "+"))
                    .map_or(expr.len(), |p| k + 1 + p);
                let words = &expr[k + 1..end];
                if !words.is_empty() {
                    let run = Run {
                        via: Some(format!("find {}", a.text)),
                        ..run.clone()
                    };
                    for root in &roots {
                        let found = below(root);
                        let argv = words
                            .iter()
                            .map(|w| {
                                if w.text.contains("{}") {
                                    Expanded {
                                        text: w.text.replace("{}", &found.text),
                                        glob: true,
                                        ..found.clone()
                                    }
                                } else {
                                    w.clone()
                                }
                            })
                            .collect();
                        w.argv(argv, &run, Input::Terminal);
                    }
                }
                k = end;
            }
            "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                if let Some(file) = expr.get(k + 1) {
                    w.path(file, run, Op::Overwrite, command);
                }
                k += 1;
            }
            _ => {}
        }
        k += 1;
    }
    roots
        .first()
        .filter(|r| r.literal)
        .map(|r| {
            let resolved = w.resolve(&r.text, run.cwd.as_deref());
            Input::Paths(resolved.path)
        })
        .unwrap_or(Input::Unknown)
}

/// Whether a test of `find` chooses only some of the files (by name, age, size, owner...).
fn chooses(test: &str) -> bool {
    matches!(
        test,
        "-name"
            | "-iname"
            | "-path"
            | "-ipath"
            | "-wholename"
            | "-iwholename"
            | "-regex"
            | "-iregex"
            | "-lname"
            | "-ilname"
            | "-newer"
            | "-anewer"
            | "-cnewer"
            | "-mtime"
            | "-mmin"
            | "-atime"
            | "-amin"
            | "-ctime"
            | "-cmin"
            | "-size"
            | "-empty"
            | "-user"
            | "-group"
            | "-nouser"
            | "-nogroup"
            | "-perm"
            | "-links"
            | "-inum"
            | "-samefile"
            | "-used"
    ) || test.starts_with("-newer")
}

/// An interpreter: its inline code (`-c`, `-e`...) read for what it runs and changes; a script
/// file run as it is; code piped in read when it is literal.
pub(crate) fn interpreter(
    w: &mut dyn Recurse,
    lang: Lang,
    code_flags: &[&str],
    argv: &[Expanded],
    run: &Run,
    stdin: &Input,
    text: &str,
) {
    let program = argv[0].text.as_str();
    let via = format!("{program} {}", code_flags.first().copied().unwrap_or(""));
    let args = &argv[1..];
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let t = a.text.as_str();
        if a.process.is_some() {
            // A script read from a process substitution: `python3 <(curl ...)`.
            let kind = if a.process.as_deref().is_some_and(fetches) {
                OpaqueKind::DownloadAndRun
            } else {
                OpaqueKind::PipedCode
            };
            w.opaque(kind, text);
            return;
        }
        if !a.literal {
            break;
        }
        if lang == Lang::Awk {
            if matches!(t, "-F" | "-v") {
                i += 2;
                continue;
            }
            if t == "-f" {
                return; // the program is a file
            }
            if t.starts_with('-') && t.len() > 1 {
                i += 1;
                continue;
            }
            // The first operand is the program.
            return inline_code(w, lang, t, run, &via, text);
        }
        // A code flag alone (`-c CODE`), grouped (`-ne CODE`) or with the code attached
        // (`-c'print(1)'`).
        // A group of single-letter flags may end with it (`perl -ne CODE`); an option with a
        // value (`-MFile::Path=remove_tree`) is not a group.
        let group = t.len() <= 5
            && t.starts_with('-')
            && !t.starts_with("--")
            && t[1..].chars().all(|c| c.is_ascii_alphabetic());
        let flag = code_flags
            .iter()
            .find(|f| t == **f || (f.len() == 2 && group && t.ends_with(&f[1..])));
        if let Some(f) = flag {
            match args.get(i + 1) {
                Some(code) if code.literal => inline_code(w, lang, &code.text, run, &via, text),
                Some(_) => w.opaque(OpaqueKind::InlineCode, text),
                None => {}
            }
            let _ = f;
            return;
        }
        if let Some(code) = code_flags
            .iter()
            .filter(|f| f.len() == 2)
            .find_map(|f| t.strip_prefix(*f).filter(|c| !c.is_empty()))
        {
            return inline_code(w, lang, code, run, &via, text);
        }
        if t == "-" {
            break;
        }
        if t.starts_with('-') {
            // `-m module` and other options with a value run a module, not inline code.
            if matches!(t, "-m" | "-r" | "-I" | "-M" | "--require" | "-x") {
                return;
            }
            i += 1;
            continue;
        }
        // A script file.
        return;
    }
    piped(
        w,
        stdin,
        run,
        &format!("piped into {program}"),
        text,
        Some(lang),
    );
}

/// What inline code does, recorded: its commands analyzed, its deletes and writes placed, what
/// cannot be read opaque.
fn inline_code(w: &mut dyn Recurse, lang: Lang, code: &str, run: &Run, via: &str, text: &str) {
    let run = Run {
        via: Some(via.to_string()),
        ..run.clone()
    };
    for act in inline::scan(lang, code, w.depth_left()) {
        match act {
            Act::Shell(cmd) => w.code(&cmd, &run, via, &[]),
            Act::Argv(words) => {
                let argv: Vec<Expanded> = words.into_iter().map(Expanded::literal).collect();
                w.argv(argv, &run, Input::Terminal);
            }
            Act::Delete { path, recursive } => {
                let shown = format!("{text} ({})", quote(&path));
                w.path(
                    &Expanded::literal(path),
                    &run,
                    Op::Delete { recursive },
                    &shown,
                );
            }
            Act::Write(path) => {
                w.path(&Expanded::literal(path), &run, Op::Overwrite, text);
            }
            Act::Unreadable(call) => {
                w.opaque(OpaqueKind::InlineCode, &format!("{text} ({call}…)"));
            }
        }
    }
}
