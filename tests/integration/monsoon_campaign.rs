//! A whole campaign on a Monsoon through its scripted USB fake (`monitor::monsoon::fake`,
//! in place of this machine's USB): a `host` device (this machine, a real process) supplied
//! by the fake HVPM with `tether = "monitor"`, so the monitor's USB passthrough is the
//! tether. Passthrough is off for every soak (sampling only then) and on after, and each
//! soak's energy is the fake's known draw over the window.

use std::collections::BTreeMap;
use std::sync::Arc;

use lab::config::MonsoonModel;
use lab::monitor::monsoon::fake::{Draw, FakeConfig, FakeLog, FakeMonsoon};
use lab::monitor::monsoon::protocol::{self, op};
use lab::runner::{self, Campaign, EventSink};
use lab::store::{AttemptStatus, Store};

const LAB: &str = r#"
[lab]
name = "monsoon-lab"
artifacts = "artifacts"
store = "artifacts/lab.db"

[[host]]
name = "local"

[[device]]
name = "board-1"
host = "local"
platform = "host"
model = "dev board"
os = "Linux"
tether = "monitor"
monitor = "hv-1"

[[monitor]]
name = "hv-1"
kind = "monsoon"
serial = "20001"
voltage_v = 3.85
"#;

const RUNBOOK: &str = r#"
name = "monsoon-check"
duration = "1500ms"
repeats = 2
retries = 0
devices = ["board-1"]
[builds.a]
baseline = true
[builds.a.host]
command = ["sleep", "600"]
[builds.b.host]
command = ["sleep", "601"]
[monitor]
warmup = "100ms"
"#;

/// What the fake was told, in order: passthrough on/off, sampling started/stopped.
fn story(log: &FakeLog) -> Vec<&'static str> {
    log.controls()
        .iter()
        .filter(|c| c.setup.request_type == protocol::REQUEST_OUT)
        .filter_map(|c| match c.setup.request {
            protocol::START => Some("start"),
            protocol::STOP => Some("stop"),
            protocol::SET_VALUE if (c.setup.index & 0xFF) as u8 == op::USB_PASSTHROUGH => {
                Some(if c.setup.value == 0 { "passthrough off" } else { "passthrough on" })
            }
            _ => None,
        })
        .collect()
}

/// A campaign `m1` of `runbook` on board-1, whose Monsoon is a paced fake drawing `draw`:
/// the campaign, the fake's log, the lab, the store, and the sender that stops it.
struct Bench {
    campaign: Campaign,
    log: FakeLog,
    lab: Arc<lab::config::Lab>,
    store: Store,
    stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

fn bench(runbook: &str, draw: Draw) -> Bench {
    bench_with(runbook, draw, |_| {})
}

/// [`bench`] with the fake's configuration changed by `tune`.
fn bench_with(runbook: &str, draw: Draw, tune: impl FnOnce(&mut FakeConfig)) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lab.toml"), LAB).unwrap();
    std::fs::write(dir.path().join("runbook.toml"), runbook).unwrap();
    let lab = Arc::new(lab::config::load_lab(&dir.path().join("lab.toml")).unwrap());
    let runbook = lab::config::load_runbook(&dir.path().join("runbook.toml"), &lab).unwrap();
    let plan = lab::plan::build(&runbook, &lab).unwrap();
    let store = Store::open(lab.store.sqlite_path().unwrap()).unwrap();
    store.create_campaign(&runner::new_record("m1", &lab, &runbook, &plan), plan.max_attempts, 1).unwrap();

