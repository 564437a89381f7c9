//! Origin authentication of one group ([`GroupAuth`]): the configured fields every request
//! carries (`request_headers`, a shared secret the origin or its firewall checks) and the S3
//! signature ([`crate::sigv4`]). Applied to each attempt, after the host (hence the `Host`
//! signed) is chosen, and to health probes; a group with neither pays one branch.
//!
//! Values are marked sensitive (`HeaderValue::set_sensitive`: not printed by `Debug`,
//! never indexed by HPACK) and never logged. A viewer cannot smuggle its own: the fields
//! the group sets, and with a signature `Authorization` and every `x-amz-*` field, are
//! removed from what it sent ([`GroupAuth::scrub`]).

use std::time::SystemTime;

use http::Method;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;

use crate::sigv4::{self, Signer};
use crate::spec::{GroupSpec, SpecError};

/// What a group adds to its origin requests.
#[derive(Debug)]
pub(crate) struct GroupAuth {
    fields: Vec<(HeaderName, HeaderValue)>,
    s3: Option<Signer>,
}

impl GroupAuth {
    /// The group's authentication, `None` when it has none; fails when a field or the
    /// credentials cannot be sent (checked with the rest of the group in `Origins::new`).
    pub(crate) fn new(spec: &GroupSpec) -> Result<Option<GroupAuth>, SpecError> {
        let group = || spec.name.clone();
        let mut fields = Vec::with_capacity(spec.request_headers.len());
        for (name, value) in &spec.request_headers {
            let bad = || SpecError::BadRequestHeader { group: group(), name: name.clone() };
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
            let mut v = HeaderValue::from_str(value.expose()).map_err(|_| bad())?;
            v.set_sensitive(true);
            fields.push((n, v));
        }
        let s3 = match &spec.s3 {
            None => None,
            Some(a) => {
                let bad = |reason| SpecError::BadS3 { group: group(), reason };
                if a.region.is_empty() || a.access_key.expose().is_empty() {
                    return Err(bad("region and access key must not be empty"));
                }
                if !a.access_key.expose().bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(bad("the access key ID must be printable ASCII"));
                }
                Some(Signer::new(a).ok_or_else(|| bad("the session token is not a field value"))?)
            }
        };
        if fields.is_empty() && s3.is_none() {
            return Ok(None);
        }
        Ok(Some(GroupAuth { fields, s3 }))
    }

    /// Removes from a viewer's fields those this group sets or signs.
    pub(crate) fn scrub(&self, headers: &mut HeaderMap) {
        for (n, _) in &self.fields {
            headers.remove(n);
        }
        if self.s3.is_some() {
            headers.remove(header::AUTHORIZATION);
            let amz: Vec<HeaderName> =
                headers.keys().filter(|n| n.as_str().starts_with("x-amz-")).cloned().collect();
            for n in amz {
                headers.remove(n);
            }
        }
    }

    /// The target to send: with a signature, in the form S3 signs.
    pub(crate) fn target(&self, pq: &PathAndQuery) -> PathAndQuery {
        match self.s3 {
            Some(_) => sigv4::s3_target(pq),
            None => pq.clone(),
        }
    }

    /// Adds the group's fields and, with S3 credentials, the signature of `method pq` sent
    /// with `Host: host` at `now` (`pq` from [`Self::target`]).
    pub(crate) fn apply(
        &self,
        (method, pq): (&Method, &PathAndQuery),
        host: &HeaderValue,
        headers: &mut HeaderMap,
        now: SystemTime,
    ) {
        for (n, v) in &self.fields {
            headers.insert(n.clone(), v.clone());
        }
        if let Some(s) = &self.s3 {
            let signed = s.sign(method, pq, host.as_bytes(), now);
            headers.insert(
                HeaderName::from_static("x-amz-content-sha256"),
                HeaderValue::from_static(sigv4::UNSIGNED_PAYLOAD),
            );
            headers.insert(HeaderName::from_static("x-amz-date"), signed.date);
            if let Some(t) = &s.token {
                headers.insert(HeaderName::from_static("x-amz-security-token"), t.clone());
            }
            headers.insert(header::AUTHORIZATION, signed.authorization);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{HostSpec, S3Auth, Secret};

    fn spec() -> GroupSpec {
        let mut g = GroupSpec::new("g", vec![vec![HostSpec::new("127.0.0.1:1")]]);
        g.request_headers = vec![("X-Origin-Secret".into(), Secret::new("hush"))];
        g.s3 = Some(S3Auth {
            region: "eu-west-1".into(),
            access_key: Secret::new("AKID"),
            secret_key: Secret::new("topsecret"),
            session_token: None,
        });
        g
    }

    #[test]
    fn nothing_configured_is_none() {
        let g = GroupSpec::new("g", vec![vec![HostSpec::new("127.0.0.1:1")]]);
        assert!(GroupAuth::new(&g).unwrap().is_none());
    }

    #[test]
    fn viewer_fields_are_replaced_and_secrets_never_printed() {
        let g = spec();
        assert!(!format!("{g:?}").contains("hush") && !format!("{g:?}").contains("topsecret"));
        let a = GroupAuth::new(&g).unwrap().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-origin-secret", HeaderValue::from_static("forged"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("AWS4-HMAC-SHA256 forged"));
        h.insert("x-amz-meta-x", HeaderValue::from_static("1"));
        h.insert(header::RANGE, HeaderValue::from_static("bytes=0-1"));
        a.scrub(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        let pq = a.target(&PathAndQuery::from_static("/b/a%20b!.ts"));
        assert_eq!(pq.as_str(), "/b/a%20b%21.ts");
        a.apply(
            (&Method::GET, &pq),
            &HeaderValue::from_static("b.example"),
            &mut h,
            SystemTime::now(),
        );
        assert_eq!(h.get("x-origin-secret").unwrap(), "hush");
        assert!(h.get(header::AUTHORIZATION).unwrap().is_sensitive());
        assert_eq!(h.get("x-amz-content-sha256").unwrap(), "UNSIGNED-PAYLOAD");
        let shown = format!("{h:?} {a:?}");
        assert!(!shown.contains("hush") && !shown.contains("Signature="), "{shown}");
    }

    #[test]
    fn bad_values_are_refused_without_showing_them() {
        let mut g = spec();
        g.request_headers = vec![("X-Secret".into(), Secret::new("a\nb"))];
        let e = GroupAuth::new(&g).unwrap_err();
        assert!(matches!(e, SpecError::BadRequestHeader { .. }));
        assert!(!e.to_string().contains("a\nb"));
    }
}
