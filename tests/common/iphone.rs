//! The stand-in iPhone (examples/iphone): usbmuxd and the phones behind it on a Unix
//! socket of the test's own, each phone paired (its pair record in the stand-in's root).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use idevice::usbmuxd::UsbmuxdAddr;

pub const UDID: &str = "00008110-000A1B2C3D4E5F60";
pub const REPLAY_UDID: &str = "63c3d055c4f83e960e5980fa68be0fbf7d4ba74c";
pub const IOREG: &str = "tests/fixtures/devices/ios/ioregistry_iopmpowersource_goios.plist";

pub fn phone_toml(extra: &str) -> String {
    format!(
        "DeviceName = \"Lab iPhone\"\nProductType = \"iPhone14,2\"\nProductVersion = \"16.7.2\"\nBuildVersion = \"20H115\"\n\
         ioregistry = \"{}\"\n{extra}\n[battery]\nBatteryCurrentCapacity = 85\nBatteryIsCharging = true\n\
         ExternalConnected = true\nExternalChargeCapable = true\nFullyCharged = false\nHasBattery = true\n",
        super::root().join(IOREG).display()
    )
}

/// An iOS 17 phone (the CoreDevice tunnel, RSD, the app and diagnostics services).
pub fn phone17_toml(extra: &str) -> String {
    phone_toml(extra).replace("\"16.7.2\"", "\"17.5.1\"").replace("\"20H115\"", "\"21F90\"")
}

pub struct StandIn {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
}

impl StandIn {
    /// Phones are `(udid, extra toml lines)`; each is paired unless its lines say `fault = "not_paired"`
    /// (its record is then still written, so the fault, not a missing file, answers).
    pub fn start(phones: &[(&str, &str)]) -> Self {
        let files: Vec<(&str, String)> = phones.iter().map(|(udid, extra)| (*udid, phone_toml(extra))).collect();
        Self::start_files(&files)
    }

    /// As `start`, each phone given by its whole file.
    pub fn start_files(phones: &[(&str, String)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("phones")).unwrap();
        for (udid, text) in phones {
            std::fs::write(root.join(format!("phones/{udid}.toml")), text).unwrap();
            let paired = Command::new(super::example("iphone"))
                .args(["pair", "--root"])
                .arg(&root)
                .args(["--udid", udid])
                .output()
                .unwrap();
            assert!(paired.status.success(), "{}", String::from_utf8_lossy(&paired.stderr));
        }
        let socket = dir.path().join("usbmuxd");
        let mut child = Command::new(super::example("iphone"))
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("listening {}", socket.display()));
        StandIn { child, dir, socket }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn addr(&self) -> UsbmuxdAddr {
        UsbmuxdAddr::UnixSocket(self.socket.display().to_string())
    }

    /// The crate's provider for one phone, as the backend makes it.
    pub async fn provider(&self, udid: &str) -> idevice::provider::UsbmuxdProvider {
        let addr = self.addr();
        let dev = addr.connect(1).await.unwrap().get_device(udid).await.unwrap();
        dev.to_provider(addr, "lab-test")
    }

    pub fn journal(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.root().join("journal.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    pub fn journalled(&self, service: &str, request: &str) -> Vec<serde_json::Value> {
        self.journal().into_iter().filter(|j| j["service"] == service && j["request"] == request).collect()
    }

    /// What `iphone sysdiagnose` printed: the archive it left for the phone.
    pub fn sysdiagnose(&self, udid: &str, from: f64, to: f64, charging_s: Option<f64>) -> PathBuf {
        let mut c = Command::new(super::example("iphone"));
        c.args(["sysdiagnose", "--root"]).arg(self.root()).args(["--udid", udid]);
        c.args(["--from", &format!("{from:.3}"), "--to", &format!("{to:.3}")]);
        if let Some(s) = charging_s {
            c.args(["--charging-s", &s.to_string()]);
        }
        let made = c.output().unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        PathBuf::from(String::from_utf8(made.stdout).unwrap().trim())
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
