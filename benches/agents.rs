//! The lab's agents at scale: 20 `lab agent`s (20 lab hosts of this machine, 10 simulated
//! phones each) pulling 5 000 short trials of 4 submitted campaigns from one PostgreSQL.
//! docs/benchmarks.md, "agents".
//!
//! `cargo bench --bench agents` runs the release `lab` binary: the 20 agents, `lab submit`
//! ×4 and `lab wait` ×4, as a lab would. It prints, with issue 47's targets beside them:
//! - trials/s: the trials over the wall time from the first `lab submit` to the last
//!   `lab wait` returning (its campaign done);
//! - the delay from a device coming free to its next trial starting: from the store, each
//!   attempt's `started_at` less the `ended_at` of the attempt before it on the same device
//!   (all four campaigns' attempts on a device in order of start), p50 and p99, also split
//!   into hand-offs within a campaign and between two campaigns. A device that came free
//!   before the next campaign was submitted (its `lab submit` returned) had no trial to
//!   start: its delay counts from the submit (and how many such hand-offs there were is
//!   printed);
//! - database round trips per trial: PostgreSQL's own counters for the bench's database
//!   over the run (`pg_stat_statements` calls where the server preloads it, and always
//!   `pg_stat_database` xact_commit + xact_rollback), over the trials;
//! - idle agents' CPU: after the campaigns end and a settle period, the 20 agents'
//!   utime + stime (`/proc/PID/stat`) and context switches (every thread's
//!   `/proc/PID/task/TID/status`) over `LAB_BENCH_IDLE_S` seconds, summed.
//!
//! A `PASS` or `FAIL` line per target; the targets are for reading: it exits 1 only when a
//! step fails (an agent that does not serve or does not drain with exit 0, a submit or a
//! wait that fails, a trial without exactly one valid attempt).
//!
//! Environment:
//! - `LAB_BENCH_POSTGRES` (else `LAB_TEST_POSTGRES`): a server URL whose user may create a
//!   database (`eval "$(tests/pg-cluster.sh)"` starts a throwaway one); without either the
//!   bench says so and exits 0. The 20 agents hold about 1 600 sessions at once (a
//!   device's lease, each place in a device's queue, each campaign part's store: one or
//!   two each), more than `tests/pg-cluster.sh`'s `max_connections = 200`: the server
//!   must allow them (docs/benchmarks.md says how);
//! - `LAB_BENCH_TRIALS` (5000): the trials, over 4 campaigns of 2 builds;
//! - `LAB_BENCH_SETTLE_S` (12): the pause after the campaigns before the idle window (an
//!   idle PostgreSQL backend reports its counters within 10 s);
//! - `LAB_BENCH_IDLE_S` (10): the idle window;
//! - `LAB_BENCH_LAB`: another `lab` binary to run instead of this build's (another commit's).
//! - `LAB_BENCH_KEEP_DB`: keep the run's database (its name is printed), to read its rows.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lab::store::{AttemptStatus, PgOwner, PgUrl, Store};

/// This build's `lab`, unless `LAB_BENCH_LAB` names another (to compare two commits).
const LAB: &str = env!("CARGO_BIN_EXE_lab");
const AGENTS: usize = 20;
const DEVICES_PER_AGENT: usize = 10;
const CAMPAIGNS: usize = 4;
/// Builds per runbook: a trial is one build on one device.
const BUILDS: usize = 2;
const MIN_TRIALS_PER_S: f64 = 500.0;
const MAX_P99_MS: f64 = 100.0;

