//! The random side of a simulated trial: effects, faults and the app's samples,
//! all drawn from seeds so the same seeds give the same trial.

use std::time::Duration;

use rand::RngExt;
use rand_distr::{Binomial, StandardNormal};

use super::log::Sample;
use super::model::{self, AppLoad};
use crate::config::{SimParams, SimProfile};
use crate::seed;

/// Length of one app sample (sysmontap-like, one per minute).
pub const SAMPLE_PERIOD: Duration = Duration::from_secs(60);

/// Relative sd of one CPU sample around the app's true load.
pub const CPU_SAMPLE_SD: f64 = 0.05;
/// Relative sd of one memory sample.
pub const MEMORY_SAMPLE_SD: f64 = 0.01;

/// `1 + sd·z`, kept within [0.5, 1.5] so a wild draw cannot make power negative.
fn effect(sd: f64, z: f64) -> f64 {
    (1.0 + sd * z).clamp(0.5, 1.5)
}

/// The device's own multiplicative effect on power, fixed for its lifetime
/// (drawn from `params.seed`, sd `device_effect_sd`).
pub fn device_effect(params: &SimParams) -> f64 {
    let mut rng = seed::rng(params.seed, &["sim", "device-effect"]);
    effect(params.device_effect_sd, rng.sample(StandardNormal))
}

/// Average load of an app with `profile` sending one request per `interval`.
pub fn app_load(profile: &SimProfile, interval: Option<Duration>) -> AppLoad {
    let requests_per_s = match interval {
        Some(iv) if !iv.is_zero() => (1.0 - profile.cache_hit_ratio.clamp(0.0, 1.0)) / iv.as_secs_f64(),
        _ => 0.0,
    };
    AppLoad { cpu_pct: profile.cpu_pct, wakeups_per_s: profile.wakeups_per_s, requests_per_s }
}

/// Requests an app sends at `k·interval` (k ≥ 1) within `(lo, hi]`.
pub fn requests_between(lo: Duration, hi: Duration, interval: Option<Duration>) -> u64 {
    match interval {
        Some(iv) if !iv.is_zero() && hi > lo => {
            let iv = iv.as_nanos();
            (hi.as_nanos() / iv - lo.as_nanos() / iv) as u64
        }
        _ => 0,
    }
}

/// The app's samples over a window, and its request counters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SampleSet {
    pub samples: Vec<Sample>,
    pub requests_sent: u64,
    pub requests_cached: u64,
}

/// What `TrialPlan::samples` needs to know about how the trial went.
#[derive(Debug, Clone)]
pub struct WindowFacts<'a> {
    pub params: &'a SimParams,
    pub profile: &'a SimProfile,
    pub interval: Option<Duration>,
    /// Device effect × trial effect.
    pub power_factor: f64,
    /// Length of the measurement window.
    pub window: Duration,
    pub crashed_at: Option<Duration>,
    /// When the lab had no contact with the phone (no samples overlap it).
    pub lost: Option<(Duration, Duration)>,
}

/// Everything random about one trial attempt, drawn at launch from the attempt's seed.
/// Fault times are offsets from launch, uniform in 5–95 % of the trial's duration.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialPlan {
    pub seed: u64,
    /// Multiplicative effect of this trial on power (sd `trial_noise_sd`).
    pub trial_factor: f64,
    pub crash_at: Option<Duration>,
    pub disconnect_at: Option<Duration>,
    pub brightness_reset_at: Option<Duration>,
    /// USB power comes back by another path (charging_during_soak).
    pub external_power_at: Option<Duration>,
    /// A `usb_only` phone does not show up again when its port comes back on (stays_lost).
    pub stays_lost: bool,
}

impl TrialPlan {
    pub fn draw(seed: u64, params: &SimParams, profile: &SimProfile, duration: Duration) -> Self {
        let mut rng = seed::rng(seed, &["sim", "trial"]);
        let trial_factor = effect(params.trial_noise_sd, rng.sample(StandardNormal));
        // Every fault draws both numbers whatever its probability, so changing one
        // probability does not move the others' draws.
        let mut fault = |p: f64| {
            let hit = rng.random::<f64>() < p.clamp(0.0, 1.0);
            let frac: f64 = rng.random_range(0.05..0.95);
            hit.then(|| duration.mul_f64(frac))
        };
        let crash_at = fault(profile.crash_probability);
        let disconnect_at = fault(params.faults.disconnect);
        let brightness_reset_at = fault(params.faults.brightness_reset);
        let external_power_at = fault(params.faults.charging_during_soak);
        // Drawn last, so that the draws above are what they were before it existed.
        let stays_lost = fault(params.faults.stays_lost).is_some();
        TrialPlan { seed, trial_factor, crash_at, disconnect_at, brightness_reset_at, external_power_at, stays_lost }
    }

