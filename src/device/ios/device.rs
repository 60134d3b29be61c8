//! The `ios` backend: an iPhone on a lab host, through that host's usbmuxd.
//!
//! Preflight checks everything a trial needs from the phone (connected, paired, trusted,
//! unlocked, Developer Mode, the developer image, the iOS 17 tunnel) and stops `lab run`
//! with the fix before anything is recorded. Trials read the battery over USB before and
//! after; the untethered hour itself is read from the phone's own powerlog, out of a
//! sysdiagnose taken after re-tether.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use plist::Dictionary;

use super::apps::{Launch, Launcher};
use super::capture::SYSDIAGNOSE;
use super::error::{IosError, Where};
use super::installs::{Installed, Installs};
use super::mux::{Mux, SYSTEM_SOCKET};
use super::phone::{Phone, major};
use super::samples::{Sampler, Via};
use crate::clock::Clock;
use crate::collect::{ios::battery as ios_battery, ios::powerlog, ios::sysdiagnose, metrics_map};
use crate::config::{Build, DeviceSpec, IosArtifact, StepWhen, VariantConfig};
use crate::device::{
    AppHandle, ArtifactFile, BatteryHealth, Collected, Device, DeviceError, DeviceStep, Identity, LaunchSpec,
    PrepareOutcome, Prepared, Reading, StateSnapshot,
};
use crate::measure::BATTERY_PCT;
use crate::measure::Series;
use crate::transport::Transport;

/// The sysdiagnose step an iPhone before iOS 17 needs from the operator.
pub const SYSDIAGNOSE_STEP: &str = "sysdiagnose";
const POWERLOG_FILE: &str = "powerlog.PLSQL";
const SYSDIAGNOSE_FILE: &str = "sysdiagnose.tar.gz";

pub struct IosDevice {
    spec: DeviceSpec,
    transport: Arc<dyn Transport>,
    remote: bool,
    installs: Installs,
    phone: tokio::sync::OnceCell<Phone>,
    clock: Clock,
    inner: tokio::sync::Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// `ProductVersion`, once read.
    version: Option<String>,
    running: HashMap<String, Running>,
    /// Wall-clock seconds of the last power cut and return: the soak, in the powerlog's time.
    untethered_at: Option<f64>,
    retethered_at: Option<f64>,
    /// When the soak ended, just before re-tethering began: the end of the powerlog's window.
    soak_ended_at: Option<f64>,
}

struct Running {
    launcher: Launcher,
    pid: u64,
    before: Option<(ios_battery::IosBattery, Vec<u8>)>,
    /// Tethered samples of this run (`[device.ios] samples`), until collect or the unplug.
    sampler: Option<Sampler>,
    /// The workload talks to the lab's endpoint: the packet tap counts its requests.
    to_endpoint: bool,
}

/// The port of the trial's endpoint URL (`http://host:port/t/…`).
fn endpoint_port(url: &str) -> Option<u16> {
    let uri: hyper::Uri = url.parse().ok()?;
    uri.port_u16().or_else(|| (uri.scheme_str() == Some("http")).then_some(80))
}

fn wall_s() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64 / 1000.0
}

impl IosDevice {
    /// `remote`: the phone's host is reached over SSH (usbmuxd through a forward).
    pub fn new(
        spec: DeviceSpec,
        transport: Arc<dyn Transport>,
        remote: bool,
        artifacts: &Path,
    ) -> Result<IosDevice, DeviceError> {
        let ios = spec.ios().ok_or_else(|| DeviceError::Failed {
            device: spec.name.clone(),
            what: "opening".into(),
            detail: "not an iOS device".into(),
        })?;
        let installs = Installs::new(artifacts, &ios.udid);
        Ok(IosDevice {
            spec,
            transport,
            remote,
            installs,
            phone: tokio::sync::OnceCell::new(),
            clock: Clock::tokio(),
            inner: tokio::sync::Mutex::new(Inner::default()),
        })
    }

    fn where_(&self) -> Where {
        let ios = self.spec.ios().expect("checked in new");
        Where {
            device: self.spec.name.clone(),
            udid: ios.udid.clone(),
            host: self.spec.host.clone(),
            usbmuxd: ios.usbmuxd.as_ref().map_or(SYSTEM_SOCKET.to_string(), ToString::to_string),
        }
    }

