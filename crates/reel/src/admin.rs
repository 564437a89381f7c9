//! The admin listener (default `127.0.0.1:9090`): `/metrics`, `/status`, the load history
//! and its dashboard, reload, drain, resume and purge. It runs on its own thread with its own small runtime, off the
//! workers, and speaks HTTP through the same codec as the data listeners.
//!
//! The folder holds what only the admin listener reads: the load history behind
//! `/status/history` and the dashboard page (`history`, `dashboard.html`), the `/metrics`
//! exposition (`metrics`), the host's hidden limits it reports (`host`) and the token check
//! (`auth`).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /metrics` | Prometheus text format (rendered by [`crate::admin::metrics`]) |
//! | `GET /status` | JSON: version, config hash and load time, core plan, workers, origins, store, reloads |
//! | `GET /status/config` | the running generation's effective configuration as TOML, secrets redacted ([`crate::cli::print`]) |
//! | `GET /status/history[?since=UNIX_MS]` | JSON: the last 15 minutes, one sample a second ([`crate::admin::history`]), and the header figures |
//! | `GET /dashboard` | a self-contained HTML page drawing `/status/history`, refreshed every second |
//! | `POST /admin/reload` | re-read the config (like SIGHUP); 200 with the outcome, 400 with the errors |
//! | `POST /admin/drain`, `POST /admin/resume` | `/healthz` answers 503 (draining) or resumes |
//! | `POST /admin/purge?url=URL[&prefix=1][&soft=1]` | purge one URL, or every URL under a prefix |
//!
//! Every request must name this listener in `Host`: `localhost`, a loopback address or the
//! address the connection reached, any port (421 otherwise), so a browser page whose name
//! was rebound to 127.0.0.1 cannot talk to it. With a token configured, every request
//! needs `Authorization: Bearer <token>` or HTTP Basic authentication with the token as
//! the password (401 otherwise; the dashboard's 401 asks the browser for it). The `POST` endpoints, which change
//! state, also need `X-Reel-Admin: <anything>` or `Content-Type: application/json` (403
//! otherwise): a cross-site form or a simple `fetch` can send neither without a CORS
//! preflight, which this listener never grants, so a page in the operator's browser cannot
//! drain the node even without a token.

pub(crate) mod auth;
pub(crate) mod history;
pub(crate) mod host;
pub(crate) mod metrics;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use bytes::Bytes;
use reel_http::{Handler, Method, Request, RequestBody, Response};
use serde_json::json;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::admin::history::History;
use crate::state::Shared;

/// The dashboard page: inline CSS and script, no other asset.
const DASHBOARD: &str = include_str!("admin/dashboard.html");

/// A running admin listener.
pub(crate) struct Admin {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    /// A duplicate of the listening socket, for a successor process.
    listener: std::net::TcpListener,
}

impl Admin {
    /// The bound address.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A duplicate of the listening socket (for a binary upgrade).
    pub(crate) fn listener_fd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.listener.try_clone().map(Into::into)
    }

    /// Stops accepting; requests already accepted are answered (for up to [`STOP_GRACE`]).
    pub(crate) fn stop_accepting(&self) {
        let _ = self.stop.send(true);
    }

    /// Stops accepting and waits for the thread.
    pub(crate) fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds the admin address (or takes `inherited`, a socket the process took over) and
/// serves it on a new thread.
pub(crate) fn start(
    shared: Arc<Shared>,
    inherited: Option<std::net::TcpListener>,
) -> anyhow::Result<Admin> {
    let cfg = &shared.live().cfg;
    let addr = cfg.admin.address;
    if let Some(p) = crate::state::preflight::check_environment(cfg) {
        anyhow::bail!("{p}");
    }
    let a = &cfg.admin;
    if !addr.ip().is_loopback() && a.token.is_empty() && a.token_env.is_empty() {
        // Only `insecure_no_token` lets such a config through validation.
        warn!(
            address = %addr,
            "admin API on a non-loopback address without a token (admin.insecure_no_token): \
             anyone who reaches it can purge, reload and drain"
        );
    }
    let std_listener = match inherited {
        Some(l) => l,
        None => std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                anyhow::anyhow!("admin.address {addr}: {}", reel_runtime::in_use(addr))
            }
            _ => anyhow::Error::new(e).context(format!("admin.address {addr}")),
        })?,
    };
    std_listener.set_nonblocking(true)?;
    let keep = std_listener.try_clone()?;
    let addr = std_listener.local_addr()?;
    let (stop, stop_rx) = watch::channel(false);
    // The history's first reading, before anything is served: the first sample then
    // covers every request from the start.
    let mut history = History::new(crate::admin::history::CAPACITY);
    history.tick(&shared);
    let thread = std::thread::Builder::new().name("reel-admin".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                warn!(error = %e, "admin runtime failed to start");
                return;
            }
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, serve(std_listener, shared, history, stop_rx));
    })?;
    Ok(Admin { addr, stop, thread: Some(thread), listener: keep })
}

