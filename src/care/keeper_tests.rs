//! The care loop on simulated phones behind a scripted hub: what it switches, what it
//! leaves alone, and that it gives back every port it cut.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::{CareEvent, CareSummary, CareTarget, Keeper};
use crate::clock::Clock;
use crate::config::{Lab, parse_lab};
use crate::device::sim::SimDevice;
use crate::store::{LeaseRequest, Store};
use crate::testing::{Reply, ScriptedTransport, answer_uhubctl_port, uhubctl_port_listing, uhubctl_switch_output};
use crate::tether::UhubctlTether;

/// `a` on port 1 at 90 %, `b` on port 2 at 60 %, `usb` (reachable over USB only) on port 3 at 90 %.
const LAB: &str = r#"
[lab]
name = "t"
[care]
charge = [40, 80]
interval = "10m"
[[device]]
name = "a"
platform = "sim"
model = "Pixel 5"
tether = { uhubctl = { location = "1-1", port = 1 } }
[device.sim]
emulates = "android"
battery_start_pct = 90
[[device]]
name = "b"
platform = "sim"
model = "Pixel 5"
tether = { uhubctl = { location = "1-1", port = 2 } }
[device.sim]
emulates = "android"
battery_start_pct = 60
[[device]]
name = "usb"
platform = "sim"
model = "Pixel 5"
tether = { uhubctl = { location = "1-1", port = 3 } }
[device.sim]
emulates = "android"
battery_start_pct = 90
usb_only = true
"#;

struct Bench {
    lab: Lab,
    hub: Arc<ScriptedTransport>,
    clock: Clock,
}

impl Bench {
    fn new(clock: Clock) -> Bench {
        let hub = Arc::new(ScriptedTransport::new("local"));
        for port in 1..=3 {
            // The simulated phone is on no bus: the tether switches without waiting.
            answer_uhubctl_port(&hub, "1-1", port);
        }
        Bench { lab: parse_lab(LAB, std::path::Path::new("lab.toml")).unwrap(), hub, clock }
    }

    fn targets(&self, names: &[&str]) -> Vec<CareTarget> {
        names
            .iter()
            .map(|n| {
                let spec = self.lab.device(n).unwrap().clone();
                let crate::config::TetherSpec::Uhubctl { location, port, .. } = spec.tether.clone() else {
                    panic!("{n} is not on a hub")
                };
                let tether = UhubctlTether::new(self.hub.clone(), &location, port, None);
                CareTarget {
                    device: Arc::new(SimDevice::with_clock(spec, self.clock.clone())),
                    tether: Box::new(tether),
                    port: format!("{location}:{port}"),
                }
            })
            .collect()
    }

    fn keeper(&self, names: &[&str], store: Option<Store>) -> (Keeper, mpsc::UnboundedReceiver<CareEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Keeper::new(&self.lab.care, self.clock.clone(), store, tx, self.targets(names)), rx)
    }

    /// The switching calls (`-a off|on`), in order; the listings between them left out.
    fn switches(&self) -> Vec<String> {
        self.hub.calls_of("uhubctl").into_iter().filter(|c| c.contains(" -a ")).collect()
    }
}

fn drain(rx: &mut mpsc::UnboundedReceiver<CareEvent>) -> Vec<CareEvent> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_stop_switches_on_every_port_care_cut_and_only_those() {
    let bench = Bench::new(Clock::tokio());
    let (keeper, mut rx) = bench.keeper(&["a", "b"], None);
    let (stop, shutdown) = watch::channel(false);
    let run = tokio::spawn(keeper.run(shutdown, false, None));
    // Half an hour of care in paused time: `a` (90 %) is cut at once; `b` charges inside its
    // window (60 → about 72 %: 1000 mA into 4080 mAh) and is left on.
    tokio::time::sleep(Duration::from_secs(1800)).await;
    stop.send(true).unwrap();
    let summary: CareSummary = run.await.unwrap();
    assert_eq!(bench.switches(), ["-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on"]);
    assert_eq!((summary.cuts, summary.restores), (1, 0), "the stop's `on` is not a care decision");
    assert!(summary.not_restored.is_empty(), "{summary:?}");
    let b = summary.levels.iter().find(|(d, _)| d == "b").and_then(|(_, l)| *l).unwrap();
    assert!((60.0..80.0).contains(&b), "{b}");
    let events = drain(&mut rx);
    assert!(events.contains(&CareEvent::Restored { device: "a".into(), port: "1-1:1".into() }), "{events:?}");
    // `b` is charging: looked at every minute at first (its rate unknown), then when it is
    // predicted to reach 80 %, capped by the 10-minute interval — the loop sleeps, never spins.
    assert!((4..=12).contains(&summary.passes), "{summary:?}");
}

