//! `AndroidDevice`: a phone driven through the real `adb` (docs/platforms/android.md).
//!
//! Everything goes through [`Adb`] on the device's host transport. The phone is read in
//! one batched shell call per state snapshot; the trial's cost comes from what the
//! phone keeps itself (batterystats since the reset at launch, the fuel gauge's charge
//! counter, the app's /proc accounting), read once after re-tether: nothing polls it
//! during the soak. With `[device.android] perfetto = true` the phone also records a
//! Perfetto `android.power` trace of its own over the trial (`perfetto.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::adb::{Adb, Connection, offline_fix, quote_argv, unauthorized_fix};
use super::listing::read_props;
use super::perfetto::{ConfigDelivery, TraceSession, session_name, trace_config};
use crate::clock::Clock;
use crate::collect::android::perfetto::PowerTrace;
use crate::collect::{
    android::battery as android_battery, android::batterystats_checkin, android::meminfo, android::settings,
    android::thermal, android::wifi_status, linux::power_supply, linux::proc_stat, metrics_map,
};
use crate::config::{AndroidArtifact, Build, DeviceSpec, Platform, VariantConfig};
use crate::device::{
    AppHandle, ArtifactFile, BatteryHealth, Collected, DesiredState, Device, DeviceError, Identity, LaunchSpec,
    PrepareOutcome, Prepared, Provenance, Reading, SoakEvidence, StateSnapshot,
};
use crate::measure::{Measurement, Series, UntetherMode};
use crate::transport::Transport;

/// One adb call's limit inside a phase (the runner's phase limits bound the phase).
const CALL: Duration = Duration::from_secs(60);
/// The battery's properties as the kernel gives them (health, cycles).
const POWER_SUPPLY_UEVENT: &str = "/sys/class/power_supply/battery/uevent";
/// Installing a large APK over USB 2.
const INSTALL: Duration = Duration::from_secs(600);
/// Clock ticks per second of Android's /proc (USER_HZ is 100 on every Android kernel).
const USER_HZ: u64 = 100;
/// The trial's Perfetto trace in its attempt folder.
const POWER_TRACE: &str = "power.pftrace";

pub struct AndroidDevice {
    spec: DeviceSpec,
    adb: Adb,
    transport: Arc<dyn Transport>,
    clock: Clock,
    inner: tokio::sync::Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// `adb features`, read once.
    features: Option<Vec<String>>,
    running: BTreeMap<String, Running>,
    /// When the lab last cut and gave back USB power (wall clock, epoch ms): the soak
    /// whose charging the battery history is asked about.
    untethered_at: Option<i64>,
    retethered_at: Option<i64>,
    /// The same re-tether on the device clock: where the soak ended.
    soak_end: Option<Duration>,
    /// The software unplug suspended charging: re-tether gives it back.
    charging_suspended: bool,
    /// `ro.build.version.sdk`, read once (which Perfetto config form the phone takes).
    sdk: Option<u32>,
}

/// The health HAL's switch for the charging input (Pixel; settable by a root shell, as on
/// userdebug builds), which Macrobenchmark's power metrics use to stop charging over USB.
const SUSPEND_PROP: &str = "power.battery_input.suspended";

/// History records lag a state change by a little: the window's ends are trimmed by this.
const EDGE_MS: i64 = 5_000;

fn epoch_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

struct Running {
    package: String,
    pid: Option<u32>,
    cpu_start: Option<proc_stat::ProcStat>,
    battery_start: Option<android_battery::BatteryService>,
    launched_at: Duration,
    trace: Option<Trace>,
}

/// A trial's Perfetto session and what became of it.
#[derive(Clone)]
struct Trace {
    session: TraceSession,
    /// The trace once read back: a collect done again (after a phone that dropped off)
    /// decodes these instead of asking for a file that is gone.
    bytes: Option<Vec<u8>>,
    /// Its files are deleted on the phone.
    deleted: bool,
}

/// What a trial's trace gave.
struct Traced {
    measurements: Vec<Measurement>,
    battery: Option<Series>,
    artifact: ArtifactFile,
}

