//! Origin client for the edge cache: ordered origin groups, health checks, per-worker
//! connection pools (HTTP/1.1, and HTTP/2 by ALPN, over TCP or TLS).
//!
//! * [`Origins`] is built once from every [`GroupSpec`] and shared by all workers (it is
//!   `Send + Sync`). It owns the health state and statistics of every host, runs the active
//!   health checker on its own thread ([`Origins::start_health_checks`]) and exports
//!   [`Origins::snapshot`] for `/status` and `/metrics`.
//! * [`WorkerClient`] ([`Origins::worker_client`]) is created on each worker thread. It owns
//!   that worker's keep-alive pool, picks hosts inside the best healthy tier (round robin, or
//!   rendezvous hashing of the request's [`Affinity`], see [`Balance`]) and retries idempotent
//!   requests on the next host when nothing came back yet.
//! * A group may authenticate to its origin ([`GroupSpec::request_headers`], a shared secret;
//!   [`GroupSpec::s3`], AWS Signature Version 4): every request and health probe to its
//!   hosts carries them, and the values never appear in `Debug` output or logs.
//! * HTTPS hosts ([`HostSpec::tls`]) are verified against the system roots or the group's
//!   `ca_file` ([`TlsSpec`]); health checks and pooled connections use TLS the same way.
//!
//! Destinations come only from the specs: a request's own `Host` never chooses where it goes.
//! One host listed in two groups has independent health and statistics per group (the groups
//! may probe different paths), while a worker's pool shares connections by address.

#![forbid(unsafe_code)]

mod auth;
mod balance;
mod body;
mod client;
mod conn;
mod error;
mod headers;
mod health;
mod host;
mod places;
mod sigv4;
mod spec;
mod stats;
mod tls;

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

pub use balance::Affinity;
pub use body::{BodyAborted, BodyClosed, BodySender, RequestBody, StreamBody};
pub use client::{
    InterimResponse, InterimSink, OriginBody, OriginRequest, OriginResponse, OriginTiming,
    WorkerClient,
};
pub use error::{ErrorKind, OriginError};
pub use headers::strip_hop_by_hop;
pub use places::Requester;
pub use spec::{Balance, GroupSpec, HealthSpec, HostSpec, S3Auth, Secret, SpecError, TlsSpec};
pub use stats::{ErrorCounts, GroupSnapshot, HostSnapshot, OriginsSnapshot};

use health::Checker;
use host::HostState;

/// One group with its hosts' shared state.
struct Group {
    spec: GroupSpec,
    tiers: Vec<Vec<Arc<HostState>>>,
    /// Fields and signature added to its requests, if any.
    auth: Option<Arc<auth::GroupAuth>>,
}

/// Everything shared between the workers.
pub(crate) struct Inner {
    groups: Vec<Group>,
    by_name: HashMap<String, usize>,
}

impl Inner {
    fn hosts(&self) -> impl Iterator<Item = &Arc<HostState>> {
        self.groups.iter().flat_map(|g| g.tiers.iter().flatten())
    }
}

/// All origin groups, their hosts' health and statistics. Build once, share (e.g. in an
/// `Arc`) with every worker, and give each worker its own [`WorkerClient`].
///
/// Dropping it stops the health checker thread.
pub struct Origins {
    inner: Arc<Inner>,
    checker: Mutex<Option<Checker>>,
}

impl std::fmt::Debug for Origins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origins").field("groups", &self.inner.by_name.len()).finish()
    }
}

impl Origins {
    /// Validates the groups, loads their TLS trust anchors (`ca_file` or the system roots)
    /// and sets every host healthy.
    pub fn new(groups: Vec<GroupSpec>) -> Result<Self, SpecError> {
        let base = Instant::now();
        let mut by_name = HashMap::new();
        let mut out = Vec::with_capacity(groups.len());
        for spec in groups {
            spec.validate()?;
            if by_name.insert(spec.name.clone(), out.len()).is_some() {
                return Err(SpecError::DuplicateGroup(spec.name));
            }
            let gi = out.len();
            let tls = if spec.tiers.iter().flatten().any(|h| h.tls) {
                Some(tls::client_config(&spec.name, &spec.tls)?)
            } else {
                None
            };
            let auth = auth::GroupAuth::new(&spec)?.map(Arc::new);
            let mut tiers = Vec::with_capacity(spec.tiers.len());
            for (ti, hosts) in spec.tiers.iter().enumerate() {
                let mut tier = Vec::with_capacity(hosts.len());
                for h in hosts {
                    let target = match (&tls, h.tls) {
                        (Some(cfg), true) => {
                            Some(tls::TlsTarget::new(&spec.name, cfg, h.tls_name())?)
                        }
                        _ => None,
                    };
                    let health = spec.health.clone();
                    let limits = (health, spec.max_connections);
                    let mut state = HostState::new((&spec.name, gi), h, ti, target, limits, base);
                    state.auth = auth.clone();
                    tier.push(Arc::new(state));
                }
                tiers.push(tier);
            }
            out.push(Group { spec, tiers, auth });
        }
        Ok(Self { inner: Arc::new(Inner { groups: out, by_name }), checker: Mutex::new(None) })
    }

