//! The lab's own noise floor: the coefficient of variation of repeated trials of one
//! unchanged thing, pooled over arms that measured nothing but noise, with its interval,
//! its drift over weeks and the smallest change a campaign of N trials per arm detects.

use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::noncentral_t::noncentrality_for_power;
use super::{mean, sample_variance};

/// One arm: the valid values of one variant on one device model in one campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseArm {
    pub campaign: String,
    /// The week the campaign started in, as a count of weeks from any fixed origin: arms
    /// are grouped by it, and the drift's slope is per one of it.
    pub week: i64,
    pub values: Vec<f64>,
}

/// The pooled CV of the arms of one week.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WeekNoise {
    pub week: i64,
    pub arms: usize,
    pub df: u64,
    pub cv: f64,
}

/// The noise floor of one device model and metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NoiseFloor {
    /// The pooled coefficient of variation of one trial's value (0.03 = 3 %).
    pub cv: f64,
    /// Its degrees of freedom: Σ(nᵢ − 1) over the arms used.
    pub df: u64,
    /// The level of [`Self::cv_low`] … [`Self::cv_high`].
    pub confidence: f64,
    pub cv_low: f64,
    pub cv_high: f64,
    /// Arms used, and their values.
    pub arms: usize,
    pub trials: usize,
    /// Arms left out: fewer than 2 values, or a mean of 0 (no CV).
    pub skipped_arms: usize,
    /// The campaigns of the arms used, sorted, once each.
    pub campaigns: Vec<String>,
    /// The pooled CV per week, in week order.
    pub weeks: Vec<WeekNoise>,
    /// The drift: the least-squares slope of the weekly CVs against the week, in CV per
    /// week (0.002 = the CV grows by 0.2 points a week). `None` with fewer than 2 weeks.
    pub drift_per_week: Option<f64>,
}

/// What pooling adds up: Σ(nᵢ − 1)·CVᵢ² and Σ(nᵢ − 1).
#[derive(Debug, Clone, Copy, Default)]
struct Pool {
    weighted: f64,
    df: u64,
    arms: usize,
    trials: usize,
}

impl Pool {
    fn cv(&self) -> Option<f64> {
        (self.df > 0).then(|| (self.weighted / self.df as f64).sqrt())
    }
}

/// An arm's CV and n, or `None` when it has none (n < 2, a mean of 0, a value not finite).
fn arm_cv(values: &[f64]) -> Option<(f64, usize)> {
    let finite = values.iter().all(|v| v.is_finite());
    let m = mean(values).filter(|m| *m != 0.0 && finite)?;
    let cv = sample_variance(values)?.sqrt() / m.abs();
    cv.is_finite().then_some((cv, values.len()))
}

impl NoiseFloor {
    /// The noise floor of `arms` at interval level `confidence`. `None` when no arm has a CV.
    ///
    /// Pooled CV: CV² = Σ(nᵢ − 1)·CVᵢ² / Σ(nᵢ − 1), CVᵢ = sᵢ/|x̄ᵢ| (the within-arm relative
    /// variance pooled as a pooled variance is; each arm keeps its own mean, so a shift
    /// between campaigns or builds does not count as noise).
    ///
    /// Interval: CV·√(ν/χ²₍₁₊c₎/₂,ν) … CV·√(ν/χ²₍₁₋c₎/₂,ν), ν = Σ(nᵢ − 1): the χ² interval
    /// of a standard deviation (NIST/SEMATECH e-Handbook of Statistical Methods, §1.3.5.8)
    /// applied to the CV as if the means were exact. For a CV below about 0.3 that is
    /// McKay's interval to first order (Vangel, "Confidence intervals for a normal
    /// coefficient of variation", The American Statistician 50(1), 1996), which the lab's
    /// trials are far below. Quantiles from statrs (`ChiSquared::inverse_cdf`).
    ///
    /// Drift: the same pooling per week, and the ordinary least-squares slope of those
    /// weekly CVs on the week, unweighted (each week one point).
    pub fn pool(arms: &[NoiseArm], confidence: f64) -> Option<NoiseFloor> {
        let mut all = Pool::default();
        let mut weeks: std::collections::BTreeMap<i64, Pool> = Default::default();
        let mut campaigns = std::collections::BTreeSet::new();
        let mut skipped = 0;
        for arm in arms {
            let Some((cv, n)) = arm_cv(&arm.values) else {
                skipped += 1;
                continue;
            };
            for p in [&mut all, weeks.entry(arm.week).or_default()] {
                p.weighted += (n - 1) as f64 * cv * cv;
                p.df += (n - 1) as u64;
                p.arms += 1;
                p.trials += n;
            }
            campaigns.insert(arm.campaign.clone());
        }
        let cv = all.cv()?;
        let (cv_low, cv_high) = chi_square_interval(cv, all.df, confidence)?;
        let weeks: Vec<WeekNoise> = weeks
            .into_iter()
            .filter_map(|(week, p)| Some(WeekNoise { week, arms: p.arms, df: p.df, cv: p.cv()? }))
            .collect();
        Some(NoiseFloor {
            cv,
            df: all.df,
            confidence,
            cv_low,
            cv_high,
            arms: all.arms,
            trials: all.trials,
            skipped_arms: skipped,
            campaigns: campaigns.into_iter().collect(),
            drift_per_week: least_squares_slope(&weeks),
            weeks,
        })
    }

