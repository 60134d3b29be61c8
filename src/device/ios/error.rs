//! What can keep the lab from an iPhone, each with the one thing that fixes it.
//!
//! The `idevice` crate reports what the phone or usbmuxd said; [`IosError::from_idevice`]
//! turns that into the lab's words, naming the phone, its host and the fix.

use idevice::IdeviceError;
use idevice::usbmuxd::errors::UsbmuxdError;

use crate::device::DeviceError;

/// Where a phone is reached: named in every message.
#[derive(Debug, Clone)]
pub struct Where {
    pub device: String,
    pub udid: String,
    pub host: String,
    /// usbmuxd's address as the phone's host sees it.
    pub usbmuxd: String,
}

#[derive(Debug, thiserror::Error)]
pub enum IosError {
    #[error(
        "usbmuxd does not answer at {} on host {} ({detail}); fix: start it there (`sudo systemctl start usbmuxd`, \
         or `sudo usbmuxd -f -U root` in a terminal) or point `[device.ios] usbmuxd` at the right socket",
        .at.usbmuxd, .at.host
    )]
    NoUsbmuxd { at: Where, detail: String },
    #[error(
        "usbmuxd at {} on host {} lists {listed}, not iPhone {}; fix: plug it in with a data cable, unlock it, \
         and check that `idevice_id -l` on {} shows it",
        .at.usbmuxd, .at.host, .at.udid, .at.host
    )]
    NotConnected { at: Where, listed: String },
    #[error(
        "iPhone {} is not paired with host {}: usbmuxd has no pair record for it; fix: unlock the phone, run \
         `idevicepair pair -u {}` on {} and tap Trust (or set `[device.ios] pair_record` to a copy of the record)",
        .at.udid, .at.host, .at.udid, .at.host
    )]
    NotPaired { at: Where },
    #[error("iPhone {}: pair record {path} is unusable ({detail}); fix: copy `/var/lib/lockdown/{}.plist` from the host the phone was paired with", .at.udid, .at.udid)]
    BadPairRecord { at: Where, path: String, detail: String },
    #[error(
        "iPhone {} does not trust host {} (lockdown says InvalidHostID: its pairing was reset or made elsewhere); \
         fix: run `idevicepair unpair -u {}` and `idevicepair pair -u {}` on {} and tap Trust on the phone",
        .at.udid, .at.host, .at.udid, .at.udid, .at.host
    )]
    Untrusted { at: Where },
    #[error(
        "iPhone {} is locked ({said}); fix: unlock it with its passcode and keep it unlocked while it is tethered \
         (Settings > Display & Brightness > Auto-Lock > Never for lab phones)",
        .at.udid
    )]
    Locked { at: Where, said: String },
    #[error(
        "iPhone {} has Developer Mode off; fix: on the phone, Settings > Privacy & Security > Developer Mode > On, \
         restart it and confirm (the switch appears once Xcode or `idevicedevmodectl reveal` has seen the phone)",
        .at.udid
    )]
    DeveloperModeOff { at: Where },
    #[error(
        "iPhone {} (iOS {version}) has no developer disk image mounted, so apps cannot be launched with a \
         trial's settings; fix: mount it (`ideviceimagemounter` with the DeveloperDiskImage of iOS {version}, \
         or attach the phone to a Mac with Xcode once)",
        .at.udid
    )]
    ImageNotMounted { at: Where, version: String },
    #[error(
        "iPhone {} (iOS {version}) offers no CoreDevice tunnel ({detail}), which iOS 17 and later need to launch \
         apps; fix: turn Developer Mode on and mount the personalized developer image (Xcode does it when the \
         phone is attached, or `pymobiledevice3 mounter auto-mount`)",
        .at.udid
    )]
    NoTunnel { at: Where, version: String, detail: String },
    #[error("iPhone {}: {what} took longer than {limit_s} s; fix: check the cable and that the phone is unlocked", .at.udid)]
    TimedOut { at: Where, what: String, limit_s: u64 },
    #[error("iPhone {}: {what} failed: {detail}", .at.udid)]
    Failed { at: Where, what: String, detail: String },
}