impl AndroidDevice {
    pub fn new(spec: DeviceSpec, transport: Arc<dyn Transport>) -> Result<AndroidDevice, DeviceError> {
        let a = spec.android().ok_or_else(|| DeviceError::Failed {
            device: spec.name.clone(),
            what: "opening".into(),
            detail: "not an Android device".into(),
        })?;
        let adb = Adb::new(transport.clone(), &spec.name, &a.serial, a.adb_server.as_ref());
        Ok(AndroidDevice {
            spec,
            adb,
            transport,
            clock: Clock::tokio(),
            inner: tokio::sync::Mutex::new(Inner::default()),
        })
    }

    fn failed(&self, what: &str, detail: impl Into<String>) -> DeviceError {
        DeviceError::Failed { device: self.spec.name.clone(), what: what.into(), detail: detail.into() }
    }

    fn artifact<'a>(&self, build: &'a Build) -> Result<&'a AndroidArtifact, DeviceError> {
        build.android.as_ref().ok_or_else(|| DeviceError::NoArtifact {
            build: build.name.clone(),
            device: self.spec.name.clone(),
            platform: Platform::Android.to_string(),
        })
    }

    /// Fails with the fix when the phone is there but not usable (unauthorized, offline).
    pub async fn check_connection(&self) -> Result<(), DeviceError> {
        match self.adb.connection(CALL).await? {
            Connection::Device => Ok(()),
            Connection::Unauthorized => Err(self.failed("connecting", unauthorized_fix(self.adb.serial()))),
            Connection::Offline => Err(self.failed("connecting", offline_fix(self.adb.serial()))),
            Connection::Missing(why) => Err(DeviceError::Disconnected {
                device: self.spec.name.clone(),
                detail: format!("adb does not see phone {}: {why}", self.adb.serial()),
            }),
        }
    }

    async fn features(&self) -> Result<Vec<String>, DeviceError> {
        let mut inner = self.inner.lock().await;
        if let Some(f) = &inner.features {
            return Ok(f.clone());
        }
        let f = self.adb.features(CALL).await?;
        inner.features = Some(f.clone());
        Ok(f)
    }

    /// Runs several commands in one shell call; their outputs in order.
    async fn batch(&self, commands: &[String]) -> Result<Vec<String>, DeviceError> {
        self.adb.batch(commands, CALL).await
    }

    async fn shell_ok(&self, what: &str, argv: &[&str], limit: Duration) -> Result<String, DeviceError> {
        let out = self.adb.shell(argv, limit).await?;
        if !out.ok() {
            return Err(self.failed(
                what,
                format!("`{}` exited {}: {}", quote_argv(argv), out.status, first_line(&out.stderr, &out.stdout)),
            ));
        }
        Ok(out.stdout)
    }

    /// A build file as the host's adb sees it: staged there for an SSH host.
    async fn on_host(&self, local: &Path) -> Result<PathBuf, DeviceError> {
        let staged = self
            .transport
            .stage(local)
            .await
            .map_err(|e| DeviceError::from_transport(&self.spec.name, "staging the APK on the host", e))?;
        Ok(staged.path)
    }

    /// The sha256 of every APK installed for `package` (none when it is not installed).
    async fn installed_hashes(&self, package: &str) -> Result<Vec<String>, DeviceError> {
        let out = self.adb.shell(&["pm", "path", package], CALL).await?;
        let paths: Vec<&str> = out.stdout.lines().filter_map(|l| l.trim().strip_prefix("package:")).collect();
        let mut hashes = Vec::new();
        for p in paths {
            let sum = self.shell_ok("hashing the installed APK", &["sha256sum", p], CALL).await?;
            if let Some(h) = sum.split_whitespace().next() {
                hashes.push(h.to_ascii_lowercase());
            }
        }
        hashes.sort();
        Ok(hashes)
    }

    async fn install(&self, apk: &AndroidArtifact) -> Result<(), DeviceError> {
        let mut files = Vec::new();
        for f in &apk.apks {
            files.push(self.on_host(&f.path).await?.display().to_string());
        }
        let verb = if files.len() > 1 { "install-multiple" } else { "install" };
        let mut args = vec![verb, "-r", "-g"];
        args.extend(files.iter().map(String::as_str));
        let out = self.adb.run(&args, INSTALL).await?;
        let text = format!("{}{}", out.stdout_text(), out.stderr_text());
        if !out.success() || !text.contains("Success") {
            return Err(self.failed("installing", format!("adb {verb}: {}", text.trim().lines().last().unwrap_or(""))));
        }
        Ok(())
    }

    async fn pid_of(&self, package: &str) -> Result<Option<u32>, DeviceError> {
        let out = self.adb.shell(&["pidof", package], CALL).await?;
        Ok(out.stdout.split_whitespace().next().and_then(|p| p.parse().ok()))
    }

    async fn proc_stat(&self, pid: u32) -> Result<Option<proc_stat::ProcStat>, DeviceError> {
        let out = self.adb.shell(&["cat", &format!("/proc/{pid}/stat")], CALL).await?;
        Ok(if out.ok() { proc_stat::parse(&out.stdout).ok() } else { None })
    }

    async fn battery(&self) -> Result<android_battery::BatteryService, DeviceError> {
        let text = self.shell_ok("reading the battery", &["dumpsys", "battery"], CALL).await?;
        android_battery::parse(&text).map_err(|e| self.failed("reading dumpsys battery", e.to_string()))
    }

    fn write(&self, dir: &Path, name: &str, bytes: &[u8]) -> Result<ArtifactFile, DeviceError> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path,
            source,
        })?;
        Ok(ArtifactFile::of(name, bytes))
    }

    fn perfetto(&self) -> bool {
        self.spec.android().is_some_and(|a| a.perfetto)
    }

    /// The phone's SDK level, read once.
    async fn sdk(&self) -> Result<u32, DeviceError> {
        if let Some(sdk) = self.inner.lock().await.sdk {
            return Ok(sdk);
        }
        let text = self.shell_ok("reading the SDK level", &["getprop", "ro.build.version.sdk"], CALL).await?;
        let sdk = text.trim().parse().map_err(|_| {
            self.failed("reading the SDK level", format!("ro.build.version.sdk is {:?}, not a number", text.trim()))
        })?;
        self.inner.lock().await.sdk = Some(sdk);
        Ok(sdk)
    }

    /// Starts the attempt's Perfetto session when the device records one; its config is
    /// kept in the attempt folder.
    async fn start_trace(&self, spec: &LaunchSpec) -> Result<Option<Trace>, DeviceError> {
        if !self.perfetto() {
            return Ok(None);
        }
        let sdk = self.sdk().await?;
        let config = trace_config(spec.duration);
        self.write(&spec.dir, "perfetto-config.pbtxt", config.as_bytes())?;
        let name = session_name(&spec.trial_key, spec.seed);
        let session = TraceSession::start(&self.adb, &self.clock, &name, sdk, &config).await?;
        Ok(Some(Trace { session, bytes: None, deleted: false }))
    }

    /// Ends the trial's session, reads the trace into `dir` as `power.pftrace`, deletes it
    /// on the phone, then decodes it: rail energies and the battery level over the trial
    /// (seconds since launch). A trace that does not decode fails the collect with the
    /// file and the byte where it breaks; the file stays in the attempt folder, so the
    /// attempt is recorded invalid with that reason and retried.
    async fn collect_trace(
        &self,
        app_id: &str,
        dir: &Path,
        launched_at: Duration,
    ) -> Result<Option<Traced>, DeviceError> {
        let trace = self.inner.lock().await.running.get(app_id).and_then(|r| r.trace.clone());
        let Some(trace) = trace else { return Ok(None) };
        let session = &trace.session;
        let bytes = match trace.bytes {
            Some(b) => b,
            None => {
                session.end(&self.adb, &self.clock).await?;
                let b = session.pull(&self.adb).await?;
                self.update_trace(app_id, |t| t.bytes = Some(b.clone())).await;
                b
            }
        };
        if !trace.deleted {
            session.delete(&self.adb).await?;
            self.update_trace(app_id, |t| t.deleted = true).await;
        }
        let artifact = self.write(dir, POWER_TRACE, &bytes)?;
        // Named in the attempt's folder, where it stays: `dir` is only where it is written now.
        let parsed = PowerTrace::parse(&bytes).map_err(|e| {
            self.failed("decoding the Perfetto trace", format!("{POWER_TRACE} (kept in the attempt's folder): {e}"))
        })?;
        let mut battery = parsed.battery_pct_series();
        // The series counts from the trace's first sample, taken when the session started.
        let offset = session.started_at.saturating_sub(launched_at).as_secs_f64();
        for (t, _) in &mut battery.points {
            *t += offset;
        }
        Ok(Some(Traced {
            measurements: metrics_map::perfetto(&parsed),
            battery: (!battery.points.is_empty()).then_some(battery),
            artifact,
        }))
    }

    async fn update_trace(&self, app_id: &str, f: impl FnOnce(&mut Trace)) {
        if let Some(t) = self.inner.lock().await.running.get_mut(app_id).and_then(|r| r.trace.as_mut()) {
            f(t);
        }
    }
}

