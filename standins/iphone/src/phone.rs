//! The phones attached to the stand-in, read from `DIR/phones/<UDID>.toml` on every
//! request (a test may change a phone while the stand-in runs), and what the stand-in
//! keeps for them in DIR: the device half of the pairing (`pair` writes it), the apps
//! installed through installation_proxy, the AFC media folder and the journal.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// A scripted failure, answered the way a real phone does (docs/platforms/ios-standin.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// usbmuxd has no pair record for the phone: ReadPairRecord answers Result 2.
    NotPaired,
    /// The phone does not trust the host: StartSession answers InvalidHostID.
    Untrusted,
    /// Passcode locked: GetValue inside the session answers GetProhibited.
    Locked,
    /// Passcode locked, seen at StartSession.
    PasswordProtected,
    /// iOS 17+ without a tunnel: StartService of CoreDeviceProxy answers InvalidService.
    NoTunnel,
}

/// How an `Error` is sent: `{Error: "Name"}`, or `{Error: <code>, ErrorString: "Name"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorForm {
    #[default]
    String,
    Integer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct App {
    #[serde(rename = "CFBundleIdentifier")]
    pub bundle_id: String,
    #[serde(rename = "CFBundleVersion", default)]
    pub version: String,
    #[serde(rename = "CFBundleShortVersionString", default)]
    pub short_version: String,
    /// The binary's name: what pcapd shows as the process's `comm`.
    #[serde(rename = "CFBundleExecutable", default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// What it does when launched (profile.rs); none: the default profile.
    #[serde(rename = "LabStandIn", default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<crate::profile::Profile>,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phone {
    #[serde(rename = "DeviceName")]
    pub device_name: String,
    #[serde(rename = "ProductType")]
    pub product_type: String,
    #[serde(rename = "ProductVersion")]
    pub product_version: String,
    #[serde(rename = "BuildVersion")]
    pub build_version: String,
    /// Defaults to the file's name.
    #[serde(rename = "UniqueDeviceID", default)]
    pub udid: String,
    /// More lockdown values (no domain), e.g. SerialNumber, DeviceClass.
    #[serde(default)]
    pub values: toml::Table,
    /// The `com.apple.mobile.battery` domain, as GetValue returns it.
    #[serde(default)]
    pub battery: toml::Table,
    /// A plist file sent verbatim as the diagnostics relay's IORegistry reply (relative
    /// paths are from DIR).
    #[serde(default)]
    pub ioregistry: Option<PathBuf>,
    #[serde(default = "default_true")]
    pub developer_mode: bool,
    #[serde(default = "default_true")]
    pub developer_image_mounted: bool,
    #[serde(default)]
    pub fault: Option<Fault>,
    #[serde(default)]
    pub error_form: ErrorForm,
    /// Answer ListDevices, Connect and QueryType with the appium captures' bytes.
    #[serde(default)]
    pub replay: bool,
    #[serde(default)]
    pub apps: Vec<App>,
    /// Names the phone resolves to these IPv4 addresses (its network's DNS), for the
    /// workloads of launched apps: `hosts = { "lab.invalid" = "127.0.0.1" }`.
    #[serde(default)]
    pub hosts: BTreeMap<String, String>,
}

impl Phone {
    pub fn major_version(&self) -> u32 {
        self.product_version.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0)
    }
}

/// What `pair` leaves on the phone's side: its TLS identity and the hosts it trusts.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DevicePairing {
    pub device_certificate_pem: String,
    pub device_private_key_pem: String,
    pub trusted_host_ids: Vec<String>,
}

pub struct Store {
    root: PathBuf,
    journal: Mutex<()>,
    state: Mutex<()>,
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
}

