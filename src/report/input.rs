//! What a report is built from: one campaign as the store holds it.

use std::collections::HashMap;

use crate::measure::UntetherMode;
use crate::plan::Plan;
use crate::store::{AttemptRecord, AttemptStatus, CampaignRecord, TrialRecord};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(
        "campaign {campaign}: its stored plan cannot be read ({source}); fix: report it with the lab version that ran it ({tool_version})"
    )]
    Plan { campaign: String, tool_version: String, source: serde_json::Error },
}

/// One campaign's rows from the store, with its plan parsed.
#[derive(Debug, Clone)]
pub struct CampaignData {
    pub campaign: CampaignRecord,
    pub plan: Plan,
    /// Every planned trial with its outcome.
    pub trials: Vec<TrialRecord>,
    /// Every attempt, valid or not, with its measurements.
    pub attempts: Vec<AttemptRecord>,
}

impl CampaignData {
    /// Parses the plan stored with the campaign. Trials untethered in a way that must
    /// not be pooled with power-cut ones ([`UntetherMode::pool_label`]) are reported under
    /// their own model name, `Pixel 8 (soft-untethered)`, in every section and export.
    pub fn new(
        campaign: CampaignRecord,
        mut trials: Vec<TrialRecord>,
        attempts: Vec<AttemptRecord>,
    ) -> Result<Self, ReportError> {
        pool_models(&mut trials, &attempts);
        let plan = serde_json::from_value(campaign.plan_json.clone()).map_err(|source| ReportError::Plan {
            campaign: campaign.id.clone(),
            tool_version: campaign.tool_version.clone(),
            source,
        })?;
        Ok(CampaignData { campaign, plan, trials, attempts })
    }
}

/// The model a trial is reported under: its device's model, with the pool label of the
/// attempt that counts (the valid one, else the last).
fn pool_models(trials: &mut [TrialRecord], attempts: &[AttemptRecord]) {
    let mut mode: HashMap<u32, (bool, u32, UntetherMode)> = HashMap::new();
    for a in attempts {
        let Some(m) = a.untether else { continue };
        let key = (a.status == AttemptStatus::Valid, a.attempt, m);
        let e = mode.entry(a.trial_idx).or_insert(key);
        if (key.0, key.1) > (e.0, e.1) {
            *e = key;
        }
    }
    for t in trials {
        if let Some(label) = mode.get(&t.row.idx).and_then(|(_, _, m)| m.pool_label()) {
            t.row.device_model = pooled(&t.row.device_model, label);
        }
    }
}

/// The name of a model's pool of trials with `label`.
pub fn pooled(model: &str, label: &str) -> String {
    format!("{model} ({label})")
}