fn first_line<'a>(a: &'a str, b: &'a str) -> &'a str {
    a.lines().chain(b.lines()).map(str::trim).find(|l| !l.is_empty()).unwrap_or("(no output)")
}

/// A `settings get` answer as a number (`null` and text are unknown).
fn setting(text: &str) -> Option<f64> {
    settings::parse(text).ok().and_then(|v| v.as_f64())
}

fn flag(text: &str) -> Reading<bool> {
    setting(text).map_or(Reading::Unknown, |v| Reading::read(v != 0.0))
}

/// `screen_brightness` is 0–255 on most devices; some report a float 0–1
/// (`screen_brightness_float`): both as percent.
pub fn brightness_pct(raw: f64) -> f64 {
    if raw <= 1.0 && raw.fract() != 0.0 { raw * 100.0 } else { raw / 255.0 * 100.0 }
}

/// The package of `mResumedActivity` / `topResumedActivity` in `dumpsys activity activities`.
pub fn resumed_package(text: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains("mResumedActivity") || l.contains("topResumedActivity"))
        .and_then(|l| l.split_whitespace().find(|w| w.contains('/')))
        .and_then(|w| w.split('/').next())
        .map(|p| p.trim_start_matches('{').to_string())
}

/// The `Status:` line of `am start -W` and the error lines, if it did not start.
fn am_start_error(text: &str) -> Option<String> {
    if text.lines().any(|l| l.trim() == "Status: ok") {
        return None;
    }
    let errors: Vec<&str> =
        text.lines().map(str::trim).filter(|l| l.starts_with("Error") || l.starts_with("Status:")).collect();
    Some(if errors.is_empty() { text.trim().to_string() } else { errors.join("; ") })
}

