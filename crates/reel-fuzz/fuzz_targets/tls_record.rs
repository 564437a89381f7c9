//! libFuzzer entry of [`reel_fuzz::tls_record`] (`crates/reel-fuzz/fuzz.sh`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| reel_fuzz::tls_record::run(data));
