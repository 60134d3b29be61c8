//! `Review`: what a scheduled campaign is checked for once it ran (docs/schedule.md,
//! "What is compared with what"). Screening: each gating variant × model × metric is
//! compared with its baseline (the verdict rule of `lab compare`, Holm over the
//! variant's gating metrics), and the history of campaign means is searched for change
//! points (E-divisive, `stats::change_points`). A trigger is not an alert: a
//! confirmation campaign runs the reference build and the current one interleaved on
//! the same devices, and only a confirmed regression is sent. Every step is recorded
//! before the next, so a runner that takes over the slot goes on where this one stopped.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ScheduleError;
use super::baseline::baseline_campaigns;
use super::build_cache::BuildCache;
use super::confirm::{CampaignSide, ConfirmRequest, confirm_plan};
use super::slot_runner::{Job, JobRunbook, Launcher, SlotOutcome};
use crate::config::{Lab, Schedule};
use crate::notify;
use crate::plan::Plan;
use crate::report::{self, CompareModel, MetricComparison};
use crate::stats::{ChangePoint, Direction, Verdict, change_points};
use crate::store::{AlertRow, AlertState, CampaignStatus, FindingRow, FindingState, Store, SummaryRow};

/// What a slot's review did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReviewReport {
    /// The slot's findings as they ended.
    pub findings: Vec<FindingRow>,
    pub confirmations: Vec<ConfirmationRun>,
    pub alerts: Vec<AlertRow>,
    /// A regression was confirmed (or, with confirmation off, found): `run-due` exits 5.
    pub regression: bool,
    /// A confirmation was stopped (SIGTERM): the slot stays unfinished, the next runner
    /// goes on with it.
    pub interrupted: bool,
    pub notes: Vec<String>,
    /// The screening's verdict on every gating series (this week against its baseline).
    pub screened: Vec<Screened>,
    /// What the confirmation campaigns printed.
    #[serde(skip)]
    pub output: String,
}

/// One gating series as the screening judged it.
#[derive(Debug, Clone, Serialize)]
pub struct Screened {
    pub model: String,
    pub variant: String,
    pub metric: String,
    pub verdict: Verdict,
    /// For `inconclusive`: how many more trials per arm the sample-size advice asks for.
    pub more_trials_per_arm: Option<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConfirmationRun {
    pub variant: String,
    pub campaign: String,
    pub trials_per_arm: u32,
    #[serde(flatten)]
    pub outcome: SlotOutcome,
}

pub struct Review<'a> {
    pub lab: &'a Lab,
    pub store: &'a Store,
    pub schedule: &'a Schedule,
    /// The slot's due time, as stored.
    pub due_utc: &'a str,
    /// The slot's campaign.
    pub campaign: &'a str,
    /// Now, as stored.
    pub at: &'a str,
    /// Until when a confirmation waits for devices others hold.
    pub deadline: Option<std::time::Instant>,
}

/// One earlier slot campaign of the schedule that counts for history and baselines.
struct Week {
    campaign: String,
    rows: Vec<SummaryRow>,
}

/// The key of a series: (model, variant, metric).
type Key = (String, String, String);

fn key_of(r: &SummaryRow) -> Key {
    (r.model.clone(), r.variant.clone(), r.metric.clone())
}

/// Whether a finding is about the series `k`.
fn of_series(f: &FindingRow, k: &Key) -> bool {
    (f.model.as_str(), f.variant.as_str(), f.metric.as_str()) == (k.0.as_str(), k.1.as_str(), k.2.as_str())
}

/// A campaign's stored plan.
fn plan_of(record: &crate::store::CampaignRecord) -> Result<Plan, ScheduleError> {
    serde_json::from_value(record.plan_json.clone())
        .map_err(|e| ScheduleError::Review(format!("campaign {}: stored plan unreadable: {e}", record.id)))
}

