//! Time helpers: RFC 3339 timestamps and duration parsing for the CLI.

use std::time::{Duration, SystemTime};

/// RFC 3339 (UTC, with fractional seconds) for JSON documents.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

/// Parses a duration the way perf and bpftrace users expect: a bare number
/// means seconds (`5`, `0.5`), otherwise humantime (`500ms`, `2m`, `1h 30m`).
/// A number too large for a `Duration` is an error, never a panic.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    parse(s).map_err(|e| match e {
        Bad::TooLarge => format!("invalid duration '{}': too large", s.trim()),
        Bad::Invalid(e) => e,
    })
}

enum Bad {
    TooLarge,
    Invalid(String),
}

fn parse(s: &str) -> Result<Duration, Bad> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(Bad::Invalid(format!(
                "invalid duration '{s}': must be a non-negative number of seconds"
            )));
        }
        return Duration::try_from_secs_f64(secs).map_err(|_| Bad::TooLarge);
    }
    humantime::parse_duration(s).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => Bad::TooLarge,
        e => Bad::Invalid(format!(
            "invalid duration '{s}': {e} (examples: 5, 1.5, 500ms, 2m)"
        )),
    })
}

/// The values a duration argument accepts, both ends included, with the
/// words its error uses for them.
#[derive(Clone, Copy, Debug)]
pub struct DurationRange {
    pub min: Duration,
    pub max: Duration,
    pub min_text: &'static str,
    pub max_text: &'static str,
}

impl DurationRange {
    /// Parses `s` as [`parse_duration`] does, then requires it in range.
    pub fn parse(&self, s: &str) -> Result<Duration, String> {
        match parse(s) {
            Ok(d) if d >= self.min && d <= self.max => Ok(d),
            Ok(_) | Err(Bad::TooLarge) => Err(format!(
                "'{}' is out of range: allowed is {} to {}",
                s.trim(),
                self.min_text,
                self.max_text
            )),
            Err(Bad::Invalid(e)) => Err(e),
        }
    }
}

/// Sampling and refresh intervals (`-i`): shorter than 10 ms costs more
/// than it shows, and the counters are cumulative, so a longer one only
/// loses resolution.
pub const INTERVAL: DurationRange = DurationRange {
    min: Duration::from_millis(10),
    max: Duration::from_secs(3600),
    min_text: "10ms",
    max_text: "1h",
};

/// How long `record -d` runs (0 stops after the first interval).
pub const RUN_LENGTH: DurationRange = DurationRange {
    min: Duration::ZERO,
    max: Duration::from_secs(365 * 24 * 3600),
    min_text: "0",
    max_text: "365days",
};

/// The flight recorder's window (`--history`): at most what it keeps.
pub const HISTORY: DurationRange = DurationRange {
    min: Duration::from_secs(1),
    max: Duration::from_secs(3600),
    min_text: "1s",
    max_text: "1h",
};

/// The working set's window (`--wss-window`): a scan clears and reads once
/// per window, so a shorter one costs more and a longer one ages more.
pub const WSS_WINDOW: DurationRange = DurationRange {
    min: Duration::from_millis(100),
    max: Duration::from_secs(3600),
    min_text: "100ms",
    max_text: "1h",
};

/// clap value parser for `--wss-window`.
pub fn parse_wss_window(s: &str) -> Result<Duration, String> {
    WSS_WINDOW.parse(s)
}

/// The hot-set workload's period (`workload hotset --period`).
pub const PERIOD: DurationRange = DurationRange {
    min: Duration::from_millis(1),
    max: Duration::from_secs(3600),
    min_text: "1ms",
    max_text: "1h",
};

/// clap value parser for `workload hotset --period`.
pub fn parse_period(s: &str) -> Result<Duration, String> {
    PERIOD.parse(s)
}

/// clap value parser for `-i/--interval`.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    INTERVAL.parse(s)
}

/// clap value parser for `-d/--duration`.
pub fn parse_run_length(s: &str) -> Result<Duration, String> {
    RUN_LENGTH.parse(s)
}

/// clap value parser for `--history`.
pub fn parse_history(s: &str) -> Result<Duration, String> {
    HISTORY.parse(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds() {
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    }

    #[test]
    fn bad_durations_are_rejected_with_a_hint() {
        for bad in ["-1", "abc", "NaN", "inf", ""] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.contains("invalid duration"), "{e}");
        }
    }

    #[test]
    fn huge_numbers_are_errors_not_panics() {
        for big in ["1e20", "1e30", "18446744073709551616"] {
            let e = parse_duration(big).expect_err(big);
            assert!(e.contains("too large"), "{e}");
        }
        assert!(parse_duration("1000000000000years").is_err());
    }

    #[test]
    fn ranges_name_their_bounds() {
        for (range, bad) in [
            (INTERVAL, "1ns"),
            (INTERVAL, "9ms"),
            (INTERVAL, "0"),
            (INTERVAL, "1e30"),
            (INTERVAL, "2h"),
            (RUN_LENGTH, "1e20"),
            (RUN_LENGTH, "366days"),
            (HISTORY, "1e20"),
            (HISTORY, "0"),
            (HISTORY, "61m"),
        ] {
            let e = range.parse(bad).expect_err(bad);
            assert!(e.contains("out of range"), "{e}");
            assert!(
                e.contains(range.min_text) && e.contains(range.max_text),
                "{e}"
            );
        }
        assert_eq!(INTERVAL.parse("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(INTERVAL.parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(RUN_LENGTH.parse("0"), Ok(Duration::ZERO));
        assert_eq!(HISTORY.parse("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(rfc3339(t), "1970-01-01T00:00:01.500000000Z");
    }
}
