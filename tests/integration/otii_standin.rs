//! The stand-in Otii 3 TCP server (standins/otii) checked with Qoitech's own Python
//! client, `otii-tcp-client` 1.0.13 from PyPI: tests/otii_client_check.py makes, through
//! the official API, the calls lab's backend makes, and what the client gets is checked
//! against the draw the stand-in was given (docs/platforms/monitors.md). Then lab's own
//! Otii session (`monitor::otii`) on the same stand-in.

use std::time::Duration;

use lab::collect::monitor::{GapLimits, WindowFigures};
use lab::monitor::otii::{OtiiError, Session, SessionSettings};

use crate::common::otii::Otii;
use crate::common::root;

/// The stand-in's draw at `t` s into a recording, amperes (its defaults: a pulse for the
/// first 0.1 s of every second).
fn draw(base_ma: f64, pulse_ma: f64, t: f64) -> f64 {
    (base_ma + if t.rem_euclid(1.0) < 0.1 { pulse_ma } else { 0.0 }) / 1000.0
}

#[test_needs::needs(otii_client)]
#[test]
fn qoitechs_python_client_reserves_records_marks_reads_and_returns_through_the_stand_in() {
    let server = Otii::start(120.0, 380.0, &["--device-name", "Arc 1234"]);
    let out = std::process::Command::new("python3")
        .arg(root().join("tests/otii_client_check.py"))
        .args([server.port.to_string().as_str(), "1.5"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    assert_eq!(got["auto_devices"], serde_json::json!(["Arc 1234"]), "{got}");
    assert_eq!(got["logged_in"], true);
    assert_eq!(got["device"]["name"], "Arc 1234");
    // An error reply as the client reads it: its type and the fields of its message.
    assert_eq!(got["refused"]["type"], "Invalid key value");
    assert_eq!(
        got["refused"]["message"],
        "arc_set_main_voltage Error: \"Invalid key value\"\tInvalid value: \"value\"\tvalue: \"9.9\""
    );
    assert_eq!((got["voltage"].as_f64(), got["samplerate"].as_i64()), (Some(3.8), Some(4000)));
    assert_eq!(got["samplerate_refused"], "Command not valid for device type", "an Arc's rate is not set over TCP");
    assert_eq!(got["running"], false);

    // Every sample the client read, summed, is the stand-in's draw summed over the
    // recording's samples: the values came through whole and in order.
    let count = got["count"].as_u64().unwrap();
    assert!((5900..=6400).contains(&count), "1.5 s at 4 kHz: {count}");
    assert_eq!(got["values"].as_u64(), Some(count), "the client's chunked read gives every sample");
    assert_eq!(got["interval"].as_f64(), Some(1.0 / 4000.0));
    let want: f64 = (0..count).map(|i| draw(120.0, 380.0, i as f64 / 4000.0)).sum::<f64>() / 4000.0;
    let charge = got["charge"].as_f64().unwrap();
    assert!((charge - want).abs() < 1e-9, "charge {charge} C, the draw gives {want}");
    let energy = got["stats_energy"].as_f64().unwrap();
    assert!((energy - want * 3.8).abs() < 1e-9, "energy {energy} J at 3.8 V, the draw gives {}", want * 3.8);
    assert_eq!(got["info"]["sample_rate"], 4000);
    // A running recording's channel info says where its samples end so far (lab's markers).
    let live = got["info_running"]["to"].as_f64().unwrap();
    assert!(live > 1.4 && live < 2.0 && live <= count as f64 / 4000.0, "{got}");

    // The server's side: both licences back, the markers in order inside the recording.
    let state = server.state();
    assert!(state["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false), "{state}");
    let recording = &state["recordings"][0];
    let markers = recording["markers"].as_array().unwrap();
    let texts: Vec<&str> = markers.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["soak start", "soak end"]);
    let (start, end) = (markers[0]["timestamp"].as_f64().unwrap(), markers[1]["timestamp"].as_f64().unwrap());
    assert!(start < 0.5 && end > 1.4 && end <= recording["seconds"].as_f64().unwrap(), "{recording}");
    let commands: Vec<&str> = state["commands"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(commands.first(), Some(&"otii_is_logged_in"));
    assert_eq!(commands.last(), Some(&"otii_return_license"));
    assert_eq!(commands.iter().filter(|c| **c == "otii_reserve_license").count(), 2, "{commands:?}");
    assert_eq!(commands.iter().filter(|c| **c == "otii_return_license").count(), 2, "{commands:?}");
}

fn settings() -> SessionSettings {
    SessionSettings {
        voltage_v: 3.8,
        current_limit_a: 2.0,
        device: None,
        sample_rate_hz: None,
        timeout: Duration::from_secs(5),
    }
}

/// lab's own Otii session on the stand-in: a licence reserved and returned, the supply
/// set, a recording with markers at the window's start and end, and the window's energy
/// from the samples read back equal to the stand-in's draw over that window.
#[tokio::test]
async fn a_session_records_a_marked_window_whose_energy_is_the_draws_integral() {
    let server = Otii::start(150.0, 350.0, &["--device-name", "Arc 1234"]);
    let address = format!("127.0.0.1:{}", server.port);
    let mut s = Session::open(&address, &settings()).await.unwrap();
    assert_eq!(s.identity["name"], "Arc 1234");
    let state = server.state();
    assert_eq!((state["voltage"].as_f64(), state["max_current"].as_f64()), (Some(3.8), Some(2.0)));
    assert_eq!(state["licences"][0]["reserved"], true, "{state}");
    s.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let from = s.mark("soak start").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let to = s.mark("soak end").await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let trace = s.stop().await.unwrap();
    s.close().await.unwrap();

    assert_eq!(trace.rate_hz, 4000.0);
    let w = WindowFigures::of(&trace, from, to, 0.0, GapLimits::default());
    assert_eq!(w.invalid, None, "{w:?}");
    // The draw at the same sample times: the stand-in's known integral over the window.
    let inside: Vec<f64> = (0..trace.current_a.len())
        .map(|i| i as f64 / 4000.0)
        .filter(|t| *t >= from && *t < to)
        .map(|t| draw(150.0, 350.0, t))
        .collect();
    let want = inside.iter().sum::<f64>() / 4000.0 * 3.8;
    assert!((w.energy_j - want).abs() <= want * 0.005, "{} J, the draw gives {want} J", w.energy_j);
    assert_eq!(w.samples, inside.len() as u64);

    let state = server.state();
    assert!(state["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false), "returned: {state}");
    assert_eq!(state["main_on"], false);
    let markers = &state["recordings"][0]["markers"];
    assert_eq!(markers[0]["text"], "soak start");
    // Where the session put them (to the last bit or two: JSON numbers are parsed by the
    // stand-in without serde_json's exact float round trip).
    let (m0, m1) = (markers[0]["timestamp"].as_f64().unwrap(), markers[1]["timestamp"].as_f64().unwrap());
    assert!((m0 - from).abs() < 1e-12 && (m1 - to).abs() < 1e-12, "markers at {m0}, {m1}; sent {from}, {to}");
}

/// The official client sets an Ace's main-current rate on the stand-in as lab does, and
/// reads its samples at that rate.
#[test_needs::needs(otii_client)]
#[test]
fn qoitechs_python_client_sets_an_aces_sample_rate_on_the_stand_in() {
    let server = Otii::start(120.0, 380.0, &["--type", "Ace", "--device-name", "Ace 7"]);
    let out = std::process::Command::new("python3")
        .arg(root().join("tests/otii_client_check.py"))
        .args([server.port.to_string().as_str(), "1.0", "Ace"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["samplerate"], 1000, "{got}");
    assert_eq!(got["samplerate_refused"], serde_json::Value::Null, "{got}");
    assert_eq!(server.state()["sample_rate"], 1000.0);
}

/// An Ace's sample rate is set as `lab.toml` says; an Arc's is left (the server sets none).
#[tokio::test]
async fn an_aces_sample_rate_is_set_and_an_arcs_is_not_asked_for() {
    let server = Otii::start(100.0, 0.0, &["--type", "Ace", "--device-name", "Ace 7"]);
    let ace = SessionSettings { voltage_v: 12.0, sample_rate_hz: Some(1000), ..settings() };
    let mut s = Session::open(&format!("127.0.0.1:{}", server.port), &ace).await.unwrap();
    s.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let trace = s.stop().await.unwrap();
    s.close().await.unwrap();
    assert_eq!(trace.rate_hz, 1000.0);
    assert!((400..=700).contains(&trace.current_a.len()), "{} samples in about 0.5 s", trace.current_a.len());
    let state = server.state();
    assert_eq!((state["sample_rate"].as_f64(), state["voltage"].as_f64()), (Some(1000.0), Some(12.0)));

    let server = Otii::start(100.0, 0.0, &[]);
    let arc = SessionSettings { sample_rate_hz: Some(4000), ..settings() };
    Session::open(&format!("127.0.0.1:{}", server.port), &arc).await.unwrap().close().await.unwrap();
    let commands = server.state()["commands"].clone();
    assert!(!commands.as_array().unwrap().iter().any(|c| c == "arc_set_channel_samplerate"), "{commands}");
}

#[tokio::test]
async fn refusals_an_unreachable_server_and_no_free_licence_are_errors_that_say_so() {
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = Session::open(&format!("127.0.0.1:{port}"), &settings()).await.err().unwrap();
    assert!(matches!(e, OtiiError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains("fix: start the Otii 3 server there"), "{e}");

    let server = Otii::start(100.0, 0.0, &[]);
    let address = format!("127.0.0.1:{}", server.port);
    // A voltage the Arc refuses: the licence goes back before the error comes out.
    let high = SessionSettings { voltage_v: 9.0, ..settings() };
    let e = Session::open(&address, &high).await.err().unwrap();
    assert_eq!(e.to_string(), "the Otii server refused `arc_set_main_voltage`: Invalid key value (`value` = 9.0)");
    assert!(server.state()["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false));
    let named = SessionSettings { device: Some("Arc 9".into()), ..settings() };
    let e = Session::open(&address, &named).await.err().unwrap();
    assert_eq!(e.to_string(), format!("the Otii server at {address} has no instrument `Arc 9`; it has: Arc (Arc)"));

    // A licence is its user's (Otii 3): a second session of the same user uses the one
    // the first reserved, and only the first returns it.
    let one = Session::open(&address, &settings()).await.unwrap();
    let two = Session::open(&address, &settings()).await.unwrap();
    assert_eq!((one.licence().is_some(), two.licence()), (true, None));
    two.close().await.unwrap();
    assert!(server.state()["licences"].as_array().unwrap().iter().any(|l| l["reserved"] == true));
    one.close().await.unwrap();
    assert!(server.state()["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false));

    // Every licence held by someone else: none is free.
    let taken = Otii::start(100.0, 0.0, &["--others-hold", "2"]);
    let e = Session::open(&format!("127.0.0.1:{}", taken.port), &settings()).await.err().unwrap();
    assert!(matches!(e, OtiiError::NoLicence { .. }), "{e}");
    assert!(e.to_string().contains("fix: return one in Otii 3"), "{e}");
}

/// A trace's samples as `.npy` load in NumPy in one line, value for value.
#[test_needs::needs(scipy)]
#[test]
fn a_traces_samples_as_npy_load_in_numpy_in_one_line() {
    let values: Vec<f32> = (0..40_000).map(|i| 0.1 + 0.4 * ((i % 4000) < 400) as u8 as f32 + i as f32 * 1e-7).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("current.npy");
    std::fs::write(&file, lab::collect::monitor::npy_f32(&values)).unwrap();
    let script = "import math, sys, numpy\na = numpy.load(sys.argv[1])\nprint(a.dtype, a.shape[0], math.fsum(a.tolist()), float(a[12345]))";
    let out = std::process::Command::new("python3").args(["-c", script]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(got[..2], ["float32", "40000"], "{text}");
    let sum: f64 = values.iter().map(|&v| f64::from(v)).sum();
    let (their_sum, their_one): (f64, f64) = (got[2].parse().unwrap(), got[3].parse().unwrap());
    assert!((their_sum - sum).abs() < 1e-9 * sum, "{their_sum} vs {sum}");
    assert_eq!(their_one, f64::from(values[12345]), "a float32 comes back bit for bit");
}
