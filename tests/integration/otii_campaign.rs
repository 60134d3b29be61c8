//! Whole campaigns through `lab run` on the stand-in Otii 3 TCP server (standins/otii):
//! a host device (this machine, running a real process) supplied by the stand-in's Arc,
//! whose draw is known in closed form, so every soak's energy can be checked against the
//! integral between the markers the server recorded. Then the exit paths: Ctrl-C, a lost
//! connection, the server killed mid-soak, and a server that is not there.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::TempLab;
use crate::common::otii::Otii;
use crate::common::sshd;

const VOLTS: f64 = 3.85;
const BASE_MA: f64 = 120.0;
const PULSE_MA: f64 = 380.0;

/// A lab of this machine as a `host` device, on the Otii server at `port` (this machine).
fn lab(port: u16) -> TempLab {
    TempLab::from_text(&format!(
        r#"
[lab]
name = "otii-lab"
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
tether = "none"
monitor = "arc-1"

[[monitor]]
name = "arc-1"
kind = "otii"
host = "local"
address = "127.0.0.1:{port}"
device = "Arc 1234"
voltage_v = {VOLTS}
"#
    ))
}

/// A runbook of two builds × `repeats` soaks of `duration` on board-1.
fn runbook(lab: &TempLab, duration: &str, repeats: u32, retries: u32) -> String {
    let path = lab.dir.path().join("runbook.toml");
    std::fs::write(
        &path,
        format!(
            r#"
name = "otii-check"
duration = "{duration}"
repeats = {repeats}
retries = {retries}
devices = ["board-1"]
[builds.a]
baseline = true
[builds.a.host]
command = ["sleep", "600"]
[builds.b.host]
command = ["sleep", "601"]
[monitor]
warmup = "200ms"
"#
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// ∫ draw dt over [from, to] s of a recording, joules: the stand-in's base current plus its
/// pulse in the first 0.1 s of every second, at `VOLTS`.
fn integral(from: f64, to: f64) -> f64 {
    let pulse_time = |t: f64| t.floor() * 0.1 + (t - t.floor()).min(0.1);
    VOLTS * (BASE_MA * (to - from) + PULSE_MA * (pulse_time(to) - pulse_time(from))) / 1000.0
}

/// The marker `text…` of a recording, its time.
fn marker(recording: &Value, text: &str) -> Option<f64> {
    let found =
        recording["markers"].as_array()?.iter().find(|m| m["text"].as_str().is_some_and(|t| t.starts_with(text)));
    found?["timestamp"].as_f64()
}

fn licences_free(state: &Value) -> bool {
    state["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false)
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn each_soak_energy_is_the_integral_between_the_servers_markers_and_the_licence_goes_back() {
    let server = Otii::start(BASE_MA, PULSE_MA, &["--device-name", "Arc 1234"]);
    let lab = lab(server.port);
    let rb = runbook(&lab, "1500ms", 2, 0);
    let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    let state = server.state();
    let recordings = state["recordings"].as_array().unwrap();
    assert_eq!(recordings.len(), 4, "one recording a soak: {state}");
    assert!(licences_free(&state), "the licence was returned: {state}");
    let commands: Vec<&str> = state["commands"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(commands.iter().filter(|c| **c == "otii_reserve_license").count(), 1, "{commands:?}");
    assert_eq!(commands.last(), Some(&"otii_return_license"));
    assert_eq!(state["voltage"], VOLTS);
    assert_eq!(state["main_on"], false, "the output is off after the campaign");

    assert_eq!(check_energies(&lab, &state), 4, "every soak was measured");
    let id = &lab.campaigns()[0];

    // The figures in the store, labelled as the monitor's and with its identity.
    let rows: Vec<(f64, String)> = {
        let conn = rusqlite::Connection::open(lab.store()).unwrap();
        let mut st = conn.prepare("SELECT value, source FROM measurements WHERE metric = 'monitor_energy_j'").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(rows.len(), 4);
    for (j, source) in &rows {
        assert!(*j > 0.5 && *j < 2.0, "{j} J");
        assert!(source.starts_with("power monitor (J): arc-1"), "{source}");
        assert!(source.contains("Arc 1234"), "the instrument's identity: {source}");
    }
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(id).join("manifest.json")).unwrap())
            .unwrap();
    let monitor = &manifest["devices"][0]["monitor"];
    assert_eq!(monitor["name"], "arc-1", "{manifest}");
    assert_eq!(monitor["instrument"]["name"], "Arc 1234", "{monitor}");
    let html = std::fs::read_to_string(lab.artifacts().join(id).join("report.html")).unwrap();
    assert!(html.contains("Power over the soak"), "the report plots the monitor's power");
}

/// The energies of the campaign's soaks against the stand-in's integral over the true soak
/// (between the moments the server placed the markers, less the warm-up): how many were
/// checked.
fn check_energies(lab: &TempLab, state: &Value) -> usize {
    let mut checked = 0;
    for (dir, rec, got) in soaks(lab, state) {
        let (start, end) = (placed(&rec, "soak start"), placed(&rec, "soak end"));
        assert!(end - start > 0.9 && end - start < 3.0, "the markers span the soak: {start}..{end}");
        let want = integral(start + 0.2, end);
        assert!((got - want).abs() / want < 0.005, "{}: {got} J, the integral is {want} J ({rec})", dir.display());
        // Every sample is kept: 4 kHz over the recording, loadable as float32.
        let npy = std::fs::read(dir.join("current.npy")).unwrap();
        assert!(npy.starts_with(b"\x93NUMPY"), "a .npy file");
        assert!(npy.len() > 4 * 4000, "{} bytes", npy.len());
        checked += 1;
    }
    checked
}

/// Each soak's attempt folder, the server's recording whose markers are its window's (the
/// times lab gave), and the energy lab measured.
fn soaks(lab: &TempLab, state: &Value) -> Vec<(std::path::PathBuf, Value, f64)> {
    let recordings = state["recordings"].as_array().unwrap();
    let id = &lab.campaigns()[0];
    let mut found = Vec::new();
    for dir in std::fs::read_dir(lab.artifacts().join(id)).unwrap().map(|e| e.unwrap().path()) {
        let Ok(text) = std::fs::read_to_string(dir.join("current.json")) else { continue };
        let about: Value = serde_json::from_str(&text).unwrap();
        let (start, end) = (about["window"]["start_s"].as_f64().unwrap(), about["window"]["end_s"].as_f64().unwrap());
        let rec = recordings
            .iter()
            .find(|r| marker(r, "soak start") == Some(start) && marker(r, "soak end") == Some(end))
            .unwrap_or_else(|| panic!("no recording on the server has markers at {start} and {end}: {state}"));
        found.push((dir, rec.clone(), about["figures"]["energy_j"].as_f64().unwrap()));
    }
    found
}

#[test_needs::needs(sshd)]
#[test]
fn an_otii_server_on_a_lab_host_is_reached_through_the_hosts_ssh_forward() {
    let s = sshd::start();
    let server = Otii::start(BASE_MA, PULSE_MA, &["--device-name", "Arc 1234"]);
    // The server is on the lab host (this machine, seen through its sshd): lab connects
    // to the host's 127.0.0.1:PORT through an SSH forward.
    let device = format!("board-ssh-{}", std::process::id());
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"remote-otii\"\n\n{}\n[[device]]\nname = \"{device}\"\nhost = \"shelf-1\"\nplatform = \"host\"\n\
         model = \"dev board\"\nmonitor = \"arc-1\"\n\n[[monitor]]\nname = \"arc-1\"\nkind = \"otii\"\nhost = \"shelf-1\"\n\
         address = \"127.0.0.1:{}\"\ndevice = \"Arc 1234\"\nvoltage_v = {VOLTS}\n",
        s.host_table(""),
        server.port
    ));
    let rb = runbook(&lab, "1s", 1, 0);
    let text = std::fs::read_to_string(&rb).unwrap().replace("board-1", &device);
    std::fs::write(&rb, text).unwrap();
    let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let state = server.state();
    assert_eq!(check_energies(&lab, &state), 2);
    assert!(licences_free(&state), "{state}");
}

#[test]
fn ctrl_c_mid_soak_stops_the_recording_and_returns_the_licence() {
    let server = Otii::start(BASE_MA, PULSE_MA, &["--device-name", "Arc 1234"]);
    let lab = lab(server.port);
    let rb = runbook(&lab, "60s", 1, 0);
    let mut child = lab.process(&["run", &rb]).stdout(std::process::Stdio::null()).spawn().unwrap();
    wait_for("a recording running", Duration::from_secs(60), || {
        server.state()["recordings"].as_array().is_some_and(|r| r.iter().any(|r| r["running"] == true))
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let state = server.state();
    assert!(licences_free(&state), "{state}");
    assert!(state["recordings"].as_array().unwrap().iter().all(|r| r["running"] == false), "{state}");
    assert_eq!(state["main_on"], false);
    assert!(lab.sql::<i64>("SELECT count(*) FROM attempts")[0] == 0, "nothing partial recorded");
}

#[test]
fn a_lost_connection_spoils_that_attempt_which_is_run_again_and_the_licence_still_goes_back() {
    // The server hangs up on every connection 0.5 s into the first recording; it stays up.
    let server = Otii::start(BASE_MA, PULSE_MA, &["--device-name", "Arc 1234", "--hang-up-after-s", "0.5"]);
    let lab = lab(server.port);
    let rb = runbook(&lab, "1500ms", 1, 1);
    let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE status = 'invalid'");
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("power monitor lost during the recording"), "{}", reasons[0]);
    assert!(reasons[0].contains("closed the connection"), "{}", reasons[0]);
    assert_eq!(lab.sql::<i64>("SELECT count(*) FROM attempts WHERE status = 'valid'")[0], 2);
    let state = server.state();
    assert!(licences_free(&state), "the licence the lost connection held was returned too: {state}");
}

#[test]
fn the_server_killed_mid_soak_spoils_the_attempt_and_the_device_goes_offline_with_exit_3() {
    let mut server = Some(Otii::start(BASE_MA, PULSE_MA, &["--device-name", "Arc 1234"]));
    let port = server.as_ref().unwrap().port;
    let lab = lab(port);
    let rb = runbook(&lab, "3s", 1, 1);
    let child = lab
        .process(&["run", &rb])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-soak: the soak's start marker placed (a recording merely started may still be
    // waiting for its first samples, and a kill then fails the start, not the recording).
    wait_for("a recording soaking", Duration::from_secs(60), || {
        server.as_ref().unwrap().state()["recordings"].as_array().is_some_and(|r| {
            r.iter().any(|r| {
                r["running"] == true
                    && r["markers"].as_array().is_some_and(|m| {
                        m.iter().any(|m| m["text"].as_str().is_some_and(|t| t.starts_with("soak start")))
                    })
            })
        })
    });
    drop(server.take()); // killed
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    // The attempt it killed, then its retry, which found no server: the device went
    // offline, its trial pending for `--resume`.
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts ORDER BY attempt");
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].contains("power monitor lost during the recording"), "{}", reasons[0]);
    assert!(reasons[1].contains("cannot reach the Otii server at 127.0.0.1:"), "{}", reasons[1]);
    assert!(text.contains("OFFLINE"), "{text}");
    assert_eq!(lab.sql::<String>("SELECT status FROM campaigns"), ["interrupted"], "its trials wait for --resume");
}

#[test]
fn a_server_that_is_not_there_is_exit_3_before_any_trial() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let lab = lab(port);
    let rb = runbook(&lab, "1s", 1, 0);
    let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains(&format!("cannot reach the Otii server at 127.0.0.1:{port}")), "{text}");
    assert!(text.contains("fix: start the Otii 3 server there"), "{text}");
    assert_eq!(lab.sql::<i64>("SELECT count(*) FROM attempts")[0], 0, "no trial ran");
}

