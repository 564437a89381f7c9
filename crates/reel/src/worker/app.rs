//! What runs on each worker: the [`App`] the runtime creates per worker thread, and the
//! request [`Handler`] that answers `/healthz`, hands everything else to the cache, and
//! records metrics and access-log lines.
//!
//! Per-worker state is `Rc`/`RefCell`: it never leaves its thread. The reloadable part is
//! re-derived (cache settings, access-log buffer, limits) when the shared generation number
//! changes, which a worker notices on its next request; the origin connection pool carries
//! over when the origin groups did not change, the decoded-metadata cache always does.

use std::cell::RefCell;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reel_cache::CacheResult;
use reel_http::{Handler, Method, Refusal, Request, RequestBody, Response, Sent, Served};
use reel_ops::access_log::{Entry, LogBuffer, Refused};
use reel_ops::metrics::WorkerMetrics;
use reel_runtime::{ConnEnd, WorkerApp, WorkerCtx};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::state::Shared;
use crate::state::generation::Live;

pin_project_lite::pin_project! {
    /// A connection's future: plain HTTP in place, TLS boxed. An idle plain connection's
    /// whole state is its task cell (one allocation, the connection's wait for the next
    /// request) and the socket's registration; the TLS future, with the session in it, is
    /// large and boxed so a plain task does not carry its size.
    #[project = ConnTaskProj]
    enum ConnTask<P, T> {
        Plain { #[pin] conn: P },
        Tls { conn: Pin<Box<T>> },
    }
}

impl<P: Future<Output = Served>, T: Future<Output = ()>> Future for ConnTask<P, T> {
    type Output = ConnEnd;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ConnEnd> {
        match self.project() {
            ConnTaskProj::Plain { conn } => conn.poll(cx).map(|s| match s.parked {
                Some(p) => ConnEnd::Park { stream: p.stream, idle_until: p.idle_until },
                None => ConnEnd::Closed,
            }),
            ConnTaskProj::Tls { conn } => conn.as_mut().poll(cx).map(ConnEnd::from),
        }
    }
}

/// One worker's application object.
pub(crate) struct App {
    state: Rc<WorkerState>,
}

impl App {
    /// Builds the worker's state on its own thread.
    pub(crate) fn new(ctx: &WorkerCtx, shared: &Arc<Shared>) -> App {
        let metrics = shared
            .metrics
            .get(ctx.index)
            .cloned()
            .unwrap_or_else(|| Arc::new(WorkerMetrics::new(&reel_cache::OUTCOMES)));
        let tls_counters = shared.tls_counters.get(ctx.index).cloned().unwrap_or_default();
        let state = Rc::new(WorkerState {
            shared: shared.clone(),
            worker: ctx.index,
            metrics,
            tls_counters,
            generation: RefCell::new(Gen::first(&shared.live_full(), shared)),
            sites: reel_ops::sites::SiteView::default(),
            alt_svc: RefCell::new(AltSvc { generation: 0, table: Vec::new() }),
            quic: RefCell::new(shared.quic.subscribe()),
        });
        App { state }
    }
}

impl WorkerApp for App {
    /// The connection's future, built here: it borrows nothing, and a plain connection's
    /// task does not carry the size of the TLS path (handshake, HTTP/2), so what an idle
    /// keep-alive connection holds stays small.
    fn on_conn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<ConnEnd>> + 'static {
        self.conn(stream, reel_http::Peer::from(peer), listener, drain)
    }

    /// A connection whose PROXY protocol header named `client`: served as any other, with
    /// `client` as the client and `socket` (the balancer) kept for the access log.
    fn on_proxied_conn(
        &self,
        stream: TcpStream,
        client: SocketAddr,
        socket: SocketAddr,
        listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = impl Into<ConnEnd>> + 'static {
        self.conn(stream, reel_http::Peer { client, socket }, listener, drain)
    }

    /// A PROXY protocol listener takes its header from `http.trusted_proxies` only, within
    /// `http.header_timeout` (both as of the current generation: live on reload).
    fn proxy_header_timeout(&self, source: IpAddr) -> Option<Duration> {
        let g = self.state.current();
        let trusted = g.limits.trusted_proxies.as_ref()?;
        trusted.contains(source).then_some(g.limits.header_timeout)
    }

    async fn on_refused(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        listener: &str,
        why: reel_runtime::Refusal,
    ) {
        // A TLS client would need a handshake first: over a limit it is just closed.
        if self.state.current().live.tls.listener(listener).is_none() {
            crate::worker::refused::answer(stream, peer, why).await;
        }
    }

    async fn run(&self, ctx: WorkerCtx, mut drain: watch::Receiver<bool>) {
        let quic = tokio::task::spawn_local(serve_quic(self.state.clone(), ctx, drain.clone()));
        // Hand buffered access-log lines to the writer on a timer, so a quiet worker's
        // lines are not held back; stop when the worker drains.
        loop {
            let every = self.state.shared.live().cfg.access_log.flush_interval.get();
            tokio::select! {
                _ = tokio::time::sleep(every.max(Duration::from_millis(10))) => {}
                _ = drain.wait_for(|d| *d) => break,
            }
            self.state.flush_log();
        }
        // HTTP/3 connections finish under the drain like TCP ones.
        let _ = quic.await;
        self.state.flush_log();
    }
}

