//! The soak window's figures from a [`PowerTrace`]: the samples taken between the soak's
//! start (plus the runbook's warm-up) and its end, integrated by the rectangle rule
//! (each sample stands for 1 / rate seconds, as the instruments' own software sums them:
//! energy = Σ Vᵢ·Iᵢ·Δt). Every sample the window should hold and does not — one the
//! instrument reported missing, one that is not a number, or one before the recording
//! began or after it stopped — counts as dropped, so a recording shorter than its window
//! is caught as the Monsoon's gaps are, never summed as a lower energy.

use super::{Gap, PowerTrace};

/// When dropped samples make an attempt invalid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapLimits {
    /// The most samples that may be missing in the window, as a fraction of those expected.
    pub max_dropped_fraction: f64,
    /// The longest single gap allowed, seconds.
    pub max_gap_s: f64,
}

impl Default for GapLimits {
    /// A thousandth of the samples, and no gap of 10 ms or more (a phone's radio burst is
    /// shorter than that).
    fn default() -> GapLimits {
        GapLimits { max_dropped_fraction: 0.001, max_gap_s: 0.01 }
    }
}

/// What the window gives; `invalid` says why the samples cannot be trusted, if so.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowFigures {
    pub energy_j: f64,
    pub avg_power_mw: f64,
    pub avg_current_ma: f64,
    pub peak_current_ma: f64,
    pub samples: u64,
    pub sample_rate_hz: f64,
    pub dropped: u64,
    /// Seconds measured: from the window's start (after warm-up) to its end.
    pub duration_s: f64,
    pub invalid: Option<String>,
}

