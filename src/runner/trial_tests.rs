//! Every branch of the attempt state machine on the scripted fakes, in paused time: a
//! scripted phone behind a real `UhubctlTether` whose `uhubctl` runs on a scripted host.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::event::{Event, EventSink};
use super::footprint::Footprint;
use super::trial::{Attempt, AttemptOutcome, TrialContext};
use crate::device::Device;
use crate::measure::UntetherMode;
use crate::store::{AttemptStatus, PlannedTrialRow, Store};
use crate::testing::{
    Behaviour, Call, Reply, ScriptedDevice, ScriptedTransport, answer_uhubctl_port, uhubctl_switch_output,
};
use crate::tether::Tether;
use crate::tether::UhubctlTether;

const LAB: &str = r#"
[lab]
name = "t"
[[host]]
name = "local"
[[device]]
name = "phone-1"
platform = "sim"
model = "Pixel 8"
tether = { uhubctl = { location = "1-1", port = 2 } }
[device.sim]
emulates = "android"
[[device]]
name = "phone-2"
platform = "sim"
model = "Pixel 7"
tether = { uhubctl = { location = "1-1", port = 3 } }
[device.sim]
emulates = "android"
"#;

const RUNBOOK: &str = r#"
name = "branches"
duration = "10m"
repeats = 1
devices = ["phone-1"]
[builds.app]
baseline = true
[builds.app.sim]
cpu_pct = 5
wakeups_per_s = 5
memory_mb = 20
[preconditions]
untethered = true
app_foreground = true
"#;

struct Bench {
    _dir: tempfile::TempDir,
    ctx: TrialContext,
    trial: PlannedTrialRow,
    /// The phone's host: `uhubctl` runs here.
    host: Arc<ScriptedTransport>,
    tether: UhubctlTether,
    events: mpsc::UnboundedReceiver<Event>,
    stop: watch::Sender<bool>,
}

impl Bench {
    /// A one-trial campaign of `RUNBOOK` plus `extra` (more preconditions, then more
    /// sections); the hub answers every `uhubctl`.
    fn new(extra: &str) -> Bench {
        Self::with(extra, |_| {})
    }

    /// Like `new`, with `hub` adding rules for the host that come before the default.
    fn with(extra: &str, hub: impl FnOnce(&ScriptedTransport)) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let lab = crate::config::parse_lab(LAB, &dir.path().join("lab.toml")).unwrap();
        let rb = crate::config::parse_runbook(&format!("{RUNBOOK}{extra}"), &dir.path().join("rb.toml"), &lab).unwrap();
        let plan = crate::plan::build(&rb, &lab).unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        store.create_campaign(&super::new_record("c1", &lab, &rb, &plan), plan.max_attempts, 1).unwrap();
        let trial = store.trials("c1").unwrap().remove(0).row;
        let (tx, events) = mpsc::unbounded_channel();
        let operator_limit = rb.timeouts.operator;
        let (stop, shutdown) = watch::channel(false);
        let host = Arc::new(ScriptedTransport::new("local"));
        hub(&host);
        answer_uhubctl(&host, 2);
        let tether = UhubctlTether::new(host.clone(), "1-1", 2, None);
        let ctx = TrialContext {
            campaign: "c1".into(),
            runbook: Arc::new(rb),
            store: store.clone(),
            events: EventSink::new(tx.clone()),
            artifacts: dir.path().join("artifacts/c1"),
            max_attempts: plan.max_attempts,
            shutdown: shutdown.clone(),
            endpoint: None,
            footprint: Arc::new(Footprint::new(None)),
            desk: Arc::new(super::OperatorDesk::new(
                store.clone(),
                "c1",
                EventSink::new(tx.clone()),
                operator_limit,
                shutdown.clone(),
            )),
            status: super::StatusBoard::new(store.clone()),
            recorder: Arc::new(super::recorder::Recorder::start(store.clone()).unwrap()),
            uploads: None,
            identities: Default::default(),
            lease_request: Default::default(),
            monitors: Default::default(),
            instruments: Default::default(),
            agent_host: None,
            drain: None,
            gate: None,
        };
        Bench { _dir: dir, ctx, trial, host, tether, events, stop }
    }

    fn phone(&self) -> ScriptedDevice {
        phone("phone-1")
    }

    async fn run(&self, device: &dyn Device) -> AttemptOutcome {
        self.attempt(device, &self.tether).run().await.unwrap()
    }

    /// The bench's trial's first attempt on `device` through `tether`.
    fn attempt<'a>(&'a self, device: &'a dyn Device, tether: &'a dyn Tether) -> Attempt<'a> {
        Attempt {
            ctx: &self.ctx,
            device,
            tether,
            monitor: None,
            trial: &self.trial,
            attempt: 0,
            stop: self.ctx.shutdown.clone(),
        }
    }

    /// The hub port's switching, in order (`off`, `on`, …; listings left out).
    fn port(&self) -> Vec<String> {
        let calls = self.host.calls_of("uhubctl");
        calls
            .iter()
            .filter(|a| a.contains(" -a "))
            .map(|a| a.rsplit(' ').next().unwrap_or_default().to_string())
            .collect()
    }

    fn reasons(&self) -> Vec<String> {
        let attempts = self.ctx.store.attempts("c1").unwrap();
        assert_eq!(attempts.len(), 1, "one attempt recorded");
        assert_eq!(attempts[0].status, AttemptStatus::Invalid);
        attempts[0].reasons.clone()
    }

    fn drain(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.events.try_recv().ok()).collect()
    }
}

