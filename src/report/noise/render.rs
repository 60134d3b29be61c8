//! `lab noise` output: a table per device model (a row per metric: arms, trials, the CV
//! with its interval, the weekly drift, the smallest detectable change per trials per
//! arm) with the campaigns it comes from, and JSON.

use std::fmt::Write;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

use crate::report::noise::build_noise::{NOISE_POWERS, NoiseReport, NoiseSeries};
use crate::report::render::format::{MISSING, percent};

/// A CV or a change in percent with two decimals, without the sign: `3.14`.
fn pct(x: f64) -> String {
    format!("{:.2}", x * 100.0)
}

/// `1 week`, or `3 weeks, +0.12 pt/week`: the weeks and the drift of the CV in
/// percentage points a week.
fn weeks_cell(s: &NoiseSeries) -> String {
    match s.drift_per_week {
        Some(d) => format!("{} weeks, {:+.2} pt/week", s.weeks.len(), d * 100.0),
        None => format!("{} week", s.weeks.len()),
    }
}

/// `±3.00 / ±3.48 %`: the smallest change `n` trials per arm detect at each power.
fn detectable_cell(s: &NoiseSeries, n: u32) -> String {
    let cells: Vec<String> = NOISE_POWERS
        .iter()
        .map(|p| {
            let d = s.detectable.iter().find(|d| d.trials_per_arm == n && d.power == *p);
            d.and_then(|d| d.change).map_or_else(|| MISSING.into(), |c| format!("±{}", pct(c)))
        })
        .collect();
    format!("{} %", cells.join(" / "))
}

fn model_table(out: &mut String, model: &str, series: &[&NoiseSeries], confidence: f64) {
    let trials: Vec<u32> = {
        let mut t: Vec<u32> = series[0].detectable.iter().map(|d| d.trials_per_arm).collect();
        t.dedup();
        t
    };
    let powers: Vec<String> = NOISE_POWERS.iter().map(|p| percent(*p)).collect();
    let mut b = Builder::default();
    let mut header: Vec<String> = ["metric", "arms (A/A)", "trials"].map(String::from).into_iter().collect();
    header.push(format!("CV % [{}]", percent(confidence)));
    header.push("drift".into());
    header.extend(trials.iter().map(|n| format!("n={n}: {}", powers.join(" / "))));
    b.push_record(header);
    for s in series {
        let gating = if s.gating { " ·" } else { "" };
        let mut row = vec![
            format!("{}{gating}", s.metric),
            format!("{} ({})", s.arms, s.aa_arms),
            s.trials.to_string(),
            format!("{} [{}, {}]", pct(s.cv), pct(s.cv_low), pct(s.cv_high)),
            weeks_cell(s),
        ];
        row.extend(trials.iter().map(|&n| detectable_cell(s, n)));
        b.push_record(row);
    }
    let mut t = b.build();
    t.with(Style::rounded()).modify(Columns::new(1..3), Alignment::right());
    let mut campaigns: Vec<&str> = series.iter().flat_map(|s| s.campaigns.iter().map(String::as_str)).collect();
    campaigns.sort_unstable();
    campaigns.dedup();
    let _ = writeln!(out, "\n{model}\n{t}\nfrom: {}", campaigns.join(", "));
}

/// Terminal output. Ends with a newline.
pub fn render_noise_table(r: &NoiseReport) -> String {
    let mut out = format!(
        "noise floor of {} campaigns: their baseline arms and both arms of A/A comparisons, each arm's CV pooled\n\
n=N: the smallest change N trials per arm detect at that power (two-sided t-test, α {}); · a gating metric",
        r.campaigns_read, r.alpha
    );
    out.push('\n');
    let mut models: Vec<&str> = Vec::new();
    for s in &r.series {
        if !models.contains(&s.model.as_str()) {
            models.push(&s.model);
        }
    }
    for m in models {
        let series: Vec<&NoiseSeries> = r.series.iter().filter(|s| s.model == m).collect();
        model_table(&mut out, m, &series, r.confidence);
    }
    out
}

/// JSON output (schema in docs/statistics.md). Ends with a newline.
pub fn render_noise_json(r: &NoiseReport) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("the noise report serializes to JSON");
    s.push('\n');
    s
}
