//! A `host` device on a lab host reached over SSH (a real sshd on 127.0.0.1): real
//! measurements taken there, arguments that arrive literally, one upload per host,
//! and a campaign that survives the server being killed and restarted.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::TempLab;
use common::sshd::{self, Sshd};

const NASTY: [&str; 6] = ["a b", "it's", "double \"q\"", "; touch /tmp/lab-pwned", "$(id) `id`", "line1\nline2"];

/// A lab with one SSH host and a host device on it, and a runbook whose build is a
/// script on this machine (uploaded to the host's cache). Each test names its device
/// differently: the tests share one login folder on the host (and its `lab-runs/<device>`,
/// whose leftovers a lab stops), with each other and with test runs of other checkouts.
fn setup(s: &Sshd, device: &str, duration: &str, repeats: u32, extra: &str) -> (TempLab, std::path::PathBuf) {
    let device = unique(device);
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"remote\"\n\n[[host]]\nname = \"shelf-1\"\naddress = \"{}\"\nuser = \"{}\"\nidentity = \"{}\"\n\
         known_hosts = \"{}\"\nconnect_timeout = \"3s\"\ncache_dir = \"{}\"\n\n\
         [[device]]\nname = \"{device}\"\nhost = \"shelf-1\"\nplatform = \"host\"\nmodel = \"lab box\"\n",
        s.address(),
        s.user,
        s.client_key().display(),
        s.known_hosts().display(),
        s.dir.path().join("cache").display(),
    ));
    let dir = lab.dir.path();
    let script = dir.join("app.sh");
    // Records its arguments, then works in short bursts for as long as it runs, so the
    // soak window always holds real CPU to measure (a busy machine may start the window late).
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '%s\\0' \"$@\" > \"$ARGS_OUT\"\nwhile :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.1; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args: Vec<String> = NASTY.iter().map(|a| format!("{a:?}")).collect();
    let runbook = dir.join("remote.toml");
    std::fs::write(
        &runbook,
        format!(
            "name = \"remote\"\nduration = \"{duration}\"\nrepeats = {repeats}\nseed = 1\ndevices = [\"{device}\"]\n\n\
             [builds.app]\nbaseline = true\n[builds.app.host]\ncwd = \".\"\ncommand = [\"./app.sh\", {}]\nenv = {{ ARGS_OUT = \"{}\" }}\n\n\
             [preconditions]\nload_max = 100\n{extra}",
            args.join(", "),
            dir.join("args.out").display()
        ),
    )
    .unwrap();
    (lab, runbook)
}

/// A query for `metric`'s values in valid attempts (a busy machine may stretch a soak
/// beyond its tolerance, and the attempt that is retried has measurements too).
fn valid_values(metric: &str) -> String {
    format!(
        "SELECT m.value FROM measurements m JOIN attempts a ON a.campaign = m.campaign AND a.trial_idx = m.trial_idx \
         AND a.attempt = m.attempt WHERE a.status = 'valid' AND m.metric = '{metric}'"
    )
}

fn cached(s: &Sshd) -> Vec<std::path::PathBuf> {
    let root = s.dir.path().join("cache");
    let mut out = Vec::new();
    for sha in std::fs::read_dir(&root).into_iter().flatten() {
        for f in std::fs::read_dir(sha.unwrap().path()).unwrap() {
            out.push(f.unwrap().path());
        }
    }
    out
}

#[test_needs::needs(sshd)]
#[test]
fn a_campaign_on_a_remote_host_measures_there_and_uploads_once() {
    let s = sshd::start();
    let (lab, runbook) = setup(&s, "remote-1", "2s", 2, "");
    lab.cmd(&["run", runbook.to_str().unwrap()]).assert().success();

    let valid: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts WHERE status = 'valid'");
    assert_eq!(valid, [2]);
    let cpu: Vec<f64> = lab.sql(&valid_values("cpu_pct"));
    assert_eq!(cpu.len(), 2);
    assert!(cpu.iter().all(|c| *c > 0.0), "the spin was measured on the host: {cpu:?}");
    let got = std::fs::read_to_string(lab.dir.path().join("args.out")).unwrap();
    let got: Vec<&str> = got.split('\0').filter(|a| !a.is_empty()).collect();
    assert_eq!(got, NASTY, "arguments reach the remote program literally");
    assert!(!Path::new("/tmp/lab-pwned").exists());

    let files = cached(&s);
    assert_eq!(files.len(), 1, "{files:?}");
    let first = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    lab.cmd(&["run", runbook.to_str().unwrap()]).assert().success();
    assert_eq!(cached(&s), files);
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().modified().unwrap(),
        first,
        "the second campaign skipped the upload"
    );
}

