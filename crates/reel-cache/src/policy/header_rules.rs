//! `[[site.header]]` rules as values: which responses a rule applies to (path glob, status
//! list) and the field it sets, adds or removes, compiled once per config generation.
//!
//! Field names are interned: a response's field names are `&'static str` or owned strings,
//! and an owned copy per response would be an allocation per response. Each distinct name
//! is leaked once for the life of the process (a reload that keeps the names adds nothing).

use std::collections::HashSet;
use std::sync::Mutex;

use bytes::Bytes;
use reel_config::{HeaderAction, HeaderRuleConfig};

use super::rules::Glob;

/// One compiled `[[site.header]]` rule.
#[derive(Debug, Clone)]
pub struct HeaderRule {
    /// What it does.
    pub action: HeaderAction,
    /// The field name, lowercase.
    pub name: &'static str,
    /// The value of `set` and `add` (empty for `remove`).
    pub value: Bytes,
    path: Option<Glob>,
    status: Vec<u16>,
}

impl HeaderRule {
    /// Compiles a validated rule.
    pub fn new(c: &HeaderRuleConfig) -> HeaderRule {
        HeaderRule {
            action: c.action,
            name: intern(&c.name.to_ascii_lowercase()),
            value: c
                .value
                .as_deref()
                .map(|v| Bytes::copy_from_slice(v.as_bytes()))
                .unwrap_or_default(),
            path: c.path.as_ref().map(|p| Glob::new(p.as_str())),
            status: c.status.clone(),
        }
    }

    /// Whether the rule applies to a response of `status` to a request for `path`.
    pub fn applies(&self, path: &[u8], status: u16) -> bool {
        (self.status.is_empty() || self.status.contains(&status))
            && self.path.as_ref().is_none_or(|g| g.matches(path))
    }
}

/// `name` as a `&'static str`, leaked the first time it is seen.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut g = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let set = g.get_or_insert_with(HashSet::new);
    if let Some(n) = set.get(name) {
        return n;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    set.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(path: Option<&str>, status: &[u16]) -> HeaderRule {
        HeaderRule::new(&HeaderRuleConfig {
            action: HeaderAction::Set,
            name: "Cache-Control".into(),
            value: Some("max-age=1".into()),
            path: path.map(|p| reel_config::PathGlob(p.into())),
            status: status.to_vec(),
        })
    }

    #[test]
    fn rules_match_by_path_and_status() {
        let r = rule(Some("*.m3u8"), &[200, 206]);
        assert_eq!(r.name, "cache-control");
        assert_eq!(&r.value[..], b"max-age=1");
        assert!(r.applies(b"/live/a/index.m3u8", 200));
        assert!(r.applies(b"/x.m3u8", 206));
        assert!(!r.applies(b"/live/a/index.m3u8", 404));
        assert!(!r.applies(b"/live/a/seg1.ts", 200));
        let any = rule(None, &[]);
        assert!(any.applies(b"/anything", 503));
    }

    #[test]
    fn names_are_interned_once() {
        let (a, b) = (rule(None, &[]), rule(Some("/x"), &[]));
        assert!(std::ptr::eq(a.name, b.name));
    }
}