    /// The smallest relative change `n` trials per arm detect with probability `power`
    /// at level `alpha` at this CV: [`detectable_change`].
    pub fn detectable_change(&self, n: u32, alpha: f64, power: f64) -> Option<f64> {
        detectable_change(self.cv, n, alpha, power)
    }
}

/// CV·√(ν/χ²₍₁₊c₎/₂,ν) and CV·√(ν/χ²₍₁₋c₎/₂,ν) (see [`NoiseFloor::pool`]).
fn chi_square_interval(cv: f64, df: u64, confidence: f64) -> Option<(f64, f64)> {
    let ok = confidence > 0.0 && confidence < 1.0 && df > 0;
    if !ok {
        return None;
    }
    let chi = ChiSquared::new(df as f64).ok()?;
    let nu = df as f64;
    let low = cv * (nu / chi.inverse_cdf((1.0 + confidence) / 2.0)).sqrt();
    let high = cv * (nu / chi.inverse_cdf((1.0 - confidence) / 2.0)).sqrt();
    (low.is_finite() && high.is_finite()).then_some((low, high))
}

/// b = Σ(wᵢ − w̄)(cvᵢ − c̄) / Σ(wᵢ − w̄)², over the weeks wᵢ.
fn least_squares_slope(weeks: &[WeekNoise]) -> Option<f64> {
    if weeks.len() < 2 {
        return None;
    }
    let n = weeks.len() as f64;
    let w_mean = weeks.iter().map(|w| w.week as f64).sum::<f64>() / n;
    let c_mean = weeks.iter().map(|w| w.cv).sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for w in weeks {
        let dx = w.week as f64 - w_mean;
        sxy += dx * (w.cv - c_mean);
        sxx += dx * dx;
    }
    Some(sxy / sxx)
}

