//! Fuzz target `envelope`: see `weir::fuzzing::envelope` for what it feeds and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir::fuzzing::envelope(data));
