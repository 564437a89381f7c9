//! The process: `reel serve`'s assembly and start-up order (`server`), the control loop
//! that waits for signals and admin requests and decides how the process ends
//! (`lifecycle`), the allocator policy set before any worker thread exists (`alloc`), and
//! the built-in demo origin (`demo`, with the `demo` feature), and the built-in defaults
//! `serve` runs on without a config file (`defaults`).

pub(crate) mod alloc;
pub(crate) mod defaults;
#[cfg(feature = "demo")]
pub(crate) mod demo;
pub(crate) mod lifecycle;
pub(crate) mod server;
