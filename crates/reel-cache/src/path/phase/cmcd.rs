//! A viewer's CMCD (CTA-5004) on its way through the cache: left out of the origin
//! request unless the site forwards it (`forward_cmcd`), and its `nor`, the next object
//! the player will ask for, warmed into the cache when the site asks for that
//! (`prefetch_next`).
//!
//! The warm is an LL-HLS prefetch by another name (`llhls.rs` [`prefetch_part`]): it
//! leads the object's one fetch in the in-flight map (a viewer who asks meanwhile
//! follows it; nothing happens when a fetch is in flight or the object is stored), on
//! everyone's behalf (without the viewer's credentials and cookies). `nor` is resolved
//! against the request's path; one that names another host or scheme is refused, as is
//! the request's own object. At most [`NEXT_PER_WORKER`] warms are in flight per worker;
//! sliced sites warm nothing (their objects are fetched by slice).
//!
//! A request without CMCD pays [`reel_ops::cmcd::is_field`] on its field names and one
//! substring search of its query.

use std::cell::Cell;
use std::rc::Rc;

use reel_http::Request;
use reel_ops::cmcd::{self, Cmcd};

use super::fetch::FetchCx;
use super::llhls::{Context, prefetch_part};
use super::lookup::cache_key;
use crate::hls;
use crate::key::CacheKey;
use crate::path::worker::settings::Site;

/// Warms of `nor` objects in flight at most, per worker.
pub(in crate::path) const NEXT_PER_WORKER: usize = 16;

thread_local! {
    /// This worker's warms in flight (each worker is a thread of its own).
    static IN_FLIGHT: Cell<usize> = const { Cell::new(0) };
}

/// A place among this worker's warms, given back on drop.
struct Place;

impl Place {
    fn take() -> Option<Place> {
        IN_FLIGHT.with(|n| {
            let v = n.get();
            (v < NEXT_PER_WORKER).then(|| {
                n.set(v + 1);
                Place
            })
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        IN_FLIGHT.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// Whether `req` carries CMCD, in a field or the query.
fn present(req: &Request) -> bool {
    req.headers().any(|(n, _)| cmcd::is_field(n))
        || req.query().and_then(cmcd::query_value).is_some()
}

/// What `req`, a request of `site` past its access checks, asks of the cache's CMCD
/// handling: with `prefetch_next`, its `nor` is warmed; without `forward_cmcd`, the copy
/// of it without CMCD the rest of the path should see (`None`: `req` as it is).
pub(in crate::path) fn on_request(cx: &FetchCx, req: &Request, site: &Site) -> Option<Request> {
    if !present(req) {
        return None;
    }
    let warms = site.prefetch_next && site.slicing.size.is_none();
    if site.forward_cmcd && !warms {
        return None;
    }
    let clean = req.without_param_and_fields(cmcd::QUERY_PARAM, cmcd::is_field);
    if warms {
        let c = Cmcd::from_request(req.headers(), req.query());
        if let Some(nor) = c.as_ref().and_then(|c| c.text("nor")) {
            // A warm of another object never carries this request's CMCD, forwarded or not.
            warm(cx, clean.as_ref().unwrap_or(req), site, nor);
        }
    }
    if site.forward_cmcd { None } else { clean }
}

/// Starts the warm of `nor` for `req` (see the module).
fn warm(cx: &FetchCx, req: &Request, site: &Site, nor: &str) {
    if !matches!(req.method(), reel_http::Method::Get | reel_http::Method::Head) {
        return;
    }
    let Some(key) = cache_key(req, site) else { return };
    let Some(target) = hls::resolve(key.path(), key.host(), nor) else {
        tracing::debug!(nor, "CMCD nor leaves the site: not warmed");
        return;
    };
    let Ok(next) = CacheKey::build(key.host(), target.as_bytes(), &site.key) else { return };
    if next == key || cx.shared.store.contains(next.as_bytes()) {
        return;
    }
    let Some(place) = Place::take() else { return };
    let Some(lead) = cx.shared.inflight.try_lead(next.as_bytes()) else { return };
    let pf = Rc::new(Context::new(cx, site, req));
    tokio::task::spawn_local(prefetch_part(pf, next, target, lead, place, false));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_per_worker_and_come_back() {
        let places: Vec<Place> = (0..NEXT_PER_WORKER + 3).map_while(|_| Place::take()).collect();
        assert_eq!(places.len(), NEXT_PER_WORKER);
        assert!(Place::take().is_none());
        drop(places);
        assert!(Place::take().is_some());
    }
}
