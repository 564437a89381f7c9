//! Strict HTTP/1.1 codec and connection loop with a sendfile response path.
