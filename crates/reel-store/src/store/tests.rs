//! Unit tests of the store internals: replay order of the rebuild.

use std::collections::HashMap;

use bytes::Bytes;

use super::rebuild::{ScannedRecord, apply_record};
use crate::format::Kind;

fn rec(kind: Kind, key: &[u8], off: u64, target: Option<(u64, u64)>) -> ScannedRecord {
    ScannedRecord {
        kind,
        key: key.into(),
        meta: Bytes::from_static(b"m"),
        rec_off: off,
        body_off: off + 4096,
        body_len: 1,
        span: 8192,
        stored_at: 0,
        target,
    }
}

#[test]
fn replay_applies_targeted_records_only_to_their_object() {
    let mut idx = HashMap::new();
    apply_record(&mut idx, 0, 5, &rec(Kind::Object, b"a", 4096, None));
    apply_record(&mut idx, 0, 5, &rec(Kind::Object, b"a", 12288, None));
    // Aimed at the older copy: ignored.
    apply_record(&mut idx, 0, 5, &rec(Kind::Tombstone, b"a", 20480, Some((5, 4096))));
    assert_eq!(idx.len(), 1);
    apply_record(&mut idx, 0, 5, &rec(Kind::Meta, b"a", 24576, Some((5, 12288))));
    apply_record(&mut idx, 0, 5, &rec(Kind::Object, b"ab", 28672, None));
    apply_record(&mut idx, 0, 5, &rec(Kind::PurgePrefix, b"a", 32768, None));
    assert!(idx.is_empty());
}