impl IosError {
    /// What the crate's `e` means while doing `what`.
    pub fn from_idevice(at: &Where, what: &str, e: IdeviceError) -> IosError {
        let at = at.clone();
        match e {
            IdeviceError::DeviceNotFound | IdeviceError::Usbmuxd(UsbmuxdError::BadDevice) => {
                IosError::NotConnected { at, listed: "no device with that UDID".into() }
            }
            IdeviceError::InvalidHostID => IosError::Untrusted { at },
            IdeviceError::PasswordProtected => IosError::Locked { at, said: "PasswordProtected".into() },
            IdeviceError::DeviceLocked => IosError::Locked { at, said: "DeviceLocked".into() },
            IdeviceError::GetProhibited => IosError::Locked { at, said: "GetProhibited".into() },
            IdeviceError::DeveloperModeNotEnabled => IosError::DeveloperModeOff { at },
            IdeviceError::ImageNotMounted => IosError::ImageNotMounted { at, version: "?".into() },
            // The socket itself: usbmuxd gone, or the phone dropped off mid-call.
            IdeviceError::Socket(io) => {
                IosError::Failed { at, what: what.into(), detail: format!("connection lost: {io}") }
            }
            e => IosError::Failed { at, what: what.into(), detail: e.to_string() },
        }
    }

    /// A lost connection (the runner waits for the phone), or a failed step.
    pub fn is_disconnect(&self) -> bool {
        matches!(self, IosError::NotConnected { .. } | IosError::NoUsbmuxd { .. })
            || matches!(self, IosError::Failed { detail, .. } if detail.starts_with("connection lost"))
    }

    fn at(&self) -> &Where {
        match self {
            IosError::NoUsbmuxd { at, .. }
            | IosError::NotConnected { at, .. }
            | IosError::NotPaired { at }
            | IosError::BadPairRecord { at, .. }
            | IosError::Untrusted { at }
            | IosError::Locked { at, .. }
            | IosError::DeveloperModeOff { at }
            | IosError::ImageNotMounted { at, .. }
            | IosError::NoTunnel { at, .. }
            | IosError::TimedOut { at, .. }
            | IosError::Failed { at, .. } => at,
        }
    }
}

impl From<IosError> for DeviceError {
    fn from(e: IosError) -> DeviceError {
        let device = e.at().device.clone();
        if e.is_disconnect() {
            DeviceError::Disconnected { device, detail: e.to_string() }
        } else {
            DeviceError::Unavailable { device, detail: e.to_string() }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Where {
        Where {
            device: "iphone-1".into(),
            udid: "00008020-001A".into(),
            host: "shelf".into(),
            usbmuxd: "/var/run/usbmuxd".into(),
        }
    }

    #[test]
    fn what_the_phone_says_becomes_the_fix() {
        let m = |e| IosError::from_idevice(&at(), "starting a session", e).to_string();
        assert!(m(IdeviceError::InvalidHostID).contains("idevicepair unpair -u 00008020-001A"));
        assert!(m(IdeviceError::GetProhibited).contains("is locked (GetProhibited)"));
        assert!(m(IdeviceError::PasswordProtected).contains("is locked (PasswordProtected)"));
        assert!(m(IdeviceError::DeveloperModeNotEnabled).contains("Developer Mode > On"));
        assert!(m(IdeviceError::DeviceNotFound).contains("usbmuxd at /var/run/usbmuxd on host shelf lists"));
        assert!(m(IdeviceError::UnknownErrorType("Weird".into())).contains("starting a session failed: "));
    }

    #[test]
    fn only_a_missing_phone_or_usbmuxd_is_a_disconnect() {
        let lost = IosError::from_idevice(&at(), "x", IdeviceError::Usbmuxd(UsbmuxdError::BadDevice));
        assert!(lost.is_disconnect());
        assert!(DeviceError::from(lost).is_disconnect());
        let locked = IosError::from_idevice(&at(), "x", IdeviceError::GetProhibited);
        assert!(!locked.is_disconnect());
        assert!(DeviceError::from(locked).to_string().starts_with("iphone-1: iPhone 00008020-001A is locked"));
    }
}
