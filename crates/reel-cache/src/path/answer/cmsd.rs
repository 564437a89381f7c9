//! `[site.cmsd]`: the CTA-5006 fields a site's responses leave with. `CMSD-Static` says
//! the object's type (`ot`) unless the response carries the origin's own (the origin knows
//! more, such as `d`); `CMSD-Dynamic` adds this edge's entry to the list the hops before
//! it wrote, with `du` (duress) while the node is overloaded, so a player steps its
//! bitrate down before a balancer moves it. Values are rendered once per config
//! generation; a response clones two of them.

use std::borrow::Cow;

use bytes::Bytes;
use reel_http::{Request, Response};

use super::edits::{lines, name_of, value_of};
use crate::policy::cmsd::{self, ObjectType};

/// A site's pre-rendered CMSD values.
#[derive(Debug)]
pub struct Cmsd {
    /// `CMSD-Static` for each [`ObjectType`], in its index order.
    statics: [Bytes; ObjectType::ALL.len()],
    /// `CMSD-Dynamic` naming this edge, without and with `du`.
    dynamic: [Bytes; 2],
}

impl Cmsd {
    /// The values for an edge named `id`; `None` when `id` cannot be an sf-string (the
    /// config refuses such an id).
    pub fn new(id: &str) -> Option<Cmsd> {
        let dynamic = [
            Bytes::from(cmsd::dynamic_value(id, false)?),
            Bytes::from(cmsd::dynamic_value(id, true)?),
        ];
        let statics = ObjectType::ALL.map(|t| Bytes::from(cmsd::static_value(t)));
        Some(Cmsd { statics, dynamic })
    }

    /// Adds the fields to `resp`, a response to `req`; `duress`: the node is overloaded.
    pub(in crate::path) fn apply(&self, req: &Request, resp: &mut Response, duress: bool) {
        let field = |name: &str| -> Option<&[u8]> {
            if let Some((_, v)) = resp.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return Some(v);
            }
            lines(&resp.raw_headers)
                .find(|l| name_of(l).eq_ignore_ascii_case(name.as_bytes()))
                .map(value_of)
        };
        let has_static = field("cmsd-static").is_some();
        let add_static = (!has_static).then(|| {
            let ot = cmsd::object_type(req.path().as_bytes(), || field("content-type"));
            let i = ObjectType::ALL.iter().position(|&t| t == ot).unwrap_or(0);
            self.statics.get(i).cloned().unwrap_or_default()
        });
        if let Some(v) = add_static {
            resp.headers.push((Cow::Borrowed("cmsd-static"), v));
        }
        let dynamic = self.dynamic[usize::from(duress)].clone();
        resp.headers.push((Cow::Borrowed("cmsd-dynamic"), dynamic));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(path: &str) -> Request {
        let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
        let mut r = Request::new(a, a);
        let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(matches!(
            r.parse_head(head.as_bytes(), &reel_http::Limits::default()),
            Ok(reel_http::HeadStatus::Complete(_))
        ));
        r
    }

    fn field<'a>(r: &'a Response, name: &str) -> Vec<&'a [u8]> {
        r.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| &v[..]).collect()
    }

    #[test]
    fn static_from_path_or_type_and_dynamic_with_duress() {
        let c = Cmsd::new("edge-1").expect("a valid id");
        let mut r = Response::new(200)
            .raw_headers(Bytes::from_static(b"content-type: audio/mp4\r\ncmsd-dynamic: \"o\"\r\n"));
        c.apply(&req("/a/seg.m4s?x=1"), &mut r, false);
        assert_eq!(field(&r, "cmsd-static"), [b"ot=a"]);
        assert_eq!(field(&r, "cmsd-dynamic"), [b"\"edge-1\""], "ours after the origin's");

        let mut r = Response::new(304);
        c.apply(&req("/live/index.m3u8"), &mut r, true);
        assert_eq!(field(&r, "cmsd-static"), [b"ot=m"]);
        assert_eq!(field(&r, "cmsd-dynamic"), [b"\"edge-1\";du"]);
    }

    #[test]
    fn the_origins_static_field_is_kept() {
        let c = Cmsd::new("e").expect("a valid id");
        let mut r =
            Response::new(200).raw_headers(Bytes::from_static(b"CMSD-Static: ot=v,d=4004\r\n"));
        c.apply(&req("/s.ts"), &mut r, false);
        assert!(field(&r, "cmsd-static").is_empty());
        assert_eq!(&r.raw_headers[..], b"CMSD-Static: ot=v,d=4004\r\n");
        assert!(Cmsd::new("\u{7f}").is_none());
    }
}
