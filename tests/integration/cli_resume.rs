//! `kill -9` in the middle of a campaign, then `lab run --resume`: every planned trial
//! ends with exactly one valid attempt, none repeated, none lost.

use crate::common;

use std::time::{Duration, Instant};

use common::{TempLab, root};

#[test]
fn sigkill_then_resume_neither_repeats_nor_drops_trials() {
    let lab = TempLab::new();
    let bin = assert_cmd::cargo::cargo_bin("lab");
    let mut child = std::process::Command::new(bin)
        .current_dir(root())
        .args(["--lab", lab.lab.to_str().unwrap(), "run", "tests/fixtures/long.toml"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // Wait until some attempts are recorded, then kill without warning.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if lab.store().exists()
            && let Ok(n) = lab.try_sql::<i64>("SELECT COUNT(*) FROM attempts")
            && n.first().copied().unwrap_or(0) >= 100
        {
            break;
        }
        assert!(Instant::now() < deadline, "campaign never started recording");
        assert!(child.try_wait().unwrap().is_none(), "lab run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(5));
    }
    // `lab status` from another process sees the campaign running and devices busy.
    let status = lab.cmd(&["status", "--json"]).assert().success().get_output().stdout.clone();
    let v: serde_json::Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(v["campaigns"][0]["status"], "running", "{v}");
    assert!(v["devices"].as_array().unwrap().iter().any(|d| d["state"] == "busy"), "{v}");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let planned: i64 = lab.sql::<i64>("SELECT COUNT(*) FROM trials")[0];
    assert_eq!(planned, 4000);
    let before: Vec<String> =
        lab.sql("SELECT trial_idx || ':' || attempt || ':' || started_at FROM attempts ORDER BY trial_idx, attempt");
    assert!((before.len() as i64) < planned, "the kill came before the end ({} of {planned})", before.len());
    let id = lab.campaigns()[0].clone();

    let status = lab.cmd(&["status", "--json"]).assert().success().get_output().stdout.clone();
    let v: serde_json::Value = serde_json::from_slice(&status).unwrap();
    assert_eq!(v["campaigns"][0]["status"], "interrupted (runner gone)");

    lab.cmd(&["run", "--resume", &id]).assert().success();

    let after: Vec<String> =
        lab.sql("SELECT trial_idx || ':' || attempt || ':' || started_at FROM attempts ORDER BY trial_idx, attempt");
    for row in &before {
        assert!(after.contains(row), "attempt {row} recorded before the kill is kept as it was");
    }
    let valid_per_trial: Vec<i64> =
        lab.sql("SELECT COUNT(*) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx AND a.status = 'valid' GROUP BY t.idx");
    assert_eq!(valid_per_trial.len() as i64, planned);
    assert!(valid_per_trial.iter().all(|&n| n == 1), "exactly one valid attempt per planned trial");
    let done: Vec<String> = lab.sql("SELECT status FROM campaigns");
    assert_eq!(done, ["done"]);
}
