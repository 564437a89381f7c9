//! TLS listeners in the binary: builds each TLS listener's serving state from the config
//! (certificates loaded and checked against their keys, SNI, ALPN, the process's
//! session-ticket keys), reports problems against the config keys they come from, and
//! serves an accepted connection on the worker that accepted it: the handshake, then
//! HTTP/2 or HTTP/1.1 as ALPN chose.
//!
//! A reload builds a new [`TlsState`] and swaps it in with the generation: connections
//! already open keep their session; new handshakes use the new certificates. A state that
//! fails to build (a missing file, a key that does not match) fails the reload, so the
//! old certificates keep serving.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use reel_config::{Config, TlsCert, TlsVersion};
use reel_http::{H2Settings, Handler, Limits};
use reel_ops::metrics::{Kind, PromWriter};
use reel_tls::{
    Alpn, CertSource, CertSpec, HandshakeCounters, HandshakeSnapshot, KtlsMode, ListenerTls,
    LoadedCert, Tickets,
};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// A problem with a TLS key of the config: the key path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Problem {
    /// Key path, e.g. `listener[1].tls_key`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// The TLS side of one generation.
#[derive(Default)]
pub(crate) struct TlsState {
    listeners: HashMap<String, Arc<ListenerTls>>,
    /// Every certificate loaded, each once: the listeners' own, then `[[certificate]]`.
    certs: Vec<Arc<LoadedCert>>,
}

/// Names of a `tls_cert = "self-signed"` certificate: the loopback names and every site
/// host (wildcards included; the catch-all `"*"` names no certificate name).
pub(crate) fn self_signed_names(cfg: &Config) -> Vec<String> {
    let mut names: Vec<String> =
        ["localhost", "127.0.0.1", "::1"].iter().map(|s| s.to_string()).collect();
    for site in &cfg.site {
        for h in site.hosts.iter().filter(|h| *h != "*") {
            let h = h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
            if !names.contains(&h) {
                names.push(h);
            }
        }
    }
    names
}

