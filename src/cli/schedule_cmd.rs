//! `lab schedule list | run-due | daemon | install` (docs/schedule.md).

use std::path::Path;

use chrono::{DateTime, Utc};
use clap::Subcommand;
use tokio::sync::watch;

use super::context;
use super::exit::{self, CliError};
use super::listener::listen;
use super::reporter::Output;
use crate::config::{Lab, Schedule};
use crate::schedule::{
    CampaignLauncher, Daemon, DaemonEvent, InstallTarget, Listen, Now, ReviewReport, RunDueReport, SlotAction,
    SlotOutcome, SlotReport, SlotRunner, checkpoint, due_slots, parse_utc, utc_text,
};
use crate::store::SlotState;

/// Test-only: the wall clock schedules are decided by, pinned (RFC 3339). Not for use in a
/// real lab: slots would be keyed by a time that is not now.
pub const NOW_ENV: &str = "LAB_NOW";

#[derive(Debug, clap::Args)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Every schedule: its next due time (in its zone and in UTC), its last slot and how that ended.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Run what is due now, once (for cron, systemd and launchd); missed slots: the latest
    /// runs, the others are recorded skipped. Each campaign is reviewed against its baseline
    /// and history; a finding is confirmed by an A/B campaign before it is alerted. Exit 0;
    /// 5 when a regression was confirmed; else as `lab run`: 4 when trials failed, 3 with
    /// trials left pending, 130 when stopped, 2 when a runbook is invalid.
    RunDue {
        /// Only this schedule.
        #[arg(long, value_name = "NAME")]
        schedule: Option<String>,
        /// One line per phase change of a running campaign.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Run what is due, sleep until the next slot, and so on, until SIGTERM or Ctrl-C.
    Daemon {
        #[arg(long, value_name = "NAME")]
        schedule: Option<String>,
        #[arg(long, short)]
        verbose: bool,
    },
    /// Print what starts `lab schedule run-due` at every slot: a systemd timer and service,
    /// a crontab line, or a launchd agent.
    Install {
        #[arg(long, group = "target")]
        systemd: bool,
        #[arg(long, group = "target")]
        cron: bool,
        #[arg(long, group = "target")]
        launchd: bool,
        /// Only this schedule (default: every schedule of the lab).
        #[arg(long, value_name = "NAME")]
        schedule: Option<String>,
    },
}

pub async fn run(lab_arg: Option<&Path>, args: &ScheduleArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let now = now_from_env()?;
    match &args.command {
        ScheduleCommand::List { json } => list(&lab, now, *json),
        ScheduleCommand::RunDue { schedule, verbose } => run_due(lab, now, schedule.as_deref(), *verbose).await,
        ScheduleCommand::Daemon { schedule, verbose } => daemon(lab, now, schedule.clone(), *verbose).await,
        ScheduleCommand::Install { systemd, cron, launchd, schedule } => {
            let target = match (systemd, cron, launchd) {
                (true, _, _) => InstallTarget::Systemd,
                (_, true, _) => InstallTarget::Cron,
                (_, _, true) => InstallTarget::Launchd,
                _ => {
                    return Err(CliError::bad_input(
                        "say what to install for; fix: `lab schedule install --systemd`, `--cron` or `--launchd`",
                    ));
                }
            };
            install(&lab, target, schedule.as_deref()).map(|s| (s, exit::OK))
        }
    }
}

fn now_from_env() -> Result<Now, CliError> {
    match std::env::var(NOW_ENV) {
        Err(_) => Ok(Now::System),
        Ok(v) => DateTime::parse_from_rfc3339(&v).map(|t| Now::Pinned(t.with_timezone(&Utc))).map_err(|e| {
            CliError::bad_input(format!("{NOW_ENV}={v}: {e}; fix: write an RFC 3339 time, e.g. 2026-03-28T12:00:00Z"))
        }),
    }
}

fn selected<'l>(lab: &'l Lab, only: Option<&str>) -> Result<Vec<&'l Schedule>, CliError> {
    if lab.schedules.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} has no [[schedule]]; fix: add one (docs/schedule.md), e.g. name, cron = \"30 2 * * 0\", \
             timezone = \"Europe/Berlin\", runbook",
            lab.source.display()
        )));
    }
    match only {
        None => Ok(lab.schedules.iter().collect()),
        Some(name) => lab.schedule(name).map(|s| vec![s]).ok_or_else(|| {
            let names: Vec<&str> = lab.schedules.iter().map(|s| s.name.as_str()).collect();
            CliError::bad_input(format!("no schedule `{name}` in the lab; fix: use one of {}", names.join(", ")))
        }),
    }
}

