//! The TLS record layer after the handshake, in reel: sealing records in place in the
//! caller's buffer and opening received records in place, with the traffic secrets and
//! sequence numbers rustls hands over (`dangerous_extract_secrets`).
//!
//! Why reel seals its own records: rustls copies every plaintext record into a fresh
//! buffer before sealing it, and for a file body that is a second copy of every byte
//! (page cache → pooled buffer → record buffer). Here the body is read from the page cache
//! once, at [`Sealer::head_room`] into a pooled buffer, sealed where it lies and written.
//! The kernel's record layer (kTLS, `ktls`) needs the same secrets; this is the path when
//! the kernel cannot take them.
//!
//! Covered: TLS 1.3 and TLS 1.2 with AES-128-GCM, AES-256-GCM and ChaCha20-Poly1305 (the
//! suites reel's provider offers). Nonces follow RFC 8446 section 5.3 (TLS 1.3, and TLS 1.2
//! ChaCha20-Poly1305 per RFC 7905) and RFC 5288 (TLS 1.2 GCM: a 4-byte salt and an 8-byte
//! explicit nonce sent in the record, here the sequence number XOR the key block's IV, as
//! rustls does). A sequence number never wraps: at 2^64 - 1 records the connection fails.

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use rustls::ConnectionTrafficSecrets;

/// Content types (RFC 8446 section 5.1).
pub mod content {
    /// `change_cipher_spec`.
    pub const CHANGE_CIPHER_SPEC: u8 = 20;
    /// `alert`.
    pub const ALERT: u8 = 21;
    /// `handshake`.
    pub const HANDSHAKE: u8 = 22;
    /// `application_data`.
    pub const APPLICATION_DATA: u8 = 23;
}

/// Largest plaintext of one record (RFC 8446 section 5.1).
pub const MAX_PLAINTEXT: usize = 1 << 14;
/// Record header length.
pub const HEADER: usize = 5;
/// Largest ciphertext a peer may send in one record (RFC 8446 section 5.2: plaintext plus
/// 256 bytes of expansion), header not included.
pub const MAX_CIPHERTEXT: usize = MAX_PLAINTEXT + 256;
const TAG: usize = 16;
const EXPLICIT: usize = 8;

/// Protocol version of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// TLS 1.2.
    Tls12,
    /// TLS 1.3.
    Tls13,
}

/// The AEAD of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// AES-128-GCM.
    Aes128Gcm,
    /// AES-256-GCM.
    Aes256Gcm,
    /// ChaCha20-Poly1305.
    Chacha20Poly1305,
}

impl Cipher {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes128gcm",
            Cipher::Aes256Gcm => "aes256gcm",
            Cipher::Chacha20Poly1305 => "chacha20poly1305",
        }
    }
}

/// Why a received record was refused, or a record could not be sealed; the connection
/// ends (no record is ever skipped), with the alert [`RecordError::alert`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The record did not authenticate (tampered, or keys out of step).
    #[error("TLS record failed to authenticate")]
    BadRecord,
    /// Header not TLS, or a record too short for its cipher.
    #[error("malformed TLS record")]
    Malformed,
    /// A record longer than the version allows: TLS 1.3 ciphertext over 2^14 + 256 bytes,
    /// or plaintext over 2^14 bytes.
    #[error("TLS record too long")]
    Overflow,
    /// A record the protocol does not allow here: TLS 1.3 outer type other than
    /// application data, an inner plaintext of padding only, too many empty records.
    #[error("unexpected TLS record")]
    Unexpected,
    /// 2^64 records in one direction.
    #[error("TLS sequence number exhausted")]
    SequenceExhausted,
    /// The keys sealed as many records as their cipher's confidentiality limit allows
    /// (RFC 8446 section 5.5); only alerts are sealed after it.
    #[error("TLS keys reached their confidentiality limit")]
    KeysExhausted,
}

/// Alert descriptions (RFC 8446 section 6).
pub mod alert {
    /// `close_notify`.
    pub const CLOSE_NOTIFY: u8 = 0;
    /// `unexpected_message`.
    pub const UNEXPECTED_MESSAGE: u8 = 10;
    /// `bad_record_mac`.
    pub const BAD_RECORD_MAC: u8 = 20;
    /// `record_overflow`.
    pub const RECORD_OVERFLOW: u8 = 22;
    /// `illegal_parameter`.
    pub const ILLEGAL_PARAMETER: u8 = 47;
    /// `decode_error`.
    pub const DECODE_ERROR: u8 = 50;
    /// `internal_error`.
    pub const INTERNAL_ERROR: u8 = 80;
}

