//! The config loader (`reel_config`): TOML parsing with positions, the schema and the
//! validation of every key, as `reel check` and a reload run them. Every problem reported
//! points into the text (`file:line:column`).

use reel_config::Config;

/// Loads `data` as a config file.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Config::parse_and_validate(text, "fuzz.toml") {
        Ok(cfg) => {
            let _ = cfg.hash();
            assert!(cfg.diff_needs_restart(&cfg).is_empty(), "a config differs from itself");
        }
        Err(e) => {
            assert!(!e.problems.is_empty(), "an error without a problem");
            let lines: Vec<&str> = text.split('\n').collect();
            for p in &e.problems {
                assert_eq!(p.file, "fuzz.toml");
                assert!(!p.message.is_empty(), "{p}");
                assert!((1..=lines.len().max(1)).contains(&p.line), "{p}: outside the text");
                let width = lines.get(p.line - 1).map_or(0, |l| l.chars().count());
                assert!((1..=width + 1).contains(&p.column), "{p}: beyond column {}", width + 1);
            }
        }
    }
}
