//! What a TLS connection is after its handshake: records sealed by the kernel
//! ([`KtlsStream`]), by reel ([`SealedStream`]), or, when the secrets could not be taken
//! out of rustls, by rustls itself. Both of reel's streams treat control records alike:
//! a `close_notify` alert ends the stream like a FIN, a client's TLS 1.3 `KeyUpdate` ends
//! it gracefully (counted in [`KEY_UPDATE_CLOSES`]: neither the kernels reel meets nor
//! this record layer rekey), anything else ends the connection with an error. Nothing a
//! peer sends can panic.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::record::content;

/// Connections ended because the client asked to update its keys.
pub static KEY_UPDATE_CLOSES: AtomicU64 = AtomicU64::new(0);

/// TLS 1.3 handshake message type `key_update` (RFC 8446 section 4.6.3).
const KEY_UPDATE: u8 = 24;

/// What a record other than application data means for the reading side: `Ok(())` for
/// an orderly end (EOF), an error otherwise.
pub(crate) fn control(typ: u8, payload: &[u8]) -> io::Result<()> {
    match (typ, payload) {
        (content::ALERT, [_, 0]) => Ok(()),
        (content::ALERT, [_, d]) => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("peer sent TLS alert {d}"),
        )),
        (content::HANDSHAKE, [KEY_UPDATE, ..]) => {
            KEY_UPDATE_CLOSES.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        (content::HANDSHAKE, _) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected TLS handshake message after the handshake",
        )),
        (t, _) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected TLS record type {t} after the handshake"),
        )),
    }
}

/// The `close_notify` alert's payload (warning level, description 0).
pub(crate) const CLOSE_NOTIFY: [u8; 2] = [1, 0];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_notify_and_key_update_end_quietly_everything_else_is_an_error() {
        assert!(control(content::ALERT, &[1, 0]).is_ok());
        assert!(control(content::ALERT, &[2, 40]).is_err());
        assert!(control(content::ALERT, &[]).is_err());
        let before = KEY_UPDATE_CLOSES.load(Ordering::Relaxed);
        assert!(control(content::HANDSHAKE, &[24, 0, 0, 1, 0]).is_ok());
        assert!(KEY_UPDATE_CLOSES.load(Ordering::Relaxed) > before);
        assert!(control(content::HANDSHAKE, &[1, 0, 0, 0]).is_err());
        assert!(control(content::HANDSHAKE, &[]).is_err());
        assert!(control(content::CHANGE_CIPHER_SPEC, &[1]).is_err());
        assert!(control(99, &[1]).is_err());
    }
}
