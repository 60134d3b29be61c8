//! A small hand-built campaign for report tests: one model, two devices, two variants,
//! four repeats; one trial retried after an invalid attempt, one failed, one pending.

use serde_json::json;

use crate::config::{Order, Platform, StatsSettings};
use crate::measure::Measurement;
use crate::plan::{Plan, PlannedDevice, Variant};
use crate::report::CampaignData;
use crate::store::{
    AttemptRecord, AttemptStatus, CampaignRecord, CampaignStatus, NewCampaign, PlannedTrialRow, Store, TrialOutcome,
    TrialRecord,
};

pub(crate) const MODEL: &str = "iPhone 6s";

/// (device, variant, repeat, block, device order, outcome)
const TRIALS: [(&str, &str, u32, u32, u32, TrialOutcome); 8] = [
    ("sim-iphone-1", "control", 0, 0, 0, TrialOutcome::Valid),
    ("sim-iphone-1", "envoy-poll", 0, 0, 1, TrialOutcome::Valid),
    ("sim-iphone-2", "envoy-poll", 1, 0, 0, TrialOutcome::Valid),
    ("sim-iphone-2", "control", 1, 0, 1, TrialOutcome::Valid),
    ("sim-iphone-1", "control", 2, 1, 2, TrialOutcome::Failed),
    ("sim-iphone-1", "envoy-poll", 2, 1, 3, TrialOutcome::Valid),
    ("sim-iphone-2", "control", 3, 1, 2, TrialOutcome::Valid),
    ("sim-iphone-2", "envoy-poll", 3, 1, 3, TrialOutcome::Pending),
];

pub(crate) fn variant(name: &str, baseline: bool) -> Variant {
    Variant {
        name: name.into(),
        build: name.into(),
        config: "default".into(),
        baseline_build: baseline,
        default_config: true,
    }
}

pub(crate) fn plan(trials: Vec<PlannedTrialRow>) -> Plan {
    Plan {
        runbook: "envoy-battery-audit".into(),
        seed: 2019,
        order: Order::Balanced,
        duration_s: 3600.0,
        cooldown_s: 300.0,
        repeats: 4,
        max_attempts: 2,
        variants: vec![variant("control", true), variant("envoy-poll", false)],
        devices: ["sim-iphone-1", "sim-iphone-2"]
            .iter()
            .map(|d| PlannedDevice {
                name: d.to_string(),
                model: MODEL.into(),
                platform: Platform::Sim,
                trials: 4,
                device_time_s: 4.0 * 3900.0,
            })
            .collect(),
        trials,
        metrics: vec!["battery_drop_pct".into(), "cpu_pct".into(), "requests".into()],
        statistics: StatsSettings::default(),
        expected_requests: Some(18000),
        adaptive: None,
        looks: Vec::new(),
    }
}

pub(crate) fn campaign_record(id: &str, plan: &Plan) -> CampaignRecord {
    CampaignRecord {
        id: id.into(),
        runbook_name: plan.runbook.clone(),
        runbook_path: "runbooks/envoy-battery-audit.toml".into(),
        runbook_text: String::new(),
        runbook_sha256: "5f1c0de2".into(),
        lab_text: String::new(),
        lab_sha256: "9a7e11b4".into(),
        content_hashes: json!({ "control.ipa": "aa01", "envoy-poll.ipa": "bb02" }),
        tool_version: "0.1.0".into(),
        seed: plan.seed,
        created_at: "2025-03-01T09:00:00Z".into(),
        finished_at: Some("2025-03-01T17:40:00Z".into()),
        status: CampaignStatus::Done,
        runner_pid: None,
        runner_start: None,
        note: None,
        plan_json: serde_json::to_value(plan).expect("plan serializes"),
        footprint_json: Some(json!({ "cpu_s": 1.5, "wakeups": 340 })),
    }
}

pub(crate) fn attempt(
    campaign: &str,
    trial_idx: u32,
    attempt: u32,
    reasons: &[&str],
    values: &[(&str, f64, &str)],
) -> AttemptRecord {
    AttemptRecord {
        campaign: campaign.into(),
        trial_idx,
        attempt,
        // Empty: the planned device (as in stores from before attempts kept theirs).
        device: String::new(),
        status: if reasons.is_empty() { AttemptStatus::Valid } else { AttemptStatus::Invalid },
        reasons: reasons.iter().map(|r| r.to_string()).collect(),
        phases: vec![("soak".into(), 3600.0)],
        started_at: "2025-03-01T09:00:00Z".into(),
        ended_at: "2025-03-01T10:05:00Z".into(),
        soak_start_s: 0.0,
        artifact_dir: format!("artifacts/{campaign}/{trial_idx:04}"),
        measurements: values.iter().map(|(m, v, u)| Measurement::new(m, *v, u, "sim model")).collect(),
        series: Vec::new(),
        state_before: json!({}),
        state_after: json!({}),
        state_soak: serde_json::Value::Null,
        untether: None,
        labels: Vec::new(),
        attestations: Vec::new(),
    }
}

