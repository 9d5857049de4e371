//! Inline interpreter code (`python -c`, `perl -e`, `node -e`, `ruby -e`, `php -r`, an awk
//! program): the calls in it that run commands, delete or write files, or run more code, with
//! their arguments where they are string literals. Code that makes no such call is seen through
//! (`python3 -c 'print(1)'`); one that makes one with arguments that are not literal is
//! unreadable, and so a risk.
//!
//! This reads calls by their names and literal arguments (regular expressions over the code),
//! not the interpreter's grammar: enough to see `shutil.rmtree("/")` and `os.system("rm -rf
//! /")`, and to refuse to call harmless what it cannot read.

use std::sync::OnceLock;

use regex::Regex;

/// An interpreter whose inline code is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Python,
    Perl,
    Node,
    Ruby,
    Php,
    Awk,
}

/// What inline code does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Act {
    /// Runs this shell command.
    Shell(String),
    /// Runs this program with these arguments (no shell).
    Argv(Vec<String>),
    /// Deletes this path.
    Delete { path: String, recursive: bool },
    /// Writes this path.
    Write(String),
    /// Does one of these with arguments that are not literal: the call, as written.
    Unreadable(String),
}

/// The interpreter a program is, and the flags that take its inline code.
pub(crate) fn language(program: &str) -> Option<(Lang, &'static [&'static str])> {
    let lang = if program == "python"
        || program.starts_with("python2")
        || program.starts_with("python3")
        || program == "pypy"
        || program == "pypy3"
    {
        Lang::Python
    } else {
        match program {
            "perl" | "perl5" => Lang::Perl,
            "node" | "nodejs" | "bun" => Lang::Node,
            "ruby" => Lang::Ruby,
            "php" => Lang::Php,
            "awk" | "gawk" | "mawk" | "nawk" => Lang::Awk,
            _ => return None,
        }
    };
    let flags: &'static [&'static str] = match lang {
        Lang::Python => &["-c"],
        Lang::Perl => &["-e", "-E"],
        Lang::Node => &["-e", "--eval", "-p", "--print"],
        Lang::Ruby => &["-e"],
        Lang::Php => &["-r"],
        Lang::Awk => &[],
    };
    Some((lang, flags))
}

/// What a call does with its arguments.
#[derive(Debug, Clone, Copy)]
enum Does {
    /// Its first argument is a shell command (or, for `spawn`-like calls, a list of words).
    Shell,
    /// Its first argument is a program, its second a list of arguments.
    Spawn,
    /// Deletes its first argument.
    Delete { recursive: bool },
    /// Writes its first argument.
    Write,
    /// Writes its second argument (`copy(src, dst)`).
    WriteSecond,
    /// Writes its first argument when its second (a mode) writes: `open(path, 'w')`.
    Open,
    /// Runs code given as a string: read again when literal.
    Eval,
}

