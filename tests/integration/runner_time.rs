//! The runner in paused tokio time: simulated phones on `Clock::tokio()`, so the
//! runner's real timers (soak, cool-down, gates) run in virtual time. A stop in the
//! middle of a soak records nothing partial, and a resume finishes the campaign.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use lab::clock::Clock;
use lab::device::sim::SimDevice;
use lab::runner::{self, Campaign, Event, EventSink};
use lab::store::{CampaignStatus, Store, TrialOutcome};

fn campaign(
    dir: &Path,
    shutdown: tokio::sync::watch::Receiver<bool>,
    events: EventSink,
    id: &str,
    create: bool,
) -> Campaign {
    campaign_on(dir, shutdown, events, id, create, Clock::tokio)
}

/// [`campaign`] with the simulated phones on `clock`.
fn campaign_on(
    dir: &Path,
    shutdown: tokio::sync::watch::Receiver<bool>,
    events: EventSink,
    id: &str,
    create: bool,
    clock: fn() -> Clock,
) -> Campaign {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("lab.toml")).unwrap();
    std::fs::write(dir.join("lab.toml"), text).unwrap();
    let lab = Arc::new(lab::config::load_lab(&dir.join("lab.toml")).unwrap());
    let runbook = lab::config::load_runbook(&root.join("runbooks/quickstart.toml"), &lab).unwrap();
    let plan = lab::plan::build(&runbook, &lab).unwrap();
    let store = Store::open(lab.store.sqlite_path().unwrap()).unwrap();
    if create {
        store.create_campaign(&runner::new_record(id, &lab, &runbook, &plan), plan.max_attempts, 1).unwrap();
    }
    let operator: Arc<dyn lab::tether::Operator> = Arc::new(lab::tether::AbsentOperator { why: "test".into() });
    let hosts = lab::transport::Hosts::for_lab(&lab);
    let devices: BTreeMap<_, _> = plan
        .devices
        .iter()
        .map(|d| {
            let spec = lab.device(&d.name).unwrap().clone();
            let dev: Arc<dyn lab::device::Device> = Arc::new(SimDevice::with_clock(spec, clock()));
            (d.name.clone(), (dev, runner::tether_for(&lab, &hosts, &d.name, operator.clone(), None).unwrap()))
        })
        .collect();
    let desk = Arc::new(runner::OperatorDesk::new(
        store.clone(),
        id,
        events.clone(),
        runbook.timeouts.operator,
        shutdown.clone(),
    ));
    let names: Vec<String> = devices.keys().cloned().collect();
    let turns = runner::Turns::take_now(&store, &names, &Default::default()).unwrap();
    Campaign {
        id: id.into(),
        lab,
        runbook: Arc::new(runbook),
        plan: Arc::new(plan),
        store,
        devices,
        events,
        shutdown,
        desk,
        turns,
        monitors: Default::default(),
        instruments: Default::default(),
        agent: None,
        gate: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_stop_during_the_soak_records_nothing_partial_and_resume_completes() {
    let dir = tempfile::tempdir().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = campaign(dir.path(), stop_rx, EventSink::new(tx), "c1", true);
    let store = c.store.clone();
    let artifacts = c.artifacts_dir();

    // Stop once two soaks have started and 5 virtual minutes have passed in the third.
    let stopper = tokio::spawn(async move {
        let mut soaks = 0;
        while let Some(e) = rx.recv().await {
            if let Event::Phase { phase: lab::runner::Phase::Soak, .. } = e {
                soaks += 1;
                if soaks == 3 {
                    tokio::time::sleep(Duration::from_secs(300)).await;
                    stop_tx.send(true).unwrap();
                    return;
                }
            }
        }
    });
    let started = tokio::time::Instant::now();
    let summary = c.run(false).await.unwrap();
    stopper.await.unwrap();
    assert_eq!(summary.status, CampaignStatus::Interrupted);
    assert_eq!(summary.note.as_deref(), Some("stopped by the user"));
    // The 10-minute soaks were cut short in virtual time: the campaign stopped about 5 minutes into them.
    assert!(started.elapsed() < Duration::from_secs(3600), "{:?}", started.elapsed());
    let attempts = store.attempts("c1").unwrap();
    assert!(attempts.len() < 16, "stopped before the end: {} attempts", attempts.len());
    assert!(
        attempts.iter().all(|a| a.status == lab::store::AttemptStatus::Valid),
        "no cancelled attempt was recorded as invalid"
    );
    // Every attempt folder left is a recorded attempt's: the stopped ones removed theirs.
    let recorded: std::collections::BTreeSet<String> = attempts.iter().map(|a| a.artifact_dir.clone()).collect();
    assert_eq!(attempt_folders(&artifacts), recorded);

    // Resume with a fresh set of devices: the rest runs, nothing is repeated.
    let (_keep, stop_rx) = tokio::sync::watch::channel(false);
    let c = campaign(dir.path(), stop_rx, EventSink::discard(), "c1", false);
    let summary = c.run(true).await.unwrap();
    assert_eq!((summary.status, summary.valid, summary.pending), (CampaignStatus::Done, 16, 0));
    let trials = store.trials("c1").unwrap();
    assert!(trials.iter().all(|t| t.outcome == TrialOutcome::Valid && t.attempts == 1));
}

/// A simulated phone with a fault of the real world.
struct Faulty {
    sim: SimDevice,
    fault: Fault,
    /// While lost: the virtual instant it answers again.
    back_at: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Drops left: one in prepare, one in collect (before anything is read).
    drops: std::sync::Mutex<Vec<&'static str>>,
}

enum Fault {
    /// Its log pull never returns (a wedged USB stack).
    WedgedCollect,
    /// Its host drops off for 90 s in `prepare` and again in `collect`, then answers.
    DropsOff,
}

impl Faulty {
    fn new(sim: SimDevice, fault: Fault) -> Self {
        Faulty {
            sim,
            fault,
            back_at: std::sync::Mutex::new(None),
            drops: std::sync::Mutex::new(vec!["collect", "prepare"]),
        }
    }

    /// `Disconnected` when lost, or when `step` is where the next drop happens.
    fn check(&self, step: &str) -> Result<(), lab::device::DeviceError> {
        let lost = || lab::device::DeviceError::Disconnected {
            device: lab::device::Device::name(&self.sim).into(),
            detail: "host unreachable".into(),
        };
        let mut back = self.back_at.lock().unwrap();
        if back.is_some_and(|t| tokio::time::Instant::now() < t) {
            return Err(lost());
        }
        let mut drops = self.drops.lock().unwrap();
        if matches!(self.fault, Fault::DropsOff) && drops.last() == Some(&step) {
            drops.pop();
            *back = Some(tokio::time::Instant::now() + Duration::from_secs(90));
            return Err(lost());
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl lab::device::Device for Faulty {
    fn spec(&self) -> &lab::config::DeviceSpec {
        self.sim.spec()
    }
    fn clock(&self) -> Clock {
        self.sim.clock()
    }
    async fn identify(&self) -> Result<lab::device::Identity, lab::device::DeviceError> {
        self.sim.identify().await
    }
    async fn prepare(
        &self,
        b: &lab::config::Build,
        c: &lab::config::VariantConfig,
    ) -> Result<lab::device::Prepared, lab::device::DeviceError> {
        self.check("prepare")?;
        self.sim.prepare(b, c).await
    }
    async fn state(&self) -> Result<lab::device::StateSnapshot, lab::device::DeviceError> {
        self.sim.state().await
    }
    async fn set_state(&self, w: &lab::device::DesiredState) -> Result<(), lab::device::DeviceError> {
        self.sim.set_state(w).await
    }
    async fn reset_counters(&self) -> Result<(), lab::device::DeviceError> {
        self.sim.reset_counters().await
    }
    async fn launch(&self, s: &lab::device::LaunchSpec) -> Result<lab::device::AppHandle, lab::device::DeviceError> {
        self.sim.launch(s).await
    }
    async fn software_untether(&self) -> Result<lab::measure::UntetherMode, lab::device::DeviceError> {
        self.sim.software_untether().await
    }
    async fn software_retether(&self) -> Result<(), lab::device::DeviceError> {
        self.sim.software_retether().await
    }
    async fn wait_connected(&self, t: Duration) -> Result<(), lab::device::DeviceError> {
        let back = *self.back_at.lock().unwrap();
        if let Some(at) = back {
            tokio::time::sleep_until(at.min(tokio::time::Instant::now() + t)).await;
            self.check("wait")?;
        }
        self.sim.wait_connected(t).await
    }
    async fn collect(
        &self,
        app: &lab::device::AppHandle,
        dir: &Path,
    ) -> Result<lab::device::Collected, lab::device::DeviceError> {
        match self.fault {
            Fault::WedgedCollect => std::future::pending().await,
            Fault::DropsOff => {
                self.check("collect")?;
                self.sim.collect(app, dir).await
            }
        }
    }
    async fn stop(&self, app: &lab::device::AppHandle) -> Result<(), lab::device::DeviceError> {
        self.sim.stop(app).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_wedged_phase_times_out_into_an_invalid_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, stop_rx) = tokio::sync::watch::channel(false);
    let mut c = campaign(dir.path(), stop_rx, EventSink::discard(), "c1", true);
    for (dev, _) in c.devices.values_mut() {
        let spec = dev.spec().clone();
        *dev = Arc::new(Faulty::new(SimDevice::with_clock(spec, Clock::tokio()), Fault::WedgedCollect));
    }
    let store = c.store.clone();
    let summary = c.run(false).await.unwrap();
    // Every attempt of every trial timed out in collect: all failed, none hung the campaign.
    assert_eq!((summary.status, summary.valid, summary.failed), (CampaignStatus::Done, 0, 16));
    let attempts = store.attempts("c1").unwrap();
    assert_eq!(attempts.len(), 16 * 3);
    assert!(attempts.iter().all(|a| a.reasons == ["collect did not finish within 10m"]), "{:?}", attempts[0].reasons);
}

#[tokio::test(start_paused = true)]
async fn a_device_that_drops_off_in_prepare_and_collect_is_waited_for_and_the_step_redone() {
    let dir = tempfile::tempdir().unwrap();
    let (_keep, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut c = campaign(dir.path(), stop_rx, EventSink::new(tx), "c1", true);
    for (dev, _) in c.devices.values_mut() {
        let spec = dev.spec().clone();
        *dev = Arc::new(Faulty::new(SimDevice::with_clock(spec, Clock::tokio()), Fault::DropsOff));
    }
    let devices = c.devices.len();
    let store = c.store.clone();
    let summary = c.run(false).await.unwrap();
    // Nothing was spoiled: each lost step waited for its device and ran again.
    assert_eq!((summary.status, summary.valid, summary.failed), (CampaignStatus::Done, 16, 0));
    let attempts = store.attempts("c1").unwrap();
    assert_eq!(
        attempts.len(),
        16,
        "no attempt was lost to a drop: {:?}",
        attempts.iter().map(|a| &a.reasons).collect::<Vec<_>>()
    );
    let mut lost = Vec::new();
    let mut back = Vec::new();
    while let Ok(e) = rx.try_recv() {
        match e {
            Event::Disconnected { phase, .. } => lost.push(phase.as_str()),
            Event::Reconnected { after_s, .. } => back.push(after_s),
            _ => {}
        }
    }
    lost.sort();
    let mut want = vec!["collect"; devices];
    want.extend(vec!["prepare"; devices]);
    assert_eq!(lost, want, "each device dropped once in prepare and once in collect");
    assert!(back.iter().all(|s| (*s - 90.0).abs() < 1.0), "each was back after its 90 s: {back:?}");
}

/// `<campaign>/<trial key>.attempt-<n>` of every attempt folder under `artifacts`: one
/// level, nothing inside but the attempt's files.
fn attempt_folders(artifacts: &std::path::Path) -> std::collections::BTreeSet<String> {
    let campaign = artifacts.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = std::collections::BTreeSet::new();
    for attempt in std::fs::read_dir(artifacts).unwrap().flatten().filter(|e| e.path().is_dir()) {
        for f in std::fs::read_dir(attempt.path()).unwrap().flatten() {
            assert!(f.path().is_file(), "{} in an attempt's folder is not a file", f.path().display());
        }
        out.insert(format!("{campaign}/{}", attempt.file_name().to_string_lossy()));
    }
    out
}

/// Two campaigns that each hold the phones the other waits for (A the iPhones, B the
/// Pixels): a worker gives its phone back once its trials are done, so both finish. (A
/// campaign that kept every phone to its end would wait for the other forever.) Real
/// time, with the phones' own clocks virtual: the waits are real threads.
#[tokio::test]
async fn two_campaigns_holding_each_others_phones_both_finish() {
    use lab::store::LeaseRequest;
    let dir = tempfile::tempdir().unwrap();
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let mut a = campaign_on(dir.path(), rx.clone(), EventSink::discard(), "a", true, Clock::virtual_clock);
    a.turns = Default::default();
    let mut b = campaign_on(dir.path(), rx, EventSink::discard(), "b", true, Clock::virtual_clock);
    b.turns = Default::default();
    let store = a.store.clone();
    let req = |c: &str| LeaseRequest { purpose: "campaign".into(), campaign: Some(c.into()), ..Default::default() };
    let (iphones, pixels) = (["sim-iphone-1", "sim-iphone-2"], ["sim-pixel-1", "sim-pixel-2"]);
    let events = EventSink::discard();
    let (mut ta, mut tb) = (BTreeMap::new(), BTreeMap::new());
    for (turns, mine, name) in [(&mut ta, iphones, "a"), (&mut tb, pixels, "b")] {
        for d in mine {
            let t = runner::join_turn(&store, d, req(name), &events).await.unwrap();
            assert!(matches!(t, runner::Turn::Held(_)), "{d} is free");
            turns.insert(d.to_string(), t);
        }
    }
    for (turns, theirs, name) in [(&mut ta, pixels, "a"), (&mut tb, iphones, "b")] {
        for d in theirs {
            let t = runner::join_turn(&store, d, req(name), &events).await.unwrap();
            assert!(matches!(t, runner::Turn::Waiting(_)), "{d} is the other's");
            turns.insert(d.to_string(), t);
        }
    }
    a.turns = runner::Turns { turns: ta, request: req("a") };
    b.turns = runner::Turns { turns: tb, request: req("b") };
    let both = async { tokio::join!(a.run(false), b.run(false)) };
    let (ra, rb) = tokio::time::timeout(Duration::from_secs(120), both).await.expect("the two campaigns deadlocked");
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!((ra.status, rb.status), (CampaignStatus::Done, CampaignStatus::Done));
    assert_eq!((ra.pending, rb.pending, ra.failed, rb.failed), (0, 0, 0, 0));
    assert!(store.lease_holders().unwrap().is_empty() && store.queued().unwrap().is_empty());
}
