//! Decoding the Huffman code of HPACK and QPACK string literals (RFC 7541 section 5.2
//! and appendix B), for the names [`fields`](super::fields) reads. The code is canonical
//! (codes of one length are consecutive, in symbol order, and shorter codes come first),
//! so the code length of each symbol is all the table it needs.

/// The code length of each byte value (RFC 7541 appendix B); EOS (256) has 30 bits.
const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
];

/// The longest code, EOS's.
const MAX_LEN: usize = 30;
const EOS: u16 = 256;

/// The canonical code: how many symbols have each length, and the symbols in code order.
struct Code {
    count: [u16; MAX_LEN + 1],
    symbols: [u16; 257],
}

const CODE: Code = {
    let mut count = [0u16; MAX_LEN + 1];
    let mut i = 0;
    while i < 256 {
        count[LENGTHS[i] as usize] += 1;
        i += 1;
    }
    count[MAX_LEN] += 1;
    let mut symbols = [0u16; 257];
    let mut at = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        let mut s = 0;
        while s < 257 {
            let l = if s == 256 { MAX_LEN } else { LENGTHS[s] as usize };
            if l == len {
                symbols[at] = s as u16;
                at += 1;
            }
            s += 1;
        }
        len += 1;
    }
    Code { count, symbols }
};

/// Decodes the Huffman-coded `src` into `out` as far as `out` holds; the number of bytes
/// written (all of `src` decoded when it is less than `out.len()`). `None` for an invalid
/// code: EOS inside the string, or padding longer than 7 bits or not all ones.
pub(crate) fn decode_prefix(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut n = 0;
    // The code being read: its bits so far, its length, the first code of that length
    // and the index of that code's symbol.
    let (mut code, mut len, mut first, mut index) = (0u32, 0usize, 0u32, 0u32);
    let mut ones = true;
    for &byte in src {
        for shift in (0..8).rev() {
            let bit = u32::from(byte >> shift) & 1;
            code |= bit;
            ones &= bit == 1;
            len += 1;
            let count = u32::from(CODE.count[len]);
            if code - first < count {
                let sym = CODE.symbols[(index + code - first) as usize];
                if sym == EOS || n == out.len() {
                    return (sym != EOS).then_some(n);
                }
                out[n] = sym as u8;
                n += 1;
                (code, len, first, index, ones) = (0, 0, 0, 0, true);
                continue;
            }
            if len == MAX_LEN {
                return None;
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
    }
    // What is left is padding: a prefix of EOS (all ones), shorter than a byte.
    (len < 8 && ones).then_some(n)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Encodes with the canonical codes, for the round trip.
    pub(crate) fn encode(s: &[u8]) -> Vec<u8> {
        let mut codes = [0u32; 257];
        let (mut code, mut prev) = (0u32, 0usize);
        for (i, &sym) in CODE.symbols.iter().enumerate() {
            let len = if sym == EOS { MAX_LEN } else { LENGTHS[sym as usize] as usize };
            if i > 0 {
                code = (code + 1) << (len - prev);
            }
            codes[sym as usize] = code;
            prev = len;
        }
        let (mut out, mut acc, mut bits) = (Vec::new(), 0u64, 0u32);
        for &b in s {
            let len = u32::from(LENGTHS[b as usize]);
            acc = (acc << len) | u64::from(codes[b as usize]);
            bits += len;
            while bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) as u8);
        }
        out
    }

    #[test]
    fn the_canonical_code_is_rfc_7541s() {
        // Codes from RFC 7541 appendix B: '0' 00000, ':' 1011100, 'a' 00011, '%' 010101.
        assert_eq!(encode(b"0"), [0x07]);
        assert_eq!(encode(b":"), [0xb9]);
        assert_eq!(encode(b"a0"), [0x18, 0x3f]);
        // RFC 7541 C.4.1: "www.example.com".
        let www = [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
        assert_eq!(encode(b"www.example.com"), www);
        let mut out = [0u8; 32];
        assert_eq!(decode_prefix(&www, &mut out), Some(15));
        assert_eq!(&out[..15], b"www.example.com");
        // Every byte value survives the round trip.
        let all: Vec<u8> = (0..=255).collect();
        let mut out = [0u8; 256];
        assert_eq!(decode_prefix(&encode(&all), &mut out), Some(256));
        assert_eq!(&out[..], &all[..]);
    }

    #[test]
    fn bad_padding_and_eos_are_refused_and_the_prefix_is_enough() {
        let mut out = [0u8; 16];
        // ':' followed by a 0 padding bit.
        assert_eq!(decode_prefix(&[0xb8], &mut out), None);
        // A whole byte of padding.
        assert_eq!(decode_prefix(&[0xb9, 0xff], &mut out), None);
        // EOS (30 ones) inside the string.
        assert_eq!(decode_prefix(&[0xff, 0xff, 0xff, 0xff], &mut out), None);
        // Only as much as `out` holds.
        let mut two = [0u8; 2];
        assert_eq!(decode_prefix(&encode(b":authority"), &mut two), Some(2));
        assert_eq!(&two, b":a");
    }

    proptest::proptest! {
        /// Any string survives the round trip; any bytes are decoded or refused, never a
        /// panic, and never more than `out` holds.
        #[test]
        fn round_trips_and_never_panics(
            s in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
        ) {
            let mut out = [0u8; 64];
            proptest::prop_assert_eq!(decode_prefix(&encode(&s), &mut out), Some(s.len()));
            proptest::prop_assert_eq!(&out[..s.len()], &s[..]);
            let mut small = [0u8; 11];
            if let Some(n) = decode_prefix(&junk, &mut small) {
                proptest::prop_assert!(n <= small.len());
            }
        }
    }
}