#[tokio::test]
async fn a_device_another_holds_is_left_alone_and_a_cut_port_is_recorded_for_its_next_holder() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("lab.db")).unwrap();
    let campaign = LeaseRequest {
        purpose: "campaign".into(),
        campaign: Some("c1".into()),
        runbook: Some("rb".into()),
        host: "bench-1".into(),
        ..LeaseRequest::default()
    };
    let held = store.try_lease("a", &campaign).unwrap().unwrap();
    let bench = Bench::new(Clock::virtual_clock());
    let (keeper, mut rx) = bench.keeper(&["a"], Some(store.clone()));
    let summary = keeper.run(watch::channel(false).1, true, None).await;
    assert!(bench.switches().is_empty(), "{:?}", bench.switches());
    assert_eq!(summary.levels, [("a".to_string(), None)]);
    let events = drain(&mut rx);
    let [CareEvent::Busy { device, by, .. }] = events.as_slice() else { panic!("{events:?}") };
    assert_eq!(device, "a");
    assert!(by.starts_with("held by campaign c1 (runbook rb) on bench-1"), "{by}");
    assert!(store.battery_readings("a").unwrap().is_empty());

    // The campaign let it go: care takes the phone, cuts its port (90 %) and says so in the
    // store while the port is off.
    drop(held);
    let (keeper, _rx) = bench.keeper(&["a"], Some(store.clone()));
    let mut keeper = keeper;
    keeper.pass().await;
    assert_eq!(bench.switches(), ["-l 1-1 -p 1 -a off"]);
    assert_eq!(store.port_cut("a").unwrap().map(|c| c.port), Some("1-1:1".to_string()));
    assert!(store.lease_holder("a").unwrap().is_none(), "care holds a phone only during its pass");
    // A campaign takes it between passes: care leaves it (and its port) to the campaign.
    let held = store.try_lease("a", &campaign).unwrap().unwrap();
    keeper.pass().await;
    let summary = keeper.finish().await;
    assert_eq!(bench.switches(), ["-l 1-1 -p 1 -a off"], "care switched a held phone's port");
    assert!(summary.not_restored.is_empty());
    assert!(store.port_cut("a").unwrap().is_some(), "the holder is told to switch it on");
    drop(held);
    // The holder gave the phone back without using it (a `--no-wait` run that found another
    // phone busy): the port is still off, and the next care takes it up again.
    let (mut keeper, _rx) = bench.keeper(&["a"], Some(store.clone()));
    keeper.pass().await;
    keeper.finish().await;
    assert_eq!(bench.switches().last().map(String::as_str), Some("-l 1-1 -p 1 -a on"), "{:?}", bench.switches());
    assert!(store.port_cut("a").unwrap().is_none(), "on again: no longer a cut");
    let readings = store.battery_readings("a").unwrap();
    assert_eq!(readings.len(), 2, "one per pass that had the phone");
    assert_eq!(
        (readings[0].health_pct, readings[0].cycle_count, readings[0].source.as_str()),
        (Some(100.0), Some(0), "sim")
    );
}

#[tokio::test]
async fn a_usb_only_phone_care_cut_gets_its_port_back_to_be_read() {
    let bench = Bench::new(Clock::virtual_clock());
    let (keeper, mut rx) = bench.keeper(&["usb"], None);
    // Two passes 10 minutes apart (the interval), then the stop.
    let summary = keeper.run(watch::channel(false).1, false, Some(Duration::from_secs(600))).await;
    assert_eq!(
        bench.switches(),
        ["-l 1-1 -p 3 -a off", "-l 1-1 -p 3 -a on", "-l 1-1 -p 3 -a off", "-l 1-1 -p 3 -a on"],
        "cut, on to read, cut again (still above 80 %), on at the stop"
    );
    assert_eq!(summary.passes, 2);
    let events = drain(&mut rx);
    assert!(
        events.iter().any(|e| matches!(e, CareEvent::Switched { on: true, why, .. } if why.contains("to read it"))),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_port_that_does_not_come_back_on_is_named() {
    // A hub that cuts port 1 and then does not answer for it any more.
    let hub = Arc::new(ScriptedTransport::new("local"));
    hub.on(&["uhubctl", "-l", "1-1", "-p", "1", "-a", "off"], vec![Reply::ok(&uhubctl_switch_output("1-1", 1, false))]);
    hub.on(&["uhubctl", "-l", "1-1", "-p", "1", "-a", "on"], vec![Reply::fail(1, "hub gone")]);
    hub.on(&["uhubctl", "-l", "1-1", "-p", "1"], vec![Reply::ok(&uhubctl_port_listing("1-1", 1, "0100 power"))]);
    let bench = Bench { hub, ..Bench::new(Clock::virtual_clock()) };
    let (keeper, mut rx) = bench.keeper(&["a"], None);
    let summary = keeper.run(watch::channel(false).1, true, None).await;
    assert_eq!(summary.not_restored, ["1-1:1"]);
    assert_eq!(bench.switches(), ["-l 1-1 -p 1 -a off", "-l 1-1 -p 1 -a on", "-l 1-1 -p 1 -a on"], "tried twice");
    assert!(
        drain(&mut rx).iter().any(|e| matches!(e, CareEvent::NotRestored { error, .. } if error.contains("hub gone")))
    );
}
