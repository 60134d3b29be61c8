//! The simulated phone's physics, in closed form (docs/sim.md has the formulas).
//!
//! Nothing here ticks: a `Cell` (battery charge and temperature) is carried over an
//! interval of constant `Regime` in one step, so an hour of soak costs a few dozen
//! exponentials whatever the clock does.

use crate::config::SimParams;

/// App power that the Xcode-like energy gauge shows as level 20 (mW). Chosen so the
/// seed audit's profiles land on its figures: control ≈ 1/20, Envoy on poll ≈ 12/20.
pub const ENERGY_LEVEL_FULL_SCALE_MW: f64 = 2000.0;

/// Power of a phone with no app in front and the screen off (asleep), mW.
pub const IDLE_MW: f64 = 15.0;

/// Share of the charging power that ends up as heat in the phone while it charges.
pub const CHARGE_HEAT_FRACTION: f64 = 0.15;

/// What an app does on average over an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AppLoad {
    /// Percent of one core.
    pub cpu_pct: f64,
    pub wakeups_per_s: f64,
    /// Requests that reach the network (cache hits excluded).
    pub requests_per_s: f64,
}

/// Radio power: energy per request plus the tail the radio stays awake for after
/// each request. The tail covers the fraction `min(1, rate · tail)` of the time, so
/// requests closer together than the tail keep the radio awake all the time.
pub fn radio_mw(p: &SimParams, requests_per_s: f64) -> f64 {
    let awake = (requests_per_s * p.radio_tail.as_secs_f64()).min(1.0);
    p.request_mj * requests_per_s + p.radio_tail_mw * awake
}

/// The app's own power (CPU, wakeups, radio), before device and trial effects, mW.
pub fn app_mw(p: &SimParams, load: &AppLoad) -> f64 {
    p.cpu_mw_per_pct * load.cpu_pct + p.wakeup_mj * load.wakeups_per_s + radio_mw(p, load.requests_per_s)
}

pub fn screen_mw(p: &SimParams, brightness_pct: f64) -> f64 {
    p.screen_mw_max * brightness_pct.clamp(0.0, 100.0) / 100.0
}

/// Power of an awake phone with the screen on and, if given, an app running, mW.
pub fn foreground_mw(p: &SimParams, brightness_pct: f64, app: Option<&AppLoad>) -> f64 {
    p.base_mw + screen_mw(p, brightness_pct) + app.map_or(0.0, |a| app_mw(p, a))
}

/// Xcode-like energy level (0–20, not rounded) of an app drawing `app_mw`.
pub fn energy_level(app_mw: f64) -> f64 {
    (20.0 * app_mw / ENERGY_LEVEL_FULL_SCALE_MW).clamp(0.0, 20.0)
}

/// Android-like thermal status from the battery temperature (0 none, 1 light,
/// 2 moderate, 3 severe).
pub fn thermal_status(temp_c: f64) -> u32 {
    match temp_c {
        t if t < 40.0 => 0,
        t if t < 45.0 => 1,
        t if t < 50.0 => 2,
        _ => 3,
    }
}

/// `x` after `dt_s` of first-order relaxation towards `target` with time constant `tau_s`.
pub fn relax(x: f64, target: f64, dt_s: f64, tau_s: f64) -> f64 {
    if tau_s <= 0.0 {
        return target;
    }
    target + (x - target) * (-dt_s / tau_s).exp()
}

/// What the phone draws and whether USB feeds it, constant over an interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Regime {
    /// Everything the phone draws, after device and trial effects (mW).
    pub load_mw: f64,
    pub external_power: bool,
}

/// The battery: charge and temperature.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub charge_mah: f64,
    pub temp_c: f64,
}

impl Cell {
    pub fn new(p: &SimParams) -> Self {
        Cell { charge_mah: p.battery_mah * p.battery_start_pct.clamp(0.0, 100.0) / 100.0, temp_c: p.ambient_c }
    }

    pub fn level_pct(&self, p: &SimParams) -> f64 {
        100.0 * self.charge_mah / p.battery_mah
    }

    pub fn is_full(&self, p: &SimParams) -> bool {
        self.charge_mah >= p.battery_mah
    }

