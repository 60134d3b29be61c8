//! Command-line arguments (clap).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "lab",
    version,
    about = "Reproducible device-lab orchestrator: builds × configs × devices × repeats, with statistics"
)]
pub struct Cli {
    /// The lab inventory. Default: ./lab.toml if present, else the built-in default lab
    /// (simulated phones on this machine). Also settable with LAB_CONFIG.
    #[arg(long, global = true, env = "LAB_CONFIG", value_name = "FILE")]
    pub lab: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a campaign: every trial of a runbook, devices in parallel.
    Run(super::run_cmd::RunArgs),
    /// Run a campaign again from its manifest (same runbook, seed and order), refusing when
    /// a build changed, then compare the two. Exits 5 when a gating metric came out worse.
    Rerun(super::rerun_cmd::RerunArgs),
    /// Submit a campaign to the lab's agents: validate, plan, store it queued, print its
    /// id and return (docs/agents.md).
    Submit(super::submit_cmd::SubmitArgs),
    /// Follow a submitted campaign with `lab run`'s output and exit codes; Ctrl-C detaches.
    Wait(super::wait_cmd::WaitArgs),
    /// Cancel a campaign: a queued one is removed, a running one stops at once (resumable).
    Cancel(super::cancel_cmd::CancelArgs),
    /// Serve a lab host's devices with the campaigns submitted to the lab, until SIGTERM
    /// or `lab agent drain HOST` (docs/agents.md).
    Agent(super::agent_cmd::AgentArgs),
    /// Show what a runbook would run: variants, trials per device, order, time.
    Plan(super::plan_cmd::PlanArgs),
    /// Show the lab's devices and campaigns (works while `lab run` is going).
    Status(super::status_cmd::StatusArgs),
    /// Print a campaign's report again, or write it in another format.
    Report(super::report_cmd::ReportArgs),
    /// Parse captured device output (batterystats, dumpsys, battery registry, …) and print
    /// its metrics; with --variant and --device, attach it as a trial of a campaign.
    Import(super::import_cmd::ImportArgs),
    /// Compare two campaigns of one runbook (e.g. last week and this week): every
    /// variant × model × metric of B against A. Exits 5 when a gating metric is worse.
    Compare(super::compare_cmd::CompareArgs),
    /// Lab hosts: `lab hosts check` tests reachability, host keys, login and tools;
    /// `lab hosts forward` reaches a port or Unix socket on a host from this machine.
    Hosts(super::hosts_cmd::HostsArgs),
    /// USB hubs: every host's hubs and ports as `uhubctl` lists them, and which port each
    /// of the lab's phones is on (by its USB serial).
    Hubs(super::hubs_cmd::HubsArgs),
    /// What is attached to each host: Android phones, iPhones, the hub port each is on,
    /// power monitors; whether lab.toml has them, and what keeps them from use. Read-only.
    Discover(super::discover_cmd::DiscoverArgs),
    /// Write a new lab.toml in this folder (never over one): this machine, the SSH hosts
    /// given, and the phones found on them.
    Init(super::init_cmd::InitArgs),
    /// Keep each hub-powered phone between the charge limits of `[care]` by switching its
    /// port, until Ctrl-C; every port it cut is switched on again when it stops.
    Care(super::care_cmd::CareArgs),
    /// Change points of one column of a CSV file (E-divisive means with a t-test, as Apache
    /// Otava finds them): where the series moved to a new level.
    Changes(super::changes_cmd::ChangesArgs),
    /// Answer an operator step a running campaign waits on (a `[[steps]]` entry, a manual
    /// tether's unplug / plug-in), with what it asks to attest.
    Confirm(super::confirm_cmd::ConfirmArgs),
    /// The lab in a browser: devices and queue, campaigns and their reports
    /// (docs/serve.md). Binds 127.0.0.1:8470 unless told otherwise.
    Serve(super::serve::ServeArgs),
    /// Schedules of lab.toml (`[[schedule]]`): list them, run what is due, keep running
    /// them (`daemon`), or print a systemd timer, crontab line or launchd plist.
    Schedule(super::schedule_cmd::ScheduleArgs),
    /// Every campaign of a runbook, one point per variant × model × metric, with change
    /// points and what the schedule's reviews found (table, JSON or an HTML page with plots).
    History(super::history_cmd::HistoryArgs),
    /// The lab's own noise floor per device model and metric, from every campaign's
    /// baseline arm and A/A comparison: the CV with its interval, its weekly drift, and the
    /// smallest change N trials per arm detect at 80 and 90 % power.
    Noise(super::noise_cmd::NoiseArgs),
    /// The store itself: `lab store copy FROM TO` copies every campaign and the schedule's
    /// history from one store into another (SQLite into PostgreSQL or back), resumably.
    Store(super::store_cmd::StoreArgs),
    /// Raw files in the lab's bucket: `lab artifacts sync` uploads every file this machine
    /// holds that is not confirmed there yet (docs/artifacts.md).
    Artifacts(super::artifacts_cmd::ArtifactsArgs),
    /// Print a shell completion script to stdout, e.g.
    /// `lab completions bash > ~/.local/share/bash-completion/completions/lab`.
    Completions(super::completions_cmd::CompletionsArgs),
    /// Print the man page (roff) to stdout, e.g. `lab man > ~/.local/share/man/man1/lab.1`;
    /// `lab man run` prints the page of `lab run` (lab-run.1).
    Man(super::man_cmd::ManArgs),
}
