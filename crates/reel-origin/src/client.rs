//! The per-worker origin client: host selection, retries, and a keep-alive pool.
//!
//! A [`WorkerClient`] belongs to one worker thread. Its pool holds hyper connections (see
//! [`crate::conn`]: HTTP/1.1 over TCP or TLS, HTTP/2 over TLS when ALPN chose it) keyed by
//! host address (and, for TLS, group and verified name). Idle HTTP/1.1 connections are reused
//! last-in first-out so the warmest one serves and surplus ones age out; an HTTP/2 connection
//! stays in the pool while open and carries every concurrent request of the worker to that
//! host. Nothing in it is shared with other cores; connection tasks are spawned on the current
//! runtime, which for a worker is its own current_thread runtime. Health and statistics are
//! shared (see [`crate::host`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;

use crate::Inner;
use crate::balance::{self, Affinity};
use crate::body::RequestBody;
use crate::conn::Sender;
use crate::error::{ErrorKind, OriginError, body_kind, head_kind};
use crate::headers::strip_hop_by_hop;
use crate::host::{HostState, PoolKey};
use crate::places::{Place, Requester};
use crate::spec::{Balance, GroupSpec};

/// A request to send to an origin group.
#[derive(Debug)]
pub struct OriginRequest {
    /// Method, forwarded as is.
    pub method: Method,
    /// Origin-form request target.
    pub path_and_query: PathAndQuery,
    /// Headers to forward. Hop-by-hop fields (RFC 9110 section 7.6.1) and `Host` are removed
    /// before sending; `Content-Length` is kept only for streamed bodies (hyper frames the
    /// others itself).
    pub headers: HeaderMap,
    /// `Host` header to send, unless the chosen [`crate::HostSpec`] overrides it. It never
    /// decides where the request goes. Empty or invalid means the host's address.
    pub host: String,
    /// Request body.
    pub body: RequestBody,
    /// Whether the request may be sent twice. GET and HEAD are always treated as idempotent.
    pub idempotent: bool,
    /// This request's bound from sending it to the response head, instead of the group's
    /// `first_byte_timeout`: for requests the origin holds on purpose (an LL-HLS blocking
    /// playlist reload or a preload-hinted part). Passing it fails the request with
    /// [`ErrorKind::BlockingTimeout`], which is neither retried nor held against the host.
    /// `None`: the group's.
    pub first_byte_timeout: Option<Duration>,
    /// Where the origin's interim responses go, as they arrive (see [`InterimSink`]).
    pub interim: Option<InterimSink>,
    /// Whom the request is for: a client address's share of the host's
    /// `max_connections`, or the node's own room (see [`Requester`]).
    pub from: Requester,
}

/// An interim (1xx) response from the origin, other than `100 Continue`, without
/// hop-by-hop fields: for a proxy to forward ahead of the final response (RFC 9110
/// section 15.2), e.g. `103 Early Hints` (RFC 8297). Never the answer to the request.
#[derive(Debug, Clone)]
pub struct InterimResponse {
    /// 102..=199 (a 101 switches protocols and is never interim).
    pub status: StatusCode,
    /// Its fields.
    pub headers: HeaderMap,
}

/// Called with each [`InterimResponse`] to a request, as it arrives, before the final
/// response head: from HTTP/1.1 origins (hyper reports no 1xx of HTTP/2 ones), on every
/// attempt. `100 Continue` answers reel's own expectation and is not reported.
#[derive(Clone)]
pub struct InterimSink(Arc<dyn Fn(InterimResponse) + Send + Sync>);

impl InterimSink {
    /// A sink calling `f` (from the connection's task, so it must not block).
    pub fn new(f: impl Fn(InterimResponse) + Send + Sync + 'static) -> Self {
        InterimSink(Arc::new(f))
    }

    /// Hands `r` to the sink.
    pub fn call(&self, r: InterimResponse) {
        (self.0)(r);
    }
}

impl std::fmt::Debug for InterimSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InterimSink")
    }
}

