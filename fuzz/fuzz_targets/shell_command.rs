//! Fuzz target `shell_command`: see `warden_fuzz::shell_command` for what it feeds and what it
//! asserts.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| warden_fuzz::shell_command(data));
