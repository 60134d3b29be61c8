//! What a phone's stored battery readings say about its wear: health and cycle count
//! now, their trend per 30 days, and the two warnings of `lab status` (docs/care.md).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// A fall of health faster than this (percentage points per 30 days) is warned about.
/// A phone cycled daily loses about 20 points over 500 cycles (the usual rating), about
/// 1.2 points a month: 3 is more than twice that.
pub const HEALTH_FALL_WARN_PER_30D: f64 = 3.0;
/// The health trend needs readings this far apart to be shown, and to be warned about
/// `TREND_WARN_SPAN` (gauges move in whole percents and recalibrate).
pub const TREND_MIN_SPAN: Duration = Duration::from_secs(24 * 3600);
pub const TREND_WARN_SPAN: Duration = Duration::from_secs(7 * 24 * 3600);
/// A phone read at 100 % for this long without a reading below is warned about: kept
/// full on a charger, a lithium cell ages fastest (and swells).
pub const FULL_WARN_AFTER: Duration = Duration::from_secs(24 * 3600);
/// At or above this a reading counts as full (gauges report 99–100 % while topping up).
const FULL_PCT: f64 = 99.5;
const DAYS_30: f64 = 30.0 * 86400.0;

/// One stored reading.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub at: DateTime<Utc>,
    pub battery_pct: Option<f64>,
    pub health_pct: Option<f64>,
    pub cycle_count: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HealthWarning {
    /// Health falls by more than `HEALTH_FALL_WARN_PER_30D` points per 30 days.
    HealthFallingFast { per_30d: f64 },
    /// Read at 100 % for `hours` hours on end, up to the latest reading.
    FullFor { hours: f64 },
}

impl std::fmt::Display for HealthWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HealthWarning::HealthFallingFast { per_30d } => write!(
                f,
                "battery health falls {:.1} points per 30 days (warned above {HEALTH_FALL_WARN_PER_30D}); check the phone for swelling and heat",
                -per_30d
            ),
            HealthWarning::FullFor { hours } => write!(
                f,
                "at 100 % for {} on end; fix: keep it in a charge window with `lab care` (on a switchable hub port)",
                crate::text::duration::compact(hours * 3600.0)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct HealthSummary {
    pub readings: usize,
    pub latest_at: Option<DateTime<Utc>>,
    pub battery_pct: Option<f64>,
    pub health_pct: Option<f64>,
    /// Least-squares slope over the readings, points per 30 days (`None` before
    /// `TREND_MIN_SPAN` of readings).
    pub health_per_30d: Option<f64>,
    pub cycle_count: Option<u32>,
    pub cycles_per_30d: Option<f64>,
    pub warnings: Vec<HealthWarning>,
}

/// Summarizes `readings` (any order).
pub fn summarize(readings: &[Reading]) -> HealthSummary {
    let mut rs: Vec<&Reading> = readings.iter().collect();
    rs.sort_by_key(|r| r.at);
    let Some(last) = rs.last() else {
        return HealthSummary::default();
    };
    let health: Vec<(DateTime<Utc>, f64)> = rs.iter().filter_map(|r| Some((r.at, r.health_pct?))).collect();
    let cycles: Vec<(DateTime<Utc>, f64)> = rs.iter().filter_map(|r| Some((r.at, f64::from(r.cycle_count?)))).collect();
    let health_per_30d = trend(&health, TREND_MIN_SPAN);
    let mut warnings = Vec::new();
    if let Some(per_30d) = trend(&health, TREND_WARN_SPAN).filter(|t| *t < -HEALTH_FALL_WARN_PER_30D) {
        warnings.push(HealthWarning::HealthFallingFast { per_30d });
    }
    if let Some(full) = full_for(&rs).filter(|d| *d >= FULL_WARN_AFTER) {
        warnings.push(HealthWarning::FullFor { hours: full.as_secs_f64() / 3600.0 });
    }
    HealthSummary {
        readings: rs.len(),
        latest_at: Some(last.at),
        battery_pct: rs.iter().rev().find_map(|r| r.battery_pct),
        health_pct: health.last().map(|(_, h)| *h),
        health_per_30d,
        cycle_count: rs.iter().rev().find_map(|r| r.cycle_count),
        cycles_per_30d: trend(&cycles, TREND_MIN_SPAN),
        warnings,
    }
}

/// Least-squares slope per 30 days of `points`, when they span at least `min_span`.
fn trend(points: &[(DateTime<Utc>, f64)], min_span: Duration) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    let span = (last.0 - first.0).to_std().ok()?;
    if span < min_span || points.len() < 2 {
        return None;
    }
    let xs: Vec<f64> = points.iter().map(|(t, _)| (*t - first.0).num_milliseconds() as f64 / 1000.0).collect();
    let n = points.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, points.iter().map(|(_, y)| y).sum::<f64>() / n);
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let sxy: f64 = xs.iter().zip(points).map(|(x, (_, y))| (x - mx) * (y - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx * DAYS_30)
}

