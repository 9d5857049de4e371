//! Fuzz target `trace`: see `warden_fuzz::trace` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::trace(data));
