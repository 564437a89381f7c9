//! Per-site response edits: the CORS fields of `[site.cors]`, then the `[[site.header]]`
//! rules, applied to every response of a site as it leaves the cache (hits, misses,
//! pass-through, 206, 304, local answers alike, over HTTP/1.1, HTTP/2 and HTTP/3), and the
//! CORS preflights answered at the edge. What is stored is never rewritten: a hit's stored
//! header block is filtered into a new block only when a field in it is to go.
//!
//! A site without either pays one branch (`Site::edits` is `None`). With `[site.cors]`, a
//! response costs a scan of its header block and the clone of pre-rendered values; only an
//! origin matched by a `*.domain` pattern is copied.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use reel_config::{CorsConfig, HeaderAction, HeaderRuleConfig};
use reel_http::{Method, Request, Response};

use super::tag::Tag;
use crate::policy::cors::{ALLOW_METHODS, Cors, Preflight};
use crate::policy::header_rules::HeaderRule;

/// What a site changes in its responses' header fields.
#[derive(Debug)]
pub struct ResponseEdits {
    cors: Option<Cors>,
    rules: Vec<HeaderRule>,
}

impl ResponseEdits {
    /// A site's edits from its validated `[site.cors]` and `[[site.header]]`; `None` when
    /// it has neither.
    pub fn new(
        cors: Option<&CorsConfig>,
        rules: &[HeaderRuleConfig],
    ) -> Option<Arc<ResponseEdits>> {
        if cors.is_none() && rules.is_empty() {
            return None;
        }
        Some(Arc::new(ResponseEdits {
            cors: cors.map(Cors::new),
            rules: rules.iter().map(HeaderRule::new).collect(),
        }))
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`) on a site with `[site.cors]`: 204, with the allow
    /// fields when the origin, the method (GET or HEAD) and every requested field are
    /// allowed, without them otherwise (the browser then refuses the request). Never
    /// forwarded, never stored. `None` for any other request.
    pub(in crate::path) fn preflight(&self, req: &Request) -> Option<Response> {
        let cors = self.cors.as_ref()?;
        if *req.method() != Method::Options {
            return None;
        }
        let origin = sole_origin(req)?;
        let method = req.header("access-control-request-method")?;
        let requested = req.header("access-control-request-headers");
        let mut r = Response::new(204).tagged(Tag::local());
        if let Preflight::Allowed(allow) = cors.preflight(origin, method, requested) {
            r = r
                .header("access-control-allow-origin", allow)
                .header("access-control-allow-methods", Bytes::from_static(ALLOW_METHODS));
            if let Some(h) = cors.allow_headers_for(requested) {
                r = r.header("access-control-allow-headers", h);
            }
            if cors.credentials() {
                r = r.header("access-control-allow-credentials", Bytes::from_static(b"true"));
            }
            r = r.header("access-control-max-age", cors.max_age().clone());
        }
        if cors.varies() {
            r = r.header("vary", Bytes::from_static(b"Origin"));
        }
        Some(r)
    }

    /// `resp` with the site's edits: with `[site.cors]`, the origin's `Access-Control-*`
    /// fields replaced by ours (when the request's `Origin` is allowed) and `Vary: Origin`
    /// (unless `"*"` without credentials, or the response varies on it already); then each
    /// `[[site.header]]` rule that applies, in order.
    pub(in crate::path) fn apply(&self, req: &Request, mut resp: Response) -> Response {
        if let Some(cors) = &self.cors {
            remove_fields(&mut resp, |n| {
                n.len() > 15 && n[..15].eq_ignore_ascii_case(b"access-control-")
            });
            if let Some(allow) = sole_origin(req).and_then(|o| cors.allow(o)) {
                push(&mut resp, "access-control-allow-origin", allow);
                if cors.credentials() {
                    push(
                        &mut resp,
                        "access-control-allow-credentials",
                        Bytes::from_static(b"true"),
                    );
                }
                if let Some(e) = cors.expose() {
                    push(&mut resp, "access-control-expose-headers", e.clone());
                }
            }
            if cors.varies() && !varies_on_origin(&resp) {
                push(&mut resp, "vary", Bytes::from_static(b"Origin"));
            }
        }
        let path = req.path().as_bytes();
        for rule in &self.rules {
            if !rule.applies(path, resp.status) {
                continue;
            }
            let name = rule.name.as_bytes();
            match rule.action {
                HeaderAction::Set => {
                    remove_fields(&mut resp, |n| n.eq_ignore_ascii_case(name));
                    push(&mut resp, rule.name, rule.value.clone());
                }
                HeaderAction::Add => push(&mut resp, rule.name, rule.value.clone()),
                HeaderAction::Remove => remove_fields(&mut resp, |n| n.eq_ignore_ascii_case(name)),
            }
        }
        resp
    }
}

fn push(resp: &mut Response, name: &'static str, value: Bytes) {
    resp.headers.push((Cow::Borrowed(name), value));
}

/// The `name: value\r\n` lines of a pre-encoded header block.
pub(super) fn lines(raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    raw.split_inclusive(|&b| b == b'\n')
}

/// A block line's field name.
pub(super) fn name_of(line: &[u8]) -> &[u8] {
    line.split(|&b| b == b':').next().unwrap_or(line)
}

/// A block line's field value, trimmed.
pub(super) fn value_of(line: &[u8]) -> &[u8] {
    match line.iter().position(|&b| b == b':') {
        Some(i) => line[i + 1..].trim_ascii(),
        None => &[],
    }
}

/// Removes every field whose name `drop` says, from the fields and from the pre-encoded
/// block; the block is copied only when it holds such a field.
fn remove_fields(resp: &mut Response, drop: impl Fn(&[u8]) -> bool) {
    resp.headers.retain(|(n, _)| !drop(n.as_bytes()));
    if !lines(&resp.raw_headers).any(|l| drop(name_of(l))) {
        return;
    }
    let mut out = BytesMut::with_capacity(resp.raw_headers.len());
    for l in lines(&resp.raw_headers).filter(|l| !drop(name_of(l))) {
        out.put_slice(l);
    }
    resp.raw_headers = out.freeze();
}

/// The request's `Origin`, when it has exactly one: a browser sends one, and a request with
/// several names no origin to allow (answering the first would let the field a proxy or
/// an attacker put first decide).
fn sole_origin(req: &Request) -> Option<&[u8]> {
    let mut all = req.headers().filter(|(n, _)| n.eq_ignore_ascii_case("origin")).map(|(_, v)| v);
    let first = all.next()?;
    all.next().is_none().then_some(first)
}

/// Whether the response's `Vary` names `Origin` (or is `*`) already.
fn varies_on_origin(resp: &Response) -> bool {
    let covers = |v: &[u8]| {
        v.split(|&b| b == b',')
            .map(<[u8]>::trim_ascii)
            .any(|t| t == b"*" || t.eq_ignore_ascii_case(b"origin"))
    };
    resp.headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("vary") && covers(v))
        || lines(&resp.raw_headers)
            .any(|l| name_of(l).eq_ignore_ascii_case(b"vary") && covers(value_of(l)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reel_config::{AllowOrigins, PathGlob};

    fn cors_cfg(origins: &[&str]) -> CorsConfig {
        CorsConfig {
            allow_origins: AllowOrigins::List(origins.iter().map(|s| s.to_string()).collect()),
            allow_credentials: false,
            allow_headers: reel_config::DEFAULT_CORS_ALLOW_HEADERS.map(String::from).to_vec(),
            expose_headers: reel_config::DEFAULT_CORS_EXPOSE_HEADERS.map(String::from).to_vec(),
            max_age: reel_config::Duration::from_secs(3600),
        }
    }

    fn req(head: &str) -> Request {
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut r = Request::new(a, a);
        assert!(matches!(
            r.parse_head(head.as_bytes(), &reel_http::Limits::default()),
            Ok(reel_http::HeadStatus::Complete(_))
        ));
        r
    }

    fn fields(r: &Response) -> String {
        let mut s = String::from_utf8_lossy(&r.raw_headers).into_owned();
        for (n, v) in &r.headers {
            s.push_str(&format!("{n}: {}\r\n", String::from_utf8_lossy(v)));
        }
        s
    }

    #[test]
    fn the_origins_cors_fields_are_replaced_in_the_stored_block_and_vary_is_merged() {
        let e = ResponseEdits::new(Some(&cors_cfg(&["https://p.test"])), &[]).unwrap();
        let stored = Bytes::from_static(
            b"content-type: video/mp2t\r\nAccess-Control-Allow-Origin: *\r\naccess-control-expose-headers: x\r\nvary: accept-encoding\r\n",
        );
        let r = Response::new(200).raw_headers(stored.clone()).header("age", "3");
        let q = req("GET /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://p.test\r\n\r\n");
        let out = e.apply(&q, r);
        let f = fields(&out);
        assert_eq!(f.matches("access-control-allow-origin").count(), 1, "{f}");
        assert!(f.contains("access-control-allow-origin: https://p.test\r\n"), "{f}");
        assert!(!f.to_lowercase().contains("allow-origin: *"), "{f}");
        assert!(
            f.contains(
                "access-control-expose-headers: Content-Length, Content-Range, Cache-Status"
            ),
            "{f}"
        );
        assert!(f.contains("content-type: video/mp2t\r\nvary: accept-encoding\r\n"), "{f}");
        assert!(f.contains("vary: Origin\r\n"), "{f}");
        // The stored block itself is untouched.
        assert!(stored.starts_with(b"content-type: video/mp2t\r\nAccess-Control-Allow-Origin: *"));

        // A disallowed origin gets no allow fields, and still Vary: Origin.
        let q = req("GET /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://evil.test\r\n\r\n");
        let f = fields(&e.apply(&q, Response::new(200).raw_headers(stored.clone())));
        assert!(!f.to_lowercase().contains("access-control"), "{f}");
        assert!(f.contains("vary: Origin"), "{f}");

        // A response that varies on Origin already gets no second one.
        let r = Response::new(200)
            .raw_headers(Bytes::from_static(b"vary: Accept-Encoding, Origin\r\n"));
        let f = fields(&e.apply(&q, r));
        assert_eq!(f.to_lowercase().matches("origin").count(), 1, "{f}");
    }

    #[test]
    fn a_block_without_fields_to_drop_is_shared_not_copied() {
        let e = ResponseEdits::new(Some(&cors_cfg(&["https://p.test"])), &[]).unwrap();
        let stored = Bytes::from_static(b"content-type: video/mp2t\r\netag: \"1\"\r\n");
        let q = req("GET /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://p.test\r\n\r\n");
        let out = e.apply(&q, Response::new(206).raw_headers(stored.clone()));
        assert_eq!(out.raw_headers.as_ptr(), stored.as_ptr());
    }

    #[test]
    fn preflights_are_answered_with_or_without_the_allow_fields() {
        let e = ResponseEdits::new(Some(&cors_cfg(&["https://p.test"])), &[]).unwrap();
        let ok = req(
            "OPTIONS /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://p.test\r\naccess-control-request-method: GET\r\naccess-control-request-headers: cmcd-request\r\n\r\n",
        );
        let r = e.preflight(&ok).expect("a preflight");
        assert_eq!(r.status, 204);
        let f = fields(&r);
        for want in [
            "access-control-allow-origin: https://p.test",
            "access-control-allow-methods: GET, HEAD",
            "access-control-allow-headers: range, cmcd-request",
            "access-control-max-age: 3600",
            "vary: Origin",
        ] {
            assert!(f.contains(want), "{want}: {f}");
        }
        let post = req(
            "OPTIONS /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://p.test\r\naccess-control-request-method: POST\r\n\r\n",
        );
        let f = fields(&e.preflight(&post).expect("a preflight"));
        assert!(!f.contains("access-control-allow"), "{f}");
        // Not a preflight: no Access-Control-Request-Method.
        let plain = req("OPTIONS /a.ts HTTP/1.1\r\nhost: x\r\norigin: https://p.test\r\n\r\n");
        assert!(e.preflight(&plain).is_none());
        // A site with header rules only answers no preflight.
        let rules = [HeaderRuleConfig {
            action: HeaderAction::Add,
            name: "Timing-Allow-Origin".into(),
            value: Some("*".into()),
            path: None,
            status: Vec::new(),
        }];
        assert!(ResponseEdits::new(None, &rules).unwrap().preflight(&ok).is_none());
    }

    #[test]
    fn rules_set_add_and_remove_in_order_where_they_apply() {
        let rule = |action, name: &str, value: Option<&str>, path: Option<&str>, status: &[u16]| {
            HeaderRuleConfig {
                action,
                name: name.into(),
                value: value.map(String::from),
                path: path.map(|p| PathGlob(p.into())),
                status: status.to_vec(),
            }
        };
        let rules = [
            rule(HeaderAction::Set, "Cache-Control", Some("max-age=1"), Some("*.m3u8"), &[200]),
            rule(HeaderAction::Add, "Timing-Allow-Origin", Some("*"), None, &[]),
            rule(HeaderAction::Remove, "X-Origin-Secret", None, None, &[]),
        ];
        let e = ResponseEdits::new(None, &rules).unwrap();
        let stored = Bytes::from_static(
            b"cache-control: max-age=60\r\nx-origin-secret: 1\r\ncontent-type: application/vnd.apple.mpegurl\r\n",
        );
        let q = req("GET /live/index.m3u8?x=1 HTTP/1.1\r\nhost: x\r\n\r\n");
        let f = fields(&e.apply(&q, Response::new(200).raw_headers(stored.clone())));
        assert_eq!(
            f,
            "content-type: application/vnd.apple.mpegurl\r\ncache-control: max-age=1\r\ntiming-allow-origin: *\r\n"
        );
        // Not a playlist, or not a 200: the stored Cache-Control stays.
        let q = req("GET /live/seg1.ts HTTP/1.1\r\nhost: x\r\n\r\n");
        let f = fields(&e.apply(&q, Response::new(200).raw_headers(stored.clone())));
        assert!(f.starts_with("cache-control: max-age=60\r\ncontent-type"), "{f}");
        let q = req("GET /live/index.m3u8 HTTP/1.1\r\nhost: x\r\n\r\n");
        let f = fields(&e.apply(&q, Response::new(304).raw_headers(stored)));
        assert!(
            f.contains("cache-control: max-age=60\r\n") && !f.contains("x-origin-secret"),
            "{f}"
        );
    }
}
