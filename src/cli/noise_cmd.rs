//! `lab noise [--model M] [--metric X] [--trials N]... [--alpha A] [--confidence C] [--json]`:
//! the lab's own noise floor per device model and metric, from the store's baseline and
//! A/A arms (docs/statistics.md, "The lab's noise floor").

use std::path::Path;

use super::context;
use super::exit::CliError;
use crate::config::StatsSettings;
use crate::report::{self, NOISE_TRIALS, NoiseOptions};

#[derive(Debug, clap::Args)]
pub struct NoiseArgs {
    /// Only this device model.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Only this metric.
    #[arg(long, value_name = "METRIC")]
    pub metric: Option<String>,
    /// Trials per arm to give the smallest detectable change for (repeatable, at least 2);
    /// default: 5, 10, 20 and 30.
    #[arg(long = "trials", value_name = "N", value_parser = clap::value_parser!(u32).range(2..))]
    pub trials: Vec<u32>,
    /// The two-sided t-test's level for the detectable change; default: `[statistics] alpha`'s default, 0.05.
    #[arg(long, value_name = "ALPHA", value_parser = level)]
    pub alpha: Option<f64>,
    /// The level of the CV's interval; default: `[statistics] confidence`'s default, 0.95.
    #[arg(long, value_name = "LEVEL", value_parser = level)]
    pub confidence: Option<f64>,
    /// JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// A level strictly between 0 and 1.
fn level(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 1.0 => Ok(x),
        _ => Err(format!("`{s}` is not a number strictly between 0 and 1 (e.g. 0.05)")),
    }
}

pub fn run(lab_arg: Option<&Path>, args: &NoiseArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let store = context::existing_store(&lab)?;
    let defaults = StatsSettings::default();
    let mut trials = if args.trials.is_empty() { NOISE_TRIALS.to_vec() } else { args.trials.clone() };
    trials.sort_unstable();
    trials.dedup();
    let options = NoiseOptions {
        model: args.model.clone(),
        metric: args.metric.clone(),
        trials,
        alpha: args.alpha.unwrap_or(defaults.alpha),
        confidence: args.confidence.unwrap_or(defaults.confidence),
    };
    let noise = report::build_noise(&store, &options).map_err(|e| match e {
        report::NoiseError::Store(e) => CliError::from(e),
        e if e.is_bad_input() => CliError::bad_input(e),
        e => CliError::internal(e),
    })?;
    Ok(if args.json { report::render_noise_json(&noise) } else { report::render_noise_table(&noise) })
}
