//! Lua 5.4's pattern matching, written again in Rust so that it can be stopped.
//!
//! Lua's own matcher (`lstrlib.c`) backtracks without bound inside one C call, where the
//! instruction hook that enforces a script's time limit never runs: `('a?'):rep(40) ..
//! ('a'):rep(40)` against forty `a`s takes longer than the age of the universe. This module
//! follows the same algorithm (`do_match`, `max_expand`, `min_expand`, `start_capture`, ...)
//! step for step, so it gives the same results and the same errors, but every step is counted
//! against a [`Budget`] that asks the caller, now and then, whether the script still has time.
//! Recursion is bounded as in Lua (200 nested items, "pattern too complex").
//!
//! Positions are 0-based byte offsets into the subject; the Lua glue (`strings.rs`) converts
//! them. Nothing here allocates, owns anything that needs dropping, or knows Lua.

/// Most captures in a pattern (`LUA_MAXCAPTURES`).
pub(crate) const MAX_CAPTURES: usize = 32;

/// Most nested pattern items (`MAXCCALLS` in `lstrlib.c`).
const MAX_DEPTH: u32 = 200;

/// Steps between two questions to the clock.
const CHUNK: u32 = 4096;

const UNFINISHED: isize = -1;
const POSITION: isize = -2;

/// Why a match stopped without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The pattern is malformed (or its captures misused).
    Error(Malformed),
    /// The budget ran out: the script's time is up.
    Time,
}

/// What is wrong with a pattern, as Lua says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    EndsWithPercent,
    MissingBracket,
    MissingBalanceArguments,
    MissingFrontierBracket,
    /// `%N` names a capture that does not exist (or is not closed); the digit shown.
    CaptureIndex(u8),
    InvalidPatternCapture,
    UnfinishedCapture,
    TooManyCaptures,
    TooComplex,
}

impl Malformed {
    /// Lua's message, in two parts (the second is the digit of a capture index).
    pub(crate) fn text(self) -> (&'static str, &'static str) {
        const DIGITS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
        let text = match self {
            Malformed::EndsWithPercent => "malformed pattern (ends with '%')",
            Malformed::MissingBracket => "malformed pattern (missing ']')",
            Malformed::MissingBalanceArguments => "malformed pattern (missing arguments to '%b')",
            Malformed::MissingFrontierBracket => "missing '[' after '%f' in pattern",
            Malformed::CaptureIndex(d) => {
                return (
                    "invalid capture index %",
                    DIGITS.get(usize::from(d)).copied().unwrap_or("?"),
                );
            }
            Malformed::InvalidPatternCapture => "invalid pattern capture",
            Malformed::UnfinishedCapture => "unfinished capture",
            Malformed::TooManyCaptures => "too many captures",
            Malformed::TooComplex => "pattern too complex",
        };
        (text, "")
    }
}

fn error<T>(what: Malformed) -> Result<T, Stop> {
    Err(Stop::Error(what))
}

/// The error for capture index `l` (0-based; -1 for `%0`).
fn capture_index<T>(l: i32) -> Result<T, Stop> {
    error(Malformed::CaptureIndex(u8::try_from(l + 1).unwrap_or(0)))
}

/// Counts steps, and every few thousand asks `more` whether to go on.
pub(crate) struct Budget<'a> {
    left: u32,
    more: &'a mut dyn FnMut() -> bool,
}

impl<'a> Budget<'a> {
    /// A budget that asks `more` (false: stop) every few thousand steps.
    pub(crate) fn new(more: &'a mut dyn FnMut() -> bool) -> Self {
        Budget { left: CHUNK, more }
    }

    #[inline]
    pub(crate) fn spend(&mut self, steps: u32) -> Result<(), Stop> {
        if self.left > steps {
            self.left -= steps;
            return Ok(());
        }
        self.left = CHUNK;
        if (self.more)() {
            Ok(())
        } else {
            Err(Stop::Time)
        }
    }
}

/// A capture of a successful match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capture {
    /// The text `start..end` of the subject.
    Text(usize, usize),
    /// A position capture `()`: the 0-based offset (Lua shows it 1-based).
    Position(usize),
}

// Character classes of the C locale, as Lua uses them.
fn is_space(c: u8) -> bool {
    matches!(c, b'\t'..=b'\r' | b' ')
}

fn match_class(c: u8, class: u8) -> bool {
    let res = match class.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        b's' => is_space(c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        // Deprecated since Lua 5.2, but still understood.
        b'z' => c == 0,
        _ => return class == c,
    };
    if class.is_ascii_uppercase() {
        !res
    } else {
        res
    }
}

/// The state of one match of `pat` against `src` (Lua's `MatchState`).
pub(crate) struct Matcher<'s> {
    src: &'s [u8],
    pat: &'s [u8],
    level: usize,
    caps: [(usize, isize); MAX_CAPTURES],
    depth: u32,
}

