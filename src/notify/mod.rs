//! Alerts (docs/schedule.md): the JSON a confirmed regression is sent as, and the two
//! channels that carry it, a webhook (plain HTTP POST, retried) and a command (argv,
//! the JSON on stdin, run once). Nothing here knows about schedules: a caller builds an
//! [`Alert`], serializes it once, and hands the bytes to each channel.

mod command;
mod error;
mod payload;
mod webhook;

pub use command::Command;
pub use error::NotifyError;
pub use payload::{
    ALERT_SCHEMA_VERSION, Alert, AlsoWorse, BaselineRef, ChangePointRef, Confirmation, CurrentRef, Figures, Regression,
    Reports, Screening,
};
pub use webhook::Webhook;

/// What became of one alert on one channel (stored in `schedule_alerts`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    /// The receiver took it: a 2xx answer, or the command exited 0.
    pub sent: bool,
    /// Attempts made (0 when the channel could not be used at all, e.g. an https URL).
    pub tries: u32,
    /// The last answer, bounded to 4 KiB: `200 OK` and the response body for a webhook,
    /// the command's stdout for a command.
    pub response: Option<String>,
    /// Why the last attempt failed ([`NotifyError`]'s message); `None` when sent.
    pub error: Option<String>,
}

/// At most this much of an answer (response body, stdout, stderr) is kept.
pub const ANSWER_LIMIT: usize = 4096;
