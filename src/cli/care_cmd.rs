//! `lab care [--once] [--device D …] [--for DURATION]`: keeps each hub-powered phone
//! between the charge limits of `[care]` (docs/care.md) until Ctrl-C or SIGTERM, then
//! switches on every port it cut.

use std::path::Path;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

use super::context;
use super::exit::{self, CliError};
use super::reporter;
use crate::care::{CareEvent, Keeper, Skipped, open_targets};
use crate::clock::Clock;
use crate::config::{Platform, TetherSpec};

#[derive(Debug, clap::Args)]
pub struct CareArgs {
    /// One pass: read each phone, switch what is outside its window, stop.
    #[arg(long)]
    pub once: bool,
    /// Only this device (repeatable); default: every device tethered to a hub port.
    #[arg(long, value_name = "DEVICE")]
    pub device: Vec<String>,
    /// Stop after this long (e.g. `8h`; for simulated phones, time on their virtual clock).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_for)]
    pub for_: Option<std::time::Duration>,
    /// A line for every reading too, not only for switches.
    #[arg(long, short)]
    pub verbose: bool,
}

/// `--for`'s value; clap prints the error's message after the flag.
fn parse_for(s: &str) -> Result<std::time::Duration, crate::config::ValueError> {
    crate::config::parse_duration(s)
}

pub async fn run(lab_arg: Option<&Path>, args: &CareArgs) -> Result<(String, u8), CliError> {
    let mut lab = context::load_lab(lab_arg)?;
    for d in &args.device {
        if lab.device(d).is_none() {
            let names: Vec<&str> = lab.devices.iter().map(|d| d.name.as_str()).collect();
            return Err(CliError::bad_input(format!(
                "no device `{d}` in {}; fix: use one of {}",
                lab.source.display(),
                names.join(", ")
            )));
        }
    }
    let selected: Vec<String> = lab
        .devices
        .iter()
        .filter(|d| args.device.is_empty() || args.device.contains(&d.name))
        .map(|d| d.name.clone())
        .collect();
    let hosts = crate::transport::Hosts::for_lab(&lab);
    // `uhubctl = "auto"` one phone at a time: a phone not found is skipped, not fatal.
    let mut skipped: Vec<Skipped> = Vec::new();
    let auto: Vec<String> = selected
        .iter()
        .filter(|n| lab.device(n).is_some_and(|d| d.tether == TetherSpec::UhubctlAuto))
        .cloned()
        .collect();
    for name in auto {
        if let Err(why) = crate::tether::hubs::resolve_auto(&mut lab, std::slice::from_ref(&name), &hosts).await {
            skipped.push(Skipped { device: name, why: why.to_string() });
        }
    }
    // Simulated phones alone run on one virtual clock: hours of care in an instant.
    let all_sims = selected.iter().all(|n| lab.device(n).is_some_and(|d| d.platform() == Platform::Sim));
    let clock = if all_sims { Clock::virtual_clock() } else { Clock::tokio() };
    if clock.is_virtual() && !args.once && args.for_.is_none() {
        return Err(CliError::bad_input(
            "simulated phones only: care would run on their virtual clock without end; fix: add `--for 3d` (virtual time) or `--once`",
        ));
    }
    let names: Vec<String> = selected.iter().filter(|n| !skipped.iter().any(|s| &s.device == *n)).cloned().collect();
    let (targets, more) = open_targets(&lab, &hosts, &names, &clock);
    skipped.extend(more);
    for s in &skipped {
        reporter::line(&format!("{}: skipped: {}", s.device, s.why));
    }
    if targets.is_empty() {
        return Err(CliError::new(
            exit::UNAVAILABLE,
            "no phone to care for: none is tethered to a hub port (`tether = { uhubctl = … }`); fix: see `lab hubs`",
        ));
    }
    let store = context::open_store(&lab)?;
    let (lower, upper) = (lab.care.lower_pct, lab.care.upper_pct);
    reporter::line(&format!(
        "care: {} phone(s) kept between {lower} % and {upper} %{}",
        targets.len(),
        if clock.is_virtual() { " (simulated: on their virtual clock)" } else { "; Ctrl-C to stop" }
    ));

    let (tx, mut rx) = mpsc::unbounded_channel();
    let verbose = args.verbose;
    let printer = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if let Some(l) = event_line(&e, verbose) {
                reporter::line(&l);
            }
        }
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| CliError::internal(format!("cannot watch SIGTERM: {e}")))?;
    let signals = tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        let _ = stop_tx.send(true);
    });
    let keeper = Keeper::new(&lab.care, clock, Some(store), tx, targets);
    let summary = keeper.run(stop_rx, args.once, args.for_).await;
    signals.abort();
    let _ = printer.await;

    let mut out = format!(
        "care stopped after {} ({} passes, {} ports cut, {} switched on at the lower limit)\n",
        human(&summary.elapsed),
        summary.passes,
        summary.cuts,
        summary.restores
    );
    for (device, level) in &summary.levels {
        let level = level.map(|l| format!("{l:.1} %")).unwrap_or_else(|| "not read".into());
        out.push_str(&format!("  {device}: {level}\n"));
    }
    if !summary.not_restored.is_empty() {
        out.push_str(&format!(
            "ports care cut and could not switch on again: {}; switch them on by hand (`uhubctl -l LOCATION -p PORT -a on`)\n",
            summary.not_restored.join(", ")
        ));
        return Ok((out, exit::UNAVAILABLE));
    }
    Ok((out, exit::OK))
}

/// A care event as one plain line; readings only with `verbose`.
pub fn event_line(e: &CareEvent, verbose: bool) -> Option<String> {
    let at = |d: &Duration| format!("[{}]", human(d));
    Some(match e {
        CareEvent::Skipped { device, why } => format!("{device}: skipped: {why}"),
        CareEvent::Busy { at: t, device, by } => format!("{} {device}: left alone: {by}", at(t)),
        CareEvent::Reading { at: t, device, battery_pct, powered, health_pct, cycle_count } => {
            if !verbose {
                return None;
            }
            let health = health_pct.map(|h| format!(", health {h:.0} %")).unwrap_or_default();
            let cycles = cycle_count.map(|c| format!(", {c} cycles")).unwrap_or_default();
            let power = if *powered { "on USB power" } else { "on battery" };
            format!("{} {device}: {battery_pct:.1} %, {power}{health}{cycles}", at(t))
        }
        CareEvent::Switched { at: t, device, port, on, battery_pct, why } => {
            let level = battery_pct.map(|l| format!(" at {l:.1} %")).unwrap_or_default();
            let what = if *on { "on" } else { "off" };
            format!("{} {device}: port {port} {what}{level} ({why})", at(t))
        }
        CareEvent::Failed { at: t, device, error } => format!("{} {device}: {error}", at(t)),
        CareEvent::Restored { device, port } => format!("{device}: port {port} on again (care stopped)"),
        CareEvent::NotRestored { device, port, error } => {
            format!("{device}: port {port} could NOT be switched on again: {error}")
        }
    })
}

fn human(d: &Duration) -> String {
    crate::text::duration::compact(d.as_secs_f64())
}
