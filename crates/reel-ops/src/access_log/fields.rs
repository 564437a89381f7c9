//! The JSON line's fields: their names, their default order, and the chosen list a line is
//! written with (`access_log.fields`).
//!
//! A field with nothing to say on a line (`peer` of a direct client, `request` and `error`
//! of a request that was parsed, `denied` of one that was not refused) is left out of it.
//! A new field is a variant here, its name in [`Field::name`], its value in
//! `format::json_field`, and a row of the table in `docs/operations.md` ("Logs").

/// One JSON key of the access log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// When the request arrived (RFC 3339, UTC, milliseconds).
    Time,
    /// The client's address.
    Client,
    /// The socket's peer when it is not the client.
    Peer,
    /// The request method.
    Method,
    /// The Host header.
    Host,
    /// The request target.
    Path,
    /// The protocol.
    Protocol,
    /// The response status.
    Status,
    /// Bytes written to the client.
    Bytes,
    /// The cache result.
    Cache,
    /// Time the origin took to answer, or `null`.
    OriginMs,
    /// Total time of the request.
    TotalMs,
    /// The User-Agent header.
    Ua,
    /// The request line of a request refused before it was parsed.
    Request,
    /// Why the codec refused it.
    Error,
    /// Why the site's access rules refused it.
    Denied,
}

impl Field {
    /// Every field, in the default order: the line reel has always written.
    pub const ALL: [Field; 16] = [
        Field::Time,
        Field::Client,
        Field::Peer,
        Field::Method,
        Field::Host,
        Field::Path,
        Field::Protocol,
        Field::Status,
        Field::Bytes,
        Field::Cache,
        Field::OriginMs,
        Field::TotalMs,
        Field::Ua,
        Field::Request,
        Field::Error,
        Field::Denied,
    ];

    /// The JSON key (and its name in `access_log.fields`).
    pub fn name(self) -> &'static str {
        match self {
            Field::Time => "time",
            Field::Client => "client",
            Field::Peer => "peer",
            Field::Method => "method",
            Field::Host => "host",
            Field::Path => "path",
            Field::Protocol => "protocol",
            Field::Status => "status",
            Field::Bytes => "bytes",
            Field::Cache => "cache",
            Field::OriginMs => "origin_ms",
            Field::TotalMs => "total_ms",
            Field::Ua => "ua",
            Field::Request => "request",
            Field::Error => "error",
            Field::Denied => "denied",
        }
    }

    /// The field named `name`.
    pub fn from_name(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// How a worker writes and keeps lines: the JSON fields in order and the sampling per
/// status class. Part of a config generation: a reload that changes them reopens nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// The JSON fields, in order (the combined format ignores them).
    pub fields: Vec<Field>,
    /// Which lines are kept.
    pub sample: crate::access_log::sample::Sample,
}

impl Default for Layout {
    fn default() -> Self {
        Layout { fields: Field::ALL.to_vec(), sample: Default::default() }
    }
}
