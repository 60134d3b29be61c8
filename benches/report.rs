//! Report generation for a campaign of 100 000 trial × metric rows.
//!
//! `cargo bench --bench report` builds a synthetic campaign (10 000 valid attempts × 10
//! metrics, 2 device models, 5 variants, so 1 000 values per model × variant × metric),
//! then times building the report (statistics, comparisons, verdicts) and writing every
//! file (`report.md`, `report.html`, `results.csv`, `summary.csv`, `report.json`) plus
//! the terminal tables. Prints the times; asserts nothing about them (figures are for
//! people and the issue notes). Target: under 2 s.
//!
//! Each attempt carries a 61-point `battery_pct` series (an hour at one point a minute),
//! as the store keeps it, so the HTML report draws its curves without opening a file. For
//! the before/after figure the bench also times what the report did before series were
//! stored: one `sim-energy.log` per attempt opened, read and scanned for its battery lines.

use std::time::Instant;

use rand::RngExt;
use rand_distr::{Distribution, Normal};

use lab::config::{Order, Platform, StatsSettings};
use lab::measure::{BATTERY_PCT, Measurement, Series};
use lab::plan::{Plan, PlannedDevice, Variant};
use lab::report::{self, CampaignData};
use lab::store::{
    AttemptRecord, AttemptStatus, CampaignRecord, CampaignStatus, PlannedTrialRow, TrialOutcome, TrialRecord,
};

const ATTEMPTS: u32 = 10_000;
const METRICS: usize = 10;
const VARIANTS: [&str; 5] = ["base", "v1", "v2", "v3", "v4"];
const MODELS: [&str; 2] = ["iPhone 6s", "Pixel 5"];

fn main() {
    let (data, trials, attempts) = campaign();
    let rows = data.cols.m_value.len();
    let dir = tempfile::tempdir().expect("tempdir");

    let start = Instant::now();
    let rep = report::build_report(&data);
    let built = start.elapsed();
    let table = report::render_table(&rep);
    let files = report::write_all(&rep, &data, dir.path()).expect("write");
    let total = start.elapsed();

    let start = Instant::now();
    let curves = report::battery_curves(&data);
    let from_store = start.elapsed();
    let dumps = tempfile::tempdir().expect("tempdir");
    let paths = write_dumps(&trials, &attempts, dumps.path());
    let start = Instant::now();
    let from_files = paths.iter().filter_map(|p| battery_lines(&std::fs::read_to_string(p).ok()?)).count();
    let before = start.elapsed();

    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!("report: {rows} trial × metric rows, {} comparisons", comparisons(&rep));
    println!("report: build (statistics, comparisons, verdicts) {:.3} s", built.as_secs_f64());
    println!(
        "report: build + terminal tables + all five files {:.3} s (table {} KB, html {} KB, results.csv {} KB, summary.csv {} KB, json {} KB)",
        total.as_secs_f64(),
        table.len() / 1024,
        size(&files.html) / 1024,
        size(&files.csv) / 1024,
        size(&files.summary_csv) / 1024,
        size(&files.json) / 1024
    );
    println!(
        "report: battery curves from the stored series {:.3} s ({} curves, 0 files opened); \
         before, from the raw dumps {:.3} s ({from_files} curves, {} files opened)",
        from_store.as_secs_f64(),
        curves.len(),
        before.as_secs_f64(),
        paths.len()
    );
}

/// One sim dump per attempt, its battery lines from the attempt's series, laid out as
/// the artifact folder is (`<trial key>.attempt-<n>/sim-energy.log`).
fn write_dumps(trials: &[TrialRecord], attempts: &[AttemptRecord], dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let keys: std::collections::HashMap<u32, &str> = trials.iter().map(|t| (t.row.idx, t.row.key.as_str())).collect();
    attempts
        .iter()
        .map(|a| {
            let mut text = String::from("lab-sim-energy-log 1\ndevice dev\nbattery_mah 1715\nvoltage_v 3.82\n");
            for (t, pct) in &a.series[0].points {
                text.push_str(&format!(
                    "battery t={t:.3} level={pct:.0} charge_mah={:.3} current_ma=-222.0 ext=0 charging=0 temp_c=25.00\n",
                    pct / 100.0 * 1715.0
                ));
            }
            let folder = dir.join(lab::store::attempt_folder(keys[&a.trial_idx], a.attempt));
            std::fs::create_dir_all(&folder).expect("folder");
            let path = folder.join("sim-energy.log");
            std::fs::write(&path, text).expect("dump");
            path
        })
        .collect()
}

/// The battery lines of a dump as (minutes, %), as the report read them before series were
/// stored (the reader it had, kept here for the comparison).
fn battery_lines(text: &str) -> Option<Vec<(f64, f64)>> {
    let capacity: f64 = text.lines().find_map(|l| l.strip_prefix("battery_mah "))?.trim().parse().ok()?;
    let points: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("battery "))
        .filter_map(|rest| {
            let field = |key: &str| {
                rest.split_whitespace().find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse::<f64>().ok())
            };
            Some((field("t")? / 60.0, field("charge_mah")? / capacity * 100.0))
        })
        .collect();
    (!points.is_empty()).then_some(points)
}