impl RecordError {
    /// The alert a connection refused for this error ends with.
    pub fn alert(self) -> u8 {
        match self {
            RecordError::BadRecord => alert::BAD_RECORD_MAC,
            RecordError::Malformed => alert::DECODE_ERROR,
            RecordError::Overflow => alert::RECORD_OVERFLOW,
            RecordError::Unexpected => alert::UNEXPECTED_MESSAGE,
            RecordError::SequenceExhausted => alert::INTERNAL_ERROR,
            RecordError::KeysExhausted => alert::CLOSE_NOTIFY,
        }
    }
}

/// Records one set of AES-GCM keys may seal: rustls' `confidentiality_limit` for these
/// suites (RFC 8446 section 5.5 allows 2^24.5 full-size records per key).
pub const AES_GCM_LIMIT: u64 = 1 << 24;

/// One direction's keys, as extracted from rustls: what the kernel needs too.
#[derive(Clone)]
pub struct DirectionKeys {
    /// The AEAD.
    pub cipher: Cipher,
    /// The key (16 or 32 bytes).
    pub key: Vec<u8>,
    /// The 12-byte IV (TLS 1.2 GCM: 4-byte salt and the key block's 8 bytes).
    pub iv: [u8; 12],
    /// The sequence number of the next record.
    pub seq: u64,
}

impl std::fmt::Debug for DirectionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectionKeys")
            .field("cipher", &self.cipher)
            .field("seq", &self.seq)
            .finish()
    }
}

impl DirectionKeys {
    /// Converts rustls' secrets for one direction.
    pub fn from_rustls(seq: u64, s: &ConnectionTrafficSecrets) -> Option<DirectionKeys> {
        let (cipher, key, iv) = match s {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (Cipher::Chacha20Poly1305, key, iv)
            }
            _ => return None,
        };
        let iv: [u8; 12] = iv.as_ref().try_into().ok()?;
        Some(DirectionKeys { cipher, key: key.as_ref().to_vec(), iv, seq })
    }
}

/// Both directions of a session after its handshake.
#[derive(Debug, Clone)]
pub struct SessionKeys {
    /// Protocol version.
    pub version: Version,
    /// What the server sends.
    pub tx: DirectionKeys,
    /// What the server receives.
    pub rx: DirectionKeys,
}

struct Aead {
    key: LessSafeKey,
    /// Application-data records these keys may seal (see [`AES_GCM_LIMIT`]).
    limit: u64,
    iv: [u8; 12],
    seq: u64,
    version: Version,
    /// TLS 1.2 GCM sends an explicit nonce in each record.
    explicit: bool,
}

impl Aead {
    fn new(version: Version, k: &DirectionKeys) -> Option<Aead> {
        let alg = match k.cipher {
            Cipher::Aes128Gcm => &aead::AES_128_GCM,
            Cipher::Aes256Gcm => &aead::AES_256_GCM,
            Cipher::Chacha20Poly1305 => &aead::CHACHA20_POLY1305,
        };
        let key = LessSafeKey::new(UnboundKey::new(alg, &k.key).ok()?);
        let explicit = version == Version::Tls12 && k.cipher != Cipher::Chacha20Poly1305;
        let limit = match k.cipher {
            Cipher::Aes128Gcm | Cipher::Aes256Gcm => AES_GCM_LIMIT,
            Cipher::Chacha20Poly1305 => u64::MAX,
        };
        Some(Aead { key, limit, iv: k.iv, seq: k.seq, version, explicit })
    }

