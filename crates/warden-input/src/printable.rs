//! Text from a file (or its name) made safe for a terminal: a control character in a rule file
//! could otherwise rewrite the operator's screen.

use std::borrow::Cow;

/// `s` with the control characters `escape` picks written as escapes (`\u{1b}`).
fn escaped(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A name (a path, a field) with every control character written as an escape, line breaks
/// too: a name is one line.
pub fn printable_name(s: &str) -> Cow<'_, str> {
    escaped(s, char::is_control)
}

/// `s` with control characters (but line breaks and tabs) written as escapes, for a terminal.
pub fn printable(s: &str) -> Cow<'_, str> {
    escaped(s, |c| c.is_control() && !matches!(c, '\n' | '\t'))
}