impl<'s> Matcher<'s> {
    /// A matcher of `pat` (without any `^` anchor: callers strip it) against `src`.
    pub(crate) fn new(src: &'s [u8], pat: &'s [u8]) -> Self {
        Matcher {
            src,
            pat,
            level: 0,
            caps: [(0, 0); MAX_CAPTURES],
            depth: MAX_DEPTH,
        }
    }

    /// The pattern byte at `i`, or 0 past its end (Lua reads the string's terminating NUL).
    #[inline]
    fn p(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    /// Tries the whole pattern at `s`: the end of the match, if it matches there.
    pub(crate) fn at(&mut self, s: usize, budget: &mut Budget) -> Result<Option<usize>, Stop> {
        self.level = 0;
        self.depth = MAX_DEPTH;
        self.do_match(s, 0, budget)
    }

    /// Capture `i` of the last match `s..e` (Lua's `get_onecapture`): with no captures, capture
    /// 0 is the whole match.
    pub(crate) fn capture(&self, i: usize, s: usize, e: usize) -> Result<Capture, Stop> {
        if i >= self.level {
            if i != 0 {
                return capture_index(i as i32);
            }
            return Ok(Capture::Text(s, e));
        }
        let (init, len) = self.caps[i];
        match len {
            UNFINISHED => error(Malformed::UnfinishedCapture),
            POSITION => Ok(Capture::Position(init)),
            len => Ok(Capture::Text(init, init + len as usize)),
        }
    }

    /// How many values Lua returns for the captures of the last match: all the captures, or
    /// the whole match when there are none and `whole` is set (`find` does not return it).
    pub(crate) fn count(&self, whole: bool) -> usize {
        if self.level == 0 && whole {
            1
        } else {
            self.level
        }
    }

    fn class_end(&self, mut p: usize) -> Result<usize, Stop> {
        let c = self.pat[p];
        p += 1;
        match c {
            b'%' => {
                if p >= self.pat.len() {
                    return error(Malformed::EndsWithPercent);
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.p(p) == b'^' {
                    p += 1;
                }
                // The first character is part of the set even when it is `]`.
                loop {
                    if p >= self.pat.len() {
                        return error(Malformed::MissingBracket);
                    }
                    let c = self.pat[p];
                    p += 1;
                    if c == b'%' && p < self.pat.len() {
                        p += 1;
                    }
                    if self.p(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// Whether `c` is in the set `[...]` that starts at `p` and whose `]` is at `end`.
    fn in_set(&self, c: u8, mut p: usize, end: usize) -> bool {
        let mut found = true;
        if self.p(p + 1) == b'^' {
            found = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= end {
                return !found;
            }
            let pc = self.pat[p];
            if pc == b'%' {
                p += 1;
                if match_class(c, self.pat[p]) {
                    return found;
                }
            } else if self.p(p + 1) == b'-' && p + 2 < end {
                p += 2;
                if pc <= c && c <= self.pat[p] {
                    return found;
                }
            } else if pc == c {
                return found;
            }
        }
    }

    /// Whether the single item `p..ep` matches the subject byte at `s`.
    #[inline]
    fn single(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.pat[p] {
            b'.' => true,
            b'%' => match_class(c, self.pat[p + 1]),
            b'[' => self.in_set(c, p, ep - 1),
            pc => pc == c,
        }
    }

    fn balance(&self, s: usize, p: usize, budget: &mut Budget) -> Result<Option<usize>, Stop> {
        if p + 1 >= self.pat.len() {
            return error(Malformed::MissingBalanceArguments);
        }
        let (open, close) = (self.pat[p], self.pat[p + 1]);
        if self.src.get(s) != Some(&open) {
            return Ok(None);
        }
        let mut depth = 1u64;
        for (i, &c) in self.src.iter().enumerate().skip(s + 1) {
            budget.spend(1)?;
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
        }
        Ok(None)
    }

    fn max_expand(
        &mut self,
        s: usize,
        p: usize,
        ep: usize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        let mut i = 0;
        while self.single(s + i, p, ep) {
            budget.spend(1)?;
            i += 1;
        }
        // Try the rest of the pattern with the most repetitions first.
        loop {
            if let Some(end) = self.do_match(s + i, ep + 1, budget)? {
                return Ok(Some(end));
            }
            if i == 0 {
                return Ok(None);
            }
            i -= 1;
        }
    }

    fn min_expand(
        &mut self,
        mut s: usize,
        p: usize,
        ep: usize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        loop {
            if let Some(end) = self.do_match(s, ep + 1, budget)? {
                return Ok(Some(end));
            }
            if !self.single(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(
        &mut self,
        s: usize,
        p: usize,
        what: isize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        if self.level >= MAX_CAPTURES {
            return error(Malformed::TooManyCaptures);
        }
        self.caps[self.level] = (s, what);
        self.level += 1;
        let res = self.do_match(s, p, budget)?;
        if res.is_none() {
            self.level -= 1;
        }
        Ok(res)
    }

    fn end_capture(
        &mut self,
        s: usize,
        p: usize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.caps[l].1 == UNFINISHED)
        else {
            return error(Malformed::InvalidPatternCapture);
        };
        self.caps[l].1 = (s - self.caps[l].0) as isize;
        let res = self.do_match(s, p, budget)?;
        if res.is_none() {
            self.caps[l].1 = UNFINISHED;
        }
        Ok(res)
    }

    /// A back-reference `%1`-`%9` (`digit` is the character after `%`).
    fn back_reference(
        &self,
        s: usize,
        digit: u8,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        let l = i32::from(digit) - i32::from(b'1');
        if l < 0 || l as usize >= self.level || self.caps[l as usize].1 == UNFINISHED {
            return capture_index(l);
        }
        let (init, len) = self.caps[l as usize];
        if len < 0 {
            // A position capture never matches text.
            return Ok(None);
        }
        let len = len as usize;
        budget.spend((len / 64) as u32)?;
        if self.src.len() - s >= len && self.src[init..init + len] == self.src[s..s + len] {
            Ok(Some(s + len))
        } else {
            Ok(None)
        }
    }

    fn do_match(
        &mut self,
        mut s: usize,
        mut p: usize,
        budget: &mut Budget,
    ) -> Result<Option<usize>, Stop> {
        if self.depth == 0 {
            return error(Malformed::TooComplex);
        }
        self.depth -= 1;
        budget.spend(1)?;
        let res = loop {
            if p == self.pat.len() {
                break Some(s);
            }
            match self.pat[p] {
                b'(' => {
                    break if self.p(p + 1) == b')' {
                        self.start_capture(s, p + 2, POSITION, budget)?
                    } else {
                        self.start_capture(s, p + 1, UNFINISHED, budget)?
                    };
                }
                b')' => break self.end_capture(s, p + 1, budget)?,
                b'$' if p + 1 == self.pat.len() => break (s == self.src.len()).then_some(s),
                b'%' if self.p(p + 1) == b'b' => match self.balance(s, p + 2, budget)? {
                    Some(end) => {
                        s = end;
                        p += 4;
                    }
                    None => break None,
                },
                b'%' if self.p(p + 1) == b'f' => {
                    p += 2;
                    if self.p(p) != b'[' {
                        return error(Malformed::MissingFrontierBracket);
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src[s - 1] };
                    let current = self.src.get(s).copied().unwrap_or(0);
                    if self.in_set(previous, p, ep - 1) || !self.in_set(current, p, ep - 1) {
                        break None;
                    }
                    p = ep;
                }
                b'%' if self.p(p + 1).is_ascii_digit() => {
                    match self.back_reference(s, self.p(p + 1), budget)? {
                        Some(end) => {
                            s = end;
                            p += 2;
                        }
                        None => break None,
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = self.p(ep);
                    if !self.single(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            // Zero repetitions are fine: go on after the suffix.
                            p = ep + 1;
                            continue;
                        }
                        break None;
                    }
                    match suffix {
                        b'?' => {
                            if let Some(end) = self.do_match(s + 1, ep + 1, budget)? {
                                break Some(end);
                            }
                            p = ep + 1;
                        }
                        b'+' => break self.max_expand(s + 1, p, ep, budget)?,
                        b'*' => break self.max_expand(s, p, ep, budget)?,
                        b'-' => break self.min_expand(s, p, ep, budget)?,
                        _ => {
                            s += 1;
                            p = ep;
                        }
                    }
                }
            }
        };
        self.depth += 1;
        Ok(res)
    }
}

/// Lua's `posrelatI`: a 1-based, possibly negative, start position as a 0-based offset, which
/// may be past the end (callers check).
pub(crate) fn start_offset(init: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let one_based = if init > 0 {
        usize::try_from(init).unwrap_or(usize::MAX)
    } else if init == 0 || init < -len_i {
        1
    } else {
        (len_i + init + 1) as usize
    };
    one_based - 1
}

/// Whether `pat` has none of the characters that make a pattern more than plain text.
pub(crate) fn is_plain(pat: &[u8]) -> bool {
    !pat.iter().any(|c| b"^$*+?.([%-".contains(c))
}

/// Where `needle` first occurs in `hay` (an empty needle occurs at once), in linear time.
pub(crate) fn find_plain(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    memchr::memmem::find(hay, needle)
}

/// The first match at or after `from` (only at `from` when `anchored`), skipping a match that
/// ends at `last` (an empty match right after the previous one, as `gsub` and `gmatch` do):
/// the matcher (for its captures), and the match's start and end.
pub(crate) fn next_match<'s>(
    src: &'s [u8],
    pat: &'s [u8],
    from: usize,
    last: Option<usize>,
    anchored: bool,
    budget: &mut Budget,
) -> Result<Option<(Matcher<'s>, usize, usize)>, Stop> {
    let mut m = Matcher::new(src, pat);
    let mut s = from;
    while s <= src.len() {
        if let Some(e) = m.at(s, budget)?
            && Some(e) != last
        {
            return Ok(Some((m, s, e)));
        }
        if anchored {
            break;
        }
        s += 1;
    }
    Ok(None)
}