/// Hub 1-1 switches `port` as a hub with per-port switching does, and says so; its
/// listing shows nothing on the port (the scripted phones have no USB serial), so the
/// tether does not wait for them to leave or come back (src/tether/uhubctl_tests.rs does).
fn answer_uhubctl(host: &ScriptedTransport, port: u32) {
    answer_uhubctl_port(host, "1-1", port);
}

fn phone(name: &str) -> ScriptedDevice {
    let lab = crate::config::parse_lab(LAB, Path::new("lab.toml")).unwrap();
    ScriptedDevice::new(lab.device(name).unwrap().clone())
}

fn has(reasons: &[String], part: &str) -> bool {
    reasons.iter().any(|r| r.contains(part))
}

#[tokio::test(start_paused = true)]
async fn a_healthy_phone_gives_a_valid_trial_with_the_port_off_for_the_soak_only() {
    let b = Bench::new("");
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: true });
    assert_eq!(b.port(), ["off", "on"]);
    let calls = phone.calls();
    let pos = |c: &str| calls.iter().position(|x| x == c).unwrap_or_else(|| panic!("no {c} in {calls:?}"));
    assert!(pos("launch") < pos("usb_power:off") && pos("usb_power:off") < pos("usb_power:on"));
    assert!(pos("usb_power:on") < pos("collect") && pos("collect") < pos("stop"));
    assert!(phone.usb_powered());
}

#[tokio::test(start_paused = true)]
async fn still_charging_after_untether_is_invalid_and_the_port_goes_back_on() {
    let b = Bench::new("");
    let phone = b.phone().charges_when_cut();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(has(&b.reasons(), "still charging after untether (uhubctl 1-1:2)"), "{:?}", b.reasons());
    assert_eq!(b.port(), ["off", "on"], "re-tethered before the attempt returned");
    assert!(!phone.calls().contains(&"collect".to_string()), "no soak, no collect");
    assert!(phone.calls().contains(&"stop".to_string()), "the app was stopped");
}

/// Pipelined attempts (an agent's device goes on while its record commits): each is
/// recorded once the last one's slot is waited for, and their `attempt_recorded` events
/// come in the device's order.
#[tokio::test(start_paused = true)]
async fn pipelined_attempts_are_recorded_and_told_in_the_devices_order() {
    let mut b = Bench::new("");
    let phone = b.phone();
    let mut recording = None;
    for attempt in 0..3 {
        let a = Attempt { attempt, ..b.attempt(&phone, &b.tether) };
        assert_eq!(a.run_pipelined(&mut recording).await.unwrap(), AttemptOutcome::Recorded { valid: true });
    }
    recording.take().expect("the last record's slot").committed().await.unwrap();
    let stored: Vec<u32> = b.ctx.store.attempts("c1").unwrap().iter().map(|a| a.attempt).collect();
    assert_eq!(stored, [0, 1, 2]);
    let mut told = Vec::new();
    while let Ok(e) = b.events.try_recv() {
        if let Event::AttemptRecorded { attempt, .. } = e {
            told.push(attempt);
        }
    }
    assert_eq!(told, [0, 1, 2]);
}