    let mut config = FakeConfig { paced: true, ..FakeConfig::new(MonsoonModel::Hvpm, draw) };
    tune(&mut config);
    let fake = FakeMonsoon::new(config);
    let log = fake.log();
    let fake = std::sync::Mutex::new(Some(fake));
    let hosts = lab::transport::Hosts::for_lab(&lab);
    let mut place = runner::monitor_place(&lab, &hosts, "board-1").unwrap();
    place.usb = Some(Arc::new(move || Box::new(fake.lock().unwrap().take().expect("opened once")) as Box<_>));

    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let operator: Arc<dyn lab::tether::Operator> = Arc::new(lab::tether::AbsentOperator { why: "test".into() });
    let spec = lab.device("board-1").unwrap();
    let device = lab::device::open(spec, &lab, &hosts).unwrap();
    let tether = runner::tether_for(&lab, &hosts, "board-1", operator, Some(place.slot.clone())).unwrap();
    let devices = BTreeMap::from([("board-1".to_string(), (device, tether))]);
    let campaign = Campaign {
        id: "m1".into(),
        lab: lab.clone(),
        runbook: Arc::new(runbook),
        plan: Arc::new(plan),
        store: store.clone(),
        devices,
        events: EventSink::discard(),
        shutdown: shutdown.clone(),
        desk: Arc::new(runner::OperatorDesk::new(
            store.clone(),
            "m1",
            EventSink::discard(),
            std::time::Duration::from_secs(60),
            shutdown,
        )),
        turns: runner::Turns::take_now(&store, &["board-1".into()], &Default::default()).unwrap(),
        monitors: BTreeMap::from([("board-1".to_string(), place)]),
        instruments: Default::default(),
        agent: None,
        gate: None,
    };
    Bench { campaign, log, lab, store, stop, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_is_off_for_every_soak_and_on_after_and_each_soak_has_the_fakes_energy() {
    // 150 mA, plus 400 mA for 0.1 s of every second, in real time.
    let draw = Draw::Pulse { base_ma: 150.0, pulse_ma: 400.0, every_s: 1.0, width_s: 0.1 };
    let Bench { campaign, log, lab, store, stop: _stop, _dir } = bench(RUNBOOK, draw.clone());
    let summary = campaign.run(false).await.unwrap();
    assert_eq!((summary.valid, summary.failed, summary.pending), (4, 0, 0), "{summary:?}");

    // Opened with passthrough on; each soak: off, sample, on.
    let soak = ["passthrough off", "start", "stop", "passthrough on"];
    let mut want = vec!["passthrough on"];
    for _ in 0..4 {
        want.extend(soak);
    }
    // Closing stops nothing more (it was not sampling): the output goes off.
    assert_eq!(story(&log), want);
    assert!(!log.sampling());
    assert_eq!(log.voltage_v(), 0.0, "its output is off after the campaign");

    let attempts = store.attempts("m1").unwrap();
    assert_eq!(attempts.len(), 4);
    for a in &attempts {
        assert_eq!(a.status, AttemptStatus::Valid, "{:?}", a.reasons);
        assert!(a.untether.is_some_and(|m| m == lab::measure::UntetherMode::PowerCut), "{:?}", a.untether);
        let about: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(lab.artifacts_dir.join(&a.artifact_dir).join("current.json")).unwrap(),
        )
        .unwrap();
        let (start, end) = (about["window"]["start_s"].as_f64().unwrap(), about["window"]["end_s"].as_f64().unwrap());
        // ∫ V·I dt over the window on the fake's clock, at 5 kHz.
        let n = ((end - start - 0.1) * 5000.0) as usize;
        let want: f64 = (0..n).map(|i| 3.85 * draw.ma_at(start + 0.1 + i as f64 / 5000.0) / 1000.0 / 5000.0).sum();
        let got = a.measurements.iter().find(|m| m.metric == "monitor_energy_j").unwrap();
        assert!((got.value - want).abs() / want < 0.005, "{} J, the fake's draw gives {want} J", got.value);
        assert!(got.source.starts_with("power monitor (J): hv-1 (Monsoon HVPM 20001)"), "{}", got.source);
        let dropped = a.measurements.iter().find(|m| m.metric == "monitor_dropped_samples").unwrap();
        assert_eq!(dropped.value, 0.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_soak_stops_the_sampling_and_switches_passthrough_back_on() {
    let Bench { campaign, log, store, stop, _dir, .. } =
        bench(&RUNBOOK.replace("duration = \"1500ms\"", "duration = \"60s\""), Draw::Constant { ma: 100.0 });
    let run = tokio::spawn(campaign.run(false));
    let since = std::time::Instant::now();
    while !log.sampling() {
        assert!(since.elapsed() < std::time::Duration::from_secs(30), "the soak never started: {:?}", story(&log));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    stop.send(true).unwrap();
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.valid, 0);
    // The recording stopped before the tether gave USB back (the Monsoon takes no command
    // while it samples), and nothing was recorded.
    assert_eq!(story(&log), ["passthrough on", "passthrough off", "start", "stop", "passthrough on"]);
    assert!(!log.sampling());
    assert_eq!(log.voltage_v(), 0.0, "its output is off");
    assert!(store.attempts("m1").unwrap().is_empty());
}

/// A Monsoon that drops packets: more than 0.1 % of the window's samples missing makes
/// each attempt invalid, with the reason, and retried (here: no retries left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_samples_make_the_attempt_invalid_with_the_reason() {
    let draw = Draw::Constant { ma: 120.0 };
    let Bench { campaign, store, stop: _stop, _dir, .. } =
        bench_with(&RUNBOOK.replace("repeats = 2", "repeats = 1"), draw, |c| c.drop_every = Some(20));
    let summary = campaign.run(false).await.unwrap();
    assert_eq!((summary.valid, summary.failed), (0, 2), "{summary:?}");
    for a in store.attempts("m1").unwrap() {
        assert_eq!(a.status, AttemptStatus::Invalid);
        assert!(a.reasons.iter().any(|r| r.starts_with("power monitor: ") && r.contains("dropped")), "{:?}", a.reasons);
        let dropped = a.measurements.iter().find(|m| m.metric == "monitor_dropped_samples").unwrap();
        assert!(dropped.value > 0.0);
    }
}
