//! Fuzz target `definition`: see `weir::fuzzing::definition` for what it feeds and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir::fuzzing::definition(data));
