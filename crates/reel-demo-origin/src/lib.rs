//! Origin simulator: synthetic live HLS, VOD catalog, production-shaped latency.
