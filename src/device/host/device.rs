//! `HostDevice`: a Linux machine whose app under test is a command (docs/host.md).
//!
//! Everything on the host goes through its `Transport` (programs, files under /proc
//! and /sys), so a host reached over SSH needs only another transport. Trials run on
//! real (tokio) time. The app's cost is the difference of two readings of the kernel's
//! accounting, at the start and at the end of the soak; nothing polls in between.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::sysfs::{self, EnergySample, HostPaths};
use super::tree::{self, SampleError, TreeRef, TreeSample};
use super::usage::{SOURCE_RAPL, tree_usage};
use crate::clock::Clock;
use crate::collect::linux::procfs::{cgroup2_mount, own_cgroup2};
use crate::config::{Build, DeviceSpec, HostCommand, Platform, VariantConfig};
use crate::device::{
    AppHandle, ArtifactFile, Collected, Device, DeviceError, Identity, LaunchSpec, PrepareOutcome, Prepared,
    SoakEvidence, StateSnapshot,
};
use crate::measure::Measurement;
use crate::transport::{CommandSpec, RunningProcess, SpawnSpec, Transport, TransportError};

/// Time the app's tree gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// Upper bound of a build step (the runner's prepare timeout usually ends it first).
const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);
const STDOUT_LOG: &str = "app.stdout.log";
/// Numbers every cgroup this lab process makes (several devices may share a host).
static CGROUP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const STDERR_LOG: &str = "app.stderr.log";
/// On an SSH host: the app's session id, in its run folder.
const PID_FILE: &str = "pid";
/// On an SSH host: the app's cgroup, when it has one, in its run folder.
const CGROUP_FILE: &str = "cgroup";
/// On an SSH host: the app's run folder, in its environment.
const RUN_DIR_ENV: &str = "LAB_RUN_DIR";

pub struct HostDevice {
    spec: DeviceSpec,
    transport: Arc<dyn Transport>,
    clock: Clock,
    paths: HostPaths,
    /// Where config files are pushed for the app (`LAB_DATA_DIR`).
    data_dir: PathBuf,
    /// Clock ticks per second of /proc's CPU times (USER_HZ).
    ticks_per_s: f64,
    /// On an SSH host: the folder there (relative to the login folder) for the app's
    /// logs, pulled back at collect. `None`: the host is this machine.
    remote_runs: Option<PathBuf>,
    inner: tokio::sync::Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Build steps already run by this lab process (their argv, env and cwd as JSON).
    built: BTreeSet<String>,
    /// Build name → sha256 of its program when last prepared.
    installed: BTreeMap<String, String>,
    running: BTreeMap<String, Running>,
    /// Where new cgroups go (`None`: cgroup v2 is not mounted); looked up once.
    cgroup_base: Option<Option<PathBuf>>,
}

/// What a launch runs, from the `Prepared` its prepare returned.
#[derive(Clone)]
struct Launchable {
    build: String,
    host: HostCommand,
    config: VariantConfig,
    program: PathBuf,
    sha256: String,
}

impl Launchable {
    fn from_prepared(p: &Prepared) -> Option<Launchable> {
        Some(Launchable {
            build: p.build.name.clone(),
            host: p.build.host.clone()?,
            config: p.config.clone(),
            program: PathBuf::from(p.location.as_ref()?),
            sha256: p.outcome.sha256().to_string(),
        })
    }
}

struct Running {
    process: Box<dyn RunningProcess>,
    tree: TreeRef,
    start: TreeSample,
    energy: Option<EnergySample>,
    prepared: Launchable,
    argv: Vec<String>,
    /// Where the app's stdout and stderr files are, on the host.
    logs: PathBuf,
}

impl HostDevice {
    /// The machine `spec.host` names, reached through `transport`; pushed config files go
    /// under `data_root/<device>`.
    pub fn new(spec: DeviceSpec, transport: Arc<dyn Transport>, data_root: &Path) -> HostDevice {
        Self::with_paths(spec, transport, data_root, HostPaths::default())
    }