    async fn phone(&self) -> Result<&Phone, DeviceError> {
        self.phone
            .get_or_try_init(|| async {
                let ios = self.spec.ios().expect("checked in new");
                let at = self.where_();
                let mux = Mux::open(&self.spec.host, self.remote, &self.transport, ios.usbmuxd.as_ref())
                    .await
                    .map_err(|e| IosError::NoUsbmuxd { at: at.clone(), detail: e.to_string() })?;
                Ok::<Phone, DeviceError>(Phone::new(at, mux, ios.pair_record.clone()))
            })
            .await
    }

    fn failed(&self, what: &str, detail: impl Into<String>) -> DeviceError {
        DeviceError::Failed { device: self.spec.name.clone(), what: what.into(), detail: detail.into() }
    }

    fn artifact<'a>(&self, build: &'a Build) -> Result<&'a IosArtifact, DeviceError> {
        build.ios.as_ref().ok_or_else(|| DeviceError::NoArtifact {
            build: build.name.clone(),
            device: self.spec.name.clone(),
            platform: "ios".into(),
        })
    }

    /// `ProductVersion`, read once.
    async fn version(&self) -> Result<String, DeviceError> {
        if let Some(v) = self.inner.lock().await.version.clone() {
            return Ok(v);
        }
        let id = self.phone().await?.identity().await?;
        let v = id.get("ProductVersion").cloned().unwrap_or_default();
        self.inner.lock().await.version = Some(v.clone());
        Ok(v)
    }

    /// IOPMPowerSource, parsed by the same reader `lab import` uses, with its plist bytes.
    async fn power_source(&self) -> Result<(ios_battery::IosBattery, Vec<u8>), DeviceError> {
        let entry = self.phone().await?.power_source().await?;
        let mut bytes = Vec::new();
        plist::Value::Dictionary(entry)
            .to_writer_xml(&mut bytes)
            .map_err(|e| self.failed("reading IOPMPowerSource", e.to_string()))?;
        let parsed = ios_battery::parse(&bytes).map_err(|e| self.failed("reading IOPMPowerSource", e.to_string()))?;
        Ok((parsed, bytes))
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

    /// The sysdiagnose of this soak, reduced to its powerlog in `dir` (the archive itself,
    /// hundreds of MB of unrelated logs, is not kept).
    async fn powerlog(&self, dir: &Path) -> Result<(Vec<u8>, ArtifactFile), DeviceError> {
        let phone = self.phone().await?;
        let archive = dir.join(SYSDIAGNOSE_FILE);
        if major(&self.version().await?) >= 17 {
            phone.capture_sysdiagnose(&archive).await?;
        } else {
            phone.wait_sysdiagnose(&archive, SYSDIAGNOSE).await?;
        }
        let file = std::fs::File::open(&archive).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path: archive.clone(),
            source,
        })?;
        let logs = sysdiagnose::powerlogs(std::io::BufReader::new(file))
            .map_err(|e| self.failed("reading the sysdiagnose", format!("{}: {e}", archive.display())))?;
        let _ = std::fs::remove_file(&archive);
        let newest = logs
            .into_iter()
            .max_by(|a, b| a.path.cmp(&b.path))
            .ok_or_else(|| self.failed("reading the sysdiagnose", "it holds no logs/powerlogs/*.PLSQL"))?;
        let artifact = self.write(dir, POWERLOG_FILE, &newest.bytes)?;
        Ok((newest.bytes, artifact))
    }
}

impl IosDevice {
    /// The samplers `[device.ios] samples` asks for, each on its own connection.
    async fn start_samples(&self, pid: u64, spec: &LaunchSpec) -> Result<Option<Sampler>, DeviceError> {
        let kinds = &self.spec.ios().expect("checked in new").samples;
        if kinds.is_empty() {
            return Ok(None);
        }
        let phone = self.phone().await?;
        let mut with = Vec::new();
        for k in kinds {
            with.push((*k, phone.provider().await?));
        }
        let port = spec.endpoint_url.as_deref().and_then(endpoint_port);
        let via = if major(&self.version().await?) >= 17 { Via::Tunnel } else { Via::Lockdown };
        Ok(Some(Sampler::start(with, via, u32::try_from(pid).unwrap_or(u32::MAX), port)))
    }
}

