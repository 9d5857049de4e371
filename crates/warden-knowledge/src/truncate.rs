//! Cutting a source at a content boundary: after a paragraph, a list, a table or a code block,
//! never inside a word, a line or a code block, and never right after a heading (which would be
//! left without its text).
//!
//! The text is read as Markdown blocks: ATX headings (`# ...`), fenced code blocks (```` ``` ````
//! or `~~~`, closed by a fence of the same character at least as long; an unclosed fence runs
//! to the end), indented code blocks (lines indented by four spaces or a tab after a blank
//! line, blank lines between them included), and paragraphs (runs of other non-blank lines).
//! A cut may fall at the end of any block that is not a heading.

/// Byte offsets where `text` may be cut, ascending: the end of every block that is not a
/// heading. The last one is the end of the text's last such block.
pub fn boundaries(text: &str) -> Vec<usize> {
    let mut cuts = Vec::new();
    let mut state = State::Between;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        state = match state {
            State::Fence { ch, len } => {
                if is_closing_fence(content, ch, len) {
                    cuts.push(offset);
                    State::Between
                } else {
                    State::Fence { ch, len }
                }
            }
            State::Indented { last_end } if is_blank(content) => State::Indented { last_end },
            State::Indented { .. } if is_indented(content) => State::Indented { last_end: offset },
            State::Indented { last_end } => {
                cuts.push(last_end);
                open_block(content, offset, true)
            }
            State::Paragraph if is_blank(content) => {
                cuts.push(start);
                State::Between
            }
            State::Paragraph => {
                if starts_block(content) {
                    cuts.push(start);
                    open_block(content, offset, false)
                } else {
                    State::Paragraph
                }
            }
            State::Between => open_block(content, offset, true),
        };
    }
    match state {
        State::Paragraph | State::Fence { .. } => cuts.push(text.len()),
        State::Indented { last_end } => cuts.push(last_end),
        State::Between => {}
    }
    cuts.dedup();
    cuts
}

