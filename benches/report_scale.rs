//! `lab run` and `lab report` on the issue-15 campaign (the quickstart with 36 000
//! repeats: 144 000 trials, 1 008 000 trial × metric rows), next to pandas + scipy.
//!
//! `cargo bench --bench report_scale` runs the release `lab` binary as a child for each
//! step and prints its wall time and peak RSS (`wait4`'s `ru_maxrss`) with the issue's
//! targets beside them, then a PASS or FAIL line per target. Figures for people, never
//! asserts; only the figures' agreement with pandas is checked (exit 1 on a difference).
//! docs/report.md, "Benchmarks".
//!
//! Environment:
//! - `LAB_BENCH_REPEATS` (36000): the runbook's repeats (trials = 4 × repeats);
//! - `LAB_BENCH_DIR`: keep the generated lab there and reuse it (generation takes minutes);
//! - `LAB_BENCH_RUNS` (3): timed runs per step, the median is printed (after one warm-up);
//! - `LAB_BENCH_PYTHON` (python3): an interpreter with pandas and scipy.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

// Shared with tests/integration/crosscheck.rs, which runs the same script on a small campaign in CI.
#[path = "../tests/common/figures.rs"]
mod figures;
#[path = "common/measure.rs"]
mod measure;

use measure::{Measured, measure, median_of};

const LAB: &str = env!("CARGO_BIN_EXE_lab");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const FORMATS: [&str; 5] = ["table", "md", "html", "json", "csv"];
/// The targets.
const REPORT_MAX_S: f64 = 1.0;
const REPORT_MAX_MB: f64 = 250.0;
const RUN_MAX_MB: f64 = 300.0;
const HISTORY_MAX_S: f64 = 0.2;
/// Campaigns in the history step.
const HISTORY_CAMPAIGNS: usize = 100;
/// Relative tolerance of the figures' agreement (the scipy cross-check's).
const REL: f64 = 1e-9;

fn main() {
    // Through `run`, so the temp lab (about 4 GB at full size) is removed before exiting.
    std::process::exit(run());
}

