//! Exit codes (documented in README and docs/cli.md).

use std::fmt;

pub const OK: u8 = 0;
pub const INTERNAL: u8 = 1;
pub const BAD_INPUT: u8 = 2;
pub const UNAVAILABLE: u8 = 3;
pub const TRIALS_FAILED: u8 = 4;
pub const REGRESSION: u8 = 5;
pub const INTERRUPTED: u8 = 130;

/// An error that ends the command, with its exit code. Shown as `error: ...` lines.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
    /// Devices held by others kept the command from starting (exit 3): a schedule slot
    /// records that as skipped, naming the holders.
    pub busy: bool,
}

impl CliError {
    pub fn new(code: u8, message: impl fmt::Display) -> Self {
        CliError { code, message: message.to_string(), busy: false }
    }
    /// Devices held by others (exit 3).
    pub fn busy(message: impl fmt::Display) -> Self {
        CliError { busy: true, ..Self::new(UNAVAILABLE, message) }
    }
    pub fn bad_input(message: impl fmt::Display) -> Self {
        Self::new(BAD_INPUT, message)
    }
    pub fn internal(message: impl fmt::Display) -> Self {
        Self::new(INTERNAL, message)
    }
}

impl From<crate::config::ConfigError> for CliError {
    fn from(e: crate::config::ConfigError) -> Self {
        CliError::bad_input(e)
    }
}

impl From<crate::store::StoreError> for CliError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            crate::store::StoreError::NoCampaign(_) | crate::store::StoreError::Missing { .. } => {
                CliError::bad_input(e)
            }
            crate::store::StoreError::Unreachable(_) => CliError::new(UNAVAILABLE, e),
            other => CliError::internal(other),
        }
    }
}

impl From<crate::store::OpenError> for CliError {
    fn from(e: crate::store::OpenError) -> Self {
        match e {
            crate::store::OpenError::Password(e) => CliError::bad_input(e),
            crate::store::OpenError::Store(e) => CliError::from(e),
        }
    }
}

impl From<crate::runner::LaunchError> for CliError {
    fn from(e: crate::runner::LaunchError) -> Self {
        use crate::runner::LaunchFailure as F;
        let code = match e.failure() {
            F::BadInput => BAD_INPUT,
            F::Unavailable | F::Busy => UNAVAILABLE,
            F::Interrupted => INTERRUPTED,
            F::Internal => INTERNAL,
        };
        CliError { code, busy: e.failure() == F::Busy, message: e.to_string() }
    }
}

/// A store error keeps its own exit code (an unknown campaign is bad input); an
/// unreadable plan is internal.
impl From<crate::report::ReportError> for CliError {
    fn from(e: crate::report::ReportError) -> Self {
        match e {
            crate::report::ReportError::Store(e) => CliError::from(e),
            e => CliError::internal(e),
        }
    }
}

impl From<crate::runner::RunError> for CliError {
    fn from(e: crate::runner::RunError) -> Self {
        CliError::internal(e)
    }
}

impl From<crate::plan::PlanError> for CliError {
    fn from(e: crate::plan::PlanError) -> Self {
        CliError::bad_input(e)
    }
}

/// The object store away is exit 3 (try again later); anything else about raw files is
/// the lab's setup (exit 2) or a fault (exit 1).
impl From<crate::store::RawFilesError> for CliError {
    fn from(e: crate::store::RawFilesError) -> Self {
        use crate::store::RawFilesError as E;
        let e = match e {
            E::Store(s) => return s.into(),
            e => e,
        };
        let code = match &e {
            E::Unreachable { .. } => UNAVAILABLE,
            E::Denied { .. } | E::Client(_) | E::Credentials { .. } | E::OtherBucket { .. } => BAD_INPUT,
            E::Store(_) | E::Missing { .. } | E::Mismatch { .. } | E::Local { .. } => INTERNAL,
        };
        CliError::new(code, e)
    }
}
