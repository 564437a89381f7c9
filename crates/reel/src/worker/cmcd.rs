//! A request's CMCD (CTA-5004) after its response: parsed once, only when the request
//! carries it, for its access-log line and its site's CMCD counters. A request without
//! CMCD pays a look at its field names and one substring search of its query.

use std::sync::Arc;

use reel_http::Request;
use reel_ops::cmcd::Cmcd;
use reel_ops::cmcd_metrics::SiteCmcd;

/// `req`'s CMCD, counted in its site's counters (`sites`: those of `settings`' sites in
/// order, the fallback last) on worker `worker`'s slot; `None` when it carries none.
pub(crate) fn of(
    req: &Request,
    settings: &reel_cache::Settings,
    sites: &[Arc<SiteCmcd>],
    worker: usize,
) -> Option<Cmcd> {
    let c = Cmcd::from_request(req.headers(), req.query())?;
    if let Some(site) = settings.site_for(req.host().unwrap_or("")) {
        let i = settings.sites.iter().position(|s| std::ptr::eq(s, site));
        if let Some(m) = sites.get(i.unwrap_or(settings.sites.len())) {
            m.record(worker, &c);
        }
    }
    Some(c)
}