/// One attempt of the bench's trial with the phone unplugged in software.
async fn run_soft(b: &Bench, phone: &ScriptedDevice) -> crate::store::AttemptRecord {
    let tether = crate::tether::SoftwareTether;
    let a = b.attempt(phone, &tether);
    a.run().await.unwrap();
    b.ctx.store.attempts("c1").unwrap().remove(0)
}

#[tokio::test(start_paused = true)]
async fn a_soft_untethered_phone_that_still_charges_is_labelled_not_invalid() {
    let b = Bench::new("");
    let phone = b.phone().charges_when_cut();
    let a = run_soft(&b, &phone).await;
    assert_eq!((a.status, a.untether), (AttemptStatus::Valid, Some(UntetherMode::SoftUntethered)), "{:?}", a.reasons);
    assert_eq!(
        a.labels,
        [
            super::validity::STILL_CHARGING_SOFT,
            "charged for 600 s during the soak (soft-untethered: USB power stays on)"
        ]
    );
    assert!(phone.usb_powered(), "plugged back in");
}

#[tokio::test(start_paused = true)]
async fn charging_suspended_is_recorded_and_charging_through_it_is_invalid() {
    let b = Bench::new("");
    let a = run_soft(&b, &b.phone().suspends_charging()).await;
    assert_eq!((a.status, a.untether), (AttemptStatus::Valid, Some(UntetherMode::ChargingSuspended)));
    assert!(a.labels.is_empty());
    let b = Bench::new("");
    let a = run_soft(&b, &b.phone().suspends_charging().charges_when_cut()).await;
    assert_eq!(a.status, AttemptStatus::Invalid);
    assert!(has(&a.reasons, "still charging after untether (software)"), "{:?}", a.reasons);
}

#[tokio::test(start_paused = true)]
async fn a_power_cut_attempt_records_its_mode() {
    let b = Bench::new("");
    assert_eq!(b.run(&b.phone()).await, AttemptOutcome::Recorded { valid: true });
    let a = b.ctx.store.attempts("c1").unwrap().remove(0);
    assert_eq!((a.untether, a.labels.len()), (Some(UntetherMode::PowerCut), 0));
}

#[tokio::test(start_paused = true)]
async fn a_phone_gone_after_a_power_cut_soaks_and_gives_a_valid_trial() {
    let mut b = Bench::new("");
    let phone = b.phone().unreachable_when_cut();
    let start = tokio::time::Instant::now();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: true });
    assert!(start.elapsed() >= Duration::from_secs(600), "the whole soak ran");
    assert_eq!(b.port(), ["off", "on"]);
    let events = b.drain();
    assert!(events.iter().any(|e| matches!(e, Event::OffUsb { .. })), "announced as expected");
    assert!(
        !events.iter().any(|e| matches!(e, Event::Disconnected { .. })),
        "losing it with its port is not a disconnect"
    );
}

#[tokio::test(start_paused = true)]
async fn a_phone_that_never_comes_back_after_re_tether_goes_offline() {
    let b = Bench::new("[timeouts]\nreconnect = \"5m\"\n");
    let phone = b.phone().unreachable_when_cut().stays_lost();
    let out = b.run(&phone).await;
    assert!(matches!(out, AttemptOutcome::DeviceOffline { .. }), "{out:?}");
    assert!(has(&b.reasons(), "not back within 5m"), "{:?}", b.reasons());
    assert_eq!(b.port(), ["off", "on"], "its port is on again, for whoever comes to look");
}

#[tokio::test(start_paused = true)]
async fn the_gate_gives_up_on_a_phone_that_does_not_charge() {
    let b = Bench::new("battery_min = 50\n[timeouts]\ngate = \"20m\"\n");
    let phone = b.phone().with_state(|s| s.battery_pct = crate::device::Reading::read(10.0));
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(has(&b.reasons(), "gate: still charging: battery 10 % < 50 % after 20m"), "{:?}", b.reasons());
    assert!(b.port().is_empty(), "never untethered");
    assert!(!phone.calls().contains(&"launch".to_string()));
}

