//! The iPhones a host's usbmuxd lists and what each one is, read without changing anything
//! (`lab discover`): no pairing, no service started, nothing installed.
//!
//! Lockdown answers a few values to any host (`ProductType`, `ProductVersion`,
//! `BuildVersion`): that names a phone that is not paired yet. With a pair record, one
//! session reads its name and Developer Mode; what keeps it from the lab (not paired, not
//! trusted, locked, Developer Mode off) comes back as the `IosError` that names the fix.

use std::sync::Arc;
use std::time::Duration;

use idevice::IdeviceService;
use idevice::lockdown::LockdownClient;
use idevice::usbmuxd::{Connection, UsbmuxdDevice};
use serde::Serialize;

use super::error::{IosError, Where};
use super::mux::Mux;
use super::phone::Phone;
use crate::collect::ios::product_types::model_or_identifier;

/// How far an iPhone is from usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IphoneState {
    Ready,
    /// usbmuxd holds no pair record for it.
    NotPaired,
    /// It refuses the host's pair record (InvalidHostID).
    Untrusted,
    /// Passcode locked.
    Locked,
    DeveloperModeOff,
    /// It did not answer what it is, or a session failed otherwise (see the problem).
    Unreadable,
}

/// One iPhone as usbmuxd and lockdown describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttachedIphone {
    pub udid: String,
    /// On a cable (usbmuxd also lists phones it sees over Wi-Fi).
    pub usb: bool,
    /// `iPhone14,2`.
    pub product_type: Option<String>,
    /// `iPhone 13 Pro` (the identifier when the table does not know it).
    pub model: Option<String>,
    /// iOS version (`17.4.1`).
    pub version: Option<String>,
    pub build: Option<String>,
    /// The name set on the phone (needs a paired session).
    pub name: Option<String>,
    pub state: IphoneState,
    /// `None` when it could not be read (not paired, locked), or the phone has no switch.
    pub developer_mode: Option<bool>,
    /// What keeps the lab from using it, with the fix.
    pub problem: Option<String>,
}

/// Every iPhone `mux` lists on `host`, each read within `limit`. usbmuxd itself not
/// answering within `limit` is the error.
pub async fn list_attached(mux: &Arc<Mux>, host: &str, limit: Duration) -> Result<Vec<AttachedIphone>, IosError> {
    let at =
        |udid: &str| Where { device: udid.into(), udid: udid.into(), host: host.into(), usbmuxd: mux.shown.clone() };
    let listed = match tokio::time::timeout(limit, mux.devices()).await {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return Err(IosError::NoUsbmuxd { at: at("-"), detail: e.to_string() }),
        Err(_) => {
            let detail = format!("no answer within {}", humantime::format_duration(limit));
            return Err(IosError::NoUsbmuxd { at: at("-"), detail });
        }
    };
    // A phone on a cable and on Wi-Fi is listed twice: keep the cable.
    let mut devices: Vec<&UsbmuxdDevice> = Vec::new();
    for d in listed.iter().filter(|d| d.connection_type == Connection::Usb).chain(listed.iter()) {
        if !devices.iter().any(|k| k.udid == d.udid) {
            devices.push(d);
        }
    }
    let mut out = Vec::new();
    for d in devices {
        let phone = Phone::new(at(&d.udid), mux.clone(), None);
        out.push(read_one(&phone, mux, d, limit).await);
    }
    Ok(out)
}

async fn read_one(phone: &Phone, mux: &Mux, dev: &UsbmuxdDevice, limit: Duration) -> AttachedIphone {
    let mut found = AttachedIphone {
        udid: dev.udid.clone(),
        usb: dev.connection_type == Connection::Usb,
        product_type: None,
        model: None,
        version: None,
        build: None,
        name: None,
        state: IphoneState::Unreadable,
        developer_mode: None,
        problem: None,
    };
    let open = dev.to_provider(mux.addr.clone(), "lab");
    let values = phone
        .bounded("reading what the phone is", limit, async {
            let mut ld = LockdownClient::connect(&open)
                .await
                .map_err(|e| IosError::from_idevice(&phone.at, "connecting to lockdown", e))?;
            let mut v = Vec::new();
            for key in ["ProductType", "ProductVersion", "BuildVersion"] {
                let value = ld.get_value(Some(key), None).await.ok();
                v.push(value.and_then(|x| x.as_string().map(String::from)));
            }
            Ok(v)
        })
        .await;
    match values {
        Ok(v) => {
            found.model = v[0].as_deref().map(model_or_identifier);
            [found.product_type, found.version, found.build] = [v[0].clone(), v[1].clone(), v[2].clone()];
        }
        Err(e) => {
            found.problem = Some(e.to_string());
            return found;
        }
    }
    let session = phone
        .bounded("reading the phone's name and Developer Mode", limit, async {
            let p = phone.provider().await?;
            let mut ld = phone.lockdown(&p).await?;
            let name = ld.get_value(Some("DeviceName"), None).await;
            let name = name.map_err(|e| IosError::from_idevice(&phone.at, "reading DeviceName", e))?;
            let mode = ld.get_value(Some("DeveloperModeStatus"), Some("com.apple.security.mac.amfi")).await;
            let mode = match mode {
                Ok(v) => v.as_boolean(),
                Err(e @ idevice::IdeviceError::GetProhibited) => {
                    return Err(IosError::from_idevice(&phone.at, "reading Developer Mode", e));
                }
                // Phones before iOS 16 have no such switch.
                Err(_) => None,
            };
            Ok((name.as_string().map(String::from), mode))
        })
        .await;
    match session {
        Ok((name, mode)) => {
            found.state = IphoneState::Ready;
            found.name = name;
            found.developer_mode = mode;
            if mode == Some(false) {
                found.state = IphoneState::DeveloperModeOff;
                found.problem = Some(IosError::DeveloperModeOff { at: phone.at.clone() }.to_string());
            }
        }
        Err(e) => {
            found.state = match e {
                IosError::NotPaired { .. } => IphoneState::NotPaired,
                IosError::Untrusted { .. } => IphoneState::Untrusted,
                IosError::Locked { .. } => IphoneState::Locked,
                _ => IphoneState::Unreadable,
            };
            found.problem = Some(e.to_string());
        }
    }
    found
}
