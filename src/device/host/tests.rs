//! The host backend on this machine, with shell commands as apps (the example apps are
//! exercised through the real binary in tests/integration/host_trials.rs).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::HostDevice;
use crate::config::{Build, DeviceKind, DeviceSpec, HostCommand, TetherSpec, VariantConfig};
use crate::device::{Collected, Device, LaunchSpec, PrepareOutcome};
use crate::transport::{LocalTransport, TransportError};

fn spec() -> DeviceSpec {
    DeviceSpec {
        name: "this-host".into(),
        host: "local".into(),
        model: "local machine".into(),
        os: "Linux".into(),
        tags: vec!["host".into()],
        tether: TetherSpec::None,
        kind: DeviceKind::Host,
    }
}

pub(crate) fn build(command: &[&str], step: Option<&[&str]>, cwd: Option<&Path>) -> Build {
    Build {
        name: "app".into(),
        baseline: true,
        ios: None,
        android: None,
        host: Some(HostCommand {
            command: command.iter().map(|s| s.to_string()).collect(),
            build: step.map(|s| s.iter().map(|a| a.to_string()).collect()),
            env: BTreeMap::from([("APP_GREETING".to_string(), "hello".to_string())]),
            cwd: cwd.map(Path::to_path_buf),
        }),
        sim: None,
    }
}

pub(crate) fn device(dir: &Path) -> HostDevice {
    HostDevice::new(spec(), Arc::new(LocalTransport::new("local")), &dir.join("host-data"))
}

/// prepare, launch, wait `soak`, collect: what a trial does.
pub(crate) async fn trial(dev: &HostDevice, b: &Build, dir: &Path, soak: Duration) -> Collected {
    let prepared = dev.prepare(b, &VariantConfig::default_config()).await.unwrap();
    let app = dev
        .launch(&LaunchSpec {
            prepared,
            trial_key: "0001-this-host-app-r0".into(),
            seed: 7,
            duration: soak,
            request_interval: Some(Duration::from_millis(250)),
            endpoint_url: Some("http://127.0.0.1:9/t/tok".into()),
            dir: dir.to_path_buf(),
        })
        .await
        .unwrap();
    tokio::time::sleep(soak).await;
    let c = dev.collect(&app, dir).await.unwrap();
    dev.stop(&app).await.unwrap();
    c
}

fn value(c: &Collected, metric: &str) -> f64 {
    c.measurements.iter().find(|m| m.metric == metric).unwrap_or_else(|| panic!("no {metric}: {c:?}")).value
}

fn trial_json(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("host-trial.json")).unwrap()).unwrap()
}

#[tokio::test]
async fn a_busy_app_is_measured_and_its_environment_is_the_labs() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    // Busy for about 0.3 s of CPU in a child process, then sleeps: the tree is measured.
    let script = "env | grep -E '^(LAB_|APP_)' | sort > env.txt; \
                  sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; sleep 30";
    let b = build(&["sh", "-c", script], None, Some(tmp.path()));
    let c = trial(&dev, &b, tmp.path(), Duration::from_millis(1500)).await;
    assert!(!c.evidence.app_died, "{:?}", c.evidence);
    let window = c.evidence.measured_duration.unwrap().as_secs_f64();
    assert!((1.4..3.0).contains(&window), "window {window}");
    let cpu = value(&c, "cpu_user_s") + value(&c, "cpu_system_s");
    assert!(cpu > 0.02, "the counting loop used CPU: {cpu}");
    assert!((value(&c, "cpu_pct") - 100.0 * cpu / window).abs() < 1e-9);
    assert!(value(&c, "ctx_switches_voluntary") >= 1.0);
    assert!(value(&c, "memory_mb") > 0.0);
    let env = std::fs::read_to_string(tmp.path().join("env.txt")).unwrap();
    for line in [
        "APP_GREETING=hello",
        "LAB_DURATION_MS=1500",
        "LAB_ENDPOINT_URL=http://127.0.0.1:9/t/tok",
        "LAB_REQUEST_INTERVAL_MS=250",
        "LAB_SEED=7",
        "LAB_TRIAL=0001-this-host-app-r0",
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing from:\n{env}");
    }
    let names: Vec<&str> = c.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["app.stdout.log", "app.stderr.log", "proc-start.txt", "proc-end.txt", "host-trial.json"]);
    let start = std::fs::read_to_string(tmp.path().join("proc-start.txt")).unwrap();
    assert!(start.contains("/stat <=="), "{start}");
    let t = trial_json(tmp.path());
    match t["tree"].as_str().unwrap() {
        "cgroup v2" => assert!(t["cgroup"].is_string()),
        _ => assert!(t["cgroup_note"].is_string() || t["cgroup"].is_null(), "{t}"),
    }
}

