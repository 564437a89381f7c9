//! Header fields from fuzz input: one `name: value` a line (split at the first `": "`,
//! so pseudo-header names such as `:path` keep their colon). A corpus file reads like
//! the head it stands for.

/// The fields of `data`; a line without `": "` is a field with an empty value.
pub(crate) fn split(data: &[u8]) -> Vec<(&[u8], &[u8])> {
    data.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            match line.windows(2).skip(1).position(|w| w == b": ") {
                Some(i) => (&line[..i + 1], &line[i + 3..]),
                None => (line, &b""[..]),
            }
        })
        .collect()
}
