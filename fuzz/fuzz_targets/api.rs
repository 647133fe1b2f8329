//! Fuzz target `api`: see `weir::fuzzing::api` for what it feeds and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = weir::fuzzing::api(data);
});
