//! libFuzzer entry of [`reel_fuzz::proxy_header`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::proxy_header::run(data));