#[tokio::test]
async fn a_missing_program_or_a_failing_build_step_is_a_clear_prepare_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    let missing = build(&["target/release/examples/no-such-app"], None, Some(tmp.path()));
    let e = dev.prepare(&missing, &VariantConfig::default_config()).await.unwrap_err().to_string();
    assert!(e.contains("`target/release/examples/no-such-app` not found in"), "{e}");
    assert!(e.contains("fix: build it first"), "{e}");
    let not_on_path = build(&["lab-no-such-program-anywhere"], None, None);
    let e = dev.prepare(&not_on_path, &VariantConfig::default_config()).await.unwrap_err().to_string();
    assert!(e.contains("not found on PATH on host local"), "{e}");
    let failing = build(&["true"], Some(&["sh", "-c", "echo 'error[E0432]: unresolved import' >&2; exit 101"]), None);
    let e = dev.prepare(&failing, &VariantConfig::default_config()).await.unwrap_err().to_string();
    assert!(e.contains("exited with code 101: error[E0432]: unresolved import"), "{e}");
}

#[tokio::test]
async fn the_build_step_runs_once_and_a_rebuilt_program_is_reinstalled() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    std::fs::write(tmp.path().join("app.sh"), "sleep 30\n").unwrap();
    let b = build(&["./app.sh"], Some(&["sh", "-c", "echo built >> steps.txt"]), Some(tmp.path()));
    let first = dev.prepare(&b, &VariantConfig::default_config()).await.unwrap();
    let again = dev.prepare(&b, &VariantConfig::default_config()).await.unwrap();
    assert!(matches!(first.outcome, PrepareOutcome::Installed { .. }));
    assert!(matches!(again.outcome, PrepareOutcome::AlreadyInstalled { .. }));
    assert_eq!(std::fs::read_to_string(tmp.path().join("steps.txt")).unwrap(), "built\n");
    std::fs::write(tmp.path().join("app.sh"), "sleep 31\n").unwrap();
    let changed = dev.prepare(&b, &VariantConfig::default_config()).await.unwrap();
    assert!(matches!(changed.outcome, PrepareOutcome::Installed { .. }), "a changed program is a new install");
}

#[tokio::test]
async fn identify_and_state_read_this_machine() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    let id = dev.identify().await.unwrap();
    assert!(id.os.starts_with("Linux "), "{id:?}");
    let s = dev.state().await.unwrap();
    assert!(s.load_avg.value().is_some_and(|l| l >= 0.0));
    assert!(dev.talks_to_endpoint());
}

