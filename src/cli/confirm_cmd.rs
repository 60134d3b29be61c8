//! `lab confirm CAMPAIGN [--device D] [--step S] [--attest KEY=VALUE …] [--by NAME]`:
//! answers an operator step a running campaign waits on, from any terminal (or a script).

use std::time::{Duration, Instant};

use super::context;
use super::exit::CliError;
use super::step_answer::{answer_step, check_running, describe, read_values};
use crate::config::parse_duration;
use crate::store::StepRow;

#[derive(Debug, clap::Args)]
pub struct ConfirmArgs {
    /// The campaign whose step is answered (`lab status` shows the steps that wait).
    pub campaign: String,
    /// Only a step of this device.
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<String>,
    /// Only the step of this name (the runbook's `[[steps]] name`; `unplug` / `plug-in`
    /// for a manual tether).
    #[arg(long, value_name = "STEP")]
    pub step: Option<String>,
    /// A value the step asks to attest, e.g. `--attest brightness=50 --attest bluetooth=off`.
    #[arg(long = "attest", value_name = "KEY=VALUE")]
    pub attest: Vec<String>,
    /// Who answers (default: $USER).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Wait up to this long for a matching step to be asked, e.g. `10m` (default: answer
    /// only a step that already waits).
    #[arg(long, value_name = "DURATION")]
    pub wait: Option<String>,
}

pub fn run(lab_arg: Option<&std::path::Path>, args: &ConfirmArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    // Bad values fail at once, before any wait.
    read_values(&args.attest)?;
    let wait = match &args.wait {
        Some(w) => parse_duration(w).map_err(|e| {
            CliError::bad_input(format!("--wait {w}: {e}; fix: write a duration such as `30s` or `10m`"))
        })?,
        None => Duration::ZERO,
    };
    let store = context::open_store_existing(&lab)?.ok_or_else(|| {
        CliError::bad_input(format!(
            "no store at {}; fix: start the campaign with `lab run`, or pass the lab it runs on with --lab",
            super::context::display_store(&lab)
        ))
    })?;
    let until = Instant::now() + wait;
    let step = loop {
        check_running(&store, &args.campaign)?;
        let pending = store.pending_steps(Some(&args.campaign))?;
        let matching: Vec<&StepRow> = pending
            .iter()
            .filter(|s| args.device.as_ref().is_none_or(|d| d == &s.device))
            .filter(|s| args.step.as_ref().is_none_or(|n| n == &s.step))
            .collect();
        match matching.as_slice() {
            [one] => break (*one).clone(),
            [] if Instant::now() < until => std::thread::sleep(Duration::from_millis(250)),
            [] => return Err(nothing_waits(args, &pending)),
            many => {
                return Err(CliError::bad_input(format!(
                    "{} steps of campaign {} wait: {}; fix: say which with --device and --step",
                    many.len(),
                    args.campaign,
                    many.iter().map(|s| describe(s)).collect::<Vec<_>>().join(", ")
                )));
            }
        }
    };
    let by = args.by.clone().or_else(|| std::env::var("USER").ok()).unwrap_or_else(|| "operator".into());
    answer_step(&store, &step, &args.attest, &by)
}

fn nothing_waits(args: &ConfirmArgs, pending: &[StepRow]) -> CliError {
    let filter = [args.device.as_ref().map(|d| format!(" on {d}")), args.step.as_ref().map(|s| format!(" named {s}"))]
        .into_iter()
        .flatten()
        .collect::<String>();
    let others = if pending.is_empty() {
        "none waits now".to_string()
    } else {
        format!("waiting: {}", pending.iter().map(describe).collect::<Vec<_>>().join(", "))
    };
    CliError::bad_input(format!(
        "no step of campaign {}{filter} waits for an answer ({others}); fix: check --device and --step, or add --wait 10m to wait for it to be asked",
        args.campaign
    ))
}
