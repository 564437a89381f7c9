//! A copy of a request without a credential: one query parameter and the cookie of the
//! same name removed (and, if asked, `Range`, `If-Range` and `Accept-Encoding`: an answer
//! rewritten per viewer is made from the whole identity body), for a cache that checked
//! the credential itself and must neither key on it nor send it on; and a copy without
//! one query parameter and the fields a predicate names (client telemetry such as CMCD,
//! which the cache reads and does not send on).

use super::{HeadStatus, Request};
use crate::limits::Limits;

impl Request {
    /// This request without the query parameter `param` and without the cookie `param`
    /// (a `Cookie` field left empty is dropped); with `drop_range`, without `Range`,
    /// `If-Range` and `Accept-Encoding` too (the answer will be rewritten from the whole,
    /// uncompressed body). The copy is the same request in every other respect (version,
    /// framing, addresses). `None` if the rewritten head does not parse (it always does
    /// for a head that did).
    pub fn without_credential(&self, param: &str, drop_range: bool) -> Option<Request> {
        self.rebuilt(param, Some(param), |name| {
            drop_range
                && (name.eq_ignore_ascii_case("range")
                    || name.eq_ignore_ascii_case("if-range")
                    || name.eq_ignore_ascii_case("accept-encoding"))
        })
    }

    /// This request without the query parameter `param` and without the header fields
    /// whose names `drop_field` picks; the same request in every other respect. `None` if
    /// the rewritten head does not parse (it always does for a head that did).
    pub fn without_param_and_fields(
        &self,
        param: &str,
        drop_field: impl Fn(&str) -> bool,
    ) -> Option<Request> {
        self.rebuilt(param, None, drop_field)
    }

    /// The copy: without the query parameter `param`, the cookie `cookie` and the fields
    /// `drop_field` picks.
    fn rebuilt(
        &self,
        param: &str,
        cookie: Option<&str>,
        drop_field: impl Fn(&str) -> bool,
    ) -> Option<Request> {
        let mut head = Vec::with_capacity(self.head.len());
        head.extend_from_slice(self.method.as_str().as_bytes());
        head.push(b' ');
        head.extend_from_slice(self.path().as_bytes());
        if let Some(q) = self.query() {
            let mut first = true;
            for p in q.split('&').filter(|p| !names(p, param)) {
                head.push(if first { b'?' } else { b'&' });
                first = false;
                head.extend_from_slice(p.as_bytes());
            }
        }
        head.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in self.headers() {
            if drop_field(name) {
                continue;
            }
            let cookie = cookie.filter(|_| name.eq_ignore_ascii_case("cookie"));
            let start = head.len();
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            let at = head.len();
            if let Some(cookie) = cookie {
                let mut first = true;
                for c in value.split(|&b| b == b';').map(<[u8]>::trim_ascii) {
                    let keep =
                        !c.is_empty() && !std::str::from_utf8(c).is_ok_and(|c| names(c, cookie));
                    if keep {
                        if !first {
                            head.extend_from_slice(b"; ");
                        }
                        first = false;
                        head.extend_from_slice(c);
                    }
                }
                if head.len() == at {
                    head.truncate(start);
                    continue;
                }
            } else {
                head.extend_from_slice(value);
            }
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        let mut r = self.clone();
        // The original passed the connection's limits; the copy is no larger.
        let n = head.len();
        let limits = Limits {
            max_header_bytes: n,
            max_request_line: n,
            max_headers: super::MAX_HEADERS_CAP,
            ..Limits::default()
        };
        match r.parse_head(&head, &limits) {
            Ok(HeadStatus::Complete(_)) => {}
            _ => return None,
        }
        (r.version, r.framing, r.keep_alive) = (self.version, self.framing, self.keep_alive);
        r.expect_continue = self.expect_continue;
        Some(r)
    }
}

/// Whether the `name=value` pair `p` (or a bare `name`) is named `param`.
fn names(p: &str, param: &str) -> bool {
    p.split_once('=').map_or(p, |(n, _)| n) == param
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(head: &str) -> Request {
        let addr = "192.0.2.1:5000".parse().unwrap();
        let mut r = Request::new(addr, addr);
        assert!(matches!(
            r.parse_head(head.as_bytes(), &Limits::default()),
            Ok(HeadStatus::Complete(_))
        ));
        r
    }

    #[test]
    fn the_parameter_and_cookie_go_and_the_rest_stays() {
        let r =
            req("GET /live/a.m3u8?x=1&hdnts=exp=1~hmac=00&_HLS_msn=3 HTTP/1.1\r\nHost: e.com\r\n\
                     Cookie: a=1; hdnts=exp=2~hmac=11; b=2\r\nRange: bytes=0-1\r\nUser-Agent: p\r\n\
                     Accept-Encoding: br\r\n\r\n");
        let c = r.without_credential("hdnts", false).unwrap();
        assert_eq!(c.target(), "/live/a.m3u8?x=1&_HLS_msn=3");
        assert_eq!(c.path(), "/live/a.m3u8");
        assert_eq!(c.query(), Some("x=1&_HLS_msn=3"));
        assert_eq!(c.host(), Some("e.com"));
        assert_eq!(c.header("cookie"), Some(&b"a=1; b=2"[..]));
        assert_eq!(c.header("range"), Some(&b"bytes=0-1"[..]));
        assert_eq!(c.header("user-agent"), Some(&b"p"[..]));
        assert_eq!(c.header("accept-encoding"), Some(&b"br"[..]));
        assert_eq!(c.peer(), r.peer());
        // A request whose answer is rewritten for its viewer asks for the whole identity body.
        let c = r.without_credential("hdnts", true).unwrap();
        assert_eq!(c.header("range"), None);
        assert_eq!(c.header("accept-encoding"), None);
        assert_eq!(c.header("user-agent"), Some(&b"p"[..]));
    }

    #[test]
    fn a_cookie_field_with_only_the_token_is_dropped_and_a_lone_query_too() {
        let r = req("HEAD /a.ts?hdnts=x HTTP/1.1\r\nHost: e.com\r\nCookie: hdnts=y\r\n\r\n");
        let c = r.without_credential("hdnts", false).unwrap();
        assert_eq!(c.target(), "/a.ts");
        assert_eq!(c.query(), None);
        assert_eq!(c.header("cookie"), None);
        assert_eq!(c.method(), r.method());
        // A parameter that only starts with the name stays.
        let r = req("GET /a.ts?hdntsx=1&hdnts HTTP/1.1\r\nHost: e.com\r\n\r\n");
        assert_eq!(r.without_credential("hdnts", false).unwrap().target(), "/a.ts?hdntsx=1");
    }

    #[test]
    fn a_parameter_and_picked_fields_go_and_cookies_stay() {
        let r = req("GET /s.ts?v=1&CMCD=br%3D800&CMCDx=1 HTTP/1.1\r\nHost: e.com\r\n\
                     CMCD-Request: bl=100\r\nCookie: CMCD=1\r\ncmcd-session: sid=\"a\"\r\n\r\n");
        let c = r
            .without_param_and_fields("CMCD", |n| {
                n.len() > 5 && n[..5].eq_ignore_ascii_case("cmcd-")
            })
            .unwrap();
        assert_eq!(c.target(), "/s.ts?v=1&CMCDx=1");
        assert_eq!(c.header("cmcd-request"), None);
        assert_eq!(c.header("cmcd-session"), None);
        assert_eq!(c.header("cookie"), Some(&b"CMCD=1"[..]), "cookies are not touched");
        assert_eq!(c.host(), Some("e.com"));
    }
}
