//! Configuration: raw serde types are read from TOML, then validated into typed values.

mod diagnostics;
mod lab;
mod load;
mod runbook;

pub use diagnostics::{ConfigError, Diagnostic};
pub use lab::*;
pub use load::{load_lab, load_runbook, parse_lab, parse_runbook};
pub use runbook::*;