impl Review<'_> {
    pub async fn run(&self, launcher: &dyn Launcher) -> Result<ReviewReport, ScheduleError> {
        let mut rep = ReviewReport::default();
        let name = &self.schedule.name;
        if self.store.findings_of_slot(name, self.due_utc)?.is_empty() {
            let found = self.screen(&mut rep)?;
            self.store.insert_findings(&found)?;
        }
        let findings = self.store.findings_of_slot(name, self.due_utc)?;
        let mut groups: BTreeMap<String, Vec<FindingRow>> = BTreeMap::new();
        for f in findings.into_iter().filter(|f| f.state == FindingState::Confirming) {
            groups.entry(f.variant.clone()).or_default().push(f);
        }
        for (variant, group) in groups {
            self.confirm(&variant, &group, launcher, &mut rep).await?;
            if rep.interrupted {
                rep.findings = self.store.findings_of_slot(name, self.due_utc)?;
                return Ok(rep);
            }
        }
        rep.findings = self.store.findings_of_slot(name, self.due_utc)?;
        self.write_history(&mut rep);
        self.alert(&mut rep).await?;
        Ok(rep)
    }

    /// Earlier finished slot campaigns of the schedule, oldest first.
    fn weeks(&self) -> Result<Vec<Week>, ScheduleError> {
        let mut out = Vec::new();
        for slot in self.store.slots(Some(&self.schedule.name))? {
            let Some(c) = slot.campaign.as_deref() else { continue };
            let ran = matches!(slot.outcome.as_deref(), Some("ok") | Some("trials-failed"));
            if slot.due_utc.as_str() >= self.due_utc || !ran || c == self.campaign {
                continue;
            }
            if !self.store.campaign(c).is_ok_and(|r| r.status == CampaignStatus::Done) {
                continue;
            }
            out.push(Week { campaign: c.to_string(), rows: self.store.summaries(c)? });
        }
        Ok(out)
    }

    fn screen(&self, rep: &mut ReviewReport) -> Result<Vec<FindingRow>, ScheduleError> {
        let record = self.store.campaign(self.campaign)?;
        let plan = plan_of(&record)?;
        let settings = &plan.statistics;
        let current = self.store.summaries(self.campaign)?;
        if current.is_empty() {
            rep.notes.push(format!("campaign {} has no stored summaries: nothing to compare", self.campaign));
            return Ok(Vec::new());
        }
        let weeks = self.weeks()?;
        let earlier = self.store.findings_of_schedule(&self.schedule.name)?;
        let gating: Vec<&SummaryRow> = current.iter().filter(|r| r.gating && r.n >= 2).collect();

        // The baseline of every series, and the pooled comparison of the current campaign with it.
        let mut baselines: BTreeMap<Key, Vec<String>> = BTreeMap::new();
        let mut before_owned: Vec<SummaryRow> = Vec::new();
        for r in &gating {
            let k = key_of(r);
            let confirmed = earlier
                .iter()
                .filter(|f| of_series(f, &k))
                .filter(|f| f.state == FindingState::Confirmed)
                .filter_map(|f| f.change_point.clone())
                .next_back();
            let order: Vec<&str> = weeks.iter().map(|w| w.campaign.as_str()).collect();
            let chosen = match baseline_campaigns(&self.schedule.baseline, &order, confirmed.as_deref()) {
                Ok(c) => c,
                Err(why) => {
                    let note = why.to_string();
                    if !rep.notes.contains(&note) {
                        rep.notes.push(note);
                    }
                    continue;
                }
            };
            for c in &chosen {
                let rows = match weeks.iter().find(|w| &w.campaign == c) {
                    Some(w) => w.rows.iter().find(|x| key_of(x) == k).cloned(),
                    None => self.store.summaries(c)?.into_iter().find(|x| key_of(x) == k),
                };
                before_owned.extend(rows);
            }
            baselines.insert(k, chosen);
        }
        let before_rows: Vec<&SummaryRow> = before_owned.iter().collect();
        let before = report::pooled_models(&before_rows, settings.confidence);
        let after = report::pooled_models(&gating, settings.confidence);
        let (compared, _) = report::compare_models(&before, &after, "baseline", self.campaign, settings);

        let mut out = Vec::new();
        for r in &gating {
            let k = key_of(r);
            let Some(chosen) = baselines.get(&k) else { continue };
            let comparison = comparison_of(&compared, &k);
            if let Some(c) = &comparison {
                rep.screened.push(Screened {
                    model: k.0.clone(),
                    variant: k.1.clone(),
                    metric: k.2.clone(),
                    verdict: c.verdict,
                    more_trials_per_arm: (c.verdict == Verdict::Inconclusive)
                        .then(|| c.advice_trials_per_arm.map(|n| n.saturating_sub(c.stats.n_treatment as u32)))
                        .flatten(),
                });
            }
            let by_verdict = comparison.as_ref().is_some_and(|c| matches!(c.verdict, Verdict::Worse | Verdict::Better));

            // The history of this series, oldest first, the current campaign last.
            let mut ids = Vec::new();
            let mut means = Vec::new();
            for w in &weeks {
                if let Some(m) = w.rows.iter().find(|x| key_of(x) == k).and_then(|x| x.mean) {
                    ids.push(w.campaign.clone());
                    means.push(m);
                }
            }
            let Some(mean) = r.mean else { continue };
            ids.push(self.campaign.to_string());
            means.push(mean);
            let new_point = match change_points(&means, &self.schedule.changes) {
                Ok(points) => points
                    .into_iter()
                    .filter(|p| p.relative_change().is_some_and(|c| c.abs() > settings.practical_threshold))
                    .rfind(|p| {
                        !earlier
                            .iter()
                            .any(|f| of_series(f, &k) && f.change_point.as_deref() == Some(ids[p.index].as_str()))
                    }),
                Err(e) => {
                    rep.notes.push(format!("{} {} {}: change points: {e}", k.0, k.1, k.2));
                    None
                }
            };
            if !by_verdict && new_point.is_none() {
                continue;
            }
            let direction = match (&comparison, &new_point) {
                (Some(c), _) if by_verdict => c.verdict,
                (_, Some(p)) if Direction::of(&k.2) == Direction::LowerIsBetter => {
                    if p.relative_change().unwrap_or(0.0) > 0.0 { Verdict::Worse } else { Verdict::Better }
                }
                _ => continue,
            };
            // The build a confirmation runs as "before": the newest baseline week, or for a
            // change point the week just before it.
            let reference = match (&new_point, by_verdict) {
                (_, true) => chosen.last().cloned(),
                (Some(p), false) => p.index.checked_sub(1).map(|i| ids[i].clone()),
                (None, false) => None,
            };
            let Some(reference) = reference else { continue };
            // A pinned baseline may be a campaign outside the schedule.
            let reference_rows = match weeks.iter().find(|w| w.campaign == reference) {
                Some(w) => w.rows.clone(),
                None => self.store.summaries(&reference)?,
            };
            let reference_sha = reference_rows.iter().find(|x| key_of(x) == k).and_then(|x| x.build_sha256.clone());
            let (state, note) = if reference_sha.is_some() && reference_sha == r.build_sha256 {
                (
                    FindingState::SameBuild,
                    Some(format!(
                        "moved without a build change (the same build as campaign {reference}): the lab, the devices \
                         or the workload changed; not confirmed, not alerted"
                    )),
                )
            } else if self.schedule.confirm.enabled {
                (FindingState::Confirming, None)
            } else {
                (FindingState::Unconfirmed, Some("confirmation is off ([schedule.confirm] enabled = false)".into()))
            };
            let change_point = match &new_point {
                Some(p) => ids[p.index].clone(),
                None => self.campaign.to_string(),
            };
            out.push(FindingRow {
                id: 0,
                schedule: self.schedule.name.clone(),
                due_utc: self.due_utc.to_string(),
                campaign: self.campaign.to_string(),
                model: k.0.clone(),
                variant: k.1.clone(),
                metric: k.2.clone(),
                direction: direction_text(direction).into(),
                by_verdict,
                change_point: Some(change_point),
                baseline: serde_json::json!({
                    "policy": policy_text(&self.schedule.baseline),
                    "campaigns": chosen,
                    "reference": reference,
                }),
                screen: serde_json::json!({
                    "comparison": comparison,
                    "change_point": new_point.map(|p| point_json(&p, &ids)),
                }),
                decided_at: (state != FindingState::Confirming).then(|| self.at.to_string()),
                state,
                confirm_campaign: None,
                confirm: None,
                note,
            });
        }
        Ok(out)
    }

    async fn confirm(
        &self,
        variant: &str,
        group: &[FindingRow],
        launcher: &dyn Launcher,
        rep: &mut ReviewReport,
    ) -> Result<(), ScheduleError> {
        let ids: Vec<i64> = group.iter().map(|f| f.id).collect();
        let current = self.store.campaign(self.campaign)?;
        let reference_id = group[0].baseline["reference"].as_str().unwrap_or_default().to_string();
        let decide_all = |state: FindingState, note: &str| -> Result<(), ScheduleError> {
            for f in group {
                self.store.decide_finding(f.id, state, None, Some(note), self.at)?;
            }
            Ok(())
        };
        let reference = match self.store.campaign(&reference_id) {
            Ok(r) => r,
            Err(e) => return decide_all(FindingState::Unconfirmable, &format!("reference campaign: {e}")),
        };
        let plan = plan_of(&current)?;
        let Some(v) = plan.variant(variant).cloned() else {
            return decide_all(FindingState::Unconfirmable, &format!("variant {variant} is not in the plan"));
        };
        let c = self.schedule.confirm;
        let advice = group
            .iter()
            .filter_map(|f| f.screen["comparison"]["advice_trials_per_arm"].as_u64())
            .max()
            .map_or(c.max_trials_per_arm, |a| a as u32);
        let trials_per_arm = advice.clamp(c.min_trials_per_arm, c.max_trials_per_arm);
        let models: Vec<&str> = group.iter().map(|f| f.model.as_str()).collect();
        let mut devices: Vec<String> = Vec::new();
        for r in self.store.summaries(self.campaign)? {
            if models.contains(&r.model.as_str()) {
                for d in r.devices {
                    if !devices.contains(&d) {
                        devices.push(d);
                    }
                }
            }
        }
        let due = self.due_utc.to_string();
        let current_path = std::path::PathBuf::from(&current.runbook_path);
        let reference_path = std::path::PathBuf::from(&reference.runbook_path);
        let req = ConfirmRequest {
            schedule: &self.schedule.name,
            due_utc: &due,
            variant: &v,
            current: CampaignSide {
                id: &current.id,
                runbook_text: &current.runbook_text,
                runbook_path: &current_path,
                content_hashes: &current.content_hashes,
            },
            reference: CampaignSide {
                id: &reference.id,
                runbook_text: &reference.runbook_text,
                runbook_path: &reference_path,
                content_hashes: &reference.content_hashes,
            },
            devices,
            trials_per_arm,
            seed: current.seed,
        };
        let confirm = match confirm_plan(&req, &BuildCache::new(&self.lab.artifacts_dir)) {
            Ok(p) => p,
            Err(e) => return decide_all(FindingState::Unconfirmable, &e.0),
        };
        let id = match group.iter().find_map(|f| f.confirm_campaign.clone()) {
            Some(id) => id,
            None => {
                let id = self.store.free_campaign_id(&format!("{}-confirm", plan.runbook))?;
                self.store.set_confirm_campaign(&ids, &id)?;
                id
            }
        };
        let done = self.store.campaign(&id).is_ok_and(|r| r.status == CampaignStatus::Done);
        let outcome = if done {
            SlotOutcome::Ok
        } else {
            let dir = self.lab.artifacts_dir.join(&id);
            if std::fs::create_dir_all(&dir).is_ok() {
                // A copy next to its report: what exactly was run.
                let _ = std::fs::write(dir.join("confirm-runbook.toml"), &confirm.text);
            }
            let job = Job {
                runbook: JobRunbook::Text { text: confirm.text.clone(), source: confirm.source.clone() },
                id: id.clone(),
                seed: None,
                priority: self.schedule.priority,
                deadline: self.deadline,
            };
            let launch = launcher.launch(&job).await;
            rep.output.push_str(&launch.output);
            launch.outcome
        };
        rep.confirmations.push(ConfirmationRun {
            variant: variant.into(),
            campaign: id.clone(),
            trials_per_arm,
            outcome: outcome.clone(),
        });
        match outcome {
            SlotOutcome::Interrupted => {
                rep.interrupted = true;
                return Ok(());
            }
            SlotOutcome::Failed { message, .. } | SlotOutcome::Busy(message) => {
                return decide_all(FindingState::Inconclusive, &format!("confirmation {id} could not run: {message}"));
            }
            _ => {}
        }
        let data = crate::report::load(self.store, &id)
            .map_err(|e| ScheduleError::Review(format!("confirmation {id}: {e}")))?;
        let confirm_report = report::build_report(&data);
        let after_variant = data.plan.variants.iter().find(|v| v.build == "after").map(|v| v.name.clone());
        for f in group {
            let model = confirm_report.models.iter().find(|m| m.model == f.model);
            let rows: Vec<&report::MetricRow> = model
                .map(|m| m.rows.iter().filter(|r| Some(&r.variant) == after_variant.as_ref()).collect())
                .unwrap_or_default();
            let against_before = |r: &&report::MetricRow| r.comparisons.iter().find(|c| c.against == "before").cloned();
            let own = rows.iter().find(|r| r.metric == f.metric).and_then(against_before);
            let also_worse: Vec<serde_json::Value> = rows
                .iter()
                .filter(|r| r.gating && r.metric != f.metric)
                .filter_map(|r| against_before(r).filter(|c| c.verdict == Verdict::Worse).map(|c| (r, c)))
                .map(|(r, c)| serde_json::json!({ "metric": r.metric, "unit": r.unit, "comparison": c }))
                .collect();
            let wanted = if f.direction == "worse" { Verdict::Worse } else { Verdict::Better };
            let (state, note) = match own.as_ref().map(|c| c.verdict) {
                Some(v) if v == wanted => (FindingState::Confirmed, None),
                Some(Verdict::TooFewTrials) | None => {
                    (FindingState::Inconclusive, Some(format!("confirmation {id} had too few valid trials to decide")))
                }
                Some(v) => (
                    FindingState::NotConfirmed,
                    Some(format!("confirmation {id} found {}: a false alarm of the screening", verdict_text(v))),
                ),
            };
            let json = serde_json::json!({
                "campaign": id,
                "trials_per_arm": trials_per_arm,
                "comparison": own,
                "also_worse": also_worse,
            });
            self.store.decide_finding(f.id, state, Some(&json), note.as_deref(), self.at)?;
        }
        Ok(())
    }

    /// The runbook's history page, with this slot's marks, for the alert to link to.
    fn write_history(&self, rep: &mut ReviewReport) {
        let Ok(record) = self.store.campaign(self.campaign) else { return };
        let path = history_path(self.lab, &record.runbook_name);
        let written = report::history_for(self.store, self.lab, &record.runbook_name, &Default::default())
            .map_err(|e| e.to_string())
            .and_then(|h| {
                std::fs::create_dir_all(path.parent().unwrap_or(&path)).map_err(|e| e.to_string())?;
                crate::fs::write_atomic(&path, report::render_history_html(&h).as_bytes()).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            rep.notes.push(format!("history page {}: {e}", path.display()));
        }
    }

    /// Sends the slot's confirmed (or, with confirmation off, found) regressions, once
    /// per channel; improvements are recorded and drawn, not sent.
    async fn alert(&self, rep: &mut ReviewReport) -> Result<(), ScheduleError> {
        let alerting: Vec<&FindingRow> = rep
            .findings
            .iter()
            .filter(|f| f.direction == "worse")
            .filter(|f| matches!(f.state, FindingState::Confirmed | FindingState::Unconfirmed))
            .collect();
        if alerting.is_empty() {
            return Ok(());
        }
        rep.regression = true;
        let n = &self.schedule.notify;
        if n.webhook.is_none() && n.command.is_none() {
            return Ok(());
        }
        let alert = super::alert::alert_of(self, &alerting)?;
        let body = alert.body();
        let payload = String::from_utf8_lossy(&body).into_owned();
        let mut channels: Vec<(&str, String)> = Vec::new();
        if let Some(url) = &n.webhook {
            channels.push(("webhook", url.clone()));
        }
        if let Some(argv) = &n.command {
            channels.push(("command", serde_json::to_string(argv).unwrap_or_default()));
        }
        for (channel, target) in channels {
            let mut row = AlertRow {
                schedule: self.schedule.name.clone(),
                due_utc: self.due_utc.to_string(),
                channel: channel.into(),
                target: target.clone(),
                payload: payload.clone(),
                state: AlertState::Sending,
                tries: 0,
                response: None,
                error: None,
                at: self.at.to_string(),
            };
            if self.store.begin_alert(&row)? {
                let delivery = match (channel, &n.webhook, &n.command) {
                    ("webhook", Some(url), _) => notify::Webhook::new(url.clone()).post(&alert.alert_id, &body).await,
                    (_, _, Some(argv)) => notify::Command::new(argv.clone()).run(&body).await,
                    _ => continue,
                };
                row.state = if delivery.sent { AlertState::Sent } else { AlertState::Failed };
                row.tries = delivery.tries;
                row.response = delivery.response;
                row.error = delivery.error;
                self.store.end_alert(&row)?;
            }
        }
        rep.alerts = self
            .store
            .alerts_of_schedule(&self.schedule.name)?
            .into_iter()
            .filter(|a| a.due_utc == self.due_utc)
            .collect();
        Ok(())
    }
}

