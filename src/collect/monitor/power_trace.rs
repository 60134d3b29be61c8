//! `PowerTrace`: a monitor's main-channel samples as it recorded them.

/// The supply voltage: the value the monitor was set to, or a sampled channel.
#[derive(Debug, Clone, PartialEq)]
pub enum Voltage {
    Constant(f64),
    /// Volts, one per current sample.
    Sampled(Vec<f32>),
}

/// Samples the instrument did not deliver: `missing` of them before sample `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub at: usize,
    pub missing: u64,
}

/// A monitor's samples at a fixed rate: sample `i` was taken at `t0_s + (i + missing
/// before it) / rate_hz`, on the monitor's clock (a gap moves every later sample on).
#[derive(Debug, Clone, PartialEq)]
pub struct PowerTrace {
    pub rate_hz: f64,
    /// The first sample's time, seconds, on the clock the soak's markers use.
    pub t0_s: f64,
    /// Amperes.
    pub current_a: Vec<f32>,
    pub voltage: Voltage,
    /// In sample order.
    pub gaps: Vec<Gap>,
    /// Why the recording's markers cannot be placed on these samples, if they cannot: the
    /// instrument's clock and this machine's disagreed between them (an Otii that stopped
    /// sampling); every window of the recording is then invalid.
    pub unaligned: Option<String>,
}

impl PowerTrace {
    /// The volts of sample `i`.
    pub fn volts(&self, i: usize) -> f64 {
        match &self.voltage {
            Voltage::Constant(v) => *v,
            Voltage::Sampled(v) => f64::from(v.get(i).copied().unwrap_or(0.0)),
        }
    }

    /// The time of sample `i`, seconds.
    pub fn time_of(&self, i: usize) -> f64 {
        let before: u64 = self.gaps.iter().take_while(|g| g.at <= i).map(|g| g.missing).sum();
        self.t0_s + (i as u64 + before) as f64 / self.rate_hz
    }

    /// Every sample's time, in order: [`time_of`](Self::time_of) of each, the gaps walked
    /// once (an hour at 5 kHz is 18 million samples).
    pub fn times(&self) -> impl Iterator<Item = f64> + '_ {
        let mut gaps = self.gaps.iter().peekable();
        let mut skipped = 0u64;
        (0..self.current_a.len()).map(move |i| {
            while let Some(g) = gaps.next_if(|g| g.at <= i) {
                skipped += g.missing;
            }
            self.t0_s + (i as u64 + skipped) as f64 / self.rate_hz
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_each_samples_time_of_across_gaps() {
        let t = PowerTrace {
            rate_hz: 1000.0,
            t0_s: 2.5,
            current_a: vec![0.1; 50],
            voltage: Voltage::Constant(3.8),
            gaps: vec![
                Gap { at: 0, missing: 2 },
                Gap { at: 10, missing: 5 },
                Gap { at: 10, missing: 1 },
                Gap { at: 49, missing: 7 },
            ],
            unaligned: None,
        };
        let all: Vec<f64> = t.times().collect();
        assert_eq!(all.len(), 50);
        for (i, at) in all.iter().enumerate() {
            assert_eq!(*at, t.time_of(i), "sample {i}");
        }
    }
}
