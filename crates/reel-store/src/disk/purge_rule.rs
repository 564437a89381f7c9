//! A purge rule ([`Rule`]): every key starting with a prefix, written before a point of
//! the log, is gone. Held by the disk, applied by `purge`, kept by the checkpoint and
//! rebuilt by the scan.

/// One purge: keys starting with `prefix` at positions before (`seq`, `off`) are gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Rule {
    pub(super) prefix: Box<[u8]>,
    pub(super) seq: u64,
    pub(super) off: u64,
}

impl Rule {
    pub(super) fn covers(&self, key: &[u8], seq: u64, off: u64) -> bool {
        (seq, off) < (self.seq, self.off) && key.starts_with(&self.prefix)
    }
}
