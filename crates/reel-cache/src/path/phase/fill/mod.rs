//! Writing into the store, all of it: an origin response under its key or variant key
//! with its stored metadata, the detached task that appends the body and commits it (or
//! aborts it, so nothing is ever stored truncated); the key's Vary marker, which lists the
//! variant ([`vary`]); and a 206 stored as a slice or piece with the head or index that
//! describes it ([`part`]).

use bytes::Bytes;
use http::HeaderMap;
use reel_origin::OriginResponse;
use reel_store::{Lookup, StoreError};

use super::inflight::{Lead, State};
use crate::key::CacheKey;
use crate::path::worker::settings::Settings;
use crate::path::worker::shared::SharedCache;
use crate::policy::HeaderLookup;
use crate::policy::cache_control::ResponseCacheControl;
use crate::policy::freshness::PolicyConfig;
use crate::policy::meta::{ResponseTimes, StoredMeta};
use crate::policy::rules::TtlRule;
use crate::policy::vary::{Vary, VaryKey};

pub(in crate::path) mod part;
mod vary;

pub(in crate::path) use part::{Part, RangePart, SlicePart, read_index};

/// A response's header fields as name/value pairs, for the policy functions.
pub(in crate::path) fn header_pairs(h: &HeaderMap) -> Vec<(Vec<u8>, Vec<u8>)> {
    h.iter().map(|(n, v)| (n.as_str().as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

/// What writing into the store uses, borrowed.
#[derive(Clone, Copy)]
pub(in crate::path) struct Filler<'a> {
    /// The store, the in-flight map (a marker's or index's writes) and counters.
    pub shared: &'a SharedCache,
    /// Defaults (`swr_default`, `max_variants`).
    pub settings: &'a Settings,
    /// The site's freshness and storability knobs.
    pub policy: &'a PolicyConfig,
}

impl Filler<'_> {
    /// Starts writing a response into the store: under its variant key (after the key's
    /// Vary marker) when it varies, with its metadata. Returns the writer and a reader.
    /// Without `keep` (refused by admission) the body is delivered to its readers and not
    /// stored ([`reel_store::Store::begin_unstored_fill`]).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::path) async fn begin_fill<H: HeaderLookup + ?Sized>(
        &self,
        key: &CacheKey,
        vary: &Vary,
        hdrs: &H,
        resp: &OriginResponse,
        times: ResponseTimes,
        rule: Option<&TtlRule>,
        keep: bool,
    ) -> Result<(reel_store::FillWriter, reel_store::Filling), StoreError> {
        let store = &self.shared.store;
        let vk = VaryKey::from_request(vary, hdrs);
        let store_key = match vary {
            Vary::Fields(names) => self.list_variant(key, names, vk.hash64()).await?,
            _ => {
                // A response that no longer varies replaces the key's marker: the
                // variants it lists go with it.
                if let Some(old) = self.current_marker(key).await {
                    self.remove_variants(key, &old, &old.variants).await;
                }
                key.as_bytes().to_vec()
            }
        };
        let len = resp.body.content_length();
        let meta = self.meta_for(resp.status.as_u16(), &resp.headers, &[], vk, times, len, rule);
        let writer = if keep {
            store.begin_fill(&store_key, meta.encode().into(), len).await?
        } else {
            store.begin_unstored_fill(&store_key, meta.encode().into(), len).await?
        };
        match store.lookup(&store_key).await {
            Some(Lookup::Filling(f)) => Ok((writer, f)),
            _ => Err(StoreError::Gone),
        }
    }

    /// The stored metadata of a response with `status` and `headers` (less the fields
    /// `skip` names, lowercase), `len` body bytes and the secondary key `vk`.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::path) fn meta_for(
        &self,
        status: u16,
        headers: &HeaderMap,
        skip: &[&str],
        vk: VaryKey,
        times: ResponseTimes,
        len: Option<u64>,
        rule: Option<&TtlRule>,
    ) -> StoredMeta {
        let mut h = header_pairs(headers);
        h.retain(|(n, _)| !skip.iter().any(|s| s.as_bytes() == &n[..]));
        let swr = self.settings.swr_default.as_secs();
        let cc = ResponseCacheControl::for_cache(headers, &self.policy.targeted);
        if swr > 0 && cc.stale_while_revalidate.is_none() {
            // The configured default window, stored as a field so it survives restarts and
            // reaches the clients like the origin's own would.
            h.push((
                b"cache-control".to_vec(),
                format!("stale-while-revalidate={swr}").into_bytes(),
            ));
        }
        StoredMeta::from_response(status, &h, vk, times, len, self.policy, rule)
    }
}