impl TlsState {
    /// Loads every certificate the config names and builds each TLS listener's
    /// configuration with `tickets`; every problem found is returned.
    pub(crate) fn build(cfg: &Config, tickets: &Tickets) -> Result<TlsState, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut load = |spec: CertSpec| match reel_tls::cert::load(&spec) {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                problems.push(Problem { key: e.config_key().to_owned(), message: e.to_string() });
                None
            }
        };
        let extra: Vec<Arc<LoadedCert>> = cfg
            .certificate
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                load(CertSpec {
                    source: CertSource::Files { cert: c.cert.clone(), key: c.key.clone() },
                    names: c.names.clone(),
                    cert_key: format!("certificate[{i}].cert"),
                    key_key: format!("certificate[{i}].key"),
                })
            })
            .collect();
        let mut self_signed: Option<Arc<LoadedCert>> = None;
        let mut defaults = Vec::new();
        for (i, l) in cfg.listener.iter().enumerate() {
            let cert = match &l.tls_cert {
                None => continue,
                Some(TlsCert::SelfSigned) => match &self_signed {
                    Some(c) => Some(c.clone()),
                    None => {
                        let c = load(CertSpec {
                            source: CertSource::SelfSigned { names: self_signed_names(cfg) },
                            names: Vec::new(),
                            cert_key: format!("listener[{i}].tls_cert"),
                            key_key: format!("listener[{i}].tls_cert"),
                        });
                        self_signed.clone_from(&c);
                        c
                    }
                },
                Some(TlsCert::File(p)) => load(CertSpec {
                    source: CertSource::Files {
                        cert: p.clone(),
                        key: l.tls_key.clone().unwrap_or_default(),
                    },
                    names: Vec::new(),
                    cert_key: format!("listener[{i}].tls_cert"),
                    key_key: format!("listener[{i}].tls_key"),
                }),
            };
            if let Some(c) = cert {
                defaults.push((i, c));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut state = TlsState::default();
        for (i, cert) in defaults {
            let l = &cfg.listener[i];
            let key = format!("listener[{i}]");
            match reel_tls::server_config(
                &key,
                cert.clone(),
                &extra,
                l.sni_strict,
                l.http2_enabled(),
                match l.min_tls_version {
                    TlsVersion::Tls12 => reel_tls::TlsVersion::Tls12,
                    TlsVersion::Tls13 => reel_tls::TlsVersion::Tls13,
                },
                match l.ktls.unwrap_or_default() {
                    reel_config::Ktls::Auto => KtlsMode::Auto,
                    reel_config::Ktls::Off => KtlsMode::Off,
                },
                tickets,
            ) {
                Ok(t) => {
                    state.listeners.insert(l.name.clone(), Arc::new(t));
                }
                Err(e) => problems.push(Problem { key, message: e.to_string() }),
            }
            if !state.certs.iter().any(|c| Arc::ptr_eq(c, &cert)) {
                state.certs.push(cert);
            }
        }
        state.certs.extend(extra);
        if problems.is_empty() { Ok(state) } else { Err(problems) }
    }

    /// The TLS configuration of listener `name`, `None` for a plain listener.
    pub(crate) fn listener(&self, name: &str) -> Option<&Arc<ListenerTls>> {
        self.listeners.get(name)
    }

    /// Certificates that have expired, are not yet valid, or expire within 30 days.
    pub(crate) fn warnings(&self, now: SystemTime) -> Vec<Problem> {
        self.certs
            .iter()
            .filter_map(|c| {
                c.expiry_warning(now).map(|message| Problem { key: c.config_key.clone(), message })
            })
            .collect()
    }

    /// `/status`: each certificate's names, source and validity, and each TLS listener.
    pub(crate) fn status(&self) -> Value {
        let unix = |t: SystemTime| {
            t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
        };
        let now = SystemTime::now();
        let certs: Vec<Value> = self
            .certs
            .iter()
            .map(|c| {
                json!({
                    "key": c.config_key,
                    "source": c.origin,
                    "names": c.names,
                    "not_before": unix(c.not_before),
                    "not_after": c.not_after_unix(),
                    "expires_in_days": (c.not_after_unix() - unix(now)) / 86_400,
                    "warning": c.expiry_warning(now),
                })
            })
            .collect();
        let mut listeners: Vec<Value> = self
            .listeners
            .iter()
            .map(|(name, l)| {
                json!({
                    "name": name,
                    "http2": l.http2,
                    "sni_strict": l.resolver.is_strict(),
                    "ktls": l.ktls.as_str(),
                    "ktls_in_use": l.kernel_tls,
                    "min_tls_version": l.min_version.number(),
                    "default_certificate": l.certs.first().map(|c| c.config_key.clone()),
                })
            })
            .collect();
        listeners.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        json!({"certificates": certs, "listeners": listeners})
    }

    /// Prometheus families: certificate expiry per server name, handshake counts, and
    /// ClientHellos that named an IP address.
    pub(crate) fn render_prometheus(
        &self,
        counters: &[Arc<HandshakeCounters>],
        p: &mut PromWriter,
    ) {
        p.family(
            "reel_tls_cert_expiry_timestamp_seconds",
            Kind::Gauge,
            "Unix time a TLS certificate expires (notAfter), per server name.",
        );
        for c in &self.certs {
            let names: Vec<&str> = if c.names.is_empty() {
                vec![c.origin.as_str()]
            } else {
                c.names.iter().map(String::as_str).collect()
            };
            for n in names {
                let at = c.not_after_unix().max(0) as u64;
                p.sample(
                    "reel_tls_cert_expiry_timestamp_seconds",
                    &[("name", n), ("key", &c.config_key)],
                    at,
                );
            }
        }
        let mut total = HandshakeSnapshot::default();
        for c in counters {
            total.add(c);
        }
        p.family(
            "reel_tls_handshakes_total",
            Kind::Counter,
            "TLS handshakes by result, version and resumption.",
        );
        for (result, version, resumed, n) in total.rows() {
            let resumed = if resumed { "true" } else { "false" };
            p.sample(
                "reel_tls_handshakes_total",
                &[("result", result), ("version", version), ("resumed", resumed)],
                n,
            );
        }
        p.family(
            "reel_tls_connections_total",
            Kind::Counter,
            "TLS connections by who seals their records after the handshake (ktls: the \
             kernel; userspace: reel), with the reason they are not the kernel's.",
        );
        for (path, reason, n) in total.paths() {
            p.sample("reel_tls_connections_total", &[("path", path), ("reason", reason)], n);
        }
        p.family(
            "reel_tls_key_update_closes_total",
            Kind::Counter,
            "TLS connections closed because the client asked to update its keys (kTLS \
             connections: reel's own record layer updates them).",
        );
        p.sample(
            "reel_tls_key_update_closes_total",
            &[],
            reel_tls::KEY_UPDATE_CLOSES.load(std::sync::atomic::Ordering::Relaxed),
        );
        p.family(
            "reel_tls_sni_ip_address_total",
            Kind::Counter,
            "TLS ClientHellos whose server name (SNI) was an IP address, served as if they sent none.",
        );
        p.sample("reel_tls_sni_ip_address_total", &[], total.sni_ip_address());
    }
}

/// Serves one connection accepted on a TLS listener: the handshake (bounded by the head
/// timeout, counted in `counters`), then HTTP/2 or HTTP/1.1 by ALPN.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve<H: Handler>(
    tls: Arc<ListenerTls>,
    stream: TcpStream,
    peer: reel_http::Peer,
    handler: Rc<H>,
    limits: Rc<Limits>,
    h2: Rc<H2Settings>,
    drain: watch::Receiver<bool>,
    counters: &HandshakeCounters,
) {
    let local =
        stream.local_addr().unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)));
    let r = reel_tls::accept_counted(&tls, stream, limits.header_timeout, counters).await;
    let (stream, info) = match r {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(peer = %peer.socket, error = %e, "TLS handshake failed");
            return;
        }
    };
    reel_http::serve_session(
        stream,
        info.alpn == Alpn::H2,
        peer,
        local,
        handler,
        limits,
        h2,
        drain,
    )
    .await;
}
