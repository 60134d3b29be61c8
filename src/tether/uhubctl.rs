//! The uhubctl tether: a hub port switched off for the soak and on after it, on the
//! device's host, with the phone seen leaving the bus and coming back (docs/platforms.md,
//! "Tethering").

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use super::api::{Tether, TetherError};
use super::hubs::usb_serials;
use crate::collect::hubs::uhubctl::{self, Listing, Port};
use crate::device::Device;
use crate::measure::UntetherMode;
use crate::transport::{CommandSpec, Transport};

/// How the tether waits for the phone to leave the bus after `-a off` and to come back
/// after `-a on`: one `uhubctl -l LOC -p N` every `poll`, on the device's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusWait {
    pub poll: Duration,
    /// A USB 2 port drops its device at once; the status may lag a little.
    pub leave: Duration,
    /// A phone re-enumerates in a few seconds (an iPhone may take ten); both limits
    /// together stay under `timeouts.tether` (120 s by default), so this error comes first.
    pub back: Duration,
}

impl Default for BusWait {
    fn default() -> Self {
        BusWait { poll: Duration::from_secs(1), leave: Duration::from_secs(30), back: Duration::from_secs(60) }
    }
}

/// A hub with per-port power switching: `uhubctl -l LOCATION -p PORT -a off|on`,
/// run on the device's host through its transport (the hub is plugged into that host).
/// Without `-e`, uhubctl switches both halves of a USB 3 hub together.
pub struct UhubctlTether {
    pub transport: Arc<dyn Transport>,
    pub location: String,
    pub port: u32,
    /// `-r N` with `-a off`: the off request sent N times.
    pub repeat: Option<u32>,
    pub wait: BusWait,
    /// How the phone was seen on the port when it was last cut: only then is its return
    /// waited for (a retether that follows a refused cut does not wait for nobody).
    was_there: Mutex<Option<Seen>>,
}

/// What the connector (port N of the hub and of its USB 3 half) has on the bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnPort {
    /// The phone, known by its serial (or, serial unknown, a device uhubctl describes).
    Phone,
    /// A device uhubctl could not name: still enumerating (`connect []`), or strings it
    /// could not read (`[18d1:4ee7]`, a device node without permission).
    Unnamed,
    /// Another device.
    Other,
    Nothing,
}

/// How the phone is known on the port, so that its return is waited for the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// By its USB serial.
    BySerial,
    /// As whatever device uhubctl lists there (no serial known, or none readable).
    AnyDevice,
}

impl UhubctlTether {
    pub fn new(transport: Arc<dyn Transport>, location: &str, port: u32, repeat: Option<u32>) -> Self {
        UhubctlTether {
            transport,
            location: location.into(),
            port,
            repeat,
            wait: BusWait::default(),
            was_there: Mutex::new(None),
        }
    }

    /// `uhubctl -l LOC -p N -a ACTION [-r N]` (repeats for `off` only).
    pub fn command(&self, action: &str) -> CommandSpec {
        self.uhubctl(Some(action))
    }

    /// `uhubctl -l LOC -p N`: the port's listing (both halves of a USB 3 hub).
    pub fn list_command(&self) -> CommandSpec {
        self.uhubctl(None)
    }

    fn uhubctl(&self, action: Option<&str>) -> CommandSpec {
        let port = self.port.to_string();
        let mut args = vec!["-l", &self.location, "-p", &port];
        let repeat = self.repeat.map(|r| r.to_string());
        if let Some(a) = action {
            args.extend(["-a", a]);
        }
        if let (Some(r), Some("off")) = (&repeat, action) {
            args.extend(["-r", r.as_str()]);
        }
        let mut c = CommandSpec::new("uhubctl", &args);
        c.timeout = Duration::from_secs(30);
        c
    }

    fn fail(&self, device: &dyn Device, detail: String) -> TetherError {
        TetherError::Port { device: device.name().into(), hub: self.location.clone(), port: self.port, detail }
    }

