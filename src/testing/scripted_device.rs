//! `ScriptedDevice`: a phone whose every call behaves as a test scripts it.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use crate::clock::Clock;
use crate::config::{Build, DeviceSpec, VariantConfig};
use crate::device::{
    AppHandle, Collected, DesiredState, Device, DeviceError, Identity, LaunchSpec, PrepareOutcome, Prepared,
    Provenance, Reading, SoakEvidence, StateSnapshot,
};
use crate::measure::{Measurement, UntetherMode};

/// The device calls a script can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    Identify,
    Prepare,
    State,
    SetState,
    ResetCounters,
    Launch,
    Collect,
    Stop,
    WaitConnected,
}

/// What one call does.
#[derive(Debug, Clone, PartialEq)]
pub enum Behaviour {
    /// What the fake phone does by itself.
    Normal,
    /// Fails with `DeviceError::Failed` and this detail.
    Fail(String),
    /// `DeviceError::Disconnected`.
    Disconnect,
    /// Never returns.
    Hang,
    /// Returns normally after this long (tokio time).
    Delay(Duration),
    /// Panics (a backend bug).
    Panic,
}

struct Inner {
    script: BTreeMap<Call, VecDeque<Behaviour>>,
    calls: Vec<String>,
    state: StateSnapshot,
    /// USB power as the lab last switched it.
    usb_powered: bool,
    /// It keeps charging with its port "off" (a hub that does not really cut VBUS).
    charges_when_cut: bool,
    /// It drops off while its port is off (USB only, no Wi-Fi debugging).
    unreachable_when_cut: bool,
    /// Once its port was cut it never answers again.
    stays_lost: bool,
    lost: bool,
    /// What its software unplug gives.
    software_mode: UntetherMode,
    foreground: Option<String>,
    running: Option<(AppHandle, Duration)>,
    launches: u32,
}

/// A phone that needs no hardware and whose each call can be scripted: queue behaviours
/// per [`Call`] with [`ScriptedDevice::script`] (an empty queue behaves normally). By
/// itself it is a healthy phone on tokio time: battery 80 %, 30 °C, brightness 50 %,
/// radios on; charging while its USB port has power; its app in the foreground while
/// it runs. Every call is recorded by name (`prepare`, `usb_power:off`, …).
pub struct ScriptedDevice {
    spec: DeviceSpec,
    clock: Clock,
    inner: Mutex<Inner>,
}

impl ScriptedDevice {
    pub fn new(spec: DeviceSpec) -> Self {
        let state = StateSnapshot {
            brightness_pct: Reading::read(50.0),
            bluetooth_on: Reading::read(true),
            wifi_on: Reading::read(true),
            battery_pct: Reading::read(80.0),
            battery_temp_c: Reading::read(30.0),
            thermal_status: Reading::read(0),
            ..StateSnapshot::default()
        };
        ScriptedDevice {
            spec,
            clock: Clock::tokio(),
            inner: Mutex::new(Inner {
                script: BTreeMap::new(),
                calls: Vec::new(),
                state,
                usb_powered: true,
                charges_when_cut: false,
                unreachable_when_cut: false,
                stays_lost: false,
                software_mode: UntetherMode::SoftUntethered,
                lost: false,
                foreground: None,
                running: None,
                launches: 0,
            }),
        }
    }

    /// The next calls of `call` behave as `behaviours`, in turn; later ones normally.
    pub fn script(self, call: Call, behaviours: impl IntoIterator<Item = Behaviour>) -> Self {
        self.lock().script.entry(call).or_default().extend(behaviours);
        self
    }

    /// Its brightness cannot be read (as on an iPhone).
    pub fn without_brightness(self) -> Self {
        self.lock().state.brightness_pct = Reading::Unknown;
        self
    }

    /// It keeps charging after its port is switched off.
    pub fn charges_when_cut(self) -> Self {
        self.lock().charges_when_cut = true;
        self
    }

    /// Its software unplug suspends charging (as `power.battery_input.suspended` does)
    /// instead of only saying it is unplugged.
    pub fn suspends_charging(self) -> Self {
        self.lock().software_mode = UntetherMode::ChargingSuspended;
        self
    }

    /// It cannot be reached while its port is off.
    pub fn unreachable_when_cut(self) -> Self {
        self.lock().unreachable_when_cut = true;
        self
    }

    /// Once its port is cut it never shows up again (not even when the port is back on).
    pub fn stays_lost(self) -> Self {
        self.lock().stays_lost = true;
        self
    }

    /// Another app is in the foreground whatever runs.
    pub fn foreground(self, app: &str) -> Self {
        self.lock().foreground = Some(app.into());
        self
    }

    /// Changes the state it reports (battery, temperature, radios).
    pub fn with_state(self, f: impl FnOnce(&mut StateSnapshot)) -> Self {
        f(&mut self.lock().state);
        self
    }

