//! The operator desk: the runner's side of operator steps.
//!
//! A step is put in the store (`operator_steps`, pending) and announced as an event; the
//! runner then waits for its answer, which any process writes with `lab confirm` (the
//! terminal prompt of `lab run` is one such answerer). The wait checks the store once a
//! second — only while a step is open, never during a soak — and ends at
//! `timeouts.operator`: the step expires and the attempt is invalid, the campaign goes on.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::event::{Event, EventSink};
use super::trial::{now_rfc3339, stopped};
use crate::config::{AttestKey, StepWhen};
use crate::store::{Attestation, NewStep, StepStatus, Store, StoreError};
use crate::tether::{Operator, TetherError};
use crate::text::duration;

/// How often an open step's row is read.
const POLL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(
        "operator step `{step}` ({when}: {text}) not answered within {after} (timeouts.operator); fix: answer with `lab confirm {campaign} --device {device} --step {step}` while it waits, or raise timeouts.operator"
    )]
    Expired { campaign: String, device: String, step: String, when: &'static str, text: String, after: String },
    #[error("stopped by the user while operator step `{step}` waited")]
    Cancelled { step: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One step put to the operator.
#[derive(Debug, Clone)]
pub struct StepAsk<'a> {
    pub device: &'a str,
    pub step: &'a str,
    pub when: StepWhen,
    pub text: &'a str,
    pub attest: &'a [AttestKey],
    /// `false`: only said (`confirm = false`), not waited for.
    pub confirm: bool,
}

pub struct OperatorDesk {
    store: Store,
    campaign: String,
    events: EventSink,
    limit: Duration,
    shutdown: watch::Receiver<bool>,
    /// Device → the attempt it is on (trial key, attempt number).
    current: Mutex<HashMap<String, (String, u32)>>,
    /// Device → what its current attempt's steps attested.
    answers: Mutex<HashMap<String, Vec<Attestation>>>,
    /// Device → its answered before-campaign steps (asked once per device and run).
    campaign_answers: Mutex<HashMap<String, Vec<Attestation>>>,
    /// (device, step) of before-campaign steps only said (`confirm = false`) in this run.
    said: Mutex<std::collections::HashSet<(String, String)>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OperatorDesk {
    pub fn new(
        store: Store,
        campaign: &str,
        events: EventSink,
        limit: Duration,
        shutdown: watch::Receiver<bool>,
    ) -> OperatorDesk {
        OperatorDesk {
            store,
            campaign: campaign.into(),
            events,
            limit,
            shutdown,
            current: Mutex::default(),
            answers: Mutex::default(),
            campaign_answers: Mutex::default(),
            said: Mutex::default(),
        }
    }

    /// Steps a crashed runner of this campaign left open: nobody waits for them any more.
    pub fn abandon_leftovers(&self) -> Result<usize, StoreError> {
        self.store.abandon_steps(&self.campaign)
    }

    /// A new attempt on `device`: its steps' answers start empty.
    pub fn begin_attempt(&self, device: &str, trial_key: &str, attempt: u32) {
        locked(&self.current).insert(device.into(), (trial_key.into(), attempt));
        locked(&self.answers).remove(device);
    }

    /// What the operator attested for the attempt `device` is on, the run's
    /// before-campaign answers first.
    pub fn attested(&self, device: &str) -> Vec<Attestation> {
        let mut out = locked(&self.campaign_answers).get(device).cloned().unwrap_or_default();
        out.extend(locked(&self.answers).get(device).cloned().unwrap_or_default());
        out
    }

    /// Whether `device` has had the before-campaign step `step` in this run (answered, or
    /// said when it is not confirmed).
    pub fn done_for_campaign(&self, device: &str, step: &str) -> bool {
        locked(&self.campaign_answers).get(device).is_some_and(|v| v.iter().any(|a| a.step == step))
            || locked(&self.said).contains(&(device.to_string(), step.to_string()))
    }

    /// Asks a step and waits for its answer (bounded by `timeouts.operator`). A step that
    /// is not to be confirmed is only announced.
    pub async fn ask(&self, ask: &StepAsk<'_>) -> Result<Option<Attestation>, StepError> {
        let current = locked(&self.current).get(ask.device).cloned();
        let (trial_key, attempt) = match (&current, ask.when) {
            (_, StepWhen::BeforeCampaign) | (None, _) => (None, None),
            (Some((k, a)), _) => (Some(k.clone()), Some(*a)),
        };
        let deadline = chrono::Utc::now() + chrono::Duration::from_std(self.limit).unwrap_or(chrono::TimeDelta::MAX);
        let event = |id: i64| Event::OperatorStep {
            id,
            campaign: self.campaign.clone(),
            device: ask.device.into(),
            trial: trial_key.clone().unwrap_or_default(),
            step: ask.step.into(),
            when: ask.when.as_str().into(),
            text: ask.text.into(),
            attest: ask.attest.iter().map(|k| k.as_str().to_string()).collect(),
            confirm: ask.confirm,
            timeout_s: self.limit.as_secs(),
        };
        if !ask.confirm {
            if ask.when == StepWhen::BeforeCampaign {
                locked(&self.said).insert((ask.device.into(), ask.step.into()));
            }
            self.events.emit(event(0));
            return Ok(None);
        }
        let new = NewStep {
            campaign: self.campaign.clone(),
            device: ask.device.into(),
            trial_key: trial_key.clone(),
            attempt,
            step: ask.step.into(),
            when: ask.when.as_str().into(),
            text: ask.text.into(),
            attest: ask.attest.iter().map(|k| k.as_str().to_string()).collect(),
            asked_at: now_rfc3339(),
            deadline: deadline.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        let store = self.store.clone();
        let id = spawn_store(move || store.ask_step(&new)).await?;
        self.events.emit(event(id));
        let answer = self.wait(id, ask).await?;
        self.events.emit(Event::OperatorAnswered {
            device: ask.device.into(),
            step: ask.step.into(),
            by: answer.by.clone(),
            values: answer.values.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        });
        let target = if ask.when == StepWhen::BeforeCampaign { &self.campaign_answers } else { &self.answers };
        locked(target).entry(ask.device.into()).or_default().push(answer.clone());
        Ok(Some(answer))
    }

    async fn wait(&self, id: i64, ask: &StepAsk<'_>) -> Result<Attestation, StepError> {
        let until = tokio::time::Instant::now() + self.limit;
        let mut shutdown = self.shutdown.clone();
        loop {
            let store = self.store.clone();
            let row = spawn_store(move || store.step(id)).await?;
            if let Some(r) = row.filter(|r| r.status == StepStatus::Answered) {
                return Ok(Attestation {
                    step: r.asked.step,
                    when: r.asked.when,
                    text: r.asked.text,
                    by: r.answered_by.unwrap_or_default(),
                    at: r.answered_at.unwrap_or_default(),
                    values: r.values,
                });
            }
            let now = tokio::time::Instant::now();
            let close = |status| {
                let store = self.store.clone();
                spawn_store(move || store.close_step(id, status))
            };
            if now >= until {
                // An answer that came in at the last moment still counts.
                if !close(StepStatus::Expired).await? {
                    continue;
                }
                self.events.emit(Event::OperatorExpired { device: ask.device.into(), step: ask.step.into() });
                return Err(StepError::Expired {
                    campaign: self.campaign.clone(),
                    device: ask.device.into(),
                    step: ask.step.into(),
                    when: ask.when.as_str(),
                    text: ask.text.into(),
                    after: duration::seconds(self.limit),
                });
            }
            let stopped = tokio::select! {
                _ = tokio::time::sleep(POLL.min(until - now)) => false,
                _ = stopped(&mut shutdown) => true,
            };
            if stopped {
                close(StepStatus::Abandoned).await?;
                return Err(StepError::Cancelled { step: ask.step.into() });
            }
        }
    }
}

async fn spawn_store<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| Err(StoreError::Internal(e.to_string())))
}

/// The manual tether's steps go through the same desk as the runbook's.
#[async_trait]
impl Operator for OperatorDesk {
    async fn confirm(&self, device: &str, step: &str, when: StepWhen, instruction: &str) -> Result<(), TetherError> {
        let ask = StepAsk { device, step, when, text: instruction, attest: &[], confirm: true };
        match self.ask(&ask).await {
            Ok(_) => Ok(()),
            Err(e) => Err(TetherError::Step { device: device.into(), detail: e.to_string() }),
        }
    }
}
