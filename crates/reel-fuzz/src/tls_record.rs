//! The TLS record layer reel runs after the handshake (`reel_tls::record`): the header
//! check ([`Opener::record_len`]) and the opener, on raw bytes as a peer sends them, and
//! on records sealed with the session's keys, whole, followed by more bytes, or with one
//! byte changed.
//!
//! Input: a byte choosing the suite (TLS 1.2 or 1.3 × AES-128-GCM, AES-256-GCM,
//! ChaCha20-Poly1305), a byte choosing what to do (bit 0: seal the rest as one record and
//! open it; bits 1..: the content type), two bytes naming a byte to change (position,
//! XOR; XOR 0 changes nothing), then the bytes.

use reel_tls::record::{
    Cipher, DirectionKeys, HEADER, MAX_PLAINTEXT, Opener, RecordError, Sealer, SessionKeys, Version,
};

/// Runs the record layer on `data`.
pub fn run(data: &[u8]) {
    let Some((&[suite, mode, at, xor], bytes)) = data.split_first_chunk::<4>() else { return };
    let keys = keys(suite);
    let Some(mut opener) = Opener::new(&keys) else { return };
    if let Ok(Some(n)) = opener.record_len(bytes) {
        assert!((HEADER..=bytes.len()).contains(&n), "record of {n} bytes in {}", bytes.len());
    }
    if mode & 1 == 0 {
        // Whatever a peer sends: records one after another until one is refused.
        let mut buf = bytes.to_vec();
        let mut from = 0;
        while let Ok(Some(_)) = opener.record_len(&buf[from..]) {
            let Ok(o) = opener.open(&mut buf[from..]) else { break };
            assert!(o.start <= o.end && o.end <= o.consumed && o.consumed <= buf.len() - from);
            from += o.consumed;
        }
        return;
    }
    let Some(mut sealer) = Sealer::new(&keys) else { return };
    let typ = mode >> 1;
    let len = bytes.len().min(MAX_PLAINTEXT);
    let (head, tail) = (sealer.head_room(), sealer.tail_room());
    let mut rec = vec![0u8; head + len + tail];
    rec[head..head + len].copy_from_slice(&bytes[..len]);
    let n = sealer.seal(typ, &mut rec, len).expect("a record within the limit seals");
    assert_eq!(n, rec.len());
    // More bytes after the record (the start of the next one): the opener takes only its own.
    rec.extend_from_slice(&bytes[..len.min(7)]);
    let changed = usize::from(at) % n;
    rec[changed] ^= xor;
    let got = opener.open(&mut rec);
    if xor != 0 {
        // TLS 1.2's additional data names the version 3.3, not the header's bytes: its
        // byte 2 is not authenticated. TLS 1.3's additional data is the header itself.
        let unauthenticated = keys.version == Version::Tls12 && changed == 2;
        assert!(
            got.is_err() || unauthenticated,
            "a record with byte {changed} changed opened: {got:?}"
        );
        return;
    }
    let inner_zero = keys.version == Version::Tls13 && typ == 0;
    match got {
        Ok(o) => {
            assert_eq!(o.consumed, n);
            if !inner_zero {
                assert_eq!(o.typ, typ);
                assert_eq!(&rec[o.start..o.end], &bytes[..len]);
            }
        }
        // A TLS 1.3 record whose inner plaintext is all zeros has no content type: an
        // unexpected_message (RFC 8446 section 5.4).
        Err(RecordError::Unexpected) if inner_zero => {}
        Err(e) => panic!("a sealed record did not open: {e}"),
    }
}

/// The session keys `suite` picks; both directions the same, so what the sealer seals
/// the opener opens.
fn keys(suite: u8) -> SessionKeys {
    let version = if suite & 1 == 0 { Version::Tls12 } else { Version::Tls13 };
    let cipher = match (suite >> 1) % 3 {
        0 => Cipher::Aes128Gcm,
        1 => Cipher::Aes256Gcm,
        _ => Cipher::Chacha20Poly1305,
    };
    let len = if cipher == Cipher::Aes128Gcm { 16 } else { 32 };
    let k =
        DirectionKeys { cipher, key: vec![0x5a; len], iv: [0xa5; 12], seq: u64::from(suite >> 3) };
    SessionKeys { version, tx: k.clone(), rx: k }
}
