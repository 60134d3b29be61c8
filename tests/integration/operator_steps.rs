//! Operator steps with no terminal: `lab run` (stdin not a terminal) prints each step it
//! waits on with the `lab confirm` command that answers it; another process runs that
//! command; attestations end up in the report and `lab status` as attested. A step nobody
//! answers expires into an invalid attempt and the campaign goes on.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{TempLab, root};

pub(crate) const LAB: &str = r#"
[lab]
name = "bench"
artifacts = "artifacts"
store = "artifacts/lab.db"
[[host]]
name = "local"
[[device]]
name = "sim-pixel"
platform = "sim"
model = "Pixel 7"
tether = "manual"
[device.sim]
emulates = "android"
seed = 5
"#;

pub(crate) fn runbook(lab: &TempLab, operator_timeout: &str) -> String {
    let text = format!(
        r#"
name = "attested"
duration = "10m"
repeats = 2
retries = 0
devices = ["sim-pixel"]
[builds.app]
baseline = true
[builds.app.sim]
cpu_pct = 5
wakeups_per_s = 5
memory_mb = 20
[preconditions]
untethered = true
[timeouts]
operator = "{operator_timeout}"
[[steps]]
name = "screen"
text = "Set the brightness to 50 % and switch Bluetooth off"
when = "before-campaign"
attest = ["brightness", "bluetooth"]
[[steps]]
name = "check"
text = "Check the screen shows no charging icon"
when = "after-trial"
"#
    );
    let path = lab.dir.path().join("attested.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Runs `lab run` with no terminal; each step it prints is handed to `answer`, which
/// returns whether to run the printed `lab confirm` (with `…` values filled in). Returns
/// the exit code, the run's output and each confirm's output.
fn run_answering(lab: &TempLab, rb: &str, mut answer: impl FnMut(usize, &str) -> bool) -> (i32, String, Vec<String>) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(root())
        .env_remove("LAB_CONFIG")
        .args(["--lab", lab.lab.to_str().unwrap(), "run", rb])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut confirms = Vec::new();
    let mut asked = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        let Some(cmd) = line.contains("OPERATOR").then(|| line.split('`').nth(1)).flatten() else { continue };
        asked += 1;
        if !answer(asked, cmd) {
            continue;
        }
        let cmd = cmd.replace("brightness=…", "brightness=50").replace("bluetooth=…", "bluetooth=off");
        let args: Vec<&str> = cmd.split_whitespace().collect();
        assert_eq!(args[..2], ["lab", "confirm"], "{line}");
        let o = lab.cmd(&args[1..]).env("USER", "ana").output().unwrap();
        let said = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{cmd}: {said}");
        confirms.push(said);
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code().unwrap_or(-1), out + &err, confirms)
}

#[test]
fn steps_and_a_manual_tether_are_answered_by_lab_confirm_from_another_process() {
    let lab = TempLab::from_text(LAB);
    let rb = runbook(&lab, "2m");
    let (code, out, confirms) = run_answering(&lab, &rb, |_, _| true);
    assert_eq!(code, 0, "{out}");
    // The before-campaign step once, then per trial: unplug, plug-in, the after-trial check.
    let steps: Vec<&str> = confirms.iter().map(|c| c.split_whitespace().nth(2).unwrap_or_default()).collect();
    assert_eq!(steps, ["screen", "unplug", "plug-in", "check", "unplug", "plug-in", "check"], "{confirms:?}");
    assert!(confirms[0].contains("as ana, attested brightness=50 %, bluetooth=off"), "{}", confirms[0]);
    assert!(out.contains("2 valid, 0 failed"), "{out}");

    let id = lab.campaigns().remove(0);
    let json = lab.cmd(&["report", &id, "--format", "json"]).output().unwrap();
    assert!(json.status.success());
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let rows = report["attested"].as_array().expect("attested rows");
    let screen = rows.iter().find(|r| r["step"] == "screen").expect("the screen step");
    assert_eq!(screen["values"], serde_json::json!({ "brightness": 50.0, "bluetooth": false }));
    assert_eq!((&screen["source"], &screen["by"], &screen["attempts"]), (&"attested".into(), &"ana".into(), &2.into()));
    assert!(rows.iter().any(|r| r["step"] == "unplug" && r["when"] == "untether" && r["attempts"] == 2), "{rows:?}");
    let md = std::fs::read_to_string(lab.artifacts().join(&id).join("report.md")).unwrap();
    assert!(md.contains("### Attested by operators"), "{md}");
    assert!(md.contains("bluetooth=off, brightness=50 % (attested)"), "{md}");
    // The simulated phone reads its Bluetooth on: the operator's word does not replace it.
    let warnings = report["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w == "sim-pixel: step screen attested bluetooth off but the lab read on (2 attempt(s)); the reading is what was checked"),
        "{warnings:?}"
    );
    // What no API of the sim reads (it reads brightness and Bluetooth itself) stays read.
    let before: Vec<String> = lab.sql("SELECT state_before FROM attempts");
    assert!(
        before.iter().all(|b| {
            let v: serde_json::Value = serde_json::from_str(b).unwrap();
            v["brightness_pct"]["from"] == "read" && !b.contains("operator")
        }),
        "{before:?}"
    );

    let status = lab.cmd(&["status"]).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("attested by operators"), "{status}");
    assert!(status.contains("bluetooth=off, brightness=50 % (attested)"), "{status}");
    assert!(!status.contains("waiting for an operator"), "nothing waits once the run is over: {status}");
}