    /// The IV XOR the sequence number (RFC 8446 section 5.3).
    fn nonce_bytes(&self) -> [u8; 12] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }

    fn next_seq(&mut self) -> Result<(), RecordError> {
        self.seq = self.seq.checked_add(1).ok_or(RecordError::SequenceExhausted)?;
        Ok(())
    }

    /// TLS 1.2's additional data: seq, type, version, plaintext length (RFC 5246 6.2.3.3).
    fn aad12(&self, typ: u8, len: usize) -> [u8; 13] {
        let mut a = [0u8; 13];
        a[..8].copy_from_slice(&self.seq.to_be_bytes());
        a[8] = typ;
        a[9..11].copy_from_slice(&[3, 3]);
        a[11..].copy_from_slice(&(len as u16).to_be_bytes());
        a
    }
}

/// Seals outgoing records in place.
pub struct Sealer(Aead);

impl Sealer {
    /// The sealer for `keys.tx`; `None` for a cipher ring does not have.
    pub fn new(keys: &SessionKeys) -> Option<Sealer> {
        Aead::new(keys.version, &keys.tx).map(Sealer)
    }

    /// Bytes a record needs before its payload: the header, and TLS 1.2 GCM's explicit nonce.
    pub fn head_room(&self) -> usize {
        HEADER + if self.0.explicit { EXPLICIT } else { 0 }
    }

    /// Bytes a record needs after its payload: the tag, and TLS 1.3's inner content type.
    pub fn tail_room(&self) -> usize {
        TAG + usize::from(self.0.version == Version::Tls13)
    }

    /// Seals one record of type `typ` whose `len`-byte payload lies at
    /// `rec[head_room()..]`; writes the header, nonce and tag around it and returns the
    /// record's length. `rec` must hold `head_room() + len + tail_room()` bytes and
    /// `len` must be at most [`MAX_PLAINTEXT`]. Once the keys reached their
    /// confidentiality limit only alerts are sealed ([`RecordError::KeysExhausted`]).
    pub fn seal(&mut self, typ: u8, rec: &mut [u8], len: usize) -> Result<usize, RecordError> {
        let head = self.head_room();
        let total = head + len + self.tail_room();
        if len > MAX_PLAINTEXT || rec.len() < total {
            return Err(RecordError::Malformed);
        }
        if typ == content::APPLICATION_DATA && self.exhausted() {
            return Err(RecordError::KeysExhausted);
        }
        let a = &mut self.0;
        let nonce = a.nonce_bytes();
        let mut end = head + len;
        let (outer, tag) = match a.version {
            Version::Tls13 => {
                rec[end] = typ;
                end += 1;
                let clen = (end - HEADER + TAG) as u16;
                let hdr = [content::APPLICATION_DATA, 3, 3, (clen >> 8) as u8, clen as u8];
                rec[..HEADER].copy_from_slice(&hdr);
                let tag = a
                    .key
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(hdr),
                        &mut rec[head..end],
                    )
                    .map_err(|_| RecordError::Malformed)?;
                (content::APPLICATION_DATA, tag)
            }
            Version::Tls12 => {
                let aad = a.aad12(typ, len);
                if a.explicit {
                    rec[HEADER..head].copy_from_slice(&nonce[4..]);
                }
                let tag = a
                    .key
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(aad),
                        &mut rec[head..end],
                    )
                    .map_err(|_| RecordError::Malformed)?;
                (typ, tag)
            }
        };
        rec[end..end + TAG].copy_from_slice(tag.as_ref());
        end += TAG;
        let clen = (end - HEADER) as u16;
        rec[..HEADER].copy_from_slice(&[outer, 3, 3, (clen >> 8) as u8, clen as u8]);
        a.next_seq()?;
        Ok(end)
    }

    /// The sequence number of the next record.
    pub fn seq(&self) -> u64 {
        self.0.seq
    }

    /// Whether the keys sealed as many records as their cipher allows.
    pub fn exhausted(&self) -> bool {
        self.0.seq >= self.0.limit
    }

    /// Whether the keys should be updated: seven eighths of their limit are used (the rest
    /// leaves room for what is sealed before the update can be sent).
    pub fn update_due(&self) -> bool {
        self.0.seq >= self.0.limit - self.0.limit / 8
    }

    /// Seals with `keys` from now on (after a key update); the limit stays.
    pub fn rekey(&mut self, keys: &DirectionKeys) -> Option<()> {
        let limit = self.0.limit;
        self.0 = Aead::new(self.0.version, keys)?;
        self.0.limit = self.0.limit.min(limit);
        Some(())
    }

    /// Lowers the confidentiality limit to `records` (tests reach it without 2^24 records).
    #[cfg(feature = "testing")]
    pub fn set_limit(&mut self, records: u64) {
        self.0.limit = records;
    }
}

