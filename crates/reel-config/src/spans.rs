//! Maps between byte offsets in the TOML text, key paths (`cache.rule[1].ttl`) and
//! line:column positions, using toml's spanned document parser.
//!
//! Deserialization stops at the first error. To still report every syntax-valid problem in
//! one go, [`deserialize_reporting_all`] blanks the offending `key = value` with spaces
//! (which keeps every other byte offset, hence every span, unchanged) and deserializes
//! again, until the document deserializes or the offending item cannot be removed cleanly.

use std::collections::HashMap;
use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue};

use crate::error::ConfigProblem;

mod hint;

/// Upper bound on deserialization retries; each one removes one offending key.
const MAX_RETRIES: usize = 100;

/// One key (or array element) of the document.
#[derive(Debug)]
struct Entry {
    path: String,
    /// `None` for array elements.
    key_span: Option<Range<usize>>,
    /// For a `[table]` or `[[array]]` header this is the header text.
    value_span: Range<usize>,
    parent: Option<usize>,
}

fn collect(table: &DeTable<'_>, prefix: &str, parent: Option<usize>, out: &mut Vec<Entry>) {
    for (key, value) in table.iter() {
        let path = if prefix.is_empty() {
            key.get_ref().to_string()
        } else {
            format!("{prefix}.{}", key.get_ref())
        };
        let idx = out.len();
        out.push(Entry {
            path: path.clone(),
            key_span: Some(key.span()),
            value_span: value.span(),
            parent,
        });
        collect_value(value.get_ref(), &path, idx, out);
    }
}

fn collect_value(value: &DeValue<'_>, path: &str, idx: usize, out: &mut Vec<Entry>) {
    match value {
        DeValue::Table(t) => collect(t, path, Some(idx), out),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let item_path = format!("{path}[{i}]");
                let item_idx = out.len();
                out.push(Entry {
                    path: item_path.clone(),
                    key_span: None,
                    value_span: item.span(),
                    parent: Some(idx),
                });
                collect_value(item.get_ref(), &item_path, item_idx, out);
            }
        }
        _ => {}
    }
}

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.is_empty() && span.start == offset)
}

/// Byte offset to 1-based (line, column in characters).
pub(crate) fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut cut = offset;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let before = &text[..cut];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    (line, before[line_start..].chars().count() + 1)
}

/// The key paths of a parsed document with their positions.
#[derive(Debug)]
pub(crate) struct Document {
    entries: Vec<Entry>,
}

impl Document {
    fn parse(text: &str) -> (Document, Vec<toml::de::Error>) {
        let (table, errors) = DeTable::parse_recoverable(text);
        let mut entries = Vec::new();
        collect(table.get_ref(), "", None, &mut entries);
        (Document { entries }, errors)
    }

    /// The innermost entry whose key or value contains `offset`.
    fn entry_at(&self, offset: usize) -> Option<usize> {
        let mut best: Option<(usize, usize, usize)> = None; // (span len, -depth proxy, index)
        for (i, e) in self.entries.iter().enumerate() {
            for span in e.key_span.iter().chain(std::iter::once(&e.value_span)) {
                if contains(span, offset) {
                    let cand = (span.len(), usize::MAX - e.path.len(), i);
                    if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                        best = Some(cand);
                    }
                }
            }
        }
        best.map(|b| b.2)
    }

    /// Where a problem about `path` should point: the value of a `key = value`, the header of
    /// a table.
    pub(crate) fn positions(&self, text: &str) -> HashMap<String, (usize, usize)> {
        self.entries.iter().map(|e| (e.path.clone(), position(text, e.value_span.start))).collect()
    }

    /// The byte range of a whole `key = value` line that contains entry `idx` (or of its
    /// nearest enclosing one), if removing it leaves valid TOML with the same structure.
    fn removable_range(&self, text: &str, idx: usize) -> Option<(usize, Range<usize>)> {
        let mut cur = Some(idx);
        while let Some(i) = cur {
            let e = &self.entries[i];
            if let Some(key) = &e.key_span {
                if e.value_span.start < key.start {
                    // A [table] or [[array]] header: removing it would re-parent its keys.
                    return None;
                }
                let line_start = text[..key.start].rfind('\n').map_or(0, |n| n + 1);
                let prefix_is_key = text[line_start..key.start].chars().all(|c| {
                    c.is_whitespace() || c.is_ascii_alphanumeric() || "_-.\"'".contains(c)
                });
                let end = e.value_span.end.min(text.len());
                let line_end = text[end..].find('\n').map_or(text.len(), |n| end + n);
                let rest = text[end..line_end].trim_start();
                if prefix_is_key && (rest.is_empty() || rest.starts_with('#')) {
                    return Some((i, line_start..end));
                }
            }
            cur = e.parent;
        }
        None
    }
}

/// Result of [`deserialize_reporting_all`]: the value plus the document's key positions.
pub(crate) struct Parsed<T> {
    pub(crate) value: T,
    pub(crate) positions: HashMap<String, (usize, usize)>,
}