async fn serve(
    l: std::net::TcpListener,
    shared: Arc<Shared>,
    history: History,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(l) else { return };
    let history = Rc::new(RefCell::new(history));
    let handler = Rc::new(AdminHandler { shared: shared.clone(), history: history.clone() });
    // The history sampler runs here, off the workers: it only reads their counters.
    tokio::task::spawn_local(async move {
        let second = std::time::Duration::from_secs(1);
        // The first reading was taken at start: the next one a second later.
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + second, second);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            history.borrow_mut().tick(&shared);
        }
    });
    let limits = Rc::new(reel_http::Limits::default());
    let mut conns = tokio::task::JoinSet::new();
    loop {
        // Finished connections leave the set at once, so it holds only live ones.
        while conns.try_join_next().is_some() {}
        tokio::select! {
            r = listener.accept() => {
                let Ok((stream, peer)) = r else { continue };
                let h = handler.clone();
                let lim = limits.clone();
                let d = stop.clone();
                conns.spawn_local(async move {
                    reel_http::serve_connection(stream, peer, h, lim, d).await;
                });
            }
            _ = stop.changed() => break,
        }
    }
    // A request already accepted is answered (the stop is also the connections' drain
    // signal: idle ones close, one in flight ends with `Connection: close`). The listening
    // socket may live on in a successor, which takes what is still queued; dropping these
    // tasks would reset a request a successor could not see.
    let finish = async { while conns.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(STOP_GRACE, finish).await;
}

/// How long a stopped admin listener lets accepted requests finish.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

struct AdminHandler {
    shared: Arc<Shared>,
    history: Rc<RefCell<History>>,
}

fn json_response(status: u16, v: serde_json::Value) -> Response {
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    Response::new(status)
        .header("content-type", Bytes::from_static(b"application/json"))
        .header("cache-control", Bytes::from_static(b"no-store"))
        .bytes(s)
}

fn query_param<'a>(q: &'a str, name: &str) -> Option<&'a str> {
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then_some(v)
    })
}

/// Whether `Host` names this listener (DNS rebinding defence): `localhost` or an IP literal
/// that is loopback or the address the connection reached. Any port: an ssh tunnel may
/// forward another one.
fn host_allowed(req: &Request) -> bool {
    let Some(authority) = req.host() else { return false };
    let host = match authority.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((h, port)) if port.is_empty() || port.starts_with(':') => h,
            _ => return false,
        },
        None => authority.split_once(':').map_or(authority, |(h, _)| h),
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback() || ip == req.local().ip())
}

/// Whether a state-changing request is one a browser only sends cross-site after a CORS
/// preflight (Fetch standard, "CORS-safelisted request-header"): a custom header or a JSON
/// content type. Forms and simple requests carry neither.
fn deliberate(req: &Request) -> bool {
    if req.header("x-reel-admin").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    req.header("content-type").is_some_and(|v| {
        let media = v.split(|&b| b == b';').next().unwrap_or(b"").trim_ascii();
        media.eq_ignore_ascii_case(b"application/json")
    })
}

impl AdminHandler {
    fn authorized(&self, req: &Request) -> bool {
        let live = self.shared.live();
        let Some(token) = live.cfg.admin.resolved_token() else {
            // A `token_env` whose variable vanished means "a token is wanted": fail closed.
            return live.cfg.admin.token_env.is_empty();
        };
        let Some(h) = req.header("authorization") else { return false };
        crate::admin::auth::carries_token(h, token.as_bytes())
    }

    /// `GET /status/config`: the running generation's effective configuration.
    fn config(&self) -> Response {
        let live = self.shared.live_full();
        match crate::cli::print::render(&live.cfg) {
            Ok(text) => Response::new(200)
                .header("content-type", Bytes::from_static(b"text/plain; charset=utf-8"))
                .header("cache-control", Bytes::from_static(b"no-store"))
                .header("x-reel-config-generation", Bytes::from(live.generation.to_string()))
                .bytes(text),
            Err(e) => json_response(500, json!({"error": e.to_string()})),
        }
    }

    fn metrics(&self) -> Response {
        Response::new(200)
            .header("content-type", Bytes::from_static(b"text/plain; version=0.0.4"))
            .bytes(crate::admin::metrics::render(&self.shared))
    }

