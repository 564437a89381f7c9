//! libFuzzer entry of [`reel_fuzz::http1_head`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::http1_head::run(data));