    /// Current into the battery (mA; negative = discharging). On USB the charger
    /// delivers `charge_ma` and the load takes its share; a full battery on USB is
    /// held full (the charger carries the load).
    pub fn current_ma(&self, p: &SimParams, r: &Regime) -> f64 {
        let load_ma = r.load_mw / p.voltage_v;
        if !r.external_power {
            return -load_ma;
        }
        let net = p.charge_ma - load_ma;
        if net > 0.0 && self.is_full(p) { 0.0 } else { net }
    }

    /// Whether the battery is gaining charge.
    pub fn is_charging(&self, p: &SimParams, r: &Regime) -> bool {
        self.current_ma(p, r) > 0.0
    }

    /// Temperature the phone settles at under `r`: ambient plus the heat of the load
    /// and, while charging, of the charger.
    pub fn equilibrium_c(&self, p: &SimParams, r: &Regime) -> f64 {
        let charge_heat_w =
            if self.is_charging(p, r) { CHARGE_HEAT_FRACTION * p.charge_ma * p.voltage_v / 1000.0 } else { 0.0 };
        p.ambient_c + p.thermal_c_per_w * (r.load_mw / 1000.0 + charge_heat_w)
    }

    /// The cell after `dt_s` seconds under `r`. When the battery fills up within the
    /// interval, the step is split there (charging heat stops), so the result is the
    /// closed form of the whole interval.
    pub fn step(self, p: &SimParams, r: &Regime, dt_s: f64) -> Cell {
        if dt_s <= 0.0 {
            return self;
        }
        let tau_s = p.thermal_tau.as_secs_f64();
        let current = self.current_ma(p, r);
        let target = self.equilibrium_c(p, r);
        if current > 0.0 {
            let to_full_s = (p.battery_mah - self.charge_mah) / current * 3600.0;
            if to_full_s < dt_s {
                let full = Cell { charge_mah: p.battery_mah, temp_c: relax(self.temp_c, target, to_full_s, tau_s) };
                return full.step(p, r, dt_s - to_full_s);
            }
        }
        Cell {
            charge_mah: (self.charge_mah + current * dt_s / 3600.0).clamp(0.0, p.battery_mah),
            temp_c: relax(self.temp_c, target, dt_s, tau_s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Platform;

    fn iphone() -> SimParams {
        SimParams::defaults(Platform::Ios)
    }

    #[test]
    fn radio_tail_saturates_when_requests_come_faster_than_the_tail() {
        let p = iphone();
        // 5 requests/s with a 200 ms tail: the radio never sleeps.
        let fast = radio_mw(&p, 5.0);
        assert!((fast - (p.request_mj * 5.0 + p.radio_tail_mw)).abs() < 1e-9);
        // 1 request/s: the tail covers 20 % of the time.
        let slow = radio_mw(&p, 1.0);
        assert!((slow - (p.request_mj + p.radio_tail_mw * 0.2)).abs() < 1e-9);
    }

    #[test]
    fn discharge_is_linear_in_time() {
        let p = iphone();
        let c = Cell::new(&p);
        let r = Regime { load_mw: 382.0, external_power: false };
        let after = c.step(&p, &r, 3600.0);
        // 382 mW at 3.82 V is 100 mA: 100 mAh in an hour.
        assert!((c.charge_mah - after.charge_mah - 100.0).abs() < 1e-9);
    }

    #[test]
    fn charging_stops_at_full_and_the_step_splits_there() {
        let p = iphone();
        let c = Cell { charge_mah: p.battery_mah - 10.0, temp_c: p.ambient_c };
        let r = Regime { load_mw: 0.0, external_power: true };
        let one = c.step(&p, &r, 3600.0);
        let two = c.step(&p, &r, 1800.0).step(&p, &r, 1800.0);
        assert_eq!(one.charge_mah, p.battery_mah);
        assert!((one.temp_c - two.temp_c).abs() < 1e-9);
        // Full after 36 s of charging heat, then relaxing to ambient: nearly ambient after an hour.
        assert!(one.temp_c > p.ambient_c && one.temp_c < p.ambient_c + 0.01);
    }

    #[test]
    fn temperature_relaxes_exponentially() {
        let p = iphone();
        let c = Cell { charge_mah: 1000.0, temp_c: 40.0 };
        let r = Regime { load_mw: 0.0, external_power: false };
        let tau = p.thermal_tau.as_secs_f64();
        let after = c.step(&p, &r, tau);
        let expected = p.ambient_c + (40.0 - p.ambient_c) * (-1.0f64).exp();
        assert!((after.temp_c - expected).abs() < 1e-9);
    }
}
