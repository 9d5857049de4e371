//! Fuzz target `template`: see `warden_fuzz::template` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::template(data));
