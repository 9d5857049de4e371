//! Regular expressions for `matches(s, 'pattern')`: compiled when the condition is checked,
//! kept in a process-wide cache by pattern, and matched in linear time (the `regex` crate has
//! no backtracking), so no pattern can make a tick hang.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use regex::{Regex, RegexBuilder};

/// The largest compiled program a pattern may make (a guard against patterns that expand
/// into huge automata, such as `(a{100}){100}`).
const SIZE_LIMIT: usize = 1 << 20;

/// Most patterns kept; past this the cache is cleared (a pattern is recompiled on next use).
const MAX_CACHED: usize = 4096;

fn cache() -> &'static RwLock<HashMap<String, Arc<Regex>>> {
    static CACHE: OnceLock<RwLock<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    CACHE.get_or_init(|| RwLock::new(HashMap::new()))
}

/// The compiled `pattern`, or why it is not one.
pub(crate) fn compile(pattern: &str) -> Result<Arc<Regex>, String> {
    if let Some(re) = cache()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(pattern)
    {
        return Ok(re.clone());
    }
    let re = RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::Syntax(s) => s.lines().last().unwrap_or_default().trim().to_string(),
            regex::Error::CompiledTooBig(_) => "the pattern is too large".to_string(),
            other => other.to_string(),
        })?;
    let re = Arc::new(re);
    let mut map = cache().write().unwrap_or_else(PoisonError::into_inner);
    if map.len() >= MAX_CACHED {
        map.clear();
    }
    map.insert(pattern.to_string(), re.clone());
    Ok(re)
}
