//! Server connection IDs that name their worker.
//!
//! Every ID this server issues is [`CID_LEN`] bytes: the worker's index, then random
//! bytes. The reuseport program reads that first byte from a short-header packet (and
//! from a Handshake packet's destination ID) and picks the worker's socket, so a
//! connection stays on its worker when the client's address or port changes (NAT
//! rebinding, a move from Wi-Fi to cellular). The worker byte is visible to an observer,
//! as it is in nginx's `quic_bpf` and in QUIC-LB's plaintext server IDs; the random rest
//! keeps the IDs of one connection unlinkable to each other beyond the worker.

use std::time::Duration;

use quinn::{ConnectionId, ConnectionIdGenerator};
use rand::RngCore;

/// Length of every connection ID the server issues; the reuseport program relies on it.
pub const CID_LEN: usize = 8;

/// Issues a worker's connection IDs.
#[derive(Debug, Clone)]
pub struct WorkerCids {
    worker: u8,
}

impl WorkerCids {
    /// The generator of worker `worker` (its index in the reuseport group).
    pub fn new(worker: u8) -> WorkerCids {
        WorkerCids { worker }
    }

    /// The worker a connection ID names, if it is one of ours by length.
    pub fn worker_of(cid: &[u8]) -> Option<u8> {
        (cid.len() == CID_LEN).then(|| cid[0])
    }
}

impl ConnectionIdGenerator for WorkerCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut id = [0u8; CID_LEN];
        id[0] = self.worker;
        rand::rng().fill_bytes(&mut id[1..]);
        ConnectionId::new(&id)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_worker_and_differ() {
        let mut g = WorkerCids::new(7);
        let a = g.generate_cid();
        let b = g.generate_cid();
        assert_eq!(a.len(), CID_LEN);
        assert_eq!(WorkerCids::worker_of(&a), Some(7));
        assert_eq!(WorkerCids::worker_of(&b), Some(7));
        assert_ne!(&a[..], &b[..]);
        assert_eq!(WorkerCids::worker_of(&[1, 2, 3]), None);
    }
}
