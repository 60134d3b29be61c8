//! Throughput of the runner on a big simulated lab: 200 devices, 10 000 trials.
//!
//! `cargo bench --bench sim_lab` prints trials/s, the run's CPU time a trial, which threads
//! used it, how idle the machine was and how much the hypervisor took meanwhile, the
//! store's commits and time recording attempts, and the process's peak memory.
//! Not a timed test: the figures are for people (and the issue notes), not asserts.
//! `SIM_LAB_REPEATS=14400` runs 144 000 trials instead, to see that memory does not grow
//! with them. The campaign's folder is made under `TMPDIR`: `TMPDIR=/dev/shm` leaves the
//! file system out of the figure (every trial creates a folder and one or two files).
//! `SIM_LAB_DIR=PATH` runs it there and keeps it (the store and the artifacts) to look at.
//!
//! On ext4 without a journal (this project's VM) the kernel does not reuse an inode for up
//! to six minutes after it was freed, and searches past such inodes on every new file: a
//! run within minutes of deleting tens of thousands of files (the previous run's cleanup)
//! spends most of its time there. Compare figures taken after a quiet spell. An ext4 with a
//! journal (as `mkfs.ext4` makes it) reuses inodes at once: run after run gives the same figure.

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
    // `SIM_LAB_DIR=PATH` keeps the campaign (store and artifacts) there, to look at.
    let kept = std::env::var_os("SIM_LAB_DIR").map(std::path::PathBuf::from);
    let temp = kept.is_none().then(|| tempfile::tempdir().expect("tempdir"));
    let root = kept.clone().unwrap_or_else(|| temp.as_ref().expect("tempdir").path().to_path_buf());
    std::fs::create_dir_all(&root).expect("SIM_LAB_DIR");
    let mut lab_text = format!(
        "[lab]\nname = \"bench\"\nartifacts = \"{0}/artifacts\"\nstore = \"{0}/lab.db\"\n\n[[host]]\nname = \"local\"\n",
        root.display()
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
    let lab_path = root.join("lab.toml");
    let rb_path = root.join("bench.toml");
    std::fs::write(&lab_path, &lab_text).expect("write lab");
    std::fs::write(&rb_path, &rb).expect("write runbook");

    let lab = Arc::new(config::load_lab(&lab_path).expect("lab"));
    let runbook = config::load_runbook(&rb_path, &lab).expect("runbook");
    let plan = plan::build(&runbook, &lab).expect("plan");
    let store = Store::open(lab.store.sqlite_path().expect("a SQLite store")).expect("store");
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
            let tether = runner::tether_for(&lab, &hosts, &d.name, operator.clone(), None).expect("tether");
            (d.name.clone(), (dev, tether))
        })
        .collect();
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let trials = plan.trials.len();
    let names: Vec<String> = plan.devices.iter().map(|d| d.name.clone()).collect();
    let turns = runner::Turns::take_now(&store, &names, &Default::default()).expect("leases");
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
        turns,
        monitors: Default::default(),
        instruments: Default::default(),
        agent: None,
        gate: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let (cpu_before, machine_before, threads_before) = (process_cpu(), machine_cpu(), thread_cpu());
    let start = Instant::now();
    let summary = rt.block_on(campaign.run(false)).expect("run");
    let secs = start.elapsed().as_secs_f64();
    let (cpu, machine) = (process_cpu().since(cpu_before), machine_cpu().map(|m| m.since(machine_before?)));
    println!(
        "sim_lab: {DEVICES} devices, {trials} trials ({} valid, {} invalid attempts)",
        summary.valid, summary.invalid_attempts
    );
    println!("sim_lab: {secs:.2} s wall, {:.0} trials/s", trials as f64 / secs);
    println!(
        "sim_lab: the run's CPU {:.2} s user + {:.2} s system = {:.0} µs a trial",
        cpu.user,
        cpu.system,
        (cpu.user + cpu.system) / trials as f64 * 1e6
    );
    // On a shared virtual machine the hypervisor may run others on these cores: time
    // stolen during the run is wall time the run could not have used.
    // Which threads did the work: the recording thread is one, the runtime's workers
    // another group; time no thread of the process used is the idle below.
    let threads = thread_cpu();
    let mut by_name: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for (tid, (name, secs)) in &threads {
        let before = threads_before.get(tid).map_or(0.0, |(_, s)| *s);
        *by_name.entry(name.clone()).or_default() += secs - before;
    }
    let by_name: Vec<String> = by_name.iter().map(|(n, s)| format!("{n} {s:.2} s")).collect();
    println!("sim_lab: CPU by thread: {}", by_name.join(", "));
    if let Some(m) = machine.flatten() {
        println!("sim_lab: the machine meanwhile: {:.2} s idle, {:.2} s stolen by the hypervisor", m.idle, m.steal);
    }
    println!("sim_lab: peak memory (VmHWM) {}", peak_memory(Path::new("/proc/self/status")));
    let attempts = summary.valid + summary.invalid_attempts;
    println!(
        "sim_lab: {} store commits for {attempts} attempts and their device status; {:.2} s in the transactions that recorded attempts",
        store.commits(),
        store.recording_time().as_secs_f64()
    );
}

/// CPU seconds, user and system.
#[derive(Clone, Copy)]
struct Cpu {
    user: f64,
    system: f64,
}

impl Cpu {
    fn since(self, before: Cpu) -> Cpu {
        Cpu { user: self.user - before.user, system: self.system - before.system }
    }
}

/// Clock ticks per second of /proc's CPU times (USER_HZ).
fn clk_tck() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64
}

/// This process's CPU time so far (getrusage).
fn process_cpu() -> Cpu {
    use nix::sys::time::TimeValLike;
    let ru = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).expect("getrusage");
    let secs = |t: nix::sys::time::TimeVal| t.num_microseconds() as f64 / 1e6;
    Cpu { user: secs(ru.user_time()), system: secs(ru.system_time()) }
}

/// The machine's idle and stolen seconds so far, all CPUs (`/proc/stat`'s first line).
#[derive(Clone, Copy)]
struct Machine {
    idle: f64,
    steal: f64,
}

impl Machine {
    fn since(self, before: Machine) -> Option<Machine> {
        Some(Machine { idle: self.idle - before.idle, steal: self.steal - before.steal })
    }
}

fn machine_cpu() -> Option<Machine> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<f64> = stat.lines().next()?.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    let hz = clk_tck();
    Some(Machine { idle: f.get(3)? / hz, steal: f.get(7)? / hz })
}

/// Each live thread's name and CPU seconds so far, by thread id (`/proc/self/task`).
fn thread_cpu() -> std::collections::BTreeMap<u64, (String, f64)> {
    let hz = clk_tck();
    let mut out = std::collections::BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for t in tasks.flatten() {
        let Ok(tid) = t.file_name().to_string_lossy().parse::<u64>() else { continue };
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
        // `pid (comm) state ...`: utime and stime are the 12th and 13th fields after `)`.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else { continue };
        let name = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        out.insert(tid, (name, (ticks(11) + ticks(12)) / hz));
    }
    out
}

fn peak_memory(status: &Path) -> String {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l["VmHWM:".len()..].trim().to_string()))
        .unwrap_or_else(|| "unknown (no /proc)".into())
}
