//! Deciding whether a trial attempt counts: pure functions of what was observed.

use std::time::Duration;

use crate::config::{AttestKey, Preconditions, StepWhen, Workload};
use crate::device::{Provenance, Reading, SoakEvidence, StateSnapshot};
use crate::endpoint::AppReport;
use crate::measure::UntetherMode;
use crate::store::Attestation;

/// The label of a soft-untethered attempt whose phone still said it charged after the unplug.
pub const STILL_CHARGING_SOFT: &str =
    "still charging after the software unplug (soft-untethered: the phone stays on USB power)";

/// Problems with the device's state against the runbook's preconditions.
/// `when` is "before", "after" or "during" (the soak). Unknown readings are not
/// violations: the report says which fields could not be read. A value the lab did not
/// read itself says where it came from (the app, an operator, the powerlog).
pub fn precondition_violations(p: &Preconditions, s: &StateSnapshot, when: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some((lo, hi)), Some(b)) = (p.brightness, s.brightness_pct.value())
        && !(lo..=hi).contains(&b)
    {
        let from = source_note(s.brightness_pct.from());
        out.push(format!("brightness {b:.0} % {when} the soak, outside [{lo:.0}, {hi:.0}] %{from}"));
    }
    if let (Some(want), Some(got)) = (p.bluetooth, s.bluetooth_on.value())
        && want != got
    {
        let from = source_note(s.bluetooth_on.from());
        out.push(format!("bluetooth {} {when} the soak, expected {}{from}", on_off(got), on_off(want)));
    }
    if let (Some(want), Some(got)) = (p.wifi, s.wifi_on.value())
        && want != got
    {
        let from = source_note(s.wifi_on.from());
        out.push(format!("wifi {} {when} the soak, expected {}{from}", on_off(got), on_off(want)));
    }
    if let (Some(want), Some(got)) = (p.low_power, s.low_power.value())
        && want != got
    {
        let from = source_note(s.low_power.from());
        out.push(format!("low power mode {} {when} the soak, expected {}{from}", on_off(got), on_off(want)));
    }
    if p.ac_power == Some(true) && s.external_power.value() == Some(false) {
        out.push(format!("host on battery {when} the soak; plug in AC power (ac_power = true)"));
    }
    out
}

/// Fills what the device did not read with what an operator attested at one of `whens`
/// (marked `Provenance::Operator`: shown as attested, never as read). A value the lab
/// read is never replaced.
pub fn fill_attested(s: &mut StateSnapshot, attested: &[Attestation], whens: &[StepWhen]) {
    fn put<T: Copy>(r: &mut Reading<T>, v: T) {
        if r.is_unknown() {
            *r = Reading::Known { value: v, from: Provenance::Operator };
        }
    }
    for a in attested.iter().filter(|a| StepWhen::parse(&a.when).is_some_and(|w| whens.contains(&w))) {
        for (k, v) in &a.values {
            match (AttestKey::parse(k), v.as_f64(), v.as_bool()) {
                (Some(AttestKey::Brightness), Some(pct), _) => put(&mut s.brightness_pct, pct),
                (Some(AttestKey::Bluetooth), _, Some(b)) => put(&mut s.bluetooth_on, b),
                (Some(AttestKey::Wifi), _, Some(b)) => put(&mut s.wifi_on, b),
                (Some(AttestKey::LowPower), _, Some(b)) => put(&mut s.low_power, b),
                (Some(AttestKey::AirplaneMode), _, Some(b)) => put(&mut s.airplane_mode, b),
                _ => {}
            }
        }
    }
}

/// What a reason adds about a value the lab did not read itself.
fn source_note(from: Option<Provenance>) -> &'static str {
    match from {
        None | Some(Provenance::Read | Provenance::Set) => "",
        Some(Provenance::App) => " (reported by the app)",
        Some(Provenance::Operator) => " (attested)",
        Some(Provenance::Powerlog) => " (from the powerlog)",
    }
}