/// `2026-03-29 03:00 CEST (2026-03-29T01:00:00Z)`.
fn when(t: DateTime<Utc>, zone: chrono_tz::Tz) -> String {
    format!("{} ({})", t.with_timezone(&zone).format("%Y-%m-%d %H:%M %Z"), utc_text(t))
}

fn local_text(t: DateTime<Utc>, zone: chrono_tz::Tz) -> String {
    t.with_timezone(&zone).to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

fn list(lab: &Lab, now: Now, json: bool) -> Result<(String, u8), CliError> {
    let schedules = selected(lab, None)?;
    let store = context::open_store_existing(lab)?;
    let at = now.get();
    let mut rows = Vec::new();
    let mut text = String::new();
    for s in schedules {
        let (seen, last) = match &store {
            Some(st) => (st.schedule_seen(&s.name)?, st.last_slot(&s.name)?),
            None => (None, None),
        };
        let seen = seen.as_deref().map(parse_utc).transpose().map_err(CliError::internal)?.unwrap_or(at);
        let last_due = last.as_ref().map(|r| parse_utc(&r.due_utc)).transpose().map_err(CliError::internal)?;
        let due = due_slots(s, checkpoint(last_due, seen), at).map_err(CliError::internal)?;
        let pending: Vec<DateTime<Utc>> = due.skipped.iter().copied().chain(due.run).collect();
        rows.push(serde_json::json!({
            "name": s.name,
            "cron": s.cron.as_str(),
            "timezone": s.timezone.name(),
            "runbook": context::display_path(&s.runbook),
            "next_due": due.next.map(|t| serde_json::json!({ "local": local_text(t, s.timezone), "utc": utc_text(t) })),
            "due_now": pending.iter().map(|t| utc_text(*t)).collect::<Vec<_>>(),
            "last_slot": last.as_ref().map(|r| serde_json::json!({
                "due_utc": r.due_utc,
                "due_local": last_due.map(|t| local_text(t, s.timezone)),
                "state": r.state,
                "outcome": r.outcome,
                "skipped_because": r.skipped_because,
                "campaign": r.campaign,
            })),
        }));
        text.push_str(&format!(
            "{}  cron \"{}\" {}  runbook {}\n",
            s.name,
            s.cron.as_str(),
            s.timezone.name(),
            context::display_path(&s.runbook)
        ));
        match due.next {
            Some(t) => text.push_str(&format!("  next: {}\n", when(t, s.timezone))),
            None => text.push_str("  next: never\n"),
        }
        if !pending.is_empty() {
            text.push_str(&format!(
                "  due now: {} slot(s), the latest {}\n",
                pending.len(),
                when(*pending.last().unwrap_or(&at), s.timezone)
            ));
        }
        match (&last, last_due) {
            (Some(r), Some(t)) => {
                let how = r.outcome.clone().or(r.skipped_because.clone()).unwrap_or_default();
                let campaign = r.campaign.as_deref().map(|c| format!(", campaign {c}")).unwrap_or_default();
                text.push_str(&format!("  last: {} {}{campaign} {how}\n", when(t, s.timezone), r.state.as_str()));
            }
            _ => text.push_str("  last: none yet\n"),
        }
    }
    if json {
        let out = serde_json::to_string_pretty(&serde_json::json!({ "now": utc_text(at), "schedules": rows }))
            .map_err(CliError::internal)?;
        return Ok((out + "\n", exit::OK));
    }
    Ok((text, exit::OK))
}

/// SIGTERM or SIGINT sets the stop channel (a campaign winds down as on Ctrl-C); a
/// second one ends the process at once, as a second Ctrl-C ends `lab run`.
fn stop_on_signals() -> Result<(watch::Receiver<bool>, tokio::task::JoinHandle<()>), CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let (tx, rx) = watch::channel(false);
    let mut term = signal(SignalKind::terminate()).map_err(CliError::internal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(CliError::internal)?;
    let task = tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        let _ = tx.send(true);
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        std::process::exit(exit::INTERRUPTED as i32);
    });
    Ok((rx, task))
}

/// The runner's launcher for a slot's campaigns, their events shown as `lab run` shows them.
fn launcher(lab: &Lab, stop: watch::Receiver<bool>, verbose: bool) -> CampaignLauncher {
    let store = lab.store.clone();
    let listen: Listen = Box::new(move || {
        let (events, listener) = listen(&store, verbose, Output::Human);
        (
            events,
            Box::pin(async move {
                listener.finish().await;
            }),
        )
    });
    CampaignLauncher { lab: lab.clone(), stop, listen }
}

fn slot_runner(lab: &Lab, stop: watch::Receiver<bool>) -> Result<SlotRunner<'_>, CliError> {
    Ok(SlotRunner { lab, store: context::open_store(lab)?, pid: std::process::id(), host: context::hostname(), stop })
}

