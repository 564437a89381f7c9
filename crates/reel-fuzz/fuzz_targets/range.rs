//! libFuzzer entry of [`reel_fuzz::range`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::range::run(data));