#[async_trait]
impl Device for AndroidDevice {
    fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn talks_to_endpoint(&self) -> bool {
        true
    }

    async fn preflight(&self) -> Result<(), DeviceError> {
        let checked = async {
            self.check_connection().await?;
            // A phone too old for the trace it is asked for would fail every launch.
            if self.perfetto() {
                let sdk = self.sdk().await?;
                ConfigDelivery::for_sdk(sdk).map_err(|why| self.failed("checking Perfetto", why.to_string()))?;
            }
            Ok::<(), DeviceError>(())
        };
        match checked.await {
            Err(e) if e.is_disconnect() => Ok(()),
            r => r,
        }
    }

    async fn identify(&self) -> Result<Identity, DeviceError> {
        self.check_connection().await?;
        self.features().await?;
        // A lab that crashed mid-soak may have left the phone "unplugged" in software, or
        // its charging suspended: give it its real battery state and its charging back first.
        self.shell_ok("restoring the battery service", &["dumpsys", "battery", "reset"], CALL).await?;
        let suspended = self.adb.shell(&["getprop", SUSPEND_PROP], CALL).await?;
        if suspended.stdout.trim() == "true" {
            self.shell_ok("resuming charging", &["setprop", SUSPEND_PROP, "false"], CALL).await?;
        }
        let p = read_props(&self.adb, CALL).await?;
        Ok(Identity {
            name: self.spec.name.clone(),
            model: p.model,
            os: format!("Android {} (SDK {}; {})", p.release, p.sdk, p.fingerprint),
            serial: if p.serialno.is_empty() { self.adb.serial().to_string() } else { p.serialno },
        })
    }

