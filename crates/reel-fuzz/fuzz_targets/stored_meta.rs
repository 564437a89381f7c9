//! libFuzzer entry of [`reel_fuzz::stored_meta`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::stored_meta::run(data));
