//! What the lab installed on each iPhone: the phone keeps no hash of an app, so the .ipa's
//! sha256 is recorded here at install, with the bundle version the phone then reported.
//! An install is skipped only when both still match (`artifacts/ios-installs/<UDID>.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Installed {
    pub sha256: String,
    pub bundle_version: String,
}

#[derive(Debug, Clone)]
pub struct Installs {
    path: PathBuf,
}

impl Installs {
    /// The record of phone `udid` under the lab's artifacts folder.
    pub fn new(artifacts: &Path, udid: &str) -> Installs {
        // A UDID is letters, digits and dashes (config checks it): it stays a file name.
        Installs { path: artifacts.join("ios-installs").join(format!("{udid}.json")) }
    }

    /// Bundle id → what was installed; empty when nothing was recorded (or the file is
    /// unreadable: then the app is simply installed again).
    pub fn read(&self) -> BTreeMap<String, Installed> {
        std::fs::read(&self.path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    pub fn get(&self, bundle_id: &str) -> Option<Installed> {
        self.read().remove(bundle_id)
    }

    /// Records `bundle_id` as installed (written to a temporary file, then renamed, so a
    /// crash leaves the old record or the new one).
    pub fn record(&self, bundle_id: &str, what: Installed) -> std::io::Result<()> {
        let mut all = self.read();
        all.insert(bundle_id.to_string(), what);
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&all).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, &self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_install_is_read_back_and_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let i = Installs::new(tmp.path(), "00008020-001A");
        assert_eq!(i.get("io.example.app"), None);
        let a = Installed { sha256: "aa".into(), bundle_version: "41".into() };
        i.record("io.example.app", a.clone()).unwrap();
        assert_eq!(i.get("io.example.app"), Some(a));
        let b = Installed { sha256: "bb".into(), bundle_version: "42".into() };
        i.record("io.example.app", b.clone()).unwrap();
        assert_eq!(i.get("io.example.app"), Some(b));
        assert!(i.path().ends_with("ios-installs/00008020-001A.json"));
    }
}