    /// Runs uhubctl and reads what it printed.
    async fn run(&self, device: &dyn Device, action: Option<&str>) -> Result<Listing, TetherError> {
        let cmd = self.uhubctl(action);
        let out = self.transport.exec(&cmd).await?;
        if !out.success() {
            return Err(TetherError::Command {
                device: device.name().into(),
                command: cmd.display(),
                detail: format!("exit {:?}: {}", out.status, out.stderr_text().trim()),
            });
        }
        uhubctl::parse(&out.stdout_text()).map_err(|e| {
            self.fail(device, format!("`{}` printed what does not read as uhubctl 2.x output: {e}", cmd.display()))
        })
    }

    async fn switch(&self, device: &dyn Device, action: &str) -> Result<(), TetherError> {
        let listing = self.run(device, Some(action)).await?;
        self.check_new_status(device, action, &listing)?;
        Ok(device.usb_power_changed(action == "on").await?)
    }

    /// What uhubctl itself says the port is after switching (its `New status for hub`
    /// block): the lab soaks only once the port reads `off`, and goes on only once it
    /// reads `power` again.
    fn check_new_status(&self, device: &dyn Device, action: &str, listing: &Listing) -> Result<(), TetherError> {
        let Some(port) = listing.after_switch(&self.location, self.port) else {
            return Err(self.fail(device, format!(
                "`uhubctl -a {action}` printed no new status for this port; fix: check `location` and `port` against `uhubctl`'s listing"
            )));
        };
        let want_on = action == "on";
        if port.powered != want_on {
            let said = said(port);
            return Err(self.fail(
                device,
                if want_on {
                    format!("still off after `uhubctl -a on` (uhubctl says `{said}`)")
                } else {
                    format!(
                        "still has power after `uhubctl -a off` (uhubctl says `{said}`); fix: use a port of a hub that switches ports one by one (`ppps` in `uhubctl`'s listing)"
                    )
                },
            ));
        }
        Ok(())
    }

    /// What is on the connector, by the phone's USB serials (`serials` empty: unknown).
    fn on_port(listing: &Listing, port: u32, serials: &[String]) -> OnPort {
        let ports = listing.connector(port);
        let phone = |p: &Port| match &p.device {
            Some(d) => serials.is_empty() || serials.iter().any(|s| d.has_serial(s)),
            None => false,
        };
        let unnamed = |p: &Port| p.device.as_ref().is_none_or(|d| d.name.is_empty());
        if ports.iter().any(|(_, p)| p.connected && phone(p)) {
            OnPort::Phone
        } else if ports.iter().any(|(_, p)| p.connected && unnamed(p)) {
            OnPort::Unnamed
        } else if ports.iter().any(|(_, p)| p.connected) {
            OnPort::Other
        } else {
            OnPort::Nothing
        }
    }

    /// The connector's lines as uhubctl printed them, for messages.
    fn listed(&self, listing: &Listing) -> String {
        let ports: Vec<String> =
            listing.connector(self.port).iter().map(|(h, p)| format!("{}: `{}`", h.location, said(p))).collect();
        if ports.is_empty() { "nothing for this port".into() } else { ports.join(", ") }
    }

    /// Before the cut: the phone must be on this port (where its serial is known), or the
    /// cut would untether another phone, or none. A device uhubctl cannot name is taken
    /// for it (its return is then waited for as any device's).
    async fn check_phone_is_here(&self, device: &dyn Device) -> Result<Option<Seen>, TetherError> {
        let serials = usb_serials(device.spec());
        let listing = self.run(device, None).await?;
        let here = Self::on_port(&listing, self.port, &serials);
        match (here, serials.first()) {
            (OnPort::Phone, Some(_)) => Ok(Some(Seen::BySerial)),
            (OnPort::Phone | OnPort::Unnamed | OnPort::Other, None) | (OnPort::Unnamed, Some(_)) => {
                Ok(Some(Seen::AnyDevice))
            }
            (OnPort::Nothing, None) => Ok(None),
            (_, Some(serial)) if listing.connector(self.port).iter().all(|(_, p)| !p.powered) => Err(self.fail(
                device,
                format!(
                    "the port is off before the cut, so USB serial {serial} is not seen on it (uhubctl lists {}); fix: `uhubctl -l {} -p {} -a on`, then `lab hubs`",
                    self.listed(&listing),
                    self.location,
                    self.port
                ),
            )),
            (_, Some(serial)) => Err(self.fail(
                device,
                format!(
                    "USB serial {serial} is not on this port (uhubctl lists {}): cutting it would not untether the phone; fix: `lab hubs` shows where it is (or use `uhubctl = \"auto\"`)",
                    self.listed(&listing)
                ),
            )),
        }
    }