/// The longest prefix of `text` ending at a [boundary](boundaries), trailing whitespace
/// removed, for which `fits` holds (`fits` must hold for every shorter prefix when it holds
/// for a longer one). `None` if not even the first block fits.
pub fn truncate(text: &str, fits: impl Fn(&str) -> bool) -> Option<&str> {
    let cuts = boundaries(text);
    let prefix = |cut: usize| text[..cut].trim_end();
    // Binary search for the last cut that fits.
    let (mut lo, mut hi) = (0, cuts.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if fits(prefix(cuts[mid])) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo.checked_sub(1)
        .map(|i| prefix(cuts[i]))
        .filter(|p| !p.is_empty())
}

#[derive(Debug, Clone, Copy)]
enum State {
    Between,
    Paragraph,
    Fence { ch: char, len: usize },
    Indented { last_end: usize },
}

/// The state after `content`, the first line of a block (or a blank line).
fn open_block(content: &str, end: usize, after_blank: bool) -> State {
    if is_blank(content) {
        State::Between
    } else if let Some((ch, len)) = opening_fence(content) {
        State::Fence { ch, len }
    } else if is_heading(content) {
        State::Between
    } else if after_blank && is_indented(content) {
        State::Indented { last_end: end }
    } else {
        State::Paragraph
    }
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

fn is_indented(line: &str) -> bool {
    line.starts_with("    ") || line.starts_with('\t')
}

/// Up to three spaces of indentation, as CommonMark allows before a heading or a fence.
fn unindent(line: &str) -> Option<&str> {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    (spaces <= 3).then(|| &line[spaces..])
}

fn is_heading(line: &str) -> bool {
    let Some(rest) = unindent(line) else {
        return false;
    };
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    (1..=6).contains(&hashes)
        && rest[hashes..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

fn opening_fence(line: &str) -> Option<(char, usize)> {
    let rest = unindent(line)?;
    let ch = rest.chars().next().filter(|&c| c == '`' || c == '~')?;
    let len = rest.len() - rest.trim_start_matches(ch).len();
    let info = &rest[len..];
    (len >= 3 && !(ch == '`' && info.contains('`'))).then_some((ch, len))
}

fn is_closing_fence(line: &str, ch: char, len: usize) -> bool {
    let Some(rest) = unindent(line) else {
        return false;
    };
    let n = rest.len() - rest.trim_start_matches(ch).len();
    n >= len && rest[n..].trim().is_empty()
}

/// Whether a line interrupts a paragraph: a heading or a fence.
fn starts_block(line: &str) -> bool {
    is_heading(line) || opening_fence(line).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pieces(text: &str) -> Vec<&str> {
        boundaries(text)
            .into_iter()
            .map(|c| text[..c].trim_end())
            .collect()
    }

    #[test]
    fn paragraphs_and_headings() {
        let text = "# Title\n\nFirst paragraph\nstill first.\n\n## Part\nSecond.\n\nThird.\n";
        assert_eq!(
            pieces(text),
            [
                "# Title\n\nFirst paragraph\nstill first.",
                "# Title\n\nFirst paragraph\nstill first.\n\n## Part\nSecond.",
                text.trim_end(),
            ]
        );
    }

    #[test]
    fn a_paragraph_ends_where_a_heading_or_fence_begins() {
        let text = "Intro\n## Next\nBody\n```\ncode\n```\nAfter";
        assert_eq!(
            pieces(text),
            [
                "Intro",
                "Intro\n## Next\nBody",
                "Intro\n## Next\nBody\n```\ncode\n```",
                text
            ]
        );
    }

    #[test]
    fn code_blocks_are_never_cut() {
        let text = "Text.\n\n```toml\n[a]\n\nb = 1\n\n# not a heading\n```\n\nMore.\n";
        let cuts = pieces(text);
        assert_eq!(cuts[0], "Text.");
        assert!(cuts[1].ends_with("```"));
        assert_eq!(cuts.len(), 3);
        let tilde = "~~~~\n```\n\n~~~\nstill code\n~~~~\nout\n";
        assert_eq!(pieces(tilde)[0], "~~~~\n```\n\n~~~\nstill code\n~~~~");
    }

    #[test]
    fn an_unclosed_fence_runs_to_the_end() {
        assert_eq!(pieces("a\n\n```\nx\n\ny\n"), ["a", "a\n\n```\nx\n\ny"]);
    }

    #[test]
    fn indented_code_keeps_its_blank_lines() {
        let text = "Para.\n\n    let a = 1;\n\n    let b = 2;\n\nAfter.\n";
        assert_eq!(
            pieces(text),
            [
                "Para.",
                "Para.\n\n    let a = 1;\n\n    let b = 2;",
                text.trim_end()
            ]
        );
    }

    #[test]
    fn truncate_takes_the_longest_fitting_prefix() {
        let text = "one two\n\nthree four\n\nfive six";
        assert_eq!(
            truncate(text, |p| p.len() <= 20),
            Some("one two\n\nthree four")
        );
        assert_eq!(truncate(text, |p| p.len() <= 6), None);
        assert_eq!(truncate(text, |_| true), Some(text));
        assert_eq!(truncate("", |_| true), None);
        assert_eq!(truncate("# Only a heading", |_| true), None);
    }

    fn markdown() -> impl Strategy<Value = String> {
        let word = "[a-z]{1,8}";
        let line = prop::collection::vec(word, 1..6).prop_map(|w| w.join(" "));
        let block = prop_oneof![
            prop::collection::vec(line.clone(), 1..4).prop_map(|l| l.join("\n")),
            line.clone().prop_map(|l| format!("## {l}")),
            prop::collection::vec(prop_oneof![line.clone(), Just(String::new())], 0..4)
                .prop_map(|l| format!("```\n{}\n```", l.join("\n"))),
            prop::collection::vec(line, 1..3).prop_map(|l| format!("    {}", l.join("\n\n    "))),
        ];
        prop::collection::vec(block, 0..8).prop_map(|b| b.join("\n\n"))
    }

    proptest! {
        #[test]
        fn cuts_never_split_a_word_a_line_or_a_code_block(text in markdown(), max in 0usize..400) {
            if let Some(cut) = truncate(&text, |p| p.len() <= max) {
                prop_assert!(cut.len() <= max);
                prop_assert!(text.starts_with(cut));
                let next = text[cut.len()..].chars().next();
                prop_assert!(next.is_none_or(|c| c == '\n'), "cut inside a line: {:?}", cut);
                let fences = cut.lines().filter(|l| l.starts_with("```")).count();
                prop_assert_eq!(fences % 2, 0, "cut inside a code block: {:?}", cut);
                let last = cut.lines().last().unwrap_or("");
                prop_assert!(!last.starts_with("## "), "heading left without its text");
                prop_assert_eq!(truncate(&text, |p| p.len() <= max), Some(cut));
            }
        }
    }
}