/// The bench; its exit code (1 when a step failed or the figures differ).
fn run() -> i32 {
    let repeats: usize = env_or("LAB_BENCH_REPEATS", 36_000);
    let runs: usize = env_or("LAB_BENCH_RUNS", 3).max(1);
    let python = std::env::var("LAB_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = match std::env::var_os("LAB_BENCH_DIR") {
        Some(d) => PathBuf::from(d).join(format!("repeats-{repeats}")),
        None => temp.path().to_path_buf(),
    };
    fs::create_dir_all(&dir).expect("bench dir");
    let lab_file = dir.join("lab.toml");

    let (run, cached) = generate(&dir, repeats);
    let campaign = campaign_dir(&dir).expect("the run left a campaign folder");
    let id = campaign.file_name().unwrap().to_string_lossy().into_owned();
    let rows = measurement_rows(&dir.join("artifacts/lab.db"), &id);
    let results = campaign.join("results.csv");
    println!(
        "report_scale: campaign {id}: {} trials, {rows} measurements (expected {}), results.csv {:.0} MB",
        4 * repeats,
        28 * repeats,
        fs::metadata(&results).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
    );

    let report = |format: &str| {
        let mut c = Command::new(LAB);
        c.arg("--lab").arg(&lab_file).args(["report", &id, "--format", format]);
        c.stdout(Stdio::null());
        c
    };
    // Warm the page cache (store and results.csv) for both sides.
    measure(&mut report("table"));
    let mut lab_rows = Vec::new();
    for f in FORMATS {
        lab_rows.push((format!("lab report --format {f}"), median_of(runs, || measure(&mut report(f)))));
    }
    // As after a change in the store: the five files written again (the stamp gone).
    let stamp = campaign.join(".report-stamp");
    let rewrite = median_of(runs, || {
        let _ = fs::remove_file(&stamp);
        measure(&mut report("json"))
    });
    lab_rows.push(("lab report --format json, files rewritten".into(), rewrite));

    let (history_warm, history_cold, history_agrees) = history_bench(runs);

    let figures = dir.join("pandas-figures.json");
    let pandas = if has_pandas(&python) {
        let script = Path::new(ROOT).join("benches/report_pandas.py");
        let m = median_of(runs, || {
            let mut c = Command::new(&python);
            c.arg(&script).arg(&results).stdout(File::create(&figures).expect("figures file"));
            measure(&mut c)
        });
        Some(m)
    } else {
        println!(
            "report_scale: no pandas for {python}; install: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install \
             pandas scipy, then LAB_BENCH_PYTHON=/tmp/venv/bin/python (lab's figures only below)"
        );
        None
    };

    println!();
    println!(
        "{:<42} {:>8} {:>9} {:>10}  target",
        format!("what ({} run{}, median)", runs, if runs == 1 { "" } else { "s" }),
        "wall s",
        "peak MB",
        "× pandas"
    );
    let note = if cached { " (cached)" } else { "" };
    let run_what = format!("lab run, {} trials{note}", 4 * repeats);
    print_row(&run_what, run, None, &format!("≤ {RUN_MAX_MB} MB: {}", yes_no(run.peak_mb <= RUN_MAX_MB)));
    // (what, target, figure, met): one PASS or FAIL line each after the table.
    let mut verdicts: Vec<(String, String, String, bool)> = vec![(
        run_what.clone(),
        format!("peak ≤ {RUN_MAX_MB} MB"),
        format!("{:.0} MB", run.peak_mb),
        run.peak_mb <= RUN_MAX_MB,
    )];
    for (what, m) in &lab_rows {
        let target = format!(
            "≤ {REPORT_MAX_S} s: {}, ≤ {REPORT_MAX_MB} MB: {}{}",
            yes_no(m.secs <= REPORT_MAX_S),
            yes_no(m.peak_mb <= REPORT_MAX_MB),
            pandas.map(|p| format!(", faster than pandas: {}", yes_no(m.secs < p.secs))).unwrap_or_default()
        );
        print_row(what, *m, pandas, &target);
        verdicts.push((
            what.clone(),
            format!("≤ {REPORT_MAX_S} s"),
            format!("{:.2} s", m.secs),
            m.secs <= REPORT_MAX_S,
        ));
        verdicts.push((
            what.clone(),
            format!("peak ≤ {REPORT_MAX_MB} MB"),
            format!("{:.0} MB", m.peak_mb),
            m.peak_mb <= REPORT_MAX_MB,
        ));
        if let Some(p) = pandas {
            let figure = format!("{:.2} s against {:.2} s", m.secs, p.secs);
            verdicts.push((what.clone(), "faster than pandas + scipy".into(), figure, m.secs < p.secs));
        }
    }
    let history_target = |m: &Measured| format!("≤ {HISTORY_MAX_S} s: {}", yes_no(m.secs <= HISTORY_MAX_S));
    print_row("lab history, 100 campaigns", history_warm, None, &history_target(&history_warm));
    verdicts.push((
        "lab history, 100 campaigns".into(),
        format!("≤ {HISTORY_MAX_S} s"),
        format!("{:.2} s", history_warm.secs),
        history_warm.secs <= HISTORY_MAX_S,
    ));
    print_row("lab history, 100 campaigns recomputed", history_cold, None, "summaries deleted first");
    if let Some(p) = pandas {
        let compute = read_json(&figures).and_then(|v| v["compute_s"].as_f64());
        let what = match compute {
            Some(c) => format!("pandas + scipy (compute {c:.2} s)"),
            None => "pandas + scipy".into(),
        };
        print_row(&what, p, None, "start-up and imports included");
    }
    println!();
    for (what, target, figure, met) in &verdicts {
        println!("report_scale: {} {what}: {target} ({figure})", if *met { "PASS" } else { "FAIL" });
    }
    let failed = verdicts.iter().filter(|v| !v.3).count();
    println!("report_scale: {} of {} targets met", verdicts.len() - failed, verdicts.len());
    if !history_agrees {
        println!("report_scale: lab history recomputed from the measurements differs from the stored summaries");
        return 1;
    }
    let all_ok = run.ok && lab_rows.iter().all(|(_, m)| m.ok) && pandas.is_none_or(|p| p.ok);
    if !all_ok {
        println!(
            "report_scale: a step exited non-zero (see above; lab run's output: {})",
            dir.join("run.log").display()
        );
        return 1;
    }
    if pandas.is_some() {
        // report.json is what the last `lab report` wrote: the same JSON as `--format json`.
        let lab_json = read_json(&campaign.join("report.json")).expect("report.json");
        let ours = read_json(&figures).expect("pandas figures");
        let (diffs, checked, largest) = figures::compare_figures(&lab_json, &ours, REL);
        println!(
            "report_scale: {checked} figures compared with report.json at relative {REL:e}; largest relative difference {largest:.1e}"
        );
        if diffs.is_empty() {
            println!("report_scale: figures agree");
        } else {
            println!("report_scale: {} figure(s) differ between lab and pandas:", diffs.len());
            for d in &diffs {
                println!("  {d}");
            }
            return 1;
        }
    }
    0
}