impl App {
    /// The future of a connection from `peer` (see [`WorkerApp::on_conn`]).
    fn conn(
        &self,
        stream: TcpStream,
        peer: reel_http::Peer,
        listener: &str,
        drain: watch::Receiver<bool>,
    ) -> impl Future<Output = ConnEnd> + 'static {
        let g = self.state.current();
        let (limits, h2) = (g.limits.clone(), g.h2.clone());
        let tls = g.live.tls.listener(listener).cloned();
        drop(g);
        let s = self.state.clone();
        match tls {
            None => {
                ConnTask::Plain { conn: reel_http::serve_parkable(stream, peer, s, limits, drain) }
            }
            Some(tls) => ConnTask::Tls {
                conn: Box::pin(async move {
                    crate::listeners::tls::serve(
                        tls,
                        stream,
                        peer,
                        s.clone(),
                        limits,
                        h2,
                        drain,
                        &s.tls_counters,
                    )
                    .await;
                }),
            },
        }
    }
}

/// Serves this worker's socket of every HTTP/3 listener, following the set as reloads
/// change it, until the worker drains and every endpoint's connections have closed.
async fn serve_quic(state: Rc<WorkerState>, ctx: WorkerCtx, mut drain: watch::Receiver<bool>) {
    let _running = state.shared.quic.running_guard();
    let Ok(worker) = u8::try_from(ctx.index) else {
        tracing::error!(worker = ctx.index, "HTTP/3 serves at most 255 workers");
        return;
    };
    let mut set = state.shared.quic.subscribe();
    let mut endpoints = tokio::task::JoinSet::new();
    // The listeners this worker serves (by identity), so each is started once.
    let mut serving: Vec<Arc<crate::listeners::quic::QuicListener>> = Vec::new();
    loop {
        let now = set.borrow_and_update().clone();
        serving.retain(|l| now.iter().any(|n| Arc::ptr_eq(n, l)));
        for l in now {
            if serving.iter().any(|s| Arc::ptr_eq(s, &l)) {
                continue;
            }
            match serve_listener(&state, &l, worker, &ctx.clients, &drain) {
                Ok(task) => {
                    endpoints.spawn_local(task);
                }
                Err(e) => tracing::error!(listener = %l.name, error = %e, "HTTP/3 socket unusable"),
            }
            serving.push(l);
        }
        while endpoints.try_join_next().is_some() {}
        tokio::select! {
            changed = set.changed() => if changed.is_err() { break },
            _ = drain.wait_for(|d| *d) => break,
        }
    }
    while endpoints.join_next().await.is_some() {}
}

