//! `artifacts/<campaign>/manifest.json`: everything needed to run a campaign again —
//! the runbook's text, the seed, the hashes of the lab file and of every build and pushed
//! file, each variant's config, the devices and what they said they were, and the lab's
//! version. `lab rerun` and `lab run --from-manifest` start from it (docs/report.md).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::{Lab, Runbook};
use crate::device::Identity;
use crate::plan::Plan;
use crate::store::CampaignRecord;

/// Raised when a field changes meaning or goes away; readers refuse a newer one.
pub const MANIFEST_VERSION: u32 = 1;

/// The manifest's file name in a campaign's folder.
pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub manifest_version: u32,
    /// The `lab` version that ran the campaign.
    pub lab_version: String,
    pub campaign: String,
    pub created_at: String,
    pub runbook: ManifestRunbook,
    /// sha256 of the lab file's text.
    pub lab_sha256: String,
    /// What fixes the order and every simulated phone's noise.
    pub seed: u64,
    /// sha256 by build and platform (`{"control": {"android": "…"}}`).
    pub builds: serde_json::Value,
    /// sha256 of every pushed file, as `config:destination`.
    pub files: serde_json::Value,
    pub variants: Vec<ManifestVariant>,
    pub devices: Vec<ManifestDevice>,
    pub trials: usize,
    /// sha256 of the plan (order, trials, devices) as stored.
    pub plan_sha256: String,
    /// The campaign this one re-ran, when it was started by `lab rerun` or
    /// `lab run --from-manifest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_of: Option<String>,
    /// Builds whose files no longer had the hashes of `rerun_of` (`--allow-changed-builds`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_builds: Vec<String>,
    /// The re-run's plan differs from `rerun_of`'s (another lab file, or one edited since).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_changed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestRunbook {
    pub name: String,
    /// Where it was read from: relative paths in it (build files) resolve from there.
    pub path: String,
    pub sha256: String,
    /// Verbatim.
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestVariant {
    pub name: String,
    pub build: String,
    pub config: String,
    /// The config's values (environment, arguments, launch options, simulated changes).
    pub values: serde_json::Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ManifestDevice {
    pub name: String,
    pub model: String,
    pub platform: String,
    /// The OS lab.toml declares.
    pub os: String,
    /// What the device answered before its first trial (model, OS build, serial); absent
    /// until it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Identity>,
    /// The power monitor that supplies it (`[[monitor]]` as configured), with what the
    /// instrument said it is (`instrument`) once it was opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<serde_json::Value>,
}

/// Where a re-run came from, as `content_hashes.rerun` of the new campaign's record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RerunOf {
    pub campaign: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_builds: Vec<String>,
    /// The plan came out different (the lab file changed since, or another lab file):
    /// other devices, or another order.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_changed: bool,
}

const MANIFEST_FIX: &str = "fix: give the manifest.json of a campaign's artifact folder";

