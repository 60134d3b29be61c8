//! Reading and validating `lab.toml` and runbooks: the public entry points.
//!
//! Every problem in a file is reported at once (syntax errors excepted: the TOML parser
//! stops at the first), each with its file, line:column, key and a fix.

use std::path::Path;

use super::lab::read_lab::read_lab;
use super::runbook::read_runbook::read_runbook;
use super::syntax::files::base_dir;
use super::syntax::problems::Problems;
use super::syntax::source::Source;
use super::syntax::table::Table;
use super::{ConfigError, Diagnostic, Lab, Runbook};

/// Reads and validates a lab file.
pub fn load_lab(path: &Path) -> Result<Lab, ConfigError> {
    let text = read_text(path, "lab file", "a lab file lists hosts and devices; the repository's lab.toml is a start")?;
    parse_lab(&text, path)
}

/// Validates lab text read from `source` (relative paths are resolved against its folder;
/// pass e.g. `<embedded>` for a built-in lab, whose paths then resolve against the current
/// directory).
pub fn parse_lab(text: &str, source: &Path) -> Result<Lab, ConfigError> {
    let src = Source::new(source, text);
    let doc = src.parse()?;
    let mut p = Problems::new(&src);
    let lab = read_lab(&Table::root(&doc), &mut p, source, text, &base_dir(source));
    p.finish(lab)
}

/// Reads and validates a runbook against `lab` (device selectors must match lab devices).
pub fn load_runbook(path: &Path, lab: &Lab) -> Result<Runbook, ConfigError> {
    let text = read_text(path, "runbook", "a runbook describes one experiment; see runbooks/quickstart.toml")?;
    parse_runbook(&text, path, lab)
}

/// Validates runbook text read from `source` against `lab`. Relative paths (build files,
/// config files, `cwd`) are resolved against the runbook's folder and must exist.
pub fn parse_runbook(text: &str, source: &Path, lab: &Lab) -> Result<Runbook, ConfigError> {
    let src = Source::new(source, text);
    let doc = src.parse()?;
    let mut p = Problems::new(&src);
    let runbook = read_runbook(&Table::root(&doc), &mut p, source, text, &base_dir(source), lab);
    p.finish(runbook)
}

fn one(d: Diagnostic) -> ConfigError {
    ConfigError { diagnostics: vec![d] }
}

/// A file's text, or a diagnostic naming the file and what to do.
fn read_text(path: &Path, what: &str, hint: &str) -> Result<String, ConfigError> {
    let fail = |line: Option<usize>, column: Option<usize>, message: String, fix: String| {
        one(Diagnostic { file: path.to_path_buf(), line, column, key: String::new(), message, fix })
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fail(
                None,
                None,
                format!("{what} not found"),
                format!("check the path, or create the file ({hint}; see docs/config.md)"),
            ));
        }
        Err(_) if path.is_dir() => {
            return Err(fail(
                None,
                None,
                format!("{what} is a folder"),
                format!("give the path of a .toml file ({hint})"),
            ));
        }
        Err(e) => {
            return Err(fail(
                None,
                None,
                format!("cannot read the {what}: {e}"),
                "check that the file exists and is readable".into(),
            ));
        }
    };
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().unwrap_or_default().chars().count() + 1;
        fail(Some(line), Some(column), format!("the {what} is not UTF-8 text"), "save the file as UTF-8".into())
    })
}