impl Store {
    pub fn new(root: &Path) -> Self {
        Store { root: root.to_path_buf(), journal: Mutex::new(()), state: Mutex::new(()) }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn phones_dir(&self) -> PathBuf {
        self.root.join("phones")
    }

    /// Every attached phone, in UDID order (usbmuxd's DeviceID is the 1-based position).
    pub fn phones(&self) -> io::Result<Vec<Phone>> {
        let mut phones = Vec::new();
        let dir = match std::fs::read_dir(self.phones_dir()) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(phones),
            Err(e) => return Err(e),
        };
        for entry in dir {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path)?;
                let mut phone: Phone = toml::from_str(&text).map_err(|e| invalid(&path, e))?;
                if phone.udid.is_empty() {
                    phone.udid = path.file_stem().unwrap().to_string_lossy().into_owned();
                }
                phones.push(phone);
            }
        }
        phones.sort_by(|a, b| a.udid.cmp(&b.udid));
        Ok(phones)
    }

    /// `(DeviceID, phone)` of the phone with this UDID.
    pub fn phone(&self, udid: &str) -> io::Result<Option<Phone>> {
        Ok(self.phones()?.into_iter().find(|p| p.udid == udid))
    }

    pub fn pair_record_path(&self, udid: &str) -> PathBuf {
        self.root.join("pair").join(format!("{udid}.plist"))
    }

    pub fn device_pairing_path(&self, udid: &str) -> PathBuf {
        self.phones_dir().join(format!("{udid}.pairing.json"))
    }

    pub fn device_pairing(&self, udid: &str) -> io::Result<Option<DevicePairing>> {
        let path = self.device_pairing_path(udid);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| invalid(&path, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn system_buid_path(&self) -> PathBuf {
        self.root.join("SystemConfiguration.plist")
    }

    /// usbmuxd's SystemBUID, made on first use and kept (as usbmuxd keeps it).
    pub fn system_buid(&self) -> io::Result<String> {
        let path = self.system_buid_path();
        if let Ok(d) = plist::from_file::<_, plist::Dictionary>(&path)
            && let Some(b) = d.get("SystemBUID").and_then(plist::Value::as_string)
        {
            return Ok(b.to_string());
        }
        let buid = crate::pair::uuid_like(&format!("buid {}", self.root.display()));
        let d: plist::Dictionary = [("SystemBUID".to_string(), plist::Value::from(buid.clone()))].into_iter().collect();
        plist::to_file_xml(&path, &d).map_err(|e| invalid(&path, e))?;
        Ok(buid)
    }

    /// The folder AFC serves for a phone (its /var/mobile/Media).
    pub fn media(&self, udid: &str) -> PathBuf {
        self.root.join("media").join(udid)
    }

    /// The folder crash-report copy serves for a phone (its /var/mobile/Library/Logs/CrashReporter).
    pub fn crashes(&self, udid: &str) -> PathBuf {
        self.root.join("crashes").join(udid)
    }

    fn installed_path(&self, udid: &str) -> PathBuf {
        self.phones_dir().join(format!("{udid}.installed.json"))
    }

    /// Apps in the phone file, then those installed since (a reinstall replaces).
    pub fn apps(&self, phone: &Phone) -> io::Result<Vec<App>> {
        let mut by_id: BTreeMap<String, App> = BTreeMap::new();
        for app in phone.apps.iter().cloned().chain(self.installed(&phone.udid)?) {
            by_id.insert(app.bundle_id.clone(), app);
        }
        Ok(by_id.into_values().collect())
    }

    fn installed(&self, udid: &str) -> io::Result<Vec<App>> {
        let path = self.installed_path(udid);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| invalid(&path, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    pub fn record_install(&self, udid: &str, app: App) -> io::Result<()> {
        self.locked(|| {
            let mut apps = self.installed(udid)?;
            apps.retain(|a| a.bundle_id != app.bundle_id);
            apps.push(app);
            std::fs::write(self.installed_path(udid), serde_json::to_vec_pretty(&apps)?)
        })
    }

    /// Runs `f` alone among the threads that change a phone's state files (not the journal:
    /// `f` may not write it).
    pub fn locked<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.state.lock().unwrap();
        f()
    }

    /// One line of `DIR/journal.jsonl`: `{"udid", "service", "request", …}`.
    pub fn journal(&self, udid: &str, service: &str, request: &str, args: serde_json::Value) {
        let mut line = serde_json::json!({"udid": udid, "service": service, "request": request});
        if let (Some(line), serde_json::Value::Object(args)) = (line.as_object_mut(), args) {
            line.extend(args);
        }
        // One write of the whole line: a test reading the journal meanwhile (the workloads
        // journal from threads of their own) never sees half of one.
        let text = format!("{line}\n");
        let _guard = self.journal.lock().unwrap();
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("journal.jsonl"))
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            eprintln!("iphone: journal: {e}");
        }
    }
}

