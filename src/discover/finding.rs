//! What `lab discover` found on one host.

use serde::Serialize;

use crate::config::Platform;

/// One host's phones and monitors, or why it could not be looked at.
#[derive(Debug, Clone, Serialize)]
pub struct HostFindings {
    pub host: String,
    /// Set when the host could not be reached: nothing else was looked for.
    pub unreachable: Option<String>,
    pub phones: Vec<FoundPhone>,
    pub monitors: Vec<FoundMonitor>,
    /// What could not be looked at on a reachable host (adb or usbmuxd missing, uhubctl not
    /// installed), each with the fix.
    pub notes: Vec<String>,
}

/// How far a phone is from usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhoneState {
    /// Ready for the lab.
    Ready,
    /// Android: the phone has not accepted this host's adb key.
    Unauthorized,
    /// Android: offline, or adb may not open it (udev), or in bootloader/recovery.
    Offline,
    /// iPhone: usbmuxd has no pair record.
    NotPaired,
    /// iPhone: paired, but it does not trust the host.
    Untrusted,
    /// iPhone: locked with its passcode.
    Locked,
    /// iPhone: Developer Mode is off.
    DeveloperModeOff,
    /// Its identity could not be read (see the problem).
    Unreadable,
}

impl PhoneState {
    pub fn word(self) -> &'static str {
        match self {
            PhoneState::Ready => "ready",
            PhoneState::Unauthorized => "unauthorized",
            PhoneState::Offline => "offline",
            PhoneState::NotPaired => "not paired",
            PhoneState::Untrusted => "not trusted",
            PhoneState::Locked => "locked",
            PhoneState::DeveloperModeOff => "developer mode off",
            PhoneState::Unreadable => "unreadable",
        }
    }
}

/// Where on a hub a phone is, as `uhubctl -f` lists it (found by USB serial).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HubPlace {
    /// On a port of a hub that switches each port's power: `tether = { uhubctl = … }`.
    /// `auto`: found by the id the lab file names (adb's serial, the UDID), so
    /// `{ uhubctl = "auto" }` finds it at each run; otherwise (Wi-Fi adb, where only
    /// `ro.serialno` is on the hub) the port is written out.
    Switching { location: String, port: u32, auto: bool },
    /// On a hub that cannot switch this port alone: `tether = "manual"`.
    NotSwitching { location: String, port: u32, why: String },
    /// Not on any hub uhubctl lists (or the hubs could not be read).
    Unknown { why: String },
}

/// One phone.
#[derive(Debug, Clone, Serialize)]
pub struct FoundPhone {
    pub host: String,
    pub platform: Platform,
    /// adb's serial (`[device.android] serial`) or the UDID (`[device.ios] udid`).
    pub id: String,
    /// The serial the phone shows on USB when it differs from `id` (Wi-Fi adb: `ro.serialno`).
    pub usb_serial: Option<String>,
    pub model: Option<String>,
    /// `Android 14 (SDK 34)`, `iOS 17.4.1 (21E236)`.
    pub os: Option<String>,
    /// The OS as the lab file writes it (`Android 14`, `iOS 17.4.1`).
    pub os_short: Option<String>,
    /// What the phone calls itself (iPhone) or its manufacturer (Android).
    pub label: Option<String>,
    pub state: PhoneState,
    pub hub: HubPlace,
    /// The lab's name for it, when `lab.toml` has it already.
    pub in_lab: Option<String>,
    /// What keeps it from the lab, each with the fix.
    pub problems: Vec<String>,
}

impl FoundPhone {
    /// Its identity was read: a lab-file block can be written for it.
    pub fn describable(&self) -> bool {
        self.model.is_some() && self.os_short.is_some()
    }
}

/// A power monitor answering on a host.
#[derive(Debug, Clone, Serialize)]
pub struct FoundMonitor {
    pub host: String,
    /// `otii` or `monsoon`.
    pub kind: String,
    /// `127.0.0.1:1905` for an Otii server, the USB serial of a Monsoon.
    pub address: String,
    /// What it said it is (an Otii's devices, a Monsoon's product).
    pub detail: String,
    /// The lab's `[[monitor]]` at that address, if any.
    pub in_lab: Option<String>,
    pub problems: Vec<String>,
}
