//! Operations: health, admin listener, metrics, access log, reload.
