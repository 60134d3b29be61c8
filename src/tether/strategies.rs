//! The tether strategies of `lab.toml`: none, manual, software, uhubctl.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;

use super::api::{Operator, Tether, TetherError, UntetherMode};
use crate::collect::uhubctl::{self, Block};
use crate::config::{StepWhen, TetherSpec};
use crate::device::Device;
use crate::transport::{CommandSpec, Transport};

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

/// A hub with per-port power switching: `uhubctl -l LOCATION -p PORT -a off|on`,
/// run on the device's host through its transport (the hub is plugged into that host).
pub struct UhubctlTether {
    pub transport: Arc<dyn Transport>,
    pub location: String,
    pub port: u32,
    /// `-r N` with `-a off`: the off request sent N times.
    pub repeat: Option<u32>,
}

impl UhubctlTether {
    pub fn command(&self, action: &str) -> CommandSpec {
        let port = self.port.to_string();
        let mut args = vec!["-l", &self.location, "-p", &port, "-a", action];
        let repeat = self.repeat.map(|r| r.to_string());
        if let (Some(r), "off") = (&repeat, action) {
            args.extend(["-r", r.as_str()]);
        }
        let mut c = CommandSpec::new("uhubctl", &args);
        c.timeout = Duration::from_secs(30);
        c
    }

    async fn switch(&self, device: &dyn Device, action: &str) -> Result<(), TetherError> {
        let cmd = self.command(action);
        let out = self.transport.exec(&cmd).await?;
        if !out.success() {
            return Err(TetherError::Command {
                device: device.name().into(),
                command: cmd.display(),
                detail: format!("exit {:?}: {}", out.status, out.stderr_text().trim()),
            });
        }
        self.check_new_status(device, action, &out.stdout_text())?;
        Ok(device.usb_power_changed(action == "on").await?)
    }

    /// What uhubctl itself says the port is after switching (its `New status for hub`
    /// block): the lab soaks only once the port reads `off`, and goes on only once it
    /// reads `power` again.
    fn check_new_status(&self, device: &dyn Device, action: &str, stdout: &str) -> Result<(), TetherError> {
        let fail = |detail: String| TetherError::Port {
            device: device.name().into(),
            hub: self.location.clone(),
            port: self.port,
            detail,
        };
        let listing = uhubctl::parse(stdout).map_err(|e| {
            fail(format!("`uhubctl -a {action}` printed what does not read as uhubctl 2.x output: {e}"))
        })?;
        let Some(port) = listing
            .hubs
            .iter()
            .rev()
            .find(|h| h.location == self.location && h.block == Block::New)
            .and_then(|h| h.port(self.port))
        else {
            return Err(fail(format!(
                "`uhubctl -a {action}` printed no new status for this port; fix: check `location` and `port` against `uhubctl`'s listing"
            )));
        };
        let want_on = action == "on";
        if port.powered != want_on {
            let said = format!("{:04x} {}", port.status, port.words.join(" "));
            return Err(fail(if want_on {
                format!("still off after `uhubctl -a on` (uhubctl says `{said}`)")
            } else {
                format!(
                    "still has power after `uhubctl -a off` (uhubctl says `{said}`); fix: use a port of a hub that switches ports one by one (`ppps` in `uhubctl`'s listing)"
                )
            }));
        }
        Ok(())
    }
}

#[async_trait]
impl Tether for UhubctlTether {
    fn label(&self) -> String {
        format!("uhubctl {}:{}", self.location, self.port)
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::PowerCut
    }
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        self.switch(device, "off").await?;
        Ok(UntetherMode::PowerCut)
    }
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        self.switch(device, "on").await
    }
}

/// The tether for a device of `lab.toml`.
pub fn for_spec(spec: &TetherSpec, transport: Arc<dyn Transport>, operator: Arc<dyn Operator>) -> Box<dyn Tether> {
    match spec {
        TetherSpec::None => Box::new(NoTether),
        TetherSpec::Software => Box::new(SoftwareTether),
        TetherSpec::Manual => Box::new(ManualTether::new(operator)),
        TetherSpec::Uhubctl { location, port, repeat } => {
            Box::new(UhubctlTether { transport, location: location.clone(), port: *port, repeat: *repeat })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uhubctl_command_is_an_argv_with_the_configured_port() {
        let t = UhubctlTether {
            transport: Arc::new(crate::transport::LocalTransport::new("local")),
            location: "1-1.4".into(),
            port: 3,
            repeat: None,
        };
        let c = t.command("off");
        assert_eq!(c.program, "uhubctl");
        assert_eq!(c.args, ["-l", "1-1.4", "-p", "3", "-a", "off"]);
        let t = UhubctlTether { repeat: Some(10), ..t };
        assert_eq!(t.command("off").args, ["-l", "1-1.4", "-p", "3", "-a", "off", "-r", "10"]);
        assert_eq!(t.command("on").args, ["-l", "1-1.4", "-p", "3", "-a", "on"], "repeats are for off only");
    }
}
