//! Origin client: ordered origin groups, health checks, hyper HTTP/1.1 pools.
