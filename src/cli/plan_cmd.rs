//! `lab plan RUNBOOK`: what a campaign would run, without running it.

use std::fmt::Write as _;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::args::PlanArgs;
use super::context;
use super::exit::CliError;
use crate::config;
use crate::plan::{self, Plan, human_duration};

pub fn run(lab_arg: Option<&std::path::Path>, args: &PlanArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let runbook = config::load_runbook(&args.runbook, &lab)?;
    let plan = plan::build(&runbook, &lab)?;
    if args.json {
        return serde_json::to_string_pretty(&plan).map_err(CliError::internal);
    }
    Ok(render(&plan, args.all))
}

#[derive(Tabled)]
struct DeviceRow {
    device: String,
    model: String,
    platform: String,
    trials: u32,
    #[tabled(rename = "device time")]
    time: String,
}

/// The plan as a person reads it.
pub fn render(plan: &Plan, all: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "plan: {} (seed {}, order {})",
        plan.runbook,
        plan.seed,
        format!("{:?}", plan.order).to_lowercase()
    );
    let _ = writeln!(
        s,
        "trial: {} soak, {} cool-down, up to {} attempts each{}",
        human_duration(plan.duration_s),
        human_duration(plan.cooldown_s),
        plan.max_attempts,
        plan.expected_requests.map(|n| format!(", {n} requests expected")).unwrap_or_default()
    );
    if let Some(a) = plan.adaptive {
        let _ = writeln!(
            s,
            "adaptive repeats: this is the first round ({} per variant per model); blocks are added until every \
gating metric's interval is within ±{}% of its mean, up to {} per variant per model",
            a.min,
            (a.target_ci * 1e4).round() / 1e2,
            a.max
        );
    }
    let _ = writeln!(s, "\nvariants ({}):", plan.variants.len());
    for v in &plan.variants {
        let mut tags = Vec::new();
        if v.baseline_build && v.default_config {
            tags.push("baseline");
        }
        let _ = writeln!(
            s,
            "  {:<24} build {}, config {}{}",
            v.name,
            v.build,
            v.config,
            if tags.is_empty() { String::new() } else { format!("  [{}]", tags.join(", ")) }
        );
    }
    let rows: Vec<DeviceRow> = plan
        .devices
        .iter()
        .map(|d| DeviceRow {
            device: d.name.clone(),
            model: d.model.clone(),
            platform: d.platform.to_string(),
            trials: d.trials,
            time: human_duration(d.device_time_s),
        })
        .collect();
    let _ = writeln!(s, "\n{}", Table::new(rows).with(Style::rounded()));
    let _ = writeln!(s, "\norder ({}):", if all { "every trial" } else { "first two blocks per device" });
    for d in &plan.devices {
        let trials: Vec<&str> = plan
            .trials
            .iter()
            .filter(|t| t.device == d.name && (all || t.block < 2))
            .map(|t| t.variant.as_str())
            .collect();
        let more = d.trials as usize - trials.len();
        let _ = writeln!(
            s,
            "  {:<16} {}{}",
            d.name,
            trials.join(" → "),
            if more > 0 { format!(" … (+{more})") } else { String::new() }
        );
    }
    let _ = writeln!(
        s,
        "\n{} trials; total device time {}; makespan {} (devices in parallel; charging and cool-down gates add to it)",
        plan.trials.len(),
        human_duration(plan.total_device_time_s()),
        human_duration(plan.makespan_s())
    );
    s
}
