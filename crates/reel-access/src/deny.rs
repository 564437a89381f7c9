//! Why a viewer's request was refused: one name per reason, shared by the access log and
//! the `reel_denied_total{reason}` counter, and never shown in a response body.

/// Why a request was refused before the cache was consulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// The site wants a token and the request carries none (query nor cookie).
    TokenMissing,
    /// The token does not parse (a field missing, repeated or malformed).
    TokenMalformed,
    /// The token's `exp` is past (beyond the leeway).
    TokenExpired,
    /// The token's `st` is still ahead (beyond the leeway).
    TokenNotYetValid,
    /// No configured key gives the token's HMAC.
    TokenBadHmac,
    /// The request's path is outside the token's ACL (or is not its URL).
    TokenAcl,
    /// The token is bound (`ip=`) to another client address.
    TokenIp,
    /// The client address is denied (or not allowed) by the site's CIDR rules.
    IpDenied,
    /// The client's country is denied (or not allowed) by the site's country rules.
    CountryDenied,
    /// The client (or its token) is over the site's request rate.
    RateLimited,
}

impl DenyReason {
    /// Every reason, in label order (the index of a reason is `reason as usize`).
    pub const ALL: [DenyReason; 10] = [
        DenyReason::TokenMissing,
        DenyReason::TokenMalformed,
        DenyReason::TokenExpired,
        DenyReason::TokenNotYetValid,
        DenyReason::TokenBadHmac,
        DenyReason::TokenAcl,
        DenyReason::TokenIp,
        DenyReason::IpDenied,
        DenyReason::CountryDenied,
        DenyReason::RateLimited,
    ];

    /// The reason's label, in the access log and in `reel_denied_total{reason}`.
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::TokenMissing => "token_missing",
            DenyReason::TokenMalformed => "token_malformed",
            DenyReason::TokenExpired => "token_expired",
            DenyReason::TokenNotYetValid => "token_not_yet_valid",
            DenyReason::TokenBadHmac => "token_bad_hmac",
            DenyReason::TokenAcl => "token_acl",
            DenyReason::TokenIp => "token_ip",
            DenyReason::IpDenied => "ip_denied",
            DenyReason::CountryDenied => "country_denied",
            DenyReason::RateLimited => "rate_limited",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DenyReason;

    #[test]
    fn all_lists_every_reason_at_its_index_with_a_distinct_label() {
        let mut seen = std::collections::HashSet::new();
        for (i, r) in DenyReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
            assert!(seen.insert(r.as_str()), "{} twice", r.as_str());
        }
    }
}
