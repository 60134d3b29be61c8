//! Reading and validating `lab.toml` and runbooks. (Being implemented.)

use std::path::Path;

use super::{ConfigError, Lab, Runbook};

/// Reads and validates a lab file.
pub fn load_lab(path: &Path) -> Result<Lab, ConfigError> {
    let _ = path;
    todo!("config loader")
}

/// Reads and validates a runbook against `lab` (device selectors must match lab devices).
pub fn load_runbook(path: &Path, lab: &Lab) -> Result<Runbook, ConfigError> {
    let _ = (path, lab);
    todo!("config loader")
}

pub fn parse_lab(text: &str, source: &Path) -> Result<Lab, ConfigError> {
    let _ = (text, source);
    todo!("config loader")
}

pub fn parse_runbook(text: &str, source: &Path, lab: &Lab) -> Result<Runbook, ConfigError> {
    let _ = (text, source, lab);
    todo!("config loader")
}