    fn status(&self) -> Response {
        let s = &self.shared;
        let live = s.live_full();
        let loaded =
            live.loaded_at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let plan: Vec<_> = s
            .plan
            .cpus
            .iter()
            .map(|c| json!({"cpu": c.cpu, "role": c.role.to_string(), "evidence": c.evidence}))
            .collect();
        let workers: Vec<_> = s
            .worker_stats()
            .iter()
            .enumerate()
            .map(|(i, w)| {
                json!({
                    "index": i,
                    "cpu": s.plan.workers.get(i),
                    "open_connections": w.open.load(Ordering::Relaxed),
                    "parked_connections": w.parked.load(Ordering::Relaxed),
                    "accepted": w.accepted.load(Ordering::Relaxed),
                    "requests": s.metrics.get(i).map_or(0, |m| m.requests_total()),
                    "refused": w.refused.load(Ordering::Relaxed),
                    "pinned": w.pinned.load(Ordering::Relaxed),
                })
            })
            .collect();
        let st = s.store.stats();
        let a = &live.cfg.access_log;
        let access_log = live.access_log.as_ref().map(|l| {
            json!({
                "path": a.path.display().to_string(),
                "format": if l.format() == reel_ops::access_log::Format::Json { "json" } else { "combined" },
                "buffer_bytes": a.buffer.bytes(),
                "flush_interval_ms": a.flush_interval.get().as_millis() as u64,
                "written_lines": l.written_lines(),
                "dropped_lines": l.dropped_lines(),
                "write_errors": l.write_errors(),
            })
        });
        json_response(
            200,
            json!({
                "version": env!("CARGO_PKG_VERSION"),
                "pid": std::process::id(),
                "uptime_secs": s.started.elapsed().map(|d| d.as_secs()).unwrap_or(0),
                "config": {
                    "file": s.config_path.as_ref().map_or_else(
                        || crate::process::defaults::NAME.to_owned(),
                        |p| p.display().to_string()
                    ),
                    "hash": live.cfg.hash(),
                    "generation": live.generation,
                    "loaded_at": loaded,
                },
                "reload": s.reload_status(),
                "upgrade": s.upgrade_status(),
                "closing_connections": s.closing(),
                "listeners": s.listeners(),
                "http3": s.quic.status(),
                "draining": s.health().is_some_and(|h| h.draining()),
                "health": s.health().map(|h| h.answer().verdict.clone()),
                "plan": {"cpus": plan, "workers": s.plan.workers, "irq_cpus": s.plan.irq_cpus, "warnings": s.plan.warnings},
                "workers": workers,
                "origins": live.origins.snapshot(),
                "tls": live.tls.status(),
                "origin_warnings": live.origins.warnings(),
                "access_log": access_log,
                "store": {
                    "objects": st.objects, "bytes_used": st.bytes_used, "capacity": st.capacity,
                    "evictions": st.evictions, "write_errors": st.write_errors,
                    "read_errors": st.read_errors, "volumes": st.volumes,
                    "quarantined_volumes": st.quarantined_volumes,
                    "frozen": s.store.is_frozen(),
                    "disks": disks_json(&s.store),
                    "scrub": {
                        "rate": s.store.scrub_rate(), "bytes": st.scrub_bytes,
                        "objects": st.scrub_objects, "corrupt": st.scrub_corrupt,
                        "passes": st.scrub_passes,
                    },
                },
            }),
        )
    }

    /// `GET /status/history`: the samples after `since` and what the dashboard's header shows.
    fn history(&self, req: &Request) -> Response {
        let since = match query_param(req.query().unwrap_or(""), "since") {
            None => 0,
            Some(v) => match v.parse::<u64>() {
                Ok(ms) => ms,
                // Not the whole ring: a poller with a broken cursor should hear of it.
                Err(_) => {
                    return json_response(
                        400,
                        json!({"error": "since must be Unix milliseconds (a whole number)"}),
                    );
                }
            },
        };
        let s = &self.shared;
        let live = s.live_full();
        let loaded = crate::admin::history::unix_ms(live.loaded_at) / 1000;
        let now = std::time::SystemTime::now();
        let now_secs = crate::admin::history::unix_ms(now) as i64 / 1000;
        let tls = live.tls.status();
        let nearest = tls["certificates"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| Some((c["not_after"].as_i64()?, c)))
            .min_by_key(|(t, _)| *t)
            .map(|(t, c)| {
                json!({
                    "key": c["key"], "names": c["names"], "not_after": t,
                    "days_left": (t - now_secs).div_euclid(86_400),
                })
            });
        let verdict = s.health().map(|h| h.answer().verdict.clone());
        let h = self.history.borrow();
        let samples: Vec<_> = h.since(since).collect();
        // Compact: 900 samples pretty-printed would be several times the size.
        let body = json!({
            "now": crate::admin::history::unix_ms(now),
            "interval_ms": 1000,
            "capacity": h.capacity(),
            "header": {
                "version": env!("CARGO_PKG_VERSION"),
                "health": verdict.as_ref().map(|v| v.status),
                "reasons": verdict.as_ref().map_or(Vec::new(), |v| v.reasons.clone()),
                "config": {"generation": live.generation, "hash": live.cfg.hash(), "loaded_at": loaded},
                "draining": s.health().is_some_and(|h| h.draining()),
                "certificate": nearest,
                "workers": s.metrics.len(),
                "uptime_secs": s.started.elapsed().map(|d| d.as_secs()).unwrap_or(0),
            },
            "samples": samples,
        });
        let mut text = body.to_string();
        text.push('\n');
        Response::new(200)
            .header("content-type", Bytes::from_static(b"application/json"))
            .header("cache-control", Bytes::from_static(b"no-store"))
            .bytes(text)
    }

