//! What runs on each worker thread: the per-worker application the runtime creates and the
//! request handler in front of the cache (`app`), a request's CMCD for its log line and
//! metrics (`cmcd`), and the answer to a connection refused at accept (`refused`). The listeners' TLS and HTTP/3 sides it serves are
//! `crate::listeners`.

pub(crate) mod app;
pub(crate) mod cmcd;
pub(crate) mod refused;
