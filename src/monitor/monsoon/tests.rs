//! The decoding on hand-made packets, the fake's stream decoded back to its draw, and the
//! session on the fake. Every packet here is hand-made bytes or encoded by the fake's own
//! encoder (`fake_packet.rs`, written from Monsoon's Python API), never by lab's code.

use std::time::Duration;

use super::decode::{Decoder, Packet, SampleKind};
use super::fake::{Draw, FakeConfig, FakeMonsoon};
use super::fake_packet::{ApiPacket, ApiSample, MEASUREMENT, REF_CAL, ZERO_CAL};
use super::protocol::{self, op};
use super::{Calibration, Monsoon, MonsoonError, MonsoonSettings, UsbLink};
use crate::collect::monitor::{Gap, GapLimits, Voltage, WindowFigures};
use crate::config::MonsoonModel;

fn sample(sample_type: u8, coarse: i32, fine: i32, volts: u16) -> ApiSample {
    ApiSample { currents: [coarse, fine, 7, 8, 9, 10], main_voltage: volts, usb_voltage: 11, sample_type }
}

fn packet(dropped: u16, samples: Vec<ApiSample>) -> [u8; 64] {
    ApiPacket { dropped, flags: 0, samples }.bytes()
}

/// The readings every range gives in the calibration packets below.
fn calibrate(decoder: &mut Decoder, dropped: u16, zero: i32, reference: i32) {
    for (sample_type, value) in [(ZERO_CAL, zero), (REF_CAL, reference)] {
        for _ in 0..2 {
            let s = ApiSample { currents: [value; 6], main_voltage: 0, usb_voltage: 0, sample_type };
            decoder.push(&packet(dropped, vec![s; 3]));
        }
    }
}

fn hvpm() -> Calibration {
    Calibration {
        model: MonsoonModel::Hvpm,
        main_fine_scale: 36500.0,
        main_coarse_scale: 6400.0,
        main_fine_zero_offset: 15.0,
        main_coarse_zero_offset: -7.0,
    }
}

#[test]
fn a_packet_is_read_as_the_apis_swizzle_reads_it() {
    let mut bytes = [0u8; 64];
    bytes[..4].copy_from_slice(&[0x34, 0x12, 0x05, 2]);
    // Sample 0: big-endian words 0x0102, 0x0304, …; its type in its 18th byte.
    for k in 0..8u8 {
        bytes[4 + 2 * usize::from(k)..][..2].copy_from_slice(&[k + 1, 2 * k + 2]);
    }
    bytes[4 + 17] = 0x30;
    bytes[4 + 18 + 17] = 0x10 | 0x01;
    // A third sample's bytes past the count are not read.
    bytes[4 + 36 + 17] = 0x30;
    let hv = Packet::parse(&bytes, MonsoonModel::Hvpm);
    assert_eq!((hv.dropped, hv.flags, hv.samples.len()), (0x1234, 5, 2));
    assert_eq!(hv.samples[0].currents, [0x0102, 0x0204, 0x0306, 0x0408, 0x050A, 0x060C]);
    assert_eq!((hv.samples[0].main_voltage, hv.samples[0].usb_voltage), (0x070E, 0x0810));
    assert_eq!((hv.samples[0].kind, hv.samples[1].kind), (SampleKind::RefCal, SampleKind::ZeroCal));
    // The fake's encoder, written apart from this parser, and the parser agree.
    let made = ApiPacket {
        dropped: hv.dropped,
        flags: hv.flags,
        samples: (hv.samples.iter().zip([REF_CAL, ZERO_CAL]))
            .map(|(s, sample_type)| ApiSample {
                currents: s.currents,
                main_voltage: s.main_voltage,
                usb_voltage: s.usb_voltage,
                sample_type,
            })
            .collect(),
    };
    assert_eq!(Packet::parse(&made.bytes(), MonsoonModel::Hvpm), hv);
    // The LVPM's currents are signed.
    bytes[4..6].copy_from_slice(&[0xFF, 0xFE]);
    assert_eq!(Packet::parse(&bytes, MonsoonModel::Lvpm).samples[0].currents[0], -2);
    assert_eq!(Packet::parse(&bytes, MonsoonModel::Hvpm).samples[0].currents[0], 0xFFFE);
    // A short packet is padded with zeros, a count above 3 read as 3.
    assert!(Packet::parse(&bytes[..3], MonsoonModel::Hvpm).samples.is_empty());
    bytes[3] = 9;
    assert_eq!(Packet::parse(&bytes, MonsoonModel::Hvpm).samples.len(), 3);
}

