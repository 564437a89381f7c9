//! The data listeners' TLS and HTTP/3 sides as the binary builds them from a generation's
//! config: each TLS listener's serving state and accept path (`tls`), and the HTTP/3
//! listeners with their UDP socket groups and QUIC endpoints (`quic`). Below the shared
//! state that holds them: they take a config and its TLS state, never the generation.

pub(crate) mod quic;
pub(crate) mod tls;