    /// Installs unless the phone already has exactly these APKs (by sha256 of what is on
    /// the phone), then pushes the config's files into the app's external files folder.
    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError> {
        let apk = self.artifact(build)?;
        let mut want: Vec<String> = apk.apks.iter().map(|f| f.sha256.to_ascii_lowercase()).collect();
        want.sort();
        let same = self.installed_hashes(&apk.package).await? == want;
        if !same {
            self.install(apk).await?;
            if self.installed_hashes(&apk.package).await? != want {
                return Err(self.failed(
                    "installing",
                    format!("{} is not what was installed (hash differs after install)", apk.package),
                ));
            }
        }
        for f in &config.files {
            let local = self.on_host(&f.src).await?;
            let dest = format!("/sdcard/Android/data/{}/files/{}", apk.package, f.dest);
            let out = self.adb.run(&["push", &local.display().to_string(), &dest], INSTALL).await?;
            if !out.success() {
                return Err(self.failed("pushing a config file", out.stderr_text().trim().to_string()));
            }
        }
        let sha256 = apk.sha256.clone();
        let outcome =
            if same { PrepareOutcome::AlreadyInstalled { sha256 } } else { PrepareOutcome::Installed { sha256 } };
        let mut prepared = Prepared::new(build, config, outcome);
        prepared.location = Some(apk.package.clone());
        Ok(prepared)
    }

    /// The battery's power-supply uevent (`dumpsys battery` prints neither cycles nor
    /// capacities, up to Android 15): cycle count and full over design capacity.
    async fn battery_health(&self) -> Result<BatteryHealth, DeviceError> {
        let text = self.shell_ok("reading battery health", &["cat", POWER_SUPPLY_UEVENT], CALL).await?;
        let ps = power_supply::parse(&text)
            .map_err(|e| self.failed("reading battery health", format!("{POWER_SUPPLY_UEVENT}: {e}")))?;
        Ok(BatteryHealth::from_power_supply(&ps, POWER_SUPPLY_UEVENT))
    }

    async fn state(&self) -> Result<StateSnapshot, DeviceError> {
        let features = self.features().await?;
        let wifi_cmd = if features.iter().any(|f| f == "cmd") {
            quote_argv(&["cmd", "wifi", "status"])
        } else {
            quote_argv(&["settings", "get", "global", "wifi_on"])
        };
        let cmds = vec![
            quote_argv(&["settings", "get", "system", "screen_brightness"]),
            quote_argv(&["settings", "get", "global", "bluetooth_on"]),
            wifi_cmd,
            quote_argv(&["dumpsys", "battery"]),
            quote_argv(&["dumpsys", "thermalservice"]),
            quote_argv(&["settings", "get", "global", "low_power"]),
            quote_argv(&["settings", "get", "global", "airplane_mode_on"]),
            quote_argv(&["settings", "get", "global", "stay_on_while_plugged_in"]),
            quote_argv(&["dumpsys", "activity", "activities"]),
        ];
        let v = self.batch(&cmds).await?;
        let mut s = StateSnapshot {
            brightness_pct: setting(&v[0]).map_or(Reading::Unknown, |b| Reading::read(brightness_pct(b))),
            bluetooth_on: flag(&v[1]),
            low_power: flag(&v[5]),
            airplane_mode: flag(&v[6]),
            stay_awake: flag(&v[7]),
            ..StateSnapshot::default()
        };
        s.wifi_on = match wifi_status::parse(&v[2]) {
            Ok(w) => w.enabled.map_or(Reading::Unknown, Reading::read),
            Err(_) => flag(&v[2]),
        };
        if let Ok(b) = android_battery::parse(&v[3]) {
            s.battery_pct = Reading::read(b.level_pct);
            let powered = !b.powered_by.is_empty();
            s.external_power = Reading::read(powered);
            // Charging as batterystats counts it: a charging status from a plugged source.
            // (`dumpsys battery unplug` clears the source but leaves the status.)
            s.charging = match b.status {
                Some(android_battery::ChargeStatus::Charging) => Reading::read(powered),
                Some(_) => Reading::read(false),
                None => Reading::read(powered),
            };
            if let Some(t) = b.temperature_c {
                s.battery_temp_c = Reading::read(t);
            }
        }
        if let Ok(t) = thermal::parse(&v[4]) {
            s.thermal_status = Reading::read(t.status.max(0) as u32);
        }
        if let Some(p) = resumed_package(&v[8]) {
            s.foreground_app = Reading::Known { value: p, from: Provenance::Read };
        }
        Ok(s)
    }