/// Writes the origin body into the store, `first` (what was read of it already) first.
/// Runs detached from the client that started it, so the followers keep getting bytes if
/// that client goes away.
///
/// What the origin connection can deliver without waiting for the network goes into the
/// same append ([`gather`]): every append wakes every reader of the fill, and a streamed
/// part with a thousand readers arrives as many small reads.
///
/// The store writes a body in large aligned pieces and keeps what is below the next
/// boundary until more comes; when the origin pauses for [`FLUSH_IDLE`] the rest is
/// written at once ([`reel_store::FillWriter::flush`]), so readers never wait on the
/// store for bytes the origin already sent.
///
/// `deadline` ends the fill (`[cache] fill_timeout` after its origin request): an origin
/// that drips a byte now and then never trips the idle bound, and would hold the key.
pub(in crate::path) async fn fill_task(
    mut writer: reel_store::FillWriter,
    mut resp: OriginResponse,
    mut lead: Lead,
    first: Option<Bytes>,
    deadline: tokio::time::Instant,
) {
    if let Some(b) = first
        && writer.append(b).await.is_err()
    {
        writer.abort();
        lead.publish(State::Failed(502));
        return;
    }
    loop {
        let next = match writer.pending() {
            0 => tokio::time::timeout_at(deadline, resp.next_chunk()).await,
            // Bytes wait in the writer for its next write boundary: if the origin pauses,
            // write them now so the readers get them. (`next_chunk` is cancel-safe.)
            _ => match tokio::time::timeout(FLUSH_IDLE, resp.next_chunk()).await {
                Ok(r) => Ok(r),
                Err(_) => {
                    if writer.flush().await.is_err() {
                        writer.abort();
                        lead.publish(State::Failed(502));
                        return;
                    }
                    tokio::time::timeout_at(deadline, resp.next_chunk()).await
                }
            },
        };
        let (data, end) = match next {
            Ok(Ok(Some(c))) => gather(&mut resp, c).await,
            Ok(r) => (None, Some(r.map(|_| ()))),
            Err(_) => {
                tracing::debug!("fill_timeout passed mid-body; fill discarded");
                writer.abort();
                lead.publish(State::Failed(504));
                return;
            }
        };
        if let Some(d) = data
            && writer.append(d).await.is_err()
        {
            writer.abort();
            lead.publish(State::Failed(502));
            return;
        }
        match end {
            None => {}
            Some(Ok(())) => {
                let ok = writer.commit().await.is_ok();
                lead.publish(if ok { State::Done } else { State::Failed(502) });
                return;
            }
            Some(Err(e)) => {
                // Never cached truncated: readers of this fill see it aborted and their
                // connections close instead of ending short.
                tracing::debug!(error = %e, "origin body failed mid-transfer; fill discarded");
                writer.abort();
                lead.publish(State::Failed(e.client_status()));
                return;
            }
        }
    }
}

/// How long appended bytes may wait in the store's writer (below its next write
/// boundary, `reel_store::FillWriter::pending`) while the origin sends nothing: then they
/// are written and the fill's readers get them.
const FLUSH_IDLE: std::time::Duration = std::time::Duration::from_millis(1);

/// Appends gathered at most: a store write of this size is still one quick call.
const GATHER_MAX: usize = 1 << 20;

/// `first` and whatever of `resp`'s body the connection delivers without waiting for the
/// network, as one piece; and the end of the body if it came too (`Ok`: complete, `Err`:
/// failed).
///
/// The origin connection runs as its own task and hands the body over one decoded frame
/// at a time, reading the socket in pieces of its read buffer: one write of the origin (a
/// live part's frame of 64 KiB and a few bytes, as two chunks) reaches the fill as several
/// frames, each a turn of that task. Appending each at once woke every reader per frame,
/// and the last frame's rest came only after a thousand readers had been served: the last
/// part of each segment (the one whose frame did not fit one read) reached viewers a whole
/// fan-out later. So when nothing is ready the fill yields once, letting the connection
/// task read what is already in the socket, and stops at the first yield that brings
/// nothing: it never waits for the network.
async fn gather(
    resp: &mut OriginResponse,
    first: Bytes,
) -> (Option<Bytes>, Option<Result<(), reel_origin::OriginError>>) {
    let mut more: Option<bytes::BytesMut> = None;
    let mut end = None;
    let mut yielded = false;
    while more.as_ref().map_or(first.len(), bytes::BytesMut::len) < GATHER_MAX {
        match ready_now(resp.next_chunk()) {
            None if yielded => break,
            None => {
                tokio::task::yield_now().await;
                yielded = true;
            }
            Some(Ok(Some(c))) => {
                yielded = false;
                more.get_or_insert_with(|| bytes::BytesMut::from(&first[..])).extend_from_slice(&c)
            }
            Some(r) => {
                end = Some(r.map(|_| ()));
                break;
            }
        }
    }
    (Some(more.map_or(first, bytes::BytesMut::freeze)), end)
}