impl Manifest {
    /// The manifest of stored campaign `c` (its `plan_json` is not read), run with
    /// `runbook` and `plan` on `lab`; `observed`: the devices' identities known so far.
    pub fn of(
        c: &CampaignRecord,
        runbook: &Runbook,
        plan: &Plan,
        lab: &Lab,
        observed: &BTreeMap<String, Identity>,
    ) -> Self {
        let hashes = &c.content_hashes;
        let rerun: Option<RerunOf> = hashes.get("rerun").and_then(|r| serde_json::from_value(r.clone()).ok());
        let variants = plan
            .variants
            .iter()
            .map(|v| ManifestVariant {
                name: v.name.clone(),
                build: v.build.clone(),
                config: v.config.clone(),
                values: runbook
                    .configs
                    .iter()
                    .find(|k| k.name == v.config)
                    .and_then(|k| serde_json::to_value(k).ok())
                    .unwrap_or(serde_json::Value::Null),
            })
            .collect();
        let devices = plan
            .devices
            .iter()
            .map(|d| {
                let spec = lab.device(&d.name);
                ManifestDevice {
                    name: d.name.clone(),
                    model: d.model.clone(),
                    platform: d.platform.as_str().into(),
                    os: spec.map(|s| s.os.clone()).unwrap_or_default(),
                    observed: observed.get(&d.name).cloned(),
                    monitor: lab.monitor_of(&d.name).and_then(|m| serde_json::to_value(m).ok()),
                }
            })
            .collect();
        Manifest {
            manifest_version: MANIFEST_VERSION,
            lab_version: c.tool_version.clone(),
            campaign: c.id.clone(),
            created_at: c.created_at.clone(),
            runbook: ManifestRunbook {
                name: c.runbook_name.clone(),
                // Absolute, so `lab rerun` works from another working directory (this is
                // the process that read the runbook, in the folder it was read from).
                path: std::path::absolute(&c.runbook_path)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| c.runbook_path.clone()),
                sha256: c.runbook_sha256.clone(),
                text: c.runbook_text.clone(),
            },
            lab_sha256: c.lab_sha256.clone(),
            seed: c.seed,
            builds: hashes.get("builds").cloned().unwrap_or_default(),
            files: hashes.get("files").cloned().unwrap_or_default(),
            variants,
            devices,
            trials: plan.trials.len(),
            // The stored plan's text is `serde_json::to_string(plan)`: the same hash.
            plan_sha256: crate::seed::sha256_hex_json(plan),
            rerun_of: rerun.as_ref().map(|r| r.campaign.clone()),
            plan_changed: rerun.as_ref().is_some_and(|r| r.plan_changed),
            changed_builds: rerun.map(|r| r.changed_builds).unwrap_or_default(),
        }
    }

    /// Reads a manifest; the error says what is wrong with which file.
    pub fn read(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ManifestError { path: path.display().to_string(), what: format!("{e}; {MANIFEST_FIX}") })?;
        Manifest::parse(&text, &path.display().to_string())
    }

    /// Reads a manifest's text (from a file or the lab's bucket, `shown` as its place).
    pub fn parse(text: &str, shown: &str) -> Result<Manifest, ManifestError> {
        const FIX: &str = MANIFEST_FIX;
        let bad = |what: String| ManifestError { path: shown.to_string(), what };
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}; {FIX}")))?;
        match v.get("manifest_version").and_then(|v| v.as_u64()) {
            Some(n) if n == u64::from(MANIFEST_VERSION) => {}
            Some(n) => {
                return Err(bad(format!(
                    "manifest_version {n}, this lab reads {MANIFEST_VERSION}; fix: use the lab version that wrote it ({})",
                    v.get("lab_version").and_then(|v| v.as_str()).unwrap_or("unknown")
                )));
            }
            None => return Err(bad(format!("no manifest_version: not a lab manifest; {FIX}"))),
        }
        serde_json::from_value(v).map_err(|e| bad(format!("{e}; {FIX}")))
    }

    /// The devices' identities it holds.
    pub fn observed(&self) -> BTreeMap<String, Identity> {
        self.devices.iter().filter_map(|d| d.observed.clone().map(|o| (d.name.clone(), o))).collect()
    }

    /// Build files and pushed config files whose sha256 differ in `now` (the content
    /// hashes of `runbook` as read now), as `build B (android, app.apk): campaign had
    /// sha256 …, now …`. Host and simulated builds are left out: they are the runbook's own
    /// text, the same by construction (their hash also holds absolute paths).
    pub fn changed_builds(&self, runbook: &Runbook, now: &serde_json::Value) -> Vec<String> {
        let mut out = Vec::new();
        let sha = |v: Option<&serde_json::Value>| v.and_then(|c| c.as_str()).unwrap_or("none").to_string();
        for (build, platforms) in self.builds.as_object().into_iter().flatten() {
            for (platform, was) in platforms.as_object().into_iter().flatten() {
                let current = now["builds"].get(build).and_then(|b| b.get(platform));
                if !matches!(platform.as_str(), "android" | "ios") || current == Some(was) {
                    continue;
                }
                let b = runbook.builds.iter().find(|b| &b.name == build);
                let files: Vec<String> = match platform.as_str() {
                    "android" => b
                        .and_then(|b| b.android.as_ref())
                        .map(|a| a.apks.iter().map(|f| f.path.display().to_string()).collect())
                        .unwrap_or_default(),
                    _ => b.and_then(|b| b.ios.as_ref()).map(|a| vec![a.ipa.display().to_string()]).unwrap_or_default(),
                };
                let what =
                    if files.is_empty() { platform.clone() } else { format!("{platform}, {}", files.join(", ")) };
                out.push(format!(
                    "build {build} ({what}): campaign had sha256 {}, now {}",
                    sha(Some(was)),
                    sha(current)
                ));
            }
        }
        for (file, was) in self.files.as_object().into_iter().flatten() {
            let current = now["files"].get(file);
            if current != Some(was) {
                out.push(format!("config file {file}: campaign had sha256 {}, now {}", sha(Some(was)), sha(current)));
            }
        }
        out
    }

    /// Writes it into the campaign's folder `dir` (which exists), atomically as the
    /// report files are: a reader never sees half of it.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)? + "\n";
        crate::fs::write_atomic(&dir.join(MANIFEST_FILE), text.as_bytes())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}")]
pub struct ManifestError {
    pub path: String,
    pub what: String,
}
