//! Persistent log-structured segment store read through the page cache.