/// How long the readings have said 100 %, from the first of the unbroken run of full
/// readings that ends with the latest reading of the level.
fn full_for(rs: &[&Reading]) -> Option<Duration> {
    let levels: Vec<(DateTime<Utc>, f64)> = rs.iter().filter_map(|r| Some((r.at, r.battery_pct?))).collect();
    let (last_at, last) = *levels.last()?;
    if last < FULL_PCT {
        return None;
    }
    let since = levels.iter().rev().take_while(|(_, l)| *l >= FULL_PCT).last()?.0;
    (last_at - since).to_std().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(days: f64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-01T00:00:00Z").unwrap().with_timezone(&Utc)
            + chrono::Duration::milliseconds((days * 86_400_000.0) as i64)
    }

    fn r(days: f64, level: f64, health: Option<f64>, cycles: Option<u32>) -> Reading {
        Reading { at: at(days), battery_pct: Some(level), health_pct: health, cycle_count: cycles }
    }

    #[test]
    fn the_trend_is_the_least_squares_slope_per_30_days() {
        // Health 95 → 93 in 15 days: −4 points per 30 days; cycles +1 a day.
        let rs: Vec<Reading> = (0..=15)
            .map(|d| r(f64::from(d), 60.0, Some(95.0 - f64::from(d) * 2.0 / 15.0), Some(300 + d as u32)))
            .collect();
        let s = summarize(&rs);
        assert_eq!(s.readings, 16);
        assert!((s.health_per_30d.unwrap() + 4.0).abs() < 1e-9, "{s:?}");
        assert!((s.cycles_per_30d.unwrap() - 30.0).abs() < 1e-9, "{s:?}");
        assert_eq!((s.health_pct, s.cycle_count), (Some(93.0), Some(315)));
        assert_eq!(s.warnings, [HealthWarning::HealthFallingFast { per_30d: s.health_per_30d.unwrap() }]);
    }

    #[test]
    fn a_slow_fall_or_a_short_span_is_not_warned_about() {
        let slow: Vec<Reading> =
            (0..=30).map(|d| r(f64::from(d), 60.0, Some(95.0 - f64::from(d) / 30.0), None)).collect();
        let s = summarize(&slow);
        assert!((s.health_per_30d.unwrap() + 1.0).abs() < 1e-9);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        // A fast fall over 3 days: the trend is shown, not warned about yet (gauges recalibrate).
        let short = [r(0.0, 60.0, Some(95.0), None), r(3.0, 60.0, Some(93.0), None)];
        let s = summarize(&short);
        assert!(s.health_per_30d.is_some() && s.warnings.is_empty(), "{s:?}");
        // Under a day: no trend.
        let s = summarize(&[r(0.0, 60.0, Some(95.0), Some(1)), r(0.5, 60.0, Some(94.0), Some(2))]);
        assert_eq!((s.health_per_30d, s.cycles_per_30d), (None, None));
    }

    #[test]
    fn a_phone_at_100_percent_for_a_day_is_warned_about() {
        let mut rs: Vec<Reading> = vec![r(0.0, 70.0, None, None)];
        rs.extend((1..=6).map(|i| r(0.5 + f64::from(i) * 0.25, 100.0, None, None)));
        // Full from day 0.75 to day 2.0: 30 hours.
        let s = summarize(&rs);
        assert_eq!(s.warnings, [HealthWarning::FullFor { hours: 30.0 }]);
        assert!(s.warnings[0].to_string().starts_with("at 100 % for 30h"), "{}", s.warnings[0]);
        // The latest reading below full ends it.
        rs.push(r(2.1, 99.0, None, None));
        assert!(summarize(&rs).warnings.is_empty());
        // Full for 12 hours only.
        let s = summarize(&[r(0.0, 100.0, None, None), r(0.5, 100.0, None, None)]);
        assert!(s.warnings.is_empty());
    }

    #[test]
    fn no_readings_say_nothing() {
        assert_eq!(summarize(&[]), HealthSummary::default());
    }
}