fn comparisons(r: &report::Report) -> usize {
    r.models.iter().flat_map(|m| &m.rows).map(|row| row.comparisons.len()).sum()
}

/// 10 000 one-attempt trials spread over 5 variants and 2 models, 10 noisy metrics each.
fn campaign() -> (CampaignData, Vec<TrialRecord>, Vec<AttemptRecord>) {
    let mut rng = lab::seed::rng(1, &["bench", "report"]);
    let noise = Normal::new(0.0, 1.0).expect("normal");
    let devices: Vec<PlannedDevice> = MODELS
        .iter()
        .enumerate()
        .map(|(i, m)| PlannedDevice {
            name: format!("dev-{i}"),
            model: m.to_string(),
            platform: Platform::Sim,
            trials: ATTEMPTS / 2,
            device_time_s: 0.0,
        })
        .collect();
    let mut trials = Vec::new();
    let mut attempts = Vec::new();
    for i in 0..ATTEMPTS {
        let (v, m) = (i as usize % VARIANTS.len(), (i as usize / VARIANTS.len()) % MODELS.len());
        let row = PlannedTrialRow {
            idx: i,
            key: format!("{i:05}-dev-{m}-{}", VARIANTS[v]),
            device: format!("dev-{m}"),
            device_model: MODELS[m].to_string(),
            variant: VARIANTS[v].to_string(),
            build: VARIANTS[v].to_string(),
            config: "default".into(),
            repeat: i / 10,
            block: i / 10,
            device_order: i / 2,
        };
        let measurements = (0..METRICS)
            .map(|k| {
                // Variant v shifts metric k by v %: some comparisons change, some do not.
                let mean = 100.0 * (1.0 + k as f64) * (1.0 + 0.01 * v as f64);
                let value = mean * (1.0 + 0.03 * noise.sample(&mut rng)) + rng.random::<f64>() * 1e-3;
                Measurement::new(&format!("metric_{k}"), value, "u", "bench")
            })
            .collect();
        attempts.push(AttemptRecord {
            campaign: "bench".into(),
            trial_idx: i,
            attempt: 0,
            device: String::new(),
            status: AttemptStatus::Valid,
            reasons: Vec::new(),
            phases: vec![("soak".into(), 600.0)],
            started_at: "2026-01-01T00:00:00Z".into(),
            ended_at: "2026-01-01T00:10:00Z".into(),
            soak_start_s: f64::from(i) * 700.0,
            artifact_dir: String::new(),
            measurements,
            series: vec![Series::new(
                BATTERY_PCT,
                "%",
                "bench",
                (0..=60).map(|k| (f64::from(k) * 60.0, 100.0 - f64::from(k) * (0.05 + 0.01 * v as f64))).collect(),
            )],
            state_before: serde_json::Value::Null,
            state_after: serde_json::Value::Null,
            state_soak: serde_json::Value::Null,
            untether: Some(lab::measure::UntetherMode::PowerCut),
            labels: Vec::new(),
            attestations: Vec::new(),
        });
        trials.push(TrialRecord { row, attempts: 1, outcome: TrialOutcome::Valid });
    }
    let plan = Plan {
        runbook: "bench".into(),
        seed: 1,
        order: Order::Balanced,
        duration_s: 600.0,
        cooldown_s: 100.0,
        repeats: ATTEMPTS / 10,
        max_attempts: 1,
        variants: VARIANTS
            .iter()
            .map(|v| Variant {
                name: v.to_string(),
                build: v.to_string(),
                config: "default".into(),
                baseline_build: *v == "base",
                default_config: true,
            })
            .collect(),
        devices,
        trials: trials.iter().map(|t| t.row.clone()).collect(),
        metrics: Vec::new(),
        statistics: StatsSettings {
            gating: vec!["metric_0".into(), "metric_1".into(), "metric_2".into()],
            ..StatsSettings::default()
        },
        expected_requests: None,
        adaptive: None,
        looks: Vec::new(),
    };
    let record = CampaignRecord {
        id: "bench".into(),
        runbook_name: "bench".into(),
        runbook_path: "bench.toml".into(),
        runbook_text: String::new(),
        runbook_sha256: "00".into(),
        lab_text: String::new(),
        lab_sha256: "11".into(),
        content_hashes: serde_json::json!({}),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        seed: 1,
        created_at: "2026-01-01T00:00:00Z".into(),
        finished_at: None,
        status: CampaignStatus::Done,
        runner_pid: None,
        runner_start: None,
        note: None,
        plan_json: serde_json::to_value(&plan).expect("plan"),
        footprint_json: None,
    };
    let data = CampaignData::new(record, trials.clone(), attempts.clone()).expect("campaign data");
    (data, trials, attempts)
}