/// The task serving worker `worker`'s socket of listener `l`: it ends when the worker
/// drains or the listener is removed, once its connections have closed.
fn serve_listener(
    state: &Rc<WorkerState>,
    l: &Arc<crate::listeners::quic::QuicListener>,
    worker: u8,
    clients: &reel_runtime::ClientCounts,
    drain: &watch::Receiver<bool>,
) -> std::io::Result<impl Future<Output = ()> + 'static> {
    let socket = l.socket(usize::from(worker))?;
    let clients = clients.clone();
    let local = l.address;
    let counters = l.counters.get(usize::from(worker)).cloned().unwrap_or_default();
    // Draining: the worker's, or the listener's own once a reload removed it.
    let (stop_tx, stop) = watch::channel(false);
    let (mut worker_drain, mut closed) = (drain.clone(), l.closed());
    tokio::task::spawn_local(async move {
        tokio::select! {
            _ = worker_drain.wait_for(|d| *d) => {}
            _ = closed.wait_for(|c| *c) => {}
        }
        stop_tx.send_replace(true);
    });
    let s = state.clone();
    let conn_stop = stop.clone();
    let on_conn = move |conn: quinn::Connection| {
        let (s, drain) = (s.clone(), conn_stop.clone());
        async move {
            let g = s.current();
            let (limits, settings) = (g.limits.clone(), g.h3.clone());
            drop(g);
            reel_http::serve_h3(conn, local, s, limits, settings, drain).await;
        }
    };
    let name = l.name.clone();
    let serve = reel_quic::serve_worker(
        socket,
        worker,
        l.configs(),
        state.shared.quic.keys.clone(),
        counters,
        // HTTP/3 connections count with the TCP ones against
        // `http.max_connections_per_client`, across all workers, and against their own
        // per-client cap.
        move |ip, quic_cap| clients.enter_quic(ip, reel_quic::client_key(ip), quic_cap).ok(),
        stop,
        on_conn,
    );
    Ok(async move {
        if let Err(e) = serve.await {
            tracing::error!(listener = %name, error = %e, "HTTP/3 endpoint failed");
        }
    })
}

/// The reloadable part of a worker's state, for one generation.
struct Gen {
    generation: u64,
    live: Arc<Live>,
    limits: Rc<reel_http::Limits>,
    h2: Rc<reel_http::H2Settings>,
    h3: Rc<reel_http::H3Settings>,
    /// This worker's origin client (its keep-alive pool), for `live.origins`.
    client: reel_origin::WorkerClient,
    cache: Rc<reel_cache::WorkerCache>,
    log: Option<Rc<LogBuffer>>,
    /// The CMCD counters of `live.cache`'s sites, in its order, the fallback last.
    cmcd: Vec<Arc<reel_ops::cmcd_metrics::SiteCmcd>>,
}

impl Gen {
    fn first(live: &Arc<Live>, shared: &Shared) -> Rc<Gen> {
        let client = live.origins.worker_client();
        let cache =
            reel_cache::WorkerCache::new(shared.cache.clone(), live.cache.clone(), client.clone());
        Gen::with(live, client, cache, &shared.cmcd)
    }

    /// The next generation: the origin client (and its pooled connections) is kept when the
    /// origin groups are the same, the decoded-metadata cache always.
    fn next(&self, live: &Arc<Live>, cmcd: &reel_ops::cmcd_metrics::CmcdMetrics) -> Rc<Gen> {
        let client = if Arc::ptr_eq(&self.live.origins, &live.origins) {
            self.client.clone()
        } else {
            live.origins.worker_client()
        };
        let cache = self.cache.next_generation(live.cache.clone(), client.clone());
        Gen::with(live, client, cache, cmcd)
    }

    fn with(
        live: &Arc<Live>,
        client: reel_origin::WorkerClient,
        cache: reel_cache::WorkerCache,
        cmcd: &reel_ops::cmcd_metrics::CmcdMetrics,
    ) -> Rc<Gen> {
        // The `site` label of the per-site metrics (`[[site]] name`); the `--origin`
        // catch-all's requests are no configured site's.
        let names = live.cfg.site.iter().map(|c| c.metrics_name());
        let names = names.chain(live.cache.fallback.iter().map(|_| reel_ops::sites::NO_SITE));
        let cmcd = names.map(|n| cmcd.site(n)).collect();
        let log = live.access_log.as_ref().map(|l| {
            Rc::new(LogBuffer::with_layout(
                l.clone(),
                live.cfg.access_log.buffer.bytes() as usize,
                live.log_layout.clone(),
            ))
        });
        Rc::new(Gen {
            generation: live.generation,
            live: live.clone(),
            limits: Rc::new(live.limits.clone()),
            h2: Rc::new(live.h2.clone()),
            h3: Rc::new(reel_http::H3Settings {
                max_resets_per_second: live.h2.max_resets_per_second,
            }),
            client,
            cache: Rc::new(cache),
            log,
            cmcd,
        })
    }
}

/// The request handler of one worker.
pub(crate) struct WorkerState {
    shared: Arc<Shared>,
    /// This worker's index (its slot in per-worker counters).
    worker: usize,
    metrics: Arc<WorkerMetrics>,
    tls_counters: Arc<reel_tls::HandshakeCounters>,
    generation: RefCell<Rc<Gen>>,
    /// This worker's per-site counters, by the site id a response's tag carries.
    sites: reel_ops::sites::SiteView,
    /// The `Alt-Svc` values of the listeners serving HTTP/3, by port.
    alt_svc: RefCell<AltSvc>,
    /// Learns when the HTTP/3 listeners change (the `Alt-Svc` table is redone then).
    quic: RefCell<watch::Receiver<Vec<Arc<crate::listeners::quic::QuicListener>>>>,
}

