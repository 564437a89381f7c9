//! The simulator's configuration ([`DemoOriginConfig`]) and its validation ([`ConfigError`]).

use std::time::Duration;

use crate::latency::{DEFAULT_LATENCY_TABLE, LatencyTable};

/// Largest body the simulator will generate for one object (`/obj/<bytes>`).
pub const MAX_OBJECT_SIZE: u64 = 64 << 30;
/// Largest live or VOD segment: media segments are built in memory.
pub const MAX_MEDIA_SEGMENT: u64 = 256 << 20;
/// Most LL-HLS parts per live segment.
pub const MAX_PARTS: u32 = 16;

/// Every problem found in a configuration, in field order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid demo origin config: {}", problems.join("; "))]
pub struct ConfigError {
    /// One human-readable line per problem, each naming its field.
    pub problems: Vec<String>,
}

/// How the simulated origin behaves. All fields are public; [`Default`] gives the demo setup.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOriginConfig {
    /// Factor applied to every latency drawn from `latency_table`; 0 disables added latency.
    /// Default 1.0.
    pub latency_scale: f64,
    /// `(percentile in [0, 100], milliseconds)` points, percentiles strictly increasing.
    /// Default [`DEFAULT_LATENCY_TABLE`] (p50 33 ms ... max 123 s).
    pub latency_table: Vec<(f64, f64)>,
    /// Fraction of content requests answered `503` (after the latency). Default 0.
    pub error_rate: f64,
    /// Fraction of content responses whose body is cut at half its length, after which the
    /// connection is closed although `Content-Length` promised more. Default 0.
    pub reset_rate: f64,
    /// Live segment duration (and `#EXTINF` of VOD segments). Default 2 s; at least 10 ms.
    pub segment_duration: Duration,
    /// Byte budget per live segment: the frame rate is the highest (up to 25 fps) whose
    /// pictures fit, and TS null packets fill the rest up to the largest multiple of 188
    /// bytes within it. A budget below one picture per part still gets one. Default 1 MiB
    /// (about 4 Mbit/s at 2 s segments: 8 fps).
    pub live_segment_size: u64,
    /// Segments listed in a full live playlist (sliding window). Default 10 (20 s at 2 s
    /// segments, longer than the 12 s skip boundary, so delta updates skip segments).
    pub live_window: u64,
    /// LL-HLS parts per live segment; 0 serves a classic playlist without part tags.
    /// Default 4.
    pub parts_per_segment: u32,
    /// A request for the part in production (the preload hint) is held until its first
    /// picture exists, then sent picture by picture as they are produced, chunked. With
    /// `false` it is held until the whole part exists (draft-pantos-hls-rfc8216bis §6.2.6
    /// asks servers not to send a part's bytes before all of them can go at link speed).
    /// Default `true`.
    pub stream_parts: bool,
    /// Number of VOD titles (`title_000` ...). Default 4.
    pub vod_titles: usize,
    /// Segments per VOD title. Default 30.
    pub vod_segments: u64,
    /// Byte budget per VOD segment, used like `live_segment_size`. Default 2 MiB.
    pub vod_segment_size: u64,
    /// When set, every body is paced at this many bytes per second. Default `None`.
    pub slow_body_bps: Option<u64>,
    /// Seed for latency and fault draws and for all generated content. Default 0.
    pub seed: u64,
}

impl Default for DemoOriginConfig {
    fn default() -> Self {
        Self {
            latency_scale: 1.0,
            latency_table: DEFAULT_LATENCY_TABLE.to_vec(),
            error_rate: 0.0,
            reset_rate: 0.0,
            segment_duration: Duration::from_secs(2),
            live_segment_size: 1 << 20,
            live_window: 10,
            parts_per_segment: 4,
            stream_parts: true,
            vod_titles: 4,
            vod_segments: 30,
            vod_segment_size: 2 << 20,
            slow_body_bps: None,
            seed: 0,
        }
    }
}

