//! A long, realistic agent session as a JSON Lines trace: a query, then turns of 2-4 tool calls
//! with results of varied size, about 12% failures, token and iteration usage rising toward the
//! budgets. It is the session `../shared/bench/long_session.py` writes, byte for byte (the same
//! pseudo-random sequence: Python's Mersenne Twister, seeded as Python seeds it), so the
//! benchmark needs no Python and measures the same file the comparison script gives both
//! engines.

use std::fmt::Write;

/// Python's `random.Random`: MT19937, seeded from an integer as CPython seeds it, with the
/// methods the generator uses.
struct PyRandom {
    state: [u32; 624],
    index: usize,
}

impl PyRandom {
    fn new(seed: u32) -> Self {
        let mut r = PyRandom {
            state: [0; 624],
            index: 624,
        };
        // init_genrand(19650218), then init_by_array([seed]).
        r.state[0] = 19_650_218;
        for i in 1..624 {
            let prev = r.state[i - 1];
            r.state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        let key = [seed];
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..624 {
            let prev = r.state[i - 1];
            r.state[i] = (r.state[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= 624 {
                r.state[0] = r.state[623];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..623 {
            let prev = r.state[i - 1];
            r.state[i] = (r.state[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= 624 {
                r.state[0] = r.state[623];
                i = 1;
            }
        }
        r.state[0] = 0x8000_0000;
        r
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[i] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: 53 random bits as a float in [0, 1).
    fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `_randbelow(n)` for the small `n` the generator uses: rejection sampling on
    /// `getrandbits(n.bit_length())`.
    fn below(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.next_u32() >> (32 - k);
            if r < n {
                return r;
            }
        }
    }

    /// `randint(a, b)`, both ends included.
    fn randint(&mut self, a: u32, b: u32) -> u32 {
        a + self.below(b - a + 1)
    }

    fn choice<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u32) as usize]
    }
}

/// `round(x, 4)` as Python rounds it: correctly, on the exact value.
fn round4(x: f64) -> f64 {
    format!("{x:.4}").parse().unwrap_or(x)
}

/// A float as Python's `json.dumps` writes it (`repr`).
fn py_float(out: &mut String, x: f64) {
    let _ = write!(out, "{x:?}");
}

/// The session of `turns` turns (seed 7, as `long_session.py` uses), one event per line.
pub fn long_session(turns: u32) -> String {
    let mut rnd = PyRandom::new(7);
    let tools = [
        "web_search",
        "vault_search",
        "fetch_url",
        "read_file",
        "run_tests",
        "grep",
    ];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{{\"hook\": \"on_query_start\", \"query\": {{\"text\": \"Refactor the payment module and keep the tests green.\"}}, \
         \"user\": {{\"id\": \"u-1\", \"settings\": {{\"verbosity\": \"concise\"}}}}, \
         \"project\": {{\"id\": \"p-1\", \"settings\": {{\"model\": \"large\", \"max_tokens\": 200000}}}}, \
         \"turn\": {{\"number\": 1, \"token_usage\": 0.01, \"context_usage\": 0.01, \"iteration_count\": 0, \"max_iterations\": {}}}}}",
        turns + 5
    );
    for t in 1..=turns {
        let used = f64::min(0.95, 0.02 + 0.9 * f64::from(t) / f64::from(turns));
        out.push_str("{\"hook\": \"on_turn_start\", \"turn\": {\"number\": ");
        let _ = write!(out, "{t}, \"token_usage\": ");
        py_float(&mut out, round4(used));
        out.push_str(", \"context_usage\": ");
        py_float(&mut out, round4(used * 0.9));
        let _ = writeln!(out, ", \"iteration_count\": {t}}}}}");
        for _ in 0..rnd.randint(2, 4) {
            let name = *rnd.choice(&tools);
            let q = rnd.randint(0, 999);
            let tool = format!("{{\"name\": \"{name}\", \"arguments\": {{\"query\": \"q{q}\"}}}}");
            let _ = writeln!(out, "{{\"hook\": \"on_tool_call\", \"tool\": {tool}}}");
            if rnd.random() < 0.12 {
                let _ = writeln!(
                    out,
                    "{{\"hook\": \"on_tool_failure\", \"tool\": {tool}, \"error\": \"timeout after 30s\"}}"
                );
            } else {
                let n = *rnd.choice(&[1, 2, 3, 5, 8, 12]);
                let text = "x".repeat(rnd.randint(40, 400) as usize);
                let _ = writeln!(
                    out,
                    "{{\"hook\": \"on_tool_complete\", \"tool\": {tool}, \"result\": {{\"count\": {n}, \"text\": \"{text}\"}}}}"
                );
            }
        }
        out.push_str("{\"hook\": \"on_turn_end\", \"turn\": {\"number\": ");
        let _ = write!(out, "{t}, \"token_usage\": ");
        py_float(&mut out, round4(used + 0.005));
        out.push_str("}}\n");
    }
    out.push_str("{\"hook\": \"on_session_end\"}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_has_the_shape_of_the_python_one() {
        let s = long_session(3000);
        assert_eq!(s.lines().count(), 23_872, "the issue's 23,872 events");
        for line in s.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["hook"].is_string());
        }
        assert!(s.starts_with("{\"hook\": \"on_query_start\""));
    }

    #[test]
    fn python_seeds_and_draws_as_python_does() {
        // random.Random(7): the first draws, as CPython gives them.
        let mut r = PyRandom::new(7);
        assert_eq!(r.random(), 0.32383276483316237);
        assert_eq!(r.randint(2, 4), 2);
    }
}