/// `f`'s output if it is ready without waiting. Reading an origin body is cancel-safe: a
/// read that was not ready loses nothing.
fn ready_now<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::Duration;

    use http::uri::PathAndQuery;
    use reel_origin::{GroupSpec, HostSpec, OriginRequest, OriginResponse, Origins};

    use super::{gather, ready_now};

    /// An origin on 127.0.0.1 that answers one request with `head` and then `body` in one
    /// write, and keeps the connection open until the test ends.
    fn origin(body: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "the client closed before its request was complete");
                req.extend_from_slice(&buf[..n]);
            }
            let mut out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
            out.extend_from_slice(&body);
            c.write_all(&out).unwrap();
            // Held open: the test's client decides when it is done.
            let _ = c.read(&mut buf);
        });
        (addr, t)
    }

    fn chunk(len: usize, byte: u8) -> Vec<u8> {
        let mut c = format!("{len:x}\r\n").into_bytes();
        c.extend(std::iter::repeat_n(byte, len));
        c.extend_from_slice(b"\r\n");
        c
    }

    async fn response(addr: &str) -> (Origins, OriginResponse) {
        let origins = Origins::new(vec![GroupSpec::new("o", vec![vec![HostSpec::new(addr)]])])
            .expect("origins");
        let req = OriginRequest::get(PathAndQuery::from_static("/part3.ts"), "example.test");
        let resp = origins.worker_client().send("o", req).await.expect("origin response");
        (origins, resp)
    }

    /// A live part's last frame, written by the origin at once as a 64 KiB chunk and a
    /// small one, reaches the fill as one append, end included, although the origin
    /// client reads the socket in smaller pieces.
    #[tokio::test(flavor = "current_thread")]
    async fn one_origin_write_is_one_append_whatever_the_reads() {
        let mut body = chunk(65_536, b'a');
        body.extend(chunk(76, b'b'));
        body.extend_from_slice(b"0\r\n\r\n");
        let (addr, _origin) = origin(body);
        let (_origins, mut resp) = response(&addr).await;
        let first = resp.next_chunk().await.expect("body").expect("a first chunk");
        assert!(
            first.len() < 65_536,
            "the client read it whole at once ({}): no test",
            first.len()
        );
        let (data, end) =
            tokio::time::timeout(Duration::from_secs(10), gather(&mut resp, first)).await.unwrap();
        let data = data.expect("data");
        assert_eq!(data.len(), 65_612, "the write reached the fill in pieces");
        assert!(
            data[..65_536].iter().all(|&b| b == b'a') && data[65_536..].iter().all(|&b| b == b'b')
        );
        assert!(matches!(end, Some(Ok(()))), "the end came with it: {end:?}");
    }

    /// What has not arrived is not waited for: the rest of a body the origin has not sent
    /// yet is the next append's.
    #[tokio::test(flavor = "current_thread")]
    async fn gather_never_waits_for_the_network() {
        let (addr, _origin) = origin(chunk(20_000, b'c'));
        let (_origins, mut resp) = response(&addr).await;
        let first = resp.next_chunk().await.expect("body").expect("a first chunk");
        let (data, end) =
            tokio::time::timeout(Duration::from_secs(10), gather(&mut resp, first)).await.unwrap();
        assert_eq!(data.expect("data").len(), 20_000);
        assert!(end.is_none(), "the body has not ended: {end:?}");
    }

    #[test]
    fn ready_now_takes_what_is_there_and_waits_for_nothing() {
        assert_eq!(ready_now(async { 7 }), Some(7));
        assert_eq!(ready_now(std::future::pending::<u8>()), None);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        assert_eq!(ready_now(rx.recv()), None);
        tx.send(1).unwrap();
        assert_eq!(ready_now(rx.recv()), Some(Some(1)), "nothing lost by the read that waited");
    }
}
