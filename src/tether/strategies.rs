//! The tether strategies of `lab.toml`: none, manual, software, uhubctl, monitor.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;

use super::api::{Operator, Tether, TetherError};
use super::uhubctl::UhubctlTether;
use crate::config::{StepWhen, TetherSpec};
use crate::device::Device;
use crate::measure::UntetherMode;
use crate::monitor::SharedMonitor;
use crate::transport::Transport;

use super::monitor_tether::MonitorTether;

pub struct NoTether;

#[async_trait]
impl Tether for NoTether {
    fn label(&self) -> String {
        "none".into()
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::None
    }
    async fn untether(&self, _device: &dyn Device) -> Result<UntetherMode, TetherError> {
        Ok(UntetherMode::None)
    }
    async fn retether(&self, _device: &dyn Device) -> Result<(), TetherError> {
        Ok(())
    }
}

/// The device unplugs itself (Android `dumpsys battery unplug`, the simulator).
pub struct SoftwareTether;

#[async_trait]
impl Tether for SoftwareTether {
    fn label(&self) -> String {
        "software".into()
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::SoftUntethered
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        Ok(device.software_untether().await?)
    }
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        Ok(device.software_retether().await?)
    }
}

/// A person unplugs the cable and plugs it back, each step confirmed through the operator
/// desk (the terminal or `lab confirm`).
pub struct ManualTether {
    pub operator: Arc<dyn Operator>,
    /// The unplug was confirmed and the plug-in not yet: only then is there a cable to
    /// plug back (a re-tether after an unanswered unplug asks nothing).
    unplugged: std::sync::atomic::AtomicBool,
}

impl ManualTether {
    pub fn new(operator: Arc<dyn Operator>) -> Self {
        ManualTether { operator, unplugged: Default::default() }
    }
}

/// The manual tether's step names (`lab confirm --step`).
pub const UNPLUG_STEP: &str = "unplug";
pub const PLUG_IN_STEP: &str = "plug-in";

#[async_trait]
impl Tether for ManualTether {
    fn label(&self) -> String {
        "manual".into()
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::PowerCut
    }
    fn needs_operator(&self) -> bool {
        true
    }
    fn cut_question(&self) -> String {
        "was the USB cable really unplugged?".into()
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        self.operator.confirm(device.name(), UNPLUG_STEP, StepWhen::Untether, "unplug the USB cable").await?;
        self.unplugged.store(true, Ordering::SeqCst);
        device.usb_power_changed(false).await?;
        Ok(UntetherMode::PowerCut)
    }
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        if !self.unplugged.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.operator.confirm(device.name(), PLUG_IN_STEP, StepWhen::Retether, "plug the USB cable back in").await?;
        self.unplugged.store(false, Ordering::SeqCst);
        Ok(device.usb_power_changed(true).await?)
    }
}

/// The tether for a device of `lab.toml`.
pub fn for_spec(
    spec: &TetherSpec,
    transport: Arc<dyn Transport>,
    operator: Arc<dyn Operator>,
    monitor: Option<SharedMonitor>,
) -> Box<dyn Tether> {
    match spec {
        // The config refuses `tether = "monitor"` on a device without a monitor; without
        // one here, the monitor tether refuses to untether (its slot stays empty).
        TetherSpec::Monitor => Box::new(MonitorTether::new(monitor.unwrap_or_default())),
        TetherSpec::None => Box::new(NoTether),
        TetherSpec::Software => Box::new(SoftwareTether),
        TetherSpec::Manual => Box::new(ManualTether::new(operator)),
        TetherSpec::Uhubctl { location, port, repeat } => {
            Box::new(UhubctlTether::new(transport, location, *port, *repeat))
        }
        TetherSpec::UhubctlAuto => Box::new(UnresolvedHub),
    }
}

/// `{ uhubctl = "auto" }` not yet resolved to a port (`hubs::resolve_auto` does that at
/// the start of `lab run`): refuses to untether rather than soak on a charger.
pub struct UnresolvedHub;

#[async_trait]
impl Tether for UnresolvedHub {
    fn label(&self) -> String {
        "uhubctl auto".into()
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::PowerCut
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        Err(TetherError::Command {
            device: device.name().into(),
            command: "uhubctl".into(),
            detail: "`uhubctl = \"auto\"` was not resolved to a hub port; fix: see `lab hubs`".into(),
        })
    }
    async fn retether(&self, _device: &dyn Device) -> Result<(), TetherError> {
        Ok(())
    }
}

/// An operator that is not there (no terminal): manual steps fail with a clear error.
pub struct AbsentOperator {
    pub why: String,
}

#[async_trait]
impl Operator for AbsentOperator {
    async fn confirm(&self, device: &str, _step: &str, _when: StepWhen, instruction: &str) -> Result<(), TetherError> {
        Err(TetherError::NoOperator {
            device: device.into(),
            instruction: instruction.into(),
            detail: self.why.clone(),
        })
    }
}
