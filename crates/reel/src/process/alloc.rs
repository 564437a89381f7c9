//! Allocator policy, set once at start-up before any worker thread exists.
//!
//! reel links mimalloc through the `mimalloc` crate 0.1.52 and `libmimalloc-sys` 0.1.49,
//! which build mimalloc **v3** (3.3.2) unless the `v2` feature is set. Their defaults
//! differ: v2 purges freed pages after 10 ms (arena memory 10x later), v3 after 1000 ms
//! (`arena_purge_mult` 1); both purge with `MADV_DONTNEED` (`purge_decommits = 1`). Each
//! such call on a multi-threaded process is a TLB shootdown IPI to every core that ran the
//! process, so a server in steady state must not keep handing pages back:
//!
//! - `purge_delay = -1`: never purge on the allocation path;
//! - `purge_decommits = 0`: if a purge is ever asked for, use `MADV_FREE`, which the kernel
//!   reclaims lazily without an IPI, instead of `MADV_DONTNEED`.
//!
//! `MIMALLOC_*` environment variables still override these (an operator can set
//! `MIMALLOC_PURGE_DELAY=10` to trade IPIs for a smaller resident set).

use std::ffi::c_long;

use libmimalloc_sys::{mi_option_set, mi_option_t};

/// `mi_option_purge_decommits` in mimalloc's `mi_option_e` (the same index in v2 and v3;
/// the Rust bindings do not name it).
pub(crate) const MI_OPTION_PURGE_DECOMMITS: mi_option_t = 5;
/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (v2 and v3).
pub(crate) const MI_OPTION_PURGE_DELAY: mi_option_t = 15;

/// Applies reel's allocator options unless the environment already sets them.
pub(crate) fn configure() {
    set_unless_env("MIMALLOC_PURGE_DELAY", MI_OPTION_PURGE_DELAY, -1);
    set_unless_env("MIMALLOC_PURGE_DECOMMITS", MI_OPTION_PURGE_DECOMMITS, 0);
}

fn set_unless_env(var: &str, option: mi_option_t, value: c_long) {
    if std::env::var_os(var).is_some() {
        return;
    }
    // SAFETY: mi_option_set only stores an integer in mimalloc's option table; it is called
    // from main before any other thread exists.
    unsafe { mi_option_set(option, value) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use libmimalloc_sys::mi_option_get;

    #[test]
    fn options_are_applied() {
        configure();
        for (var, option, want) in [
            ("MIMALLOC_PURGE_DELAY", MI_OPTION_PURGE_DELAY, -1),
            ("MIMALLOC_PURGE_DECOMMITS", MI_OPTION_PURGE_DECOMMITS, 0),
        ] {
            if std::env::var_os(var).is_some() {
                // The environment wins by design; say so where the harness cannot hide it.
                use std::io::Write as _;
                let line = format!("SKIPPED options_are_applied ({var}): set in the environment\n");
                let _ = std::io::stderr().write_all(line.as_bytes());
                continue;
            }
            // SAFETY: reading an option has no preconditions.
            assert_eq!(unsafe { mi_option_get(option) }, want, "{var}");
        }
    }
}