    /// The calls so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    pub fn usb_powered(&self) -> bool {
        self.lock().usb_powered
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `name`, then does what the script says for `call`: `Ok(())` means go on normally.
    async fn enter(&self, call: Call, name: &str) -> Result<(), DeviceError> {
        let behaviour = {
            let mut inner = self.lock();
            inner.calls.push(name.to_string());
            let next = inner.script.get_mut(&call).and_then(VecDeque::pop_front).unwrap_or(Behaviour::Normal);
            let cut_off =
                (inner.lost || !inner.usb_powered && inner.unreachable_when_cut) && call != Call::WaitConnected;
            if cut_off { Behaviour::Disconnect } else { next }
        };
        match behaviour {
            Behaviour::Normal => Ok(()),
            Behaviour::Fail(detail) => {
                Err(DeviceError::Failed { device: self.spec.name.clone(), what: name.into(), detail })
            }
            Behaviour::Disconnect => Err(DeviceError::Disconnected {
                device: self.spec.name.clone(),
                detail: format!("scripted: {name} found no device"),
            }),
            Behaviour::Hang => std::future::pending().await,
            Behaviour::Delay(d) => {
                tokio::time::sleep(d).await;
                Ok(())
            }
            Behaviour::Panic => panic!("scripted device {}: {name} panicked", self.spec.name),
        }
    }
}

#[async_trait]
impl Device for ScriptedDevice {
    fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    async fn identify(&self) -> Result<Identity, DeviceError> {
        self.enter(Call::Identify, "identify").await?;
        Ok(Identity {
            name: self.spec.name.clone(),
            model: self.spec.model.clone(),
            os: self.spec.os.clone(),
            serial: format!("scripted-{}", self.spec.name),
        })
    }

    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError> {
        self.enter(Call::Prepare, "prepare").await?;
        let sha256 = crate::seed::sha256_hex(build.name.as_bytes());
        Ok(Prepared::new(build, config, PrepareOutcome::AlreadyInstalled { sha256 }))
    }

    async fn state(&self) -> Result<StateSnapshot, DeviceError> {
        self.enter(Call::State, "state").await?;
        let inner = self.lock();
        let mut s = inner.state.clone();
        let charging = inner.usb_powered || inner.charges_when_cut;
        s.charging = Reading::read(charging);
        s.external_power = Reading::read(charging);
        let app = inner.running.as_ref().map(|(a, _)| a.app_id.clone());
        let fg = inner.foreground.clone().or(app).unwrap_or_else(|| "home screen".into());
        s.foreground_app = Reading::Known { value: fg, from: Provenance::Read };
        Ok(s)
    }

    async fn set_state(&self, want: &DesiredState) -> Result<(), DeviceError> {
        self.enter(Call::SetState, "set_state").await?;
        let mut inner = self.lock();
        if let Some(b) = want.brightness_pct {
            inner.state.brightness_pct = Reading::Known { value: b, from: Provenance::Set };
        }
        if let Some(on) = want.bluetooth_on {
            inner.state.bluetooth_on = Reading::Known { value: on, from: Provenance::Set };
        }
        if let Some(on) = want.wifi_on {
            inner.state.wifi_on = Reading::Known { value: on, from: Provenance::Set };
        }
        Ok(())
    }

    async fn reset_counters(&self) -> Result<(), DeviceError> {
        self.enter(Call::ResetCounters, "reset_counters").await
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        self.enter(Call::Launch, "launch").await?;
        let mut inner = self.lock();
        inner.launches += 1;
        let app = AppHandle {
            id: format!("run-{}", inner.launches),
            app_id: format!("com.example.{}", spec.prepared.build.name),
            launched_at: self.clock.now(),
        };
        inner.running = Some((app.clone(), self.clock.now()));
        Ok(app)
    }

    async fn usb_power_changed(&self, on: bool) -> Result<(), DeviceError> {
        let mut inner = self.lock();
        inner.calls.push(format!("usb_power:{}", if on { "on" } else { "off" }));
        inner.usb_powered = on;
        inner.lost |= !on && inner.stays_lost;
        Ok(())
    }

    async fn software_untether(&self) -> Result<UntetherMode, DeviceError> {
        self.usb_power_changed(false).await?;
        Ok(self.lock().software_mode)
    }

    async fn software_retether(&self) -> Result<(), DeviceError> {
        self.usb_power_changed(true).await
    }

    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError> {
        self.enter(Call::WaitConnected, "wait_connected").await?;
        let gone = {
            let inner = self.lock();
            inner.lost || !inner.usb_powered && inner.unreachable_when_cut
        };
        if gone {
            tokio::time::sleep(timeout).await;
            return Err(DeviceError::Disconnected {
                device: self.spec.name.clone(),
                detail: "scripted: still off USB".into(),
            });
        }
        Ok(())
    }

    /// One `cpu_pct` measurement; the soak's length from its own clock; charging for the
    /// whole window if its port did not really cut power.
    async fn collect(&self, app: &AppHandle, _dir: &Path) -> Result<Collected, DeviceError> {
        self.enter(Call::Collect, "collect").await?;
        let inner = self.lock();
        let Some((running, since)) = inner.running.as_ref().filter(|(a, _)| a.id == app.id) else {
            return Err(DeviceError::Failed {
                device: self.spec.name.clone(),
                what: "collect".into(),
                detail: format!("app {} is not running", app.id),
            });
        };
        let window = self.clock.now().saturating_sub(*since);
        Ok(Collected {
            measurements: vec![Measurement::new("cpu_pct", 10.0, "%", "scripted")],
            series: Vec::new(),
            artifacts: Vec::new(),
            evidence: SoakEvidence {
                charging_s: if inner.charges_when_cut { window.as_secs_f64() } else { 0.0 },
                measured_duration: Some(window),
                app_died: running.id != app.id,
                ..SoakEvidence::default()
            },
            soak_state: None,
        })
    }

    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError> {
        self.enter(Call::Stop, "stop").await?;
        let mut inner = self.lock();
        if inner.running.as_ref().is_some_and(|(a, _)| a.id == app.id) {
            inner.running = None;
        }
        Ok(())
    }
}