impl OriginRequest {
    /// A `GET` without headers or body, made for the node itself (set [`Self::from`] for
    /// a viewer's).
    pub fn get(path_and_query: PathAndQuery, host: impl Into<String>) -> Self {
        Self {
            method: Method::GET,
            path_and_query,
            headers: HeaderMap::new(),
            host: host.into(),
            body: RequestBody::Empty,
            idempotent: true,
            first_byte_timeout: None,
            interim: None,
            from: Requester::Node,
        }
    }

    fn is_idempotent(&self) -> bool {
        self.idempotent || self.method == Method::GET || self.method == Method::HEAD
    }
}

/// How long the exchange took to get going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginTiming {
    /// TCP connect duration, `None` when a pooled connection was reused.
    pub connect: Option<Duration>,
    /// From sending the request head on the connection to receiving the response head.
    pub first_byte: Duration,
}

/// A response head from an origin, with its body still to be read.
#[derive(Debug)]
pub struct OriginResponse {
    /// Status code.
    pub status: StatusCode,
    /// Response headers without hop-by-hop fields; `Content-Length` is kept.
    pub headers: HeaderMap,
    /// The body.
    pub body: OriginBody,
    /// The address (`host:port` from the spec) that answered.
    pub host: String,
    /// Connect and first-byte durations.
    pub timing: OriginTiming,
}

impl OriginResponse {
    /// Next body chunk; see [`OriginBody::next_chunk`].
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, OriginError> {
        self.body.next_chunk().await
    }
}

/// The body of an [`OriginResponse`]: a stream of chunks with the idle timeout applied to each.
///
/// When the body has been read to its end the connection goes back to the worker's pool.
/// Dropping the body earlier closes an HTTP/1.1 connection (it cannot skip the rest of a
/// body) and resets only the stream of an HTTP/2 one.
pub struct OriginBody {
    incoming: Option<Incoming>,
    idle_timeout: Duration,
    /// Declared length, when the response has a body whose length is declared.
    expected: Option<u64>,
    received: u64,
    conn: Option<PooledConn>,
    host: Arc<HostState>,
    failed: Option<OriginError>,
}

impl std::fmt::Debug for OriginBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OriginBody")
            .field("expected", &self.expected)
            .field("received", &self.received)
            .field("done", &self.incoming.is_none())
            .finish()
    }
}

/// A connection to return to the pool once its response is complete.
struct PooledConn {
    sender: Sender,
    pool: Rc<RefCell<Pool>>,
    cap: usize,
    idle_timeout: Duration,
    /// The host's place this connection holds while it carries the response (HTTP/1.1),
    /// given back when the connection returns to the pool or closes.
    _place: Option<Place>,
}

impl OriginBody {
    /// The declared body length (Content-Length), if any.
    pub fn content_length(&self) -> Option<u64> {
        self.expected
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The next chunk, `Ok(None)` at the end of the body. Fails with
    /// [`ErrorKind::IdleTimeout`] when no chunk arrives within the group's idle timeout,
    /// [`ErrorKind::Truncated`] when the body ends before its declared length, and
    /// [`ErrorKind::Reset`] when the connection is reset. After an error, the same error is
    /// returned again.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, OriginError> {
        loop {
            let Some(incoming) = self.incoming.as_mut() else {
                return match &self.failed {
                    Some(e) => Err(e.clone()),
                    None => Ok(None),
                };
            };
            let frame = match tokio::time::timeout(self.idle_timeout, incoming.frame()).await {
                Err(_) => return Err(self.fail(ErrorKind::IdleTimeout, None)),
                Ok(None) => return self.end().map(|()| None),
                Ok(Some(Err(e))) => return Err(self.fail(body_kind(&e), Some(e))),
                Ok(Some(Ok(frame))) => frame,
            };
            // Trailers carry nothing the edge forwards.
            let Ok(data) = frame.into_data() else { continue };
            self.received += data.len() as u64;
            if incoming.is_end_stream() {
                // Return the connection now: the caller may never ask for the (empty) rest.
                self.end()?;
            }
            if !data.is_empty() {
                return Ok(Some(data));
            }
        }
    }

