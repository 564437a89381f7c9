//! Probes whether this machine can set up an io_uring. Where it cannot (an old kernel,
//! `kernel.io_uring_disabled`, a seccomp profile), the io_uring variants of the tests are
//! compiled as ignored, with the reason, instead of failing: `cargo test` then lists them
//! as "ignored" and counts them. `REEL_STORE_NO_URING=1` forces that (to check the
//! skip). The store itself probes again at run time (`IoMode::Auto`).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(reel_no_uring)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=REEL_STORE_NO_URING");
    let forced = std::env::var_os("REEL_STORE_NO_URING").is_some_and(|v| v == "1");
    let probe = io_uring::IoUring::new(2);
    if forced || probe.is_err() {
        let why = match probe {
            Err(e) => e.to_string(),
            Ok(_) => "REEL_STORE_NO_URING=1".to_owned(),
        };
        println!("cargo::rustc-cfg=reel_no_uring");
        println!(
            "cargo::warning=io_uring unavailable ({why}): the io_uring store tests are ignored"
        );
    }
}
