//! A token's ACL: `!`-separated patterns in which `*` matches any run of characters
//! (`/` included, and the empty run), every other character itself. A path is allowed when
//! one pattern matches all of it.

/// Whether `path` matches one of the `!`-separated patterns of `acl`.
pub fn allows(acl: &str, path: &str) -> bool {
    acl.split('!').any(|p| matches(p.as_bytes(), path.as_bytes()))
}

/// Glob match with `*` only, iterative (no recursion, at most `p.len() * s.len()` steps).
pub fn matches(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // The last `*` seen and the subject position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, si));
                pi += 1;
            }
            Some(&c) if c == s[si] => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                // Let the last `*` take one more byte and retry from after it.
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..).is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}
