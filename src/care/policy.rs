//! The charge window and its hysteresis, as pure functions: when to cut a phone's port,
//! when to give it back, and when to look again.

use std::time::Duration;

use crate::config::CareSettings;

/// The shortest wait between two checks of a phone about to cross a limit: a phone on
/// USB gains about a percent a minute, so this bounds the overshoot to about that.
pub const MIN_CHECK: Duration = Duration::from_secs(60);

/// What to do with a phone's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Switch the port off: the phone is at or above the upper limit and charging.
    Cut,
    /// Switch the port on: the phone is at or below the lower limit and has no power.
    Restore,
    Keep,
}

/// `[care] charge = [lower, upper]`: off at ≥ upper, on at ≤ lower, nothing in between,
/// so a phone swings between the limits instead of toggling at one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChargeWindow {
    pub lower_pct: f64,
    pub upper_pct: f64,
}

impl ChargeWindow {
    pub fn of(s: &CareSettings) -> Self {
        ChargeWindow { lower_pct: s.lower_pct, upper_pct: s.upper_pct }
    }

    pub fn contains(&self, level: f64) -> bool {
        (self.lower_pct..=self.upper_pct).contains(&level)
    }

    /// What to do with a phone at `level` percent whose port is `powered`.
    pub fn decide(&self, level: f64, powered: bool) -> Action {
        if powered && level >= self.upper_pct {
            Action::Cut
        } else if !powered && level <= self.lower_pct {
            Action::Restore
        } else {
            Action::Keep
        }
    }

    /// How long until this phone should be looked at again: when it is predicted to reach
    /// the limit it is heading for at `rate` (percent per second since its port last
    /// changed, when known), never sooner than `MIN_CHECK` nor later than `interval`.
    /// A charging phone whose rate is not known yet is looked at after `MIN_CHECK`, to
    /// learn it: charging is fast and overshooting the upper limit is what care avoids.
    pub fn next_check(&self, level: f64, powered: bool, rate: Option<f64>, interval: Duration) -> Duration {
        let interval = interval.max(MIN_CHECK);
        let eta_s = match (powered, rate) {
            (true, _) if level >= self.upper_pct => None,
            (true, Some(r)) if r > 0.0 => Some((self.upper_pct - level) / r),
            (true, _) => Some(0.0),
            (false, _) if level <= self.lower_pct => None,
            (false, Some(r)) if r < 0.0 => Some((level - self.lower_pct) / -r),
            (false, _) => None,
        };
        match eta_s {
            None => interval,
            Some(s) => Duration::from_secs_f64(s.max(0.0)).clamp(MIN_CHECK, interval),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: ChargeWindow = ChargeWindow { lower_pct: 40.0, upper_pct: 80.0 };
    const H: Duration = Duration::from_secs(3600);

    #[test]
    fn cuts_at_the_upper_limit_and_restores_at_the_lower_one() {
        assert_eq!(W.decide(80.0, true), Action::Cut);
        assert_eq!(W.decide(100.0, true), Action::Cut);
        assert_eq!(W.decide(79.9, true), Action::Keep, "still charging towards the limit");
        assert_eq!(W.decide(40.0, false), Action::Restore);
        assert_eq!(W.decide(5.0, false), Action::Restore);
        assert_eq!(W.decide(40.1, false), Action::Keep);
    }

    #[test]
    fn inside_the_window_it_keeps_whatever_the_port_is_doing() {
        for level in [40.5, 60.0, 79.5] {
            assert_eq!(W.decide(level, true), Action::Keep);
            assert_eq!(W.decide(level, false), Action::Keep);
        }
        // Off above the upper limit and on below the lower one are already right.
        assert_eq!(W.decide(95.0, false), Action::Keep);
        assert_eq!(W.decide(10.0, true), Action::Keep);
        assert!(W.contains(40.0) && W.contains(80.0) && !W.contains(80.5) && !W.contains(39.9));
    }

    #[test]
    fn the_next_check_is_when_the_limit_is_predicted_to_be_reached() {
        // Charging at 1 % a minute from 50 %: 30 minutes to 80 %.
        let per_s = 1.0 / 60.0;
        assert_eq!(W.next_check(50.0, true, Some(per_s), 2 * H), Duration::from_secs(1800));
        // Draining 5 % an hour from 60 % with the port off: 4 hours to 40 %, capped.
        let drain = -5.0 / 3600.0;
        assert_eq!(W.next_check(60.0, false, Some(drain), 2 * H), 2 * H);
        assert_eq!(W.next_check(60.0, false, Some(drain), 8 * H), 4 * H);
    }

    #[test]
    fn an_unknown_charging_rate_is_learnt_quickly_and_the_wait_is_bounded() {
        assert_eq!(W.next_check(50.0, true, None, H), MIN_CHECK);
        assert_eq!(W.next_check(50.0, true, Some(0.0), H), MIN_CHECK, "a level that has not moved yet");
        assert_eq!(W.next_check(79.99, true, Some(1.0), H), MIN_CHECK, "never sooner than MIN_CHECK");
        assert_eq!(W.next_check(60.0, false, None, H), H, "draining is slow: the interval");
        assert_eq!(W.next_check(90.0, false, Some(-1.0 / 60.0), H), Duration::from_secs(50 * 60));
        assert_eq!(W.next_check(60.0, false, Some(0.01), H), H, "rising with the port off: nothing to predict");
        assert_eq!(W.next_check(50.0, true, Some(1.0), Duration::from_secs(5)), MIN_CHECK, "interval below MIN_CHECK");
    }
}