/// Fills `s` with what the app reported (`Provenance::App`): a field no API read, or one
/// only an operator attested (a measurement beats a word: read > app > attested). A field
/// the lab read keeps its reading; where the app says otherwise, the returned labels say
/// so (`moment` is "at launch" or "at the end"), and the reading is what is checked.
pub fn fill_reported(s: &mut StateSnapshot, r: &AppReport, moment: &str) -> Vec<String> {
    let mut labels = Vec::new();
    let mut said = |name: &str, disagree: Option<(String, String)>| {
        if let Some((app, read)) = disagree {
            labels.push(format!("the app reported {name} {app} {moment}, the lab read {read}"));
        }
    };
    let near = |tolerance: f64| move |a: &f64, b: &f64| (a - b).abs() <= tolerance;
    let (charging, external) = r.battery_state.and_then(|b| b.power()).unzip();
    said("brightness", take(&mut s.brightness_pct, r.brightness_pct, near(5.0), pct));
    said("battery", take(&mut s.battery_pct, r.battery_pct, near(2.0), pct));
    said("low_power", take(&mut s.low_power, r.low_power, bool::eq, on_off));
    said("bluetooth", take(&mut s.bluetooth_on, r.bluetooth_on, bool::eq, on_off));
    said("wifi", take(&mut s.wifi_on, r.wifi_on, bool::eq, on_off));
    let thermal = r.thermal_state.map(|t| t.status());
    said("thermal_status", take(&mut s.thermal_status, thermal, |a, b| a == b, |t: u32| t.to_string()));
    said("charging", take(&mut s.charging, charging, bool::eq, yes_no));
    said("external_power", take(&mut s.external_power, external, bool::eq, yes_no));
    labels
}

/// Puts the app's value `said` into `r` unless the lab measured it (read, set, powerlog);
/// then returns (the app's, the lab's) as shown when they do not `agree`.
fn take<T: Copy, S: ToString>(
    r: &mut Reading<T>,
    said: Option<T>,
    agree: impl Fn(&T, &T) -> bool,
    show: fn(T) -> S,
) -> Option<(String, String)> {
    let said = said?;
    match *r {
        Reading::Known { value, from: Provenance::Read | Provenance::Set | Provenance::Powerlog } => {
            (!agree(&said, &value)).then(|| (show(said).to_string(), show(value).to_string()))
        }
        Reading::Unknown | Reading::Known { from: Provenance::App | Provenance::Operator, .. } => {
            *r = Reading::Known { value: said, from: Provenance::App };
            None
        }
    }
}