/// Where the history page of a runbook is written (`artifacts/_history/<runbook>.html`).
pub fn history_path(lab: &Lab, runbook: &str) -> std::path::PathBuf {
    lab.artifacts_dir.join("_history").join(format!("{runbook}.html"))
}

fn comparison_of(models: &[CompareModel], k: &Key) -> Option<MetricComparison> {
    let m = models.iter().find(|m| m.model == k.0)?;
    m.rows.iter().find(|r| r.variant == k.1 && r.metric == k.2)?.comparison.clone()
}

fn point_json(p: &ChangePoint, ids: &[String]) -> serde_json::Value {
    serde_json::json!({
        "index": p.index,
        "campaign": ids[p.index],
        "mean_before": p.test.mean_before,
        "mean_after": p.test.mean_after,
        "pvalue": p.test.pvalue,
        "magnitude": p.magnitude,
        "relative_change": p.relative_change(),
    })
}

fn direction_text(v: Verdict) -> &'static str {
    if v == Verdict::Better { "better" } else { "worse" }
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Worse => "worse",
        Verdict::Better => "better",
        Verdict::Changed => "changed",
        Verdict::Same => "the same (shown within the practical threshold)",
        Verdict::Inconclusive => "no decision (inconclusive)",
        Verdict::NoLargeChange => "no change as large as twice the practical threshold",
        Verdict::TooFewTrials => "too few trials",
    }
}

pub(super) fn policy_text(p: &crate::config::BaselinePolicy) -> &'static str {
    match p {
        crate::config::BaselinePolicy::LastChangePoint => "last-change-point",
        crate::config::BaselinePolicy::Previous => "previous",
        crate::config::BaselinePolicy::Campaign(_) => "campaign",
    }
}