/// `Alt-Svc: h3=":PORT"; ma=SECS` per TCP port whose listener also serves HTTP/3.
struct AltSvc {
    generation: u64,
    table: Vec<(u16, Bytes)>,
}

impl AltSvc {
    fn build(live: &Live, quic: &[Arc<crate::listeners::quic::QuicListener>]) -> Vec<(u16, Bytes)> {
        quic.iter()
            .filter_map(|q| {
                let l = live.cfg.listener.iter().find(|l| l.name == q.name)?;
                let age = l.alt_svc_max_age()?;
                let port = q.address.port();
                let value = format!("h3=\":{port}\"; ma={}", age.as_secs());
                Some((port, Bytes::from(value)))
            })
            .collect()
    }
}

impl WorkerState {
    /// This worker's view of the current generation, rebuilt if a reload happened.
    fn current(&self) -> Rc<Gen> {
        let live = self.shared.live();
        let cur = self.generation.borrow().clone();
        if cur.generation == live.generation {
            return cur;
        }
        // Hand over what the old generation's buffer holds before it goes.
        if let Some(l) = &cur.log {
            l.flush();
        }
        let next = cur.next(&self.shared.live_full(), &self.shared.cmcd);
        *self.generation.borrow_mut() = next.clone();
        next
    }

    /// The `Alt-Svc` value for a response on local port `port`, if its listener serves
    /// HTTP/3.
    fn alt_svc(&self, generation: u64, port: u16) -> Option<Bytes> {
        let changed = self.quic.borrow().has_changed().unwrap_or(false);
        if changed || self.alt_svc.borrow().generation != generation {
            let quic = self.quic.borrow_mut().borrow_and_update().clone();
            let live = self.shared.live_full();
            *self.alt_svc.borrow_mut() =
                AltSvc { generation: live.generation, table: AltSvc::build(&live, &quic) };
        }
        let a = self.alt_svc.borrow();
        a.table.iter().find(|(p, _)| *p == port).map(|(_, v)| v.clone())
    }

    fn flush_log(&self) {
        if let Some(l) = &self.generation.borrow().log {
            l.flush();
        }
    }

    fn healthz(&self, req: &Request) -> Response {
        let resp = match self.shared.health() {
            Some(h) => {
                let a = h.answer();
                Response::new(a.status).bytes(a.body.clone())
            }
            None => Response::new(503).bytes(Bytes::from_static(b"{\"status\":\"starting\"}\n")),
        };
        let resp = resp
            .header("content-type", Bytes::from_static(b"application/json"))
            .header("cache-control", Bytes::from_static(b"no-store"));
        match req.method() {
            Method::Get | Method::Head => resp,
            m => Response::for_unsupported_method(m, &[Method::Get, Method::Head]).unwrap_or(resp),
        }
    }
}

impl Handler for WorkerState {
    async fn handle(&self, req: &Request, body: &mut RequestBody<'_>) -> Response {
        let g = self.current();
        let resp = if req.path() == g.live.cfg.health.path {
            self.healthz(req).tagged(reel_cache::Tag::local())
        } else {
            g.cache.handle(req, body, &self.metrics).await
        };
        // Clients of a listener that also serves HTTP/3 learn of it (RFC 7838).
        if req.version() != reel_http::Version::Http3
            && let Some(v) = self.alt_svc(g.generation, req.local().port())
        {
            return resp.header("alt-svc", v);
        }
        resp
    }

