//! Problem reports: every problem names file, line, column and key, so an operator can jump
//! straight to it.

use std::fmt;

/// One problem found in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The file name as given to [`crate::Config::parse`] or [`crate::Config::load`].
    pub file: String,
    /// 1-based line; 0 only when the file could not be read at all.
    pub line: usize,
    /// 1-based column, counted in characters; 0 only when the file could not be read.
    pub column: usize,
    /// Key path such as `cache.rule[1].ttl` or `listener[0]`; empty for a syntax error
    /// outside any key.
    pub key: String,
    /// What is wrong, e.g. `invalid duration "1x": unknown unit ...`.
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    /// `file:line:column: key: message`, leaving out the parts that are unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Every problem found while loading, parsing or validating a configuration, in file order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors {
    /// The problems; never empty.
    pub problems: Vec<ConfigProblem>,
}

impl fmt::Display for ConfigErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}