    /// One sample per minute of the window while the app is alive, with measurement
    /// noise; minutes that overlap a loss of contact leave a gap. The request counters
    /// are the app's own and cover the whole window, gap or not.
    pub fn samples(&self, f: &WindowFacts) -> SampleSet {
        let mut rng = seed::rng(self.seed, &["sim", "samples"]);
        let alive_until = f.crashed_at.unwrap_or(f.window).min(f.window);
        let cache = f.profile.cache_hit_ratio.clamp(0.0, 1.0);
        let mut set = SampleSet::default();
        let mut lo = Duration::ZERO;
        while lo < alive_until {
            let hi = (lo + SAMPLE_PERIOD).min(f.window);
            let alive_hi = hi.min(alive_until);
            let z_cpu: f64 = rng.sample(StandardNormal);
            let z_mem: f64 = rng.sample(StandardNormal);
            let attempts = requests_between(lo, alive_hi, f.interval);
            let cached = match Binomial::new(attempts, cache) {
                Ok(b) if attempts > 0 => rng.sample(b),
                _ => 0,
            };
            let sent = attempts - cached;
            set.requests_sent += sent;
            set.requests_cached += cached;
            let in_gap = f.lost.is_some_and(|(a, b)| lo < b && a < hi);
            if !in_gap {
                let dt_s = (hi - lo).as_secs_f64();
                let alive_s = (alive_hi - lo).as_secs_f64();
                let cpu_pct = (f.profile.cpu_pct * alive_s / dt_s * (1.0 + CPU_SAMPLE_SD * z_cpu)).max(0.0);
                let wakeups = (f.profile.wakeups_per_s * alive_s).round() as u64;
                let load =
                    AppLoad { cpu_pct, wakeups_per_s: wakeups as f64 / dt_s, requests_per_s: sent as f64 / dt_s };
                let level = model::energy_level(f.power_factor * model::app_mw(f.params, &load));
                set.samples.push(Sample {
                    t: hi,
                    dt: hi - lo,
                    cpu_pct,
                    memory_mb: (f.profile.memory_mb * (1.0 + MEMORY_SAMPLE_SD * z_mem)).max(0.0),
                    wakeups,
                    sent,
                    cached,
                    energy_level: level.round() as u32,
                });
            }
            lo = hi;
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Platform;

    fn profile() -> SimProfile {
        SimProfile {
            cpu_pct: 12.0,
            wakeups_per_s: 15.0,
            memory_mb: 6.0,
            cache_hit_ratio: 0.0,
            crash_probability: 0.0,
            build_id: None,
        }
    }

    #[test]
    fn requests_between_counts_whole_intervals() {
        let iv = Some(Duration::from_millis(200));
        assert_eq!(requests_between(Duration::ZERO, Duration::from_secs(3600), iv), 18_000);
        assert_eq!(requests_between(Duration::from_secs(60), Duration::from_secs(120), iv), 300);
        assert_eq!(requests_between(Duration::ZERO, Duration::from_millis(199), iv), 0);
        assert_eq!(requests_between(Duration::ZERO, Duration::from_secs(10), None), 0);
    }

    #[test]
    fn faults_follow_their_probabilities() {
        let mut params = SimParams::defaults(Platform::Ios);
        let d = Duration::from_secs(3600);
        let none = TrialPlan::draw(1, &params, &profile(), d);
        assert_eq!(
            (none.crash_at, none.disconnect_at, none.brightness_reset_at, none.external_power_at),
            (None, None, None, None)
        );
        params.faults.disconnect = 1.0;
        params.faults.brightness_reset = 1.0;
        params.faults.charging_during_soak = 1.0;
        let all = TrialPlan::draw(1, &params, &SimProfile { crash_probability: 1.0, ..profile() }, d);
        for at in [all.crash_at, all.disconnect_at, all.brightness_reset_at, all.external_power_at] {
            let at = at.expect("fault drawn");
            assert!(at >= d.mul_f64(0.05) && at <= d.mul_f64(0.95), "{at:?}");
        }
        // Same seed, same trial factor whatever the fault probabilities.
        assert_eq!(none.trial_factor, all.trial_factor);
    }

    #[test]
    fn fault_rates_match_their_probabilities_across_attempt_seeds() {
        let mut params = SimParams::defaults(Platform::Ios);
        params.faults.disconnect = 0.12;
        params.faults.charging_during_soak = 0.12;
        let n = 4000;
        let (mut lost, mut charged, mut both) = (0, 0, 0);
        for attempt in 0..n {
            let seed = seed::derive(99, &["trial", "t", &attempt.to_string()]);
            let plan = TrialPlan::draw(seed, &params, &profile(), Duration::from_secs(1200));
            lost += u32::from(plan.disconnect_at.is_some());
            charged += u32::from(plan.external_power_at.is_some());
            both += u32::from(plan.disconnect_at.is_some() && plan.external_power_at.is_some());
        }
        // Binomial sd at n = 4000, p = 0.12 is 0.5 %; allow 4 sd.
        for (what, k, p) in [("disconnect", lost, 0.12), ("charging", charged, 0.12), ("both", both, 0.0144)] {
            let rate = f64::from(k) / f64::from(n);
            let sd = (p * (1.0 - p) / f64::from(n)).sqrt();
            assert!((rate - p).abs() <= 4.0 * sd, "{what}: {rate} vs {p}");
        }
    }

    #[test]
    fn cache_hits_never_reach_the_network() {
        let params = SimParams::defaults(Platform::Ios);
        let prof = SimProfile { cache_hit_ratio: 0.9, ..profile() };
        let plan = TrialPlan::draw(3, &params, &prof, Duration::from_secs(600));
        let set = plan.samples(&WindowFacts {
            params: &params,
            profile: &prof,
            interval: Some(Duration::from_millis(200)),
            power_factor: 1.0,
            window: Duration::from_secs(600),
            crashed_at: None,
            lost: None,
        });
        assert_eq!(set.requests_sent + set.requests_cached, 3000);
        assert!(set.requests_sent > 200 && set.requests_sent < 400, "{}", set.requests_sent);
        assert_eq!(set.samples.len(), 10);
    }
}