fn main() {
    std::process::exit(run());
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A failed step: said at once, and the bench exits 1 at its end.
struct Steps {
    failed: Vec<String>,
}

impl Steps {
    fn check(&mut self, ok: bool, what: impl Into<String>) -> bool {
        if !ok {
            let what = what.into();
            println!("agents: step failed: {what}");
            self.failed.push(what);
        }
        ok
    }
}

fn run() -> i32 {
    let Some(server) = std::env::var("LAB_BENCH_POSTGRES").or_else(|_| std::env::var("LAB_TEST_POSTGRES")).ok() else {
        println!("agents: no PostgreSQL server; start one with `eval \"$(tests/pg-cluster.sh)\"` and run again");
        return 0;
    };
    let trials: usize = env_or("LAB_BENCH_TRIALS", 5000);
    let settle = Duration::from_secs_f64(env_or("LAB_BENCH_SETTLE_S", 12.0));
    let idle = Duration::from_secs_f64(env_or("LAB_BENCH_IDLE_S", 10.0));
    // Each campaign: BUILDS × repeats trials; the last one takes what does not divide.
    let per = trials / CAMPAIGNS / BUILDS;
    let repeats: Vec<usize> =
        (0..CAMPAIGNS).map(|k| if k + 1 < CAMPAIGNS { per } else { trials / BUILDS - per * (CAMPAIGNS - 1) }).collect();
    let trials: usize = repeats.iter().sum::<usize>() * BUILDS;

    let temp = tempfile::tempdir().expect("tempdir");
    let db = format!("lab_bench_agents_{}", std::process::id());
    let admin = PgOwner::connect(&PgUrl::parse(&server).expect("a PostgreSQL URL")).expect("the PostgreSQL server");
    let create = format!("CREATE DATABASE {db}");
    admin.call(move |c| c.batch(&create)).expect("create the bench database");
    let (base, _) = server.rsplit_once('/').expect("a URL with a database");
    let url = format!("{base}/{db}");
    let max_connections: String = admin
        .call(|c| c.query("SELECT setting FROM pg_settings WHERE name = 'max_connections'", &[])?[0].read())
        .unwrap_or_default();

    let mut steps = Steps { failed: Vec::new() };
    let dir = temp.path();
    let lab_file = write_lab(dir, &url);
    // Migrated once here, not by 20 agents at once; and the bench's reader afterwards.
    let store = Store::open_postgres(&PgUrl::parse(&url).expect("the bench database's URL")).expect("the store");
    println!(
        "agents: {AGENTS} agents × {DEVICES_PER_AGENT} simulated phones, {trials} trials in {CAMPAIGNS} campaigns \
         (repeats {repeats:?} × {BUILDS} builds), PostgreSQL max_connections {max_connections}"
    );

    let peak = PeakConnections::start(&server, &db);
    let mut agents: Vec<(String, Child)> = (1..=AGENTS)
        .map(|k| {
            let host = format!("h{k}");
            let child = lab(&lab_file, &["agent", "--host", &host])
                .stdout(log(dir, &format!("agent-{host}.log")))
                .stderr(log(dir, &format!("agent-{host}.err")))
                .spawn()
                .expect("spawn lab agent");
            (host, child)
        })
        .collect();
    let serving =
        wait_for(Duration::from_secs(120), || store.serving_hosts().map(|h| h.len() >= AGENTS).unwrap_or(false));
    if steps.check(serving, format!("{AGENTS} agents serving within 120 s (logs: {})", dir.display())) {
        // The agents' start-up transactions reach the server's counters before the first
        // reading (an idle backend reports within 10 s).
        std::thread::sleep(settle);
    }
    let pids: Vec<u32> = agents.iter().map(|(_, c)| c.id()).collect();
    let before = Counters::read(&admin, &db);
    let server = server_pid(&admin);
    let (cpu_before, machine_before, server_before) = (cpu_ticks(&pids), machine_ticks(), server_ticks(server));

    let started = Instant::now();
    let mut ids = Vec::new();
    // When each campaign's `lab submit` returned: its trials exist from then (µs since the epoch).
    let mut submitted = std::collections::HashMap::new();
    // The four at once, as four teams would: one after the other, each `lab submit` took
    // longer on the busy machine than the campaign before it took to run.
    // Each one's time is taken by a thread of its own the moment it exits.
    let submits: Vec<std::thread::JoinHandle<(std::process::Output, i64)>> = repeats
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let runbook = write_runbook(dir, k, *r);
            let child = lab(&lab_file, &["submit", runbook.to_str().unwrap(), "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("lab submit");
            std::thread::spawn(move || {
                let out = child.wait_with_output().expect("lab submit");
                (out, chrono::Utc::now().timestamp_micros())
            })
        })
        .collect();
    for handle in submits {
        let (out, returned) = handle.join().expect("lab submit's thread");
        let id = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v["id"].as_str().map(String::from));
        match id {
            Some(id) if out.status.success() => {
                submitted.insert(id.clone(), returned);
                ids.push(id)
            }
            _ => {
                steps.check(false, format!("lab submit: {}", String::from_utf8_lossy(&out.stderr)));
            }
        }
    }
    let waits: Vec<(String, Child)> = ids
        .iter()
        .map(|id| {
            let child = lab(&lab_file, &["wait", id])
                .stdout(log(dir, &format!("wait-{id}.log")))
                .stderr(log(dir, &format!("wait-{id}.err")))
                .spawn()
                .expect("spawn lab wait");
            (id.clone(), child)
        })
        .collect();
    for (id, mut w) in waits {
        let status = w.wait().expect("lab wait");
        steps.check(status.success(), format!("lab wait {id} exited {status}"));
    }
    let wall = started.elapsed().as_secs_f64();
    let (cpu_run, machine_run) = (cpu_ticks(&pids) - cpu_before, machine_ticks().since(&machine_before));
    let server_run = server_ticks(server).zip(server_before).map(|(a, b)| a.saturating_sub(b));
    let children = children_ticks();

    std::thread::sleep(settle);
    let after = Counters::read(&admin, &db);
    let idle_before = Idle::read(&pids);
    std::thread::sleep(idle);
    let idle_after = Idle::read(&pids);

    // Every trial once, valid; the hand-offs from each device's attempts in order.
    let mut attempts = Vec::new();
    for id in &ids {
        let planned = store.trials(id).map(|t| t.len()).unwrap_or(0);
        let got = store.attempts(id).unwrap_or_default();
        let valid = got.iter().filter(|a| a.status == AttemptStatus::Valid).count();
        let mut idx: Vec<u32> = got.iter().filter(|a| a.status == AttemptStatus::Valid).map(|a| a.trial_idx).collect();
        idx.sort_unstable();
        idx.dedup();
        steps.check(
            valid == planned && idx.len() == planned,
            format!("campaign {id}: {planned} trials, {valid} valid attempts over {} trials", idx.len()),
        );
        attempts.extend(got);
    }
    let (handoffs, before_submit) = handoffs(&attempts, &submitted);

    for (host, child) in &agents {
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet, so still ours.
        let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) } == 0;
        steps.check(sent, format!("SIGTERM to the agent of {host}"));
    }
    for (host, child) in &mut agents {
        let status = wait_exit(child, Duration::from_secs(60));
        steps.check(status == Some(0), format!("the agent of {host} drained and exited {status:?}"));
    }
    let peak_connections = peak.stop();
    drop(store);
    if std::env::var_os("LAB_BENCH_KEEP_DB").is_none() {
        let _ = admin.call(move |c| c.batch(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")));
    } else {
        eprintln!("agents: the database {db} is kept (LAB_BENCH_KEEP_DB)");
    }

    let rate = trials as f64 / wall;
    let all = Percentiles::of(handoffs.iter().map(|h| h.1).collect());
    let within = Percentiles::of(handoffs.iter().filter(|h| !h.0).map(|h| h.1).collect());
    let across = Percentiles::of(handoffs.iter().filter(|h| h.0).map(|h| h.1).collect());
    let xacts = after.xacts - before.xacts;
    let statements = after.statements.zip(before.statements).map(|(a, b)| a - b);
    let (idle_ticks, idle_switches) = idle_after.since(&idle_before);
    let tick = ticks_per_s();

    println!();
    println!("| figure | value |");
    println!("|---|---|");
    println!("| trials | {trials} ({} attempts) |", attempts.len());
    println!("| wall, first submit to last campaign done | {wall:.2} s |");
    println!("| trials/s | {rate:.0} |");
    println!("| device free → next trial started, all {} hand-offs | {all} |", handoffs.len());
    println!("| … within a campaign ({}) | {within} |", handoffs.iter().filter(|h| !h.0).count());
    println!("| … from one campaign to another ({}) | {across} |", handoffs.iter().filter(|h| h.0).count());
    println!(
        "| … of these, the device free before the next campaign was submitted (counted from the submit) | {before_submit} |"
    );
    println!(
        "| transactions (pg_stat_database commit + rollback) | {xacts}, {:.1} a trial |",
        xacts as f64 / trials as f64
    );
    match statements {
        Some(s) => println!("| statements (pg_stat_statements calls) | {s}, {:.1} a trial |", s as f64 / trials as f64),
        None => println!("| statements (pg_stat_statements calls) | not loaded by this server |"),
    }
    println!("| the database's connections at most | {peak_connections} (max_connections {max_connections}) |");
    println!(
        "| the agents' CPU during the run | {:.2} s, {:.0} µs a trial |",
        cpu_run as f64 / tick,
        cpu_run as f64 / tick / trials as f64 * 1e6
    );
    match server_run {
        Some(t) => println!(
            "| the server's CPU during the run (its processes) | {:.2} s, {:.0} µs a trial |",
            t as f64 / tick,
            t as f64 / tick / trials as f64 * 1e6
        ),
        None => println!("| the server's CPU during the run | not on this machine (or not readable) |"),
    }
    println!("| `lab submit` and `lab wait`'s CPU | {:.2} s |", children as f64 / tick);
    println!(
        "| the machine during the run ({} cores) | {:.0} % busy, {:.2} s stolen |",
        machine_run.cores,
        machine_run.busy_share() * 100.0,
        machine_run.steal as f64 / tick
    );
    println!(
        "| idle agents over {:.0} s, summed | {:.2} s CPU, {idle_switches} context switches{} |",
        idle.as_secs_f64(),
        idle_ticks as f64 / tick,
        if idle_after.threads == idle_before.threads { String::new() } else { " (threads began or ended)".into() }
    );

    let round_trips = statements.unwrap_or(xacts) as f64 / trials as f64;
    println!();
    verdict(rate >= MIN_TRIALS_PER_S, &format!("{rate:.0} trials/s (the target is ≥ {MIN_TRIALS_PER_S:.0})"));
    verdict(
        all.p99 <= MAX_P99_MS,
        &format!(
            "a device's next trial starts {:.0} ms after it came free at p99 (the target is ≤ {MAX_P99_MS:.0} ms)",
            all.p99
        ),
    );
    verdict(
        idle_ticks == 0 && idle_switches == 0,
        &format!(
            "idle agents used {:.2} s of CPU and {idle_switches} context switches in {:.0} s (the target is 0)",
            idle_ticks as f64 / tick,
            idle.as_secs_f64()
        ),
    );
    println!(
        "agents: {round_trips:.1} database round trips a trial ({}; no target)",
        if statements.is_some() { "statements" } else { "transactions" }
    );
    if steps.failed.is_empty() {
        0
    } else {
        println!("agents: {} steps failed", steps.failed.len());
        1
    }
}

fn verdict(met: bool, what: &str) {
    println!("agents: {}: {what}", if met { "PASS" } else { "FAIL" });
}

/// The lab: hosts h1…h20 (this machine, no address), 10 simulated phones each.
fn write_lab(dir: &Path, url: &str) -> PathBuf {
    let mut text =
        format!("[lab]\nname = \"bench-agents\"\nartifacts = \"{}/artifacts\"\nstore = \"{url}\"\n", dir.display());
    for h in 1..=AGENTS {
        let _ = write!(text, "\n[[host]]\nname = \"h{h}\"\n");
    }
    for h in 1..=AGENTS {
        for d in 0..DEVICES_PER_AGENT {
            let _ = write!(
                text,
                "\n[[device]]\nname = \"sim-{h:02}-{d}\"\nhost = \"h{h}\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
                 os = \"x\"\ntether = \"software\"\n[device.sim]\nemulates = \"android\"\nseed = {}\n",
                h * 100 + d
            );
        }
    }
    let path = dir.join("lab.toml");
    fs::write(&path, text).expect("write lab.toml");
    path
}

/// Campaign `k`: two builds on every phone, `repeats` each, one simulated minute a trial.
fn write_runbook(dir: &Path, k: usize, repeats: usize) -> PathBuf {
    let text = format!(
        "name = \"bench-{k}\"\nduration = \"1m\"\nrepeats = {repeats}\nseed = {k}\ndevices = [\"sim-*\"]\n\
         [workload]\nrequest_interval = \"1s\"\n[preconditions]\nbattery_min = 20\n\
         [builds.idle]\nbaseline = true\n[builds.idle.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [builds.busy]\n[builds.busy.sim]\ncpu_pct = 40\nwakeups_per_s = 200\nmemory_mb = 35\n"
    );
    let path = dir.join(format!("bench-{k}.toml"));
    fs::write(&path, text).expect("write runbook");
    path
}

fn lab(lab_file: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(std::env::var_os("LAB_BENCH_LAB").unwrap_or(LAB.into()));
    c.arg("--lab").arg(lab_file).args(args).current_dir(lab_file.parent().unwrap()).stdin(Stdio::null());
    c.env_remove("LAB_STORE");
    c
}

fn log(dir: &Path, name: &str) -> fs::File {
    fs::File::create(dir.join(name)).expect("log file")
}

fn wait_for(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The child's exit code, or `None` if it did not exit within `within` (then killed).
fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let until = Instant::now() + within;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return s.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each hand-off on a device: (from one campaign to another, ms from the previous
/// attempt's end to this one's start), and how many hand-offs between campaigns came before
/// the next campaign was submitted. A device's attempts of all campaigns, by start; a device
/// that came free before the next campaign existed had nothing to start, so its delay
/// counts from the campaign's submit (`submitted`, µs), not from its last attempt's end.
fn handoffs(
    attempts: &[lab::store::AttemptRecord],
    submitted: &std::collections::HashMap<String, i64>,
) -> (Vec<(bool, f64)>, usize) {
    let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("an RFC 3339 time").timestamp_micros();
    let mut by_device: std::collections::BTreeMap<&str, Vec<(i64, i64, &str)>> = Default::default();
    for a in attempts {
        by_device.entry(&a.device).or_default().push((at(&a.started_at), at(&a.ended_at), &a.campaign));
    }
    let (mut out, mut early) = (Vec::new(), 0);
    for list in by_device.values_mut() {
        list.sort();
        for w in list.windows(2) {
            let across = w[0].2 != w[1].2;
            let mut free = w[0].1;
            if let Some(&sub) = submitted.get(w[1].2)
                && across
                && sub > free
            {
                free = sub;
                early += 1;
            }
            out.push((across, (w[1].0 - free) as f64 / 1000.0));
        }
    }
    (out, early)
}

struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
    n: usize,
}

impl Percentiles {
    fn of(mut v: Vec<f64>) -> Percentiles {
        v.sort_by(f64::total_cmp);
        let q = |p: f64| if v.is_empty() { f64::NAN } else { v[((v.len() - 1) as f64 * p).round() as usize] };
        Percentiles { p50: q(0.50), p99: q(0.99), max: v.last().copied().unwrap_or(f64::NAN), n: v.len() }
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.n == 0 {
            return write!(f, "none");
        }
        write!(f, "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms", self.p50, self.p99, self.max)
    }
}

/// The server's counters for the bench's database, read from another database's session
/// (so the reading is not counted).
struct Counters {
    xacts: i64,
    statements: Option<i64>,
}

impl Counters {
    fn read(admin: &PgOwner, db: &str) -> Counters {
        let d = db.to_string();
        let xacts = admin
            .call(move |c| {
                c.batch("SELECT pg_stat_clear_snapshot()")?;
                c.query(
                    "SELECT CAST(xact_commit + xact_rollback AS BIGINT) FROM pg_stat_database WHERE datname = ?1",
                    &[lab::store::Value::from(d.as_str())],
                )?[0]
                    .read::<i64>()
            })
            .expect("pg_stat_database");
        let d = db.to_string();
        let statements = admin
            .call(move |c| {
                // Top-level statements only: a trigger's or a foreign key's are not round trips.
                c.query(
                    "SELECT CAST(COALESCE(SUM(calls), 0) AS BIGINT) FROM pg_stat_statements
                     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = ?1) AND toplevel",
                    &[lab::store::Value::from(d.as_str())],
                )?[0]
                    .read::<i64>()
            })
            .ok();
        Counters { xacts, statements }
    }
}

/// The most sessions the bench's database had at once, sampled every 50 ms from a session
/// on another database until stopped.
struct PeakConnections {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<i64>,
}

impl PeakConnections {
    fn start(server: &str, db: &str) -> PeakConnections {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (url, db, stopped) = (PgUrl::parse(server).expect("a PostgreSQL URL"), db.to_string(), stop.clone());
        let thread = std::thread::spawn(move || {
            let conn = PgOwner::connect(&url).expect("the PostgreSQL server");
            let mut peak = 0;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let d = db.clone();
                let n = conn
                    .call(move |c| {
                        c.query(
                            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = ?1",
                            &[lab::store::Value::from(d.as_str())],
                        )?[0]
                            .read::<i64>()
                    })
                    .unwrap_or(0);
                peak = peak.max(n);
                // Not more often: with 1 600 sessions a read costs the server about 5 ms,
                // which every 50 ms was a tenth of its CPU during the run.
                std::thread::sleep(Duration::from_millis(500));
            }
            peak
        });
        PeakConnections { stop, thread }
    }

    fn stop(self) -> i64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// The PostgreSQL server's postmaster, if it runs on this machine: the parent of the
/// admin session's backend.
fn server_pid(admin: &PgOwner) -> Option<u32> {
    let backend = admin.call(|c| c.query("SELECT pg_backend_pid()", &[])?[0].read::<i64>()).ok()?;
    let stat = fs::read_to_string(format!("/proc/{backend}/stat")).ok()?;
    stat_fields(&stat).get(1).copied().map(|p| p as u32)
}

/// The server's CPU: its live processes' utime + stime, and what its ended ones used
/// (the postmaster's cutime + cstime, once it reaped them).
fn server_ticks(postmaster: Option<u32>) -> Option<u64> {
    let postmaster = postmaster?;
    let own = fs::read_to_string(format!("/proc/{postmaster}/stat")).ok()?;
    let f = stat_fields(&own);
    let mut ticks = f.get(11)? + f.get(12)? + f.get(13)? + f.get(14)?;
    for e in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let f = stat_fields(&stat);
        if f.get(1) == Some(&u64::from(postmaster)) {
            ticks += f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
        }
    }
    Some(ticks)
}