/// The calls read, per language: a pattern that ends at the call's opening (its arguments
/// follow), and what the call does.
fn calls(lang: Lang) -> &'static [(Regex, Does)] {
    static TABLES: OnceLock<Vec<Vec<(Regex, Does)>>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        let t = |rows: &[(&str, Does)]| -> Vec<(Regex, Does)> {
            rows.iter()
                .filter_map(|(p, d)| Regex::new(p).ok().map(|r| (r, *d)))
                .collect()
        };
        vec![
            t(&[
                (r"\bos\.(?:system|popen)\s*\(", Does::Shell),
                (r"\bsubprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)\s*\(", Does::Shell),
                (r"\bos\.(?:exec\w*|spawn\w*|posix_spawn\w*)\s*\(", Does::Spawn),
                (r"\bshutil\.rmtree\s*\(", Does::Delete { recursive: true }),
                (r"\bos\.(?:remove|unlink|rmdir|removedirs)\s*\(", Does::Delete { recursive: false }),
                (r"\bPath\s*\(", Does::Write),
                (r"\bshutil\.(?:copy|copy2|copyfile|copytree|move)\s*\(", Does::WriteSecond),
                (r"\bopen\s*\(", Does::Open),
                (r"\b(?:exec|eval|compile)\s*\(", Does::Eval),
                (r"\b__import__\s*\(", Does::Eval),
            ]),
            t(&[
                (r"\b(?:system|exec)\b\s*\(?", Does::Shell),
                (r"\bqx\s*", Does::Shell),
                (r"\b(?:rmtree|remove_tree)\b\s*\(?", Does::Delete { recursive: true }),
                (r"\b(?:unlink|rmdir)\b\s*\(?", Does::Delete { recursive: false }),
                (r"\bopen\s*\(?\s*(?:my\s+)?[$\w]+\s*,", Does::Open),
                (r"\beval\s*\(?", Does::Eval),
            ]),
            t(&[
                (r"\b(?:execSync|exec)\s*\(", Does::Shell),
                (r"\b(?:spawnSync|spawn|execFileSync|execFile)\s*\(", Does::Spawn),
                (r"(?:\b|\.)(?:rmSync|rmdirSync)\s*\(|\.(?:rm|rmdir)\s*\(", Does::Delete { recursive: true }),
                (r"(?:\b|\.)unlinkSync\s*\(|\.unlink\s*\(", Does::Delete { recursive: false }),
                (r"(?:\b|\.)(?:writeFileSync|appendFileSync|truncateSync|createWriteStream)\s*\(|\.(?:writeFile|appendFile|truncate)\s*\(", Does::Write),
                (r"(?:\b|\.)(?:copyFileSync|renameSync|cpSync)\s*\(|\.(?:copyFile|rename|cp)\s*\(", Does::WriteSecond),
                (r"\b(?:eval|Function)\s*\(", Does::Eval),
            ]),
            t(&[
                (r"\b(?:system|exec|spawn)\b\s*\(?", Does::Shell),
                (r"\bIO\.popen\s*\(", Does::Shell),
                (r"%x[\[{(]", Does::Shell),
                (r"\bFileUtils\.(?:rm_rf|rm_r|remove_dir|remove_entry|remove_entry_secure|rmtree)\b\s*\(?", Does::Delete { recursive: true }),
                (r"\bFileUtils\.(?:rm|rm_f|remove|remove_file|rmdir)\b\s*\(?", Does::Delete { recursive: false }),
                (r"\bFile\.(?:delete|unlink)\b\s*\(?", Does::Delete { recursive: false }),
                (r"\bFile\.(?:write|open)\b\s*\(?", Does::Write),
                (r"\bFileUtils\.(?:cp|cp_r|mv|copy)\b\s*\(?", Does::WriteSecond),
                (r"\beval\s*\(?", Does::Eval),
            ]),
            t(&[
                (r"\b(?:shell_exec|exec|system|passthru|proc_open|popen)\s*\(", Does::Shell),
                (r"\b(?:unlink|rmdir)\s*\(", Does::Delete { recursive: false }),
                (r"\b(?:file_put_contents|fopen)\s*\(", Does::Write),
                (r"\b(?:copy|rename)\s*\(", Does::WriteSecond),
                (r"\beval\s*\(", Does::Eval),
            ]),
            t(&[
                (r"\bsystem\s*\(", Does::Shell),
                (r#"\bprintf?\b[^;}|]*?\|\s*"#, Does::Shell),
                (r"\bprintf?\b[^;}|]*?>>?\s*", Does::Write),
            ]),
        ]
    });
    &tables[lang as usize]
}

/// A string literal at the start of `s` (after blanks): its text, and where it ends. Only plain
/// literals count: no escapes, no interpolation (Python's f-strings, a `$` in Perl or Ruby
/// double quotes).
fn literal(s: &str, lang: Lang) -> Option<(String, usize)> {
    let trimmed = s.trim_start();
    let skipped = s.len() - trimmed.len();
    let mut chars = trimmed.char_indices();
    let (_, mut quote) = chars.next()?;
    let mut prefix = 0;
    if matches!(lang, Lang::Python) && matches!(quote, 'r' | 'b' | 'u' | 'R' | 'B' | 'U') {
        let (_, q) = chars.next()?;
        quote = q;
        prefix = 1;
    }
    if !matches!(quote, '\'' | '"') {
        return None;
    }
    let body = &trimmed[prefix + 1..];
    let end = body.find(quote)?;
    let text = &body[..end];
    if text.contains('\\') || text.contains('\n') {
        return None;
    }
    let interpolates = quote == '"'
        && matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php)
        && (text.contains('$') || text.contains("#{") || text.contains('@'));
    if interpolates {
        return None;
    }
    Some((text.to_string(), skipped + prefix + 1 + end + 1))
}

