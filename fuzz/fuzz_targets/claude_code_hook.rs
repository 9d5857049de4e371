//! Fuzz target `claude_code_hook`: see `warden_fuzz::claude_code_hook` for what it feeds and what it asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::claude_code_hook(data));