    /// `GET /dashboard`: the page. Its script and style are inline, allowed by the policy
    /// for this response only; it may fetch from this origin and nothing else.
    fn dashboard(&self) -> Response {
        Response::new(200)
            .header("content-type", Bytes::from_static(b"text/html; charset=utf-8"))
            .header("cache-control", Bytes::from_static(b"no-store"))
            .header(
                "content-security-policy",
                Bytes::from_static(
                    b"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'",
                ),
            )
            .header("x-content-type-options", Bytes::from_static(b"nosniff"))
            .bytes(DASHBOARD)
    }

    async fn purge(&self, req: &Request) -> Response {
        let q = req.query().unwrap_or("");
        let Some(url) = query_param(q, "url") else {
            return json_response(400, json!({"error": "purge needs ?url=http://HOST/PATH"}));
        };
        let url = percent_encoding::percent_decode_str(url).decode_utf8_lossy().into_owned();
        let prefix = query_param(q, "prefix").is_some_and(|v| v == "1" || v == "true");
        let soft = query_param(q, "soft").is_some_and(|v| v == "1" || v == "true");
        let live = self.shared.live_full();
        match self.shared.cache.purge(&live.cache, &url, prefix, soft).await {
            Ok(n) => {
                info!(%url, prefix, soft, purged = n, "purge");
                json_response(200, json!({"purged": n, "url": url, "prefix": prefix, "soft": soft}))
            }
            Err(e) => json_response(400, json!({"error": e.to_string()})),
        }
    }
}

impl AdminHandler {
    /// `POST /admin/store/disk?path=DIR&online=1|0`: brings a disk back into service
    /// (reopened empty after a probe write) or takes it out.
    async fn store_disk(&self, req: &Request) -> Response {
        let q = req.query().unwrap_or("");
        let (Some(path), Some(online)) = (query_param(q, "path"), query_param(q, "online")) else {
            return json_response(400, json!({"error": "needs ?path=DIR&online=1 (or online=0)"}));
        };
        let online = match online {
            "1" | "true" => true,
            "0" | "false" => false,
            _ => return json_response(400, json!({"error": "online must be 1 or 0"})),
        };
        let path = percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned();
        let store = self.shared.store.clone();
        let p = std::path::PathBuf::from(&path);
        // Opening a disk preallocates its volumes: blocking file I/O, off the admin loop.
        let r = tokio::task::spawn_blocking(move || store.set_online(&p, online)).await;
        let status = match r {
            Ok(Ok(changed)) => {
                info!(disk = %path, online, changed, "store disk state set by the admin API");
                return json_response(
                    200,
                    json!({"path": path, "online": online, "changed": changed,
                           "disks": disks_json(&self.shared.store)}),
                );
            }
            Ok(Err(e @ reel_store::StoreError::Config(_))) => (404, e.to_string()),
            Ok(Err(e @ reel_store::StoreError::Closed)) => (409, e.to_string()),
            Ok(Err(e)) => (500, e.to_string()),
            Err(e) => (500, e.to_string()),
        };
        json_response(status.0, json!({"path": path, "online": online, "error": status.1}))
    }
}

/// Every disk of the store: path, state, why it is offline, errors, bytes.
fn disks_json(store: &reel_store::Store) -> serde_json::Value {
    store
        .disks()
        .into_iter()
        .map(|d| {
            json!({
                "path": d.path.display().to_string(),
                "state": d.state.as_str(),
                "reason": d.reason,
                "errors": d.errors,
                "size": d.size,
                "objects": d.stats.objects,
                "bytes_used": d.stats.bytes_used,
                "capacity": d.stats.capacity,
                "read_errors": d.stats.read_errors,
                "write_errors": d.stats.write_errors,
                "quarantined_volumes": d.stats.quarantined_volumes,
            })
        })
        .collect()
}