    /// Manual brightness at its value, Bluetooth and Wi-Fi, and the screen kept on while
    /// plugged in; each read back by the next `state()`.
    async fn set_state(&self, want: &DesiredState) -> Result<(), DeviceError> {
        if let Some(pct) = want.brightness_pct {
            let raw = ((pct.clamp(0.0, 100.0) / 100.0) * 255.0).round().to_string();
            self.shell_ok("setting brightness", &["settings", "put", "system", "screen_brightness_mode", "0"], CALL)
                .await?;
            self.shell_ok("setting brightness", &["settings", "put", "system", "screen_brightness", &raw], CALL)
                .await?;
        }
        if let Some(on) = want.bluetooth_on {
            let verb = if on { "enable" } else { "disable" };
            self.shell_ok("switching Bluetooth", &["svc", "bluetooth", verb], CALL).await?;
        }
        if let Some(on) = want.wifi_on {
            let verb = if on { "enable" } else { "disable" };
            self.shell_ok("switching Wi-Fi", &["svc", "wifi", verb], CALL).await?;
        }
        // Stays awake on USB (AC|USB|wireless = 7), so the screen does not time out tethered.
        self.shell_ok("keeping the screen on", &["settings", "put", "global", "stay_on_while_plugged_in", "7"], CALL)
            .await?;
        Ok(())
    }

