//! What a report is built from: one campaign as the store holds it.

use crate::plan::Plan;
use crate::store::{AttemptRecord, CampaignRecord, TrialRecord};

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
    /// Parses the plan stored with the campaign.
    pub fn new(
        campaign: CampaignRecord,
        trials: Vec<TrialRecord>,
        attempts: Vec<AttemptRecord>,
    ) -> Result<Self, ReportError> {
        let plan = serde_json::from_value(campaign.plan_json.clone()).map_err(|source| ReportError::Plan {
            campaign: campaign.id.clone(),
            tool_version: campaign.tool_version.clone(),
            source,
        })?;
        Ok(CampaignData { campaign, plan, trials, attempts })
    }
}
