//! Fuzz target `rule_file`: see `warden_fuzz::rule_file` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::rule_file(data));
