//! One iPhone through usbmuxd and lockdown, with the `idevice` crate: every call here is
//! one bounded conversation (its own usbmuxd socket, its own lockdown session), so a phone
//! that drops off fails the call in hand and nothing is left half open.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use idevice::diagnostics_relay::DiagnosticsRelayClient;
use idevice::installation_proxy::InstallationProxyClient;
use idevice::lockdown::LockdownClient;
use idevice::mobile_image_mounter::ImageMounter;
use idevice::pairing_file::PairingFile;
use idevice::{IdeviceError, IdeviceService};
use plist::{Dictionary, Value};

use super::error::{IosError, Where};
use super::mux::{Mux, Provider};

/// Lockdown values that say what the phone is.
pub const IDENTITY_KEYS: [&str; 5] = ["DeviceName", "ProductType", "ProductVersion", "BuildVersion", "UniqueDeviceID"];

/// A lockdown or service round trip.
pub const CALL: Duration = Duration::from_secs(30);
/// Uploading and installing an .ipa.
pub const INSTALL: Duration = Duration::from_secs(600);

#[derive(Debug)]
pub struct Phone {
    pub at: Where,
    mux: Arc<Mux>,
    pair_record: Option<PathBuf>,
}

/// The iOS version's major number (`"17.4.1"` → 17).
pub fn major(version: &str) -> u32 {
    version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// UDIDs compare without case or dashes (`idevice_id` prints them both ways).
pub fn same_udid(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.chars().filter(|c| *c != '-').collect::<String>().to_ascii_lowercase();
    norm(a) == norm(b)
}

impl Phone {
    pub fn new(at: Where, mux: Arc<Mux>, pair_record: Option<PathBuf>) -> Phone {
        Phone { at, mux, pair_record }
    }

    pub fn failed(&self, what: &str, detail: impl Into<String>) -> IosError {
        IosError::Failed { at: self.at.clone(), what: what.into(), detail: detail.into() }
    }

    fn err<'a>(&'a self, what: &'a str) -> impl Fn(IdeviceError) -> IosError + 'a {
        move |e| IosError::from_idevice(&self.at, what, e)
    }

    /// `fut`, within `limit`.
    pub async fn bounded<T>(
        &self,
        what: &str,
        limit: Duration,
        fut: impl Future<Output = Result<T, IosError>>,
    ) -> Result<T, IosError> {
        match tokio::time::timeout(limit, fut).await {
            Ok(r) => r,
            Err(_) => Err(IosError::TimedOut { at: self.at.clone(), what: what.into(), limit_s: limit.as_secs() }),
        }
    }

    /// The phone as usbmuxd lists it, with the pair record lockdown will want.
    pub async fn provider(&self) -> Result<Provider, IosError> {
        let no_mux = |e: IdeviceError| IosError::NoUsbmuxd { at: self.at.clone(), detail: e.to_string() };
        let listed = self.mux.devices().await.map_err(no_mux)?;
        let Some(dev) = listed.iter().find(|d| same_udid(&d.udid, &self.at.udid)) else {
            let listed = match listed.len() {
                0 => "no device".to_string(),
                _ => listed.iter().map(|d| d.udid.as_str()).collect::<Vec<_>>().join(", "),
            };
            return Err(IosError::NotConnected { at: self.at.clone(), listed });
        };
        let pairing = match &self.pair_record {
            Some(path) => PairingFile::read_from_file(path).map_err(|e| IosError::BadPairRecord {
                at: self.at.clone(),
                path: path.display().to_string(),
                detail: e.to_string(),
            })?,
            None => {
                let mut conn = self.mux.connect().await.map_err(no_mux)?;
                match conn.get_pair_record(&dev.udid).await {
                    Ok(p) => p,
                    // usbmuxd answers `Result 2` (no such record): the crate finds no PairRecordData.
                    Err(IdeviceError::UnexpectedResponse(_)) => {
                        return Err(IosError::NotPaired { at: self.at.clone() });
                    }
                    Err(e) => return Err(self.err("reading the pair record from usbmuxd")(e)),
                }
            }
        };
        Ok(Provider { usb: dev.to_provider(self.mux.addr.clone(), "lab"), pairing: Some(pairing) })
    }

    /// A lockdown session (TLS, with the pair record).
    pub async fn lockdown(&self, p: &Provider) -> Result<LockdownClient, IosError> {
        let mut ld = LockdownClient::connect(p).await.map_err(self.err("connecting to lockdown"))?;
        let pairing = p.pairing.as_ref().expect("provider() always sets the pair record");
        ld.start_session(pairing).await.map_err(self.err("starting a lockdown session"))?;
        Ok(ld)
    }

    /// The identity values, by key.
    pub async fn identity(&self) -> Result<BTreeMap<String, String>, IosError> {
        self.bounded("reading what the phone is", CALL, async {
            let p = self.provider().await?;
            let mut ld = self.lockdown(&p).await?;
            let mut out = BTreeMap::new();
            for key in IDENTITY_KEYS {
                let v = ld.get_value(Some(key), None).await.map_err(self.err(&format!("reading {key}")))?;
                out.insert(key.to_string(), v.as_string().unwrap_or_default().to_string());
            }
            Ok(out)
        })
        .await
    }

    /// The `com.apple.mobile.battery` domain (BatteryCurrentCapacity, BatteryIsCharging,
    /// ExternalConnected, …).
    pub async fn battery_domain(&self) -> Result<Dictionary, IosError> {
        self.bounded("reading the battery domain", CALL, async {
            let p = self.provider().await?;
            let mut ld = self.lockdown(&p).await?;
            let v = ld
                .get_value(None, Some("com.apple.mobile.battery"))
                .await
                .map_err(self.err("reading com.apple.mobile.battery"))?;
            v.into_dictionary().ok_or_else(|| self.failed("reading com.apple.mobile.battery", "not a dictionary"))
        })
        .await
    }

    /// The `IOPMPowerSource` registry entry, through the diagnostics relay.
    pub async fn power_source(&self) -> Result<Dictionary, IosError> {
        self.bounded("reading IOPMPowerSource", CALL, async {
            let p = self.provider().await?;
            let what = "reading IOPMPowerSource through the diagnostics relay";
            let mut relay = DiagnosticsRelayClient::connect(&p).await.map_err(self.err(what))?;
            let entry = relay.ioregistry(None, None, Some("IOPMPowerSource")).await.map_err(self.err(what))?;
            let _ = relay.goodbye().await;
            entry.ok_or_else(|| self.failed(what, "the reply has no IORegistry entry"))
        })
        .await
    }

    /// Developer Mode (iOS 16+ has the switch; older phones have none and count as on).
    pub async fn developer_mode(&self) -> Result<bool, IosError> {
        self.bounded("reading Developer Mode", CALL, async {
            let p = self.provider().await?;
            let mut ld = self.lockdown(&p).await?;
            match ld.get_value(Some("DeveloperModeStatus"), Some("com.apple.security.mac.amfi")).await {
                Ok(v) => Ok(v.as_boolean().unwrap_or(false)),
                Err(IdeviceError::GetProhibited) => {
                    Err(IosError::Locked { at: self.at.clone(), said: "GetProhibited".into() })
                }
                // Phones before iOS 16 have no such key.
                Err(_) => Ok(true),
            }
        })
        .await
    }

    /// Whether the developer image launches need is mounted: `Developer` before iOS 17,
    /// the personalized one from 17.
    pub async fn developer_image_mounted(&self, version: &str) -> Result<bool, IosError> {
        self.bounded("looking up the developer image", CALL, async {
            let p = self.provider().await?;
            let what = "looking up the developer image";
            let mut mounter = ImageMounter::connect(&p).await.map_err(self.err(what))?;
            let kind = if major(version) >= 17 { "Personalized" } else { "Developer" };
            match mounter.lookup_image(kind).await {
                Ok(_) => Ok(true),
                Err(IdeviceError::NotFound) => Ok(false),
                Err(e) => Err(self.err(what)(e)),
            }
        })
        .await
    }

    /// iOS 17+: lockdown hands out the CoreDevice proxy, whose tunnel carries RSD.
    pub async fn check_tunnel(&self, version: &str) -> Result<(), IosError> {
        self.bounded("opening the CoreDevice tunnel", CALL, async {
            let p = self.provider().await?;
            match idevice::core_device_proxy::CoreDeviceProxy::connect(&p).await {
                Ok(_) => Ok(()),
                Err(e @ (IdeviceError::Socket(_) | IdeviceError::DeviceNotFound)) => {
                    Err(self.err("opening the CoreDevice tunnel")(e))
                }
                Err(e) => {
                    Err(IosError::NoTunnel { at: self.at.clone(), version: version.into(), detail: e.to_string() })
                }
            }
        })
        .await
    }

    /// The installed app's `CFBundleVersion`, `None` when it is not installed.
    pub async fn installed_version(&self, bundle_id: &str) -> Result<Option<String>, IosError> {
        self.bounded("looking up the installed app", CALL, async {
            let p = self.provider().await?;
            let what = "looking up installed apps";
            let mut inst = InstallationProxyClient::connect(&p).await.map_err(self.err(what))?;
            let apps = inst.get_apps(Some("User"), Some(vec![bundle_id.to_string()])).await.map_err(self.err(what))?;
            Ok(apps.get(bundle_id).and_then(bundle_version))
        })
        .await
    }

    /// Uploads `ipa` to `PublicStaging` over AFC and installs it with the installation proxy.
    pub async fn install(&self, ipa: &Path) -> Result<(), IosError> {
        self.bounded("installing the .ipa", INSTALL, async {
            let p = self.provider().await?;
            idevice::utils::installation::install_package(&p, ipa, None)
                .await
                .map_err(self.err(&format!("installing {}", ipa.display())))
        })
        .await
    }
}

/// `CFBundleVersion` (else `CFBundleShortVersionString`) of an app's entry.
fn bundle_version(v: &Value) -> Option<String> {
    let d = v.as_dictionary()?;
    d.get("CFBundleVersion")
        .or_else(|| d.get("CFBundleShortVersionString"))
        .and_then(Value::as_string)
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udids_match_with_or_without_their_dash() {
        assert!(same_udid("00008020-001A2B3C4D5E6F7A", "00008020001a2b3c4d5e6f7a"));
        assert!(!same_udid("00008020-001A", "00008020-001B"));
        assert_eq!(major("17.4.1"), 17);
        assert_eq!(major("9"), 9);
    }
}