#[tokio::test(start_paused = true)]
async fn another_app_in_the_foreground_after_the_soak_is_invalid() {
    let b = Bench::new("");
    let phone = b.phone().foreground("com.android.launcher");
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(
        has(&b.reasons(), "app not in the foreground after the soak (foreground: com.android.launcher)"),
        "{:?}",
        b.reasons()
    );
}

#[tokio::test(start_paused = true)]
async fn set_state_failing_fails_prepare_before_anything_runs() {
    let b = Bench::new("brightness = [40, 60]\n");
    let phone = b.phone().script(Call::SetState, [Behaviour::Fail("settings: permission denied".into())]);
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(
        has(&b.reasons(), "prepare failed: phone-1: set_state failed: settings: permission denied"),
        "{:?}",
        b.reasons()
    );
    assert!(!phone.calls().contains(&"launch".to_string()));
    assert!(b.port().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_untether_re_tethers_before_the_attempt_returns() {
    let b = Bench::new("");
    // The gate's read works; the one after the port is cut fails.
    let phone = b.phone().script(Call::State, [Behaviour::Normal, Behaviour::Fail("dumpsys: broken pipe".into())]);
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(has(&b.reasons(), "untether failed: phone-1: state failed: dumpsys: broken pipe"), "{:?}", b.reasons());
    assert_eq!(b.port(), ["off", "on"]);
    assert!(phone.usb_powered());
}

#[tokio::test(start_paused = true)]
async fn a_failed_re_tether_is_tried_again_so_the_port_is_not_left_off() {
    let b = Bench::with("", |hub| {
        hub.on(
            &["uhubctl", "-l", "1-1", "-p", "2", "-a", "on"],
            vec![Reply::fail(1, "hub busy"), Reply::ok(&uhubctl_switch_output("1-1", 2, true))],
        );
    });
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(has(&b.reasons(), "retether failed"), "{:?}", b.reasons());
    assert_eq!(b.port(), ["off", "on", "on"]);
    assert!(phone.usb_powered());
}

#[tokio::test(start_paused = true)]
async fn ctrl_c_during_prepare_stops_it_within_seconds_and_records_nothing() {
    let b = Bench::new("");
    let phone = b.phone().script(Call::Prepare, [Behaviour::Hang]);
    let stop = b.stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop.send(true).unwrap();
    });
    let start = tokio::time::Instant::now();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
    assert!(b.ctx.store.attempts("c1").unwrap().is_empty());
    assert!(b.port().is_empty());
}

#[tokio::test(start_paused = true)]
async fn ctrl_c_during_collect_re_tethers_stops_the_app_and_records_nothing() {
    let b = Bench::new("");
    let phone = b.phone().script(Call::Collect, [Behaviour::Hang]);
    let stop = b.stop.clone();
    // The soak is 10 minutes; collect (which never returns) starts right after it.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(620)).await;
        stop.send(true).unwrap();
    });
    let start = tokio::time::Instant::now();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(625), "{:?}", start.elapsed());
    assert!(b.ctx.store.attempts("c1").unwrap().is_empty());
    assert_eq!(b.port(), ["off", "on"]);
    assert!(phone.calls().contains(&"stop".to_string()));
    // Its folder, made when the attempt began, went with it.
    assert!(!b.ctx.artifacts.join(crate::store::attempt_folder(&b.trial.key, 0)).exists());
}

