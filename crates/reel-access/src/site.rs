//! A site's access rules as the workers run them ([`SiteAccess`]): address rules, country
//! rules over the shared [`Geo`] database, and the shared rate limiter, each checked by
//! one call that allocates nothing and answers what to refuse with ([`Refusal`]).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::deny::DenyReason;
use crate::geo::{Country, Geo};
use crate::rate::RateLimiter;
use crate::rules::AddrRules;

/// How a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// Why (the label counted and logged).
    pub reason: DenyReason,
    /// The status: 403, 451 (`geo_status`) or 429.
    pub status: u16,
    /// For a 429: how long until the client's budget admits one request.
    pub retry_after: Option<Duration>,
}

/// A site's country rules: a country in `deny` is refused; when `allow` is not empty, a
/// country outside it is refused, and so is an address the database has no country for.
#[derive(Debug, Clone)]
pub struct CountryRules {
    /// The database.
    pub geo: Arc<Geo>,
    /// Countries served (empty: all but those denied).
    pub allow: Vec<Country>,
    /// Countries refused.
    pub deny: Vec<Country>,
    /// The status of a refusal: 403, or 451 (RFC 7725) for rights that stop at a border.
    pub status: u16,
}

impl CountryRules {
    /// Whether a client at `ip` may be served.
    pub fn admits(&self, ip: IpAddr) -> bool {
        match self.geo.country(ip) {
            Some(c) => {
                !self.deny.contains(&c) && (self.allow.is_empty() || self.allow.contains(&c))
            }
            None => self.allow.is_empty(),
        }
    }
}

/// A site's rules (only those configured are `Some`/non-empty).
#[derive(Debug, Clone, Default)]
pub struct SiteAccess {
    /// `allow` / `deny`.
    pub addr: AddrRules,
    /// `allow_countries` / `deny_countries`.
    pub countries: Option<CountryRules>,
    /// `[site.limits]`.
    pub rate: Option<Arc<RateLimiter>>,
}

impl SiteAccess {
    /// Whether the site has any rule (a site without is given no `SiteAccess` at all).
    pub fn is_empty(&self) -> bool {
        self.addr.is_empty() && self.countries.is_none() && self.rate.is_none()
    }

    /// The address and country rules, for a client at `ip`.
    pub fn check_addr(&self, ip: IpAddr) -> Result<(), Refusal> {
        if !self.addr.admits(ip) {
            return Err(Refusal { reason: DenyReason::IpDenied, status: 403, retry_after: None });
        }
        if let Some(c) = &self.countries
            && !c.admits(ip)
        {
            return Err(Refusal {
                reason: DenyReason::CountryDenied,
                status: c.status,
                retry_after: None,
            });
        }
        Ok(())
    }

    /// The rate limit, for a client at `ip` or carrying the token identity `token`.
    pub fn check_rate(&self, ip: IpAddr, token: Option<&[u8]>) -> Result<(), Refusal> {
        let Some(limiter) = &self.rate else { return Ok(()) };
        limiter.check(ip, token, Instant::now()).map_err(|wait| Refusal {
            reason: DenyReason::RateLimited,
            status: 429,
            retry_after: Some(wait),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::RateSpec;
    use crate::rules::CidrSet;

    #[test]
    fn address_rules_refuse_with_403_and_the_rate_with_429() {
        let a = SiteAccess {
            addr: AddrRules {
                allow: CidrSet::default(),
                deny: CidrSet::parse(&["192.0.2.0/24"]).unwrap(),
            },
            countries: None,
            rate: Some(Arc::new(RateLimiter::new(RateSpec {
                rate: 1.0,
                burst: 1,
                max_clients: 1000,
            }))),
        };
        let denied = a.check_addr("192.0.2.1".parse().unwrap()).unwrap_err();
        assert_eq!((denied.reason, denied.status), (DenyReason::IpDenied, 403));
        let ok: IpAddr = "198.51.100.1".parse().unwrap();
        assert_eq!(a.check_addr(ok), Ok(()));
        assert_eq!(a.check_rate(ok, None), Ok(()));
        let limited = a.check_rate(ok, None).unwrap_err();
        assert_eq!((limited.reason, limited.status), (DenyReason::RateLimited, 429));
        assert!(limited.retry_after.is_some_and(|d| d <= Duration::from_secs(1)));
        assert!(SiteAccess::default().is_empty());
        assert!(!a.is_empty());
    }
}
