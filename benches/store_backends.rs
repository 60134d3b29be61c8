//! `lab run` and `lab report` on PostgreSQL beside SQLite: the quickstart with 36 000
//! repeats (144 000 trials, 1 008 000 measurements) run once into each store, then its
//! report built from each. docs/benchmarks.md, "store_backends".
//!
//! `cargo bench --bench store_backends` runs the release `lab` binary as a child for each
//! step and prints its wall time and peak RSS with the targets beside them (the run
//! ≥ 1 000 trials/s on PostgreSQL; a report ≤ 2× SQLite's time). It ends with a `PASS` or
//! `FAIL` line on the report's ratio and exits 1 when PostgreSQL's report takes more than
//! 2× SQLite's, when a step fails or when the two runs' `results.csv` differ; the run's
//! rate is a figure for people.
//!
//! Environment:
//! - `LAB_BENCH_POSTGRES` (else `LAB_TEST_POSTGRES`): a server URL whose user may create a
//!   database (`eval "$(tests/pg-cluster.sh)"` starts a throwaway one); without either the
//!   bench says so and exits 0;
//! - `LAB_BENCH_REPEATS` (36000): the runbook's repeats (trials = 4 × repeats);
//! - `LAB_BENCH_RUNS` (3): timed report runs per store, the median is printed;
//! - `LAB_BENCH_REPORT_MAX_RATIO` (2): the report's limit, × SQLite's time (to see the
//!   `FAIL` line on a machine that meets 2×).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "common/measure.rs"]
mod measure;

use measure::{Measured, measure, median_of};

