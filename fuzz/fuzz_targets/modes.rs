//! Fuzz target `modes`: see `warden_fuzz::modes` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::modes(data));