#[test]
fn an_unanswered_step_expires_into_an_invalid_attempt_and_the_campaign_goes_on() {
    let lab = TempLab::from_text(LAB);
    let rb = runbook(&lab, "2s");
    // Answer everything except the second trial's unplug.
    let (code, out, _) = run_answering(&lab, &rb, |n, cmd| !(n == 5 && cmd.contains("--step unplug")));
    assert_eq!(code, 4, "one trial failed: {out}");
    assert!(out.contains("1 valid, 1 failed"), "{out}");
    assert!(
        out.contains(
            "operator step `unplug` (untether: unplug the USB cable) not answered within 2s (timeouts.operator)"
        ),
        "{out}"
    );
    let statuses: Vec<String> = lab.sql("SELECT status FROM operator_steps ORDER BY id");
    assert_eq!(statuses.iter().filter(|s| *s == "expired").count(), 1, "{statuses:?}");
    assert!(!statuses.iter().any(|s| s == "pending"), "{statuses:?}");
}

#[test]
fn lab_confirm_refuses_what_it_cannot_answer_with_one_line_and_exit_2() {
    let lab = TempLab::from_text(LAB);
    let bad = lab.cmd(&["confirm", "nope", "--attest", "brightnes=50"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--attest brightnes=50: unknown setting `brightnes`; fix: attest one of brightness"), "{err}");
    let bad = lab.cmd(&["confirm", "nope", "--attest", "brightness=150"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("from 0 to 100"));
    let none = lab.cmd(&["confirm", "nope"]).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stderr).contains("no store at"), "{}", String::from_utf8_lossy(&none.stderr));
}

#[test]
fn lab_status_shows_the_steps_a_running_campaign_waits_on_and_how_to_answer_them() {
    let lab = TempLab::from_text(LAB);
    let rb_path = runbook(&lab, "30m");
    let cfg = lab::config::load_lab(&lab.lab).unwrap();
    let rb = lab::config::load_runbook(std::path::Path::new(&rb_path), &cfg).unwrap();
    let plan = lab::plan::build(&rb, &cfg).unwrap();
    let store = lab::store::Store::open(cfg.store.sqlite_path().unwrap()).unwrap();
    // A campaign whose runner is alive (this test process), waiting on its before-campaign step.
    let record = lab::runner::new_record("attested-1", &cfg, &rb, &plan);
    store.create_campaign(&record, plan.max_attempts, std::process::id()).unwrap();
    store
        .ask_step(&lab::store::NewStep {
            campaign: "attested-1".into(),
            device: "sim-pixel".into(),
            trial_key: None,
            attempt: None,
            step: "screen".into(),
            when: "before-campaign".into(),
            text: "Set the brightness to 50 % and switch Bluetooth off".into(),
            attest: vec!["brightness".into(), "bluetooth".into()],
            asked_at: "2026-12-01T10:00:00.000Z".into(),
            deadline: "2026-12-01T10:30:00.000Z".into(),
        })
        .unwrap();
    let out = lab.cmd(&["status"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let waiting = &text[text.find("waiting for an operator").expect("the waiting steps")..];
    insta::assert_snapshot!("status_waiting_steps", waiting);
    // The printed command answers it.
    let confirm = lab
        .cmd(&["confirm", "attested-1", "--device", "sim-pixel", "--step", "screen", "--attest", "brightness=50"])
        .output()
        .unwrap();
    assert_eq!(confirm.status.code(), Some(2));
    let err = String::from_utf8_lossy(&confirm.stderr);
    assert!(
        err.contains("step screen on sim-pixel asks to attest bluetooth; fix: add --attest bluetooth=off"),
        "{err}"
    );
    let confirm = lab
        .cmd(&[
            "confirm",
            "attested-1",
            "--step",
            "screen",
            "--attest",
            "brightness=50",
            "--attest",
            "bluetooth=off",
            "--by",
            "bo",
        ])
        .output()
        .unwrap();
    assert!(confirm.status.success(), "{}", String::from_utf8_lossy(&confirm.stderr));
    let again = lab.cmd(&["confirm", "attested-1"]).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("no step of campaign attested-1 waits for an answer (none waits now)")
    );
    let row: Vec<String> = lab.sql("SELECT answered_by || ' ' || answer FROM operator_steps");
    assert_eq!(row, [r#"bo {"bluetooth":false,"brightness":50.0}"#]);
}

#[test]
fn at_a_terminal_lab_run_prompts_and_the_typed_answers_are_attested() {
    // `script` (util-linux) gives `lab run` a pseudo-terminal as its standard input.
    let lab = TempLab::from_text(LAB);
    let rb = runbook(&lab, "1m");
    let bin = assert_cmd::cargo::cargo_bin("lab");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let inner =
        format!("{} --lab {} run {}", quote(bin.to_str().unwrap()), quote(lab.lab.to_str().unwrap()), quote(&rb));
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .current_dir(root())
        .env_remove("LAB_CONFIG")
        .env("USER", "cleo")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdin = child.stdin.take().unwrap();
    // Enter, then a value the prompt refuses and the two it asks for; then Enter for each
    // of the six manual-tether and after-trial steps of the two trials.
    std::io::Write::write_all(&mut stdin, b"\n150\n50\noff\n\n\n\n\n\n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(">>> sim-pixel: Set the brightness to 50 % and switch Bluetooth off"), "{text}");
    assert!(text.contains("brightness is a percentage from 0 to 100, not `150"), "{text}");
    let rows: Vec<String> =
        lab.sql("SELECT step || ' ' || status || ' ' || answered_by || ' ' || answer FROM operator_steps ORDER BY id");
    assert_eq!(rows.len(), 7, "{rows:?}");
    assert_eq!(rows[0], r#"screen answered cleo (terminal) {"bluetooth":false,"brightness":50.0}"#);
    assert!(rows[1..].iter().all(|r| r.ends_with("answered cleo (terminal) {}")), "{rows:?}");
}
