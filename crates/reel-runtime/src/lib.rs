//! Core plan, pinned thread-per-core workers, SO_REUSEPORT listeners and shutdown.
