//! Small keys and sets for the session's tables.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use warden_load::Hook;

use warden_program::program::Program;

/// A hasher for the session's maps keyed by Warden's own small integers (rule, entry and node
/// indices, hooks). They are never input, so SipHash's protection against chosen keys buys
/// nothing here, and it was a sixth of the cost of resuming a waiting script.
#[derive(Default, Clone, Copy)]
pub(crate) struct IndexHasher(u64);

impl IndexHasher {
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for IndexHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }
    fn write_isize(&mut self, x: isize) {
        self.add(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by Warden's own indices.
pub(crate) type IndexMap<K, V> = HashMap<K, V, BuildHasherDefault<IndexHasher>>;

/// A set of hooks (what a running tree waits for). Its bits follow `Hook::index`; a saved
/// session names the hooks instead ([`HookSet::hooks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct HookSet(u8);

impl HookSet {
    pub(crate) fn insert(&mut self, hook: Hook) {
        self.0 |= 1 << hook.index();
    }

    pub(crate) fn contains(self, hook: Hook) -> bool {
        self.0 & (1 << hook.index()) != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn of(hook: Hook) -> Self {
        let mut s = HookSet::default();
        s.insert(hook);
        s
    }

    /// The hooks in the set, in lifecycle order.
    pub(crate) fn hooks(self) -> impl Iterator<Item = Hook> {
        Hook::ALL.into_iter().filter(move |&h| self.contains(h))
    }
}

/// A rule as a saved session names it: by id, and by the fingerprint of its files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RuleId {
    pub key: Arc<str>,
    pub fingerprint: u64,
}

impl RuleId {
    pub(crate) fn of(program: &Program, ix: u32) -> Option<RuleId> {
        let r = program.rules.get(ix as usize)?;
        Some(RuleId {
            key: r.key.clone(),
            fingerprint: r.fingerprint()?,
        })
    }

    /// The rule's index in `program`, if it is there unchanged.
    pub(crate) fn find(&self, program: &Program) -> Option<u32> {
        program
            .rules
            .iter()
            // The key first: a fingerprint compiles its rule (in a program compiled on demand).
            .position(|r| r.key == self.key && r.fingerprint() == Some(self.fingerprint))
            .and_then(|i| u32::try_from(i).ok())
    }
}

/// The seed of the random numbers of the scripts a step starts: the same for the same session,
/// turn and hook, in this process or another (so a session read back from the store draws the
/// numbers it would have drawn). A step hashes the session id once ([`session_seed`], kept by
/// the session's scripts) and goes on from it ([`step_seed_from`]).
#[cfg(test)]
pub(crate) fn step_seed(session: &str, turn: u32, hook: Hook) -> u64 {
    step_seed_from(session_seed(session), turn, hook)
}

/// [`step_seed`]'s hash of the session id alone, from which [`step_seed_from`] goes on: the
/// same for every step of the session.
pub(crate) fn session_seed(session: &str) -> u64 {
    fnv_from(FNV_OFFSET, session.as_bytes())
}

/// [`step_seed`], from the session id's [`session_seed`].
pub(crate) fn step_seed_from(session_seed: u64, turn: u32, hook: Hook) -> u64 {
    let h = fnv_from(session_seed, &turn.to_le_bytes());
    fnv_from(h, &[hook.index() as u8])
}

/// What a rule adds to the seed of the scripts it starts: from its key, the same in every
/// process.
pub(crate) fn key_seed(key: &str) -> u64 {
    fnv(key.bytes())
}

/// FNV-1a's offset basis: its state before any byte.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a: stable across processes and builds.
pub(crate) fn fnv(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.fold(FNV_OFFSET, fnv_byte)
}

/// FNV-1a's state after `bytes`, from `state`.
fn fnv_from(state: u64, bytes: &[u8]) -> u64 {
    bytes.iter().copied().fold(state, fnv_byte)
}

fn fnv_byte(h: u64, b: u8) -> u64 {
    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a's published test vectors: the seeds of saved sessions' scripts stay what they were.
    #[test]
    fn fnv_is_fnv_1a() {
        assert_eq!(fnv("".bytes()), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv("a".bytes()), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv("foobar".bytes()), 0x8594_4171_f739_67e8);
    }

    /// The step's seed from the session's, as from the bytes of the session id, the turn and
    /// the hook hashed in one go (what it always was).
    #[test]
    fn a_step_seed_goes_on_from_the_session_seed() {
        for (session, turn, hook) in [
            ("", 0, Hook::OnTurnStart),
            ("session-1", 3, Hook::OnToolCall),
            (
                "c0ffee00-1234-4abc-8def-0123456789ab",
                u32::MAX,
                Hook::OnSessionEnd,
            ),
        ] {
            let whole = fnv(session
                .bytes()
                .chain(turn.to_le_bytes())
                .chain([hook.index() as u8]));
            assert_eq!(step_seed(session, turn, hook), whole);
            assert_eq!(step_seed_from(session_seed(session), turn, hook), whole);
        }
    }
}
