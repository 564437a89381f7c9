//! Core plan, pinned thread-per-core workers, `SO_REUSEPORT` listeners and graceful shutdown.
//!
//! * [`core_plan`] decides which CPUs run workers: the CPUs the process may use minus those
//!   that service the NIC queue interrupts, with the evidence printed by `reel plan`.
//! * [`start`] runs one pinned OS thread per worker CPU, each with a tokio `current_thread`
//!   runtime and `LocalSet`, its own listening socket per listener in a `SO_REUSEPORT` group,
//!   an accept loop with connection limits (per worker, per process, per client address;
//!   see [`limits`]), and a [`WorkerApp`] instance that serves every connection the worker
//!   accepts. Nothing is work-stolen: a connection lives and dies on the worker that
//!   accepted it. A connection the app hands back idle ([`ConnEnd::Park`]) waits in the
//!   worker's idle lot without a task until it speaks again.
//! * [`start_with`] takes over listening sockets the process inherited (systemd socket
//!   activation, a binary upgrade) instead of binding; [`Runtime::export_listeners`] hands
//!   them to a successor.
//! * [`Runtime::set_listeners`] changes listeners live; [`Runtime::shutdown`] drains.
//!
//! * A listener with [`ListenerSpec::proxy_protocol`] reads a PROXY protocol header
//!   ([`proxy_header`]) from each connection of a source the app trusts
//!   ([`WorkerApp::proxy_header_timeout`]) before the app sees it, and counts the
//!   connection against the client it names ([`WorkerApp::on_proxied_conn`]).
//!
//! * [`quic_route`] binds a QUIC listener's UDP sockets, one per worker, in a reuseport
//!   group whose packets go to the worker that owns their connection ID.
//!
//! Inside: `app` holds the contract with the application ([`WorkerApp`]), `options` and
//! `error` the public options and [`RuntimeError`], `sockets` binds and adopts the listening
//! sockets, `sysfs` reads procfs and sysfs for the core plan and [`cgroup`], and `workers`
//! runs the threads (its module doc maps its parts).
//!
//! # CPU steering
//!
//! With [`Steer::Cpu`] a classic BPF program picks the worker by the CPU that processed the
//! SYN (see [`steer`]). It helps when the NIC spreads flows over queues with RSS/RPS and each
//! queue's interrupt lands on a known CPU: connection state then stays on the worker next to
//! (or mapped from) the core doing that flow's softirq work, which keeps socket buffers and
//! connection structures in a warm cache and avoids cross-core wakeups. It does not help on
//! loopback (the sending CPU processes the packet, so steering follows the client threads), with
//! a single NIC queue (every SYN arrives on one CPU and one worker would get every connection
//! if that CPU were a worker; mapped from an IRQ-only CPU, all go to one worker too), or when
//! IRQ affinity changes after the plan was made (irqbalance) — then the hash is the better
//! default.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod app;
pub mod cgroup;
pub mod core_plan;
mod error;
pub mod limits;
mod listening;
mod options;
pub mod proxy_header;
pub mod quic_route;
mod sockets;
pub mod steer;
mod sysfs;
mod workers;

pub use app::{ConnEnd, WorkerApp, WorkerCtx, WorkerStats};
pub use core_plan::{
    CorePlan, CoreSpec, CpuEntry, CpuSelect, PlanError, RealSysFs, Role, SysFs, plan_system,
};
pub use error::RuntimeError;
pub use limits::{ClientCounts, ClientSlot, Refusal};
pub use options::{ListenerSpec, RuntimeOptions, Steer};
pub use sockets::{Inherited, in_use};
pub use workers::{Runtime, ShutdownHandle, ShutdownReport, start, start_with};
