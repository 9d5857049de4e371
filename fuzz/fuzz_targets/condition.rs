//! Fuzz target `condition`: see `warden_fuzz::condition` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::condition(data));
