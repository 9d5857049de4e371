//! Fuzz target `manifest`: see `warden_fuzz::manifest` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::manifest(data));