#[test]
fn samples_are_calibrated_with_the_eeprom_and_the_zero_and_reference_readings() {
    let mut decoder = Decoder::new(hvpm());
    // Before calibration, and in the packet that completes it, nothing is decoded.
    decoder.push(&packet(0, vec![sample(MEASUREMENT, 500, 500, 100)]));
    calibrate(&mut decoder, 0, 100, 20100);
    assert!(decoder.calibrated());
    assert_eq!(decoder.position(), 1);
    // Fine (below 64 000), coarse (fine saturated), and a zero reading that is ignored.
    decoder.push(&packet(
        0,
        vec![
            sample(MEASUREMENT, 900, 10115, 16800),
            sample(MEASUREMENT, 1093, 65000, 16800),
            sample(ZERO_CAL, 0, 0, 0),
        ],
    ));
    let out = decoder.finish();
    assert_eq!(out.t0_position, 1);
    // fine: (raw − (15 + 100)) × 36500 / (20100 − 115) / 1000 mA
    let fine = (10115.0 - 115.0) * (36500.0 / (20100.0 - 115.0)) / 1000.0;
    // coarse: (raw − (−7 + 100)) × 6400 / (20100 − 93) mA
    let coarse = (1093.0 - 93.0) * (6400.0 / (20100.0 - 93.0));
    assert_eq!(out.main_ma, vec![fine, coarse]);
    assert!((fine - 18.2637).abs() < 1e-4 && (coarse - 319.888).abs() < 1e-3, "{fine} {coarse}");
    assert_eq!(out.main_v, vec![16800.0 * 62.5e-6 * 4.0; 2]);
    assert!((out.main_v[0] - 4.2).abs() < 1e-12);
}

#[test]
fn an_lvpm_scales_by_its_shunt_resistors_and_switches_range_at_30000() {
    let cal = Calibration::lvpm(3.0, 251.0);
    assert_eq!(cal.main_fine_scale, 35946.0 * (0.05 / (0.05 + 3.0 * 0.0001)));
    let mut decoder = Decoder::new(cal.clone());
    calibrate(&mut decoder, 0, -50, 20000);
    decoder.push(&packet(0, vec![sample(MEASUREMENT, 700, 29999, 8400), sample(MEASUREMENT, 700, 30000, 8400)]));
    let out = decoder.finish();
    let fine = (29999.0 + 50.0) * (cal.main_fine_scale / 20050.0) / 1000.0;
    let coarse = (700.0 + 50.0) * (cal.main_coarse_scale / 20050.0);
    assert_eq!(out.main_ma, vec![fine, coarse]);
    assert_eq!(out.main_v, vec![8400.0 * 62.5e-6 * 2.0; 2]);
}

#[test]
fn a_batch_is_decoded_with_the_calibration_after_its_own_readings() {
    // The API decodes 128 samples at a time, with the windows as they stand after the
    // batch's calibration readings: a new reference reading moves the whole batch.
    let mut decoder = Decoder::new(hvpm());
    calibrate(&mut decoder, 0, 100, 20100);
    let m = sample(MEASUREMENT, 900, 10115, 16800);
    decoder.push(&packet(0, vec![m; 3]));
    let r = ApiSample { currents: [30100; 6], main_voltage: 0, usb_voltage: 0, sample_type: REF_CAL };
    decoder.push(&packet(0, vec![r]));
    let out = decoder.finish();
    let reference = (20100.0 * 4.0 + 30100.0) / 5.0;
    let fine = (10115.0 - 115.0) * (36500.0 / (reference - 115.0)) / 1000.0;
    assert_eq!(out.main_ma, vec![fine; 3]);
}

#[test]
fn dropped_samples_from_the_headers_become_gaps() {
    let mut decoder = Decoder::new(hvpm());
    // The count the run starts with is not a gap; one before calibration moves t0 only.
    calibrate(&mut decoder, 65530, 100, 20100);
    let m = sample(MEASUREMENT, 900, 10115, 16800);
    decoder.push(&packet(65533, vec![m; 3]));
    decoder.push(&packet(65533, vec![m; 2]));
    // 6 more dropped, across the counter's wrap.
    decoder.push(&packet(3, vec![m; 3]));
    let out = decoder.finish();
    assert_eq!(out.t0_position, 0);
    assert_eq!(out.gaps, vec![Gap { at: 0, missing: 3 }, Gap { at: 5, missing: 6 }]);
    assert_eq!(out.main_ma.len(), 8);
}

