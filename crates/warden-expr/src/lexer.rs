//! Tokens of the condition language.
//!
//! Strings may be quoted with `'` or `"` (the seeds write `tool_completed('vault_search')`);
//! `and`, `or`, `not` and `in` are words, and `&&`, `||`, `!` are accepted as their synonyms.

use crate::error::{ExprError, Span};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Int(i64),
    Float(f64),
    Str(String),
    Ident(String),
    // words
    And,
    Or,
    Not,
    In,
    For,
    If,
    True,
    False,
    Null,
    // punctuation
    Dot,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Plus,
    Minus,
    Star,
    Slash,
    Bang,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    Eof,
}

impl Tok {
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Int(n) => format!("number `{n}`"),
            Tok::Float(n) => format!("number `{n}`"),
            Tok::Str(s) => format!("string '{s}'"),
            Tok::Ident(s) => format!("name `{s}`"),
            Tok::Eof => "the end of the expression".to_string(),
            other => format!("`{}`", other.text()),
        }
    }

    fn text(&self) -> &'static str {
        match self {
            Tok::And => "and",
            Tok::Or => "or",
            Tok::Not => "not",
            Tok::In => "in",
            Tok::For => "for",
            Tok::If => "if",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Null => "null",
            Tok::Dot => ".",
            Tok::Comma => ",",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Bang => "!",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Int(_) | Tok::Float(_) | Tok::Str(_) | Tok::Ident(_) | Tok::Eof => "",
        }
    }
}

/// Splits `src` into tokens with their byte spans. The last token is always `Eof`.
pub(crate) fn lex(src: &str) -> Result<Vec<(Tok, Span)>, ExprError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let single = |t: Tok| (t, Span::new(start, start + 1));
        let tok = match c {
            b'.' if !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i += 1;
                single(Tok::Dot)
            }
            b',' => {
                i += 1;
                single(Tok::Comma)
            }
            b'(' => {
                i += 1;
                single(Tok::LParen)
            }
            b')' => {
                i += 1;
                single(Tok::RParen)
            }
            b'[' => {
                i += 1;
                single(Tok::LBracket)
            }
            b']' => {
                i += 1;
                single(Tok::RBracket)
            }
            b'+' => {
                i += 1;
                single(Tok::Plus)
            }
            b'-' => {
                i += 1;
                single(Tok::Minus)
            }
            b'*' => {
                i += 1;
                single(Tok::Star)
            }
            b'/' => {
                i += 1;
                single(Tok::Slash)
            }
            b'<' | b'>' | b'=' | b'!' => {
                let eq = bytes.get(i + 1) == Some(&b'=');
                let (tok, len) = match (c, eq) {
                    (b'<', true) => (Tok::Le, 2),
                    (b'<', false) => (Tok::Lt, 1),
                    (b'>', true) => (Tok::Ge, 2),
                    (b'>', false) => (Tok::Gt, 1),
                    (b'=', true) => (Tok::EqEq, 2),
                    (b'!', true) => (Tok::Ne, 2),
                    (b'!', false) => (Tok::Bang, 1),
                    _ => {
                        return Err(ExprError::syntax(
                            Span::new(start, start + 1),
                            "`=` assigns, and conditions cannot assign",
                            Some("to compare, write `==`"),
                        ));
                    }
                };
                i += len;
                (tok, Span::new(start, i))
            }
            b'&' | b'|' => {
                if bytes.get(i + 1) == Some(&c) {
                    i += 2;
                    let tok = if c == b'&' { Tok::And } else { Tok::Or };
                    (tok, Span::new(start, i))
                } else {
                    let word = if c == b'&' { "and" } else { "or" };
                    return Err(ExprError::syntax(
                        Span::new(start, start + 1),
                        format!("unexpected `{}`", c as char),
                        Some(&format!("write `{word}` (or `{0}{0}`)", c as char)),
                    ));
                }
            }
            b'\'' | b'"' => {
                let (s, end) = lex_string(src, start)?;
                i = end;
                (Tok::Str(s), Span::new(start, end))
            }
            b'0'..=b'9' | b'.' => {
                let (tok, end) = lex_number(src, start)?;
                i = end;
                (tok, Span::new(start, end))
            }
            c if c == b'_' || c.is_ascii_alphabetic() => {
                while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric()) {
                    i += 1;
                }
                let word = &src[start..i];
                let tok = match word {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "in" => Tok::In,
                    "for" => Tok::For,
                    "if" => Tok::If,
                    "true" | "True" => Tok::True,
                    "false" | "False" => Tok::False,
                    "null" | "None" => Tok::Null,
                    _ => Tok::Ident(word.to_string()),
                };
                (tok, Span::new(start, i))
            }
            _ => {
                let ch = src[start..].chars().next().unwrap_or('?');
                return Err(ExprError::syntax(
                    Span::new(start, start + ch.len_utf8()),
                    format!("unexpected character `{ch}`"),
                    None,
                ));
            }
        };
        out.push(tok);
    }
    out.push((Tok::Eof, Span::new(src.len(), src.len())));
    Ok(out)
}

