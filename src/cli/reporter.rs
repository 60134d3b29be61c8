//! The terminal reporter: the only place progress is printed.
//!
//! On a terminal: indicatif bars, one per device and one overall, redrawn only when
//! an event arrives and at most a few times a second (no ticking while nobody
//! works: a soak must not wake the orchestrator). Otherwise: one plain line per event.
//! With `--message-format json`: one JSON object per event on stdout (docs/report.md).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::mpsc;

use super::event_lines::EventLines;
use crate::runner::Event;

pub struct Reporter {
    mode: Mode,
    verbose: bool,
}

/// What `lab run` writes to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Progress (bars or plain lines), then the summary tables.
    Human,
    /// Progress on stderr, then the summary as one JSON document (`--json`).
    SummaryJson,
    /// Every event as a JSON line, then a last `report_written` line
    /// (`--message-format json`).
    EventStream,
}

enum Mode {
    Bars { multi: MultiProgress, overall: Option<ProgressBar>, devices: BTreeMap<String, ProgressBar> },
    Plain { out: Box<dyn Write + Send> },
    Stream(EventLines),
}

impl Reporter {
    /// Bars when stdout is a terminal, plain lines otherwise; plain lines on stderr when
    /// stdout carries the JSON summary; JSON lines on stdout for the event stream.
    pub fn new(verbose: bool, output: Output) -> Self {
        let mode = match output {
            Output::EventStream => Mode::Stream(EventLines::new(Box::new(std::io::stdout()))),
            Output::SummaryJson => Mode::Plain { out: Box::new(std::io::stderr()) },
            Output::Human if std::io::stdout().is_terminal() => {
                let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout_with_hz(4));
                Mode::Bars { multi, overall: None, devices: BTreeMap::new() }
            }
            Output::Human => Mode::Plain { out: Box::new(std::io::stdout()) },
        };
        Reporter { mode, verbose }
    }

    /// The stream's writer, to write its last line after the runner's events.
    pub fn into_stream(self) -> Option<EventLines> {
        match self.mode {
            Mode::Stream(s) => Some(s),
            _ => None,
        }
    }

    /// Consumes events until the runner drops its sender; gives itself back, for the
    /// stream's last line.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Event>) -> Self {
        while let Some(e) = rx.recv().await {
            self.handle(&e);
        }
        if let Mode::Bars { multi, .. } = &self.mode {
            let _ = multi.clear();
        }
        self
    }

    fn handle(&mut self, e: &Event) {
        let verbose = self.verbose;
        match &mut self.mode {
            Mode::Plain { out } => {
                if let Some(line) = plain_line(e, verbose) {
                    let _ = writeln!(out, "{line}");
                }
            }
            Mode::Bars { multi, overall, devices } => bars(multi, overall, devices, e),
            Mode::Stream(lines) => lines.event(e),
        }
    }
}

