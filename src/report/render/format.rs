//! Number formatting for human-readable tables (CSV and JSON keep full precision).

use crate::stats::{RelativeChange, Summary};

/// Decimals that show `scale` with about four significant digits, between 0 and 6.
///
/// One row shares one precision so its columns line up and compare at a glance.
pub(crate) fn decimals_for(scale: f64) -> usize {
    if !scale.is_finite() || scale == 0.0 {
        return 0;
    }
    let magnitude = scale.abs().log10().floor() as i64;
    (3 - magnitude).clamp(0, 6) as usize
}

/// `x` with `decimals` decimals, without a minus sign on a value that rounds to zero.
pub(crate) fn fixed(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// The cells of one statistics row: `mean ± half-width`, sd, min, max.
/// With n = 1 there is no spread: the mean stands alone and sd is `–`.
pub(crate) struct StatCells {
    pub mean_ci: String,
    pub sd: String,
    pub min: String,
    pub max: String,
}

pub(crate) const MISSING: &str = "–";

impl StatCells {
    pub fn new(stats: Option<&Summary>) -> Self {
        let Some(s) = stats else {
            return StatCells { mean_ci: MISSING.into(), sd: MISSING.into(), min: MISSING.into(), max: MISSING.into() };
        };
        let d = decimals_for(s.mean.abs().max(s.min.abs()).max(s.max.abs()));
        StatCells {
            mean_ci: match s.ci_half_width() {
                Some(h) => format!("{} ± {}", fixed(s.mean, d), fixed(h, d)),
                None => fixed(s.mean, d),
            },
            sd: s.sd.map(|v| fixed(v, d)).unwrap_or_else(|| MISSING.into()),
            min: fixed(s.min, d),
            max: fixed(s.max, d),
        }
    }
}

/// A relative change as a signed percentage: `+1442%`, `+10.9%`, `-0.52%`, `0%`.
/// About three significant digits, at most two decimals.
pub(crate) fn signed_percent(x: f64) -> String {
    let p = x * 100.0;
    let d = match p.abs() {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        _ => 2,
    };
    let s = fixed(p, d);
    let s = if d > 0 { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if s == "0" {
        "0%".into()
    } else if s.starts_with('-') {
        format!("{s}%")
    } else {
        format!("+{s}%")
    }
}

/// `+1442% [+1391%, +1494%]`; the interval is left out when it does not exist, and the
/// change is `–` when there is none (baseline mean 0).
pub(crate) fn change_with_ci(c: Option<&RelativeChange>) -> String {
    let Some(c) = c else { return MISSING.into() };
    match (c.ci_low, c.ci_high) {
        (Some(lo), Some(hi)) => format!("{} [{}, {}]", signed_percent(c.delta), signed_percent(lo), signed_percent(hi)),
        _ => signed_percent(c.delta),
    }
}

/// A p-value for tables: three decimals from 0.001 up, scientific below (`2.7e-8`), `0`
/// for an exact zero, `–` when absent.
pub(crate) fn p_value(p: Option<f64>) -> String {
    p.map_or_else(|| MISSING.into(), crate::text::p_value::table)
}

/// `0.95` → `95%`, `0.9` → `90%`, `0.995` → `99.5%`.
pub(crate) fn percent(level: f64) -> String {
    let p = level * 100.0;
    // Round to 4 decimals first so 0.95 * 100 = 94.99999999999999 prints as 95.
    let p = (p * 1e4).round() / 1e4;
    format!("{p}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_follow_magnitude() {
        assert_eq!(decimals_for(12.34), 2);
        assert_eq!(decimals_for(0.1234), 4);
        assert_eq!(decimals_for(1234.5), 0);
        assert_eq!(decimals_for(18000.0), 0);
        assert_eq!(decimals_for(0.000001), 6);
        assert_eq!(decimals_for(0.0), 0);
        assert_eq!(decimals_for(-3.2), 3);
    }

    #[test]
    fn fixed_drops_negative_zero() {
        assert_eq!(fixed(-0.001, 2), "0.00");
        assert_eq!(fixed(-0.0, 0), "0");
        assert_eq!(fixed(-1.5, 1), "-1.5");
        assert_eq!(fixed(2.345, 1), "2.3");
    }

    #[test]
    fn signed_percents_and_p_values() {
        assert_eq!(signed_percent(14.42), "+1442%");
        assert_eq!(signed_percent(0.109), "+10.9%");
        assert_eq!(signed_percent(-0.0052), "-0.52%");
        assert_eq!(signed_percent(0.1), "+10%");
        assert_eq!(signed_percent(0.0), "0%");
        assert_eq!(signed_percent(-0.00001), "0%");
        assert_eq!(p_value(Some(0.35999)), "0.360");
        assert_eq!(p_value(Some(2.7e-8)), "2.7e-8");
        assert_eq!(p_value(Some(0.0)), "0");
        assert_eq!(p_value(None), "–");
    }

    #[test]
    fn percents() {
        assert_eq!(percent(0.95), "95%");
        assert_eq!(percent(0.995), "99.5%");
    }
}

#[cfg(test)]
mod stat_cell_tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn missing_spread_and_missing_data() {
        let none = StatCells::new(None);
        assert_eq!([none.mean_ci, none.sd, none.min, none.max], [MISSING; 4]);
        let one = StatCells::new(summarize(&[12.5], 0.95).as_ref());
        assert_eq!([one.mean_ci, one.sd, one.min, one.max], ["12.50", MISSING, "12.50", "12.50"]);
    }
}
