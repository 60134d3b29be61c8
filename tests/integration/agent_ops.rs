//! The agents as a lab runs them (docs/agents.md): the systemd unit `lab agent install`
//! prints, and a schedule's slot run by an agent rather than by the schedule's runner.

use crate::common;

use std::process::Command;

use common::TempLab;

#[test_needs::needs(systemd_analyze)]
#[test]
fn agent_install_systemd_prints_a_unit_that_systemd_analyze_verifies() {
    let lab = TempLab::new();
    let out = lab.cmd(&["agent", "install", "--systemd", "--stop-timeout", "90m"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let (name, body) = text.split_once("\n# ==> ").and_then(|(_, p)| p.split_once(" <==\n")).unwrap();
    assert_eq!(name, "lab-agent-local.service");
    let bin = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("lab")).unwrap();
    let lab_file = std::fs::canonicalize(&lab.lab).unwrap();
    for line in [
        format!("ExecStart={} --lab {} agent --host local", bin.display(), lab_file.display()),
        format!("WorkingDirectory={}", lab_file.parent().unwrap().display()),
        "Restart=always".into(),
        "KillSignal=SIGTERM".into(),
        "KillMode=mixed".into(),
        "TimeoutStopSec=5400s".into(),
    ] {
        assert!(body.lines().any(|l| l == line), "{line} in\n{body}");
    }
    // The upgrade is said where the unit is printed.
    assert!(text.contains("(drains), replace the binary, `start`"), "{text}");

    let path = lab.dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    assert!(
        Command::new("systemd-analyze").arg("--version").output().is_ok(),
        "needs systemd-analyze: it is not installed (Debian: apt-get install systemd)"
    );
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "systemd-analyze verify said:\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn agent_install_quotes_a_lab_path_with_spaces_and_refuses_an_unknown_host() {
    let text = std::fs::read_to_string(common::root().join("lab.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("my lab");
    std::fs::create_dir(&spaced).unwrap();
    let file = spaced.join("lab.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .arg("--lab")
        .arg(&file)
        .args(["agent", "install", "--systemd"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let file = std::fs::canonicalize(&file).unwrap();
    let want = format!(" --lab \"{}\" agent --host local", file.display());
    assert!(stdout.lines().any(|l| l.starts_with("ExecStart=") && l.ends_with(&want)), "{want} in\n{stdout}");
    assert!(stdout.lines().any(|l| l == "TimeoutStopSec=7200s"), "the default is 2h:\n{stdout}");

    let lab = TempLab::new();
    let out = lab.cmd(&["agent", "install", "--systemd", "--host", "nowhere"]).assert().code(2);
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--host nowhere: no such [[host]]"), "{err}");
}
