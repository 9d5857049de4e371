//! A cost check for Lua patterns. Matching runs in C, where the instruction-count hook that
//! enforces the time limit cannot interrupt it, and a backtracking pattern on a large subject
//! can run for minutes (`(.-)x(.-)y` tries every split). Before `find`, `match`, `gmatch` and
//! `gsub` run, the worst case is estimated from the pattern's shape and the subject's size,
//! and a match that could take too long is refused with an error the script can see.
//!
//! The estimate: each quantified item (`*`, `+`, `-`) followed by more of the pattern may try
//! every length, and so may a balance item (`%b()`); an unanchored pattern is tried at every
//! position. So the work is about `n ^ (k + 1)` for `k` such items (`n ^ k` when anchored with
//! `^`). A trailing quantifier only tries once per position, so `%w+` costs `n`.

use mlua::Value;

/// Most estimated steps a single match may take (well under a second in C).
pub(crate) const MAX_STEPS: f64 = 1e8;

struct Shape {
    anchored: bool,
    backtracking: u32,
}

fn shape(p: &[u8]) -> Shape {
    let anchored = p.first() == Some(&b'^');
    let mut i = usize::from(anchored);
    // Balance items, and items quantified by `*`, `+` or `-` (which backtrack unless last).
    let (mut balances, mut quantified, mut last_quantified) = (0, 0, false);
    while i < p.len() {
        let c = p[i];
        let (balance, len) = match c {
            b'(' | b')' => {
                i += 1;
                continue;
            }
            b'$' if i + 1 == p.len() => break,
            b'%' => match p.get(i + 1) {
                Some(b'b') => (true, 4),
                Some(b'f') => {
                    // %f[set]
                    let set_len = set_length(&p[i + 2..]);
                    i += 2 + set_len;
                    continue;
                }
                _ => (false, 2),
            },
            b'[' => (false, set_length(&p[i..])),
            _ => (false, 1),
        };
        i += len;
        let quantifier = match p.get(i) {
            Some(q @ (b'*' | b'+' | b'-' | b'?')) if !balance => {
                i += 1;
                Some(*q)
            }
            _ => None,
        };
        balances += u32::from(balance);
        last_quantified = matches!(quantifier, Some(b'*' | b'+' | b'-'));
        quantified += u32::from(last_quantified);
    }
    Shape {
        anchored,
        backtracking: balances + quantified - u32::from(last_quantified),
    }
}

/// Length of a `[set]` starting at `p[0] == b'['` (the rest of the pattern if unclosed).
fn set_length(p: &[u8]) -> usize {
    let mut i = 1;
    if p.get(i) == Some(&b'^') {
        i += 1;
    }
    if p.get(i) == Some(&b']') {
        i += 1;
    }
    while i < p.len() {
        match p[i] {
            b'%' => i += 2,
            b']' => return i + 1,
            _ => i += 1,
        }
    }
    p.len()
}

/// The estimated worst-case steps of matching `pattern` against a subject of `n` bytes.
pub(crate) fn cost(n: usize, pattern: &[u8]) -> f64 {
    let s = shape(pattern);
    let exponent = s.backtracking + u32::from(!s.anchored);
    (n.max(1) as f64).powi(exponent as i32)
}

/// Refuses a match that could run too long (see the module docs).
pub(crate) fn check(subject: &Value, pattern: &Value) -> mlua::Result<()> {
    let n = match subject {
        Value::String(s) => s.as_bytes().len(),
        Value::Integer(_) | Value::Number(_) => 32,
        // Lua raises its own error for other types.
        _ => return Ok(()),
    };
    let Value::String(p) = pattern else {
        return Ok(());
    };
    let p = p.as_bytes();
    let steps = cost(n, &p);
    if steps > MAX_STEPS {
        return Err(mlua::Error::RuntimeError(format!(
            "the pattern '{}' could take too long on a subject of {n} bytes (up to {steps:.0e} steps); \
             anchor it with ^, make it less ambiguous, or match a smaller piece",
            String::from_utf8_lossy(&p)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let k = |p: &str| shape(p.as_bytes()).backtracking;
        assert_eq!(k("%w+"), 0);
        assert_eq!(k("(%w+)=(.*)"), 1);
        assert_eq!(k("^(.-)x(.-)y$"), 2);
        assert_eq!(k("a?b?c"), 0);
        assert_eq!(k("%b()x"), 1);
        assert_eq!(k("[%]]*x"), 1);
        assert_eq!(k("%f[%w]%w+"), 0);
        assert!(shape(b"^x").anchored && !shape(b"x").anchored);
    }

    #[test]
    fn costs_grow_with_ambiguity_and_size() {
        assert!(cost(1 << 20, b"%w+") <= MAX_STEPS);
        assert!(cost(10_000, b"(%w+)=(.*)") <= MAX_STEPS);
        assert!(cost(100_000, b"(%w+)=(.*)") > MAX_STEPS);
        assert!(cost(1_000_000, b"^(%w+)=(.*)") <= MAX_STEPS);
        assert!(cost(1_000, b".-.-.-b") > MAX_STEPS);
    }
}
