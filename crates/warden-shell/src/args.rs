//! A program's arguments read as GNU's getopt reads them: grouped short flags (`-rf`), short
//! options with a value attached or in the next word (`-n5`, `-n 5`), long flags and long
//! options (`--force`, `--output=x`, `--output x`), `--` ending the options, and options after
//! operands (GNU programs take `rm dir -rf`).

use crate::words::Expanded;

/// A program's arguments, read.
#[derive(Debug, Default)]
pub(crate) struct Args {
    /// Flags, without their dashes: `r` and `f` of `-rf`, `force` of `--force`.
    pub flags: Vec<String>,
    /// Options with their values: (`o`, `x`) of `-o x`, (`output`, `x`) of `--output=x`.
    pub values: Vec<(String, Expanded)>,
    /// Everything else, in order.
    pub operands: Vec<Expanded>,
}

impl Args {
    /// Whether any of `names` is a flag.
    pub(crate) fn has(&self, names: &[&str]) -> bool {
        self.flags.iter().any(|f| names.contains(&f.as_str()))
    }

    /// The last value of any of the options `names`.
    pub(crate) fn value(&self, names: &[&str]) -> Option<&Expanded> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| names.contains(&n.as_str()))
            .map(|(_, v)| v)
    }
}

/// Reads `args`: `short_values` are the short options that take a value, `long_values` the
/// long ones.
pub(crate) fn getopt(args: &[Expanded], short_values: &str, long_values: &[&str]) -> Args {
    let mut out = Args::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let w = a.text.as_str();
        i += 1;
        if !a.literal || !w.starts_with('-') || w == "-" {
            out.operands.push(a.clone());
            continue;
        }
        if w == "--" {
            out.operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = w.strip_prefix("--") {
            match long.split_once('=') {
                Some((name, v)) => out.values.push((name.to_string(), Expanded::literal(v))),
                None if long_values.contains(&long) => {
                    if let Some(v) = args.get(i) {
                        out.values.push((long.to_string(), v.clone()));
                        i += 1;
                    }
                }
                None => out.flags.push(long.to_string()),
            }
            continue;
        }
        let chars: Vec<char> = w[1..].chars().collect();
        for (k, c) in chars.iter().enumerate() {
            if short_values.contains(*c) {
                let attached: String = chars[k + 1..].iter().collect();
                if !attached.is_empty() {
                    out.values
                        .push((c.to_string(), Expanded::literal(attached)));
                } else if let Some(v) = args.get(i) {
                    out.values.push((c.to_string(), v.clone()));
                    i += 1;
                }
                break;
            }
            out.flags.push(c.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str, short: &str, long: &[&str]) -> Args {
        let words: Vec<Expanded> = s.split(' ').map(Expanded::literal).collect();
        getopt(&words, short, long)
    }

    #[test]
    fn flags_values_and_operands() {
        let a = read("-rf --no-preserve-root / x -v", "", &[]);
        assert!(a.has(&["r"]) && a.has(&["f"]) && a.has(&["no-preserve-root"]) && a.has(&["v"]));
        let ops: Vec<&str> = a.operands.iter().map(|o| o.text.as_str()).collect();
        assert_eq!(ops, ["/", "x"]);
        let a = read("-o out -n5 --output=y --level 3 -- -rf", "on", &["level"]);
        assert_eq!(a.value(&["o"]).unwrap().text, "out");
        assert_eq!(a.value(&["n"]).unwrap().text, "5");
        assert_eq!(a.value(&["output"]).unwrap().text, "y");
        assert_eq!(a.value(&["level"]).unwrap().text, "3");
        assert_eq!(a.operands[0].text, "-rf");
    }
}
