//! The built-in defaults `serve` runs on when no `--config` is given and there is no file
//! at the default path (an installed binary, started from any directory with
//! `reel --origin URL`): the shipped `config/reel.toml` without its demo (no `[[site]]`,
//! no `[[origin_group]]`, no demo origin), so its paths are relative to the working
//! directory as the shipped file's are.

use reel_config::{Config, ConfigErrors};

/// How problems and `/status` name the built-in defaults.
pub(crate) const NAME: &str = "(built-in defaults)";

/// The shipped configuration, compiled in.
const SHIPPED: &str = include_str!("../../../../config/reel.toml");

/// The built-in defaults, validated.
pub(crate) fn config() -> Result<Config, ConfigErrors> {
    let mut cfg = Config::parse(SHIPPED, NAME)?;
    cfg.site.clear();
    cfg.origin_group.clear();
    cfg.demo_origin.enabled = false;
    let problems = cfg.validate();
    if problems.is_empty() { Ok(cfg) } else { Err(ConfigErrors { problems }) }
}

/// What the first log line says of them: where reel listens and writes.
pub(crate) fn summary(cfg: &Config) -> String {
    let listeners: Vec<String> = cfg.listener.iter().map(|l| l.address.to_string()).collect();
    let disks: Vec<String> =
        cfg.store.disks().iter().map(|(_, p, s)| format!("{} ({s})", p.display())).collect();
    format!(
        "data on {}, admin on {}, store {}, access log {}",
        listeners.join(" and "),
        cfg.admin.address,
        disks.join(", "),
        cfg.access_log.path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_shipped_config_without_the_demo() {
        let cfg = config().expect("the built-in defaults are valid");
        let shipped = Config::parse(SHIPPED, "reel.toml").unwrap();
        assert!(cfg.site.is_empty() && cfg.origin_group.is_empty() && !cfg.demo_origin.enabled);
        assert_eq!(cfg.listener, shipped.listener);
        assert_eq!(cfg.store.disks(), shipped.store.disks());
        assert!(summary(&cfg).contains("127.0.0.1:8080"), "{}", summary(&cfg));
    }
}