fn bars(
    multi: &MultiProgress,
    overall: &mut Option<ProgressBar>,
    devices: &mut BTreeMap<String, ProgressBar>,
    e: &Event,
) {
    match e {
        Event::CampaignStarted { id, devices: devs, resumed, .. } => {
            let total: u64 = devs.iter().map(|d| d.planned as u64).sum();
            let done: u64 = devs.iter().map(|d| d.done as u64).sum();
            let style = ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} trials  ETA {eta}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            let o = multi.add(ProgressBar::new(total).with_style(style).with_prefix("campaign"));
            o.set_position(done);
            o.set_message(format!("{id}{}", if *resumed { " (resumed)" } else { "" }));
            *overall = Some(o);
            let dstyle = ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            for d in devs {
                let b = multi
                    .add(ProgressBar::new(d.planned as u64).with_style(dstyle.clone()).with_prefix(d.device.clone()));
                b.set_position(d.done as u64);
                devices.insert(d.device.clone(), b);
            }
        }
        Event::Phase { device, trial, attempt, phase } => {
            if let Some(b) = devices.get(device) {
                let retry = if *attempt > 0 { format!(" (retry {attempt})") } else { String::new() };
                b.set_message(format!("{} {trial}{retry}", phase.as_str()));
            }
        }
        Event::Waiting { device, what, .. } => {
            if let Some(b) = devices.get(device) {
                b.set_message(what.clone());
            }
        }
        Event::AttemptRecorded { device, trial, valid, reasons, will_retry, device_offline, .. } => {
            if *valid || !(*will_retry || *device_offline) {
                if let Some(b) = devices.get(device) {
                    b.inc(1);
                }
                if let Some(o) = overall {
                    o.inc(1);
                }
            }
            if !*valid {
                let _ = multi.println(format!(
                    "  invalid: {trial}: {}{}",
                    reasons.join("; "),
                    after_invalid(*will_retry, *device_offline)
                ));
            }
        }
        Event::Disconnected { device, timeout_s, .. } => {
            let _ = multi.println(plain_line(e, false).unwrap_or_default());
            if let Some(b) = devices.get(device) {
                b.set_message(format!("disconnected; waiting up to {}", human_wall(Duration::from_secs(*timeout_s))));
            }
        }
        Event::Reconnected { .. }
        | Event::DeviceWaiting { .. }
        | Event::DeviceAcquired { .. }
        | Event::PortRestored { .. }
        | Event::PowerNotRestored { .. }
        | Event::MonitorNotClosed { .. }
        | Event::OperatorStep { .. }
        | Event::OperatorAnswered { .. }
        | Event::OperatorExpired { .. }
        | Event::VariantDecided { .. }
        | Event::UploadsFailing { .. }
        | Event::UploadsWaiting { .. }
        | Event::UploadsDone { .. } => {
            let _ = multi.println(plain_line(e, false).unwrap_or_default());
        }
        Event::OffUsb { device, .. } => {
            if let Some(b) = devices.get(device) {
                b.set_message("soak, off USB (unreachable until re-tether)");
            }
        }
        Event::DeviceOffline { device, reason } => {
            if let Some(b) = devices.get(device) {
                b.abandon_with_message(format!("offline: {reason}"));
            }
        }
        Event::TrialsMoved { to, .. } => {
            for d in to {
                if let Some(b) = devices.get(&d.device) {
                    b.inc_length(u64::from(d.planned));
                }
            }
            let _ = multi.println(plain_line(e, false).unwrap_or_default());
        }
        Event::DeviceDone { device } => {
            if let Some(b) = devices.get(device) {
                b.finish_with_message("done");
            }
        }
        Event::TrialsAdded { round, devices: added, reasons } => {
            let total: u64 = added.iter().map(|d| u64::from(d.planned)).sum();
            if let Some(o) = overall {
                o.inc_length(total);
            }
            for d in added {
                if let Some(b) = devices.get(&d.device) {
                    b.inc_length(u64::from(d.planned));
                }
            }
            let _ = multi
                .println(format!("  adaptive repeats, round {round}: {total} more trials ({})", reasons.join("; ")));
        }
        Event::CampaignFinished { .. } => {
            if let Some(o) = overall {
                o.finish();
            }
        }
        Event::Agent { .. } => {
            if let Some(line) = plain_line(e, false) {
                let _ = multi.println(line);
            }
        }
        Event::Installed { .. } | Event::DeviceIdentified { .. } | Event::MonitorOpened { .. } => {}
    }
}