async fn run_due(lab: Lab, now: Now, only: Option<&str>, verbose: bool) -> Result<(String, u8), CliError> {
    selected(&lab, only)?;
    let (stop, signals) = stop_on_signals()?;
    let launcher = launcher(&lab, stop.clone(), verbose);
    let runner = slot_runner(&lab, stop)?;
    let report = runner.run_due(now, only, &launcher).await.map_err(CliError::internal)?;
    signals.abort();
    let mut out = render(&report);
    if report.slots.is_empty() {
        out.push_str("nothing due\n");
    }
    out.push_str(&next_line(&lab, &runner, now, only)?);
    Ok((out, exit_code(&report)))
}

fn next_line(lab: &Lab, runner: &SlotRunner<'_>, now: Now, only: Option<&str>) -> Result<String, CliError> {
    let mut out = String::new();
    for s in selected(lab, only)? {
        let at = now.get();
        let seen =
            runner.store.schedule_seen(&s.name)?.as_deref().map(parse_utc).transpose().map_err(CliError::internal)?;
        let last =
            runner.store.last_slot(&s.name)?.map(|r| parse_utc(&r.due_utc)).transpose().map_err(CliError::internal)?;
        if let Some(t) = crate::schedule::next_after(s, checkpoint(last, seen.unwrap_or(at)), at) {
            out.push_str(&format!("{}: next due {}\n", s.name, when(t, s.timezone)));
        }
    }
    Ok(out)
}

/// The exit code of a pass: the worst of its slots, in `lab run`'s order, with a
/// confirmed regression (5) above devices unavailable (3) and failed trials (4), and
/// below a campaign that could not run or was stopped.
fn exit_code(report: &RunDueReport) -> u8 {
    let outcomes = report.slots.iter().filter_map(|s| match &s.action {
        SlotAction::Ran(o) | SlotAction::Resumed { outcome: o, .. } => Some(o),
        _ => None,
    });
    let rank = |o: &SlotOutcome| match o {
        SlotOutcome::Failed { code, .. } => (5, *code),
        SlotOutcome::Interrupted => (4, exit::INTERRUPTED),
        SlotOutcome::Unavailable | SlotOutcome::Busy(_) => (3, exit::UNAVAILABLE),
        SlotOutcome::TrialsFailed => (2, exit::TRIALS_FAILED),
        SlotOutcome::Ok => (1, exit::OK),
    };
    let worst = outcomes.map(rank).max();
    match worst {
        Some((r, c)) if r >= 4 => c,
        _ if report.regression() => exit::REGRESSION,
        w => w.map_or(exit::OK, |(_, c)| c),
    }
}

