//! The human-readable `Battery History` of `adb shell dumpsys batterystats` (also in bugreports).
//!
//! ```text
//! Battery History (37% used, 95KB used of 256KB, 166 strings using 15KB):
//!      0 (9) RESET:TIME: 2014-12-09-11-33-29
//!   +1s002ms (2) 100 c0900020 status=discharging health=good plug=none temp=250 volt=4182
//!   +1m10s500ms (1) 099 c0900020
//! ```
//! Each record starts with its offset from the start of the history (`0`, `+1h02m03s004ms`, up
//! to days), the number of ints read in brackets, then either a command (`RESET:TIME:`, `TIME:`,
//! `START`, `SHUTDOWN`, `*OVERFLOW*`) or the 3-digit battery level in %.
//!
//! The discharge summary: the level timeline gives the average time per 1 % drop (from the
//! first record to the first one at the lowest level, divided by the % dropped) and the
//! fastest step (least time per % between two consecutive level changes).

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, numbered};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryLevel {
    /// Offset from the start of the history, ms.
    pub offset_ms: i64,
    pub level_pct: i64,
    pub line: usize,
}

/// What the level timeline says about discharging.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DischargeSummary {
    /// No level drop in the history.
    NoDischarge,
    Discharged {
        /// Levels dropped from the first to the lowest level, %.
        dropped_pct: i64,
        /// Mean time per 1 % drop, ms.
        ms_per_pct: f64,
        /// The fastest 1 % step: offsets (ms) of the two records and the levels.
        peak_from_ms: i64,
        peak_to_ms: i64,
        peak_from_level: i64,
        peak_to_level: i64,
    },
}

impl DischargeSummary {
    /// One sentence on the average rate.
    pub fn rate_text(&self) -> String {
        match self {
            DischargeSummary::NoDischarge => "The battery did not discharge".into(),
            DischargeSummary::Discharged { ms_per_pct, .. } => {
                format!("The battery dropped 1% every {} on average", format_ms(*ms_per_pct as i64))
            }
        }
    }

