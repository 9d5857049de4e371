//! Fuzz target `config`: see `warden_fuzz::config` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::config(data));