/// Opens received records in place.
pub struct Opener(Aead);

/// A record opened in place: its content type and where its plaintext lies in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// The (inner, for TLS 1.3) content type.
    pub typ: u8,
    /// Plaintext start in the buffer given to [`Opener::open`].
    pub start: usize,
    /// Plaintext end.
    pub end: usize,
    /// Bytes of the buffer the record took (header included).
    pub consumed: usize,
}

impl Opener {
    /// The opener for `keys.rx`; `None` for a cipher ring does not have.
    pub fn new(keys: &SessionKeys) -> Option<Opener> {
        Aead::new(keys.version, &keys.rx).map(Opener)
    }

    /// Opens with `keys` from now on (after the peer's key update).
    pub fn rekey(&mut self, keys: &DirectionKeys) -> Option<()> {
        self.0 = Aead::new(self.0.version, keys)?;
        Some(())
    }

    /// The whole record's length if `buf` starts with a complete record, `Ok(None)` if
    /// more bytes are needed; refuses a header that is not a TLS record, and a length over
    /// the version's limit (TLS 1.3: 2^14 + 256 exactly, RFC 8446 section 5.2; TLS 1.2:
    /// that and an explicit nonce) as soon as the header is there.
    pub fn record_len(&self, buf: &[u8]) -> Result<Option<usize>, RecordError> {
        if buf.len() < HEADER {
            return Ok(None);
        }
        let len = usize::from(u16::from_be_bytes([buf[3], buf[4]]));
        let max = match self.0.version {
            Version::Tls13 => MAX_CIPHERTEXT,
            Version::Tls12 => MAX_CIPHERTEXT + EXPLICIT,
        };
        if buf[1] != 3 || len < TAG {
            return Err(RecordError::Malformed);
        }
        if len > max {
            return Err(RecordError::Overflow);
        }
        Ok((buf.len() >= HEADER + len).then_some(HEADER + len))
    }

