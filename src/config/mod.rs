//! Configuration: `lab.toml` and runbooks are parsed with spans (toml_edit, [`syntax`]),
//! then read key by key by the `read_*` functions of [`lab`], [`runbook`] and [`schedule`]
//! into their validated types (each folder's `model.rs`), collecting every problem as a
//! [`Diagnostic`]. [`load`] is the entry point. The format is documented in docs/config.md.

mod lab;
mod load;
#[cfg(test)]
mod load_tests;
mod runbook;
mod schedule;
mod store_url;
mod syntax;

pub use lab::model::*;
pub use lab::read_endpoint::phones_cannot_reach;
pub use lab::read_lab::store_location;
pub use lab::store_location_error::StoreLocationError;
pub use load::{load_lab, load_runbook, parse_lab, parse_runbook};
pub use runbook::model::*;
pub use runbook::read_runbook::{DEFAULT_RETRIES, DEFAULT_SEED};
pub use runbook::steps::{AttestKey, AttestValue, OperatorStep, StepWhen, attested_text};
pub use schedule::model::{BaselinePolicy, ConfirmSettings, NotifySettings, Schedule, SeedPolicy, parse_cron};
pub use store_url::{PgUrl, PgUrlError, TlsMode};
pub use syntax::address::{is_loopback_host, join_host_port, parse_host_port};
pub use syntax::diagnostics::{ConfigError, Diagnostic};
pub use syntax::duration::{parse_duration, parse_percent};
pub use syntax::names::is_valid_name;
pub use syntax::value_error::ValueError;
