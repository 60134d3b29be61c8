//! lab's Monsoon decoding, and the fake's encoding, checked with Monsoon's own Python API
//! (`monsoon` 0.1.88 from PyPI): the fake's packets (≥ 10 000, calibration packets and
//! dropped ones among them) are decoded by lab and written with the fields the fake meant
//! to encode, the fake's registers and lab's control requests; tests/monsoon_decode_check.py
//! unpacks every packet with the API's `swizzlePacket` (against the fake's fields), feeds
//! the same bytes through the API's own code (pmapi's `USB_protocol` over a stand-in for the
//! pyusb device, HVPM/LVPM, `SampleEngine`) and counts the samples whose bits equal lab's.
//! The test asserts what docs/platforms/monitors.md says: every field as the fake meant it,
//! every compared sample (current and voltage) equal to the API's bit for bit.
//! `LAB_MONSOON_CHECK_DIR=DIR` keeps the files there (to run the script by hand:
//! `python3 tests/monsoon_decode_check.py DIR/hvpm`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::decode::{Decoder, PACKET_LEN};
use super::fake::{Draw, FakeConfig, FakeMonsoon};
use super::fake_packet::ApiPacket;
use super::protocol::{self, op};
use super::{Calibration, Monsoon, MonsoonSettings, Passthrough, UsbLink};
use crate::config::MonsoonModel;

const PACKETS: usize = 12_000;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A draw with fine-range wobble and coarse-range pulses.
fn draw() -> Draw {
    Draw::Custom(std::sync::Arc::new(|t: f64| {
        let pulse = if t.rem_euclid(0.05) < 0.008 { 420.0 } else { 0.0 };
        30.0 + 12.0 * (2.0 * std::f64::consts::PI * 7.0 * t).sin() + pulse
    }))
}