/// What the battery domain says, as state readings.
fn battery_state(domain: &Dictionary, into: &mut StateSnapshot) {
    let num = |k: &str| domain.get(k).and_then(|v| v.as_signed_integer().map(|i| i as f64).or_else(|| v.as_real()));
    let flag = |k: &str| domain.get(k).and_then(plist::Value::as_boolean);
    if let Some(pct) = num("BatteryCurrentCapacity") {
        into.battery_pct = Reading::read(pct);
    }
    if let Some(c) = flag("BatteryIsCharging") {
        into.charging = Reading::read(c);
    }
    if let Some(e) = flag("ExternalConnected") {
        into.external_power = Reading::read(e);
    }
}

#[async_trait]
impl Device for IosDevice {
    fn spec(&self) -> &DeviceSpec {
        &self.spec
    }

    fn clock(&self) -> Clock {
        self.clock.clone()
    }

    fn talks_to_endpoint(&self) -> bool {
        true
    }

    /// Everything a trial needs of the phone, each failure with its fix. Unlike a lost
    /// Android phone, an iPhone that is not there stops the run: its checks need it.
    async fn preflight(&self) -> Result<(), DeviceError> {
        let phone = self.phone().await?;
        let at = phone.at.clone();
        let version = self.version().await?;
        if major(&version) >= 16 && !phone.developer_mode().await? {
            return Err(IosError::DeveloperModeOff { at }.into());
        }
        if !phone.developer_image_mounted(&version).await? {
            return Err(IosError::ImageNotMounted { at, version }.into());
        }
        if major(&version) >= 17 {
            phone.check_tunnel(&version).await?;
        }
        Ok(())
    }

    async fn identify(&self) -> Result<Identity, DeviceError> {
        let id = self.phone().await?.identity().await?;
        let get = |k: &str| id.get(k).cloned().unwrap_or_default();
        self.inner.lock().await.version = Some(get("ProductVersion"));
        Ok(Identity {
            name: self.spec.name.clone(),
            model: get("ProductType"),
            os: format!("iOS {} ({})", get("ProductVersion"), get("BuildVersion")),
            serial: get("UniqueDeviceID"),
        })
    }

    /// Installs unless the phone has the bundle at the version recorded when the lab last
    /// installed this same .ipa (by its sha256).
    async fn prepare(&self, build: &Build, config: &VariantConfig) -> Result<Prepared, DeviceError> {
        let ipa = self.artifact(build)?;
        let phone = self.phone().await?;
        let on_phone = phone.installed_version(&ipa.bundle_id).await?;
        let recorded = self.installs.get(&ipa.bundle_id);
        let same =
            matches!((&on_phone, &recorded), (Some(v), Some(r)) if *v == r.bundle_version && r.sha256 == ipa.sha256);
        if same {
            return Ok(Prepared::new(build, config, PrepareOutcome::AlreadyInstalled { sha256: ipa.sha256.clone() }));
        }
        phone.install(&ipa.ipa).await?;
        let bundle_version = phone.installed_version(&ipa.bundle_id).await?.ok_or_else(|| {
            self.failed(
                "installing the app",
                format!("the install of {} finished but the phone lists no {}", ipa.ipa.display(), ipa.bundle_id),
            )
        })?;
        self.installs.record(&ipa.bundle_id, Installed { sha256: ipa.sha256.clone(), bundle_version }).map_err(
            |source| DeviceError::Io { device: self.spec.name.clone(), path: self.installs.path().into(), source },
        )?;
        Ok(Prepared::new(build, config, PrepareOutcome::Installed { sha256: ipa.sha256.clone() }))
    }

    /// Read over USB: the battery domain and IOPMPowerSource. Brightness, Low Power Mode,
    /// Bluetooth and Wi-Fi have no host-side API: the app reports them or an operator attests.
    async fn state(&self) -> Result<StateSnapshot, DeviceError> {
        let mut s = StateSnapshot::default();
        let domain = self.phone().await?.battery_domain().await?;
        battery_state(&domain, &mut s);
        let (ps, _) = self.power_source().await?;
        if let Some(t) = ps.temperature_c {
            s.battery_temp_c = Reading::read(t);
        }
        if s.battery_pct.is_unknown()
            && let Some(l) = ps.level_pct
        {
            s.battery_pct = Reading::read(l);
        }
        if s.charging.is_unknown()
            && let Some(c) = ps.is_charging
        {
            s.charging = Reading::read(c);
        }
        if s.external_power.is_unknown()
            && let Some(e) = ps.external_connected
        {
            s.external_power = Reading::read(e);
        }
        Ok(s)
    }

    async fn battery_health(&self) -> Result<BatteryHealth, DeviceError> {
        Ok(BatteryHealth::from_ios(&self.power_source().await?.0))
    }