/// A TOML value as the plist value lockdown would send.
pub fn to_plist(v: &toml::Value) -> plist::Value {
    match v {
        toml::Value::String(s) => plist::Value::String(s.clone()),
        toml::Value::Integer(i) => plist::Value::Integer((*i).into()),
        toml::Value::Float(f) => plist::Value::Real(*f),
        toml::Value::Boolean(b) => plist::Value::Boolean(*b),
        toml::Value::Datetime(d) => plist::Value::String(d.to_string()),
        toml::Value::Array(a) => plist::Value::Array(a.iter().map(to_plist).collect()),
        toml::Value::Table(t) => plist::Value::Dictionary(table_to_plist(t)),
    }
}

pub fn table_to_plist(t: &toml::Table) -> plist::Dictionary {
    t.iter().map(|(k, v)| (k.clone(), to_plist(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phone_file_reads_with_defaults_and_its_udid_from_the_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("phones")).unwrap();
        let text = "DeviceName = \"Lab 1\"\nProductType = \"iPhone14,2\"\nProductVersion = \"16.7.2\"\n\
                    BuildVersion = \"20H115\"\nfault = \"locked\"\n[battery]\nBatteryCurrentCapacity = 85\n\
                    BatteryIsCharging = true\n";
        std::fs::write(dir.path().join("phones/00008110-AA.toml"), text).unwrap();
        let store = Store::new(dir.path());
        let phones = store.phones().unwrap();
        assert_eq!(phones.len(), 1);
        let p = &phones[0];
        assert_eq!((p.udid.as_str(), p.major_version()), ("00008110-AA", 16));
        assert_eq!(p.fault, Some(Fault::Locked));
        assert!(p.developer_mode && p.developer_image_mounted && !p.replay);
        let battery = table_to_plist(&p.battery);
        assert_eq!(battery.get("BatteryCurrentCapacity").and_then(plist::Value::as_signed_integer), Some(85));
        assert_eq!(battery.get("BatteryIsCharging").and_then(plist::Value::as_boolean), Some(true));

        std::fs::write(dir.path().join("phones/bad.toml"), "DeviceName = 1\n").unwrap();
        let e = store.phones().unwrap_err().to_string();
        assert!(e.contains("bad.toml"), "{e}");
    }

    #[test]
    fn installs_replace_an_app_of_the_same_bundle() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("phones")).unwrap();
        let store = Store::new(dir.path());
        let app = |v: &str| App {
            bundle_id: "com.x".into(),
            version: v.into(),
            short_version: "1.0".into(),
            executable: None,
            profile: None,
        };
        store.record_install("U", app("1")).unwrap();
        store.record_install("U", app("2")).unwrap();
        let phone: Phone = toml::from_str(
            "DeviceName=\"a\"\nProductType=\"b\"\nProductVersion=\"17.0\"\nBuildVersion=\"c\"\nUniqueDeviceID=\"U\"\n",
        )
        .unwrap();
        assert_eq!(store.apps(&phone).unwrap(), vec![app("2")]);
    }
}
