//! The process: `reel serve`'s assembly and start-up order (`server`), the control loop
//! that waits for signals and admin requests and decides how the process ends
//! (`lifecycle`), and what is set once per process before any worker runs: the allocator
//! policy (`alloc`), logging (`logging`), the descriptor budget (`fds`) and the built-in
//! demo origin (`demo`, with the `demo` feature).

pub(crate) mod alloc;
#[cfg(feature = "demo")]
pub(crate) mod demo;
pub(crate) mod lifecycle;
pub(crate) mod server;