    /// The powerlog records all the time: nothing to reset.
    async fn reset_counters(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    async fn launch(&self, spec: &LaunchSpec) -> Result<AppHandle, DeviceError> {
        let ipa = self.artifact(&spec.prepared.build)?;
        let mut env = vec![
            ("LAB_TRIAL".to_string(), spec.trial_key.clone()),
            ("LAB_SEED".to_string(), spec.seed.to_string()),
            ("LAB_DURATION_MS".to_string(), spec.duration.as_millis().to_string()),
        ];
        if let Some(iv) = spec.request_interval {
            env.push(("LAB_REQUEST_INTERVAL_MS".into(), iv.as_millis().to_string()));
        }
        if let Some(url) = &spec.endpoint_url {
            env.push(("LAB_ENDPOINT_URL".into(), url.clone()));
        }
        env.extend(spec.prepared.config.ios.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let launch = Launch { bundle_id: ipa.bundle_id.clone(), env, args: spec.prepared.config.ios.args.clone() };
        let before = self.power_source().await.ok();
        let how = Launcher::for_version(&self.version().await?);
        let pid = self.phone().await?.launch(how, &launch).await?;
        std::fs::create_dir_all(&spec.dir).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path: spec.dir.clone(),
            source,
        })?;
        let record = serde_json::json!({
            "bundle_id": launch.bundle_id, "pid": pid, "env": launch.env, "args": launch.args,
            "launcher": format!("{how:?}"),
        });
        self.write(&spec.dir, "launch.json", record.to_string().as_bytes())?;
        let id = format!("{}:{pid}", ipa.bundle_id);
        let sampler = self.start_samples(pid, spec).await?;
        let to_endpoint = spec.endpoint_url.is_some() && spec.request_interval.is_some();
        let mut inner = self.inner.lock().await;
        (inner.untethered_at, inner.retethered_at, inner.soak_ended_at) = (None, None, None);
        inner.running.insert(id.clone(), Running { launcher: how, pid, before, sampler, to_endpoint });
        Ok(AppHandle { id, app_id: ipa.bundle_id.clone(), launched_at: self.clock.now() })
    }

    async fn soak_ended(&self) {
        self.inner.lock().await.soak_ended_at = Some(wall_s());
    }

    async fn usb_power_changed(&self, on: bool) -> Result<(), DeviceError> {
        let mut inner = self.inner.lock().await;
        if on {
            inner.retethered_at = Some(wall_s());
        } else {
            (inner.untethered_at, inner.retethered_at, inner.soak_ended_at) = (Some(wall_s()), None, None);
            // Off USB nothing can be sampled: what was taken before the unplug is not the soak.
            for r in inner.running.values_mut() {
                r.sampler = None;
            }
        }
        Ok(())
    }