    /// Clears batterystats, so the checkin after the soak covers this trial only.
    async fn reset_counters(&self) -> Result<(), DeviceError> {
        self.shell_ok("resetting batterystats", &["dumpsys", "batterystats", "--reset"], CALL).await?;
        Ok(())
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        let apk = self.artifact(&spec.prepared.build)?;
        let activity = apk.activity.clone().unwrap_or_else(|| ".MainActivity".into());
        let component = format!("{}/{activity}", apk.package);
        let mut argv: Vec<String> =
            ["am", "start", "-W", "-S", "-n", &component].iter().map(|s| s.to_string()).collect();
        let mut extra = |flag: &str, k: &str, v: String| argv.extend([flag.to_string(), k.to_string(), v]);
        extra("--es", "lab_trial", spec.trial_key.clone());
        extra("--es", "lab_seed", spec.seed.to_string());
        extra("--el", "lab_duration_ms", spec.duration.as_millis().to_string());
        if let Some(iv) = spec.request_interval {
            extra("--el", "lab_request_interval_ms", iv.as_millis().to_string());
        }
        if let Some(url) = &spec.endpoint_url {
            extra("--es", "lab_endpoint_url", url.clone());
        }
        for (k, v) in &spec.prepared.config.android.extras {
            argv.extend(v.am_args(k));
        }
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        let battery_start = self.battery().await.ok();
        let out = self.adb.shell(&refs, CALL).await?;
        if let Some(why) = am_start_error(&format!("{}{}", out.stdout, out.stderr)) {
            return Err(self.failed("launching the app", format!("am start {component}: {why}")));
        }
        std::fs::create_dir_all(&spec.dir).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path: spec.dir.clone(),
            source,
        })?;
        self.write(&spec.dir, "am-start.txt", out.stdout.as_bytes())?;
        let pid = self.pid_of(&apk.package).await?;
        let cpu_start = match pid {
            Some(p) => self.proc_stat(p).await?,
            None => None,
        };
        let launched_at = self.clock.now();
        // After the app started and before untether, while the phone is surely reachable.
        let trace = match self.start_trace(spec).await {
            Ok(t) => t,
            Err(e) => {
                // No handle goes back, so nobody else would stop the app.
                let _ = self.adb.shell(&["am", "force-stop", &apk.package], CALL).await;
                return Err(e);
            }
        };
        let id = format!("{}:{}", apk.package, pid.map_or("?".to_string(), |p| p.to_string()));
        let mut inner = self.inner.lock().await;
        (inner.untethered_at, inner.retethered_at, inner.soak_end) = (None, None, None);
        inner.running.insert(
            id.clone(),
            Running { package: apk.package.clone(), pid, cpu_start, battery_start, launched_at, trace },
        );
        Ok(AppHandle { id, app_id: apk.package.clone(), launched_at })
    }

    /// `dumpsys battery unplug`: the phone only *says* it is unplugged (it still charges),
    /// so such trials are labelled soft-untethered.
    async fn usb_power_changed(&self, on: bool) -> Result<(), DeviceError> {
        let mut inner = self.inner.lock().await;
        if on {
            inner.retethered_at = Some(epoch_ms());
            inner.soak_end = Some(self.clock.now());
        } else {
            (inner.untethered_at, inner.retethered_at) = (Some(epoch_ms()), None);
        }
        Ok(())
    }

    /// Suspends charging where the phone lets the shell (the battery then really
    /// discharges), and unplugs in software in any case: batterystats counts only while
    /// BatteryService says the phone is on battery.
    async fn software_untether(&self) -> Result<UntetherMode, DeviceError> {
        let set = self.adb.shell(&["setprop", SUSPEND_PROP, "true"], CALL).await?;
        let suspended = set.ok() && self.adb.shell(&["getprop", SUSPEND_PROP], CALL).await?.stdout.trim() == "true";
        self.inner.lock().await.charging_suspended = suspended;
        self.shell_ok("unplugging in software", &["dumpsys", "battery", "unplug"], CALL).await?;
        self.usb_power_changed(false).await?;
        Ok(if suspended { UntetherMode::ChargingSuspended } else { UntetherMode::SoftUntethered })
    }

    async fn software_retether(&self) -> Result<(), DeviceError> {
        // Cleared only once done: a retried re-tether tries again.
        if self.inner.lock().await.charging_suspended {
            self.shell_ok("resuming charging", &["setprop", SUSPEND_PROP, "false"], CALL).await?;
            self.inner.lock().await.charging_suspended = false;
        }
        self.shell_ok("plugging back in software", &["dumpsys", "battery", "reset"], CALL).await?;
        self.usb_power_changed(true).await
    }

    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError> {
        self.adb.wait_for_device(timeout).await?;
        self.check_connection().await
    }

    async fn collect(&self, app: &AppHandle, dir: &Path) -> Result<Collected, DeviceError> {
        let (package, pid, cpu_start, battery_start, launched_at) = {
            let inner = self.inner.lock().await;
            let r = inner
                .running
                .get(&app.id)
                .ok_or_else(|| self.failed("collect", format!("app {} is not running here", app.id)))?;
            (r.package.clone(), r.pid, r.cpu_start.clone(), r.battery_start.clone(), r.launched_at)
        };
        std::fs::create_dir_all(dir).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path: dir.into(),
            source,
        })?;
        // CPU is over the time between its two readings; the soak (for validity) ended at
        // re-tether, not when a phone that dropped off let itself be read again.
        let elapsed = self.clock.now().saturating_sub(launched_at);
        let soak_end = self.inner.lock().await.soak_end;
        let window = soak_end.map_or(elapsed, |end| end.saturating_sub(launched_at));
        let now_pid = self.pid_of(&package).await?;
        let died = pid.is_some() && now_pid != pid || pid.is_none() && now_pid.is_none();
        let mut measurements = Vec::new();
        let mut artifacts = Vec::new();

        if let (Some(p), Some(start)) = (pid.filter(|_| !died), &cpu_start)
            && let Some(end) = self.proc_stat(p).await?
        {
            let cpu_ms = end.cpu_ms(USER_HZ) - start.cpu_ms(USER_HZ);
            if elapsed.as_secs_f64() > 0.0 {
                measurements.push(Measurement::new(
                    "cpu_pct",
                    cpu_ms / 10.0 / elapsed.as_secs_f64(),
                    "%",
                    metrics_map::SRC_PROC_STAT,
                ));
            }
        }
        let mem = self.shell_ok("reading memory", &["dumpsys", "meminfo", &package], CALL).await?;
        artifacts.push(self.write(dir, "meminfo.txt", mem.as_bytes())?);
        if let Ok(m) = meminfo::parse(&mem)
            && m.total_pss_kb() > 0
        {
            measurements.push(Measurement::new(
                "memory_mb",
                m.total_pss_kb() as f64 / 1024.0,
                "MB",
                metrics_map::SRC_MEMINFO,
            ));
        }
        let battery_text = self.shell_ok("reading the battery", &["dumpsys", "battery"], CALL).await?;
        artifacts.push(self.write(dir, "battery.txt", battery_text.as_bytes())?);
        if let (Some(before), Ok(after)) = (&battery_start, android_battery::parse(&battery_text)) {
            measurements.extend(metrics_map::android_battery_delta(before, &after));
        }
        let checkin = self.shell_ok("reading batterystats", &["dumpsys", "batterystats", "--checkin"], CALL).await?;
        artifacts.push(self.write(dir, "batterystats-checkin.txt", checkin.as_bytes())?);
        let parsed = batterystats_checkin::parse(&checkin).map_err(|e| {
            self.failed("reading batterystats", format!("{}: {e}", dir.join("batterystats-checkin.txt").display()))
        })?;
        let usage = parsed.app(&package);
        for m in metrics_map::checkin(&parsed, usage.as_ref()) {
            // The charge counter's difference is the measured charge; the checkin's is kept only when it has none.
            if !measurements.iter().any(|x: &Measurement| x.metric == m.metric) {
                measurements.push(m);
            }
        }
        // The phone's own record of the soak: charging in it means the power was not cut.
        let (from, to) = {
            let inner = self.inner.lock().await;
            (inner.untethered_at, inner.retethered_at)
        };
        let charging_ms = match (from, to) {
            (Some(a), Some(b)) if parsed.history.clock_known => {
                parsed.history.charging_ms_between(a + EDGE_MS, b - EDGE_MS)
            }
            // Never untethered in this trial: charging says nothing about it.
            (None, _) => 0,
            _ => parsed.history.charging_ms(),
        };
        let charging_s = charging_ms as f64 / 1000.0;
        let mut series = Vec::new();
        if let Some(t) = self.collect_trace(&app.id, dir, launched_at).await? {
            // The rails are the trace's own; a battery figure the phone's counters already
            // gave (dumpsys battery, then batterystats) keeps that value.
            for m in t.measurements {
                if !measurements.iter().any(|x| x.metric == m.metric) {
                    measurements.push(m);
                }
            }
            series.extend(t.battery);
            artifacts.push(t.artifact);
        }
        Ok(Collected {
            measurements,
            series,
            artifacts,
            evidence: SoakEvidence {
                charging_s,
                app_died: died,
                measured_duration: Some(window),
                ..SoakEvidence::default()
            },
            soak_state: None,
        })
    }

    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError> {
        let Some(running) = self.inner.lock().await.running.remove(&app.id) else { return Ok(()) };
        let stopped = self.shell_ok("stopping the app", &["am", "force-stop", &running.package], CALL).await;
        // A trial that ended before its trace was collected: nothing may go on tracing,
        // nor stay, on the phone.
        if let Some(t) = running.trace.filter(|t| !t.deleted) {
            if t.bytes.is_none() {
                t.session.end(&self.adb, &self.clock).await?;
            }
            t.session.delete(&self.adb).await?;
        }
        stopped.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brightness_reads_as_percent_whichever_scale_the_device_uses() {
        assert_eq!(brightness_pct(255.0), 100.0);
        assert!((brightness_pct(128.0) - 50.2).abs() < 0.1);
        assert_eq!(brightness_pct(0.5), 50.0);
        assert_eq!(brightness_pct(1.0), 255.0f64.recip() * 100.0);
    }

    #[test]
    fn the_resumed_activity_names_the_foreground_package() {
        let text = "  mResumedActivity: ActivityRecord{4f3c u0 com.example.envoy/.MainActivity t12}\n";
        assert_eq!(resumed_package(text).as_deref(), Some("com.example.envoy"));
        let t14 = "    topResumedActivity=ActivityRecord{1 u0 com.android.launcher3/.Launcher t2}";
        assert_eq!(resumed_package(t14).as_deref(), Some("com.android.launcher3"));
        assert_eq!(resumed_package("nothing"), None);
    }

    #[test]
    fn am_start_is_checked_for_status_ok() {
        let ok = "Starting: Intent { cmp=com.x/.Main }\nStatus: ok\nLaunchState: COLD\nComplete\n";
        assert_eq!(am_start_error(ok), None);
        let bad = "Starting: Intent { cmp=com.x/.Nope }\nError type 3\nError: Activity class {com.x/com.x.Nope} does not exist.\n";
        assert_eq!(
            am_start_error(bad).unwrap(),
            "Error type 3; Error: Activity class {com.x/com.x.Nope} does not exist."
        );
    }
}
