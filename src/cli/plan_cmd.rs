//! `lab plan RUNBOOK`: what a campaign would run, without running it.

use std::cell::RefCell;
use std::fmt::Write as _;

use tabled::settings::Style;
use tabled::{Table, Tabled};

use super::context;
use super::exit::CliError;
use crate::config;
use crate::config::AdaptiveRepeats;
use crate::plan::{self, Plan};
use crate::stats::sequential::Design;
use crate::text::duration::compact as human_duration;

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    pub runbook: std::path::PathBuf,
    #[arg(long)]
    pub json: bool,
    /// Show every trial in run order, not just the first block per device.
    #[arg(long)]
    pub all: bool,
}

pub fn run(lab_arg: Option<&std::path::Path>, args: &PlanArgs) -> Result<String, CliError> {
    let lab = context::load_lab(lab_arg)?;
    let runbook = config::load_runbook(&args.runbook, &lab)?;
    // The lab's noise floor, read once: the plan is sized from it and the output names
    // the campaigns it comes from.
    let floor: RefCell<Option<(f64, Vec<String>)>> = RefCell::new(None);
    let lookup = |models: &[String]| {
        let found = crate::report::design_noise(&lab, &runbook, models);
        if let Ok(Some(f)) = &found {
            *floor.borrow_mut() = Some(f.clone());
        }
        found
    };
    let plan = plan::build_with(&runbook, &lab, Some(&lookup))?;
    if args.json {
        return serde_json::to_string_pretty(&plan).map_err(CliError::internal);
    }
    let mut out = render(&plan, args.all);
    if let Some((cv, campaigns)) = floor.into_inner() {
        let _ = writeln!(out, "noise floor: CV {:.2} % from campaigns {}", cv * 100.0, campaigns.join(", "));
    }
    Ok(out)
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
    if let Some(a) = plan.adaptive.filter(|a| a.sequential()) {
        let _ = writeln!(s, "{}", sequential_line(plan, &a));
    } else if let Some(a) = plan.adaptive {
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

/// Monte-Carlo runs behind `lab plan`'s expected device-hours of a sequential runbook.
const EXPECTED_RUNS: usize = 1000;

/// A sequential runbook's device-hours: at most (every variant to `max`), and expected when
/// no variant differs from its reference and when each differs by twice the threshold, in
/// the normal model at the CV the design is sized for (`stats::sequential::Design`).
fn sequential_line(plan: &Plan, rule: &AdaptiveRepeats) -> String {
    let hours = (plan.duration_s + plan.cooldown_s) / 3600.0;
    let mut models: Vec<(&str, usize)> = Vec::new();
    for d in &plan.devices {
        match models.iter_mut().find(|m| m.0 == d.model) {
            Some(m) => m.1 += 1,
            None => models.push((&d.model, 1)),
        }
    }
    let variants = plan.variants.len();
    let compared = plan.variants.iter().filter(|v| !(v.baseline_build && v.default_config)).count();
    let most = (models.len() * variants) as f64 * f64::from(rule.max) * hours;
    let design = |devices: usize| Design {
        min: rule.min,
        max: rule.max,
        devices,
        alpha: plan.statistics.alpha,
        threshold: plan.statistics.practical_threshold,
        target: rule.target(),
    };
    let target = rule.target();
    let cv = target.map_or_else(|| design(1).design_cv(), |t| t.cv);
    let mut rng = crate::seed::rng(plan.seed, &["plan", "expected"]);
    let mut expected = |effect: f64| -> f64 {
        let mut total = 0.0;
        for _ in 0..EXPECTED_RUNS {
            for &(_, devices) in &models {
                let n: Vec<u32> = (0..compared).map(|_| design(devices).trials_to_stop(cv, effect, &mut rng)).collect();
                // The references run as long as the longest of the variants compared with them.
                let reference = n.iter().copied().max().unwrap_or(rule.min);
                total += f64::from(n.iter().sum::<u32>() + reference * (variants - compared) as u32);
            }
        }
        total / EXPECTED_RUNS as f64 * hours
    };
    let (same, twice) = (expected(0.0), expected(2.0 * plan.statistics.practical_threshold));
    if let (Some(t), Some(asked)) = (target, rule.power) {
        let counts = design(1).planned_counts();
        let counts: Vec<String> = counts.iter().map(u32::to_string).collect();
        let fixed = design(1).fixed_equivalent(t.cv).map_or(0, |f| f.1);
        let source = match asked.noise_campaigns {
            0 => "the runbook's `cv`".to_string(),
            n => format!("the lab's noise floor over {n} campaigns (below)"),
        };
        return format!(
            "sequential repeats sized for {:.0} % power to call a change of twice the threshold: {} looks, after {} \
trials per variant per model, each variant stopping once worse, better, the same, or with no change as large as twice \
the threshold (docs/statistics.md); the fixed design with that power: {fixed}; sized at a CV of {:.1} %, {source}; \
device-hours at most {most:.1}, expected {same:.1} if no variant changes and {twice:.1} if each changes by twice the \
threshold",
            t.power * 100.0,
            counts.len(),
            counts.join(", "),
            t.cv * 100.0,
        );
    }
    format!(
        "sequential repeats: {} to {} per variant per model, a look after every round, each variant stopping once \
worse, better or the same (group-sequential, docs/statistics.md); device-hours at most {most:.1}, expected {same:.1} if no \
variant changes and {twice:.1} if each changes by twice the threshold (normal model at a CV of {:.1} %, the noise {} \
trials per arm are sized for)",
        rule.min,
        rule.max,
        cv * 100.0,
        rule.max
    )
}
