//! libFuzzer entry of [`reel_fuzz::cache_control`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::cache_control::run(data));
