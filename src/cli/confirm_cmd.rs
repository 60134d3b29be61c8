//! `lab confirm CAMPAIGN [--device D] [--step S] [--attest KEY=VALUE …] [--by NAME]`:
//! answers an operator step a running campaign waits on, from any terminal (or a script).

use std::time::{Duration, Instant};

use super::context;
use super::exit::CliError;
use crate::config::{AttestKey, parse_duration};
use crate::runner::now_rfc3339;
use crate::store::{CampaignStatus, StepRow, Store};

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

/// Campaign `id` is running, with its runner alive: only then can a step of it wait.
fn check_running(store: &Store, id: &str) -> Result<(), CliError> {
    let c = store.campaign(id)?;
    if c.status != CampaignStatus::Running || !c.runner().is_some_and(|p| p.alive()) {
        return Err(CliError::bad_input(format!(
            "campaign {} is not running ({}), so no step of it waits; fix: `lab run --resume {}` asks its steps again",
            c.id,
            c.status.as_str(),
            c.id
        )));
    }
    Ok(())
}

/// Answers `step` with `attest` (`KEY=VALUE` each) as `by`: the checks and the row of
/// `lab confirm`, which `lab serve`'s form answers through too. The first answer wins; a
/// later one is refused saying the step is answered already.
pub(crate) fn answer_step(store: &Store, step: &StepRow, attest: &[String], by: &str) -> Result<String, CliError> {
    let values = read_values(attest)?;
    check_running(store, &step.campaign)?;
    check_attested(step, &values)?;
    let map: serde_json::Map<String, serde_json::Value> =
        values.iter().map(|(k, v)| (k.as_str().to_string(), serde_json::to_value(v).unwrap_or_default())).collect();
    answer(store, step, by, &map)?;
    let attested: Vec<String> = values.iter().map(|(k, v)| format!("{}={v}", k.as_str())).collect();
    Ok(format!(
        "confirmed step {} on {}{} as {by}{}\n",
        step.step,
        step.device,
        step.trial_key.as_ref().map(|t| format!(" ({t})")).unwrap_or_default(),
        if attested.is_empty() { String::new() } else { format!(", attested {}", attested.join(", ")) }
    ))
}

fn answer(
    store: &Store,
    step: &StepRow,
    by: &str,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), CliError> {
    if store.answer_step(step.id, by, &now_rfc3339(), values)? {
        return Ok(());
    }
    let now = store.step(step.id)?.map(|s| s.status.as_str()).unwrap_or("gone");
    Err(CliError::bad_input(format!(
        "step {} is {now} already (answered elsewhere, or its deadline passed); fix: `lab status` shows what still waits",
        describe(step)
    )))
}

fn describe(s: &StepRow) -> String {
    format!("--device {} --step {}", s.device, s.step)
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

/// `KEY=VALUE` arguments, typed.
fn read_values(args: &[String]) -> Result<Vec<(AttestKey, crate::config::AttestValue)>, CliError> {
    let known: Vec<&str> = AttestKey::ALL.iter().map(|k| k.as_str()).collect();
    let mut out: Vec<(AttestKey, crate::config::AttestValue)> = Vec::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(CliError::bad_input(format!(
                "--attest {a}: expected KEY=VALUE; fix: e.g. `--attest brightness=50`"
            )));
        };
        let key = AttestKey::parse(k.trim()).ok_or_else(|| {
            CliError::bad_input(format!("--attest {a}: unknown setting `{k}`; fix: attest one of {}", known.join(", ")))
        })?;
        let value = key.value(v).map_err(|e| CliError::bad_input(format!("--attest {a}: {e}")))?;
        if out.iter().any(|(x, _)| *x == key) {
            return Err(CliError::bad_input(format!("--attest {a}: `{k}` is given twice; fix: give it once")));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// The answer attests exactly what the step asks.
fn check_attested(step: &StepRow, values: &[(AttestKey, crate::config::AttestValue)]) -> Result<(), CliError> {
    let given: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
    let missing: Vec<&String> = step.attest.iter().filter(|k| !given.contains(&k.as_str())).collect();
    if !missing.is_empty() {
        let fix: Vec<String> = missing
            .iter()
            .map(|k| format!("--attest {k}={}", AttestKey::parse(k).map_or("…", |x| x.example())))
            .collect();
        return Err(CliError::bad_input(format!(
            "step {} on {} asks to attest {}; fix: add {}",
            step.step,
            step.device,
            missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
            fix.join(" ")
        )));
    }
    if let Some(extra) = given.iter().find(|k| !step.attest.iter().any(|a| a == *k)) {
        return Err(CliError::bad_input(format!(
            "step {} on {} does not ask to attest {extra}; fix: remove --attest {extra}=…",
            step.step, step.device
        )));
    }
    Ok(())
}