    /// Asks usbmuxd every 2 s (after re-tether only: nothing polls during a soak).
    async fn wait_connected(&self, timeout: Duration) -> Result<(), DeviceError> {
        let phone = self.phone().await?;
        let start = tokio::time::Instant::now();
        loop {
            match phone.provider().await {
                Ok(_) => return Ok(()),
                Err(e) if e.is_disconnect() && start.elapsed() < timeout => {}
                Err(e) => return Err(e.into()),
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    async fn collect(&self, app: &AppHandle, dir: &Path) -> Result<Collected, DeviceError> {
        let (before, untethered, retethered, sampler, to_endpoint, launcher, pid) = {
            let mut inner = self.inner.lock().await;
            // The window ends where the soak did; it counts only once the phone was re-tethered.
            let retethered = inner.retethered_at.map(|at| inner.soak_ended_at.unwrap_or(at));
            let untethered = inner.untethered_at;
            let r = inner
                .running
                .get_mut(&app.id)
                .ok_or_else(|| self.failed("collect", format!("app {} is not running here", app.id)))?;
            (r.before.clone(), untethered, retethered, r.sampler.take(), r.to_endpoint, r.launcher, r.pid)
        };
        std::fs::create_dir_all(dir).map_err(|source| DeviceError::Io {
            device: self.spec.name.clone(),
            path: dir.into(),
            source,
        })?;
        let mut c = Collected::default();
        // An app iOS ended during the soak (jetsam, a crash) did not do the trial's work.
        match self.phone().await?.is_running(launcher, pid).await {
            Ok(true) => {}
            Ok(false) => {
                c.evidence.app_died = true;
                c.evidence.app_exit = Some(format!("pid {pid} no longer ran on the phone at collection"));
            }
            Err(e) if e.is_disconnect() => return Err(e.into()),
            // Not knowing is not a death: said with the figures.
            Err(e) => c.evidence.notes.push(format!("whether the app still ran is not known: {e}")),
        }
        if let Some(s) = sampler {
            let g = s.finish().await;
            c.measurements.extend(g.measurements(to_endpoint));
            c.evidence.requests_on_wire = g.packets.filter(|_| to_endpoint).map(|p| p.requests);
            c.evidence.notes.extend(g.problems.into_iter().map(|p| format!("tethered samples cut short: {p}")));
        }
        let (after, after_bytes) = self.power_source().await?;
        // The untethered stretch is read from the phone's own record of it.
        if let (Some(from), Some(to)) = (untethered, retethered) {
            let (bytes, artifact) = self.powerlog(dir).await?;
            c.artifacts.push(artifact);
            let log = powerlog::parse(&bytes).map_err(|e| self.failed("reading the powerlog", e.to_string()))?;
            let soak = log.soak(from, to);
            c.evidence.charging_s = soak.charging_s;
            c.evidence.measured_duration = Some(Duration::from_secs_f64((to - from).max(0.0)));
            c.measurements.extend(metrics_map::powerlog(&soak));
            c.series.push(Series::new(BATTERY_PCT, "%", "iOS powerlog battery level", soak.series.clone()));
            // Brightness and Bluetooth during the soak, as the phone logged them.
            c.soak_state = StateSnapshot::from_soak_log(&soak);
        }
        // Then what USB reads say (before launch, after re-tether): only for metrics the
        // powerlog did not give, so each metric has one value per attempt.
        let mut usb = metrics_map::ios_battery(&after);
        if let Some((b, bytes)) = &before {
            c.artifacts.push(self.write(dir, "iopmpowersource-before.plist", bytes)?);
            usb.extend(metrics_map::ios_battery_delta(b, &after));
        }
        c.artifacts.push(self.write(dir, "iopmpowersource-after.plist", &after_bytes)?);
        for m in usb {
            if !c.measurements.iter().any(|have| have.metric == m.metric) {
                c.measurements.push(m);
            }
        }
        Ok(c)
    }

    async fn stop(&self, app: &AppHandle) -> Result<(), DeviceError> {
        let Some(r) = self.inner.lock().await.running.remove(&app.id) else { return Ok(()) };
        self.phone().await?.kill(r.launcher, r.pid).await.map_err(Into::into)
    }

    /// Before iOS 17 nothing on the host can start a sysdiagnose: the operator does, on
    /// the phone, right after re-tether.
    /// Only after an untethered soak: a tethered trial reads no powerlog.
    fn operator_steps(&self) -> Vec<DeviceStep> {
        let Ok(inner) = self.inner.try_lock() else { return Vec::new() };
        let old = inner.version.as_deref().is_some_and(|v| major(v) < 17);
        if !old || inner.untethered_at.is_none() {
            return Vec::new();
        }
        vec![DeviceStep {
            when: StepWhen::Retether,
            name: SYSDIAGNOSE_STEP.into(),
            text: format!(
                "On {}, trigger a sysdiagnose: hold both volume buttons and the side button for about a second, \
                 until it vibrates. lab then waits for the archive (several minutes) and reads its powerlog.",
                self.spec.name
            ),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_port_is_read_from_the_trial_url() {
        assert_eq!(endpoint_port("http://192.0.2.10:8765/t/abc"), Some(8765));
        assert_eq!(endpoint_port("http://lab.example/t/abc"), Some(80));
        assert_eq!(endpoint_port("http://[2001:db8::1]:9000/t/abc"), Some(9000));
        assert_eq!(endpoint_port("not a url"), None);
    }

    #[test]
    fn the_battery_domain_is_read_as_state() {
        let mut d = Dictionary::new();
        d.insert("BatteryCurrentCapacity".into(), 87.into());
        d.insert("BatteryIsCharging".into(), false.into());
        d.insert("ExternalConnected".into(), true.into());
        let mut s = StateSnapshot::default();
        battery_state(&d, &mut s);
        assert_eq!(
            (s.battery_pct.value(), s.charging.value(), s.external_power.value()),
            (Some(87.0), Some(false), Some(true))
        );
        assert!(s.brightness_pct.is_unknown());
    }
}
