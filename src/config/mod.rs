//! Configuration: `lab.toml` and runbooks are parsed with spans (toml_edit), then read
//! key by key into the validated types of `lab.rs` and `runbook.rs`, collecting every
//! problem as a [`Diagnostic`]. The format is documented in docs/config.md.

mod address;
mod diagnostics;
mod duration;
mod files;
mod lab;
mod load;
#[cfg(test)]
mod load_tests;
mod names;
mod problems;
mod runbook;
mod schedule;
mod selector;
mod source;
mod steps;
mod suggest;
mod table;
mod validate_builds;
mod validate_care;
mod validate_configs;
mod validate_device;
mod validate_endpoint_address;
mod validate_host;
mod validate_lab;
mod validate_launch;
mod validate_platform;
mod validate_runbook;
mod validate_schedule;
mod validate_sections;
mod validate_sim;
mod validate_steps;

pub use diagnostics::{ConfigError, Diagnostic};
pub use duration::{parse_duration, parse_percent};
pub use lab::*;
pub use load::{load_lab, load_runbook, parse_lab, parse_runbook};
pub use names::is_valid_name;
pub use runbook::*;
pub use schedule::{BaselinePolicy, ConfirmSettings, NotifySettings, Schedule, SeedPolicy, parse_cron};
pub use steps::{AttestKey, AttestValue, OperatorStep, StepWhen, attested_text};
pub use validate_runbook::{DEFAULT_RETRIES, DEFAULT_SEED};
