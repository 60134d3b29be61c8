//! Durations (`"1h30m"`, `"200ms"`, `"1.5s"`) and percentages (`"5%"`) as written in config files.

use std::time::Duration;

use super::value_error::ValueError;

/// Nanoseconds per unit. Kept small on purpose: every accepted spelling is documented.
const UNITS: &[(&str, u128)] = &[
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses a duration: one or more `<number><unit>` parts, added up (`"1h30m"`, `"1h 30m"`).
/// Numbers may have a fraction (`"1.5s"`, `"0.5h"`); units are ms, s, m/min, h, d.
/// The arithmetic is exact down to the nanosecond (fractions are rounded to the nearest ns).
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let text = s.trim();
    if text.is_empty() {
        return Err(ValueError::EmptyDuration);
    }
    let mut rest = text;
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..num_len];
        if number.is_empty() {
            return Err(ValueError::NotADuration { text: text.into() });
        }
        rest = rest[num_len..].trim_start();
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if unit.is_empty() {
            return Err(ValueError::NoUnit { text: text.into() });
        }
        let Some(&(_, per_unit)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(ValueError::UnknownUnit { unit: unit.into(), text: text.into() });
        };
        let nanos = scaled(number, per_unit)
            .ok_or_else(|| ValueError::NotANumber { number: number.into(), text: text.into() })?;
        total = total.checked_add(nanos).ok_or_else(|| ValueError::TooLong { text: text.into() })?;
        rest = rest[unit_len..].trim_start();
    }
    let nanos = u64::try_from(total).map_err(|_| ValueError::TooLong { text: text.into() })?;
    Ok(Duration::from_nanos(nanos))
}

/// `number * per_unit`, exactly: the integer and fraction digits are scaled separately.
fn scaled(number: &str, per_unit: u128) -> Option<u128> {
    let (int, frac) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 18 {
        return None;
    }
    let int_v: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = int_v.checked_mul(per_unit)?;
    if !frac.is_empty() {
        let frac_v: u128 = frac.parse().ok()?;
        let denom = 10u128.pow(frac.len() as u32);
        // Round half up to the nearest nanosecond.
        total = total.checked_add((frac_v * per_unit + denom / 2) / denom)?;
    }
    Some(total)
}

/// Parses a percentage string (`"5%"`, `"2.5 %"`) into a fraction (0.05, 0.025).
///
/// The `%` is required: a bare string such as `"0.05"` is rejected because it is ambiguous.
/// (In config files a fraction can also be written as a TOML number, `0.05`; that is
/// handled by the reader, not here.)
pub fn parse_percent(s: &str) -> Result<f64, ValueError> {
    let text = s.trim();
    let Some(number) = text.strip_suffix('%') else {
        return Err(ValueError::NoPercentSign { text: text.into() });
    };
    let number = number.trim_end();
    let valid = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-');
    let value: f64 = if valid { number.parse().ok() } else { None }
        .ok_or_else(|| ValueError::NotAPercentage { text: text.into() })?;
    if value < 0.0 {
        return Err(ValueError::Negative { text: text.into() });
    }
    Ok(value / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Duration {
        parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(d("1h"), Duration::from_secs(3600));
        assert_eq!(d("200ms"), Duration::from_millis(200));
        assert_eq!(d("10m"), Duration::from_secs(600));
        assert_eq!(d("10min"), Duration::from_secs(600));
        assert_eq!(d("90s"), Duration::from_secs(90));
        assert_eq!(d("2d"), Duration::from_secs(2 * 86_400));
        assert_eq!(d("0s"), Duration::ZERO);
    }

    #[test]
    fn compound_and_fractional_durations() {
        assert_eq!(d("1h30m"), Duration::from_secs(5400));
        assert_eq!(d("1h 30m 15s"), Duration::from_secs(5415));
        assert_eq!(d("1.5s"), Duration::from_millis(1500));
        assert_eq!(d("0.5h"), Duration::from_secs(1800));
        assert_eq!(d(".25s"), Duration::from_millis(250));
        // Exact: 0.1 s is 100 000 000 ns, not 100 000 000.000000001.
        assert_eq!(d("0.1s"), Duration::from_nanos(100_000_000));
        assert_eq!(d("1.0000000005s"), Duration::from_nanos(1_000_000_001));
        assert_eq!(d("  5s "), Duration::from_secs(5));
    }

    #[test]
    fn bad_durations_say_why() {
        for (input, needle) in [
            ("", "empty"),
            ("abc", "not a duration"),
            ("10", "without a unit"),
            ("10 parsecs", "unknown unit `parsecs`"),
            ("5y", "unknown unit `y`"),
            ("-5s", "not a duration"),
            ("1.2.3s", "not a number"),
            ("h", "not a duration"),
            (".s", "not a number"),
            ("999999999999d", "too long"),
        ] {
            let err = parse_duration(input).expect_err(input);
            assert!(err.to_string().contains(needle), "{input:?}: {err}");
        }
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("5%"), Ok(0.05));
        assert_eq!(parse_percent("2.5 %"), Ok(0.025));
        assert_eq!(parse_percent("100%"), Ok(1.0));
        assert_eq!(parse_percent("0%"), Ok(0.0));
        assert!(parse_percent("0.05").unwrap_err().to_string().contains("no `%`"));
        assert!(parse_percent("five%").unwrap_err().to_string().contains("not a percentage"));
        assert!(parse_percent("%").unwrap_err().to_string().contains("not a percentage"));
        assert!(parse_percent("-5%").unwrap_err().to_string().contains("negative"));
        assert!(parse_percent("inf%").is_err());
    }
}
