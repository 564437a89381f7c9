//! This node on a request's way through a CDN: loop protection (RFC 8586 `CDN-Loop`) and
//! the name it gives itself in `Cache-Status` (RFC 9211).
//!
//! Every request sent to an origin or a parent carries the `CDN-Loop` it arrived with plus
//! our entry, `<cdn_id>; t=<token>`: `cdn_id` names the CDN (every edge and shield of one
//! deployment shares it) and the token this process (random, drawn once per process). A
//! request that comes back carrying our token is a loop through this very process (a node
//! configured as its own origin, or two nodes as each other's): answered `508` before the
//! cache is looked at, it cannot wait on the fill it is itself the origin request of. A
//! request that names `cdn_id` more than `max_hops` times has gone round the CDN too often,
//! whatever the processes. Both checks run before anything is fetched.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use http::HeaderValue;
use reel_http::Request;

/// The field name, lowercase.
const CDN_LOOP: &str = "cdn-loop";

/// This process's token in its `CDN-Loop` entries: 16 hex digits, drawn once.
pub fn process_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        // std's RandomState is keyed from the OS's random source once per process; mixing
        // in the pid and the time keeps two processes apart even if that source repeated.
        let seed = (std::process::id(), std::time::SystemTime::now());
        format!("{:016x}", std::hash::RandomState::new().hash_one(seed))
    })
}

/// This node's identity in the headers it reads and writes, for one config generation.
#[derive(Debug, Clone)]
pub struct Node {
    /// The CDN's name in `CDN-Loop` (`[server] cdn_id`).
    cdn_id: String,
    /// Most entries naming `cdn_id` a request may arrive with (`[server] max_hops`).
    max_hops: u32,
    /// This node's name in `Cache-Status` (`[server] cache_status_name`, or `cdn_id`).
    cache_status_name: String,
    /// Our `CDN-Loop` entry, `<cdn_id>; t=<token>`.
    entry: String,
}

impl Default for Node {
    /// `cdn_id` and cache name `reel`, 3 hops.
    fn default() -> Self {
        Node::new("reel", "reel", 3)
    }
}

impl Node {
    /// A node of the CDN `cdn_id` (an RFC 8586 `cdn-id`) named `cache_status_name` in
    /// `Cache-Status` (an `sf-token`), refusing requests that name `cdn_id` more than
    /// `max_hops` times. The config checks both forms.
    pub fn new(cdn_id: &str, cache_status_name: &str, max_hops: u32) -> Node {
        Node {
            cdn_id: cdn_id.to_string(),
            max_hops,
            cache_status_name: cache_status_name.to_string(),
            entry: format!("{cdn_id}; t={}", process_token()),
        }
    }

    /// This node's name in `Cache-Status`.
    pub fn cache_status_name(&self) -> &str {
        &self.cache_status_name
    }

    /// Our `CDN-Loop` entry, `<cdn_id>; t=<token>`.
    pub fn loop_entry(&self) -> &str {
        &self.entry
    }

    /// Whether `req` went round in a loop: it carries our token, or names `cdn_id` more
    /// than `max_hops` times (RFC 8586 2). Then it gets 508 and nothing is fetched.
    pub fn is_loop(&self, req: &Request) -> bool {
        let mut ours = 0u32;
        for (_, v) in req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(CDN_LOOP)) {
            for info in split_top(v, b',') {
                let mut parts = split_top(info, b';');
                let id = trim(parts.next().unwrap_or_default());
                if !id.eq_ignore_ascii_case(self.cdn_id.as_bytes()) {
                    continue;
                }
                ours += 1;
                if ours > self.max_hops || parts.any(is_our_token) {
                    return true;
                }
            }
        }
        false
    }

    /// The `CDN-Loop` value for a request sent on behalf of `req`: what `req` carried, all
    /// its field lines in order, then our entry.
    pub fn cdn_loop(&self, req: &Request) -> HeaderValue {
        let mut v = Vec::new();
        for (_, line) in req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(CDN_LOOP)) {
            let line = trim(line);
            if !line.is_empty() {
                v.extend_from_slice(line);
                v.extend_from_slice(b", ");
            }
        }
        v.extend_from_slice(self.entry.as_bytes());
        HeaderValue::from_bytes(&v).unwrap_or_else(|_| {
            // Our entry alone is always a valid value (the config checks `cdn_id`).
            HeaderValue::from_str(&self.entry).unwrap_or(HeaderValue::from_static("reel"))
        })
    }
}

