//! The stand-in Otii 3 TCP server (standins/otii) checked with Qoitech's own Python
//! client, `otii-tcp-client` 1.0.13 from PyPI: tests/otii_client_check.py makes, through
//! the official API, the calls lab's backend makes, and what the client gets is checked
//! against the draw the stand-in was given (docs/platforms/monitors.md).

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
