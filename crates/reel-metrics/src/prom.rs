//! The Prometheus text exposition format (version 0.0.4): `# HELP` / `# TYPE` lines, samples
//! with escaped label values, and histograms as cumulative `_bucket`, `_sum` and `_count`.

use std::fmt::{self, Write as _};

use crate::histogram::{HistogramSnapshot, LATENCY_BUCKETS_MS};

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A monotonic total.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Bucketed observations (written with [`PromWriter::histogram`]).
    Histogram,
}

impl Kind {
    /// The name in a `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A sample value: integers are written exactly, floats in their shortest form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A count or a byte total.
    Int(u64),
    /// A ratio, a time in seconds, a percentage.
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u64)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v == f64::INFINITY => f.write_str("+Inf"),
            Value::Float(v) if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// Writes one exposition. Families are written in the order they are begun; a family's
/// samples must follow its [`PromWriter::family`] line.
#[derive(Debug, Default)]
pub struct PromWriter {
    out: String,
}

impl PromWriter {
    /// Starts an empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes the `# HELP` and `# TYPE` lines of a metric family.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {}", kind.as_str());
    }

    /// Writes one sample. Label values are escaped per the exposition format (backslash,
    /// double quote, newline).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Into<Value>) {
        self.out.push_str(name);
        self.labels(labels, None);
        let _ = writeln!(self.out, " {}", value.into());
    }

    /// A family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: impl Into<Value>) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// Writes a histogram's cumulative `_bucket` samples (bounds in seconds), `_sum` (in
    /// seconds) and `_count`.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let cum = h.cumulative();
        for (i, c) in cum.iter().enumerate() {
            let le = match LATENCY_BUCKETS_MS.get(i) {
                Some(ms) => Value::Float(ms / 1000.0).to_string(),
                None => "+Inf".to_owned(),
            };
            let _ = write!(self.out, "{name}_bucket");
            self.labels(labels, Some(&le));
            let _ = writeln!(self.out, " {c}");
        }
        let _ = write!(self.out, "{name}_sum");
        self.labels(labels, None);
        let _ = writeln!(self.out, " {}", Value::Float(h.sum_seconds()));
        let _ = write!(self.out, "{name}_count");
        self.labels(labels, None);
        let _ = writeln!(self.out, " {}", h.count());
    }

    /// The finished text.
    pub fn finish(self) -> String {
        self.out
    }

    fn labels(&mut self, labels: &[(&str, &str)], le: Option<&str>) {
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.out.push('{');
        let all = labels.iter().copied().chain(le.map(|v| ("le", v)));
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.out.push_str(k);
            self.out.push_str("=\"");
            for ch in v.chars() {
                match ch {
                    '\\' => self.out.push_str("\\\\"),
                    '"' => self.out.push_str("\\\""),
                    '\n' => self.out.push_str("\\n"),
                    c => self.out.push(c),
                }
            }
            self.out.push('"');
        }
        self.out.push('}');
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Histogram;

    #[test]
    fn families_samples_and_escaping() {
        let mut p = PromWriter::new();
        p.family("x_total", Kind::Counter, "Things.");
        p.sample("x_total", &[("k", "a\"b\\c\nd")], 3u64);
        p.single("y", Kind::Gauge, "A ratio.", 0.25);
        p.single("z", Kind::Gauge, "Flag.", true);
        p.single("inf", Kind::Gauge, "Unbounded.", f64::INFINITY);
        assert_eq!(
            p.finish(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{k=\"a\\\"b\\\\c\\nd\"} 3\n\
             # HELP y A ratio.\n# TYPE y gauge\ny 0.25\n\
             # HELP z Flag.\n# TYPE z gauge\nz 1\n\
             # HELP inf Unbounded.\n# TYPE inf gauge\ninf +Inf\n"
        );
    }

    #[test]
    fn integers_are_exact() {
        let mut p = PromWriter::new();
        p.sample("big", &[], u64::MAX);
        assert_eq!(p.finish(), "big 18446744073709551615\n");
    }

    #[test]
    fn histograms_are_cumulative_in_seconds() {
        let h = Histogram::default();
        h.record(Duration::from_micros(300));
        h.record(Duration::from_millis(20));
        h.record(Duration::from_secs(30));
        let mut p = PromWriter::new();
        p.family("lat_seconds", Kind::Histogram, "Latency.");
        p.histogram("lat_seconds", &[("group", "g")], &h.snapshot());
        let t = p.finish();
        assert!(t.contains("lat_seconds_bucket{group=\"g\",le=\"0.0005\"} 1\n"), "{t}");
        assert!(t.contains("lat_seconds_bucket{group=\"g\",le=\"0.01\"} 1\n"), "{t}");
        assert!(t.contains("lat_seconds_bucket{group=\"g\",le=\"0.025\"} 2\n"), "{t}");
        assert!(t.contains("lat_seconds_bucket{group=\"g\",le=\"10\"} 2\n"), "{t}");
        assert!(t.contains("lat_seconds_bucket{group=\"g\",le=\"+Inf\"} 3\n"), "{t}");
        assert!(t.contains("lat_seconds_sum{group=\"g\"} 30.0203\n"), "{t}");
        assert!(t.contains("lat_seconds_count{group=\"g\"} 3\n"), "{t}");
        let mut p = PromWriter::new();
        p.histogram("bare", &[], &h.snapshot());
        assert!(p.finish().starts_with("bare_bucket{le=\"0.0005\"} 1\n"));
    }
}