fn m(battery: f64, cpu: f64, requests: f64) -> Vec<(&'static str, f64, &'static str)> {
    vec![("cpu_pct", cpu, "%"), ("requests", requests, "count"), ("battery_drop_pct", battery, "%")]
}

/// A campaign as records, for tests that change an attempt or a trial before the report
/// reads it: change them, then [`Records::data`].
#[derive(Debug, Clone)]
pub(crate) struct Records {
    pub campaign: CampaignRecord,
    pub plan: Plan,
    pub trials: Vec<TrialRecord>,
    pub attempts: Vec<AttemptRecord>,
}

impl Records {
    /// What the report reads: the columns of these records, with this plan.
    pub fn data(&self) -> CampaignData {
        let mut campaign = self.campaign.clone();
        campaign.plan_json = serde_json::to_value(&self.plan).expect("plan serializes");
        CampaignData::new(campaign, self.trials.clone(), self.attempts.clone()).expect("fixture plan parses")
    }

    /// Stores these records as `lab run` would: the campaign with its plan, then each
    /// attempt, for tests that read them back through the store.
    pub fn store_into(&self, store: &Store) {
        let mut new = new_campaign(&self.campaign, &self.trials);
        new.plan_json = serde_json::to_string(&self.plan).expect("plan serializes");
        store.create_campaign(&new, self.plan.max_attempts, 1).expect("create the campaign");
        for a in &self.attempts {
            store.record_attempt(a.clone()).expect("record an attempt");
        }
    }
}

/// What `lab run` creates for campaign `c` with `trials` planned.
pub(crate) fn new_campaign(c: &CampaignRecord, trials: &[TrialRecord]) -> NewCampaign {
    NewCampaign {
        id: c.id.clone(),
        runbook_name: c.runbook_name.clone(),
        runbook_path: c.runbook_path.clone(),
        runbook_text: c.runbook_text.clone(),
        runbook_sha256: c.runbook_sha256.clone(),
        lab_text: c.lab_text.clone(),
        lab_sha256: c.lab_sha256.clone(),
        content_hashes: c.content_hashes.clone(),
        tool_version: c.tool_version.clone(),
        seed: c.seed,
        created_at: c.created_at.clone(),
        planned_trials: trials.iter().map(|t| t.row.clone()).collect(),
        plan_json: c.plan_json.to_string(),
    }
}

/// The fixture campaign under campaign id `id` (ids differ between runs; nothing
/// deterministic may depend on them).
pub(crate) fn campaign(id: &str) -> CampaignData {
    records(id).data()
}

/// The fixture campaign as records.
pub(crate) fn records(id: &str) -> Records {
    let trials: Vec<PlannedTrialRow> = TRIALS
        .iter()
        .enumerate()
        .map(|(i, (device, variant, repeat, block, order, _))| PlannedTrialRow {
            idx: i as u32,
            key: format!("{i:04}-{device}-{variant}-r{repeat}"),
            device: device.to_string(),
            device_model: MODEL.into(),
            variant: variant.to_string(),
            build: variant.to_string(),
            config: "default".into(),
            repeat: *repeat,
            block: *block,
            device_order: *order,
        })
        .collect();
    let plan = plan(trials);
    let record = campaign_record(id, &plan);
    let trial_records = plan
        .trials
        .iter()
        .cloned()
        .zip(TRIALS)
        .map(|(row, t)| {
            let attempts = match row.idx {
                2 | 4 => 2,
                7 => 0,
                _ => 1,
            };
            TrialRecord { row, attempts, outcome: t.5 }
        })
        .collect();
    // Stored out of order on purpose: reports must sort.
    let attempts = vec![
        attempt(id, 5, 0, &[], &m(10.1, 190.0, 17995.0)),
        attempt(id, 0, 0, &[], &m(3.1, 12.0, 18000.0)),
        attempt(id, 1, 0, &[], &m(9.8, 185.0, 18000.0)),
        attempt(
            id,
            2,
            0,
            &["charged for 12 s during the soak", "endpoint saw 17012 requests, expected 18000 ± 2%"],
            &m(0.4, 184.0, 17012.0),
        ),
        attempt(id, 2, 1, &[], &m(10.4, 180.0, 18005.0)),
        attempt(id, 3, 0, &[], &m(3.3, 12.5, 17990.0)),
        attempt(id, 4, 0, &["app died during the soak"], &m(1.0, 0.0, 4000.0)),
        attempt(id, 4, 1, &["app died during the soak"], &[]),
        attempt(id, 6, 0, &[], &m(3.2, 11.5, 18010.0)),
    ];
    let mut attempts = attempts;
    // One attempt's state, from each kind of source.
    let known = |value: serde_json::Value, from: &str| json!({"state": "known", "value": value, "from": from});
    attempts[1].state_before =
        json!({"brightness_pct": known(json!(50.0), "set"), "low_power": known(json!(false), "app")});
    attempts[1].state_soak = json!({"brightness_pct": known(json!(52.0), "powerlog")});
    attempts[1].state_after = json!({"bluetooth_on": known(json!(false), "operator")});
    Records { campaign: record, plan, trials: trial_records, attempts }
}
