//! The miss quota ([`MissQuota`]): how many requests of one client connection may wait on the
//! origin at once (`[cache] max_misses_per_connection`): misses it leads and requests it passes
//! through. An HTTP/2 connection carries up to 128 streams, each of which could otherwise hold an
//! origin connection (a slow path, or distinct LL-HLS blocking reloads); beyond the bound a request
//! waits its turn for at most `lock_timeout`, then gets 503. Requests that join another's fetch,
//! and hits, are never counted.
//!
//! A connection is served by one worker, so the count is per worker, keyed by the peer's
//! address and port; an entry lives while a request of that connection holds a place.

use std::net::SocketAddr;
use std::time::Duration;

use reel_http::Shares;
use tokio::sync::OwnedSemaphorePermit;

/// The places of this worker's client connections.
#[derive(Default)]
pub(in crate::path) struct MissQuota {
    conns: Shares<SocketAddr>,
}

impl MissQuota {
    /// A place for a request of the connection from `peer`, which may hold `limit` at
    /// once, waiting at most `wait`; `None` when none came free in time.
    pub(in crate::path) async fn take(
        &self,
        peer: SocketAddr,
        limit: usize,
        wait: Duration,
    ) -> Option<OwnedSemaphorePermit> {
        let places = self.conns.get(peer, limit);
        tokio::time::timeout(wait, places.acquire_owned()).await.ok()?.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_holds_at_most_its_places_and_others_are_apart() {
        let m = MissQuota::default();
        let (a, b): (SocketAddr, SocketAddr) =
            ("127.0.0.1:1000".parse().unwrap(), "127.0.0.1:1001".parse().unwrap());
        let wait = Duration::from_millis(20);
        let p1 = m.take(a, 2, wait).await.expect("first");
        let _p2 = m.take(a, 2, wait).await.expect("second");
        assert!(m.take(a, 2, wait).await.is_none(), "a third waits, then gives up");
        assert!(m.take(b, 2, wait).await.is_some(), "another connection has its own");
        drop(p1);
        assert!(m.take(a, 2, wait).await.is_some(), "a freed place is taken");
    }
}
