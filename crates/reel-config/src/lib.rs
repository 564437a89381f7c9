//! TOML configuration schema, parsing and validation for reel.