/// A list of string literals at the start of `s` (`['rm', '-rf', '/']`).
fn literal_list(s: &str, lang: Lang) -> Option<Vec<String>> {
    let mut rest = s.trim_start().strip_prefix('[')?;
    let mut out = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix(']') {
            let _ = r;
            return Some(out);
        }
        let (text, end) = literal(rest, lang)?;
        out.push(text);
        rest = rest[end..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// What `code` in `lang` does (see the module docs). `depth`: how many more times code given
/// to `eval` is read.
pub(crate) fn scan(lang: Lang, code: &str, depth: u32) -> Vec<Act> {
    let mut acts = Vec::new();
    // Perl's and Ruby's backticks run a shell command.
    if matches!(lang, Lang::Perl | Lang::Ruby | Lang::Php) {
        static TICKS: OnceLock<Option<Regex>> = OnceLock::new();
        if let Some(ticks) = TICKS.get_or_init(|| Regex::new(r"`([^`]*)`").ok()) {
            for m in ticks.captures_iter(code) {
                let inner = &m[1];
                if inner.contains('$') || inner.contains("#{") {
                    acts.push(Act::Unreadable(m[0].to_string()));
                } else {
                    acts.push(Act::Shell(inner.to_string()));
                }
            }
        }
    }
    for (pattern, does) in calls(lang) {
        for m in pattern.find_iter(code) {
            let args = &code[m.end()..];
            let call = code[m.start()..].chars().take(60).collect::<String>();
            let first = literal(args, lang);
            let act = match does {
                Does::Shell => match (&first, literal_list(args, lang)) {
                    (Some((s, _)), _) => Some(Act::Shell(s.clone())),
                    (None, Some(list)) => Some(Act::Argv(list)),
                    _ => Some(Act::Unreadable(call)),
                },
                Does::Spawn => match &first {
                    Some((program, end)) => {
                        let after = args[*end..].trim_start().trim_start_matches(',');
                        let mut argv = vec![program.clone()];
                        if let Some(list) = literal_list(after, lang) {
                            argv.extend(list);
                        }
                        Some(Act::Argv(argv))
                    }
                    None => Some(Act::Unreadable(call)),
                },
                Does::Delete { recursive } => match &first {
                    Some((path, _)) => Some(Act::Delete {
                        path: path.clone(),
                        recursive: *recursive,
                    }),
                    None => Some(Act::Unreadable(call)),
                },
                Does::Write => match &first {
                    // `Path('x')` alone writes nothing: only when it is written to or removed.
                    Some((path, end))
                        if matches!(lang, Lang::Python) && pattern.as_str().contains("Path") =>
                    {
                        let after = &args[*end..];
                        let tail = after.trim_start_matches(')').trim_start();
                        if tail.starts_with(".write_")
                            || tail.starts_with(".touch")
                            || tail.starts_with(".mkdir")
                        {
                            Some(Act::Write(path.clone()))
                        } else if tail.starts_with(".unlink") || tail.starts_with(".rmdir") {
                            Some(Act::Delete {
                                path: path.clone(),
                                recursive: false,
                            })
                        } else {
                            None
                        }
                    }
                    Some((path, _)) => Some(Act::Write(
                        path.trim_start_matches(['>', '+']).trim().to_string(),
                    )),
                    None if matches!(lang, Lang::Python) => None,
                    None => Some(Act::Unreadable(call)),
                },
                Does::WriteSecond => match &first {
                    Some((_, end)) => {
                        let after = args[*end..].trim_start().trim_start_matches(',');
                        match literal(after, lang) {
                            Some((dest, _)) => Some(Act::Write(dest)),
                            None => Some(Act::Unreadable(call)),
                        }
                    }
                    None => Some(Act::Unreadable(call)),
                },
                Does::Open => open(lang, args, &first, call),
                Does::Eval => match &first {
                    Some((inner, _)) if depth > 0 => {
                        acts.extend(scan(lang, inner, depth - 1));
                        None
                    }
                    _ => Some(Act::Unreadable(call)),
                },
            };
            if let Some(a) = act {
                acts.push(a);
            }
        }
    }
    // A call inside code given to `eval` is also found where it is written: once is enough.
    let mut unique: Vec<Act> = Vec::with_capacity(acts.len());
    for a in acts {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    unique
}

/// `open(path, mode)`: a write when the mode writes (Python's `'w'`, `'a'`, `'x'`, `'+'`; Perl's
/// `'>'`, `'>>'`, `'+<'`, or a two-argument `">file"`).
fn open(lang: Lang, args: &str, first: &Option<(String, usize)>, call: String) -> Option<Act> {
    match lang {
        Lang::Python => {
            // The mode, after the first argument (a literal, or a simple expression).
            static MODE: OnceLock<Option<Regex>> = OnceLock::new();
            let mode = MODE
                .get_or_init(|| {
                    Regex::new(r#"^[^,()]*,\s*(?:mode\s*=\s*)?['"]([rwxabt+]+)['"]"#).ok()
                })
                .as_ref()?
                .captures(args)?;
            if !mode[1].contains(['w', 'a', 'x', '+']) {
                return None;
            }
            Some(match first {
                Some((path, _)) => Act::Write(path.clone()),
                None => Act::Unreadable(call),
            })
        }
        Lang::Perl => match first {
            Some((mode, end)) if mode.starts_with(['>', '+']) && mode.len() <= 3 => {
                let after = args[*end..].trim_start().trim_start_matches(',');
                match literal(after, lang) {
                    Some((path, _)) => Some(Act::Write(path)),
                    None => Some(Act::Unreadable(call)),
                }
            }
            Some((spec, _)) if spec.starts_with(['>', '+']) => Some(Act::Write(
                spec.trim_start_matches(['>', '+', '<']).trim().to_string(),
            )),
            Some(_) => None,
            None => Some(Act::Unreadable(call)),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_read_where_literal() {
        assert_eq!(scan(Lang::Python, "print(1)", 2), []);
        assert_eq!(
            scan(Lang::Python, "import shutil; shutil.rmtree(\"/\")", 2),
            [Act::Delete {
                path: "/".into(),
                recursive: true
            }]
        );
        assert_eq!(
            scan(Lang::Python, "import os; os.system('rm -rf /')", 2),
            [Act::Shell("rm -rf /".into())]
        );
        assert_eq!(
            scan(
                Lang::Python,
                "import subprocess; subprocess.run(['rm', '-rf', '/'])",
                2
            ),
            [Act::Argv(vec!["rm".into(), "-rf".into(), "/".into()])]
        );
        assert!(matches!(
            scan(Lang::Python, "import os; os.system(input())", 2)[..],
            [Act::Unreadable(_)]
        ));
        assert_eq!(
            scan(Lang::Python, "open('/etc/hosts', 'w').write('x')", 2),
            [Act::Write("/etc/hosts".into())]
        );
        assert_eq!(
            scan(Lang::Python, "print(open('/etc/hosts').read())", 2),
            []
        );
        assert!(matches!(
            scan(Lang::Python, "open(p, 'w').write('x')", 2)[..],
            [Act::Unreadable(_)]
        ));
        assert_eq!(scan(Lang::Awk, "$1 > 5 { print $2 }", 2), []);
        assert_eq!(
            scan(Lang::Awk, "{ print > \"/etc/x\" }", 2),
            [Act::Write("/etc/x".into())]
        );
        assert_eq!(
            scan(
                Lang::Node,
                "require('child_process').execSync('rm -rf /')",
                2
            ),
            [Act::Shell("rm -rf /".into())]
        );
        assert_eq!(
            scan(
                Lang::Node,
                "require('fs').rmSync('/', {recursive: true})",
                2
            ),
            [Act::Delete {
                path: "/".into(),
                recursive: true
            }]
        );
        assert_eq!(
            scan(Lang::Perl, "system('rm -rf /')", 2),
            [Act::Shell("rm -rf /".into())]
        );
        assert_eq!(scan(Lang::Perl, "print `ls`", 2), [Act::Shell("ls".into())]);
        assert_eq!(
            scan(Lang::Ruby, "require 'fileutils'; FileUtils.rm_rf('/')", 2),
            [Act::Delete {
                path: "/".into(),
                recursive: true
            }]
        );
        assert_eq!(
            scan(Lang::Python, "exec(\"import os; os.system('ls')\")", 2),
            [Act::Shell("ls".into())]
        );
    }
}