/// The line printed for an event when stdout is not a terminal; `None` to stay quiet.
pub fn plain_line(e: &Event, verbose: bool) -> Option<String> {
    match e {
        Event::CampaignStarted { id, runbook, resumed, devices, artifacts } => {
            let total: u32 = devices.iter().map(|d| d.planned).sum();
            let done: u32 = devices.iter().map(|d| d.done).sum();
            Some(format!(
                "{} campaign {id} ({runbook}): {total} trials on {} devices, {done} already done; artifacts in {artifacts}",
                if *resumed { "resuming" } else { "starting" },
                devices.len()
            ))
        }
        Event::DeviceIdentified { device, model, os, serial } => {
            verbose.then(|| format!("[{device}] is {model}, {os}, serial {serial}"))
        }
        Event::Phase { device, trial, attempt, phase } => {
            verbose.then(|| format!("[{device}] {trial} attempt {}: {}", attempt + 1, phase.as_str()))
        }
        Event::Waiting { device, trial, what } => verbose.then(|| format!("[{device}] {trial}: waiting, {what}")),
        Event::Installed { device, build, skipped } => {
            (verbose && !skipped).then(|| format!("[{device}] installed {build}"))
        }
        Event::AttemptRecorded { device, trial, attempt, valid, reasons, will_retry, device_offline } => {
            Some(if *valid {
                format!("[{device}] {trial} attempt {}: valid", attempt + 1)
            } else {
                format!(
                    "[{device}] {trial} attempt {}: INVALID: {}{}",
                    attempt + 1,
                    reasons.join("; "),
                    after_invalid(*will_retry, *device_offline)
                )
            })
        }
        Event::Disconnected { device, trial, phase, detail, timeout_s } => Some(format!(
            "[{device}] {}: {detail}; waiting up to {} for it to come back",
            if trial.is_empty() {
                "DISCONNECTED before its first trial".to_string()
            } else {
                format!("{trial}: DISCONNECTED during {}", phase.as_str())
            },
            human_wall(Duration::from_secs(*timeout_s))
        )),
        Event::Reconnected { device, trial, after_s } => Some(format!(
            "[{device}] {}back after {}",
            if trial.is_empty() { String::new() } else { format!("{trial}: ") },
            human_wall(Duration::from_secs_f64(*after_s))
        )),
        Event::DeviceOffline { device, reason } => Some(format!("[{device}] OFFLINE: {reason}")),
        Event::DeviceWaiting { device, position, holder } => {
            Some(format!("[{device}] waiting its turn (number {position} in its queue): {holder}"))
        }
        Event::PortRestored { device, port } => {
            Some(format!("[{device}] port {port} was left off by `lab care`: switched on"))
        }
        Event::DeviceAcquired { device, waited_s } => {
            Some(format!("[{device}] its turn came after {}", human_wall(Duration::from_secs_f64(*waited_s))))
        }
        Event::OffUsb { device, trial } => verbose.then(|| {
            format!("[{device}] {trial}: off USB for the soak (unreachable until re-tether, as a power cut makes it)")
        }),
        Event::PowerNotRestored { device, trial, detail } => Some(format!(
            "[{device}] {trial}: USB POWER NOT RESTORED: {detail}; fix: switch the port on by hand (or plug the cable \
             back in) before the next campaign"
        )),
        Event::TrialsMoved { from, to } => Some(format!(
            "[{from}] offline: {} pending trials moved to {}",
            to.iter().map(|d| d.planned).sum::<u32>(),
            to.iter().map(|d| format!("{} ({})", d.device, d.planned)).collect::<Vec<_>>().join(", ")
        )),
        Event::DeviceDone { device } => Some(format!("[{device}] done")),
        Event::MonitorOpened { device, monitor } => verbose.then(|| format!("[{device}] on power monitor {monitor}")),
        Event::MonitorNotClosed { device, monitor, detail } => Some(format!(
            "[{device}] power monitor {monitor} NOT CLOSED: {detail}; fix: check it is off, and return its licence \
             in Otii 3 (Help → Licenses) if it holds one"
        )),
        Event::OperatorStep { campaign, device, trial, step, when, text, attest, confirm, timeout_s, .. } => {
            let at = if trial.is_empty() { when.clone() } else { format!("{trial}, {when}") };
            Some(if *confirm {
                let attest: String = attest.iter().map(|k| format!(" --attest {k}=…")).collect();
                format!(
                    "[{device}] OPERATOR ({at}): {text}; confirm with `lab confirm {campaign} --device {device} --step {step}{attest}` within {}",
                    human_wall(Duration::from_secs(*timeout_s))
                )
            } else {
                format!("[{device}] operator ({at}): {text}")
            })
        }
        Event::OperatorAnswered { device, step, by, values } => Some(format!(
            "[{device}] step {step} confirmed by {by}{}",
            if values.is_empty() { String::new() } else { format!(", attested {}", values.join(", ")) }
        )),
        Event::OperatorExpired { device, step } => {
            Some(format!("[{device}] step {step}: nobody answered in time; the attempt is invalid"))
        }
        Event::TrialsAdded { round, devices, reasons } => Some(format!(
            "adaptive repeats, round {round}: {} more trials on {} devices; {}",
            devices.iter().map(|d| d.planned).sum::<u32>(),
            devices.len(),
            reasons.join("; ")
        )),
        Event::VariantDecided {
            model,
            variant,
            against,
            verdict,
            look,
            max_looks,
            trials,
            device_hours,
            fixed_device_hours,
        } => Some(format!(
            "{model} / {variant} vs {against}: {} at look {look} of at most {max_looks}; {trials} trials, {device_hours:.1} \
device-hours{}",
            verdict.as_str(),
            fixed_device_hours.map(|h| format!(" (the fixed design: {h:.1})")).unwrap_or_default()
        )),
        Event::Agent { host, campaign, note } => Some(match campaign {
            Some(c) => format!("[agent {host}] {c}: {note}"),
            None => format!("[agent {host}] {note}"),
        }),
        Event::UploadsFailing { place, detail } => {
            Some(format!("raw files ({place}): {detail}; uploads are tried again, the files stay local"))
        }
        Event::UploadsWaiting { files } => Some(format!("raw files: waiting for {files} uploads")),
        Event::UploadsDone { confirmed, bytes, pending, waited } => Some(format!(
            "raw files: {confirmed} uploaded and confirmed ({}){}, waited {}",
            human_bytes(*bytes),
            if *pending > 0 {
                format!(", {pending} PENDING (kept local; `lab artifacts sync` uploads them)")
            } else {
                String::new()
            },
            human_wall(*waited)
        )),
        Event::CampaignFinished { id, status, valid, failed, pending, invalid_attempts, wall, note } => Some(format!(
            "campaign {id} {}: {valid} valid, {failed} failed, {pending} pending, {invalid_attempts} invalid attempts, {}{}",
            status.as_str(),
            human_wall(*wall),
            note.as_ref().map(|n| format!(" ({n})")).unwrap_or_default()
        )),
    }
}

/// What becomes of the trial after an invalid attempt.
fn after_invalid(will_retry: bool, device_offline: bool) -> &'static str {
    if device_offline {
        " (device offline: the trial is still to run)"
    } else if will_retry {
        " (will retry)"
    } else {
        " (no retries left)"
    }
}

fn human_wall(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        crate::text::duration::compact(d.as_secs_f64())
    }
}

/// One line on stdout, flushed at once: for a command that keeps running after it (`lab
/// hosts forward`), whose first line a script reads while it runs.
pub fn line(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// One line on stderr: what happened while such a command runs.
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// `12.3 MB`: bytes in SI units, as a line's summary.
pub fn human_bytes(n: u64) -> String {
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        _ => format!("{:.2} GB", n as f64 / 1e9),
    }
}
