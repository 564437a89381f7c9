//! What to write instead, for the problems the TOML parser and serde report in their own
//! words: the key of a syntax error (found from the text, since a document that does not
//! parse has no key paths), `[listener]` written for `[[listener]]` (and the reverse), and
//! a duration or size left unquoted.

/// The key path of the `key = value` line holding `offset`, under the nearest `[table]` or
/// `[[array]]` header above it (`http.idle_timeout`, `listener[1].address`); the header's
/// own path when `offset` is on a header line.
pub(super) fn syntax_key(text: &str, offset: usize) -> Option<String> {
    let offset = offset.min(text.len());
    let before = text.get(..offset)?;
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    let line_end = text[line_start..].find('\n').map_or(text.len(), |n| line_start + n);
    let line = text[line_start..line_end].trim();
    let (table, counts) = header_above(&text[..line_start]);
    if let Some(h) = header(line) {
        let n = counts.iter().filter(|c| **c == h.0).count();
        return Some(if h.1 { format!("{}[{n}]", h.0) } else { h.0 });
    }
    let (key, _) = line.split_once('=')?;
    let key: String = key.trim().chars().filter(|c| !matches!(c, '"' | '\'' | ' ')).collect();
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.".contains(c);
    if key.is_empty() || !key.chars().all(plain) {
        return None;
    }
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key,
    })
}

/// `[name]` → `(name, false)`, `[[name]]` → `(name, true)`.
fn header(line: &str) -> Option<(String, bool)> {
    let line = line.split('#').next().unwrap_or("").trim();
    let (inner, array) = match line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
        Some(i) => (i, true),
        None => (line.strip_prefix('[')?.strip_suffix(']')?, false),
    };
    let name: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
    (!name.is_empty()).then_some((name, array))
}

/// The path of the last header in `text` (with its array index), and the names of every
/// `[[array]]` header in it, in order.
fn header_above(text: &str) -> (Option<String>, Vec<String>) {
    let mut arrays: Vec<String> = Vec::new();
    let mut last = None;
    for line in text.lines() {
        if let Some((name, array)) = header(line.trim()) {
            if array {
                let n = arrays.iter().filter(|a| **a == name).count();
                arrays.push(name.clone());
                last = Some(format!("{name}[{n}]"));
            } else {
                last = Some(name);
            }
        }
    }
    (last, arrays)
}

/// The sections that are one table each (`[http]`), not lists of tables.
const SINGLE: [&str; 10] = [
    "server",
    "log",
    "cores",
    "http",
    "health",
    "admin",
    "access_log",
    "store",
    "cache",
    "demo_origin",
];

/// The name a `[...]` header gives the key path `path` (`origin_group[0].tier` →
/// `origin_group.tier`).
fn table_name(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// What to write instead, for a deserialization problem at `key` saying `message`.
pub(super) fn after_parse(key: &str, message: &str) -> Option<String> {
    if key.is_empty() {
        return None;
    }
    let name = table_name(key);
    if message.starts_with("invalid type: map, expected a sequence") {
        return Some(format!(
            "a list of tables: write [[{name}]] (two brackets) above each entry, not [{name}]"
        ));
    }
    // `[[http]]` makes `http` a list whose first table serde reads as the section.
    let top = key.split(['.', '[']).next().unwrap_or("");
    if SINGLE.contains(&top) && key.starts_with(&format!("{top}[")) {
        return Some(format!("one table: write [{top}] (one bracket), not [[{top}]]"));
    }
    None
}

/// What to write instead, for a syntax error on the `key = value` line `line`: a value
/// that is not TOML because its quotes are missing.
pub(super) fn syntax(line: &str) -> Option<String> {
    let (_, value) = line.split_once('=')?;
    let value = value.split('#').next().unwrap_or("").trim();
    let digits = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let unit = value[digits..].trim();
    if digits > 0 && !unit.is_empty() && unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Some(format!(
            "durations and sizes are strings: write \"{}{unit}\" (in quotes)",
            &value[..digits]
        ));
    }
    let bare = !value.is_empty()
        && !value.starts_with(['"', '\'', '[', '{'])
        && value.parse::<f64>().is_err()
        && !matches!(value, "true" | "false");
    bare.then(|| format!("text values are quoted: write \"{value}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_find_their_key() {
        let text =
            "[http]\nidle_timeout = 60s\n[[listener]]\nname = \"a\"\n[[listener]]\naddress = x\n";
        let at = |s: &str| text.find(s).unwrap();
        assert_eq!(syntax_key(text, at("60s")).as_deref(), Some("http.idle_timeout"));
        assert_eq!(syntax_key(text, at("x\n")).as_deref(), Some("listener[1].address"));
        assert_eq!(syntax_key("a = [\n", 5).as_deref(), Some("a"));
        assert_eq!(syntax_key("[[r]]\n[[r]]\n", 8).as_deref(), Some("r[1]"));
        assert_eq!(table_name("origin_group[0].tier[1]"), "origin_group.tier");
        assert_eq!(
            syntax("idle_timeout = 60s").as_deref().map(|s| s.contains("\"60s\"")),
            Some(true)
        );
        assert!(syntax("level = info").unwrap().contains("\"info\""));
        assert_eq!(syntax("x = 10"), None);
    }
}