    /// After `-a off`: polls the port until nothing is on it. A port that reads `off` with
    /// the phone still connected is a hub that did not cut; one that reads `power` again
    /// was switched back on (the kernel, on Linux before 6.0).
    async fn wait_left(&self, device: &dyn Device) -> Result<(), TetherError> {
        let clock = device.clock();
        let start = clock.now();
        loop {
            let listing = self.run(device, None).await?;
            let ports = listing.connector(self.port);
            if ports.iter().any(|(_, p)| p.powered) {
                return Err(self.fail(device, format!(
                    "has power again after `uhubctl -a off` (uhubctl lists {}); fix: `repeat = 10` in the tether, for a kernel that powers ports back on",
                    self.listed(&listing)
                )));
            }
            if Self::on_port(&listing, self.port, &[]) == OnPort::Nothing {
                return Ok(());
            }
            if clock.now() - start >= self.wait.leave {
                return Err(self.fail(device, format!(
                    "reads off but the phone is still on the bus {} s after `uhubctl -a off` (uhubctl lists {}): this hub does not cut the port; fix: use a hub that really switches per port (`lab hubs`, `ppps`)",
                    self.wait.leave.as_secs(),
                    self.listed(&listing)
                )));
            }
            clock.sleep(self.wait.poll).await;
        }
    }

    /// After `-a on`: polls the port until the phone is back on it, known as it was
    /// before the cut (`connect []`, still enumerating, does not count).
    async fn wait_back(&self, device: &dyn Device, seen: Seen) -> Result<(), TetherError> {
        let serials = if seen == Seen::BySerial { usb_serials(device.spec()) } else { Vec::new() };
        let clock = device.clock();
        let start = clock.now();
        loop {
            let listing = self.run(device, None).await?;
            if Self::on_port(&listing, self.port, &serials) == OnPort::Phone {
                return Ok(());
            }
            if listing.connector(self.port).iter().all(|(_, p)| !p.powered) {
                return Err(self.fail(
                    device,
                    format!("is off again after `uhubctl -a on` (uhubctl lists {})", self.listed(&listing)),
                ));
            }
            if clock.now() - start >= self.wait.back {
                let who = serials.first().map_or("the phone".to_string(), |s| format!("USB serial {s}"));
                return Err(self.fail(device, format!(
                    "{who} is not back on the bus {} s after `uhubctl -a on` (uhubctl lists {}); fix: check the phone and its cable (`lab hubs`)",
                    self.wait.back.as_secs(),
                    self.listed(&listing)
                )));
            }
            clock.sleep(self.wait.poll).await;
        }
    }

    fn set_was_there(&self, here: Option<Seen>) {
        *self.was_there.lock().unwrap_or_else(PoisonError::into_inner) = here;
    }

    fn was_there(&self) -> Option<Seen> {
        *self.was_there.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A port's status as uhubctl printed it (`0503 power highspeed enable connect`).
fn said(p: &Port) -> String {
    format!("{:04x} {}", p.status, p.words.join(" "))
}

#[async_trait]
impl Tether for UhubctlTether {
    fn label(&self) -> String {
        format!("uhubctl {}:{}", self.location, self.port)
    }
    fn mode(&self) -> UntetherMode {
        UntetherMode::PowerCut
    }
    fn cut_question(&self) -> String {
        format!("does hub {} port {} really cut VBUS?", self.location, self.port)
    }
    /// list (is the phone here?) → off (New status `off`) → list until it has left.
    async fn untether(&self, device: &dyn Device) -> Result<UntetherMode, TetherError> {
        self.set_was_there(None);
        let here = self.check_phone_is_here(device).await?;
        self.set_was_there(here);
        self.switch(device, "off").await?;
        if here.is_some() {
            self.wait_left(device).await?;
        }
        Ok(UntetherMode::PowerCut)
    }
    /// on (New status `power`) → list until the phone is back, if it was there.
    async fn retether(&self, device: &dyn Device) -> Result<(), TetherError> {
        self.switch(device, "on").await?;
        if let Some(seen) = self.was_there() {
            self.wait_back(device, seen).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "uhubctl_tests.rs"]
mod tests;
