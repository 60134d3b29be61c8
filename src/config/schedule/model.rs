//! `[[schedule]]` of lab.toml (docs/schedule.md): when a runbook runs again, in which
//! zone, what its campaigns are compared with, how a finding is confirmed, who is told.

use std::path::PathBuf;

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use serde::{Serialize, Serializer};

use crate::stats::ChangePointOptions;

/// One validated `[[schedule]]`.
#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    pub name: String,
    /// The 5-field POSIX pattern (1 = Monday, 0 and 7 = Sunday), parsed.
    #[serde(serialize_with = "cron_text")]
    pub cron: Cron,
    /// The IANA zone the pattern's wall times are in.
    #[serde(serialize_with = "zone_name")]
    pub timezone: chrono_tz::Tz,
    /// The runbook, absolute (written relative to the lab file).
    pub runbook: PathBuf,
    pub baseline: BaselinePolicy,
    pub confirm: ConfirmSettings,
    pub notify: NotifySettings,
    pub seed: SeedPolicy,
    /// `[schedule.changes]`: how the history's change points are found (Otava's defaults).
    pub changes: ChangePointOptions,
    /// The slot's place in its devices' queues: higher goes first (`lab run --priority`).
    pub priority: i32,
    /// How long a slot waits for devices others hold before it is skipped; `None`: until
    /// the schedule's next slot.
    pub max_wait: Option<std::time::Duration>,
}

/// `seed`: which seed a scheduled campaign runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SeedPolicy {
    /// Each slot its own, derived from the runbook's seed, the schedule and the due time:
    /// weeks get independent run orders (and simulated noise), and a slot re-run gets
    /// the same. The default.
    #[default]
    PerSlot,
    /// The runbook's own seed every week: the same run order each time.
    Runbook,
}

/// What a scheduled campaign is compared with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BaselinePolicy {
    /// The campaigns since the last confirmed change point (the default).
    #[default]
    LastChangePoint,
    /// The previous accepted campaign of the schedule.
    Previous,
    /// A pinned campaign.
    Campaign(String),
}

/// `[schedule.confirm]`: the A/B re-run that must agree before an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ConfirmSettings {
    pub enabled: bool,
    /// The fewest trials per arm (baseline build, current build) the confirmation runs,
    /// whatever the sample-size advice says.
    pub min_trials_per_arm: u32,
    /// The most trials per arm, however large the advice.
    pub max_trials_per_arm: u32,
}

impl Default for ConfirmSettings {
    fn default() -> Self {
        ConfirmSettings { enabled: true, min_trials_per_arm: 10, max_trials_per_arm: 40 }
    }
}

/// `[schedule.notify]`: where a confirmed finding goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct NotifySettings {
    /// POSTed the finding's JSON (plain HTTP).
    pub webhook: Option<String>,
    /// Run with the finding's JSON on stdin: argv, never a shell string.
    pub command: Option<Vec<String>>,
}

/// The parser every schedule pattern goes through: five fields, no seconds, POSIX
/// weekdays (croner's Quartz numbering stays off).
pub fn parse_cron(pattern: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder().seconds(Seconds::Disallowed).build().parse(pattern)
}

fn cron_text<S: Serializer>(c: &Cron, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

fn zone_name<S: Serializer>(z: &chrono_tz::Tz, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(z.name())
}
