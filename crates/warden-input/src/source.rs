//! A file Warden read as operator input, kept whole so that diagnostics can point into it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use miette::NamedSource;

use crate::printable::printable_name;

/// A file Warden read, kept for pointing into it.
#[derive(Debug)]
pub struct SourceFile {
    path: PathBuf,
    text: String,
    /// The text as a terminal may show it, made when a diagnostic is first shown (most files
    /// are read, and never shown).
    named: OnceLock<NamedSource<String>>,
    /// The byte offset of each line's start, found the first time a place is asked for.
    line_starts: OnceLock<Vec<usize>>,
}

impl SourceFile {
    /// A file at `path` (as it should be shown) with contents `text`.
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Arc<Self> {
        Arc::new(SourceFile {
            path: path.into(),
            text: text.into(),
            named: OnceLock::new(),
            line_starts: OnceLock::new(),
        })
    }

    /// Where it came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its contents.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text as a terminal may show it (control characters replaced), for miette.
    pub(crate) fn named(&self) -> &NamedSource<String> {
        self.named.get_or_init(|| {
            // What is shown on a terminal carries no control characters from the file or its
            // name (an escape sequence in either could rewrite the operator's screen); the
            // shown text keeps every byte offset.
            let text = &self.text;
            let plain = text
                .bytes()
                .all(|b| (b' '..b'\x7f').contains(&b) || b == b'\n' || b == b'\t');
            let shown = if plain {
                // Printable ASCII, tabs and line feeds (most files): shown as they are.
                text.clone()
            } else {
                let mut shown = String::with_capacity(text.len());
                let mut chars = text.chars().peekable();
                while let Some(c) = chars.next() {
                    // A line break stays (`\r` only before `\n`: alone, it would rewrite the
                    // line).
                    let keep = c == '\n' || c == '\t' || (c == '\r' && chars.peek() == Some(&'\n'));
                    if c.is_control() && !keep {
                        shown.extend(std::iter::repeat_n('?', c.len_utf8()));
                    } else {
                        shown.push(c);
                    }
                }
                shown
            };
            NamedSource::new(printable_name(&self.path.display().to_string()), shown)
        })
    }

    /// 1-based line and column of a byte offset; the column counts characters.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = self.char_offset(offset);
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(
                    self.text
                        .bytes()
                        .enumerate()
                        .filter(|(_, b)| *b == b'\n')
                        .map(|(i, _)| i + 1),
                )
                .collect()
        });
        // `starts[0]` is 0, so at least one start is at or before `offset`.
        let line = starts.partition_point(|&s| s <= offset);
        let col = self.text[starts[line - 1]..offset].chars().count() + 1;
        (line, col)
    }

    /// `offset` within the text, moved back to the start of the character it falls in. Two
    /// offsets compare as the places [`line_col`](Self::line_col) gives for them do.
    pub(crate) fn char_offset(&self, offset: usize) -> usize {
        floor_char_boundary(&self.text, offset.min(self.text.len()))
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters() {
        let file = SourceFile::new("f", "é = 1\nab = 2");
        assert_eq!(file.line_col(3), (1, 3));
        assert_eq!(file.line_col(10), (2, 4));
        assert_eq!(file.line_col(999), (2, 7));
    }
}
