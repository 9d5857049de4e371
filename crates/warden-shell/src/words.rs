//! A word as the shell would pass it to a program: its quotes removed (by brush's word parser),
//! `~`, `$HOME`, `$PWD` and the variables known at that point expanded, `$(echo ...)` of literal
//! words evaluated. What is known only at run time stays as written, and the word says it is
//! not literal; the command substitutions it holds are handed back, since they run.

use std::collections::HashMap;

use brush_parser::word::{
    Parameter, ParameterExpr, SpecialParameter, WordPiece, WordPieceWithSource,
};

/// A word, expanded as far as it can be without running anything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Expanded {
    /// The word as the program would get it (parts known only at run time as written).
    pub text: String,
    /// Every part is known.
    pub literal: bool,
    /// It holds unquoted glob characters.
    pub glob: bool,
    /// The command substitutions in it (their code), which run when it is expanded.
    pub substitutions: Vec<String>,
    /// The code of the process substitution this word stands for (`<(curl ...)`), if it is one.
    pub process: Option<String>,
    /// A glob that stands for only some of what is below its folder, chosen by `find`'s tests
    /// (`find . -name '*.pyc'`): deleting them is not deleting the folder.
    pub chosen: bool,
}

impl Expanded {
    /// A word known whole.
    pub(crate) fn literal(text: impl Into<String>) -> Expanded {
        Expanded {
            text: text.into(),
            literal: true,
            ..Expanded::default()
        }
    }
}

/// The variables known at a point of the command: names to values.
pub(crate) type Vars = HashMap<String, String>;

/// What command substitutions print, where Warden can tell: their code to their output.
pub(crate) type Printed = HashMap<String, String>;

/// Expands `word` (as written) with `vars` known, and the substitutions in `printed` standing
/// for what they print. `home` is `~`; `cwd` is `$PWD`.
pub(crate) fn expand(
    word: &str,
    vars: &Vars,
    home: Option<&str>,
    cwd: Option<&str>,
    printed: &Printed,
) -> Expanded {
    // Most words are plain: nothing to unquote or expand (the word parser costs a microsecond).
    let plain = word.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'_' | b'.' | b'/' | b'=' | b':' | b',' | b'+' | b'@' | b'%'
            )
    });
    if plain && !word.is_empty() {
        return Expanded::literal(word);
    }
    let pieces = match brush_parser::word::parse(word, &crate::syntax::options()) {
        Ok(p) => p,
        Err(_) => {
            return Expanded {
                text: word.to_string(),
                ..Expanded::default()
            };
        }
    };
    let mut out = Expanded {
        literal: true,
        ..Expanded::default()
    };
    let ctx = Ctx {
        vars,
        home,
        cwd,
        printed,
    };
    for (i, piece) in pieces.iter().enumerate() {
        ctx.piece(&piece.piece, word, piece, i == 0, false, &mut out);
    }
    out
}

struct Ctx<'a> {
    vars: &'a Vars,
    home: Option<&'a str>,
    cwd: Option<&'a str>,
    printed: &'a Printed,
}

