//! Session traces: a session written as JSON Lines, one event per line (`{"hook": ...,
//! "turn": {...}, "tool": {...}, ...}`), read one line at a time as it is replayed, with only the
//! line being read held in memory. What a line is (its fields, how it is checked) is the wire's:
//! [`warden_wire::v1::line`]; the lines a replay writes are the wire's too
//! ([`warden_wire::v1::replay`]). This crate is the file: its lines, comments, byte order mark,
//! size limit and read errors.

use std::io::{BufRead, Read};

use warden_wire::v1::line::parse_line;
pub use warden_wire::v1::line::{TraceError, TraceEvent};

/// The longest trace line read, in bytes. A longer line is reported and skipped without being
/// kept in memory: no hook report is that large.
pub const MAX_TRACE_LINE_BYTES: usize = 1 << 20;

/// Reads a whole trace; blank lines and lines starting with `//` are skipped (they still count
/// for line numbers). Every bad line is returned, in order, next to the good events. The same
/// rules as [`read_trace`]: a leading byte order mark is ignored, and a line longer than
/// [`MAX_TRACE_LINE_BYTES`] is a bad line.
pub fn parse_trace(text: &str) -> Vec<(usize, Result<TraceEvent, TraceError>)> {
    read_trace(text.as_bytes()).collect()
}

/// Reads a trace from `reader` one line at a time, as it is replayed: only the line being read
/// is held in memory (at most [`MAX_TRACE_LINE_BYTES`] of it). Blank lines and lines starting
/// with `//` are skipped (they still count for line numbers); a UTF-8 byte order mark at the
/// start is ignored. A bad line (not UTF-8, too long, not a valid event) is returned as an
/// error naming its line, and reading goes on with the next. An error reading the input
/// itself is returned for the line it happened at, and ends the trace.
pub fn read_trace<R: BufRead>(reader: R) -> TraceLines<R> {
    TraceLines {
        reader,
        next: 0,
        buf: Vec::new(),
        ended: false,
    }
}

/// The events of a trace, read line by line: see [`read_trace`].
#[derive(Debug)]
pub struct TraceLines<R> {
    reader: R,
    /// The 0-based number of the next line.
    next: usize,
    buf: Vec<u8>,
    ended: bool,
}

impl<R: BufRead> Iterator for TraceLines<R> {
    type Item = (usize, Result<TraceEvent, TraceError>);

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            let line_no = self.next;
            let err = |message: String| {
                Some((
                    line_no,
                    Err(TraceError {
                        line: line_no,
                        message,
                    }),
                ))
            };
            let cut = match read_line(&mut self.reader, &mut self.buf) {
                Ok(Some(cut)) => cut,
                Ok(None) => {
                    self.ended = true;
                    return None;
                }
                Err(e) => {
                    self.ended = true;
                    return err(format!("cannot read the trace: {e}"));
                }
            };
            self.next += 1;
            let mut line = self.buf.as_slice();
            if line_no == 0 {
                line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // What is kept of a line too long is enough to tell a comment.
            let comment = |l: &[u8]| l.trim_ascii_start().starts_with(b"//");
            if let Cut::Long { rest_blank } = cut {
                if comment(line) || (rest_blank && line.trim_ascii().is_empty()) {
                    continue;
                }
                return err(format!(
                    "longer than {} MiB; an event this large is not a hook report",
                    MAX_TRACE_LINE_BYTES >> 20
                ));
            }
            match std::str::from_utf8(line) {
                Ok(text) if text.trim().is_empty() || text.trim_start().starts_with("//") => {}
                Ok(text) => return Some((line_no, parse_line(line_no, text))),
                Err(_) if comment(line) => {}
                Err(e) => {
                    return err(format!(
                        "not UTF-8 text (byte {} of the line is not valid UTF-8)",
                        e.valid_up_to() + 1
                    ));
                }
            }
        }
        None
    }
}

/// How a line was read.
enum Cut {
    /// Whole.
    Whole,
    /// Longer than [`MAX_TRACE_LINE_BYTES`]: its start is kept, the rest was skipped (and was
    /// only whitespace, or not).
    Long { rest_blank: bool },
}

/// Reads one line into `buf` (without its `\n`), keeping at most [`MAX_TRACE_LINE_BYTES`] of
/// it; `None` at the end of the input.
fn read_line<R: BufRead>(reader: &mut R, buf: &mut Vec<u8>) -> std::io::Result<Option<Cut>> {
    buf.clear();
    // A line of the longest length, with its `\r` and its `\n`.
    let limit = MAX_TRACE_LINE_BYTES as u64 + 2;
    let n = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let ended = buf.last() == Some(&b'\n');
    if ended {
        buf.pop();
    }
    // The length is counted without a line break (`\n`, or `\r\n`, or a last `\r`).
    let content = buf.len() - usize::from(buf.last() == Some(&b'\r'));
    if content <= MAX_TRACE_LINE_BYTES {
        return Ok(Some(Cut::Whole));
    }
    // Too long: keep what is within the limit (enough to tell a comment), and skip to the end
    // of the line without keeping it.
    let mut rest_blank = buf[MAX_TRACE_LINE_BYTES..]
        .iter()
        .all(u8::is_ascii_whitespace);
    buf.truncate(MAX_TRACE_LINE_BYTES);
    if ended {
        return Ok(Some(Cut::Long { rest_blank }));
    }
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            break;
        }
        let (part, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        rest_blank &= part.iter().all(u8::is_ascii_whitespace);
        reader.consume(used);
        if done {
            break;
        }
    }
    Ok(Some(Cut::Long { rest_blank }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_say_which_and_why() {
        let all = parse_trace(
            "{\"hook\": \"on_turn_start\"}\n\n{\"hook\": \"on_turn_strat\"}\n{\"turn\": 1}\nnot json\n{\"hook\": \"on_turn_end\", \"turn\": {\"tokens\": 3}}\n",
        );
        let errors: Vec<String> = all
            .iter()
            .filter_map(|(_, r)| r.as_ref().err())
            .map(ToString::to_string)
            .collect();
        assert_eq!(errors.len(), 4);
        assert!(
            errors[0].starts_with("line 3:") && errors[0].contains("did you mean `on_turn_start`"),
            "{}",
            errors[0]
        );
        assert!(errors[1].starts_with("line 4:") && errors[1].contains("no `hook`"));
        assert!(errors[2].starts_with("line 5:") && errors[2].contains("not valid JSON"));
        assert!(
            errors[3].starts_with("line 6:") && errors[3].contains("unknown field `tokens`"),
            "{}",
            errors[3]
        );
    }
}
