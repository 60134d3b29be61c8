//! Durations for people, in the four styles the lab prints.

use std::time::Duration;

/// `1h 05m`, `4m 10s`, `12s`: the two largest units, the second zero-padded, seconds cut
/// off. For estimates (a plan's device time, an ETA, care's trends): two units say enough.
pub fn compact(secs: f64) -> String {
    let s = Duration::from_secs_f64(secs.max(0.0)).as_secs();
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {s:02}s")
    } else {
        format!("{s}s")
    }
}

/// `1h`, `1h 30m`, `5m`, `0s`: every unit that is not zero, rounded to the second. For
/// a report's runbook durations, which are round.
pub fn round(secs: f64) -> String {
    let total = secs.round().max(0.0) as u64;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    let parts: Vec<String> =
        [(h, "h"), (m, "m"), (s, "s")].iter().filter(|(v, _)| *v > 0).map(|(v, u)| format!("{v}{u}")).collect();
    if parts.is_empty() { "0s".to_string() } else { parts.join(" ") }
}

/// `1h 5m 3s`: humantime's spelling, whole seconds. For limits and waits in the runner's
/// failures and events, where milliseconds would be noise.
pub fn seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// `1h 5m 3s 200ms`: humantime's spelling, to the nanosecond. For configuration problems,
/// which quote a duration as it was written.
pub fn exact(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_the_two_largest_units() {
        assert_eq!(compact(3900.0), "1h 05m");
        assert_eq!(compact(250.0), "4m 10s");
        assert_eq!(compact(12.7), "12s");
        assert_eq!(compact(-1.0), "0s");
    }

    #[test]
    fn round_keeps_every_unit_that_is_not_zero() {
        assert_eq!(round(3600.0), "1h");
        assert_eq!(round(5400.0), "1h 30m");
        assert_eq!(round(300.0), "5m");
        assert_eq!(round(0.0), "0s");
    }

    #[test]
    fn seconds_cuts_what_exact_keeps() {
        let d = Duration::from_millis(3_723_200);
        assert_eq!(seconds(d), "1h 2m 3s");
        assert_eq!(exact(d), "1h 2m 3s 200ms");
    }
}
