//! Answering an operator step, as `lab confirm` and `lab serve`'s form do: the values
//! read and checked against what the step asks, the answer written (the first one wins).

use super::exit::CliError;
use crate::config::AttestKey;
use crate::runner::now_rfc3339;
use crate::store::{CampaignStatus, StepRow, Store};

/// Campaign `id` is running, with its runner alive: only then can a step of it wait.
pub(super) fn check_running(store: &Store, id: &str) -> Result<(), CliError> {
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
pub(super) fn answer_step(store: &Store, step: &StepRow, attest: &[String], by: &str) -> Result<String, CliError> {
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

pub(super) fn describe(s: &StepRow) -> String {
    format!("--device {} --step {}", s.device, s.step)
}

/// `KEY=VALUE` arguments, typed.
pub(super) fn read_values(args: &[String]) -> Result<Vec<(AttestKey, crate::config::AttestValue)>, CliError> {
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