    fn end(&mut self) -> Result<(), OriginError> {
        if let Some(expected) = self.expected
            && self.received < expected
        {
            return Err(self.fail(ErrorKind::Truncated, None));
        }
        self.incoming = None;
        if let Some(c) = self.conn.take() {
            c.pool.borrow_mut().checkin(&self.host.pool_key, c.sender, c.cap, c.idle_timeout);
        }
        Ok(())
    }

    fn fail(&mut self, kind: ErrorKind, source: Option<hyper::Error>) -> OriginError {
        self.incoming = None;
        self.conn = None;
        let mut e = OriginError::new(kind, Some(&self.host.addr), false);
        if let Some(s) = source {
            e = e.with_source(s);
        }
        self.host.stats.error(kind);
        self.host.passive_failure(kind);
        self.failed = Some(e.clone());
        e
    }
}

struct Idle {
    sender: Sender,
    since: Instant,
    ttl: Duration,
}

/// Keep-alive connections of one worker: idle HTTP/1.1 ones and open HTTP/2 ones, by host.
#[derive(Default)]
pub(crate) struct Pool {
    idle: HashMap<PoolKey, Vec<Idle>>,
    /// One multiplexed connection per host; requests share it, so it is never checked out.
    h2: HashMap<PoolKey, Sender>,
    last_sweep: Option<Instant>,
}

const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Pool {
    /// The open HTTP/2 connection to `key`, else the most recently used idle HTTP/1.1 one.
    fn checkout(&mut self, key: &PoolKey) -> Option<Sender> {
        if let Some(s) = self.h2.get(key) {
            if let Some(shared) = s.share().filter(|s| !s.is_closed()) {
                return Some(shared);
            }
            self.h2.remove(key);
        }
        let list = self.idle.get_mut(key)?;
        while let Some(idle) = list.pop() {
            if !idle.sender.is_closed() && idle.since.elapsed() < idle.ttl {
                return Some(idle.sender);
            }
        }
        None
    }

    /// A new connection: HTTP/2 ones join the pool at once, for concurrent requests, unless
    /// pooling is off (`cap` 0).
    fn opened(&mut self, key: &PoolKey, sender: &Sender, cap: usize) {
        if let Some(shared) = sender.share().filter(|_| cap > 0) {
            self.h2.insert(key.clone(), shared);
        }
    }

    fn checkin(&mut self, key: &PoolKey, sender: Sender, cap: usize, ttl: Duration) {
        let now = Instant::now();
        if self.last_sweep.is_none_or(|t| now.duration_since(t) >= SWEEP_EVERY) {
            self.last_sweep = Some(now);
            // Dropping a sender whose connection is idle ends the connection task.
            for list in self.idle.values_mut() {
                list.retain(|i| !i.sender.is_closed() && now.duration_since(i.since) < i.ttl);
            }
            self.idle.retain(|_, l| !l.is_empty());
            self.h2.retain(|_, s| !s.is_closed());
        }
        if cap == 0 || sender.is_closed() || sender.is_h2() {
            // A closed connection is useless; an HTTP/2 one is already in `h2`.
            return;
        }
        let list = self.idle.entry(key.clone()).or_default();
        if list.len() >= cap {
            // The oldest goes: LIFO reuse would leave it unused longest anyway.
            list.remove(0);
        }
        list.push(Idle { sender, since: now, ttl });
    }

    fn idle_count(&self, addr: &str) -> usize {
        let idle: usize =
            self.idle.iter().filter(|(k, _)| k.addr == addr).map(|(_, l)| l.len()).sum();
        let h2 = self.h2.iter().filter(|(k, s)| k.addr == addr && !s.is_closed()).count();
        idle + h2
    }
}

struct Local {
    pool: Rc<RefCell<Pool>>,
    /// Round-robin position per group and tier.
    rr: Vec<Vec<Cell<usize>>>,
}

/// The origin client of one worker thread. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct WorkerClient {
    inner: Arc<Inner>,
    local: Rc<Local>,
}

impl std::fmt::Debug for WorkerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerClient").finish_non_exhaustive()
    }
}

/// The request head, prepared once and reused for every attempt.
struct Head {
    method: Method,
    pq: PathAndQuery,
    headers: HeaderMap,
    host: Option<HeaderValue>,
    idempotent: bool,
    first_byte_timeout: Duration,
    /// The request carries its own first-byte bound: the origin holds it on purpose.
    held: bool,
    interim: Option<InterimSink>,
    from: Requester,
}

