//! What a TLS connection is after its handshake: records sealed by the kernel
//! ([`KtlsStream`]), by reel ([`SealedStream`]), or, when the secrets could not be taken
//! out of rustls, by rustls itself. Both of reel's streams treat control records alike:
//! a `close_notify` alert ends the stream like a FIN, a client's TLS 1.3 `KeyUpdate` ends
//! it gracefully where the keys cannot be updated (counted in [`KEY_UPDATE_CLOSES`]: a
//! kTLS socket; [`SealedStream`] updates them, see there), anything else ends the
//! connection with an error and, unless the peer's own alert ended it, with the alert
//! that says why.
//! Every close of reel's sends `close_notify` first, unless a fatal alert went instead.
//! Nothing a peer sends can panic.
//!
//! [`KtlsStream`]: crate::KtlsStream
//! [`SealedStream`]: crate::SealedStream

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::record::{alert, content};

/// Connections ended because the client asked to update its keys.
pub static KEY_UPDATE_CLOSES: AtomicU64 = AtomicU64::new(0);

/// TLS 1.3 handshake message type `key_update` (RFC 8446 section 4.6.3).
const KEY_UPDATE: u8 = 24;

/// Why a control record ended the connection with an error: the alert to answer with
/// (none when the peer's own alert ended it) and the error reading returns.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) alert: Option<u8>,
    pub(crate) error: io::Error,
}

fn unexpected(what: String) -> Refused {
    Refused {
        alert: Some(alert::UNEXPECTED_MESSAGE),
        error: io::Error::new(io::ErrorKind::InvalidData, what),
    }
}

/// What a record other than application data means for the reading side of a TLS 1.3
/// session (`tls13`) or a TLS 1.2 one: `Ok(())` for an orderly end (EOF), a refusal
/// otherwise. In TLS 1.2 a handshake message of type 24 is no `KeyUpdate` (there is none).
pub(crate) fn control(tls13: bool, typ: u8, payload: &[u8]) -> Result<(), Refused> {
    match (typ, payload) {
        (content::ALERT, [_, alert::CLOSE_NOTIFY]) => Ok(()),
        (content::ALERT, [_, d]) => Err(Refused {
            alert: None,
            error: io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("peer sent TLS alert {d}"),
            ),
        }),
        (content::ALERT, _) => Err(Refused {
            alert: Some(alert::DECODE_ERROR),
            error: io::Error::new(io::ErrorKind::InvalidData, "malformed TLS alert"),
        }),
        (content::HANDSHAKE, [KEY_UPDATE, ..]) if tls13 => {
            KEY_UPDATE_CLOSES.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        (content::HANDSHAKE, _) => {
            Err(unexpected("unexpected TLS handshake message after the handshake".into()))
        }
        (t, _) => Err(unexpected(format!("unexpected TLS record type {t} after the handshake"))),
    }
}

/// The `close_notify` alert's payload (warning level, description 0).
pub(crate) const CLOSE_NOTIFY: [u8; 2] = [1, alert::CLOSE_NOTIFY];

/// A fatal alert's payload.
pub(crate) fn fatal(description: u8) -> [u8; 2] {
    [2, description]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_notify_and_key_update_end_quietly_everything_else_is_an_error() {
        let alert_of = |r: Result<(), Refused>| r.err().map(|r| r.alert);
        assert!(control(true, content::ALERT, &[1, 0]).is_ok());
        assert_eq!(alert_of(control(true, content::ALERT, &[2, 40])), Some(None));
        assert_eq!(alert_of(control(true, content::ALERT, &[])), Some(Some(alert::DECODE_ERROR)));
        let before = KEY_UPDATE_CLOSES.load(Ordering::Relaxed);
        assert!(control(true, content::HANDSHAKE, &[24, 0, 0, 1, 0]).is_ok());
        assert!(KEY_UPDATE_CLOSES.load(Ordering::Relaxed) > before);
        let unexpected = Some(Some(alert::UNEXPECTED_MESSAGE));
        assert_eq!(alert_of(control(true, content::HANDSHAKE, &[1, 0, 0, 0])), unexpected);
        assert_eq!(alert_of(control(true, content::HANDSHAKE, &[])), unexpected);
        assert_eq!(alert_of(control(true, content::CHANGE_CIPHER_SPEC, &[1])), unexpected);
        assert_eq!(alert_of(control(true, 99, &[1])), unexpected);
    }

    #[test]
    fn in_tls12_a_handshake_message_of_type_24_is_no_key_update() {
        let r = control(false, content::HANDSHAKE, &[24, 0, 0, 1, 0]);
        assert_eq!(r.err().map(|r| r.alert), Some(Some(alert::UNEXPECTED_MESSAGE)));
    }
}