    /// Like `new`, reading the kernel's files under other roots (tests).
    pub fn with_paths(spec: DeviceSpec, transport: Arc<dyn Transport>, data_root: &Path, paths: HostPaths) -> Self {
        // USER_HZ is 100 on every Linux the lab knows.
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100);
        HostDevice {
            data_dir: data_root.join(&spec.name),
            spec,
            transport,
            clock: Clock::tokio(),
            paths,
            ticks_per_s: if ticks > 0 { ticks as f64 } else { 100.0 },
            remote_runs: None,
            inner: tokio::sync::Mutex::new(Inner::default()),
        }
    }

    /// A device on a lab host reached over SSH: its build is uploaded there (once per
    /// host, by sha256), its logs are written there and pulled back, config files go
    /// under `lab-data/<device>` in the login folder.
    pub fn remote(spec: DeviceSpec, transport: Arc<dyn Transport>) -> HostDevice {
        let mut d = Self::with_paths(spec, transport, Path::new("lab-data"), HostPaths::default());
        d.remote_runs = Some(PathBuf::from("lab-runs").join(&d.spec.name));
        d
    }

    fn failed(&self, what: &str, detail: impl Into<String>) -> DeviceError {
        DeviceError::Failed { device: self.spec.name.clone(), what: what.into(), detail: detail.into() }
    }

    /// A transport error as the runner needs it: a host that cannot be reached is a
    /// disconnected device (the runner waits for it); anything else is a failed step.
    fn transport_err(&self, what: &str, e: TransportError) -> DeviceError {
        DeviceError::from_transport(&self.spec.name, what, e)
    }

    fn sample_err(&self, e: SampleError) -> DeviceError {
        match e {
            SampleError::Transport(e) => self.transport_err("reading the app's accounting", e),
            SampleError::Parse(detail) => self.failed("reading the app's accounting", detail),
        }
    }

    fn io(&self, path: &Path, source: std::io::Error) -> DeviceError {
        DeviceError::Io { device: self.spec.name.clone(), path: path.into(), source }
    }

    async fn read_text(&self, path: &Path) -> Option<String> {
        self.transport.read_file(path).await.ok().map(|b| String::from_utf8_lossy(&b).trim().to_string())
    }

    /// Runs the build's `build` step once per lab process (its output decides nothing
    /// else: the program's hash does).
    async fn run_build_step(&self, inner: &mut Inner, host: &HostCommand) -> Result<(), DeviceError> {
        let Some(step) = &host.build else { return Ok(()) };
        let key = serde_json::to_string(&(step, &host.env, &host.cwd)).unwrap_or_default();
        if inner.built.contains(&key) {
            return Ok(());
        }
        let mut cmd = CommandSpec::new(&step[0], &[]);
        cmd.args = step[1..].to_vec();
        cmd.env = host.env.clone();
        cmd.cwd = host.cwd.clone();
        cmd.timeout = BUILD_TIMEOUT;
        let out = self.transport.exec(&cmd).await.map_err(|e| self.transport_err("the build step", e))?;
        if !out.success() {
            let status = out.status.map_or("was killed".to_string(), |c| format!("exited with code {c}"));
            return Err(
                self.failed("the build step", format!("`{}` {status}: {}", cmd.display(), tail(&out.stderr_text(), 8)))
            );
        }
        inner.built.insert(key);
        Ok(())
    }

    /// The program file `command[0]` names: a path (relative to `cwd`) or a name on PATH.
    /// (The lab's own folder and PATH are the host's while every host is this machine.)
    async fn find_program(&self, host: &HostCommand) -> Result<(PathBuf, Vec<u8>), DeviceError> {
        let program = &host.command[0];
        if self.remote_runs.is_some() {
            // A program file on the lab machine is uploaded to the host's build cache
            // (skipped when already there); a bare name is looked up on the host.
            let local = host.cwd.clone().unwrap_or_default().join(program);
            if program.contains('/') && local.is_file() {
                let staged =
                    self.transport.stage(&local).await.map_err(|e| self.transport_err("uploading the build", e))?;
                let bytes = std::fs::read(&local).map_err(|e| self.io(&local, e))?;
                return Ok((staged.path, bytes));
            }
        }
        let cwd = host.cwd.clone().or_else(|| std::env::current_dir().ok()).unwrap_or_default();
        let candidates: Vec<PathBuf> = if program.contains('/') {
            vec![cwd.join(program)]
        } else {
            let path = host.env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
            path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(program)).collect()
        };
        for c in &candidates {
            match self.transport.read_file(c).await {
                Ok(bytes) => return Ok((c.clone(), bytes)),
                Err(e) if e.is_not_found() => {}
                Err(TransportError::Read { source, .. })
                    if source.kind() == std::io::ErrorKind::PermissionDenied
                        || source.raw_os_error() == Some(libc::EISDIR) => {}
                Err(e) => return Err(self.transport_err("finding the program", e)),
            }
        }
        let place = if program.contains('/') {
            format!("in {}", cwd.display())
        } else {
            format!("on PATH on host {}", self.spec.host)
        };
        Err(self.failed(
            "finding the program",
            format!(
                "`{program}` not found {place}; fix: build it first (a `build` step under [builds.NAME.host] runs before \
                 the first trial) or correct `command`"
            ),
        ))
    }

    async fn cgroup_base(&self, inner: &mut Inner) -> Option<PathBuf> {
        if let Some(b) = &inner.cgroup_base {
            return b.clone();
        }
        let mounts = self.read_text(&self.paths.proc.join("self/mounts")).await.unwrap_or_default();
        let own = self.read_text(&self.paths.proc.join("self/cgroup")).await.unwrap_or_default();
        let base = cgroup2_mount(&mounts).zip(own_cgroup2(&own)).map(|(m, own)| m.join(own.trim_start_matches('/')));
        inner.cgroup_base = Some(base.clone());
        base
    }

    /// The environment the app gets: the build's, the config's, then what the lab tells it.
    fn app_env(&self, p: &Launchable, spec: &LaunchSpec) -> BTreeMap<String, String> {
        let mut env = p.host.env.clone();
        env.extend(p.config.env.clone());
        env.insert("LAB_TRIAL".into(), spec.trial_key.clone());
        env.insert("LAB_SEED".into(), spec.seed.to_string());
        env.insert("LAB_DURATION_MS".into(), spec.duration.as_millis().to_string());
        env.insert("LAB_DATA_DIR".into(), self.data_dir.display().to_string());
        if let Some(iv) = spec.request_interval {
            env.insert("LAB_REQUEST_INTERVAL_MS".into(), iv.as_millis().to_string());
        }
        if let Some(url) = &spec.endpoint_url {
            env.insert("LAB_ENDPOINT_URL".into(), url.clone());
        }
        env
    }

    /// On an SSH host: apps a previous lab left running there when it lost the host (or
    /// died) are stopped, and their run folders removed, before this device runs
    /// anything — they would spoil every measurement. A pid counts only when its process
    /// still carries that run folder in its environment; a cgroup the app ran in is
    /// emptied and removed.
    async fn reap_leftovers(&self) -> Result<usize, DeviceError> {
        let Some(runs) = &self.remote_runs else { return Ok(0) };
        let dirs = match self.transport.list_dir(runs).await {
            Ok(d) => d,
            Err(e @ TransportError::Unreachable { .. }) => return Err(self.transport_err("identify", e)),
            Err(_) => return Ok(0),
        };
        let mut stopped = 0;
        for name in dirs {
            let dir = runs.join(&name);
            let pid = self.read_text(&dir.join(PID_FILE)).await.and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid
                && let Ok(env) = self.transport.read_file(&self.paths.proc.join(pid.to_string()).join("environ")).await
            {
                let mark = format!("{RUN_DIR_ENV}={}", dir.display());
                if env.split(|b| *b == 0).any(|v| v == mark.as_bytes()) {
                    let group = format!("-{pid}");
                    let _ = self.transport.exec(&CommandSpec::new("kill", &["-KILL", "--", &group])).await;
                    stopped += 1;
                }
            }
            // Its cgroup holds whatever left the group; only a lab's own (`lab-…`) is touched.
            if let Some(cg) = self.read_text(&dir.join(CGROUP_FILE)).await.map(PathBuf::from)
                && cg.file_name().is_some_and(|n| n.to_string_lossy().starts_with("lab-"))
            {
                let _ = crate::transport::end_cgroup(self.transport.as_ref(), &cg).await;
            }
            let mut rm = CommandSpec::new("rm", &["-rf", "--"]);
            rm.args.push(dir.display().to_string());
            let _ = self.transport.exec(&rm).await;
        }
        Ok(stopped)
    }

    async fn stop_running(&self, r: &Running) -> Result<crate::transport::ExitInfo, DeviceError> {
        r.process.stop(STOP_GRACE).await.map_err(|e| self.transport_err("stopping the app", e))
    }
}