#[tokio::test(start_paused = true)]
async fn calls_that_had_no_limit_are_bounded() {
    // reset_counters never returns: the launch phase's limit ends it.
    let b = Bench::new("[timeouts]\nlaunch = \"2m\"\n");
    let phone = b.phone().script(Call::ResetCounters, [Behaviour::Hang]);
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert_eq!(b.reasons(), ["launch did not finish within 2m"]);

    // set_state never returns: the prepare limit ends it.
    let b = Bench::new("brightness = [40, 60]\n[timeouts]\nprepare = \"3m\"\n");
    let phone = b.phone().script(Call::SetState, [Behaviour::Hang]);
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert_eq!(b.reasons(), ["prepare did not finish within 3m"]);

    // stop never returns: the trial is still recorded, after at most the launch limit.
    let b = Bench::new("[timeouts]\nlaunch = \"2m\"\n");
    let phone = b.phone().script(Call::Stop, [Behaviour::Hang]);
    let start = tokio::time::Instant::now();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: true });
    assert!(start.elapsed() <= Duration::from_secs(600 + 120 + 5), "{:?}", start.elapsed());

    // The state read after untether never returns: the tether limit ends it, port back on.
    let b = Bench::new("[timeouts]\ntether = \"1m\"\n");
    let phone = b.phone().script(Call::State, [Behaviour::Normal, Behaviour::Hang]);
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert_eq!(b.reasons(), ["untether did not finish within 1m"]);
    assert_eq!(b.port(), ["off", "on"]);
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_fails_stops_its_siblings() {
    let dir = tempfile::tempdir().unwrap();
    let lab = Arc::new(crate::config::parse_lab(LAB, &dir.path().join("lab.toml")).unwrap());
    let text = RUNBOOK.replace(r#"devices = ["phone-1"]"#, r#"devices = ["phone-*"]"#);
    let rb = crate::config::parse_runbook(&text, &dir.path().join("rb.toml"), &lab).unwrap();
    let plan = crate::plan::build(&rb, &lab).unwrap();
    let store = Store::open(lab.store.sqlite_path().unwrap()).unwrap();
    store.create_campaign(&super::new_record("c1", &lab, &rb, &plan), plan.max_attempts, 1).unwrap();
    let host = Arc::new(ScriptedTransport::new("local"));
    answer_uhubctl(&host, 2);
    answer_uhubctl(&host, 3);
    let tether =
        |port| -> Box<dyn crate::tether::Tether> { Box::new(UhubctlTether::new(host.clone(), "1-1", port, None)) };
    // phone-1's backend panics in prepare (after phone-2 is well into its soak).
    let broken: Arc<dyn Device> = Arc::new(
        phone("phone-1")
            .script(Call::Identify, [Behaviour::Delay(Duration::from_secs(60))])
            .script(Call::Prepare, [Behaviour::Panic]),
    );
    let healthy = Arc::new(phone("phone-2"));
    let mut devices = std::collections::BTreeMap::new();
    devices.insert("phone-1".to_string(), (broken, tether(2)));
    devices.insert("phone-2".to_string(), (healthy.clone() as Arc<dyn Device>, tether(3)));
    let (_user, shutdown) = watch::channel(false);
    let c = super::Campaign {
        id: "c1".into(),
        lab: lab.clone(),
        runbook: Arc::new(rb),
        plan: Arc::new(plan),
        store: store.clone(),
        devices,
        events: EventSink::discard(),
        shutdown: shutdown.clone(),
        desk: Arc::new(super::OperatorDesk::new(
            store.clone(),
            "c1",
            EventSink::discard(),
            Duration::from_secs(60),
            shutdown,
        )),
        turns: super::Turns::take_now(&store, &["phone-1".into(), "phone-2".into()], &Default::default()).unwrap(),
        monitors: Default::default(),
        instruments: Default::default(),
        agent: None,
        gate: None,
    };
    let start = tokio::time::Instant::now();
    let err = c.run(false).await.expect_err("a panicking worker is fatal");
    assert!(err.to_string().contains("panicked"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(600), "phone-2 did not soak on: {:?}", start.elapsed());
    assert!(store.attempts("c1").unwrap().is_empty(), "nothing partial recorded");
    assert!(healthy.usb_powered(), "phone-2 was given its power back");
    assert_eq!(host.calls_of("uhubctl"), ["-l 1-1 -p 3", "-l 1-1 -p 3 -a off", "-l 1-1 -p 3 -a on"]);
}

#[tokio::test(start_paused = true)]
async fn auto_fix_sets_the_asked_state_and_without_it_an_off_target_phone_is_invalid() {
    let b = Bench::new("brightness = [80, 90]\n");
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: true });
    assert!(phone.calls().contains(&"set_state".to_string()), "auto_fix is the default");

    let b = Bench::new("brightness = [80, 90]\nauto_fix = false\n");
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    assert!(!phone.calls().contains(&"set_state".to_string()), "{:?}", phone.calls());
    assert!(has(&b.reasons(), "brightness 50 % before the soak, outside [80, 90] %"), "{:?}", b.reasons());
}

