//! Random commands built from the pieces of bash that matter to the analysis (quotes,
//! substitutions, wrappers, pipes, loops, here-documents, interpreters), each analyzed: no
//! panic, every finding with a message, a command Warden cannot read never harmless. (It found
//! `$( << > - `, on which brush's tokenizer loops without end: `syntax.rs` refuses it.) The
//! cargo-fuzz target `shell_command` (fuzz/) does the same with coverage guidance; this runs at
//! every `cargo test`.

use proptest::prelude::*;
use warden_shell::{Env, OpaqueKind, analyze, parses};

const PIECES: &[&str] = &[
    "rm",
    "-rf",
    "-r",
    "-f",
    "--recursive",
    "/",
    "/etc",
    "~",
    "$HOME",
    "..",
    "*",
    "./a",
    "x",
    "'",
    "\"",
    "\\",
    "$(",
    "`",
    ")",
    "(",
    "{",
    "}",
    "${",
    "$1",
    "$@",
    "$X",
    "X=/",
    ";",
    "&&",
    "||",
    "|",
    "&",
    "\n",
    "<<",
    "<<<",
    "EOF",
    ">",
    ">>",
    "2>&1",
    "<(",
    "eval",
    "sh",
    "bash",
    "-c",
    "-lc",
    "-s",
    "--",
    "xargs",
    "-I{}",
    "{}",
    "find",
    "-delete",
    "-exec",
    "+",
    "\\;",
    "for",
    "in",
    "do",
    "done",
    "while",
    "read",
    "f",
    "if",
    "then",
    "fi",
    "case",
    "esac",
    "))",
    "sudo",
    "env",
    "timeout",
    "5",
    "nice",
    "nohup",
    "command",
    "exec",
    "cd",
    "pushd",
    "popd",
    "echo",
    "printf",
    "'%s\\n'",
    "base64",
    "-d",
    "curl",
    "-o",
    "https://x.sh",
    "wget",
    "-O-",
    "python3",
    "perl",
    "-e",
    "node",
    "'import shutil; shutil.rmtree(\"/\")'",
    "\"os.system('rm -rf /')\"",
    "dd",
    "of=/dev/sda",
    "mkfs.ext4",
    "/dev/sda1",
    "chmod",
    "-R",
    "777",
    "mv",
    "cp",
    "/dev/null",
    "tee",
    "truncate",
    "-s",
    "0",
    "git",
    "push",
    "--force",
    "origin",
    "main",
    ":(){",
    ":|:&",
    "};:",
    "crontab",
    "kill",
    "-1",
    "f()",
    "$'\\x72m'",
    ".warden",
    ".claude/settings.json",
    "sqlite3",
    "#",
    " ",
    "<<-",
    "<<'E'",
    "E",
    "$[",
    "$((",
    "\t",
    "${x",
];

fn command() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..40).prop_map(|pieces| {
        let mut c = String::new();
        for p in pieces {
            c.push_str(p);
            c.push(' ');
        }
        c
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_command_is_analyzed_without_panic_and_unread_is_never_harmless(c in command()) {
        let env = Env {
            follow_links: false,
            ..Env::for_project("/home/ada/app").with_home("/home/ada")
        };
        let a = analyze(&c, &env);
        for f in &a.findings {
            prop_assert!(!f.message.is_empty());
        }
        prop_assert_eq!(a.destroys(), !a.destruction().is_empty());
        if !parses(&c) {
            prop_assert!(a.opaque.iter().any(|o| o.kind == OpaqueKind::Unparsed), "{c:?}");
            prop_assert!(a.destroys() || !a.concern().is_empty(), "{c:?}");
        }
    }
}