fn pct(x: f64) -> String {
    format!("{x:.0} %")
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Reasons an attempt is invalid, from the soak's evidence.
pub fn soak_violations(
    p: &Preconditions,
    w: &Workload,
    duration: Duration,
    ev: &SoakEvidence,
    untether: UntetherMode,
    cut_question: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    // Charging breaks a real cut; a soft-untethered phone charges by design (`soak_labels`).
    // The phone's own record says so even when it was off the bus (`SoakEvidence`).
    if matches!(untether, UntetherMode::PowerCut | UntetherMode::ChargingSuspended) && ev.charging_s > 0.0 {
        out.push(format!("the phone charged during the soak — {cut_question} (charging for {:.0} s)", ev.charging_s));
    }
    if ev.lost_contact {
        out.push("device lost contact during the trial".to_string());
    }
    if ev.app_died {
        match &ev.app_exit {
            Some(how) => out.push(format!("app died during the soak ({how})")),
            None => out.push("app died during the soak".to_string()),
        }
    }
    if let Some(m) = ev.measured_duration {
        let off = (m.as_secs_f64() - duration.as_secs_f64()).abs();
        // 2 % or 5 s, whichever is larger: clocks and app start-up jitter a little.
        if off > (0.02 * duration.as_secs_f64()).max(5.0) {
            out.push(format!("soak lasted {:.0} s, expected {:.0} s", m.as_secs_f64(), duration.as_secs_f64()));
        }
    }
    if let (Some(expected), Some(seen)) = (w.expected_requests(duration), ev.requests_seen)
        && !ev.app_died
    {
        let diff = (seen as f64 - expected as f64).abs();
        // One request either way is always allowed: over a window of length T a sender with
        // period P is seen floor(T/P) or floor(T/P) + 1 times, depending on its phase.
        if diff > (w.request_tolerance * expected as f64).max(1.0) {
            let hint =
                if (seen as f64) < 0.5 * expected as f64 { " — is the client answering from a cache?" } else { "" };
            out.push(format!("expected {expected} requests, saw {seen}{hint}"));
        }
    }
    let _ = p;
    out
}

/// What a valid attempt's figures must be read with: a soft-untethered phone's own record
/// of charging during the soak; the phone's packet count of the requests when it differs
/// from the endpoint's by more than `tolerance` (a relative share, one request always
/// allowed); the device's own notes.
pub fn soak_labels(untether: UntetherMode, ev: &SoakEvidence, tolerance: f64) -> Vec<String> {
    let mut out = Vec::new();
    if untether == UntetherMode::SoftUntethered && ev.charging_s > 0.0 {
        out.push(format!("charged for {:.0} s during the soak (soft-untethered: USB power stays on)", ev.charging_s));
    }
    if let (Some(seen), Some(wire)) = (ev.requests_seen, ev.requests_on_wire)
        && (seen as f64 - wire as f64).abs() > (tolerance * seen as f64).max(1.0)
    {
        // Not invalid: the app did its work either way; one of the two counts missed some.
        out.push(format!(
            "the endpoint counted {seen} requests, the phone's packets show {wire} sent to it \
             (a proxy, a second endpoint, or packets the tap dropped)"
        ));
    }
    out.extend(ev.notes.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Reading;

    fn pre() -> Preconditions {
        Preconditions {
            brightness: Some((40.0, 60.0)),
            bluetooth: Some(true),
            wifi: Some(true),
            untethered: true,
            app_foreground: true,
            ..Default::default()
        }
    }

    #[test]
    fn drifted_brightness_and_radios_are_reported_unknown_ones_are_not() {
        let s = StateSnapshot {
            brightness_pct: Reading::read(100.0),
            bluetooth_on: Reading::read(false),
            wifi_on: Reading::Unknown,
            ..Default::default()
        };
        let v = precondition_violations(&pre(), &s, "after");
        assert_eq!(
            v,
            ["brightness 100 % after the soak, outside [40, 60] %", "bluetooth off after the soak, expected on"]
        );
        let ok = StateSnapshot { brightness_pct: Reading::read(50.0), ..Default::default() };
        assert!(precondition_violations(&pre(), &ok, "before").is_empty());
    }

    #[test]
    fn low_power_mode_the_app_reported_breaks_low_power_false() {
        let p = Preconditions { low_power: Some(false), ..Default::default() };
        let on = StateSnapshot {
            low_power: Reading::Known { value: true, from: crate::device::Provenance::App },
            ..Default::default()
        };
        assert_eq!(
            precondition_violations(&p, &on, "after"),
            ["low power mode on after the soak, expected off (reported by the app)"]
        );
        assert!(precondition_violations(&p, &StateSnapshot::default(), "after").is_empty());
    }

    #[test]
    fn a_host_on_battery_breaks_ac_power_and_one_without_a_battery_does_not() {
        let p = Preconditions { ac_power: Some(true), ..Default::default() };
        let on_battery = StateSnapshot { external_power: Reading::read(false), ..Default::default() };
        assert_eq!(
            precondition_violations(&p, &on_battery, "before"),
            ["host on battery before the soak; plug in AC power (ac_power = true)"]
        );
        let desktop = StateSnapshot::default();
        assert!(precondition_violations(&p, &desktop, "before").is_empty());
    }

    #[test]
    fn the_app_fills_what_nobody_read_replaces_an_operators_word_and_never_a_reading() {
        let report = AppReport::parse(
            br#"{"v":1,"at":"end","brightness_pct":80,"low_power":true,"thermal_state":"fair",
                "battery_state":"unplugged","battery_pct":71,"bluetooth_on":true,"wifi_on":true}"#,
        )
        .unwrap();
        let mut s = StateSnapshot {
            brightness_pct: Reading::read(50.0),
            battery_pct: Reading::read(70.0),
            charging: Reading::read(true),
            bluetooth_on: Reading::Known { value: false, from: Provenance::Operator },
            ..Default::default()
        };
        let labels = fill_reported(&mut s, &report, "at the end");
        assert_eq!(
            labels,
            [
                "the app reported brightness 80 % at the end, the lab read 50 %",
                "the app reported charging no at the end, the lab read yes",
            ],
            "battery 71 against 70 agrees"
        );
        assert_eq!(s.brightness_pct, Reading::read(50.0), "the reading is kept");
        assert_eq!(s.battery_pct, Reading::read(70.0));
        let app = |v| Reading::Known { value: v, from: Provenance::App };
        assert_eq!(s.low_power, app(true));
        assert_eq!(s.bluetooth_on, app(true), "the app's measurement beats the operator's word");
        assert_eq!(s.wifi_on, app(true));
        assert_eq!(s.external_power, app(false));
        assert_eq!(s.thermal_status, Reading::Known { value: 1, from: Provenance::App });

        // What the app reports is checked like a reading, and the reason names it.
        let p = Preconditions { bluetooth: Some(false), ..pre() };
        assert_eq!(
            precondition_violations(&p, &s, "after"),
            ["bluetooth on after the soak, expected off (reported by the app)"]
        );
        let logged = StateSnapshot {
            brightness_pct: Reading::Known { value: 100.0, from: Provenance::Powerlog },
            ..Default::default()
        };
        assert_eq!(
            precondition_violations(&pre(), &logged, "during"),
            ["brightness 100 % during the soak, outside [40, 60] % (from the powerlog)"]
        );
    }

    /// What a uhubctl tether on hub 1-1 port 2 asks (`Tether::cut_question`).
    const Q: &str = "does hub 1-1 port 2 really cut VBUS?";

    #[test]
    fn cache_hits_charging_and_short_soaks_invalidate() {
        let w = Workload { request_interval: Some(Duration::from_millis(200)), request_tolerance: 0.02 };
        let d = Duration::from_secs(3600);
        let good = SoakEvidence { requests_seen: Some(17_990), measured_duration: Some(d), ..Default::default() };
        assert!(soak_violations(&pre(), &w, d, &good, UntetherMode::PowerCut, Q).is_empty());
        let cached = SoakEvidence { requests_seen: Some(3), ..Default::default() };
        assert_eq!(
            soak_violations(&pre(), &w, d, &cached, UntetherMode::PowerCut, Q),
            ["expected 18000 requests, saw 3 — is the client answering from a cache?"]
        );
        let charged = SoakEvidence { charging_s: 3412.0, ..Default::default() };
        assert_eq!(
            soak_violations(&pre(), &w, d, &charged, UntetherMode::PowerCut, Q),
            ["the phone charged during the soak — does hub 1-1 port 2 really cut VBUS? (charging for 3412 s)"]
        );
        assert!(!soak_violations(&pre(), &w, d, &charged, UntetherMode::ChargingSuspended, Q).is_empty());
        // A phone only told it is unplugged charges on: labelled, not invalid.
        assert!(soak_violations(&pre(), &w, d, &charged, UntetherMode::SoftUntethered, Q).is_empty());
        assert_eq!(
            soak_labels(UntetherMode::SoftUntethered, &charged, 0.02),
            ["charged for 3412 s during the soak (soft-untethered: USB power stays on)"]
        );
        assert!(soak_labels(UntetherMode::PowerCut, &charged, 0.02).is_empty());
        assert!(soak_labels(UntetherMode::SoftUntethered, &good, 0.02).is_empty());
        // The phone's packets count the requests a second time: a gap is labelled, not invalid.
        let wire = |seen, wire| SoakEvidence {
            requests_seen: Some(seen),
            requests_on_wire: Some(wire),
            notes: vec!["cpu sampling: sysmontap: no answer within 30 s".into()],
            ..Default::default()
        };
        assert_eq!(
            soak_labels(UntetherMode::None, &wire(100, 101), 0.0),
            ["cpu sampling: sysmontap: no answer within 30 s"],
            "one request of phase either way"
        );
        assert_eq!(
            soak_labels(UntetherMode::None, &wire(100, 90), 0.02),
            [
                "the endpoint counted 100 requests, the phone's packets show 90 sent to it (a proxy, a second \
                 endpoint, or packets the tap dropped)",
                "cpu sampling: sysmontap: no answer within 30 s"
            ]
        );
        assert!(soak_violations(&pre(), &w, d, &wire(17_990, 10), UntetherMode::None, Q).is_empty());
        let d20 = Duration::from_secs(20);
        let one_more = SoakEvidence { requests_seen: Some(101), ..Default::default() };
        assert!(
            soak_violations(&pre(), &w, d20, &one_more, UntetherMode::PowerCut, Q).is_empty(),
            "100 expected, 101 is the window's phase"
        );
        let two_more = SoakEvidence { requests_seen: Some(103), ..Default::default() };
        assert_eq!(
            soak_violations(&pre(), &w, d20, &two_more, UntetherMode::PowerCut, Q),
            ["expected 100 requests, saw 103"]
        );
        let died =
            SoakEvidence { app_died: true, app_exit: Some("exit code 3; stderr: boom".into()), ..Default::default() };
        assert_eq!(
            soak_violations(&pre(), &w, d20, &died, UntetherMode::PowerCut, Q),
            ["app died during the soak (exit code 3; stderr: boom)"]
        );
        let short = SoakEvidence { measured_duration: Some(Duration::from_secs(1800)), ..Default::default() };
        assert_eq!(
            soak_violations(&pre(), &w, d, &short, UntetherMode::PowerCut, Q),
            ["soak lasted 1800 s, expected 3600 s"]
        );
    }
}
