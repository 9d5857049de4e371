//! The program behind wrappers: `sudo -u root env -i LC_ALL=C nice -n 5 timeout 60 rm -rf /` runs
//! `rm -rf /`. Each wrapper's own options are skipped the way it reads them (an option that takes
//! a value takes the next word), so a wrapper's value is never taken for the program.

use crate::words::Expanded;

/// A command's words with its wrappers taken off.
#[derive(Debug, Default)]
pub(crate) struct Unwrapped {
    /// Where the program's words start (past the wrappers).
    pub start: usize,
    /// The wrappers, outermost first.
    pub wrappers: Vec<String>,
    /// A working folder a wrapper changes to (`env -C DIR`).
    pub chdir: Option<Expanded>,
    /// Words a wrapper splits a string into (`env -S 'rm -rf /'`): they replace the rest.
    pub split: Option<Vec<Expanded>>,
    /// The wrapper runs no program here (`command -v rm`, `ionice -p 42`, `sudo -s`).
    pub runs_nothing: bool,
}

/// The base name of a program as written: `/usr/bin/rm` is `rm`.
pub(crate) fn base(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// How a wrapper reads its options: the short options that take a value, the long ones that do
/// (`--user` takes one; `--user=x` is whole), and how many plain words it takes before the
/// program (`timeout`'s duration).
struct Shape {
    short_values: &'static str,
    long_values: &'static [&'static str],
    leading_words: usize,
}

fn shape(wrapper: &str) -> Option<Shape> {
    let s = |short_values, long_values, leading_words| {
        Some(Shape {
            short_values,
            long_values,
            leading_words,
        })
    };
    match wrapper {
        "sudo" => s(
            "ugCDhprtTU",
            &[
                "--user",
                "--group",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--other-user",
                "--close-from",
            ],
            0,
        ),
        "doas" => s("uC", &[], 0),
        "env" => s("uCS", &["--unset", "--chdir", "--split-string"], 0),
        "nice" => s("n", &["--adjustment"], 0),
        "ionice" => s("cnp", &["--class", "--classdata", "--pid"], 0),
        "timeout" => s("sk", &["--signal", "--kill-after"], 1),
        "nohup" | "builtin" | "unbuffer" | "caffeinate" => s("", &[], 0),
        "setsid" => s("", &[], 0),
        "time" => s("of", &["--output", "--format"], 0),
        "command" => s("", &[], 0),
        "exec" => s("a", &[], 0),
        "stdbuf" => s("ioe", &["--input", "--output", "--error"], 0),
        "chrt" => s("", &[], 1),
        "taskset" => s("", &[], 1),
        "flock" => s(
            "wEc",
            &["--timeout", "--conflict-exit-code", "--command"],
            1,
        ),
        _ => None,
    }
}