#[tokio::test(start_paused = true)]
async fn a_port_that_uhubctl_says_still_has_power_is_not_soaked_on() {
    let still_on = uhubctl_switch_output("1-1", 2, true).replace("Sent power on", "Sent power off");
    let b = Bench::with("", |h| {
        h.on(&["uhubctl", "-l", "1-1", "-p", "2", "-a", "off"], vec![Reply::ok(&still_on)]);
    });
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    let reasons = b.reasons();
    assert!(
        has(&reasons, "hub 1-1 port 2: still has power after `uhubctl -a off` (uhubctl says `0100 power`)"),
        "{reasons:?}"
    );
    assert!(!phone.calls().contains(&"collect".to_string()), "no soak on a port that is still on");
    assert_eq!(b.port(), ["off", "on"], "given back (on) all the same");

    // Output that names another hub (a wrong `location`) is refused the same way.
    let b = Bench::with("", |h| {
        h.on(
            &["uhubctl", "-l", "1-1", "-p", "2", "-a", "off"],
            vec![Reply::ok(&uhubctl_switch_output("1-2", 2, false))],
        );
    });
    assert_eq!(b.run(&b.phone()).await, AttemptOutcome::Recorded { valid: false });
    assert!(has(&b.reasons(), "printed no new status for this port"), "{:?}", b.reasons());
}

