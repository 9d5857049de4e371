//! A command's syntax tree, from brush's tokenizer and parser, within bounds. Both recurse as
//! deep as the command nests, so a command is measured first, without either: its substitution
//! openers are counted in the raw text (a nesting depth cannot exceed that count, whatever the
//! quoting), then, once tokenized, the openers of compound commands among its tokens (quoted
//! text and here-document bodies are whole tokens, so braces there are not counted). A command
//! past a bound is not parsed: it is opaque.

use brush_parser::ast::Program;
use brush_parser::{ParserOptions, SourceInfo, TokenizerOptions};

/// The most substitution openers (`$(`, `` ` ``, `<(`, `>(`, `${`, `$((`) a command may hold.
const MAX_SUBSTITUTIONS: usize = 64;

/// The most compound-command openers (`(`, `{`, `if`, `for`, `while`...) a command may hold.
const MAX_COMPOUNDS: usize = 256;

/// Why a command was not parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NotParsed {
    /// Larger than `MAX_COMMAND`.
    TooLarge(usize),
    /// Nested past a bound.
    TooDeep,
    /// Not what a shell would run (an unterminated quote, a stray `fi`).
    Invalid(String),
}

impl NotParsed {
    pub(crate) fn describe(&self) -> String {
        match self {
            NotParsed::TooLarge(n) => format!(
                "the command is {n} bytes long, more than the {} KiB Warden reads",
                crate::MAX_COMMAND / 1024
            ),
            NotParsed::TooDeep => "the command nests deeper than Warden judges".into(),
            NotParsed::Invalid(why) => format!("a shell would not run it as written: {why}"),
        }
    }
}

/// The options a shell parses with: bash's, with extended globs.
pub(crate) fn options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: true,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    }
}

/// Parses `command`, within the bounds.
pub(crate) fn parse(command: &str) -> Result<Program, NotParsed> {
    if command.len() > crate::MAX_COMMAND {
        return Err(NotParsed::TooLarge(command.len()));
    }
    let openers = ["$(", "`", "<(", ">(", "${"]
        .iter()
        .map(|o| command.matches(o).count())
        .sum::<usize>();
    if openers > MAX_SUBSTITUTIONS {
        return Err(NotParsed::TooDeep);
    }
    let opts = options();
    let tokens = brush_parser::uncached_tokenize_str(
        command,
        &TokenizerOptions {
            enable_extended_globbing: opts.enable_extended_globbing,
            posix_mode: opts.posix_mode,
            sh_mode: opts.sh_mode,
        },
    )
    .map_err(|e| NotParsed::Invalid(e.to_string()))?;
    let compounds = tokens
        .iter()
        .filter(|t| match t {
            brush_parser::Token::Operator(o, _) => o == "(" || o == "((",
            brush_parser::Token::Word(w, _) => matches!(
                w.as_str(),
                "{" | "if" | "for" | "while" | "until" | "case" | "select" | "function" | "[["
            ),
        })
        .count();
    if compounds > MAX_COMPOUNDS {
        return Err(NotParsed::TooDeep);
    }
    brush_parser::parse_tokens(&tokens, &opts, &SourceInfo::default())
        .map_err(|e| NotParsed::Invalid(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_commands_are_refused_before_anything_recurses() {
        let nested = |open: &str, close: &str, n: usize| open.repeat(n) + "ls" + &close.repeat(n);
        for command in [
            format!("echo {}", nested("$(", ")", 10_000)),
            format!("echo {}", nested("\"$(", ")\"", 10_000)),
            nested("{ ", "; }", 10_000),
            nested("if true; then ", "; fi", 10_000),
            nested("(", ")", 10_000),
            "x".repeat(100_000),
        ] {
            assert!(parse(&command).is_err(), "{}", &command[..40]);
        }
        assert!(matches!(
            parse("echo 'unterminated"),
            Err(NotParsed::Invalid(_))
        ));
        // A here-document with no tag: brush's own tokenizer looped on these without end,
        // allocating, until the patch in vendor/brush-parser (found by `tests/random.rs`).
        for command in [
            "$( << > - ",
            "$(\n<<  ",
            "ls <( $( >> if x in \n {} # <<- \n <<- >> eval $X",
        ] {
            assert!(
                matches!(parse(command), Err(NotParsed::Invalid(_))),
                "{command:?}"
            );
        }
        // Braces in a here-document are data, not nesting.
        let doc = format!("cat > f.json <<'EOF'\n{}\nEOF", "{ ".repeat(1000));
        assert!(parse(&doc).is_ok());
    }
}