/// Whether a `CDN-Loop` parameter is `t=<our token>` (as a token or a quoted string).
fn is_our_token(param: &[u8]) -> bool {
    let Some(eq) = param.iter().position(|&b| b == b'=') else { return false };
    let (name, value) = (trim(&param[..eq]), trim(&param[eq + 1..]));
    let value = value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")).unwrap_or(value);
    name.eq_ignore_ascii_case(b"t") && value == process_token().as_bytes()
}

fn trim(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// Splits `v` at each `sep` outside quoted strings (RFC 9110 5.6.4, backslash escapes
/// included), so a parameter value cannot split an entry.
fn split_top(v: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(v);
    std::iter::from_fn(move || {
        let s = rest?;
        let (mut quoted, mut escaped) = (false, false);
        for (i, &b) in s.iter().enumerate() {
            match b {
                _ if escaped => escaped = false,
                b'\\' if quoted => escaped = true,
                b'"' => quoted = !quoted,
                _ if b == sep && !quoted => {
                    rest = Some(&s[i + 1..]);
                    return Some(&s[..i]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(s)
    })
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use reel_http::{HeadStatus, Limits};

    use super::*;

    fn req(fields: &[&str]) -> Request {
        let mut head = String::from("GET /a HTTP/1.1\r\nhost: h\r\n");
        for f in fields {
            head.push_str(&format!("cdn-loop: {f}\r\n"));
        }
        head.push_str("\r\n");
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut r = Request::new(a, a);
        assert!(matches!(
            r.parse_head(head.as_bytes(), &Limits::default()),
            Ok(HeadStatus::Complete(_))
        ));
        r
    }

    #[test]
    fn the_token_is_drawn_once_per_process() {
        let t = process_token();
        assert_eq!(t.len(), 16);
        assert!(t.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(process_token(), t);
        assert_eq!(Node::default().loop_entry(), format!("reel; t={t}"));
    }

    #[test]
    fn hops_are_counted_per_entry_of_our_cdn_id() {
        let n = Node::new("reel", "edge", 3);
        assert!(!n.is_loop(&req(&[])));
        assert!(!n.is_loop(&req(&["reel, reel; t=1", "REEL; t=\"2\""])));
        assert!(n.is_loop(&req(&["reel, reel; t=1", "reel; t=2, other, Reel"])));
        // Other CDNs do not count, nor does our id inside a parameter or a quoted string.
        assert!(!n.is_loop(&req(&["a, b, c, d, e; x=reel", "f; x=\"reel, reel, reel, reel\""])));
        let strict = Node::new("cdn.example.com:8443", "edge", 0);
        assert!(strict.is_loop(&req(&["CDN.example.com:8443"])));
        assert!(!strict.is_loop(&req(&["cdn.example.com"])));
    }

    #[test]
    fn our_own_token_is_a_loop_at_the_first_hop() {
        let n = Node::new("reel", "edge", 3);
        let t = process_token();
        assert!(n.is_loop(&req(&[&format!("reel; t={t}")])));
        assert!(n.is_loop(&req(&[&format!("x, reel ; a=1 ; t=\"{t}\"")])));
        // The token of another process, or under another CDN's name, is not ours.
        assert!(!n.is_loop(&req(&["reel; t=0000000000000000"])));
        assert!(!n.is_loop(&req(&[&format!("other; t={t}")])));
    }

    #[test]
    fn the_outgoing_field_appends_our_entry_to_what_came_in() {
        let n = Node::new("reel", "edge", 3);
        let e = n.loop_entry().to_string();
        assert_eq!(n.cdn_loop(&req(&[])).as_bytes(), e.as_bytes());
        let v = n.cdn_loop(&req(&["foo; x=1, bar", " reel; t=abc "]));
        assert_eq!(v.to_str().unwrap(), format!("foo; x=1, bar, reel; t=abc, {e}"));
    }
}