/// Takes the wrappers off `argv` (expanded words; the first is the program as written).
pub(crate) fn unwrap(argv: &[Expanded]) -> Unwrapped {
    let mut out = Unwrapped::default();
    let mut i = 0;
    while i < argv.len() {
        let word = &argv[i].text;
        // Assignments before the program (`LC_ALL=C rm ...`, and after `env`).
        if is_assignment(word) && (i == 0 || out.wrappers.last().is_some_and(|w| w == "env")) {
            i += 1;
            continue;
        }
        let name = base(word);
        let Some(shape) = shape(name) else {
            break;
        };
        if !argv[i].literal {
            break;
        }
        out.wrappers.push(name.to_string());
        i += 1;
        // Its options.
        while i < argv.len() {
            let w = argv[i].text.as_str();
            if w == "--" {
                i += 1;
                break;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            let value = |i: usize| argv.get(i + 1).cloned();
            if let Some(long) = w.strip_prefix("--") {
                let key = format!("--{}", long.split('=').next().unwrap_or(long));
                let takes = shape.long_values.contains(&key.as_str()) && !long.contains('=');
                let v = if takes {
                    value(i)
                } else {
                    long.split_once('=').map(|(_, v)| Expanded::literal(v))
                };
                match (name, key.as_str()) {
                    ("env", "--chdir") => out.chdir = v,
                    ("env", "--split-string") => {
                        out.split = v.map(|s| split_words(&s));
                    }
                    ("ionice", "--pid") | ("sudo", "--list") => out.runs_nothing = true,
                    _ => {}
                }
                i += if takes { 2 } else { 1 };
                continue;
            }
            // Short options, possibly grouped (`-in`), the last of which may take a value.
            let flags: Vec<char> = w[1..].chars().collect();
            let mut consumed = 1;
            for (k, f) in flags.iter().enumerate() {
                if (name == "command" && matches!(f, 'v' | 'V'))
                    || (name == "sudo" && matches!(f, 's' | 'i' | 'l' | 'v' | 'k' | 'K' | 'V'))
                    || (name == "ionice" && *f == 'p')
                {
                    out.runs_nothing = true;
                }
                if name == "nice" && f.is_ascii_digit() {
                    break; // `nice -10`
                }
                if shape.short_values.contains(*f) {
                    let attached: String = flags[k + 1..].iter().collect();
                    let v = if attached.is_empty() {
                        consumed = 2;
                        value(i)
                    } else {
                        Some(Expanded::literal(attached))
                    };
                    match (name, f) {
                        ("env", 'C') => out.chdir = v,
                        ("env", 'S') => out.split = v.map(|s| split_words(&s)),
                        ("flock", 'c') => {
                            // `flock FILE -c 'code'`: the code runs through a shell.
                            out.split = v.map(|code| {
                                vec![Expanded::literal("sh"), Expanded::literal("-c"), code]
                            });
                        }
                        _ => {}
                    }
                    break;
                }
            }
            i += consumed;
        }
        // Plain words the wrapper takes before the program (`timeout 60`, `chrt 10`).
        let leading = match name {
            // `chrt -p PRIO PID` and `taskset -p MASK PID` act on a process, running nothing.
            "chrt" | "taskset" if argv[..i].iter().any(|a| a.text == "-p") => {
                out.runs_nothing = true;
                0
            }
            // `flock FILE -c CODE` or `flock FILE COMMAND`.
            _ => shape.leading_words,
        };
        i = (i + leading).min(argv.len());
        if out.split.is_some() || out.runs_nothing {
            break;
        }
    }
    if i >= argv.len() && !out.wrappers.is_empty() && out.split.is_none() {
        // `sudo -s`, `nohup` alone: no program named.
        out.runs_nothing = true;
    }
    out.start = i;
    out
}

/// Whether `word` is an assignment (`NAME=value`).
pub(crate) fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The words of a string split as `env -S` splits it (on blanks; it is literal when the string
/// was).
fn split_words(s: &Expanded) -> Vec<Expanded> {
    s.text
        .split_whitespace()
        .map(|w| Expanded {
            text: w.to_string(),
            literal: s.literal,
            glob: w.contains(['*', '?', '[']),
            ..Expanded::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Expanded> {
        s.split(' ').map(Expanded::literal).collect()
    }

    fn program(s: &str) -> (String, Vec<String>) {
        let argv = words(s);
        let u = unwrap(&argv);
        let rest: Vec<String> = match &u.split {
            Some(split) => split.iter().map(|w| w.text.clone()).collect(),
            None => argv[u.start..].iter().map(|w| w.text.clone()).collect(),
        };
        (rest.join(" "), u.wrappers)
    }

    #[test]
    fn wrappers_and_their_options_are_taken_off() {
        for (command, runs) in [
            ("sudo rm -rf /", "rm -rf /"),
            ("sudo -u root -E rm -rf /", "rm -rf /"),
            ("sudo --user=root rm x", "rm x"),
            ("env -i LC_ALL=C rm -rf /", "rm -rf /"),
            ("LC_ALL=C rm -rf /", "rm -rf /"),
            ("nice -n 10 rm -rf /", "rm -rf /"),
            ("nice -10 rm x", "rm x"),
            ("timeout 5 rm -rf /", "rm -rf /"),
            ("timeout -s KILL -k 2 60 rm x", "rm x"),
            ("nohup rm x", "rm x"),
            ("time -p rm x", "rm x"),
            ("/usr/bin/sudo /bin/rm x", "/bin/rm x"),
            ("ionice -c 3 rm x", "rm x"),
            ("stdbuf -oL rm x", "rm x"),
            ("doas -u root rm x", "rm x"),
        ] {
            assert_eq!(program(command).0, runs, "{command}");
        }
        assert_eq!(
            program("sudo nice timeout 1 rm x").1,
            ["sudo", "nice", "timeout"]
        );
        assert!(unwrap(&words("command -v rm")).runs_nothing);
        assert!(unwrap(&words("sudo -s")).runs_nothing);
        let split = unwrap(&[
            Expanded::literal("env"),
            Expanded::literal("-S"),
            Expanded::literal("rm -rf /"),
        ]);
        let words_of = |w: &[Expanded]| w.iter().map(|e| e.text.clone()).collect::<Vec<_>>();
        assert_eq!(words_of(&split.split.unwrap()), ["rm", "-rf", "/"]);
        let chdir = unwrap(&words("env -C / rm -rf x"));
        assert_eq!(chdir.chdir.unwrap().text, "/");
    }
}