impl Handler for AdminHandler {
    async fn handle(&self, req: &Request, _body: &mut RequestBody<'_>) -> Response {
        if !host_allowed(req) {
            return json_response(
                421,
                json!({"error": "the Host must be localhost or this admin listener's address"}),
            );
        }
        if !self.authorized(req) {
            // The page is what a person opens in a browser: ask for the token there.
            let challenge: &'static [u8] = if req.path() == "/dashboard" {
                crate::admin::auth::BASIC_CHALLENGE
            } else {
                b"Bearer"
            };
            return Response::error(401).header("www-authenticate", Bytes::from_static(challenge));
        }
        let post = *req.method() == Method::Post;
        if post && !deliberate(req) {
            return json_response(
                403,
                json!({"error": "state-changing admin requests need the header X-Reel-Admin: 1 \
                                 (or Content-Type: application/json)"}),
            );
        }
        match (req.path(), post) {
            ("/metrics", false) => self.metrics(),
            ("/status", false) => self.status(),
            ("/status/history", false) => self.history(req),
            ("/status/config", false) => self.config(),
            ("/dashboard", false) => self.dashboard(),
            ("/admin/reload", true) => match self.shared.request_reload().await {
                Ok(st) => json_response(200, json!({"reloaded": true, "status": st})),
                Err(e) => json_response(400, json!({"reloaded": false, "error": e.to_string()})),
            },
            ("/admin/drain", true) | ("/admin/resume", true) => {
                let on = req.path() == "/admin/drain";
                if let Some(h) = self.shared.health() {
                    h.set_draining(on);
                }
                info!(draining = on, "drain state changed by the admin API");
                json_response(200, json!({"draining": on}))
            }
            ("/admin/purge", true) => self.purge(req).await,
            ("/admin/store/disk", true) => self.store_disk(req).await,
            (
                "/metrics" | "/status" | "/status/history" | "/status/config" | "/dashboard",
                true,
            ) => Response::method_not_allowed(&[Method::Get, Method::Head]),
            (
                "/admin/reload" | "/admin/drain" | "/admin/resume" | "/admin/purge"
                | "/admin/store/disk",
                false,
            ) => Response::method_not_allowed(&[Method::Post]),
            _ => Response::error(404),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(local: &str, host: &str, extra: &str) -> Request {
        let addr = |s: &str| s.parse::<SocketAddr>().expect("address");
        let mut r = Request::new(addr("192.0.2.1:5000"), addr(local));
        let raw = format!("POST /admin/drain HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
        r.parse_head(raw.as_bytes(), &reel_http::Limits::default()).expect("valid head");
        r
    }

    #[test]
    fn host_names_the_listener() {
        for (local, host) in [
            ("127.0.0.1:9090", "127.0.0.1:9090"),
            ("127.0.0.1:9090", "localhost"),
            ("127.0.0.1:9090", "127.0.0.2"),
            ("[::1]:9090", "[::1]:9090"),
            ("[::1]:9090", "[::1]"),
            ("10.0.0.5:9090", "10.0.0.5:9090"),
            ("10.0.0.5:9090", "localhost:19090"),
        ] {
            assert!(host_allowed(&req(local, host, "")), "{host} on {local}");
        }
        for (local, host) in [
            ("127.0.0.1:9090", "evil.example:9090"),
            ("127.0.0.1:9090", "localhost.evil.example"),
            ("127.0.0.1:9090", "10.0.0.5:9090"),
            ("[::1]:9090", "[::1]x"),
            ("10.0.0.5:9090", "edge1.internal:9090"),
        ] {
            assert!(!host_allowed(&req(local, host, "")), "{host} on {local}");
        }
    }

    #[test]
    fn only_preflighted_requests_change_state() {
        let yes = |extra: &str| deliberate(&req("127.0.0.1:9090", "localhost", extra));
        assert!(yes("X-Reel-Admin: 1\r\n"));
        assert!(yes("content-type: application/json\r\n"));
        assert!(yes("Content-Type: APPLICATION/JSON ; charset=utf-8\r\n"));
        assert!(!yes(""));
        assert!(!yes("X-Reel-Admin:\r\n"));
        assert!(!yes("content-type: text/plain\r\n"));
        assert!(!yes("content-type: application/x-www-form-urlencoded\r\n"));
        assert!(!yes("content-type: application/jsonx\r\n"));
    }
}