/// `name` made unique to this test process.
fn unique(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

/// `lab run` in the background, as a user would start it.
fn spawn_run(lab: &TempLab, args: &[&str]) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(common::root())
        .arg("--lab")
        .arg(&lab.lab)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Waits until a trial of the campaign is in its soak.
fn wait_for_soak(lab: &TempLab, child: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
            panic!("lab run ended ({status}) before a soak started: {out}");
        }
        if lab.store().exists()
            && let Ok(p) = lab.try_sql::<String>("SELECT phase FROM device_status WHERE phase IS NOT NULL")
            && p.iter().any(|p| p == "soak")
        {
            return;
        }
        assert!(Instant::now() < deadline, "no soak started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Processes on this machine (the SSH host) started for `device` by some lab.
fn apps_of(device: &str) -> Vec<u32> {
    let mark = format!("LAB_RUN_DIR=lab-runs/{device}/");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(env) = std::fs::read(e.path().join("environ"))
            && env.split(|b| *b == 0).any(|v| v.starts_with(mark.as_bytes()))
        {
            out.push(pid);
        }
    }
    out
}

#[test_needs::needs(sshd)]
#[test]
fn a_host_that_stays_down_takes_its_device_offline_and_the_campaign_resumes() {
    let mut s = sshd::start();
    let (lab, runbook) = setup(&s, "remote-3", "3s", 2, "\n[timeouts]\nreconnect = \"3s\"\n");
    let mut child = spawn_run(&lab, &["run", runbook.to_str().unwrap()]);
    wait_for_soak(&lab, &mut child);
    s.stop();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "a device offline is exit 3: {stdout}");
    let id = lab.campaigns().remove(0);
    let dev = unique("remote-3");
    assert!(stdout.contains("DISCONNECTED during soak") && stdout.contains(&format!("[{dev}] OFFLINE")), "{stdout}");
    assert!(stdout.contains(&format!("continue it with: lab run --resume {id}")), "{stdout}");
    let note: Vec<String> = lab.sql("SELECT status || ' | ' || note FROM campaigns");
    assert!(note[0].starts_with(&format!("interrupted | devices offline: {dev}: device lost during soak")), "{note:?}");
    assert!(note[0].contains("is unreachable"), "{note:?}");
    let st = lab.cmd(&["status"]).assert().success().get_output().stdout.clone();
    let st = String::from_utf8(st).unwrap();
    assert!(st.lines().any(|l| l.contains(&dev) && l.contains("offline")), "{st}");
    // The app lives on, detached, on the host the lab lost.
    assert!(!apps_of(&dev).is_empty(), "the detached app outlived the connection");

    // The host comes back: the resume stops the leftover app and runs what is left.
    s.restart();
    lab.cmd(&["run", "--resume", &id]).assert().success();
    let per_trial: Vec<i64> = lab.sql(
        "SELECT COUNT(a.attempt) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx \
         AND a.status = 'valid' GROUP BY t.idx",
    );
    assert_eq!(per_trial, [1, 1], "every planned trial valid exactly once");
    assert!(apps_of(&dev).is_empty(), "no app of this device is left running: {:?}", apps_of(&dev));
    // The leftover app's cgroup went with it (the lab that made it is gone).
    if let Some(base) = sshd::cgroup_base() {
        assert_eq!(cgroups_of(&base, &dev), Vec::<String>::new(), "no cgroup of this device is left");
    }
}

/// Cgroups under `base` that some lab made for `device` (`lab-<pid>-<device>-<n>`).
fn cgroups_of(base: &Path, device: &str) -> Vec<String> {
    let infix = format!("-{device}-");
    std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("lab-") && n.contains(&infix))
        .collect()
}