/// The fake's packets, read straight from it and decoded: each sample is the fake's draw
/// at the sample's time (gaps counted), within the ranges' resolution.
#[test]
fn the_fakes_stream_decodes_back_to_its_draw_at_each_samples_time() {
    for model in [MonsoonModel::Hvpm, MonsoonModel::Lvpm] {
        let draw = Draw::Pulse { base_ma: 40.0, pulse_ma: 250.0, every_s: 0.05, width_s: 0.01 };
        let mut config = FakeConfig::new(model, draw.clone());
        (config.paced, config.drop_every) = (false, Some(50));
        let mut fake = FakeMonsoon::new(config);
        let log = fake.log();
        protocol::set(&mut fake, op::MAIN_VOLTAGE, protocol::voltage_raw(4.2)).unwrap();
        let calibration = Calibration::read(&mut fake, model).unwrap();
        protocol::start(&mut fake, 100, protocol::SAMPLE_FOREVER).unwrap();
        let mut decoder = Decoder::new(calibration);
        for _ in 0..5000 {
            decoder.push(&fake.bulk_in(Duration::from_millis(10)).unwrap().unwrap());
        }
        let out = decoder.finish();
        let (_, dropped_packets) = log.packets();
        assert!(dropped_packets > 50, "{dropped_packets}");
        assert_eq!(out.gaps.len() as u64, dropped_packets, "{model:?}: every dropped packet is a gap");
        let trace = crate::collect::monitor::PowerTrace {
            rate_hz: 5000.0,
            t0_s: out.t0_position as f64 / 5000.0,
            current_a: out.main_ma.iter().map(|&ma| ma as f32).collect(),
            voltage: Voltage::Constant(4.2),
            gaps: out.gaps.clone(),
            unaligned: None,
        };
        for (i, &ma) in out.main_ma.iter().enumerate() {
            let want = draw.ma_at(trace.time_of(i));
            // Coarse counts are ~0.1–0.3 mA, fine ones ~2 µA; the calibration readings are off by
            // up to 3 counts (a mean of 5 of them).
            let tolerance = if want > 100.0 { 1.5 } else { 0.01 };
            assert!((ma - want).abs() < tolerance, "{model:?} sample {i}: {ma} mA, the draw is {want}");
        }
        assert!(out.main_v.iter().all(|v| (v - 4.2).abs() < 1e-3));
    }
}

fn settings(model: MonsoonModel) -> MonsoonSettings {
    MonsoonSettings::new(model, 4.2, 3.0)
}

fn fake(config: FakeConfig) -> (Box<dyn UsbLink>, super::fake::FakeLog) {
    let fake = FakeMonsoon::new(config);
    let log = fake.log();
    (Box::new(fake), log)
}

#[tokio::test]
async fn passthrough_is_set_at_open_and_switched_off_and_on_outside_sampling() {
    let (link, log) = fake(FakeConfig::new(MonsoonModel::Hvpm, Draw::Constant { ma: 50.0 }));
    let mut monsoon = Monsoon::open(link, "20001", &settings(MonsoonModel::Hvpm)).await.unwrap();
    assert_eq!(monsoon.identity["serial"], 20001);
    assert_eq!(monsoon.identity["model"], "HVPM");
    assert_eq!(monsoon.identity["calibration"]["main_coarse_zero_offset"], -7.0);
    assert!((log.voltage_v() - 4.2).abs() < 1e-6);
    assert_eq!(log.register(op::RUN_CURRENT_LIMIT), protocol::hvpm_limit_raw(3.0));
    monsoon.set_passthrough(false).await.unwrap();
    monsoon.start().await.unwrap();
    let refused = monsoon.set_passthrough(true).await.unwrap_err();
    assert!(refused.to_string().contains("before `start` or after `stop`"), "{refused}");
    monsoon.stop().await.unwrap();
    monsoon.set_passthrough(true).await.unwrap();
    assert_eq!(log.passthrough(), vec![2, 0, 1], "auto at open, off, on");
    monsoon.close().await.unwrap();
    assert_eq!(log.voltage_v(), 0.0, "the output is off at close");
    assert!(!log.sampling());
}