impl WorkerClient {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        let rr =
            inner.groups.iter().map(|g| g.tiers.iter().map(|_| Cell::new(0)).collect()).collect();
        Self { inner, local: Rc::new(Local { pool: Rc::default(), rr }) }
    }

    /// Sends `req` to group `group` and returns the response head; the same as
    /// [`send_keyed`](Self::send_keyed) with the affinity of the request's path and query.
    pub async fn send(
        &self,
        group: &str,
        req: OriginRequest,
    ) -> Result<OriginResponse, OriginError> {
        self.send_keyed(group, req, None).await
    }

    /// Sends `req` to group `group` and returns the response head.
    ///
    /// With round robin, hosts are chosen in turn among the available hosts of the best tier.
    /// With rendezvous, each tier's hosts are ranked for `affinity` (the caller's cache key,
    /// see [`Affinity`]; `None` hashes the path and query) and the best-ranked available host
    /// serves. Either way the other available hosts of that tier, then those of the following
    /// tiers, are the retry order. When no host of any tier is available the group's
    /// `fail_open` decides: tier 0 anyway, or [`ErrorKind::NoHealthyHost`].
    ///
    /// Idempotent requests are retried on the next host, up to `retries` times, when the
    /// failure happened before any response byte ([`OriginError::is_retryable`]); a streamed
    /// body is never sent twice. Once this returns `Ok`, nothing is retried: the caller owns
    /// the response from here on.
    ///
    /// Independently of `retries`, a request that fails on a reused keep-alive connection
    /// because the origin closed it is sent once more on a fresh connection to the same host,
    /// if it is idempotent or hyper reports it was never written.
    pub async fn send_keyed(
        &self,
        group: &str,
        req: OriginRequest,
        affinity: Option<Affinity>,
    ) -> Result<OriginResponse, OriginError> {
        let Some(&gi) = self.inner.by_name.get(group) else {
            return Err(OriginError::new(ErrorKind::UnknownGroup, None, true));
        };
        let g = &self.inner.groups[gi];
        let idempotent = req.is_idempotent();
        let mut headers = req.headers;
        strip_hop_by_hop(&mut headers);
        headers.remove(header::HOST);
        let mut pq = req.path_and_query;
        if let Some(auth) = &g.auth {
            auth.scrub(&mut headers);
            pq = auth.target(&pq);
        }
        if !req.body.is_stream() {
            headers.remove(header::CONTENT_LENGTH);
        }
        let affinity = affinity.unwrap_or_else(|| Affinity::of(pq.as_str().as_bytes()));
        let head = Head {
            method: req.method,
            pq,
            headers,
            host: HeaderValue::from_str(&req.host).ok().filter(|v| !v.is_empty()),
            idempotent,
            first_byte_timeout: req.first_byte_timeout.unwrap_or(g.spec.first_byte_timeout),
            held: req.first_byte_timeout.is_some(),
            interim: req.interim,
            from: req.from,
        };
        let plan = self.plan(gi, affinity);
        if plan.is_empty() {
            return Err(OriginError::new(ErrorKind::NoHealthyHost, None, true));
        }
        let attempts = if idempotent { 1 + g.spec.retries as usize } else { 1 };
        let mut body = Some(req.body);
        let mut last = None;
        for host in plan.iter().take(attempts) {
            if body.is_none() {
                break;
            }
            match self.attempt(&g.spec, host, &head, &mut body).await {
                Ok(resp) => return Ok(resp),
                Err(e) => {
                    let retry = idempotent && e.is_retryable();
                    tracing::debug!(group, host = %host.addr, error = %e, retry, "origin attempt failed");
                    last = Some(e);
                    if !retry {
                        break;
                    }
                }
            }
        }
        Err(last.unwrap_or_else(|| OriginError::new(ErrorKind::NoHealthyHost, None, true)))
    }

    /// Hosts to try, in order.
    fn plan(&self, gi: usize, affinity: Affinity) -> Vec<Arc<HostState>> {
        let g = &self.inner.groups[gi];
        let rr = &self.local.rr[gi];
        // One tier's hosts in this request's order, starting from the first.
        let order = |ti: usize, hosts: Vec<&Arc<HostState>>, advance: bool| match g.spec.balance {
            Balance::RoundRobin => {
                let start = rr[ti].get();
                if advance {
                    rr[ti].set(start.wrapping_add(1));
                }
                (0..hosts.len()).map(|k| hosts[(start + k) % hosts.len()].clone()).collect()
            }
            // Ranking only the available hosts skips the unavailable ones in rank order.
            Balance::Rendezvous => {
                balance::rank(affinity, hosts.iter().map(|h| (h.rank_id, h.weight)))
                    .into_iter()
                    .map(|i| hosts[i].clone())
                    .collect::<Vec<_>>()
            }
        };
        let mut out = Vec::new();
        for (ti, tier) in g.tiers.iter().enumerate() {
            let avail: Vec<&Arc<HostState>> = tier.iter().filter(|h| h.is_available()).collect();
            if avail.is_empty() {
                continue;
            }
            let first = out.is_empty();
            out.extend(order(ti, avail, first));
        }
        if out.is_empty() && g.spec.fail_open {
            out = order(0, g.tiers[0].iter().collect(), true);
        }
        out
    }

    async fn checkout(&self, host: &HostState, g: &GroupSpec) -> Option<Sender> {
        loop {
            let mut sender = self.local.pool.borrow_mut().checkout(&host.pool_key)?;
            if sender.is_ready() {
                return Some(sender);
            }
            // Just returned: its connection task may not have gone idle yet.
            if let Ok(Ok(())) = tokio::time::timeout(g.connect_timeout, sender.ready()).await {
                return Some(sender);
            }
        }
    }

    async fn connect(
        &self,
        host: &HostState,
        g: &GroupSpec,
    ) -> Result<(Sender, Duration), OriginError> {
        let started = Instant::now();
        let sender = crate::conn::open(host, g.connect_timeout).await?;
        self.local.pool.borrow_mut().opened(&host.pool_key, &sender, g.max_idle_per_host);
        Ok((sender, started.elapsed()))
    }

    async fn attempt(
        &self,
        g: &GroupSpec,
        host: &Arc<HostState>,
        head: &Head,
        body: &mut Option<RequestBody>,
    ) -> Result<OriginResponse, OriginError> {
        host.stats.request();
        let fail = |e: OriginError| {
            host.stats.error(e.kind());
            host.passive_failure(e.kind());
            e
        };
        let pooled = self.checkout(host, g).await;
        // A connection carrying a request holds one of the host's `max_connections`
        // places, whichever worker it belongs to; the shared HTTP/2 connection (one per
        // worker and host) needs none.
        let mut place = None;
        if !pooled.as_ref().is_some_and(Sender::is_h2) {
            match host.busy.take(head.from, g.connect_timeout).await {
                Some(p) => place = Some(p),
                None => {
                    if let Some(s) = pooled {
                        let ttl = g.pool_idle_timeout;
                        self.local.pool.borrow_mut().checkin(
                            &host.pool_key,
                            s,
                            g.max_idle_per_host,
                            ttl,
                        );
                    }
                    let e = OriginError::new(ErrorKind::ConnectionLimit, Some(&host.addr), true);
                    return Err(fail(e));
                }
            }
        }
        let (mut sender, mut connect) = match pooled {
            Some(s) => (s, None),
            None => {
                let (s, d) = self.connect(host, g).await.map_err(fail)?;
                (s, Some(d))
            }
        };
        if sender.is_h2() {
            place = None;
        }
        loop {
            let Some(this_body) =
                body.as_ref().and_then(RequestBody::try_clone).or_else(|| body.take())
            else {
                return Err(OriginError::new(ErrorKind::Reset, Some(&host.addr), true));
            };
            let host_value = host
                .host_header
                .clone()
                .or_else(|| head.host.clone())
                .or_else(|| HeaderValue::from_str(&host.addr).ok())
                .unwrap_or_else(|| HeaderValue::from_static("localhost"));
            let mut headers = head.headers.clone();
            if let Some(auth) = &host.auth {
                // Signed per attempt: the Host signed is this host's, the time is now.
                auth.apply((&head.method, &head.pq), &host_value, &mut headers, SystemTime::now());
            }
            let mut req = sender.request(
                head.method.clone(),
                head.pq.clone(),
                headers,
                host_value,
                &host.addr,
                this_body,
            );
            if let Some(sink) = &head.interim {
                let sink = sink.clone();
                hyper::ext::on_informational(&mut req, move |r| {
                    if r.status() == StatusCode::CONTINUE {
                        return;
                    }
                    let mut headers = r.headers().clone();
                    strip_hop_by_hop(&mut headers);
                    sink.call(InterimResponse { status: r.status(), headers });
                });
            }
            let started = Instant::now();
            let result = tokio::time::timeout(head.first_byte_timeout, sender.send(req)).await;
            let first_byte = started.elapsed();
            let mut err = match result {
                Ok(Ok(resp)) => {
                    host.stats.response(first_byte);
                    host.passive_success();
                    let conn = (sender, place);
                    return Ok(self.response(g, host, head, resp, conn, connect, first_byte));
                }
                Err(_) => {
                    let kind = if head.held {
                        ErrorKind::BlockingTimeout
                    } else {
                        ErrorKind::FirstByteTimeout
                    };
                    return Err(fail(OriginError::new(kind, Some(&host.addr), true)));
                }
                Ok(Err(e)) => e,
            };
            let returned = err.take_message();
            let was_returned = returned.is_some();
            if let Some(r) = returned {
                *body = Some(r.into_body());
            }
            let kind = head_kind(err.error());
            let stale = connect.is_none()
                && kind == ErrorKind::Reset
                && body.is_some()
                && (head.idempotent || was_returned);
            let e = OriginError::new(kind, Some(&host.addr), true).with_source(err.into_error());
            if !stale {
                return Err(fail(e));
            }
            tracing::debug!(host = %host.addr, error = %e, "pooled connection was closed, reconnecting");
            let (s, d) = self.connect(host, g).await.map_err(fail)?;
            sender = s;
            connect = Some(d);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn response(
        &self,
        g: &GroupSpec,
        host: &Arc<HostState>,
        head: &Head,
        resp: http::Response<Incoming>,
        (sender, place): (Sender, Option<Place>),
        connect: Option<Duration>,
        first_byte: Duration,
    ) -> OriginResponse {
        let (parts, incoming) = resp.into_parts();
        let mut headers = parts.headers;
        if headers.contains_key(header::TRANSFER_ENCODING) {
            // RFC 9112 section 6.3: Transfer-Encoding overrides Content-Length (hyper
            // decodes the body that way) and a forwarding intermediary removes the
            // Content-Length, so the length it announced is never trusted downstream.
            headers.remove(header::CONTENT_LENGTH);
        }
        strip_hop_by_hop(&mut headers);
        let status = parts.status;
        // RFC 9112 section 6.3: HEAD, 1xx, 204 and 304 responses have no body whatever their
        // Content-Length says.
        let bodiless = head.method == Method::HEAD
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        let expected = if bodiless {
            None
        } else {
            headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let mut body = OriginBody {
            incoming: Some(incoming),
            idle_timeout: g.idle_timeout,
            expected,
            received: 0,
            conn: Some(PooledConn {
                sender,
                pool: self.local.pool.clone(),
                cap: g.max_idle_per_host,
                idle_timeout: g.pool_idle_timeout,
                _place: place,
            }),
            host: host.clone(),
            failed: None,
        };
        if body.incoming.as_ref().is_some_and(|i| i.is_end_stream()) {
            // Nothing to read: the connection can serve the next request right away.
            let _ = body.end();
        }
        OriginResponse {
            status,
            headers,
            body,
            host: host.addr.clone(),
            timing: OriginTiming { connect, first_byte },
        }
    }

    /// Idle keep-alive connections to `addr` currently pooled by this worker.
    pub fn idle_connections(&self, addr: &str) -> usize {
        self.local.pool.borrow().idle_count(addr)
    }
}
