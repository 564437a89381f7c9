//! Request methods (RFC 9110 section 9).

use std::fmt;

/// A request method. Method names are case-sensitive (RFC 9110 section 9.1), so `get`
/// is [`Method::Other`], not [`Method::Get`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// `PATCH`
    Patch,
    /// `TRACE`
    Trace,
    /// `CONNECT`
    Connect,
    /// Any other syntactically valid method token (RFC 9110 section 9.1: unknown methods
    /// are parsed; the application answers 501, see
    /// [`Response::for_unsupported_method`](crate::Response::for_unsupported_method)).
    Other(Box<str>),
}

impl Method {
    /// Every method with a variant of its own, in a stable order.
    pub const STANDARD: [Method; 9] = [
        Method::Get,
        Method::Head,
        Method::Post,
        Method::Put,
        Method::Delete,
        Method::Options,
        Method::Patch,
        Method::Trace,
        Method::Connect,
    ];

    /// Maps a method token (already validated as an RFC 9110 token) to a `Method`.
    pub fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            other => Method::Other(other.into()),
        }
    }

    /// The method token as sent on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other(s) => s,
        }
    }

    /// True for methods defined by RFC 9110/5789 (everything but [`Method::Other`]).
    pub fn is_known(&self) -> bool {
        !matches!(self, Method::Other(_))
    }

    /// Whether the method is unsafe (RFC 9110 section 9.2.1): a successful response to it
    /// invalidates stored responses for its target (RFC 9111 section 4.4). Unknown methods
    /// are treated as unsafe.
    pub fn is_unsafe(&self) -> bool {
        !matches!(self, Method::Get | Method::Head | Method::Options | Method::Trace)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
