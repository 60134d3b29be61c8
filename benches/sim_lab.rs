//! Throughput of the runner on a big simulated lab: 200 devices, 10 000 trials.
//!
//! `cargo bench --bench sim_lab` prints trials/s and the process's peak memory.
//! Not a timed test: the figures are for people (and the issue notes), not asserts.
//! `SIM_LAB_REPEATS=14400` runs 144 000 trials instead, to see that memory does not grow
//! with them. The campaign's folder is made under `TMPDIR`: `TMPDIR=/dev/shm` leaves the
//! file system out of the figure (every trial creates a folder and one or two files).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use lab::config;
use lab::plan;
use lab::runner::{self, Campaign, EventSink};
use lab::store::Store;

const DEVICES: usize = 200;
const VARIANTS: usize = 5;
/// Per variant per model; 2 models of 100 devices → 10 blocks per device → 10 000 trials.
const REPEATS: usize = 1000;

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lab_text = format!(
        "[lab]\nname = \"bench\"\nartifacts = \"{0}/artifacts\"\nstore = \"{0}/lab.db\"\n\n[[host]]\nname = \"local\"\n",
        dir.path().display()
    );
    for i in 0..DEVICES {
        let (model, emulates) = if i % 2 == 0 { ("iPhone 6s", "ios") } else { ("Pixel 5", "android") };
        let _ = write!(
            lab_text,
            "\n[[device]]\nname = \"sim-{i:03}\"\nhost = \"local\"\nplatform = \"sim\"\nmodel = \"{model}\"\nos = \"x\"\ntether = \"software\"\n[device.sim]\nemulates = \"{emulates}\"\nseed = {i}\n"
        );
    }
    let repeats: usize = std::env::var("SIM_LAB_REPEATS").ok().and_then(|r| r.parse().ok()).unwrap_or(REPEATS);
    let mut rb = format!(
        "name = \"bench\"\nduration = \"10m\"\nrepeats = {repeats}\nseed = 1\ndevices = [\"sim-*\"]\n\n[workload]\nrequest_interval = \"1s\"\n\n[preconditions]\nbrightness = [40, 60]\nbattery_min = 20\n"
    );
    for v in 0..VARIANTS {
        let _ = write!(
            rb,
            "\n[builds.b{v}]\n{}[builds.b{v}.sim]\ncpu_pct = {}\nwakeups_per_s = 10\nmemory_mb = 10\n",
            if v == 0 { "baseline = true\n" } else { "" },
            5 + v * 5
        );
    }
    let lab_path = dir.path().join("lab.toml");
    let rb_path = dir.path().join("bench.toml");
    std::fs::write(&lab_path, &lab_text).expect("write lab");
    std::fs::write(&rb_path, &rb).expect("write runbook");

    let lab = Arc::new(config::load_lab(&lab_path).expect("lab"));
    let runbook = config::load_runbook(&rb_path, &lab).expect("runbook");
    let plan = plan::build(&runbook, &lab).expect("plan");
    let store = Store::open(&lab.store_path).expect("store");
    let id = "bench".to_string();
    store
        .create_campaign(&runner::new_record(&id, &lab, &runbook, &plan), plan.max_attempts, std::process::id())
        .expect("campaign");
    let operator: Arc<dyn lab::tether::Operator> = Arc::new(lab::tether::AbsentOperator { why: "benchmark".into() });
    let hosts = lab::transport::Hosts::for_lab(&lab);
    let devices = plan
        .devices
        .iter()
        .map(|d| {
            let spec = lab.device(&d.name).expect("device");
            let dev = lab::device::open(spec, &lab, &hosts).expect("open");
            let tether = runner::tether_for(&lab, &hosts, &d.name, operator.clone()).expect("tether");
            (d.name.clone(), (dev, tether))
        })
        .collect();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let trials = plan.trials.len();
    let campaign = Campaign {
        id: id.clone(),
        lab: lab.clone(),
        runbook: Arc::new(runbook),
        plan: Arc::new(plan),
        store: store.clone(),
        devices,
        events: EventSink::discard(),
        shutdown: shutdown.clone(),
        desk: Arc::new(runner::OperatorDesk::new(
            store.clone(),
            &id,
            EventSink::discard(),
            std::time::Duration::from_secs(60),
            shutdown,
        )),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let start = Instant::now();
    let summary = rt.block_on(campaign.run(false)).expect("run");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "sim_lab: {DEVICES} devices, {trials} trials ({} valid, {} invalid attempts)",
        summary.valid, summary.invalid_attempts
    );
    println!("sim_lab: {secs:.2} s wall, {:.0} trials/s", trials as f64 / secs);
    println!("sim_lab: peak memory (VmHWM) {}", peak_memory(Path::new("/proc/self/status")));
    let attempts = summary.valid + summary.invalid_attempts;
    println!("sim_lab: {} store commits for {attempts} attempts and their device status", store.commits());
}

fn peak_memory(status: &Path) -> String {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l["VmHWM:".len()..].trim().to_string()))
        .unwrap_or_else(|| "unknown (no /proc)".into())
}