    fn on_response(&self, req: &Request, sent: &Sent) {
        let Sent { status, bytes, first_byte, total: elapsed, tag } = *sent;
        let tag = reel_cache::Tag::from_raw(tag);
        let result = tag.result();
        self.metrics.record(status, result.index(), bytes, first_byte, elapsed);
        let hit = self.metrics.is_from_cache(result.index());
        self.sites.record(&self.metrics.sites, tag.site(), status, bytes, hit);
        if reel_cache::hls::is_playlist(req.path().as_bytes()) {
            self.metrics.record_playlist(result.index());
        }
        self.metrics.record_protocol(match req.version() {
            reel_http::Version::Http2 => reel_ops::metrics::Protocol::Http2,
            reel_http::Version::Http3 => reel_ops::metrics::Protocol::Http3,
            _ => reel_ops::metrics::Protocol::Http1,
        });
        let g = self.generation.borrow();
        let cmcd = crate::worker::cmcd::of(req, &g.live.cache, &g.cmcd, self.worker);
        if let Some(log) = &g.log {
            // Tokens are credentials: never written to a log (which may be shipped).
            let mut target = std::borrow::Cow::Borrowed(req.target().as_bytes());
            for param in
                g.live.cfg.site.iter().filter_map(|s| Some(s.token.as_ref()?.param.as_str()))
            {
                if let std::borrow::Cow::Owned(t) =
                    reel_access::token::redact::redact(&target, param)
                {
                    target = std::borrow::Cow::Owned(t);
                }
            }
            log.log(&Entry {
                time: SystemTime::now() - elapsed,
                client: req.peer(),
                peer: socket_peer(req.peer(), req.socket_peer()),
                method: req.method().as_str(),
                host: req.host().unwrap_or("").as_bytes(),
                target: &target,
                protocol: match req.version() {
                    reel_http::Version::Http10 => "HTTP/1.0",
                    reel_http::Version::Http11 => "HTTP/1.1",
                    reel_http::Version::Http2 => "HTTP/2",
                    reel_http::Version::Http3 => "HTTP/3",
                },
                status,
                bytes,
                cache: result.as_str(),
                origin_time: tag.origin_time(),
                total_time: elapsed,
                user_agent: req.header("user-agent").unwrap_or(b""),
                refused: None,
                denied: tag.denied_reason().map(reel_access::DenyReason::as_str),
                cmcd: cmcd.as_ref().map(|data| reel_ops::access_log_cmcd::CmcdLine {
                    data,
                    combined_keys: &g.live.cfg.access_log.cmcd_keys,
                }),
            });
        }
    }

    fn keep_alive(&self) -> bool {
        !self.shared.closing()
    }

    fn on_reject(&self, r: &Refusal<'_>) {
        self.metrics.record(r.status, CacheResult::Local.index(), r.bytes, None, Duration::ZERO);
        self.sites.record(&self.metrics.sites, 0, r.status, r.bytes, false);
        self.metrics.client_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // As nginx does: a line with what is known, so the log matches the counters.
        let g = self.generation.borrow();
        if let Some(log) = &g.log {
            log.log(&Entry {
                time: SystemTime::now() - r.elapsed,
                client: r.peer,
                peer: socket_peer(r.peer, r.socket_peer),
                method: "",
                host: b"",
                target: b"",
                protocol: "",
                status: r.status,
                bytes: r.bytes,
                cache: CacheResult::Local.as_str(),
                origin_time: None,
                total_time: r.elapsed,
                user_agent: b"",
                refused: Some(Refused { request_line: r.request_line, reason: r.reason }),
                denied: None,
                cmcd: None,
            });
        }
    }
}

/// The socket's peer for the access log, when it is not the client.
fn socket_peer(client: SocketAddr, socket: SocketAddr) -> Option<std::net::IpAddr> {
    (client.ip() != socket.ip()).then_some(socket.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `serve_connection`'s arguments for the real handler.
    type ServeArgs =
        (TcpStream, SocketAddr, Rc<WorkerState>, Rc<reel_http::Limits>, watch::Receiver<bool>);

    /// The size of a plain connection's future for the real handler, from the function's
    /// type alone (nothing is run).
    fn plain_size<F, R>(_: F) -> usize
    where
        F: FnOnce(ServeArgs) -> R,
    {
        std::mem::size_of::<ConnTask<R, std::future::Ready<()>>>()
    }

    /// A plain connection waiting for its next request (before it is parked) is one task
    /// cell (tokio's header and trailer, 96 bytes,
    /// around this future, 128-aligned) plus the socket's registration. mimalloc serves a
    /// 128-aligned request that is not a power of two from the next class up: a future of
    /// up to 544 bytes keeps the cell in the 768-byte class (measured with uprobes on
    /// mimalloc: 768 + 256 bytes per idle connection); the unboxed future must not grow
    /// past it, nor back into a second allocation.
    #[test]
    fn an_idle_plain_connection_is_one_task_cell_of_768_bytes_or_less() {
        let n = plain_size(|(s, p, h, l, d): ServeArgs| reel_http::serve_parkable(s, p, h, l, d));
        assert!(n <= 544, "the plain connection future is {n} bytes");
    }
}