/// Answers every step the desk asks, as `lab confirm` would from another process: each
/// with the values `answers` gives for its step name (none for the others).
fn operator(store: Store, answers: &[(&str, serde_json::Value)]) -> tokio::task::JoinHandle<Vec<String>> {
    let answers: Vec<(String, serde_json::Value)> = answers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    tokio::spawn(async move {
        let mut answered = Vec::new();
        loop {
            for s in store.pending_steps(Some("c1")).unwrap() {
                let values = answers.iter().find(|(k, _)| *k == s.step).map(|(_, v)| v.clone());
                let values = values.and_then(|v| v.as_object().cloned()).unwrap_or_default();
                assert!(store.answer_step(s.id, "ana", "2026-12-01T10:00:00Z", &values).unwrap());
                answered.push(format!("{}@{}", s.step, s.when));
                if answered.len() == 99 {
                    return answered;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

const STEPS: &str = r#"brightness = [40, 60]
[[steps]]
name = "screen"
text = "Set brightness to 50 % and switch battery saver off"
when = "before-trial"
attest = ["brightness", "low_power"]
[[steps]]
name = "look"
text = "Check the phone shows no charging icon"
when = "untether"
confirm = false
"#;

#[tokio::test(start_paused = true)]
async fn an_operator_step_answered_from_the_store_is_attested_with_the_attempt() {
    let mut b = Bench::new(STEPS);
    let answerer =
        operator(b.ctx.store.clone(), &[("screen", serde_json::json!({"brightness": 30.0, "low_power": false}))]);
    let phone = b.phone();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: true });
    answerer.abort();
    let a = b.ctx.store.attempts("c1").unwrap().remove(0);
    assert_eq!(a.attestations.len(), 1, "{:?}", a.attestations);
    let att = &a.attestations[0];
    assert_eq!((att.step.as_str(), att.when.as_str(), att.by.as_str()), ("screen", "before-trial", "ana"));
    assert_eq!(
        serde_json::Value::Object(att.values.clone()),
        serde_json::json!({"brightness": 30.0, "low_power": false})
    );
    // What the lab read stays read; what no API read is filled in as attested.
    assert_eq!(a.state_before["brightness_pct"], serde_json::json!({"state": "known", "value": 50.0, "from": "set"}));
    assert_eq!(a.state_before["low_power"], serde_json::json!({"state": "known", "value": false, "from": "operator"}));
    let events = b.drain();
    let asked: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::OperatorStep { step, confirm, .. } => Some((step.clone(), *confirm)),
            _ => None,
        })
        .collect();
    assert_eq!(asked, [("screen".to_string(), true), ("look".to_string(), false)], "the note is said, not waited on");
    assert!(events.iter().any(|e| matches!(e, Event::OperatorAnswered { by, .. } if by == "ana")));
}

#[tokio::test(start_paused = true)]
async fn an_attested_value_outside_the_preconditions_makes_the_attempt_invalid() {
    // The scripted phone reads no brightness here: the operator's word is all there is.
    let b = Bench::new(&format!("auto_fix = false\n{STEPS}"));
    let answerer =
        operator(b.ctx.store.clone(), &[("screen", serde_json::json!({"brightness": 90.0, "low_power": false}))]);
    let phone = b.phone().without_brightness();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    answerer.abort();
    assert!(has(&b.reasons(), "brightness 90 % before the soak, outside [40, 60] %"), "{:?}", b.reasons());
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_step_expires_into_an_invalid_attempt_and_nothing_waits_forever() {
    let mut b = Bench::new(STEPS);
    let phone = b.phone();
    let start = tokio::time::Instant::now();
    assert_eq!(b.run(&phone).await, AttemptOutcome::Recorded { valid: false });
    let waited = start.elapsed();
    assert!(waited >= Duration::from_secs(1800) && waited < Duration::from_secs(1900), "{waited:?}");
    let reasons = b.reasons();
    assert!(
        has(
            &reasons,
            "operator step `screen` (before-trial: Set brightness to 50 % and switch battery saver off) not answered within 30m (timeouts.operator)"
        ),
        "{reasons:?}"
    );
    assert!(b.ctx.store.pending_steps(None).unwrap().is_empty(), "the step is closed");
    assert!(!phone.calls().contains(&"launch".to_string()), "nothing ran without the operator");
    assert!(b.drain().iter().any(|e| matches!(e, Event::OperatorExpired { step, .. } if step == "screen")));
    assert!(b.ctx.store.attempts("c1").unwrap()[0].attestations.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_manual_tether_is_unplugged_and_plugged_in_through_the_desk() {
    let b = Bench::new("");
    let answerer = operator(b.ctx.store.clone(), &[]);
    let tether = crate::tether::ManualTether::new(b.ctx.desk.clone());
    let phone = b.phone();
    let a = b.attempt(&phone, &tether);
    assert_eq!(a.run().await.unwrap(), AttemptOutcome::Recorded { valid: true });
    answerer.abort();
    let rec = b.ctx.store.attempts("c1").unwrap().remove(0);
    let steps: Vec<(&str, &str)> = rec.attestations.iter().map(|x| (x.step.as_str(), x.when.as_str())).collect();
    assert_eq!(steps, [("unplug", "untether"), ("plug-in", "re-tether")]);
    let calls = phone.calls();
    assert!(calls.contains(&"usb_power:off".to_string()) && phone.usb_powered(), "{calls:?}");
}

#[tokio::test(start_paused = true)]
async fn a_manual_unplug_nobody_confirms_asks_no_plug_in_and_the_attempt_is_invalid() {
    let b = Bench::new("[timeouts]\noperator = \"5m\"\n");
    let tether = crate::tether::ManualTether::new(b.ctx.desk.clone());
    let phone = b.phone();
    let a = b.attempt(&phone, &tether);
    assert_eq!(a.run().await.unwrap(), AttemptOutcome::Recorded { valid: false });
    let reasons = b.reasons();
    assert!(has(&reasons, "untether failed: phone-1: operator step `unplug`"), "{reasons:?}");
    assert!(!reasons.iter().any(|r| r.contains("plug-in")), "no plug-in asked after an unplug nobody did: {reasons:?}");
    assert!(!phone.calls().contains(&"usb_power:off".to_string()));
}

// The host backend's evidence of an app that died, judged by the runner (was in
// device/host/tests.rs, which may not import the runner).
#[tokio::test]
async fn an_app_that_exits_early_died_and_says_how() {
    use crate::device::host::tests::{build, device, trial};

    let tmp = tempfile::tempdir().unwrap();
    let dev = device(tmp.path());
    let b = build(&["sh", "-c", "echo 'cannot reach the server' >&2; exit 3"], None, None);
    let c = trial(&dev, &b, tmp.path(), Duration::from_millis(300)).await;
    assert!(c.evidence.app_died);
    assert_eq!(c.evidence.app_exit.as_deref(), Some("exit code 3; stderr: cannot reach the server"));
    let reasons = super::soak_violations(
        &Default::default(),
        &crate::config::Workload { request_interval: None, request_tolerance: 0.02 },
        Duration::from_millis(300),
        &c.evidence,
        crate::measure::UntetherMode::None,
        "none",
    );
    assert_eq!(reasons, ["app died during the soak (exit code 3; stderr: cannot reach the server)"]);
}