const LAB: &str = env!("CARGO_BIN_EXE_lab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const RUN_MIN_TRIALS_PER_S: f64 = 1000.0;
/// The limit on PostgreSQL's report time, × SQLite's.
const REPORT_MAX_RATIO: f64 = 2.0;

fn main() {
    std::process::exit(run());
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn run() -> i32 {
    let Some(server) = std::env::var("LAB_BENCH_POSTGRES").or_else(|_| std::env::var("LAB_TEST_POSTGRES")).ok() else {
        println!(
            "store_backends: no PostgreSQL server; start one with `eval \"$(tests/pg-cluster.sh)\"` and run again"
        );
        return 0;
    };
    let repeats: usize = env_or("LAB_BENCH_REPEATS", 36_000);
    let runs: usize = env_or("LAB_BENCH_RUNS", 3).max(1);
    let max_ratio: f64 = env_or("LAB_BENCH_REPORT_MAX_RATIO", REPORT_MAX_RATIO);
    let trials = 4 * repeats;
    let temp = tempfile::tempdir().expect("tempdir");
    let db = format!("lab_bench_{}", std::process::id());
    let admin = lab::store::PgOwner::connect(&lab::store::PgUrl::parse(&server).expect("a PostgreSQL URL"))
        .expect("the PostgreSQL server");
    let create = format!("CREATE DATABASE {db}");
    admin.call(move |c| c.batch(&create)).expect("create the bench database");
    let (base, _) = server.rsplit_once('/').expect("a URL with a database");
    let postgres = format!("{base}/{db}");

    let mut code = 0;
    let mut figures = Vec::new();
    for (name, store) in [("sqlite", None), ("postgres", Some(postgres.as_str()))] {
        let dir = temp.path().join(name);
        let lab_file = lab_file(&dir, store, repeats);
        println!("store_backends: {name}: lab run of {trials} trials (minutes at full size)");
        let mut c = lab(&lab_file, &["run", dir.join("quickstart.toml").to_str().unwrap()]);
        let log = fs::File::create(dir.join("run.log")).expect("run.log");
        c.stdout(log.try_clone().expect("log")).stderr(log);
        let ran = measure(&mut c);
        let id = campaign(&dir);
        let report = median_of(runs, || {
            let mut c = lab(&lab_file, &["report", &id, "--format", "json"]);
            c.stdout(Stdio::null());
            measure(&mut c)
        });
        code |= i32::from(!ran.ok || !report.ok);
        figures.push((name, ran, report));
    }
    let _ = admin.call(move |c| c.batch(&format!("DROP DATABASE IF EXISTS {db}")));

    let sqlite_report = figures[0].2.secs;
    println!("\n| store | lab run | trials/s | peak | lab report (json) | peak | × SQLite |");
    println!("|---|---|---|---|---|---|---|");
    for (name, ran, report) in &figures {
        println!(
            "| {name} | {:.1} s{} | {:.0} | {:.0} MB | {:.2} s{} | {:.0} MB | {:.2} |",
            ran.secs,
            failed(*ran),
            trials as f64 / ran.secs,
            ran.peak_mb,
            report.secs,
            failed(*report),
            report.peak_mb,
            report.secs / sqlite_report
        );
    }
    let (pg_run, pg_report) = (figures[1].1, figures[1].2);
    let ratio = pg_report.secs / sqlite_report;
    println!(
        "\ntargets: run on PostgreSQL ≥ {RUN_MIN_TRIALS_PER_S:.0} trials/s: {:.0} ({}); report ≤ {max_ratio}× SQLite: \
         {:.2}× ({})",
        trials as f64 / pg_run.secs,
        met(trials as f64 / pg_run.secs >= RUN_MIN_TRIALS_PER_S),
        ratio,
        met(ratio <= max_ratio)
    );
    // Two runs: their times differ, their measurements must not (same seed).
    let csv = |name: &str| {
        let dir = temp.path().join(name);
        fs::read(dir.join("artifacts").join(campaign(&dir)).join("results.csv")).expect("results.csv")
    };
    let same = csv("sqlite") == csv("postgres");
    println!("results.csv: {}", if same { "the same on both stores" } else { "DIFFER" });
    if !same {
        code = 1;
    }
    let verdict = if ratio > max_ratio { "FAIL" } else { "PASS" };
    println!(
        "store_backends: {verdict}: PostgreSQL's report {:.2} s is {ratio:.2}× SQLite's {sqlite_report:.2} s \
         (the limit is {max_ratio}×)",
        pg_report.secs
    );
    if ratio > max_ratio {
        code = 1;
    }
    code
}

fn failed(m: Measured) -> &'static str {
    if m.ok { "" } else { " [exited non-zero]" }
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "missed" }
}

/// A copy of the default lab in `dir`, on `store` (a PostgreSQL URL) or its SQLite file,
/// and the quickstart with `repeats` repeats.
fn lab_file(dir: &Path, store: Option<&str>, repeats: usize) -> PathBuf {
    fs::create_dir_all(dir).expect("bench dir");
    let mut text = fs::read_to_string(Path::new(ROOT).join("lab.toml")).expect("lab.toml");
    if let Some(url) = store {
        text = text.replace("store = \"artifacts/lab.db\"", &format!("store = \"{url}\""));
    }
    fs::write(dir.join("lab.toml"), text).expect("write lab.toml");
    let runbook = fs::read_to_string(Path::new(ROOT).join("runbooks/quickstart.toml")).expect("quickstart");
    let mut doc: toml_edit::DocumentMut = runbook.parse().expect("quickstart parses");
    doc["repeats"] = toml_edit::value(repeats as i64);
    fs::write(dir.join("quickstart.toml"), doc.to_string()).expect("write runbook");
    dir.join("lab.toml")
}

fn lab(lab_file: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(LAB);
    c.arg("--lab").arg(lab_file).args(args).current_dir(lab_file.parent().unwrap()).stdin(Stdio::null());
    c.env_remove("LAB_STORE");
    c
}

/// The one campaign the run made (its artifacts folder).
fn campaign(dir: &Path) -> String {
    fs::read_dir(dir.join("artifacts"))
        .expect("artifacts")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("quickstart-"))
        .expect("a campaign folder")
}