/// `lab history` over 100 stored campaigns of the quickstart (4 repeats): one `lab run`,
/// its rows copied 99 times in SQL as later campaigns, then `lab history` with the
/// summaries stored (as every run leaves them) and with them deleted first (each
/// campaign's recomputed from its measurements).
fn history_bench(runs: usize) -> (Measured, Measured, bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let lab_file = dir.path().join("lab.toml");
    fs::copy(Path::new(ROOT).join("lab.toml"), &lab_file).expect("copy lab.toml");
    let ran = Command::new(LAB)
        .arg("--lab")
        .arg(&lab_file)
        .arg("run")
        .arg(Path::new(ROOT).join("runbooks/quickstart.toml"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("lab run");
    assert!(ran.success(), "the quickstart ran");
    let db = dir.path().join("artifacts/lab.db");
    let mut conn = rusqlite::Connection::open(&db).expect("store");
    let (id, runbook): (String, String) =
        conn.query_row("SELECT id, runbook_name FROM campaigns", [], |r| Ok((r.get(0)?, r.get(1)?))).expect("campaign");
    let tables = [
        ("campaigns", "id"),
        ("trials", "campaign"),
        ("attempts", "campaign"),
        ("attempt_report", "campaign"),
        ("measurements", "campaign"),
        ("series", "campaign"),
        ("campaign_summaries", "campaign"),
    ];
    let tx = conn.transaction().expect("transaction");
    // Measurements and series are keyed by ids of their own, found through each attempt's
    // id ranges in `attempt_report` (migration 13): copy n moves all of them up by n times
    // the largest, so that they are new and the ranges still hold the copy's rows.
    let top = |table: &str| -> i64 {
        tx.query_row(&format!("SELECT coalesce(max(id), 0) FROM {table}"), [], |r| r.get(0)).expect("largest id")
    };
    let (measurements_top, series_top) = (top("measurements"), top("series"));
    for n in 1..HISTORY_CAMPAIGNS {
        let (m, s) = (n as i64 * measurements_top, n as i64 * series_top);
        let copy = format!("{id}-copy{n:03}");
        for (table, key) in tables {
            let cols: Vec<String> = tx
                .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
                .expect("columns");
            let select: Vec<String> = cols
                .iter()
                .map(|c| match (table, c.as_str()) {
                    (_, c) if c == key => "?1".to_string(),
                    // A week later each: the history's order.
                    ("campaigns", "created_at") => {
                        format!("strftime('%Y-%m-%dT%H:%M:%SZ', created_at, '+{} days')", 7 * n)
                    }
                    ("measurements", "id") | ("attempt_report", "measurements_from" | "measurements_to") => {
                        format!("{c} + {m}")
                    }
                    ("series", "id") | ("attempt_report", "series_from" | "series_to") => format!("{c} + {s}"),
                    _ => c.clone(),
                })
                .collect();
            let sql = format!(
                "INSERT INTO {table} ({}) SELECT {} FROM {table} WHERE {key} = ?2",
                cols.join(", "),
                select.join(", ")
            );
            tx.execute(&sql, rusqlite::params![copy, id]).expect("copy a campaign");
        }
    }
    tx.commit().expect("commit");
    let history = |format: &str| {
        let mut c = Command::new(LAB);
        c.arg("--lab").arg(&lab_file).args(["history", &runbook, "--format", format]);
        c
    };
    let timed = || {
        let mut c = history("table");
        c.stdout(Stdio::null());
        c
    };
    // What history shows from the stored summaries, and recomputed from the rows: the same
    // (a copy whose rows it could not find would show none). History stores what it
    // recomputes, so the warm runs below read stored summaries again.
    let shown = || history("json").stderr(Stdio::null()).output().expect("lab history").stdout;
    let stored = shown();
    conn.execute("DELETE FROM campaign_summaries", []).expect("delete summaries");
    let agree = stored == shown() && !stored.is_empty();
    measure(&mut timed());
    let warm = median_of(runs, || measure(&mut timed()));
    let cold = median_of(runs, || {
        conn.execute("DELETE FROM campaign_summaries", []).expect("delete summaries");
        measure(&mut timed())
    });
    (warm, cold, agree)
}

/// Runs `lab run` unless `dir` already holds a finished campaign; its figures are kept
/// in `run-figures.json` so a reused lab still prints them (marked cached).
fn generate(dir: &Path, repeats: usize) -> (Measured, bool) {
    let saved = dir.join("run-figures.json");
    if campaign_dir(dir).is_some_and(|c| c.join("report.json").exists())
        && let Some(v) = read_json(&saved)
    {
        let m = Measured {
            secs: v["secs"].as_f64().unwrap_or(f64::NAN),
            peak_mb: v["peak_mb"].as_f64().unwrap_or(f64::NAN),
            ok: v["ok"].as_bool().unwrap_or(false),
        };
        return (m, true);
    }
    let _ = fs::remove_dir_all(dir.join("artifacts"));
    fs::copy(Path::new(ROOT).join("lab.toml"), dir.join("lab.toml")).expect("copy lab.toml");
    let text = fs::read_to_string(Path::new(ROOT).join("runbooks/quickstart.toml")).expect("quickstart runbook");
    let mut doc: toml_edit::DocumentMut = text.parse().expect("quickstart parses");
    doc["repeats"] = toml_edit::value(repeats as i64);
    fs::write(dir.join("quickstart.toml"), doc.to_string()).expect("write runbook");
    println!("report_scale: generating {} trials with {LAB} run (minutes at full size)", 4 * repeats);
    let log = File::create(dir.join("run.log")).expect("run.log");
    let mut c = Command::new(LAB);
    c.arg("--lab")
        .arg(dir.join("lab.toml"))
        .arg("run")
        .arg(dir.join("quickstart.toml"))
        .stdin(Stdio::null())
        .stderr(log.try_clone().expect("log"))
        .stdout(log);
    let m = measure(&mut c);
    let v = serde_json::json!({ "secs": m.secs, "peak_mb": m.peak_mb, "ok": m.ok });
    fs::write(&saved, v.to_string()).expect("run figures");
    (m, false)
}

fn print_row(what: &str, m: Measured, pandas: Option<Measured>, target: &str) {
    let ratio = pandas.map(|p| format!("{:.2}", m.secs / p.secs)).unwrap_or_else(|| "".into());
    let failed = if m.ok { "" } else { " [exited non-zero]" };
    println!("{what:<42} {:>8.2} {:>9.0} {ratio:>10}  {target}{failed}", m.secs, m.peak_mb);
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "NO" }
}

fn campaign_dir(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir.join("artifacts"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("quickstart-")))
        .collect();
    found.sort();
    found.pop()
}

fn measurement_rows(db: &Path, id: &str) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("store");
    conn.query_row("SELECT count(*) FROM measurements WHERE campaign = ?1", [id], |r| r.get(0)).expect("count")
}

fn has_pandas(python: &str) -> bool {
    Command::new(python).args(["-c", "import pandas, scipy"]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&fs::read_to_string(path).ok()?).ok()
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