fn lex_string(src: &str, start: usize) -> Result<(String, usize), ExprError> {
    let quote = src.as_bytes()[start] as char;
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((off, ch)) = chars.next() {
        let pos = start + 1 + off;
        match ch {
            c if c == quote => return Ok((out, pos + 1)),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '\\')) => out.push('\\'),
                Some((_, '\'')) => out.push('\''),
                Some((_, '"')) => out.push('"'),
                // Any other backslash is kept, as Python keeps it: `'\d+'` is the regular
                // expression `\d+`.
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(ExprError::syntax(
        Span::new(start, src.len()),
        "this string is never closed",
        Some(&format!("end it with {quote}")),
    ))
}

fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), ExprError> {
    let bytes = src.as_bytes();
    let mut i = start;
    let mut is_float = false;
    while i < bytes.len() {
        match bytes[i] {
            b'0'..=b'9' | b'_' => i += 1,
            b'.' if !is_float && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                is_float = true;
                i += 1;
            }
            b'e' | b'E' => {
                is_float = true;
                i += 1;
                if matches!(bytes.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
            }
            _ => break,
        }
    }
    let text: String = src[start..i].chars().filter(|c| *c != '_').collect();
    let span = Span::new(start, i);
    if is_float {
        text.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| (Tok::Float(f), i))
            .ok_or_else(|| ExprError::syntax(span, format!("`{text}` is not a number"), None))
    } else {
        text.parse::<i64>().map(|n| (Tok::Int(n), i)).map_err(|_| {
            ExprError::syntax(
                span,
                format!("`{text}` does not fit in a 64-bit integer"),
                None,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn single_quoted_strings_are_strings() {
        assert_eq!(
            toks("tool_completed('vault_search')"),
            vec![
                Tok::Ident("tool_completed".into()),
                Tok::LParen,
                Tok::Str("vault_search".into()),
                Tok::RParen,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn words_and_symbols() {
        assert_eq!(
            toks("a and b && not c || !d or e"),
            vec![
                Tok::Ident("a".into()),
                Tok::And,
                Tok::Ident("b".into()),
                Tok::And,
                Tok::Not,
                Tok::Ident("c".into()),
                Tok::Or,
                Tok::Bang,
                Tok::Ident("d".into()),
                Tok::Or,
                Tok::Ident("e".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            toks("0.8 6 1_000 .5 1e3"),
            vec![
                Tok::Float(0.8),
                Tok::Int(6),
                Tok::Int(1000),
                Tok::Float(0.5),
                Tok::Float(1000.0),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        let err = lex("a = 1").unwrap_err();
        assert_eq!(err.span(), Span::new(2, 3));
        assert!(err.to_string().contains("=="), "{err}");
        let err = lex("'open").unwrap_err();
        assert!(err.to_string().contains("never closed"));
        let err = lex("99999999999999999999").unwrap_err();
        assert!(err.to_string().contains("64-bit"));
    }
}
