//! A site's `name` (a bounded, unique `site` label) and `[site.cmsd]` (an identity a
//! structured-field string can carry).

use std::collections::HashMap;

use super::{Found, bad};
use crate::Config;

/// Longest site name and CMSD identity.
const MOST_CHARS: usize = 64;

/// `name` and `[site.cmsd]` of every site.
pub(super) fn check_telemetry(found: &mut Found, cfg: &Config) {
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, site) in cfg.site.iter().enumerate() {
        if let Some(n) = &site.name
            && let Err(e) = check_name(n)
        {
            bad(found, format!("site[{i}].name"), e);
        }
        let name = site.metrics_name();
        if let Some(other) = names.insert(name, i)
            && !name.is_empty()
        {
            let key = if site.name.is_some() { "name" } else { "hosts[0]" };
            bad(
                found,
                format!("site[{i}].{key}"),
                format!(
                    "the site's name {name:?} is already site[{other}]'s; give one of them \
                     another `name` (it labels the site's metrics)"
                ),
            );
        }
        let id = &site.cmsd.id;
        if id.len() > MOST_CHARS || !id.bytes().all(|b| (b' '..=b'~').contains(&b)) {
            bad(
                found,
                format!("site[{i}].cmsd.id"),
                format!("{id:?} must be printable ASCII, at most {MOST_CHARS} characters"),
            );
        }
    }
}

/// A `name` value: what a `site` label may say.
fn check_name(n: &str) -> Result<(), String> {
    if n.is_empty() || n.len() > MOST_CHARS {
        return Err(format!("{n:?} must be 1 to {MOST_CHARS} characters"));
    }
    if n.starts_with('_') {
        return Err(format!("{n:?} starts with \"_\", kept for reel's own labels (\"_none\")"));
    }
    if let Some(c) = n.chars().find(|c| !(c.is_ascii_alphanumeric() || ".-_:".contains(*c))) {
        return Err(format!(
            "{n:?} holds {c:?}: letters, digits, \".\", \"-\", \"_\" and \":\" only"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_bounded_label_values() {
        assert!(check_name("tenant-a.example.com").is_ok());
        assert!(check_name("a:b_c").is_ok());
        for n in ["", "_none", "a b", "a\"b", "é", &"x".repeat(65)] {
            assert!(check_name(n).is_err(), "{n:?}");
        }
    }
}
