//! The data listeners as the binary wires them into the runtime: what each worker runs
//! (`app`: the per-worker application and the request handler in front of the cache), the
//! TLS listeners' serving state and accept path (`tls`), the HTTP/3 listeners, their UDP
//! socket groups and QUIC endpoints (`quic`), and the answer to a connection refused at
//! accept (`refused`).

pub(crate) mod app;
pub(crate) mod refused;
