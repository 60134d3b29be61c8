//! `lab status`'s operator part: the steps campaigns wait on (with the `lab confirm` that
//! answers each) and the newest attestation of each device, marked *attested*.

use std::fmt::Write as _;

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use crate::cli::exit::CliError;
use crate::config::attested_text;
use crate::store::{CampaignRecord, Store};

#[derive(Debug, Serialize, Tabled)]
pub struct WaitingStep {
    pub campaign: String,
    pub device: String,
    pub trial: String,
    pub step: String,
    pub when: String,
    pub asked: String,
    /// RFC 3339: the attempt is given up as invalid after it.
    pub until: String,
    /// The command that answers it.
    pub answer: String,
}

#[derive(Debug, Serialize, Tabled)]
pub struct AttestedLine {
    pub device: String,
    pub campaign: String,
    pub step: String,
    /// `brightness=50 % (attested)`: an operator's word, never a reading.
    pub attested: String,
    pub by: String,
    pub at: String,
}

/// Steps of live campaigns (`live` says which runner still runs), and attestations.
pub fn collect(
    store: Option<&Store>,
    campaigns: &[CampaignRecord],
    live: impl Fn(&CampaignRecord) -> bool,
) -> Result<(Vec<WaitingStep>, Vec<AttestedLine>), CliError> {
    let Some(store) = store else { return Ok((Vec::new(), Vec::new())) };
    let waiting = store
        .pending_steps(None)?
        .into_iter()
        .filter(|s| campaigns.iter().any(|c| c.id == s.campaign && live(c)))
        .map(|row| {
            let s = row.asked;
            let attest: String = s.attest.iter().map(|k| format!(" --attest {k}=…")).collect();
            WaitingStep {
                answer: format!("lab confirm {} --device {} --step {}{attest}", s.campaign, s.device, s.step),
                campaign: s.campaign,
                device: s.device,
                trial: s.trial_key.unwrap_or_else(|| "-".into()),
                step: s.step,
                when: s.when,
                asked: s.text,
                until: s.deadline,
            }
        })
        .collect();
    let attested = store
        .latest_attestations()?
        .into_iter()
        .map(|(device, campaign, a)| AttestedLine {
            device,
            campaign,
            step: a.step,
            attested: format!("{} (attested)", attested_text(&a.values)),
            by: a.by,
            at: a.at,
        })
        .collect();
    Ok((waiting, attested))
}

pub fn render(s: &mut String, waiting: &[WaitingStep], attested: &[AttestedLine]) {
    if !waiting.is_empty() {
        let _ = writeln!(s, "\nwaiting for an operator:\n{}", Table::new(waiting).with(Style::rounded()));
    }
    if !attested.is_empty() {
        let _ = writeln!(
            s,
            "\nattested by operators (newest per device and step; not read by the lab):\n{}",
            Table::new(attested).with(Style::rounded())
        );
    }
}