/// With a cgroup, a process that leaves the process group (setsid) is still measured
/// and still stopped. Needs a writable cgroup v2 (root on this kind of machine).
#[tokio::test]
async fn a_cgroup_holds_processes_that_leave_the_group() {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    if !nix::unistd::geteuid().is_root() || crate::collect::linux::procfs::cgroup2_mount(&mounts).is_none() {
        // Without a cgroup an escaped process would outlive the test; nothing to check here.
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    let pidfile = tmp.path().join("escaped.pid");
    let script = format!("setsid sh -c 'echo $$ > {}; while :; do :; done' & sleep 30", pidfile.display());
    let b = build(&["sh", "-c", &script], None, None);
    let c = trial(&dev, &b, tmp.path(), Duration::from_millis(1000)).await;
    let escaped: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let mut gone = false;
    for _ in 0..100 {
        let state = std::fs::read_to_string(format!("/proc/{escaped}/stat")).unwrap_or_default();
        if state.is_empty() || state.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if !gone {
        // Whatever the outcome, leave no spinner behind.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(escaped), nix::sys::signal::Signal::SIGKILL);
    }
    let t = trial_json(tmp.path());
    assert_eq!(t["tree"], "cgroup v2", "{t}");
    assert!(gone, "the escaped process was stopped with the cgroup");
    assert!(value(&c, "cpu_pct") > 40.0, "the escaped spinner is the app's: {}", value(&c, "cpu_pct"));
    let cg = t["cgroup"].as_str().unwrap();
    assert!(!Path::new(cg).exists(), "the cgroup {cg} is removed after the trial");
}

#[test]
fn host_devices_open_on_local_and_ssh_hosts() {
    let text = "[lab]\nname = \"x\"\n[[host]]\nname = \"far\"\naddress = \"10.0.0.1\"\nuser = \"ci\"\n\
                [[device]]\nname = \"far-host\"\nhost = \"far\"\nplatform = \"host\"\nmodel = \"box\"\n\
                [[device]]\nname = \"near-host\"\nplatform = \"host\"\nmodel = \"box\"\n";
    let lab = crate::config::parse_lab(text, Path::new("/labs/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    // Opening connects to nothing: the SSH host is reached at the first trial.
    assert!(
        crate::device::open(lab.device("far-host").unwrap(), &lab, &crate::transport::Hosts::for_lab(&lab)).is_ok()
    );
    assert!(
        crate::device::open(lab.device("near-host").unwrap(), &lab, &crate::transport::Hosts::for_lab(&lab)).is_ok()
    );
}

/// A host that answers only from its `answers_from`-th ping on; every other call is
/// refused as if the network were down.
struct DownHost {
    pings: std::sync::atomic::AtomicU32,
    answers_from: u32,
}

#[async_trait::async_trait]
impl crate::transport::Transport for DownHost {
    fn host(&self) -> &str {
        "shelf-9"
    }
    async fn exec(&self, _: &crate::transport::CommandSpec) -> Result<crate::transport::CommandOutput, TransportError> {
        Err(self.down())
    }
    async fn upload(&self, _: &Path, _: &Path) -> Result<(), TransportError> {
        Err(self.down())
    }
    async fn download(&self, _: &Path, _: &Path) -> Result<(), TransportError> {
        Err(self.down())
    }
    async fn stage(&self, _: &Path) -> Result<crate::transport::Staged, TransportError> {
        Err(self.down())
    }
    async fn ping(&self) -> Result<(), TransportError> {
        let n = self.pings.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n >= self.answers_from { Ok(()) } else { Err(self.down()) }
    }
}

impl DownHost {
    fn down(&self) -> TransportError {
        TransportError::Unreachable { host: "shelf-9".into(), detail: "connection refused".into() }
    }
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_host_is_a_disconnected_device_waited_for_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(DownHost { pings: 0.into(), answers_from: 4 });
    let dev = HostDevice::remote(spec(), host.clone());
    // Every step that needs the host says "disconnected", so the runner waits.
    assert!(dev.identify().await.unwrap_err().is_disconnect());
    assert!(dev.state().await.unwrap_err().is_disconnect());
    let b = build(&["/bin/true"], None, Some(dir.path()));
    assert!(dev.prepare(&b, &VariantConfig::default_config()).await.unwrap_err().is_disconnect());

    // Back at the 4th ping: after 1 + 2 + 4 s of backoff.
    let t0 = tokio::time::Instant::now();
    dev.wait_connected(Duration::from_secs(60)).await.unwrap();
    assert_eq!(t0.elapsed(), Duration::from_secs(7));

    // Not back within the timeout: still disconnected, and no longer than the timeout.
    let host = Arc::new(DownHost { pings: 0.into(), answers_from: u32::MAX });
    let dev = HostDevice::remote(spec(), host.clone());
    let t0 = tokio::time::Instant::now();
    let e = dev.wait_connected(Duration::from_secs(20)).await.unwrap_err();
    assert!(e.is_disconnect() && e.to_string().contains("not back after 20s"), "{e}");
    assert_eq!(t0.elapsed(), Duration::from_secs(20));
    assert_eq!(host.pings.load(std::sync::atomic::Ordering::SeqCst), 6, "pings at 0, 1, 3, 7, 15 and 20 s");
}