    /// Starts the active health checker thread for every group with checks enabled. Calling
    /// it again while it runs does nothing. Fails only if the thread or its runtime cannot be
    /// created.
    pub fn start_health_checks(&self) -> io::Result<()> {
        let mut guard = self.checker.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_some() {
            return Ok(());
        }
        let hosts: Vec<_> = self
            .inner
            .groups
            .iter()
            .filter(|g| g.spec.health.enabled)
            .flat_map(|g| g.tiers.iter().flatten().cloned())
            .collect();
        if hosts.is_empty() {
            return Ok(());
        }
        *guard = Some(Checker::start(hosts)?);
        Ok(())
    }

    /// Stops the health checker and waits for its thread. Down hosts then recover through
    /// the passive cool-down.
    pub fn stop_health_checks(&self) {
        let taken = self.checker.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(mut c) = taken {
            let hosts: Vec<_> = self.inner.hosts().cloned().collect();
            c.stop(&hosts);
        }
    }

    /// A client for the calling worker thread, with its own empty pool.
    pub fn worker_client(&self) -> WorkerClient {
        WorkerClient::new(self.inner.clone())
    }

    /// Whether `group` is configured.
    pub fn has_group(&self, group: &str) -> bool {
        self.inner.by_name.contains_key(group)
    }

    /// Current health of the host `addr` in `group`, `None` if there is no such host.
    pub fn is_healthy(&self, group: &str, addr: &str) -> Option<bool> {
        let g = &self.inner.groups[*self.inner.by_name.get(group)?];
        g.tiers.iter().flatten().find(|h| h.addr == addr).map(|h| h.is_healthy())
    }

    /// Configuration an operator must be warned about, one sentence each, for the log and
    /// `/status`: today, groups whose TLS hosts are not verified (`insecure_skip_verify`).
    pub fn warnings(&self) -> Vec<String> {
        self.inner
            .groups
            .iter()
            .filter(|g| g.spec.tls.insecure_skip_verify && g.tiers.iter().flatten().any(|h| h.tls.is_some()))
            .map(|g| {
                format!(
                    "origin group {:?}: insecure_skip_verify = true, origin TLS certificates are not verified",
                    g.spec.name
                )
            })
            .collect()
    }

    /// The hosts of `group`'s tier `tier` in the order a request with `affinity` tries them
    /// under rendezvous balancing, healthy or not (the ranking every node computes the same
    /// way). `None` if there is no such group or tier.
    pub fn rendezvous_order(
        &self,
        group: &str,
        tier: usize,
        affinity: Affinity,
    ) -> Option<Vec<String>> {
        let g = &self.inner.groups[*self.inner.by_name.get(group)?];
        let hosts = g.tiers.get(tier)?;
        let order = balance::rank(affinity, hosts.iter().map(|h| (h.rank_id, h.weight)));
        Some(order.into_iter().map(|i| hosts[i].addr.clone()).collect())
    }

    /// Health and counters of every host, for `/status` and `/metrics`.
    pub fn snapshot(&self) -> OriginsSnapshot {
        OriginsSnapshot {
            groups: self
                .inner
                .groups
                .iter()
                .map(|g| GroupSnapshot {
                    name: g.spec.name.clone(),
                    hosts: g
                        .tiers
                        .iter()
                        .flatten()
                        .map(|h| {
                            let (requests, responses, errors, latency) = h.stats.snapshot();
                            HostSnapshot {
                                addr: h.addr.clone(),
                                tier: h.tier,
                                healthy: h.is_healthy(),
                                requests,
                                responses,
                                errors,
                                latency,
                            }
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl Drop for Origins {
    fn drop(&mut self) {
        self.stop_health_checks();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn origins_is_send_sync() {
        assert_send_sync::<Origins>();
        assert_send_sync::<OriginError>();
    }

    #[test]
    fn duplicate_groups_rejected() {
        let g = GroupSpec::new("a", vec![vec![HostSpec::new("127.0.0.1:1")]]);
        let err = Origins::new(vec![g.clone(), g]).unwrap_err();
        assert_eq!(err, SpecError::DuplicateGroup("a".into()));
    }
}