    /// Opens the complete record at the start of `buf` (see [`Opener::record_len`]).
    pub fn open(&mut self, buf: &mut [u8]) -> Result<Opened, RecordError> {
        let total = self.record_len(buf)?.ok_or(RecordError::Malformed)?;
        let a = &mut self.0;
        let outer = buf[0];
        let hdr: [u8; HEADER] = buf[..HEADER].try_into().map_err(|_| RecordError::Malformed)?;
        let opened = match a.version {
            Version::Tls13 => {
                if outer != content::APPLICATION_DATA {
                    return Err(RecordError::Unexpected);
                }
                let plain = a
                    .key
                    .open_in_place(
                        Nonce::assume_unique_for_key(a.nonce_bytes()),
                        Aad::from(hdr),
                        &mut buf[HEADER..total],
                    )
                    .map_err(|_| RecordError::BadRecord)?;
                // Padding counts toward the limit: the whole TLSInnerPlaintext is at most
                // 2^14 + 1 bytes (RFC 8446 section 5.4).
                if plain.len() > MAX_PLAINTEXT + 1 {
                    return Err(RecordError::Overflow);
                }
                // Strip the zero padding; the last non-zero byte is the inner type.
                let Some(at) = plain.iter().rposition(|b| *b != 0) else {
                    return Err(RecordError::Unexpected);
                };
                if at > MAX_PLAINTEXT {
                    return Err(RecordError::Overflow);
                }
                Opened { typ: plain[at], start: HEADER, end: HEADER + at, consumed: total }
            }
            Version::Tls12 => {
                let mut nonce = a.iv;
                let mut start = HEADER;
                if a.explicit {
                    if total < HEADER + EXPLICIT + TAG {
                        return Err(RecordError::Malformed);
                    }
                    nonce[4..].copy_from_slice(&buf[HEADER..HEADER + EXPLICIT]);
                    start += EXPLICIT;
                } else {
                    nonce = a.nonce_bytes();
                }
                let len = total - start - TAG;
                if len > MAX_PLAINTEXT {
                    return Err(RecordError::Overflow);
                }
                let aad = a.aad12(outer, len);
                a.key
                    .open_in_place(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(aad),
                        &mut buf[start..total],
                    )
                    .map_err(|_| RecordError::BadRecord)?;
                Opened { typ: outer, start, end: start + len, consumed: total }
            }
        };
        a.next_seq()?;
        Ok(opened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(version: Version, cipher: Cipher) -> SessionKeys {
        let k = |b: u8| DirectionKeys {
            cipher,
            key: vec![b; if cipher == Cipher::Aes128Gcm { 16 } else { 32 }],
            iv: [b.wrapping_add(1); 12],
            seq: 7,
        };
        // The peer's rx is our tx: one set of keys for both ends of a loop.
        SessionKeys { version, tx: k(1), rx: k(1) }
    }

    #[test]
    fn sealed_records_open_with_the_same_keys_for_every_suite() {
        for version in [Version::Tls12, Version::Tls13] {
            for cipher in [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20Poly1305] {
                let k = keys(version, cipher);
                let mut s = Sealer::new(&k).unwrap();
                let mut o = Opener::new(&k).unwrap();
                for len in [0usize, 1, 100, MAX_PLAINTEXT] {
                    let mut rec = vec![0u8; s.head_room() + len + s.tail_room()];
                    let body: Vec<u8> = (0..len).map(|i| i as u8).collect();
                    let h = s.head_room();
                    rec[h..h + len].copy_from_slice(&body);
                    let n = s.seal(content::APPLICATION_DATA, &mut rec, len).unwrap();
                    assert_eq!(n, rec.len());
                    assert_eq!(o.record_len(&rec[..n - 1]), Ok(None));
                    let got = o.open(&mut rec).unwrap();
                    assert_eq!(got.typ, content::APPLICATION_DATA, "{version:?} {cipher:?}");
                    assert_eq!(&rec[got.start..got.end], &body[..]);
                    assert_eq!(got.consumed, n);
                }
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    /// RFC 8448 section 3 (simple 1-RTT handshake): the application traffic keys and the
    /// application-data records both sides send, payload `00 01 .. 31`. A mistake shared
    /// by sealer and opener (nonce, additional data, inner type) cannot pass these.
    #[test]
    fn rfc8448_application_data_records_seal_and_open_to_the_published_bytes() {
        let payload: Vec<u8> = (0u8..=0x31).collect();
        let dir = |key: &str, iv: &str, seq| DirectionKeys {
            cipher: Cipher::Aes128Gcm,
            key: hex(key),
            iv: hex(iv).try_into().unwrap(),
            seq,
        };
        // The server's first application record has sequence number 1 (its
        // NewSessionTicket was 0); the client's has 0.
        let server = dir(
            "9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac 92 e3 56",
            "cf 78 2b 88 dd 83 54 9a ad f1 e9 84",
            1,
        );
        let client = dir(
            "17 42 2d da 59 6e d5 d9 ac d8 90 e3 c6 3f 50 51",
            "5b 78 92 3d ee 08 57 90 33 e5 23 d9",
            0,
        );
        let server_record =
            hex("17 03 03 00 43 2e 93 7e 11 ef 4a c7 40 e5 38 ad 36 00 5f c4 a4 69 32 fc
             32 25 d0 5f 82 aa 1b 36 e3 0e fa f9 7d 90 e6 df fc 60 2d cb 50 1a 59 a8
             fc c4 9c 4b f2 e5 f0 a2 1c 00 47 c2 ab f3 32 54 0d d0 32 e1 67 c2 95 5d");
        let client_record =
            hex("17 03 03 00 43 a2 3f 70 54 b6 2c 94 d0 af fa fe 82 28 ba 55 cb ef ac ea
             42 f9 14 aa 66 bc ab 3f 2b 98 19 a8 a5 b4 6b 39 5b d5 4a 9a 20 44 1e 2b
             62 97 4e 1f 5a 62 92 a2 97 70 14 bd 1e 3d ea e6 3a ee bb 21 69 49 15 e4");
        let ours = SessionKeys { version: Version::Tls13, tx: server, rx: client };
        let mut s = Sealer::new(&ours).unwrap();
        let mut rec = vec![0u8; s.head_room() + payload.len() + s.tail_room()];
        rec[s.head_room()..s.head_room() + payload.len()].copy_from_slice(&payload);
        let n = s.seal(content::APPLICATION_DATA, &mut rec, payload.len()).unwrap();
        assert_eq!(rec[..n], server_record[..], "sealed server record");
        let mut o = Opener::new(&ours).unwrap();
        let mut rec = client_record.clone();
        let got = o.open(&mut rec).unwrap();
        assert_eq!((got.typ, got.consumed), (content::APPLICATION_DATA, client_record.len()));
        assert_eq!(rec[got.start..got.end], payload[..], "opened client record");
    }

    #[test]
    fn a_flipped_byte_or_a_replayed_record_is_refused() {
        let k = keys(Version::Tls13, Cipher::Aes128Gcm);
        let mut s = Sealer::new(&k).unwrap();
        let mut o = Opener::new(&k).unwrap();
        let mut rec = vec![0u8; s.head_room() + 10 + s.tail_room()];
        let n = s.seal(content::APPLICATION_DATA, &mut rec, 10).unwrap();
        let mut bad = rec.clone();
        bad[HEADER + 3] ^= 1;
        assert_eq!(o.open(&mut bad), Err(RecordError::BadRecord));
        // The refused record did not use up a sequence number: the original opens, once.
        assert!(o.open(&mut rec.clone()[..n]).is_ok());
        assert_eq!(o.open(&mut rec), Err(RecordError::BadRecord));
    }

    #[test]
    fn headers_that_are_not_tls_are_refused_before_any_decryption() {
        let o = Opener::new(&keys(Version::Tls13, Cipher::Aes128Gcm)).unwrap();
        assert_eq!(o.record_len(b"GET / HTTP/1.1"), Err(RecordError::Malformed));
        assert_eq!(o.record_len(&[23, 3, 3, 0xff, 0xff]), Err(RecordError::Overflow));
        assert_eq!(o.record_len(&[23, 3, 3, 0, 15]), Err(RecordError::Malformed));
        assert_eq!(o.record_len(&[23, 3, 3]), Ok(None));
    }

    #[test]
    fn tls13_ciphertext_is_limited_to_2_14_plus_256_exactly_tls12_may_add_its_nonce() {
        let len = |n: usize| [23, 3, 3, (n >> 8) as u8, n as u8];
        let o13 = Opener::new(&keys(Version::Tls13, Cipher::Aes128Gcm)).unwrap();
        assert_eq!(o13.record_len(&len(16_640)), Ok(None));
        assert_eq!(o13.record_len(&len(16_641)), Err(RecordError::Overflow));
        assert_eq!(o13.record_len(&len(16_648)), Err(RecordError::Overflow));
        let o12 = Opener::new(&keys(Version::Tls12, Cipher::Aes128Gcm)).unwrap();
        assert_eq!(o12.record_len(&len(16_648)), Ok(None));
        assert_eq!(o12.record_len(&len(16_649)), Err(RecordError::Overflow));
    }

    #[test]
    fn a_record_of_padding_only_or_with_a_wrong_outer_type_is_unexpected() {
        let k = keys(Version::Tls13, Cipher::Chacha20Poly1305);
        let mut s = Sealer::new(&k).unwrap();
        let mut o = Opener::new(&k).unwrap();
        // Inner type 0 and no content: nothing but padding.
        let mut rec = vec![0u8; s.head_room() + s.tail_room()];
        let n = s.seal(0, &mut rec, 0).unwrap();
        assert_eq!(o.open(&mut rec[..n]), Err(RecordError::Unexpected));
        let mut rec = vec![0u8; s.head_room() + 4 + s.tail_room()];
        let n = s.seal(content::APPLICATION_DATA, &mut rec, 4).unwrap();
        rec[0] = content::HANDSHAKE;
        assert_eq!(o.open(&mut rec[..n]), Err(RecordError::Unexpected));
    }

    #[test]
    fn at_the_confidentiality_limit_only_alerts_are_sealed() {
        let mut s = Sealer::new(&keys(Version::Tls13, Cipher::Aes128Gcm)).unwrap();
        s.0.limit = 8;
        let mut rec = vec![0u8; s.head_room() + 2 + s.tail_room()];
        assert!(!s.exhausted());
        s.seal(content::APPLICATION_DATA, &mut rec, 2).unwrap();
        assert!(s.exhausted());
        assert_eq!(s.seal(content::APPLICATION_DATA, &mut rec, 2), Err(RecordError::KeysExhausted));
        assert!(s.seal(content::ALERT, &mut rec, 2).is_ok());
        let chacha = Sealer::new(&keys(Version::Tls13, Cipher::Chacha20Poly1305)).unwrap();
        assert_eq!(chacha.0.limit, u64::MAX);
    }

    #[test]
    fn a_sealer_refuses_a_buffer_too_short_and_a_payload_over_the_limit() {
        let k = keys(Version::Tls12, Cipher::Aes256Gcm);
        let mut s = Sealer::new(&k).unwrap();
        let mut rec = vec![0u8; 20];
        assert_eq!(s.seal(23, &mut rec, 10), Err(RecordError::Malformed));
        let mut big = vec![0u8; MAX_PLAINTEXT + 64];
        assert_eq!(s.seal(23, &mut big, MAX_PLAINTEXT + 1), Err(RecordError::Malformed));
        assert_eq!(s.seq(), 7);
    }

    mod fuzz {
        //! Property tests of the opener against what a peer may send: any bytes, and any
        //! change to a sealed record.

        use super::*;
        use proptest::prelude::*;

        const CASES: u32 = 4096;

        fn suite(i: usize) -> (Version, Cipher) {
            let c = [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Chacha20Poly1305][i % 3];
            (if i < 3 { Version::Tls13 } else { Version::Tls12 }, c)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(CASES))]

            /// Whatever arrives, the opener answers with a length, "more", a record or an
            /// error: never a panic, and never a record longer than the limit.
            #[test]
            fn any_bytes_are_refused_or_opened_never_a_panic(
                s in 0usize..6,
                mut bytes in proptest::collection::vec(any::<u8>(), 0..600),
                typ in prop_oneof![Just(23u8), Just(21u8), Just(22u8), any::<u8>()],
            ) {
                let (version, cipher) = suite(s);
                let mut o = Opener::new(&keys(version, cipher)).unwrap();
                if bytes.len() >= HEADER {
                    // Mostly headers that pass the first checks, so the AEAD runs.
                    let len = (bytes.len() - HEADER) as u16;
                    bytes[..HEADER].copy_from_slice(&[typ, 3, 3, (len >> 8) as u8, len as u8]);
                }
                if let Ok(Some(_)) = o.record_len(&bytes)
                    && let Ok(r) = o.open(&mut bytes)
                {
                    prop_assert!(r.end - r.start <= MAX_PLAINTEXT);
                }
            }

            /// A sealed record with any byte changed, or cut short, never opens to other
            /// plaintext: it is refused, or (a TLS 1.2 header byte outside the additional
            /// data) opens to the very bytes that were sealed.
            #[test]
            fn a_changed_record_never_opens_to_other_bytes(
                s in 0usize..6,
                len in 0usize..3000,
                at in any::<prop::sample::Index>(),
                xor in 1u8..=255,
                cut in any::<prop::sample::Index>(),
            ) {
                let (version, cipher) = suite(s);
                let k = keys(version, cipher);
                let mut sealer = Sealer::new(&k).unwrap();
                let body: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
                let h = sealer.head_room();
                let mut rec = vec![0u8; h + len + sealer.tail_room()];
                rec[h..h + len].copy_from_slice(&body);
                let n = sealer.seal(content::APPLICATION_DATA, &mut rec, len).unwrap();
                rec.truncate(n);
                let mut changed = rec.clone();
                changed[at.index(n)] ^= xor;
                let mut o = Opener::new(&k).unwrap();
                if let Ok(r) = o.open(&mut changed) {
                    prop_assert_eq!(r.typ, content::APPLICATION_DATA);
                    prop_assert_eq!(&changed[r.start..r.end], &body[..]);
                }
                let mut short = rec[..cut.index(n)].to_vec();
                let mut o = Opener::new(&k).unwrap();
                prop_assert!(o.open(&mut short).is_err());
                let mut o = Opener::new(&k).unwrap();
                let r = o.open(&mut rec).unwrap();
                prop_assert_eq!(&rec[r.start..r.end], &body[..]);
            }
        }
    }
}