fn write_f64(path: &Path, values: &[f64]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

/// Writes one model's files into `dir`: the packets and lab's samples, the registers, and
/// the control requests lab's session sends.
async fn write_case(dir: &Path, model: MonsoonModel) -> Value {
    std::fs::create_dir_all(dir).unwrap();
    let settings = MonsoonSettings { passthrough: Passthrough::Off, ..MonsoonSettings::new(model, 4.2, 3.0) };

    // lab's session on the fake: the control requests it sends, open to stop.
    let fake = FakeMonsoon::new(FakeConfig::new(model, draw()));
    let log = fake.log();
    let mut monsoon = Monsoon::open(Box::new(fake), "20001", &settings).await.unwrap();
    monsoon.start().await.unwrap();
    monsoon.stop().await.unwrap();
    let out: Vec<Value> = log
        .controls()
        .into_iter()
        .filter(|c| c.setup.request_type == protocol::REQUEST_OUT)
        .map(|c| json!([c.setup.request, c.setup.value, c.setup.index, hex::encode(&c.data)]))
        .collect();

    // The stream: a calibration every 100 ms (12 times the instrument's default, so the
    // windows roll often), a packet in 97 dropped.
    let mut config = FakeConfig::new(model, draw());
    (config.paced, config.drop_every, config.seed, config.keep_packets) = (false, Some(97), 33, true);
    let mut fake = FakeMonsoon::new(config);
    protocol::set(&mut fake, op::MAIN_VOLTAGE, protocol::voltage_raw(settings.voltage_v)).unwrap();
    let mut decoder = Decoder::new(Calibration::read(&mut fake, model).unwrap());
    protocol::start(&mut fake, 100, protocol::SAMPLE_FOREVER).unwrap();
    let (mut bytes, mut first_index, mut calibration_packets) = (Vec::new(), Vec::new(), 0);
    for _ in 0..PACKETS {
        let packet = fake.bulk_in(Duration::from_millis(10)).unwrap().unwrap();
        assert_eq!(packet.len(), PACKET_LEN);
        let parsed = super::decode::Packet::parse(&packet, model);
        calibration_packets +=
            usize::from(parsed.samples.iter().any(|s| s.kind != super::decode::SampleKind::Measurement));
        // Where this packet's first measurement goes in lab's samples (-1: not decoded).
        first_index.push(if decoder.calibrated() { decoder.next_index() as i64 } else { -1 });
        decoder.push(&packet);
        bytes.extend_from_slice(&packet);
    }
    let decoded = decoder.finish();
    let sent = fake.log().sent();
    assert_eq!(sent.len(), PACKETS);
    std::fs::write(dir.join("fake_fields.i32"), fields(&sent)).unwrap();
    let registers: serde_json::Map<String, Value> =
        fake.log().registers().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    std::fs::write(dir.join("packets.bin"), &bytes).unwrap();
    write_f64(&dir.join("lab_main_ma.f64"), &decoded.main_ma);
    write_f64(&dir.join("lab_main_v.f64"), &decoded.main_v);
    let case = json!({
        "model": if model == MonsoonModel::Hvpm { "hvpm" } else { "lvpm" },
        "voltage_v": settings.voltage_v,
        "current_limit_a": settings.current_limit_a,
        "passthrough": settings.passthrough as u8,
        "registers": registers,
        "lab_controls_out": out,
        "first_index": first_index,
        "packets": PACKETS,
        "calibration_packets": calibration_packets,
        "gaps": decoded.gaps.len(),
    });
    std::fs::write(dir.join("case.json"), case.to_string()).unwrap();
    case
}

/// What the fake meant each packet to hold, as the API's `swizzlePacket` returns it: 33
/// little-endian i32 a packet (dropped, flags, count, then per sample six currents, two
/// voltages, the type and the unread byte; zeros past the count).
fn fields(sent: &[ApiPacket]) -> Vec<u8> {
    let mut out = Vec::with_capacity(sent.len() * 33 * 4);
    for p in sent {
        let mut row = vec![i32::from(p.dropped), i32::from(p.flags), p.samples.len() as i32];
        for s in &p.samples {
            row.extend(s.currents);
            row.extend([i32::from(s.main_voltage), i32::from(s.usb_voltage), i32::from(s.sample_type), 0]);
        }
        row.resize(33, 0);
        out.extend(row.iter().flat_map(|v| v.to_le_bytes()));
    }
    out
}

#[test_needs::needs(monsoon_py)]
#[tokio::test]
async fn monsoons_python_api_decodes_the_same_packets_to_the_same_samples() {
    let temp = tempfile::tempdir().unwrap();
    let base = std::env::var_os("LAB_MONSOON_CHECK_DIR").map(PathBuf::from).unwrap_or(temp.path().to_path_buf());
    for (model, name) in [(MonsoonModel::Hvpm, "hvpm"), (MonsoonModel::Lvpm, "lvpm")] {
        let dir = base.join(name);
        let case = write_case(&dir, model).await;
        assert!(case["calibration_packets"].as_u64().unwrap() > 100, "{}", case["calibration_packets"]);
        assert!(case["gaps"].as_u64().unwrap() > 50);
        let run = std::process::Command::new("python3")
            .arg(root().join("tests/monsoon_decode_check.py"))
            .arg(&dir)
            .output()
            .expect("python3 runs");
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let got: Value = serde_json::from_slice(&run.stdout).unwrap();
        eprintln!("{name}: {got}");
        assert_eq!(got["packets_read"], PACKETS, "{got}");
        // The fake's bytes, unpacked by the API, are the fields the fake meant.
        assert_eq!((&got["fields_checked"], &got["fields_differ"]), (&json!(PACKETS), &json!(0)), "{got}");
        assert_eq!(got["first_lab_index"], 0, "the API starts decoding where lab does: {got}");
        let (compared, lab) = (got["compared"].as_u64().unwrap(), got["lab_samples"].as_u64().unwrap());
        assert!(compared >= 25_000 && lab - compared < 128, "{got}");
        // Equal bit for bit, every one (docs/platforms/monitors.md): no tolerance.
        assert_eq!(got["bit_equal_ma"], compared, "{got}");
        assert_eq!(got["bit_equal_v"], compared, "{got}");
        if model == MonsoonModel::Hvpm {
            // LVPM.py's current limit setters call a method it does not have, so only the
            // HVPM's requests are compared.
            assert_eq!(got["api_controls_out"], case["lab_controls_out"], "the API sends what lab sends");
        }
    }
}