impl WindowFigures {
    /// The figures of `trace` between `start_s + warmup_s` and `end_s` (its clock).
    pub fn of(trace: &PowerTrace, start_s: f64, end_s: f64, warmup_s: f64, limits: GapLimits) -> WindowFigures {
        let from = start_s + warmup_s;
        let dt = 1.0 / trace.rate_hz;
        let (mut energy, mut charge, mut peak, mut samples) = (0.0f64, 0.0f64, 0.0f64, 0u64);
        let mut gaps = trace.gaps.iter().peekable();
        let (mut dropped, mut longest) = (0u64, 0u64);
        let mut skipped = 0u64;
        // Samples that are not numbers, as gaps: the length of the current run of them.
        let mut bad_run = 0u64;
        for (i, &amps) in trace.current_a.iter().enumerate() {
            while let Some(Gap { at, missing }) = gaps.peek().copied().copied() {
                if at > i {
                    break;
                }
                skipped += missing;
                let t = trace.t0_s + (i as u64 + skipped) as f64 / trace.rate_hz;
                // A gap counts where the samples it lost would have been inside the window.
                if t > from && t - missing as f64 * dt < end_s {
                    dropped += missing;
                    longest = longest.max(missing);
                }
                gaps.next();
            }
            let t = trace.t0_s + (i as u64 + skipped) as f64 / trace.rate_hz;
            if t < from || t >= end_s {
                continue;
            }
            if !amps.is_finite() {
                bad_run += 1;
                dropped += 1;
                longest = longest.max(bad_run);
                continue;
            }
            bad_run = 0;
            let amps = f64::from(amps);
            energy += trace.volts(i) * amps * dt;
            charge += amps * dt;
            peak = peak.max(amps);
            samples += 1;
        }
        let duration = (end_s - from).max(0.0);
        let expected = (duration * trace.rate_hz).round() as u64;
        // The sample slots the window holds before the trace's first and after its last
        // (gaps after the last included): slot k is at t0 + k / rate, the sum the samples'
        // own times use, so a slot is in the window exactly when a sample there would be.
        let slot = |k: i64| trace.t0_s + k as f64 / trace.rate_hz;
        let first_slot_from = |t: f64| {
            let mut k = ((t - trace.t0_s) * trace.rate_hz).ceil() as i64;
            while slot(k - 1) >= t {
                k -= 1;
            }
            while slot(k) < t {
                k += 1;
            }
            k
        };
        let slots_taken = (trace.current_a.len() as u64 + skipped) as i64;
        let head = (-first_slot_from(from)).max(0) as u64;
        let tail = (first_slot_from(end_s) - slots_taken.max(first_slot_from(from))).max(0) as u64;
        dropped += head + tail;
        longest = longest.max(head).max(tail);
        let invalid = if samples == 0 {
            Some(format!("the power monitor gave no sample in the soak window ({duration:.1} s)"))
        } else if let Some(why) = &trace.unaligned {
            Some(why.clone())
        } else if tail as f64 * dt >= limits.max_gap_s {
            Some(format!(
                "the power monitor's samples end {:.3} s before the soak window does (the recording stopped short)",
                tail as f64 * dt
            ))
        } else if head as f64 * dt >= limits.max_gap_s {
            Some(format!(
                "the power monitor's samples begin {:.3} s after the soak window does (the recording started late)",
                head as f64 * dt
            ))
        } else if longest as f64 * dt >= limits.max_gap_s {
            Some(format!(
                "the power monitor's samples have a gap of {:.1} ms in the soak window (the limit is {:.1} ms)",
                longest as f64 * dt * 1000.0,
                limits.max_gap_s * 1000.0
            ))
        } else if expected > 0 && dropped as f64 > limits.max_dropped_fraction * expected as f64 {
            Some(format!(
                "the power monitor dropped {dropped} of {expected} samples in the soak window (more than {}%)",
                limits.max_dropped_fraction * 100.0
            ))
        } else {
            None
        };
        let measured = samples as f64 * dt;
        WindowFigures {
            energy_j: energy,
            avg_power_mw: if measured > 0.0 { energy / measured * 1000.0 } else { 0.0 },
            avg_current_ma: if measured > 0.0 { charge / measured * 1000.0 } else { 0.0 },
            peak_current_ma: peak * 1000.0,
            samples,
            sample_rate_hz: trace.rate_hz,
            dropped,
            duration_s: duration,
            invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::monitor::Voltage;

    /// `seconds` of `amps(t)` at `rate` Hz from t = 0, at a constant `volts`.
    fn trace(rate: f64, seconds: f64, volts: f64, amps: impl Fn(f64) -> f64) -> PowerTrace {
        let n = (seconds * rate) as usize;
        PowerTrace {
            rate_hz: rate,
            t0_s: 0.0,
            current_a: (0..n).map(|i| amps(i as f64 / rate) as f32).collect(),
            voltage: Voltage::Constant(volts),
            gaps: Vec::new(),
            unaligned: None,
        }
    }

    #[test]
    fn a_constant_draw_gives_its_integral_and_the_warm_up_is_left_out() {
        // 100 mA at 4 V for a 10 s window: 4 J, 400 mW; the first 2 s at 1 A are warm-up.
        let t = trace(1000.0, 12.0, 4.0, |t| if t < 2.0 { 1.0 } else { 0.1 });
        let w = WindowFigures::of(&t, 0.0, 12.0, 2.0, GapLimits::default());
        assert!((w.energy_j - 4.0).abs() < 1e-4, "{w:?}");
        assert!((w.avg_power_mw - 400.0).abs() < 1e-3 && (w.avg_current_ma - 100.0).abs() < 1e-3, "{w:?}");
        assert!((w.peak_current_ma - 100.0).abs() < 1e-3, "the warm-up's 1 A is not the peak: {w:?}");
        assert_eq!((w.samples, w.dropped, w.invalid.clone()), (10_000, 0, None));
        // Without the warm-up the first 2 s count: 2 s × 4 W + 10 s × 0.4 W.
        let all = WindowFigures::of(&t, 0.0, 12.0, 0.0, GapLimits::default());
        assert!((all.energy_j - 12.0).abs() < 1e-4 && (all.peak_current_ma - 1000.0).abs() < 1e-3, "{all:?}");
    }

    #[test]
    fn a_varying_draw_and_a_sampled_voltage_are_summed_sample_by_sample() {
        // I = 0.2 + 0.1·sin(2πt) A at V = 3.8 − 0.1·I: over whole periods the mean current is
        // 0.2 A; energy is Σ V·I·Δt, checked against the closed form of ∫ (3.8 I − 0.1 I²) dt.
        let rate = 5000.0;
        let amps = |t: f64| 0.2 + 0.1 * (2.0 * std::f64::consts::PI * t).sin();
        let mut t = trace(rate, 5.0, 0.0, amps);
        t.voltage = Voltage::Sampled(t.current_a.iter().map(|&i| 3.8 - 0.1 * i).collect());
        let w = WindowFigures::of(&t, 0.0, 5.0, 0.0, GapLimits::default());
        // ∫₀⁵ I dt = 1.0; ∫₀⁵ I² dt = 5 · (0.04 + 0.005) = 0.225.
        let want = 3.8 * 1.0 - 0.1 * 0.225;
        assert!((w.energy_j - want).abs() < 1e-4, "{} vs {want}", w.energy_j);
        assert!((w.avg_current_ma - 200.0).abs() < 1e-3, "{w:?}");
    }

    #[test]
    fn dropped_samples_and_a_long_gap_make_the_window_invalid_with_the_reason() {
        let mut t = trace(1000.0, 10.0, 4.0, |_| 0.1);
        // 5 samples lost at 3 s: within the limits (5 of 10 000 is 0.05 %, 5 ms).
        t.gaps = vec![Gap { at: 3000, missing: 5 }];
        let w = WindowFigures::of(&t, 0.0, 10.0, 0.0, GapLimits::default());
        assert_eq!((w.dropped, w.invalid.clone()), (5, None), "{w:?}");
        assert!((t.time_of(3000) - 3.005).abs() < 1e-9, "later samples move on by the gap");
        // One gap of 20 ms.
        t.gaps = vec![Gap { at: 3000, missing: 20 }];
        let w = WindowFigures::of(&t, 0.0, 10.0, 0.0, GapLimits::default());
        assert_eq!(
            w.invalid.as_deref(),
            Some("the power monitor's samples have a gap of 20.0 ms in the soak window (the limit is 10.0 ms)")
        );
        // Many short gaps: 0.5 % dropped.
        t.gaps = (1..=50).map(|k| Gap { at: k * 150, missing: 1 }).collect();
        let w = WindowFigures::of(&t, 0.0, 10.0, 0.0, GapLimits::default());
        assert_eq!(w.dropped, 50);
        assert!(w.invalid.as_deref().unwrap().starts_with("the power monitor dropped 50 of 10000 samples"), "{w:?}");
        // A gap outside the window does not count.
        t.gaps = vec![Gap { at: 100, missing: 500 }];
        let w = WindowFigures::of(&t, 2.0, 8.0, 0.0, GapLimits::default());
        assert_eq!((w.dropped, w.invalid.clone()), (0, None), "{w:?}");
        // No sample in the window at all.
        let w = WindowFigures::of(&t, 20.0, 30.0, 0.0, GapLimits::default());
        assert!(w.invalid.unwrap().starts_with("the power monitor gave no sample"));
    }

    #[test]
    fn a_recording_shorter_than_its_window_is_invalid_not_a_lower_energy() {
        // 10 s of samples, a window to 12 s: 2 s missing at the end.
        let t = trace(1000.0, 10.0, 4.0, |_| 0.1);
        let w = WindowFigures::of(&t, 0.0, 12.0, 0.0, GapLimits::default());
        assert_eq!(w.dropped, 2000, "{w:?}");
        assert_eq!(
            w.invalid.as_deref(),
            Some("the power monitor's samples end 2.000 s before the soak window does (the recording stopped short)")
        );
        // Samples from 1 s on, a window from 0.5 s (after a warm-up of 0.5 s from 0).
        let mut late = trace(1000.0, 10.0, 4.0, |_| 0.1);
        late.t0_s = 1.0;
        let w = WindowFigures::of(&late, 0.0, 8.0, 0.5, GapLimits::default());
        assert_eq!(w.dropped, 500, "{w:?}");
        assert!(w.invalid.as_deref().unwrap().contains("begin 0.500 s after the soak window does"), "{w:?}");
        // A window between sample times, inside the samples, misses none; one whose end
        // passes the time a next sample would have had misses that one.
        let w = WindowFigures::of(&t, 0.0005, 9.9996, 0.0, GapLimits::default());
        assert_eq!((w.dropped, w.invalid.clone()), (0, None), "{w:?}");
        let w = WindowFigures::of(&t, 0.0005, 10.0004, 0.0, GapLimits::default());
        assert_eq!((w.dropped, w.invalid.clone()), (1, None), "{w:?}");
        // A few samples short at the end: counted, within the limits (3 of 10 000).
        let w = WindowFigures::of(&t, 0.0, 10.003, 0.0, GapLimits::default());
        assert_eq!((w.dropped, w.invalid.clone()), (3, None), "{w:?}");
    }

    #[test]
    fn samples_that_are_not_numbers_are_dropped_never_summed() {
        let mut t = trace(1000.0, 10.0, 4.0, |_| 0.1);
        for a in &mut t.current_a[4000..5000] {
            *a = f32::NAN;
        }
        t.current_a[7000] = f32::INFINITY;
        let w = WindowFigures::of(&t, 0.0, 10.0, 0.0, GapLimits::default());
        assert!(w.energy_j.is_finite() && (w.energy_j - 0.4 * 8.999).abs() < 1e-6, "{w:?}");
        assert_eq!((w.dropped, w.samples), (1001, 8999));
        assert_eq!(
            w.invalid.as_deref(),
            Some("the power monitor's samples have a gap of 1000.0 ms in the soak window (the limit is 10.0 ms)")
        );
    }

    #[test]
    fn a_trace_whose_clock_disagreed_with_the_labs_is_invalid_with_the_reason() {
        let mut t = trace(1000.0, 10.0, 4.0, |_| 0.1);
        t.unaligned = Some("the Otii's recording advanced 5.000 s between markers".into());
        let w = WindowFigures::of(&t, 0.0, 10.0, 0.0, GapLimits::default());
        assert_eq!(w.invalid.as_deref(), Some("the Otii's recording advanced 5.000 s between markers"));
    }
}
