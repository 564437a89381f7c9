//! libFuzzer entry of [`reel_fuzz::store_checkpoint`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::store_checkpoint::run(data));
