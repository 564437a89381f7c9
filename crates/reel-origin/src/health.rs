//! The active health checker: one thread off the workers probes every host of the groups
//! that check ([`Checker`]) and hands each result to the host's state ([`HostState`], whose
//! module says how health works).

use std::io;
use std::sync::Arc;
use std::time::SystemTime;

use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Method, header};
use tokio::sync::watch;

use crate::body::RequestBody;
use crate::host::HostState;

/// One probe: connect (over TLS for an HTTPS host, with the same verification as requests),
/// `GET path` (with the group's fields and signature, like its requests), compare the
/// status. The whole exchange is bounded by the probe timeout; the body is not read and the
/// connection is closed afterwards.
async fn probe(host: &HostState) -> Result<(), String> {
    let h = &host.health;
    let exchange = async {
        let mut send = crate::conn::open(host, h.timeout).await.map_err(|e| e.to_string())?;
        let mut pq = PathAndQuery::try_from(h.path.as_str()).map_err(|e| format!("path: {e}"))?;
        let mut headers = HeaderMap::new();
        if !send.is_h2() {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        headers.insert(header::USER_AGENT, HeaderValue::from_static("reel-health-check"));
        let host_value = host.probe_host_header();
        if let Some(auth) = &host.auth {
            pq = auth.target(&pq);
            auth.apply((&Method::GET, &pq), &host_value, &mut headers, SystemTime::now());
        }
        let req =
            send.request(Method::GET, pq, headers, host_value, &host.addr, RequestBody::Empty);
        let resp = send.send(req).await.map_err(|e| format!("request: {}", e.error()))?;
        if resp.status().as_u16() == h.expect_status {
            Ok(())
        } else {
            Err(format!("status {} (want {})", resp.status().as_u16(), h.expect_status))
        }
    };
    match tokio::time::timeout(h.timeout, exchange).await {
        Ok(r) => r,
        Err(_) => Err(format!("timed out after {:?}", h.timeout)),
    }
}

async fn check_loop(host: Arc<HostState>, mut stop: watch::Receiver<bool>) {
    loop {
        let result = tokio::select! {
            r = probe(&host) => r,
            _ = stop.changed() => return,
        };
        host.active_result(result);
        tokio::select! {
            _ = tokio::time::sleep(host.health.interval) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Handle of a running checker thread; dropping it does not stop the thread, [`stop`] does.
///
/// [`stop`]: Checker::stop
#[derive(Debug)]
pub(crate) struct Checker {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Checker {
    /// Starts probing `hosts` on a new thread.
    pub(crate) fn start(hosts: Vec<Arc<HostState>>) -> io::Result<Self> {
        let (stop, rx) = watch::channel(false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
        for h in &hosts {
            h.set_actively_checked(true);
        }
        let thread_hosts = hosts.clone();
        let spawned =
            std::thread::Builder::new().name("reel-origin-health".into()).spawn(move || {
                rt.block_on(async move {
                    let mut stop = rx.clone();
                    for h in thread_hosts {
                        tokio::spawn(check_loop(h, rx.clone()));
                    }
                    // Err means the sender is gone, which also means stop.
                    let _ = stop.changed().await;
                });
                // Dropping the runtime cancels the probe tasks.
            });
        match spawned {
            Ok(t) => Ok(Self { stop, thread: Some(t) }),
            Err(e) => {
                for h in &hosts {
                    h.set_actively_checked(false);
                }
                Err(e)
            }
        }
    }

    /// Stops the thread and waits for it; hosts fall back to passive cool-down recovery.
    pub(crate) fn stop(&mut self, hosts: &[Arc<HostState>]) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        for h in hosts {
            h.set_actively_checked(false);
        }
    }
}
