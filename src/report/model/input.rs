//! What a report is built from: one campaign as the store holds it, as columns.

use std::collections::HashMap;

use crate::measure::UntetherMode;
use crate::plan::Plan;
use crate::report::model::power_bands::{PowerBand, load_power_bands};
use crate::store::{AttemptRecord, CampaignColumns, CampaignRecord, Store, StoreError, TrialRecord};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(
        "campaign {campaign}: its stored plan cannot be read ({source}); fix: report it with the lab version that ran it ({tool_version})"
    )]
    Plan { campaign: String, tool_version: String, source: serde_json::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the report files (the error names the file).
    #[error(transparent)]
    Files(#[from] std::io::Error),
}

/// One campaign's rows, with its plan parsed. From the store the plan has no trials
/// (`Plan::head_from_json`): every planned trial is in `cols`.
#[derive(Debug, Clone)]
pub struct CampaignData {
    pub campaign: CampaignRecord,
    pub plan: Plan,
    /// Every planned trial with its outcome, every attempt with its measurements.
    pub cols: CampaignColumns,
    /// The power monitor's bands (its traces' quartiles over the soak) per model × variant;
    /// read from the store, none for in-memory campaigns.
    pub power: Vec<PowerBand>,
}

impl CampaignData {
    /// From records (tests, in-memory campaigns): the plan is parsed from the record.
    pub fn new(
        campaign: CampaignRecord,
        trials: Vec<TrialRecord>,
        attempts: Vec<AttemptRecord>,
    ) -> Result<Self, ReportError> {
        let plan =
            serde_json::from_value(campaign.plan_json.clone()).map_err(|source| plan_error(&campaign, source))?;
        Ok(Self::from_columns(campaign, plan, CampaignColumns::from_records(&trials, &attempts)))
    }

    /// Trials untethered in a way that must not be pooled with power-cut ones
    /// ([`UntetherMode::pool_label`]) are reported under their own model name,
    /// `Pixel 8 (soft-untethered)`, in every section and export.
    pub fn from_columns(campaign: CampaignRecord, plan: Plan, mut cols: CampaignColumns) -> Self {
        pool_models(&mut cols);
        CampaignData { campaign, plan, cols, power: Vec::new() }
    }
}

fn plan_error(campaign: &CampaignRecord, source: serde_json::Error) -> ReportError {
    ReportError::Plan { campaign: campaign.id.clone(), tool_version: campaign.tool_version.clone(), source }
}

/// Campaign `id` with its `plan_json` left `Null`, and its plan without the trials.
pub fn load_head(store: &Store, id: &str) -> Result<(CampaignRecord, Plan), ReportError> {
    let (campaign, plan_text) = store.campaign_head(id)?;
    let plan = Plan::head_from_json(&plan_text).map_err(|source| plan_error(&campaign, source))?;
    Ok((campaign, plan))
}

/// Reads campaign `id` for its report: the campaign with its plan's head, the columns in
/// one read transaction, the battery series of the attempts whose curves are drawn, and
/// the power monitor's bands.
pub fn load(store: &Store, id: &str) -> Result<CampaignData, ReportError> {
    load_stamped(store, id).map(|(data, _)| data)
}

/// [`load`], and the store's [`Store::report_stamp`] of what was read.
pub fn load_stamped(store: &Store, id: &str) -> Result<(CampaignData, String), ReportError> {
    let (campaign, plan) = load_head(store, id)?;
    let (cols, stamp) = store.read_columns_stamped(id)?;
    let mut data = CampaignData::from_columns(campaign, plan, cols);
    let drawn = crate::report::model::curves::sample_curves(&data.cols);
    let keys: Vec<(u32, u32)> = drawn
        .iter()
        .map(|&a| (data.cols.t_idx[data.cols.a_trial[a as usize] as usize], data.cols.a_attempt[a as usize]))
        .collect();
    let points = store.battery_points(id, &keys)?;
    data.cols.battery = drawn.into_iter().zip(points).filter_map(|(a, p)| Some((a, p?))).collect();
    data.power = load_power_bands(store, id, &data.cols)?;
    Ok((data, stamp))
}

/// The model a trial is reported under: its device's model, with the pool label of the
/// attempt that counts (the valid one, else the last).
fn pool_models(c: &mut CampaignColumns) {
    let mut mode: HashMap<u32, (bool, u32, UntetherMode)> = HashMap::new();
    for a in 0..c.attempts() {
        let Some(m) = c.a_untether[a] else { continue };
        let key = (c.a_valid[a], c.a_attempt[a], m);
        let e = mode.entry(c.a_trial[a]).or_insert(key);
        if (key.0, key.1) > (e.0, e.1) {
            *e = key;
        }
    }
    let mut rows: Vec<(u32, &'static str)> =
        mode.into_iter().filter_map(|(t, (_, _, m))| Some((t, m.pool_label()?))).collect();
    // Interned in trial order, so the symbols do not depend on the map's order.
    rows.sort_unstable();
    for (t, label) in rows {
        let model = pooled(c.names.name(c.t_model[t as usize]), label);
        c.t_model[t as usize] = c.names.intern(&model);
    }
}

/// The name of a model's pool of trials with `label`.
pub fn pooled(model: &str, label: &str) -> String {
    format!("{model} ({label})")
}