fn render(report: &RunDueReport) -> String {
    let mut out = String::new();
    for s in &report.slots {
        out.push_str(&render_slot(s));
        if let Some(r) = &s.review {
            out.push_str(&render_review(r));
        }
        if !s.output.is_empty() {
            out.push_str(&s.output);
            if !s.output.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

/// A review's lines, indented under its slot.
fn render_review(r: &ReviewReport) -> String {
    let mut out = String::new();
    let pct = |v: &serde_json::Value| v.as_f64().map(|d| format!("{:+.1} %", d * 100.0));
    for f in &r.findings {
        let c = &f.screen["comparison"];
        let delta = match (pct(&c["change"]["delta"]), pct(&c["change"]["ci_low"]), pct(&c["change"]["ci_high"])) {
            (Some(d), Some(lo), Some(hi)) => format!(" {d} [{lo}, {hi}]"),
            (Some(d), _, _) => format!(" {d}"),
            _ => String::new(),
        };
        let n = f.baseline["campaigns"].as_array().map_or(0, Vec::len);
        let mut line =
            format!("  screened: {} {} {} {}{delta} vs {n} campaign(s)", f.variant, f.model, f.metric, f.direction);
        if let Some(cp) = f.screen["change_point"]["campaign"].as_str() {
            line.push_str(&format!("; change point at {cp}"));
        }
        line.push_str(&format!(": {}", f.state.as_str()));
        if let Some(id) = &f.confirm_campaign {
            line.push_str(&format!(" (confirmation {id})"));
        }
        if let Some(note) = &f.note {
            line.push_str(&format!("; {note}"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    for c in &r.confirmations {
        out.push_str(&format!(
            "  confirmation {} of {}: {} trials per arm, {}\n",
            c.campaign,
            c.variant,
            c.trials_per_arm,
            c.outcome.text()
        ));
    }
    for a in &r.alerts {
        let why = a.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
        out.push_str(&format!(
            "  alert: {} {} {} after {} tr{}{why}\n",
            a.channel,
            a.target,
            a.state.as_str(),
            a.tries,
            if a.tries == 1 { "y" } else { "ies" }
        ));
    }
    if r.regression {
        out.push_str("  regression confirmed\n");
    } else if r.findings.is_empty() && !r.screened.is_empty() {
        // No finding: say whether "no regression" was shown or is just not found.
        let undecided: Vec<String> = r
            .screened
            .iter()
            .filter(|s| s.verdict != crate::stats::Verdict::Same)
            .map(|s| {
                let more = s.more_trials_per_arm.map(|n| format!(", about {n} more trials per arm would decide"));
                format!("{} {} {}: {}{}", s.model, s.variant, s.metric, s.verdict.as_str(), more.unwrap_or_default())
            })
            .collect();
        if undecided.is_empty() {
            out.push_str(&format!("  no regression, shown: all {} gating series the same\n", r.screened.len()));
        } else {
            out.push_str(&format!("  no regression found, not shown: {}\n", undecided.join("; ")));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    out
}

fn render_slot(s: &SlotReport) -> String {
    let head = format!("{} slot {}", s.schedule, when(s.due_utc, s.zone));
    let campaign = s.campaign.as_deref().map(|c| format!("campaign {c}")).unwrap_or_else(|| "no campaign".into());
    match &s.action {
        SlotAction::Ran(o) => format!("{head}: ran {campaign}: {}\n", o.text()),
        SlotAction::Resumed { from_pid, was, outcome } => {
            let why = match was {
                SlotState::Interrupted => "was interrupted".to_string(),
                _ => format!("was claimed by process {} on this machine, which is gone", from_pid.unwrap_or_default()),
            };
            format!("{head}: {why}; resumed {campaign}: {}\n", outcome.text())
        }
        SlotAction::Skipped { because } => format!("{head}: skipped; {because}\n"),
        SlotAction::Claimed { pid, host, state } => format!(
            "{head}: already claimed by process {} on {} ({}, {campaign}); not run here\n",
            pid.map_or("?".into(), |p| p.to_string()),
            host.as_deref().unwrap_or("?"),
            state.as_str()
        ),
    }
}

async fn daemon(lab: Lab, now: Now, only: Option<String>, verbose: bool) -> Result<(String, u8), CliError> {
    selected(&lab, only.as_deref())?;
    let (stop, signals) = stop_on_signals()?;
    let launcher = launcher(&lab, stop.clone(), verbose);
    let daemon = Daemon { runner: slot_runner(&lab, stop)?, now, only };
    // The daemon's lines go out as they happen, not at the end.
    let mut print = |e: DaemonEvent| {
        use std::io::Write;
        let text = match e {
            DaemonEvent::Ran(r) => render(&r),
            DaemonEvent::Sleeping { schedule, until, zone } => {
                format!("sleeping until {schedule}'s next slot, {}\n", when(until, zone))
            }
            DaemonEvent::NothingScheduled => "no schedule falls due again; waiting for SIGTERM\n".into(),
        };
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
    };
    let result = daemon.run(&launcher, &mut print).await;
    signals.abort();
    result.map_err(CliError::internal)?;
    // Stopped by a signal, as asked: a campaign it interrupted is resumed by the next runner.
    Ok(("stopped\n".into(), exit::OK))
}

fn install(lab: &Lab, target: InstallTarget, only: Option<&str>) -> Result<String, CliError> {
    let schedules = selected(lab, only)?;
    if lab.source == Path::new("<embedded>") {
        return Err(CliError::bad_input("the built-in lab has no schedules; fix: pass --lab FILE"));
    }
    let paths = context::unit_paths(lab)?;
    let mut out = String::new();
    match target {
        InstallTarget::Systemd => {
            out.push_str(
                "# Save each file below into ~/.config/systemd/user/ (or /etc/systemd/system/), then\n\
                 # `systemctl --user daemon-reload && systemctl --user enable --now lab-NAME.timer`.\n",
            );
            for s in schedules {
                for (name, text) in crate::schedule::systemd_units(s, &paths) {
                    out.push_str(&format!("\n# ==> {name} <==\n{text}"));
                }
            }
        }
        InstallTarget::Cron => {
            out.push_str(&crate::schedule::crontab(only.and_then(|n| lab.schedule(n)), &paths));
        }
        InstallTarget::Launchd => {
            for (i, s) in schedules.iter().enumerate() {
                if schedules.len() > 1 {
                    let sep = if i > 0 { "\n" } else { "" };
                    out.push_str(&format!(
                        "{sep}<!-- ==> ~/Library/LaunchAgents/dev.lab.schedule.{}.plist <== -->\n",
                        s.name
                    ));
                }
                out.push_str(&crate::schedule::launchd_plist(s, &paths));
            }
        }
    }
    Ok(out)
}
