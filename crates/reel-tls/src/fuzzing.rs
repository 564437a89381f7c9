//! Entry points for the fuzz targets of `crates/reel-fuzz` (`docs/fuzzing.md`) into
//! crate-private code: the reading of a ClientHello's server name from the records a
//! handshake received. Not an API: hidden, and only the fuzz targets call it.

/// Whether the ClientHello at the start of `records` names an IP address as its server
/// name (what `accept` counts).
pub fn sni_is_ip_address(records: &[u8]) -> bool {
    crate::client_hello::sni_is_ip_address(records)
}