/// The last `n` non-empty lines of `text`, on one line (for reasons and errors).
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    let s = lines[start..].join(" | ");
    if s.is_empty() { "(no output)".into() } else { s }
}

fn artifact(dir: &Path, name: &str) -> Option<ArtifactFile> {
    let bytes = std::fs::read(dir.join(name)).ok()?;
    Some(ArtifactFile::of(name, &bytes))
}

#[async_trait]
impl Device for HostDevice {
    fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn talks_to_endpoint(&self) -> bool {
        true
    }

    async fn identify(&self) -> Result<Identity, DeviceError> {
        let p = &self.paths.proc;
        let release = match self.transport.read_file(&p.join("sys/kernel/osrelease")).await {
            Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
            Err(e @ TransportError::Unreachable { .. }) => return Err(self.transport_err("identify", e)),
            Err(e) => {
                return Err(self.failed("identify", format!("{e}: host devices need Linux (/proc and /sys)")));
            }
        };
        self.reap_leftovers().await?;
        let hostname = self.read_text(&p.join("sys/kernel/hostname")).await.unwrap_or_default();
        let cpuinfo = self.read_text(&p.join("cpuinfo")).await.unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| self.spec.model.clone());
        let cores = cpuinfo.lines().filter(|l| l.starts_with("processor")).count();
        Ok(Identity {
            name: self.spec.name.clone(),
            model: if cores > 0 { format!("{cpu} ({cores} CPUs)") } else { cpu },
            os: format!("Linux {release}"),
            serial: hostname,
        })
    }

    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError> {
        let host = build.host.as_ref().ok_or_else(|| DeviceError::NoArtifact {
            build: build.name.clone(),
            device: self.spec.name.clone(),
            platform: Platform::Host.to_string(),
        })?;
        let mut inner = self.inner.lock().await;
        self.run_build_step(&mut inner, host).await?;
        let (program, bytes) = self.find_program(host).await?;
        let sha256 = crate::seed::sha256_hex(&bytes);
        for f in &config.files {
            let dest = self.data_dir.join(&f.dest);
            self.transport.upload(&f.src, &dest).await.map_err(|e| self.transport_err("pushing a config file", e))?;
        }
        let same = inner.installed.insert(build.name.clone(), sha256.clone()).as_deref() == Some(sha256.as_str());
        let outcome =
            if same { PrepareOutcome::AlreadyInstalled { sha256 } } else { PrepareOutcome::Installed { sha256 } };
        let mut prepared = Prepared::new(build, config, outcome);
        prepared.location = Some(program.display().to_string());
        Ok(prepared)
    }

    async fn state(&self) -> Result<StateSnapshot, DeviceError> {
        sysfs::host_state(self.transport.as_ref(), &self.paths)
            .await
            .map_err(|e| self.transport_err("reading the host's state", e))
    }

    /// Nothing to reset (the measurement is a difference); a leftover app is stopped.
    async fn reset_counters(&self) -> Result<(), DeviceError> {
        let leftovers: Vec<Running> = std::mem::take(&mut self.inner.lock().await.running).into_values().collect();
        for r in &leftovers {
            self.stop_running(r).await?;
        }
        Ok(())
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        let mut inner = self.inner.lock().await;
        let prepared = Launchable::from_prepared(&spec.prepared)
            .ok_or_else(|| self.failed("launch", "the build was not prepared for a host (no program)"))?;
        let mut argv = prepared.host.command.clone();
        argv.extend(prepared.config.args.iter().cloned());
        if self.remote_runs.is_some() {
            // The host runs what was found or uploaded there, from its login folder.
            argv[0] = prepared.program.display().to_string();
        }
        let mut cmd = CommandSpec::new(&argv[0], &[]);
        cmd.args = argv[1..].to_vec();
        cmd.env = self.app_env(&prepared, spec);
        let run_dir = self.remote_runs.as_ref().map(|runs| runs.join(format!("{}-{:016x}", spec.trial_key, spec.seed)));
        if let Some(d) = &run_dir {
            // Marks the app's processes as this run's, so a later lab can tell its
            // leftovers from an unrelated process that reused the pid.
            cmd.env.insert(RUN_DIR_ENV.into(), d.display().to_string());
        }
        cmd.cwd = if self.remote_runs.is_some() { None } else { prepared.host.cwd.clone() };
        let logs = match &run_dir {
            Some(d) => {
                // The attempt's seed keeps two labs (or two attempts) on one host apart.
                let mut mk = CommandSpec::new("mkdir", &["-p", "--"]);
                mk.args.push(d.display().to_string());
                self.transport.exec(&mk).await.map_err(|e| self.transport_err("starting the app", e))?;
                d.clone()
            }
            None => spec.dir.clone(),
        };
        let seq = CGROUP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cgroup = self
            .cgroup_base(&mut inner)
            .await
            .map(|b| b.join(format!("lab-{}-{}-{seq}", std::process::id(), self.spec.name)));
        let launch =
            SpawnSpec { cmd, stdout: Some(logs.join(STDOUT_LOG)), stderr: Some(logs.join(STDERR_LOG)), cgroup };
        let process = self.transport.spawn(&launch).await.map_err(|e| self.transport_err("starting the app", e))?;
        if run_dir.is_some() {
            // Where a lab that lost this host finds the app again (see `reap_leftovers`).
            let script = r#"printf '%s\n' "$1" > "$2" && if [ -n "$3" ]; then printf '%s\n' "$3" > "$4"; fi"#;
            let mut note = CommandSpec::new("sh", &["-c", script, "sh"]);
            note.args.push(process.pid().to_string());
            note.args.push(logs.join(PID_FILE).display().to_string());
            note.args.push(process.cgroup().map(|c| c.display().to_string()).unwrap_or_default());
            note.args.push(logs.join(CGROUP_FILE).display().to_string());
            self.transport.exec(&note).await.map_err(|e| self.transport_err("starting the app", e))?;
        }
        let tree = TreeRef { leader: process.pid(), cgroup: process.cgroup().map(Path::to_path_buf) };
        let launched_at = self.clock.now();
        // The soak starts now: the first of the two readings.
        let start = tree::sample(self.transport.as_ref(), &self.paths.proc, &tree, launched_at)
            .await
            .map_err(|e| self.sample_err(e))?;
        let energy = sysfs::rapl(self.transport.as_ref(), &self.paths).await;
        let id = format!("{}:{}", prepared.build, process.pid());
        // What a foreground check would name: the program (hosts have no foreground app).
        let app_id = prepared.host.command[0].clone();
        inner.running.insert(id.clone(), Running { process, tree, start, energy, prepared, argv, logs });
        Ok(AppHandle { id, app_id, launched_at })
    }

    /// Asks the host until it answers, with backoff (1 s doubling to a minute), for up
    /// to `timeout`. This machine always answers. A host that answers with a changed
    /// key or refuses the login is not waited for.
    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError> {
        let start = self.clock.now();
        let mut delay = Duration::from_secs(1);
        loop {
            let e = match self.transport.ping().await {
                Ok(()) => return Ok(()),
                Err(e) if !e.is_transient() => return Err(self.failed("reconnecting", e.to_string())),
                Err(e) => e,
            };
            let waited = self.clock.now().saturating_sub(start);
            if waited >= timeout {
                return Err(self.transport_err(&format!("not back after {}", humantime::format_duration(waited)), e));
            }
            self.clock.sleep(delay.min(timeout - waited)).await;
            delay = (delay * 2).min(Duration::from_secs(60));
        }
    }

    /// The second reading, then the tree is stopped and the difference recorded.
    async fn collect(&self, app: &AppHandle, dir: &Path) -> Result<Collected, DeviceError> {
        let running = self
            .inner
            .lock()
            .await
            .running
            .remove(&app.id)
            .ok_or_else(|| self.failed("collect", format!("app {} is not running on this device", app.id)))?;
        let now = self.clock.now();
        let end = match tree::sample(self.transport.as_ref(), &self.paths.proc, &running.tree, now).await {
            // Nothing was stopped or lost: the app keeps running on the host and the
            // runner may collect again once the host is back.
            Err(SampleError::Transport(e @ TransportError::Unreachable { .. })) => {
                self.inner.lock().await.running.insert(app.id.clone(), running);
                return Err(self.transport_err("reading the app's accounting", e));
            }
            end => end,
        };
        let energy_end = sysfs::rapl(self.transport.as_ref(), &self.paths).await;
        let died = running.process.exited().await.map_err(|e| self.transport_err("collect", e))?;
        let exit = self.stop_running(&running).await?;
        let end = end.map_err(|e| self.sample_err(e))?;

        let usage = tree_usage(&running.start, &end, self.ticks_per_s);
        let mut measurements = usage.measurements();
        if let (Some(a), Some(b)) = (&running.energy, &energy_end)
            && let Some(j) = sysfs::energy_joules(a, b)
        {
            measurements.push(Measurement::new("energy_j", j, "J", SOURCE_RAPL));
        }

        tokio::fs::create_dir_all(dir).await.map_err(|e| self.io(dir, e))?;
        if self.remote_runs.is_some() {
            for name in [STDOUT_LOG, STDERR_LOG] {
                // A log the app never wrote is not an error; a lost connection is.
                match self.transport.download(&running.logs.join(name), &dir.join(name)).await {
                    Ok(()) => {}
                    Err(e) if e.is_transient() => return Err(self.transport_err("pulling the app's logs", e)),
                    Err(_) => {}
                }
            }
            let mut rm = CommandSpec::new("rm", &["-rf", "--"]);
            rm.args.push(running.logs.display().to_string());
            let _ = self.transport.exec(&rm).await;
        }
        let files = [
            ("proc-start.txt", running.start.raw_text("kernel accounting at the start of the soak")),
            ("proc-end.txt", end.raw_text("kernel accounting at the end of the soak")),
        ];
        for (name, text) in &files {
            let path = dir.join(name);
            tokio::fs::write(&path, text).await.map_err(|e| self.io(&path, e))?;
        }
        let trial = serde_json::json!({
            "argv": running.argv,
            "cwd": running.prepared.host.cwd,
            "program": running.prepared.program,
            "program_sha256": running.prepared.sha256,
            "pid": running.process.pid(),
            "cgroup": running.tree.cgroup,
            "tree": if running.tree.cgroup.is_some() { "cgroup v2" } else { "process group" },
            "cgroup_note": running.process.cgroup_note(),
            "processes_at_end": usage.processes,
            "window_s": usage.window_s,
            "cpu_source": usage.cpu_source,
            "exit": exit.to_string(),
            "died_during_soak": died.is_some(),
        });
        let path = dir.join("host-trial.json");
        let text = serde_json::to_string_pretty(&trial).unwrap_or_default();
        tokio::fs::write(&path, text).await.map_err(|e| self.io(&path, e))?;
        let artifacts = [STDOUT_LOG, STDERR_LOG, "proc-start.txt", "proc-end.txt", "host-trial.json"]
            .iter()
            .filter_map(|n| artifact(dir, n))
            .collect();

        // The logs are in `dir`: written there on this machine, pulled from an SSH host.
        let app_exit = died.map(|info| {
            let stderr = std::fs::read_to_string(dir.join(STDERR_LOG)).unwrap_or_default();
            format!("{info}; stderr: {}", tail(&stderr, 3))
        });
        Ok(Collected {
            measurements,
            // /proc and cgroup readings are totals over the window, not timelines.
            series: Vec::new(),
            artifacts,
            evidence: SoakEvidence {
                charging_s: 0.0,
                app_died: died.is_some(),
                requests_seen: None,
                measured_duration: Some(Duration::from_secs_f64(usage.window_s)),
                lost_contact: false,
                app_exit,
                ..SoakEvidence::default()
            },
            soak_state: None,
        })
    }

    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError> {
        let running = self.inner.lock().await.running.remove(&app.id);
        if let Some(r) = running {
            self.stop_running(&r).await?;
        }
        Ok(())
    }
}