/// ∫ draw dt over [from, to] s after a recording was started (answered), joules, of a
/// stand-in started with `--ramp-ma-per-s RAMP_MA_PER_S`: the integral above plus the ramp.
fn ramped_integral(from: f64, to: f64) -> f64 {
    integral(from, to) + VOLTS * RAMP_MA_PER_S * (to * to - from * from) / 2.0 / 1000.0
}

const RAMP_MA_PER_S: f64 = 40.0;

/// When marker `text…` of a recording was placed, seconds after the recording was started
/// (on the device's own time): the server's record of when it told the time the marker
/// carries. The marker came in soon after.
fn placed(recording: &Value, text: &str) -> f64 {
    let found = recording["markers"].as_array().unwrap().iter().find(|m| m["text"].as_str().unwrap().starts_with(text));
    let m = found.unwrap_or_else(|| panic!("no marker {text}: {recording}"));
    let placed = m["placed_s"].as_f64().unwrap_or_else(|| panic!("the marker carries no time the server told: {m}"));
    let received = m["received_s"].as_f64().unwrap();
    assert!((0.0..0.5).contains(&(received - placed)), "the marker was logged when its time was taken: {m}");
    placed
}

#[test]
fn a_server_that_samples_half_a_second_after_it_answers_is_measured_on_the_instruments_clock() {
    // The instrument starts sampling 0.5 s after `project_start_recording` is answered, and
    // the draw grows 40 mA a second, so a window 0.5 s off would be 6 % off on these soaks.
    let ramp = RAMP_MA_PER_S.to_string();
    let server = Otii::start(
        BASE_MA,
        PULSE_MA,
        &["--device-name", "Arc 1234", "--late-start-s", "0.5", "--ramp-ma-per-s", &ramp],
    );
    let lab = lab(server.port);
    let rb = runbook(&lab, "2s", 1, 0);
    let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let state = server.state();
    let soaks = soaks(&lab, &state);
    assert_eq!(soaks.len(), 2, "{state}");
    for (_, rec, got) in soaks {
        assert!((rec["late_s"].as_f64().unwrap() - 0.5).abs() < 1e-6, "{rec}");
        // The true soak: between the moments the server placed the markers, on the device's
        // own time, less the 0.2 s warm-up.
        let (start, end) = (placed(&rec, "soak start"), placed(&rec, "soak end"));
        let want = ramped_integral(start + 0.2, end);
        assert!((got - want).abs() / want < 0.005, "{got} J, the true soak's integral is {want} J ({rec})");
        // What a window on this machine's clock would have measured: far off.
        let shifted = ramped_integral(start + 0.2 - 0.5, end - 0.5);
        assert!((shifted - want).abs() / want > 0.03, "the ramp makes a misplaced window show: {shifted} vs {want}");
    }
}