/// On an SSH host the app runs in its own cgroup v2: a busy child that leaves the
/// process group (`setsid`) is measured with the app and stopped with it, and the
/// cgroup is removed.
#[test_needs::needs(sshd, cgroup)]
#[test]
fn an_app_on_a_remote_host_is_measured_and_stopped_as_its_cgroup() {
    let s = sshd::start();
    let base = sshd::cgroup();
    let (lab, runbook) = setup(&s, "remote-cg", "2s", 1, "");
    let dev = unique("remote-cg");
    // The app only sleeps; its escaped child works in bursts (like `setup`'s app, so the
    // test does not take a whole core from the tests running beside it) and notes its pid.
    std::fs::write(
        lab.dir.path().join("app.sh"),
        "#!/bin/sh\nsetsid sh -c 'echo $$ >> \"$1\"; while :; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; \
         sleep 0.1; done' sh \"$ARGS_OUT.child\" &\nwhile :; do sleep 1; done\n",
    )
    .unwrap();
    lab.cmd(&["run", runbook.to_str().unwrap()]).assert().success();

    let cpu: Vec<f64> = lab.sql(&valid_values("cpu_pct"));
    let user: Vec<f64> = lab.sql(&valid_values("cpu_user_s"));
    let source: Vec<String> = lab.sql("SELECT DISTINCT source FROM measurements WHERE metric = 'cpu_user_s'");
    assert_eq!(source, ["cgroup v2 cpu.stat (µs)"]);
    // The leader alone (`sleep 1` in a loop) costs well under 1 % of a core.
    assert!(cpu.len() == 1 && cpu[0] > 5.0, "the escaped child's CPU is the app's: {cpu:?} % of a core");
    eprintln!("measured on the SSH host: cpu_pct {:.1} %, cpu_user_s {:.3} s", cpu[0], user[0]);
    let trial = find(&lab.artifacts(), "host-trial.json").expect("the trial's host-trial.json");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trial).unwrap()).unwrap();
    assert_eq!(t["tree"], "cgroup v2", "{t}");
    assert!(t["cgroup_note"].is_null(), "{t}");
    let cg = Path::new(t["cgroup"].as_str().unwrap());
    assert!(cg.starts_with(&base) && cg.file_name().unwrap().to_string_lossy().contains(&format!("-{dev}-")), "{t}");
    assert!(!cg.exists(), "the cgroup {} is removed after the trial", cg.display());
    assert_eq!(cgroups_of(&base, &dev), Vec::<String>::new());
    let child: u32 = std::fs::read_to_string(lab.dir.path().join("args.out.child")).unwrap().trim().parse().unwrap();
    assert!(!sshd::alive(child), "the escaped child {child} was stopped with the cgroup");
    assert!(apps_of(&dev).is_empty(), "{:?}", apps_of(&dev));
}

/// The first file named `name` under `dir`.
fn find(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find(&p, name) {
                return Some(f);
            }
        } else if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
    }
    None
}

#[test_needs::needs(sshd)]
#[test]
fn the_campaign_completes_when_sshd_is_killed_and_restarted() {
    let mut s = sshd::start();
    let (lab, runbook) = setup(&s, "remote-2", "4s", 3, "");
    let mut child = spawn_run(&lab, &["run", runbook.to_str().unwrap()]);
    // Kill the server (and every connection) while a soak is under way, bring it back.
    wait_for_soak(&lab, &mut child);
    s.stop();
    std::thread::sleep(Duration::from_millis(1500));
    s.restart();
    let status = child.wait().unwrap();
    assert!(status.success(), "lab run ended with {status}");
    let per_trial: Vec<i64> = lab.sql(
        "SELECT COUNT(a.attempt) FROM trials t LEFT JOIN attempts a ON a.campaign = t.campaign AND a.trial_idx = t.idx \
         AND a.status = 'valid' GROUP BY t.idx",
    );
    assert_eq!(per_trial, [1, 1, 1], "every planned trial valid exactly once");
}

#[test_needs::needs(sshd)]
#[test]
fn a_host_down_from_the_start_is_waited_for_then_reported_offline() {
    let mut s = sshd::start();
    let (lab, runbook) = setup(&s, "remote-4", "1s", 1, "\n[timeouts]\nreconnect = \"2s\"\n");
    s.stop();
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).assert().code(3).get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    let dev = unique("remote-4");
    assert!(
        out.contains(&format!("[{dev}] DISCONNECTED before its first trial: device {dev} is not connected")),
        "{out}"
    );
    assert!(out.contains("waiting up to 2.0 s for it to come back"), "{out}");
    assert!(out.contains(&format!("[{dev}] OFFLINE: cannot reach the device")), "{out}");
    let attempts: Vec<i64> = lab.sql("SELECT COUNT(*) FROM attempts");
    assert_eq!(attempts, [0], "nothing ran, nothing was recorded");
    let status: Vec<String> = lab.sql("SELECT status FROM campaigns");
    assert_eq!(status, ["interrupted"]);
}