/// The bench's reaped children's CPU (`lab submit`, `lab wait`), in ticks.
fn children_ticks() -> u64 {
    // SAFETY: rusage is plain old data, so all-zero is valid; getrusage writes only to it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let us = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    ((us(usage.ru_utime) + us(usage.ru_stime)) * ticks_per_s()) as u64
}

/// `/proc/PID/stat`'s numeric fields after the command, from field 3 (state, read as 0):
/// ppid at 1, utime at 11, stime 12, cutime 13, cstime 14.
fn stat_fields(stat: &str) -> Vec<u64> {
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect()
}

fn ticks_per_s() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// utime + stime of a process, all its threads, in clock ticks (`/proc/PID/stat`).
fn process_ticks(pid: u32) -> u64 {
    let f = stat_fields(&fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default());
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

fn cpu_ticks(pids: &[u32]) -> u64 {
    pids.iter().map(|p| process_ticks(*p)).sum()
}

/// The agents' CPU ticks and every thread's context switches, and which threads they had.
struct Idle {
    ticks: u64,
    switches: u64,
    threads: Vec<(u32, u32)>,
}

impl Idle {
    fn read(pids: &[u32]) -> Idle {
        let mut out = Idle { ticks: cpu_ticks(pids), switches: 0, threads: Vec::new() };
        for pid in pids {
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { continue };
            for t in tasks.flatten() {
                let status = fs::read_to_string(t.path().join("status")).unwrap_or_default();
                for line in status.lines() {
                    if let Some(n) = line
                        .strip_prefix("voluntary_ctxt_switches:")
                        .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
                    {
                        out.switches += n.trim().parse::<u64>().unwrap_or(0);
                    }
                }
                out.threads.push((*pid, t.file_name().to_string_lossy().parse().unwrap_or(0)));
            }
        }
        out.threads.sort_unstable();
        out
    }

    fn since(&self, before: &Idle) -> (u64, u64) {
        (self.ticks - before.ticks, self.switches.saturating_sub(before.switches))
    }
}

/// The machine's CPU time by kind (`/proc/stat`'s first line), in ticks.
struct Machine {
    busy: u64,
    total: u64,
    steal: u64,
    cores: usize,
}

impl Machine {
    fn busy_share(&self) -> f64 {
        self.busy as f64 / self.total.max(1) as f64
    }

    fn since(&self, before: &Machine) -> Machine {
        Machine {
            busy: self.busy - before.busy,
            total: self.total - before.total,
            steal: self.steal - before.steal,
            cores: self.cores,
        }
    }
}

fn machine_ticks() -> Machine {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> =
        stat.lines().next().unwrap_or("").split_whitespace().skip(1).map(|x| x.parse().unwrap_or(0)).collect();
    let get = |i: usize| f.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    let (idle, steal) = (get(3) + get(4), get(7));
    let total: u64 = (0..8).map(get).sum();
    let cores = stat.lines().filter(|l| l.starts_with("cpu") && !l.starts_with("cpu ")).count();
    Machine { busy: total - idle - steal, total, steal, cores }
}
