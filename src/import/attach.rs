//! Attaching imported files as a trial of a campaign, so hand-run experiments get the same
//! report as `lab run` trials.
//!
//! The trial is added as a planned trial (`Store::add_trials`) with one valid attempt that
//! carries the import's measurements; the raw files are copied to
//! `artifacts/<campaign>/<trial key>.attempt-0/` with an `import.json` that records what
//! they were parsed as. Without `--campaign` (or with an id that does not exist yet) a new
//! campaign is created for imports (runbook `import`, an empty plan).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::read::Imported;
use crate::config::{Lab, Order, StatsSettings, is_valid_name};
use crate::plan::Plan;
use crate::store::{AttemptRecord, AttemptStatus, CampaignStatus, NewCampaign, PlannedTrialRow, Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(
        "`{value}` is not a valid {what} name; fix: use only letters, digits, `-` and `_`, starting with a letter or digit"
    )]
    BadName { what: &'static str, value: String },
    #[error("campaign {0} is running; fix: attach after it ends (or after `lab run --resume {0}` finishes)")]
    Running(String),
    #[error("campaign {campaign}: its stored plan cannot be read ({source}); fix: attach to another campaign")]
    Plan { campaign: String, source: serde_json::Error },
    #[error("{path}: cannot copy the imported file ({source})")]
    Copy { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where to attach.
#[derive(Debug, Clone)]
pub struct AttachRequest {
    /// Existing campaign, or the id of a new one; `None` creates `import-<UTC time>`.
    pub campaign: Option<String>,
    pub variant: String,
    pub device: String,
    /// Device model (report rows are per model); default: the lab's or the plan's entry for
    /// the device, else `imported`.
    pub model: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Attached {
    pub campaign: String,
    pub created_campaign: bool,
    pub trial_idx: u32,
    pub trial_key: String,
    pub attempt: u32,
    pub artifact_dir: PathBuf,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The plan of a campaign made by `lab import`: no variants, devices or trials of its own.
fn import_plan() -> Plan {
    Plan {
        runbook: "import".into(),
        seed: 0,
        order: Order::Sequential,
        duration_s: 0.0,
        cooldown_s: 0.0,
        repeats: 0,
        max_attempts: 1,
        variants: Vec::new(),
        devices: Vec::new(),
        trials: Vec::new(),
        metrics: Vec::new(),
        statistics: StatsSettings::default(),
        expected_requests: None,
        adaptive: None,
        looks: Vec::new(),
    }
}

fn new_campaign(id: &str, lab: &Lab, imported: &Imported) -> NewCampaign {
    NewCampaign {
        id: id.into(),
        runbook_name: "import".into(),
        runbook_path: "(lab import)".into(),
        runbook_text: String::new(),
        runbook_sha256: crate::seed::sha256_hex(b""),
        lab_text: lab.text.clone(),
        lab_sha256: crate::seed::sha256_hex(lab.text.as_bytes()),
        content_hashes: serde_json::json!({ "imported_kind": imported.kind.name() }),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        seed: 0,
        created_at: now(),
        planned_trials: Vec::new(),
        plan_json: serde_json::to_string(&import_plan()).unwrap_or_default(),
    }
}

/// A campaign id that is not taken: `import-<yyyymmdd-hhmmss>`, with a suffix if needed.
fn fresh_id(store: &Store) -> Result<String, StoreError> {
    store.free_campaign_id("import")
}

/// Copies the raw files and writes `import.json` into `dir`.
fn copy_files(dir: &Path, imported: &Imported, sources: &[PathBuf]) -> Result<Vec<serde_json::Value>, AttachError> {
    std::fs::create_dir_all(dir).map_err(|source| AttachError::Copy { path: dir.into(), source })?;
    let mut listed = Vec::new();
    for (i, src) in sources.iter().enumerate() {
        let base = src.file_name().map_or_else(|| format!("file-{i}"), |n| n.to_string_lossy().into_owned());
        // Before/after snapshots often share a name; keep both.
        let name =
            if sources.len() > 1 { format!("{}-{base}", ["before", "after"].get(i).unwrap_or(&"file")) } else { base };
        let bytes = std::fs::read(src).map_err(|source| AttachError::Copy { path: src.clone(), source })?;
        let dest = dir.join(&name);
        std::fs::write(&dest, &bytes).map_err(|source| AttachError::Copy { path: dest.clone(), source })?;
        listed.push(serde_json::json!({
            "name": name,
            "original": src.display().to_string(),
            "bytes": bytes.len(),
            "sha256": crate::seed::sha256_hex(&bytes),
        }));
    }
    let manifest = serde_json::json!({ "kind": imported.kind.name(), "files": listed, "parsed": imported.parsed });
    let path = dir.join("import.json");
    let text = serde_json::to_string_pretty(&manifest).unwrap_or_default();
    std::fs::write(&path, text).map_err(|source| AttachError::Copy { path, source })?;
    Ok(listed)
}

/// Adds `imported` (parsed from `sources`) as a new trial with one valid attempt.
pub fn attach(
    store: &Store,
    lab: &Lab,
    req: &AttachRequest,
    imported: &Imported,
    sources: &[PathBuf],
) -> Result<Attached, AttachError> {
    for (what, value) in [("variant", &req.variant), ("device", &req.device)] {
        if !is_valid_name(value) {
            return Err(AttachError::BadName { what, value: value.clone() });
        }
    }
    let id = match &req.campaign {
        Some(id) if !is_valid_name(id) => return Err(AttachError::BadName { what: "campaign", value: id.clone() }),
        Some(id) => id.clone(),
        None => fresh_id(store)?,
    };
    let existing = match store.campaign(&id) {
        Ok(c) => Some(c),
        Err(StoreError::NoCampaign(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let created_campaign = existing.is_none();
    let plan: Plan = match &existing {
        Some(c) if c.status == CampaignStatus::Running => return Err(AttachError::Running(id)),
        Some(c) => serde_json::from_value(c.plan_json.clone())
            .map_err(|source| AttachError::Plan { campaign: id.clone(), source })?,
        None => {
            store.create_campaign(&new_campaign(&id, lab, imported), 1, std::process::id())?;
            // Nothing runs it: mark it done at once, so a failed attach never leaves it "running".
            let note = "hand-run trials attached by lab import";
            store.finish_campaign(&id, CampaignStatus::Done, &now(), Some(note), None)?;
            import_plan()
        }
    };

    let trials = store.trials(&id)?;
    let idx = trials.iter().map(|t| t.row.idx + 1).max().unwrap_or(0);
    let same = trials.iter().filter(|t| t.row.device == req.device && t.row.variant == req.variant).count() as u32;
    let on_device = trials.iter().filter(|t| t.row.device == req.device).count() as u32;
    let model = req
        .model
        .clone()
        .or_else(|| lab.device(&req.device).map(|d| d.model.clone()))
        .or_else(|| plan.devices.iter().find(|d| d.name == req.device).map(|d| d.model.clone()))
        .or_else(|| trials.iter().find(|t| t.row.device == req.device).map(|t| t.row.device_model.clone()))
        .unwrap_or_else(|| "imported".into());
    let (build, config) = match plan.variant(&req.variant) {
        Some(v) => (v.build.clone(), v.config.clone()),
        None => (req.variant.clone(), "default".into()),
    };
    let row = PlannedTrialRow {
        idx,
        key: format!("{idx:04}-{}-{}-r{same}", req.device, req.variant),
        device: req.device.clone(),
        device_model: model,
        variant: req.variant.clone(),
        build,
        config,
        repeat: same,
        block: same,
        device_order: on_device,
    };
    // The stored plan lists every trial, hand-run ones included.
    let mut plan = plan;
    plan.trials.push(row.clone());
    let plan_json =
        serde_json::to_string(&plan).map_err(|source| AttachError::Plan { campaign: id.clone(), source })?;
    store.add_trials(&id, std::slice::from_ref(&row), &plan_json)?;

    let artifact_dir = lab.artifacts_dir.join(&id).join(crate::store::attempt_folder(&row.key, 0));
    let started_at = now();
    let listed = copy_files(&artifact_dir, imported, sources)?;
    let record = AttemptRecord {
        attestations: Vec::new(),
        campaign: id.clone(),
        trial_idx: idx,
        attempt: 0,
        device: req.device.clone(),
        status: AttemptStatus::Valid,
        reasons: Vec::new(),
        phases: vec![("import".into(), 0.0)],
        started_at,
        ended_at: now(),
        soak_start_s: 0.0,
        artifact_dir: artifact_dir
            .strip_prefix(lab.artifacts_dir.parent().unwrap_or(Path::new("")))
            .unwrap_or(&artifact_dir)
            .display()
            .to_string(),
        measurements: imported.metrics.clone(),
        // What the import read over time (a powerlog's battery curve); none for snapshots.
        series: imported.series.clone(),
        state_before: serde_json::json!({ "imported": { "kind": imported.kind.name(), "files": listed } }),
        state_after: serde_json::Value::Null,
        state_soak: serde_json::Value::Null,
        // How the imported run was untethered is not known to the lab.
        untether: None,
        labels: Vec::new(),
    };
    store.record_attempt(record)?;
    Ok(Attached { campaign: id, created_campaign, trial_idx: idx, trial_key: row.key, attempt: 0, artifact_dir })
}