#[test]
fn samples_the_instrument_lost_or_never_took_make_the_attempt_invalid_with_the_reason() {
    // On each recording's own clock; the soak starts at once, the window from 0.2 s.
    let faults: [(&str, &[&str], &str); 3] = [
        ("nulls", &["--null-s", "0.6:1.1"], "the power monitor's samples have a gap of 500.0 ms in the soak window"),
        (
            "a dropped run",
            &["--drop-s", "0.6:1.1"],
            "the power monitor's samples have a gap of 500.0 ms in the soak window",
        ),
        ("sampling that stops", &["--sample-for-s", "0.9"], "the Otii's recording advanced 0.8"),
    ];
    for (what, args, reason) in faults {
        let mut all = vec!["--device-name", "Arc 1234"];
        all.extend_from_slice(args);
        let server = Otii::start(BASE_MA, PULSE_MA, &all);
        let lab = lab(server.port);
        let rb = runbook(&lab, "1500ms", 1, 0);
        let out = lab.cmd(&["run", &rb]).timeout(Duration::from_secs(120)).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(4), "{what}: every trial failed, nothing else: {text}");
        let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
        assert_eq!(reasons.len(), 2, "{what}: {reasons:?}");
        for r in &reasons {
            assert!(r.contains(&format!("power monitor: {reason}")), "{what}: {r}");
        }
        // Every figure a number: nothing missing became a NaN on its way to the store.
        let values: Vec<f64> = lab.sql("SELECT value FROM measurements WHERE metric LIKE 'monitor_%'");
        assert!(!values.is_empty() && values.iter().all(|v| v.is_finite()), "{what}: {values:?}");
        assert!(licences_free(&server.state()), "{what}");
    }
}
