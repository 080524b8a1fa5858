//! Time helpers: RFC 3339 timestamps and duration parsing for the CLI.

use std::time::{Duration, SystemTime};

/// RFC 3339 (UTC, with fractional seconds) for JSON documents.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_nanos(t).to_string()
}

/// Parses a duration the way perf and bpftrace users expect: a bare number
/// means seconds (`5`, `0.5`), otherwise humantime (`500ms`, `2m`, `1h 30m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "invalid duration '{s}': must be a non-negative number of seconds"
            ));
        }
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("invalid duration '{s}': {e} (examples: 5, 1.5, 500ms, 2m)"))
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
    fn timestamps_are_rfc3339_utc() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(rfc3339(t), "1970-01-01T00:00:01.500000000Z");
    }
}
