//! What can go wrong with a power monitor, whatever the instrument.

use super::otii::OtiiError;

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("power monitor `{monitor}`: {source}")]
    Otii {
        monitor: String,
        #[source]
        source: OtiiError,
    },
    #[error("power monitor `{monitor}`: {source}")]
    Monsoon {
        monitor: String,
        /// It left USB (or failed on it): the session is over.
        lost: bool,
        #[source]
        source: super::monsoon::MonsoonError,
    },
    #[error("power monitor `{monitor}`: cannot reach its host: {detail}; fix: `lab hosts check`")]
    Host { monitor: String, detail: String },
    #[error("power monitor `{monitor}` cannot do {what}")]
    Unsupported { monitor: String, what: String },
    #[error("power monitor `{monitor}`: {detail}")]
    Failed { monitor: String, detail: String },
}

impl MonitorError {
    /// The instrument cannot be reached at all (not a session that ended mid-way).
    pub fn is_unreachable(&self) -> bool {
        match self {
            MonitorError::Otii { source, .. } => matches!(source, OtiiError::Unreachable { .. }),
            MonitorError::Host { .. } => true,
            MonitorError::Monsoon { source, .. } => {
                matches!(
                    source,
                    super::monsoon::MonsoonError::NotFound { .. } | super::monsoon::MonsoonError::Open { .. }
                )
            }
            _ => false,
        }
    }

    /// The instrument (or the way to it) went away: the session is over, a new one is needed.
    pub fn is_lost(&self) -> bool {
        match self {
            MonitorError::Otii { source, .. } => {
                matches!(source, OtiiError::Closed { .. } | OtiiError::Timeout { .. } | OtiiError::Unreachable { .. })
            }
            MonitorError::Host { .. } => true,
            MonitorError::Monsoon { lost, .. } => *lost,
            MonitorError::Unsupported { .. } | MonitorError::Failed { .. } => false,
        }
    }
}
