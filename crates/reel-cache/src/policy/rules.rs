//! Path glob rules (`*.m3u8`, `/live/*`, `*`) and the per-path TTL rules built on them.
//! The first matching rule wins.
//!
//! Glob syntax: `*` matches any run of bytes, including `/` (so `*.m3u8` matches playlists at
//! any depth); every other byte matches itself, case-sensitively (paths are case-sensitive,
//! RFC 3986 6.2.2.1). Patterns match the whole path, without the query.

use std::time::Duration;

/// A compiled path glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Box<[u8]>,
}

impl Glob {
    /// Compiles a pattern. Every pattern is valid; consecutive `*` collapse.
    pub fn new(pattern: &str) -> Self {
        let mut out = Vec::with_capacity(pattern.len());
        for &b in pattern.as_bytes() {
            if !(b == b'*' && out.last() == Some(&b'*')) {
                out.push(b);
            }
        }
        Self { pattern: out.into_boxed_slice() }
    }

    /// The pattern text.
    pub fn as_str(&self) -> &str {
        // Built from a &str and only '*' runs were removed, so it is still UTF-8.
        std::str::from_utf8(&self.pattern).unwrap_or_default()
    }

    /// Whether `path` matches the whole pattern. Linear-time-per-star backtracking: at most
    /// O(pattern * path) steps, never exponential.
    pub fn matches(&self, path: &[u8]) -> bool {
        let p = &self.pattern;
        let (mut pi, mut si) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while si < path.len() {
            if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, si));
                pi += 1;
            } else if pi < p.len() && p[pi] == path[si] {
                pi += 1;
                si += 1;
            } else if let Some((sp, ss)) = star {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&b| b == b'*')
    }
}

/// An ordered list of `(glob, value)` rules; [`RuleSet::find`] returns the first match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet<T> {
    rules: Vec<(Glob, T)>,
}

impl<T> Default for RuleSet<T> {
    fn default() -> Self {
        Self { rules: Vec::new() }
    }
}

impl<T> RuleSet<T> {
    /// Builds a rule set from `(pattern, value)` pairs, keeping their order.
    pub fn new<S: AsRef<str>>(rules: impl IntoIterator<Item = (S, T)>) -> Self {
        Self { rules: rules.into_iter().map(|(p, v)| (Glob::new(p.as_ref()), v)).collect() }
    }

    /// Appends a rule (lowest priority).
    pub fn push(&mut self, pattern: &str, value: T) {
        self.rules.push((Glob::new(pattern), value));
    }

    /// The value of the first rule whose glob matches `path` (query excluded by the caller;
    /// a `?` and anything after it are ignored here to be safe).
    pub fn find(&self, path: &[u8]) -> Option<&T> {
        let path = match path.iter().position(|&b| b == b'?') {
            Some(i) => &path[..i],
            None => path,
        };
        self.rules.iter().find(|(g, _)| g.matches(path)).map(|(_, v)| v)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// A per-path TTL rule: used when the origin gives no explicit freshness, or always when
/// `override_origin` is set (see [`crate::policy::freshness::freshness_lifetime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlRule {
    /// Freshness lifetime to assign.
    pub ttl: Duration,
    /// Replace the origin's explicit freshness instead of only filling its absence.
    pub override_origin: bool,
}

/// The rule set type the cache path keeps for per-path TTLs.
pub type TtlRules = RuleSet<TtlRule>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "/anything/at/all.ts", true),
            ("*.m3u8", "/live/ch1/index.m3u8", true),
            ("*.m3u8", "/index.m3u8", true),
            ("*.m3u8", "/index.m3u8x", false),
            ("*.m3u8", "/index.M3U8", false),
            ("/live/*", "/live/", true),
            ("/live/*", "/live/a/b/c.ts", true),
            ("/live/*", "/live", false),
            ("/live/*", "/vod/live/a.ts", false),
            ("/live/*.ts", "/live/a/b.ts", true),
            ("/live/*.ts", "/live/a/b.m4s", false),
            ("/exact", "/exact", true),
            ("/exact", "/exact/", false),
            ("", "", true),
            ("", "/", false),
            ("*a*b*c", "/xxaxxbxxc", true),
            ("*a*b*c", "/xxaxxcxxb", false),
            ("*a*b*c", "/xaybzcd", false),
            ("*seg*", "/a/seg1.ts", true),
            ("/vod/*/init.mp4", "/vod/x/y/init.mp4", true),
            ("/vod/*/init.mp4", "/vod/init.mp4", false),
            ("**/x", "/a/x", true),
            ("/a*b", "/ab", true),
            ("/a*b", "/a/b/b", true),
        ];
        for (pat, path, want) in cases {
            assert_eq!(Glob::new(pat).matches(path.as_bytes()), *want, "{pat} vs {path}");
        }
    }

    #[test]
    fn glob_hostile_is_fast_and_correct() {
        // Would be exponential with naive recursion.
        let pat = "*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let path = "a".repeat(5000);
        assert!(!Glob::new(pat).matches(path.as_bytes()));
        assert_eq!(Glob::new("a**b").as_str(), "a*b");
    }

    #[test]
    fn first_match_wins() {
        let rules = RuleSet::new([("*.m3u8", 1), ("/live/*", 2), ("*", 3)]);
        assert_eq!(rules.find(b"/live/index.m3u8"), Some(&1));
        assert_eq!(rules.find(b"/live/seg1.ts"), Some(&2));
        assert_eq!(rules.find(b"/vod/seg1.ts"), Some(&3));
        assert_eq!(rules.find(b"/live/index.m3u8?_HLS_msn=3"), Some(&1));
        assert_eq!(rules.len(), 3);
        let mut empty: RuleSet<u8> = RuleSet::default();
        assert!(empty.is_empty());
        assert_eq!(empty.find(b"/x"), None);
        empty.push("/x", 9);
        assert_eq!(empty.find(b"/x"), Some(&9));
    }

    #[test]
    fn shipped_config_rules_time_playlists_and_segments() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/reel.toml");
        let cfg = reel_config::load_and_validate(path).expect("config/reel.toml is valid");
        let rules = TtlRules::new(cfg.cache.rule.iter().map(|r| {
            (r.pattern.as_str(), TtlRule { ttl: r.ttl.get(), override_origin: r.override_origin })
        }));
        let ttl = |path: &str| rules.find(path.as_bytes()).map(|r| r.ttl);
        assert_eq!(ttl("/live/index.m3u8"), Some(Duration::from_secs(1)));
        let day = Duration::from_secs(86_400);
        assert_eq!(ttl("/live/seg_1.ts"), Some(day));
        assert_eq!(ttl("/live/seg_1.m4s"), Some(day));
    }
}