    /// One sentence on the fastest step.
    pub fn peak_text(&self) -> String {
        match self {
            DischargeSummary::NoDischarge => "The battery did not discharge".into(),
            DischargeSummary::Discharged { peak_from_ms, peak_to_ms, peak_from_level, peak_to_level, .. } => format!(
                "The fastest drop was from {peak_from_level}% to {peak_to_level}% between +{} and +{}",
                format_ms(*peak_from_ms),
                format_ms(*peak_to_ms)
            ),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryHistoryText {
    pub records: usize,
    /// `RESET:TIME: 2014-12-09-11-33-29` as printed, when present.
    pub reset_time: Option<String>,
    pub levels: Vec<HistoryLevel>,
    pub discharge: DischargeSummary,
}

/// `1h02m03s004ms` style, the way dumpsys prints durations.
pub fn format_ms(ms: i64) -> String {
    let (d, h, m, s, r) = (ms / 86_400_000, ms / 3_600_000 % 24, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::new();
    for (v, u) in [(d, "d"), (h, "h"), (m, "m"), (s, "s")] {
        if v > 0 || !out.is_empty() {
            out.push_str(&format!("{v}{u}"));
        }
    }
    out.push_str(&format!("{r}ms"));
    out
}

/// `0` or `+1d02h03m04s005ms` (any subset of units) → ms.
fn offset_ms(n: usize, s: &str) -> Result<i64, ParseError> {
    if s == "0" {
        return Ok(0);
    }
    let body = s.strip_prefix('+').unwrap_or(s);
    let bad = || ParseError::at(n, format!("`{}` is not a history time offset (like `+1m02s003ms`)", excerpt(s)));
    let (mut total, mut digits) = (0i64, String::new());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit_ms = match c {
            'd' => 86_400_000,
            'h' => 3_600_000,
            's' => 1000,
            'm' if chars.peek() == Some(&'s') => {
                chars.next();
                1
            }
            'm' => 60_000,
            _ => return Err(bad()),
        };
        let v: i64 = digits.parse().map_err(|_| bad())?;
        total = total.checked_add(v.checked_mul(unit_ms).ok_or_else(bad)?).ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() || body.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

fn summarize(levels: &[HistoryLevel]) -> DischargeSummary {
    let Some(first) = levels.first() else { return DischargeSummary::NoDischarge };
    // The first record at the lowest level: the drop took until then.
    let Some(lowest) = levels.iter().min_by_key(|l| (l.level_pct, l.offset_ms)) else {
        return DischargeSummary::NoDischarge;
    };
    let dropped_pct = first.level_pct - lowest.level_pct;
    // Consecutive level changes that went down.
    let steps = levels.windows(2).filter_map(|w| match w {
        [a, b] if b.level_pct < a.level_pct => Some((a, b)),
        _ => None,
    });
    let Some((pa, pb)) = steps.min_by(|(a1, b1), (a2, b2)| {
        let r1 = (b1.offset_ms - a1.offset_ms) as f64 / (a1.level_pct - b1.level_pct) as f64;
        let r2 = (b2.offset_ms - a2.offset_ms) as f64 / (a2.level_pct - b2.level_pct) as f64;
        r1.total_cmp(&r2)
    }) else {
        return DischargeSummary::NoDischarge;
    };
    if dropped_pct <= 0 {
        return DischargeSummary::NoDischarge;
    }
    DischargeSummary::Discharged {
        dropped_pct,
        ms_per_pct: (lowest.offset_ms - first.offset_ms) as f64 / dropped_pct as f64,
        peak_from_ms: pa.offset_ms,
        peak_to_ms: pb.offset_ms,
        peak_from_level: pa.level_pct,
        peak_to_level: pb.level_pct,
    }
}

/// Parses the `Battery History` section (lines before its header are skipped; it ends at the
/// first line that is not a history record).
pub fn parse(text: &str) -> Result<BatteryHistoryText, ParseError> {
    let mut lines = numbered(text).skip_while(|(_, l)| !l.trim_start().starts_with("Battery History"));
    if lines.next().is_none() {
        return Err(ParseError::at(
            1,
            "no `Battery History` header: not `dumpsys batterystats` output (use `--checkin` output with android-batterystats)",
        ));
    }
    let (mut records, mut reset_time, mut levels) = (0usize, None, Vec::new());
    for (n, raw) in lines {
        let l = raw.trim();
        if l.is_empty() {
            break;
        }
        let mut tokens = l.splitn(3, ' ');
        let (Some(time), Some(ints)) = (tokens.next(), tokens.next()) else { break };
        if !(ints.starts_with('(') && ints.ends_with(')')) {
            // The next section of the dump begins.
            break;
        }
        let at = offset_ms(n, time)?;
        records += 1;
        let rest = tokens.next().unwrap_or("").trim();
        if let Some(t) = rest.strip_prefix("RESET:TIME:").or_else(|| rest.strip_prefix("TIME:")) {
            if rest.starts_with("RESET") {
                reset_time = Some(t.trim().to_string());
            }
            continue;
        }
        let first = rest.split(' ').next().unwrap_or("");
        if first.len() == 3 && first.chars().all(|c| c.is_ascii_digit()) {
            let level: i64 = first.parse().unwrap_or(0);
            if levels.last().is_none_or(|p: &HistoryLevel| p.level_pct != level) {
                levels.push(HistoryLevel { offset_ms: at, level_pct: level, line: n });
            }
        }
    }
    let discharge = summarize(&levels);
    Ok(BatteryHistoryText { records, reset_time, levels, discharge })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets() {
        assert_eq!(offset_ms(1, "0").unwrap(), 0);
        assert_eq!(offset_ms(1, "+1s002ms").unwrap(), 1002);
        assert_eq!(offset_ms(1, "+1d02h03m04s005ms").unwrap(), 93_784_005);
        assert!(offset_ms(7, "+1x").is_err());
        assert_eq!(format_ms(93_784_005), "1d2h3m4s5ms");
    }

    #[test]
    fn discharge_rate_and_peak() {
        let t = "Battery History (1% used):\n     0 (9) RESET:TIME: 2024-01-01-10-00-00\n  +1s000ms (2) 100 c0900020 status=discharging\n  +10m01s000ms (1) 099 c0900020\n  +15m01s000ms (1) 098 c0900020\n  +35m01s000ms (1) 097 c0900020\n\nPer-PID Stats:\n";
        let h = parse(t).unwrap();
        assert_eq!(h.records, 5);
        assert_eq!(h.levels.len(), 4);
        match &h.discharge {
            DischargeSummary::Discharged { dropped_pct, ms_per_pct, peak_from_level, peak_to_ms, .. } => {
                assert_eq!((*dropped_pct, *peak_from_level, *peak_to_ms), (3, 99, 901_000));
                assert_eq!(*ms_per_pct, 700_000.0);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(h.discharge.rate_text(), "The battery dropped 1% every 11m40s0ms on average");
    }

    #[test]
    fn errors() {
        assert_eq!(parse("hello\n").unwrap_err().line(), Some(1));
        let e = parse("Battery History:\n  +1q (2) 100\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
    }
}