impl DemoOriginConfig {
    /// A configuration for tests and benchmarks: no added latency, everything else default.
    pub fn no_latency() -> Self {
        Self { latency_scale: 0.0, ..Self::default() }
    }

    /// Checks every field and reports all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        if !(self.latency_scale.is_finite() && self.latency_scale >= 0.0) {
            problems
                .push(format!("latency_scale: {} is not a finite value >= 0", self.latency_scale));
        }
        if let Err(e) = LatencyTable::new(&self.latency_table) {
            problems.extend(e.problems);
        }
        for (name, v) in [("error_rate", self.error_rate), ("reset_rate", self.reset_rate)] {
            if !(0.0..=1.0).contains(&v) {
                problems.push(format!("{name}: {v} is not within [0, 1]"));
            }
        }
        if self.segment_duration < Duration::from_millis(10)
            || self.segment_duration > Duration::from_secs(3600)
        {
            problems.push(format!(
                "segment_duration: {:?} is not within [10ms, 1h]",
                self.segment_duration
            ));
        }
        for (name, v) in [
            ("live_segment_size", self.live_segment_size),
            ("vod_segment_size", self.vod_segment_size),
        ] {
            if v == 0 || v > MAX_MEDIA_SEGMENT {
                problems.push(format!("{name}: {v} is not within [1, {MAX_MEDIA_SEGMENT}] bytes"));
            }
        }
        if !(1..=1000).contains(&self.live_window) {
            problems.push(format!("live_window: {} is not within [1, 1000]", self.live_window));
        }
        if self.parts_per_segment > MAX_PARTS {
            problems.push(format!(
                "parts_per_segment: {} is not within [0, {MAX_PARTS}]",
                self.parts_per_segment
            ));
        } else if self.segment_duration >= Duration::from_millis(10)
            && self.segment_duration.as_millis() < u128::from(self.parts_per_segment) * 10
        {
            problems.push(format!(
                "parts_per_segment: {} parts of a {:?} segment are shorter than 10ms",
                self.parts_per_segment, self.segment_duration
            ));
        }
        if self.vod_titles > 10_000 {
            problems.push(format!("vod_titles: {} is above 10000", self.vod_titles));
        }
        if !(1..=100_000).contains(&self.vod_segments) {
            problems.push(format!("vod_segments: {} is not within [1, 100000]", self.vod_segments));
        }
        if self.slow_body_bps == Some(0) {
            problems.push("slow_body_bps: must be above 0 when set".to_string());
        }
        if problems.is_empty() { Ok(()) } else { Err(ConfigError { problems }) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        DemoOriginConfig::default().validate().unwrap();
        DemoOriginConfig::no_latency().validate().unwrap();
    }

    #[test]
    fn every_problem_is_reported() {
        let cfg = DemoOriginConfig {
            latency_scale: -1.0,
            error_rate: 2.0,
            reset_rate: -0.5,
            segment_duration: Duration::ZERO,
            live_segment_size: 0,
            live_window: 0,
            vod_segments: 0,
            slow_body_bps: Some(0),
            latency_table: vec![],
            ..DemoOriginConfig::default()
        };
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.problems.len(), 9, "{e}");
    }

    #[test]
    fn parts_and_media_sizes_are_bounded() {
        let base = DemoOriginConfig::default();
        let bad = [
            DemoOriginConfig { parts_per_segment: MAX_PARTS + 1, ..base.clone() },
            DemoOriginConfig {
                segment_duration: Duration::from_millis(30),
                parts_per_segment: 4,
                ..base.clone()
            },
            DemoOriginConfig { live_segment_size: MAX_MEDIA_SEGMENT + 1, ..base.clone() },
        ];
        for cfg in bad {
            assert_eq!(cfg.validate().unwrap_err().problems.len(), 1, "{cfg:?}");
        }
        DemoOriginConfig { parts_per_segment: 0, ..base.clone() }.validate().unwrap();
        DemoOriginConfig { segment_duration: Duration::from_millis(40), ..base }
            .validate()
            .unwrap();
    }
}