#[tokio::test]
async fn a_session_on_the_fake_gives_a_trace_whose_window_has_the_fakes_charge() {
    let draw = Draw::Pulse { base_ma: 40.0, pulse_ma: 250.0, every_s: 0.1, width_s: 0.02 };
    let (link, log) = fake(FakeConfig::new(MonsoonModel::Hvpm, draw.clone()));
    let mut monsoon = Monsoon::open(link, "20001", &settings(MonsoonModel::Hvpm)).await.unwrap();
    monsoon.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let start = monsoon.mark("soak start").await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let end = monsoon.mark("soak end").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let trace = monsoon.stop().await.unwrap();
    let markers = monsoon.markers().to_vec();
    assert_eq!(markers, vec![("soak start".to_string(), start), ("soak end".to_string(), end)]);
    monsoon.close().await.unwrap();
    assert!(end - start > 0.5 && end - start < 0.8, "{start} {end}");
    assert_eq!((trace.rate_hz, trace.gaps.len()), (5000.0, 0));
    let Voltage::Sampled(volts) = &trace.voltage else { panic!("a sampled voltage") };
    assert!(volts.iter().all(|v| (v - 4.2).abs() < 1e-3));
    let figures = WindowFigures::of(&trace, start, end, 0.0, GapLimits::default());
    assert_eq!(figures.invalid, None);
    // The draw over the same sample slots.
    let (from, to) = ((start * 5000.0).ceil() as u64, (end * 5000.0).ceil() as u64);
    let want_ma = (from..to).map(|i| draw.ma_at(i as f64 / 5000.0)).sum::<f64>() / (to - from) as f64;
    let error = (figures.avg_current_ma - want_ma).abs() / want_ma;
    assert!(error < 0.005, "{} mA, the draw averages {want_ma} mA", figures.avg_current_ma);
    let energy = want_ma / 1000.0 * 4.2 * (to - from) as f64 / 5000.0;
    assert!((figures.energy_j - energy).abs() / energy < 0.005, "{} J, the draw gives {energy}", figures.energy_j);
    // The start request as the API sends it: calibration every 1250 ms, no sample limit.
    let start_call = log.controls().into_iter().find(|c| c.setup.request == protocol::START).unwrap();
    assert_eq!((start_call.setup.value, start_call.data), (1250, vec![0xFF; 4]));
    assert_eq!(log.controls().last().unwrap().setup.index, u16::from(op::MAIN_VOLTAGE));
}

#[tokio::test]
async fn a_monsoon_that_leaves_usb_while_sampling_is_an_error_and_the_session_still_closes() {
    let mut config = FakeConfig::new(MonsoonModel::Hvpm, Draw::Constant { ma: 80.0 });
    config.disconnect_after = Some(300);
    let (link, _log) = fake(config);
    let mut monsoon = Monsoon::open(link, "20001", &settings(MonsoonModel::Hvpm)).await.unwrap();
    monsoon.start().await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let marked = monsoon.mark("soak end").await.unwrap_err();
    assert!(matches!(marked, MonsoonError::Lost { .. }), "{marked}");
    let stopped = monsoon.stop().await.unwrap_err();
    let text = stopped.to_string();
    assert!(text.starts_with("the Monsoon 20001 left USB 0.") && text.contains("check its USB cable"), "{text}");
    let closed = monsoon.close().await.unwrap_err();
    assert!(closed.to_string().contains("it may still be on: switch the Monsoon off"), "{closed}");
}

#[tokio::test]
async fn a_wrong_model_or_an_out_of_tolerance_dac_is_refused_with_the_fix() {
    let (link, _) = fake(FakeConfig::new(MonsoonModel::Lvpm, Draw::Constant { ma: 1.0 }));
    let Err(wrong) = Monsoon::open(link, "20001", &settings(MonsoonModel::Hvpm)).await else { panic!() };
    assert!(
        wrong.to_string().contains("is an LVPM, but lab.toml says HVPM; fix: set the monitor's `model = \"lvpm\"`")
    );
    let mut config = FakeConfig::new(MonsoonModel::Hvpm, Draw::Constant { ma: 1.0 });
    config.dac_cal = (0xC000, 0xC800);
    let (link, log) = fake(config);
    let Err(dac) = Monsoon::open(link, "20001", &settings(MonsoonModel::Hvpm)).await else { panic!() };
    assert!(dac.to_string().contains("calibrateVoltage()"), "{dac}");
    assert_eq!(log.voltage_v(), 0.0, "no voltage set");
}
