//! Fuzz target `serve_body`: see `warden_fuzz::serve_body` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::serve_body(data));