/// A problem the parser or serde reported; `syntax`: the document does not parse (so its
/// key paths are incomplete and the key is read from the text around the error).
fn problem(
    file: &str,
    text: &str,
    doc: &Document,
    err: &toml::de::Error,
    syntax: bool,
) -> ConfigProblem {
    let offset = err.span().map_or(0, |s| s.start);
    let (line, column) = position(text, offset);
    let mut message = err.message().trim_end().to_owned();
    let key = if syntax {
        hint::syntax_key(text, offset)
    } else {
        err.span().and_then(|s| doc.entry_at(s.start)).map(|i| doc.entries[i].path.clone())
    };
    let key = key.unwrap_or_default();
    let instead = if syntax {
        let start = text[..offset.min(text.len())].rfind('\n').map_or(0, |n| n + 1);
        let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
        hint::syntax(&text[start..end])
    } else {
        hint::after_parse(&key, &message)
    };
    if let Some(instead) = instead {
        message = format!("{message}: {instead}");
    }
    ConfigProblem { file: file.to_owned(), line, column, key, message }
}

/// The field name of serde's "missing field `name`" error.
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

/// Parses and deserializes `text`, reporting every syntax error, or else as many
/// deserialization errors (unknown keys, wrong types, bad units) as can be found.
pub(crate) fn deserialize_reporting_all<T: DeserializeOwned>(
    text: &str,
    file: &str,
) -> Result<Parsed<T>, Vec<ConfigProblem>> {
    let (doc, syntax) = Document::parse(text);
    if !syntax.is_empty() {
        return Err(syntax.iter().map(|e| problem(file, text, &doc, e, true)).collect());
    }
    let mut work = text.to_owned();
    let mut problems = Vec::new();
    let mut removed: Vec<&str> = Vec::new();
    for _ in 0..MAX_RETRIES {
        let err = match toml::from_str::<T>(&work) {
            Ok(value) if problems.is_empty() => {
                return Ok(Parsed { value, positions: doc.positions(text) });
            }
            Ok(_) => break,
            Err(e) => e,
        };
        let at = err.span().and_then(|s| doc.entry_at(s.start));
        if let (Some(i), Some(field)) = (at, missing_field(err.message())) {
            // A required key we removed ourselves: a consequence, not a problem of the file.
            let path = format!("{}.{field}", doc.entries[i].path);
            if removed.contains(&path.as_str()) {
                // Drop the whole `[table]` / `[[array]]` block that now misses the key,
                // so the keys after it are still checked.
                let Some(range) = table_block(&work, doc.entries[i].value_span.start) else {
                    break;
                };
                let Some(next) = blank(std::mem::take(&mut work), range) else { break };
                work = next;
                continue;
            }
        }
        problems.push(problem(file, text, &doc, &err, false));
        let Some(idx) = at else { break };
        let Some((removed_idx, range)) = doc.removable_range(&work, idx) else { break };
        removed.push(&doc.entries[removed_idx].path);
        let Some(next) = blank(std::mem::take(&mut work), range) else { break };
        work = next;
    }
    problems.sort_by_key(|p| (p.line, p.column));
    problems.dedup();
    Err(problems)
}

/// `text` with `range` replaced by spaces (line breaks kept, so every other position is
/// unchanged), if the result still parses.
fn blank(text: String, range: Range<usize>) -> Option<String> {
    let mut bytes = text.into_bytes();
    for b in bytes.get_mut(range)? {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
    // Only ASCII spaces replaced whole code points, so this cannot fail; stop rather than
    // report nonsense if it somehow does.
    let next = String::from_utf8(bytes).ok()?;
    DeTable::parse(&next).ok()?;
    Some(next)
}

/// The byte range of the `[table]` or `[[array]]` block whose header starts the line of
/// `offset`: from that line to the next header line (or the end).
fn table_block(text: &str, offset: usize) -> Option<Range<usize>> {
    let start = text.get(..offset)?.rfind('\n').map_or(0, |n| n + 1);
    if !text[start..].trim_start().starts_with('[') {
        return None;
    }
    let body = text[start..].find('\n').map_or(text.len(), |n| start + n + 1);
    let mut pos = body;
    while pos < text.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |n| pos + n + 1);
        if text[pos..line_end].trim_start().starts_with('[') {
            break;
        }
        pos = line_end;
    }
    Some(start..pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_chars() {
        let text = "a = 1\n# é\nb = \"x\"\n";
        assert_eq!(position(text, 0), (1, 1));
        assert_eq!(position(text, 4), (1, 5));
        let b = text.find('b').expect("b");
        assert_eq!(position(text, b), (3, 1));
        let x = text.find('x').expect("x");
        assert_eq!(position(text, x), (3, 6));
        let e = text.find('é').expect("é") + 'é'.len_utf8();
        assert_eq!(position(text, e), (2, 4));
    }

    #[test]
    fn paths_cover_tables_arrays_and_inline_values() {
        let text = "[a]\nx = 1\n[[r]]\nt = [\"p\", \"q\"]\n[[r]]\nu = { v = 2 }\n";
        let (doc, errs) = Document::parse(text);
        assert!(errs.is_empty());
        let pos = doc.positions(text);
        assert_eq!(pos.get("a"), Some(&(1, 1)));
        assert_eq!(pos.get("a.x"), Some(&(2, 5)));
        assert_eq!(pos.get("r[0]"), Some(&(3, 1)));
        assert_eq!(pos.get("r[0].t[1]"), Some(&(4, 11)));
        assert_eq!(pos.get("r[1]"), Some(&(5, 1)));
        assert_eq!(pos.get("r[1].u.v"), Some(&(6, 11)));
    }
}