impl Ctx<'_> {
    fn piece(
        &self,
        piece: &WordPiece,
        word: &str,
        at: &WordPieceWithSource,
        first: bool,
        quoted: bool,
        out: &mut Expanded,
    ) {
        let raw = word.get(at.start_index..at.end_index).unwrap_or("");
        match piece {
            WordPiece::Text(t) => {
                if !quoted && t.contains(['*', '?', '[']) {
                    out.glob = true;
                }
                out.text.push_str(t);
            }
            WordPiece::SingleQuotedText(t) => out.text.push_str(t),
            WordPiece::AnsiCQuotedText(t) => out.text.push_str(&ansi_c(t)),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                for p in inner {
                    self.piece(&p.piece, word, p, false, true, out);
                }
            }
            WordPiece::TildePrefix(user) => match (first, user.is_empty(), self.home) {
                (true, true, Some(h)) => out.text.push_str(h),
                _ => self.unknown(raw, out),
            },
            WordPiece::ParameterExpansion(expr) => match self.parameter(expr) {
                Some(v) => out.text.push_str(&v),
                None => self.unknown(raw, out),
            },
            WordPiece::CommandSubstitution(code)
            | WordPiece::BackquotedCommandSubstitution(code) => {
                out.substitutions.push(code.clone());
                match self.printed.get(code) {
                    Some(v) => out.text.push_str(v),
                    None => self.unknown(raw, out),
                }
            }
            WordPiece::EscapeSequence(e) => {
                out.text.push_str(e.strip_prefix('\\').unwrap_or(e));
            }
            WordPiece::ArithmeticExpression(_) => self.unknown(raw, out),
        }
    }

    fn unknown(&self, raw: &str, out: &mut Expanded) {
        out.literal = false;
        out.text.push_str(raw);
    }

    /// The value of a parameter expansion, when it is known.
    fn parameter(&self, expr: &ParameterExpr) -> Option<String> {
        let named = |p: &Parameter| match p {
            Parameter::Named(n) => self.variable(n),
            Parameter::Positional(n) => self.vars.get(&n.to_string()).cloned(),
            Parameter::Special(SpecialParameter::AllPositionalParameters { .. }) => {
                self.vars.get("@").cloned()
            }
            Parameter::Special(SpecialParameter::PositionalParameterCount) => {
                self.vars.get("#").cloned()
            }
            _ => None,
        };
        match expr {
            ParameterExpr::Parameter {
                parameter,
                indirect: false,
            } => named(parameter),
            // `${X:-default}`: X when it is known and set; unknown otherwise.
            ParameterExpr::UseDefaultValues {
                parameter,
                indirect: false,
                ..
            } => named(parameter).filter(|v| !v.is_empty()),
            _ => None,
        }
    }

    fn variable(&self, name: &str) -> Option<String> {
        if let Some(v) = self.vars.get(name) {
            return Some(v.clone());
        }
        match name {
            "HOME" => self.home.map(str::to_string),
            "PWD" => self.cwd.map(str::to_string),
            _ => None,
        }
    }
}

/// The text of `$'...'` (ANSI-C quoting) with its escapes read: `$'\x72m'` is `rm`.
pub(crate) fn ansi_c(raw: &str) -> String {
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let mut number = |radix: u32, max: usize, first: Option<char>| {
            let mut digits = String::new();
            if let Some(f) = first {
                digits.push(f);
            }
            while digits.len() < max {
                match chars.peek() {
                    Some(d) if d.is_digit(radix) => {
                        digits.push(*d);
                        chars.next();
                    }
                    _ => break,
                }
            }
            u32::from_str_radix(&digits, radix)
                .ok()
                .and_then(char::from_u32)
        };
        let decoded = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            'x' => number(16, 2, None),
            'u' => number(16, 4, None),
            'U' => number(16, 8, None),
            d @ '0'..='7' => number(8, 3, Some(d)),
            _ => None,
        };
        match decoded {
            Some(d) => out.push(d),
            None => {
                out.push('\\');
                out.push(e);
            }
        }
    }
    out
}

/// `text` as a shell word: as it is when it needs no quotes, else single-quoted.
pub(crate) fn quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '-' | '_' | '.' | '/' | '=' | ':' | '+' | ',' | '@' | '%')
        });
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(word: &str) -> Expanded {
        let mut vars = Vars::new();
        vars.insert("D".into(), "/etc".into());
        let mut printed = Printed::new();
        printed.insert("echo rm".into(), "rm".into());
        expand(
            word,
            &vars,
            Some("/home/ada"),
            Some("/home/ada/app"),
            &printed,
        )
    }

    #[test]
    fn quotes_escapes_and_known_variables() {
        assert_eq!(x("'a b'\"c\"\\ d").text, "a bc d");
        assert_eq!(x("\\rm").text, "rm");
        assert_eq!(x("~/x").text, "/home/ada/x");
        assert_eq!(x("$HOME/.ssh").text, "/home/ada/.ssh");
        assert_eq!(x("${HOME}").text, "/home/ada");
        assert_eq!(x("\"$D\"").text, "/etc");
        assert_eq!(x("$'\\x72m'").text, "rm");
        assert_eq!(x("$PWD/..").text, "/home/ada/app/..");
        let dynamic = x("$(git ls-files)");
        assert!(!dynamic.literal);
        assert_eq!(dynamic.substitutions, ["git ls-files"]);
        let echoed = x("$(echo rm)");
        assert!(echoed.literal);
        assert_eq!(echoed.text, "rm");
        assert!(!x("$UNKNOWN").literal);
        assert!(x("/*").glob);
        assert!(!x("'/*'").glob);
    }

    #[test]
    fn words_are_quoted_when_they_need_it() {
        assert_eq!(quote("rm"), "rm");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), "'it'\\''s'");
    }
}
