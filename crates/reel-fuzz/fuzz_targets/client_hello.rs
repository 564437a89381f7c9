//! libFuzzer entry of [`reel_fuzz::client_hello`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::client_hello::run(data));
