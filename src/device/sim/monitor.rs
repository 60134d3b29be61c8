//! `SimMonitor`: the simulator's power monitor. It samples what the simulated phone it
//! supplies draws under the simulator's physical model (docs/sim.md), plus what a real
//! phone adds that the model does not: the OS's own wake-ups (a sync, a radio burst) at
//! random moments, and each sample's noise. Time is the phone's virtual clock.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rand::RngExt;
use rand_distr::StandardNormal;
use serde_json::{Value, json};

use super::state::SimState;
use crate::clock::Clock;
use crate::collect::monitor::{PowerTrace, Voltage};
use crate::config::MonitorSpec;
use crate::monitor::{MonitorError, PowerMonitor};

/// The OS's own wake-ups while a recording runs: one every `WAKE_EVERY_S` on average
/// (a Poisson process), each drawing `WAKE_MW` more for `WAKE_S`. A short idle window
/// sees none or one or two, so its mean power varies a lot from trial to trial, as a real
/// phone's does.
pub const WAKE_MW: f64 = 600.0;
const WAKE_S: f64 = 2.0;
const WAKE_EVERY_S: f64 = 30.0;
/// The relative sd of one sample around what the phone draws.
const SAMPLE_SD: f64 = 0.03;

pub struct SimMonitor {
    spec: MonitorSpec,
    /// The phone's own seed: recordings differ by their number.
    seed: u64,
    state: Arc<Mutex<SimState>>,
    clock: Clock,
    recordings: u64,
    /// When the running recording started, device time.
    started: Option<Duration>,
}

impl SimMonitor {
    pub fn new(spec: MonitorSpec, seed: u64, state: Arc<Mutex<SimState>>, clock: Clock) -> SimMonitor {
        SimMonitor { spec, seed, state, clock, recordings: 0, started: None }
    }

    fn not_recording(&self) -> MonitorError {
        MonitorError::Failed { monitor: self.spec.name.clone(), detail: "no recording is running".into() }
    }
}

#[async_trait]
impl PowerMonitor for SimMonitor {
    fn identity(&self) -> Value {
        json!({"model": "simulated monitor", "serial": self.spec.name,
               "firmware": env!("CARGO_PKG_VERSION"), "sample_rate_hz": self.spec.sample_rate_hz})
    }

    fn label(&self) -> String {
        format!("{} (simulated monitor)", self.spec.name)
    }

    async fn start(&mut self) -> Result<(), MonitorError> {
        let now = self.clock.now();
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.advance(now);
        st.start_draw();
        self.started = Some(now);
        self.recordings += 1;
        Ok(())
    }

    async fn mark(&mut self, _text: &str) -> Result<f64, MonitorError> {
        let started = self.started.ok_or_else(|| self.not_recording())?;
        Ok((self.clock.now() - started).as_secs_f64())
    }

    async fn stop(&mut self) -> Result<PowerTrace, MonitorError> {
        let started = self.started.take().ok_or_else(|| self.not_recording())?;
        let now = self.clock.now();
        let draw = {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.advance(now);
            st.take_draw()
        };
        let rate = f64::from(self.spec.sample_rate_hz);
        let n = ((now - started).as_secs_f64() * rate).floor() as usize;
        let mut rng = crate::seed::rng(self.seed, &["sim-monitor", &self.spec.name, &self.recordings.to_string()]);
        let length = (now - started).as_secs_f64();
        let mut wakes = Vec::new();
        let mut at = 0.0;
        loop {
            let u: f64 = rng.random();
            at += -WAKE_EVERY_S * (1.0 - u).ln();
            if at >= length {
                break;
            }
            wakes.push(at);
        }
        let volts = self.spec.voltage_v;
        let mut wake = 0;
        let mut current = Vec::with_capacity(n);
        let mut seg = 0;
        for i in 0..n {
            let t = started + Duration::from_secs_f64(i as f64 / rate);
            while seg + 1 < draw.len() && draw[seg + 1].0 <= t {
                seg += 1;
            }
            let since = i as f64 / rate;
            while wake < wakes.len() && wakes[wake] + WAKE_S <= since {
                wake += 1;
            }
            let woken = wakes[wake..].iter().take_while(|&&w| w <= since).count() as f64;
            let mw = draw.get(seg).map_or(0.0, |d| d.1) + woken * WAKE_MW;
            let noise: f64 = rng.sample(StandardNormal);
            current.push((mw * (1.0 + SAMPLE_SD * noise) / volts / 1000.0).max(0.0) as f32);
        }
        Ok(PowerTrace {
            rate_hz: rate,
            t0_s: 0.0,
            current_a: current,
            voltage: Voltage::Constant(volts),
            gaps: Vec::new(),
            unaligned: None,
        })
    }

    async fn close(self: Box<Self>) -> Result<(), MonitorError> {
        Ok(())
    }
}