/// The smallest relative change δ that a two-sided two-sample t-test at level `alpha`
/// with `n` trials per arm detects with probability `power`, when one trial's value has
/// coefficient of variation `cv` in both arms.
///
/// Formula: δ = λ·CV·√(2/n), λ the noncentrality at which the exact power
/// 1 − F(t₁₋α/₂,ν; ν, λ) + F(−t₁₋α/₂,ν; ν, λ), ν = 2n − 2, equals `power` (F the
/// noncentral t CDF, Lenth 1989 AS 243), found by bisection; the mean change x̄·δ over
/// the standard deviation x̄·CV is the standardized difference. `None` for n < 2, a CV
/// not finite or negative, or a power not between α and 1.
pub fn detectable_change(cv: f64, n: u32, alpha: f64, power: f64) -> Option<f64> {
    if !(cv >= 0.0 && cv.is_finite()) {
        return None;
    }
    Some(noncentrality_for_power(n, alpha, power)? * cv * (2.0 / f64::from(n)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arm(campaign: &str, week: i64, values: &[f64]) -> NoiseArm {
        NoiseArm { campaign: campaign.into(), week, values: values.to_vec() }
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs()
    }

    #[test]
    fn pooled_cv_and_its_interval_match_scipy() {
        // numpy/scipy 1.17.1: CVᵢ = a.std(ddof=1)/|a.mean()|, pooled with weights nᵢ − 1;
        // interval cv·√(df/stats.chi2.ppf(0.975, df)) … cv·√(df/stats.chi2.ppf(0.025, df)).
        // The one-value arm is skipped.
        let arms = [
            arm("c1", 0, &[10.2, 9.8, 10.5, 9.9]),
            arm("c2", 0, &[20.0, 21.0, 19.5]),
            arm("c1", 1, &[5.0, 5.1, 4.8, 5.3, 5.05]),
            arm("c3", 1, &[7.0]),
        ];
        let f = NoiseFloor::pool(&arms, 0.95).unwrap();
        assert!(close(f.cv, 0.03481232878301409, 1e-13), "cv {}", f.cv);
        assert_eq!((f.df, f.arms, f.trials, f.skipped_arms), (9, 3, 12, 1));
        assert!(close(f.cv_low, 0.023945145365878648, 1e-10), "low {}", f.cv_low);
        assert!(close(f.cv_high, 0.06355374190348977, 1e-10), "high {}", f.cv_high);
        assert_eq!(f.campaigns, ["c1", "c2"], "c3's only arm was skipped");
        let at90 = NoiseFloor::pool(&arms, 0.90).unwrap();
        assert!(close(at90.cv_low, 0.025390267328107452, 1e-10) && close(at90.cv_high, 0.05727315887282892, 1e-10));
    }

    #[test]
    fn weeks_are_pooled_apart_and_the_drift_is_their_slope() {
        // Week 0: CV² = (3·0.01² + 3·0.03²)/6 → CV = √0.0005; week 2: 0.05 exactly.
        let a = |cv: f64| [100.0 * (1.0 - cv), 100.0, 100.0 * (1.0 + cv)];
        let sd_of = |xs: &[f64]| sample_variance(xs).unwrap().sqrt() / mean(xs).unwrap();
        let (c1, c3, c5) = (sd_of(&a(0.01)), sd_of(&a(0.03)), sd_of(&a(0.05)));
        let arms = [arm("w0a", 0, &a(0.01)), arm("w0b", 0, &a(0.03)), arm("w2", 2, &a(0.05))];
        let f = NoiseFloor::pool(&arms, 0.95).unwrap();
        let week0 = ((c1 * c1 + c3 * c3) / 2.0).sqrt();
        assert_eq!(f.weeks.len(), 2);
        assert_eq!((f.weeks[0].week, f.weeks[0].arms, f.weeks[0].df), (0, 2, 4));
        assert!(close(f.weeks[0].cv, week0, 1e-14) && close(f.weeks[1].cv, c5, 1e-14));
        let slope = f.drift_per_week.unwrap();
        assert!(close(slope, (c5 - week0) / 2.0, 1e-12), "slope {slope}");
        assert_eq!(NoiseFloor::pool(&arms[..2], 0.95).unwrap().drift_per_week, None, "one week has no slope");
    }

    #[test]
    fn arms_without_a_cv_are_skipped_and_none_is_no_floor() {
        let none = [arm("c", 0, &[3.0]), arm("c", 0, &[0.0, 0.0]), arm("c", 0, &[1.0, f64::NAN])];
        assert_eq!(NoiseFloor::pool(&none, 0.95), None);
        assert_eq!(NoiseFloor::pool(&[], 0.95), None);
        // A constant arm has CV 0: it counts, and narrows the floor.
        let f = NoiseFloor::pool(&[arm("c", 0, &[2.0, 2.0, 2.0])], 0.95).unwrap();
        assert_eq!((f.cv, f.df, f.cv_low, f.cv_high), (0.0, 2, 0.0, 0.0));
    }

    #[test]
    fn detectable_changes_match_scipy() {
        // scipy 1.17.1: λ from optimize.brentq on stats.nct.sf(tc, ν, λ) + stats.nct.sf(tc, ν, −λ)
        // − power, tc = stats.t.ppf(0.975, ν), ν = 2n − 2; δ = λ·0.05·√(2/n). (n, power, δ).
        let cases = [
            (3, 0.8, 0.15354461331818434),
            (3, 0.9, 0.1794602757060511),
            (5, 0.8, 0.10122196696922713),
            (5, 0.9, 0.1173975563163179),
            (10, 0.8, 0.06624736962896154),
            (10, 0.9, 0.07668460119024334),
            (20, 0.8, 0.04545645163410412),
            (20, 0.9, 0.05259964741386132),
            (30, 0.8, 0.03678105347988341),
            (30, 0.9, 0.042558568398101675),
        ];
        for (n, power, want) in cases {
            let got = detectable_change(0.05, n, 0.05, power).unwrap();
            assert!(close(got, want, 1e-9), "n {n}, power {power}: {got} vs {want}");
        }
        assert_eq!(detectable_change(0.0, 5, 0.05, 0.8), Some(0.0));
        assert_eq!(detectable_change(-0.1, 5, 0.05, 0.8), None);
        assert_eq!(detectable_change(0.05, 1, 0.05, 0.8), None);
    }
}
