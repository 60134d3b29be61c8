//! The file a `perfetto` session leaves (`perfetto.protos.Trace`): the power-rail packets
//! of a real captured trace (`power_rails_session_uuid_perfetto.pftrace`) between two
//! battery-counter packets of the model's battery, one when the session starts and one
//! when it ends, as the `android.power` data source polls the health HAL. It is written
//! the way perfetto writes with `write_into_file`: the file exists from the start and
//! grows; a session that is SIGKILLed keeps only what was written.
//!
//! Field numbers (perfetto `protos/perfetto/trace/`): Trace.packet = 1;
//! TracePacket.timestamp = 8, battery = 38; BatteryCounters.charge_counter_uah = 1,
//! capacity_percent = 2 (float), current_ua = 3, voltage_uv = 7.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::phone::{Phone, Power};

const RAILS: &[u8] =
    include_bytes!("../../../tests/fixtures/devices/android/power_rails_session_uuid_perfetto.pftrace");

const VARINT: u8 = 0;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u64, wire: u8) {
    varint(out, field << 3 | u64::from(wire));
}

fn message(out: &mut Vec<u8>, field: u64, body: &[u8]) {
    key(out, field, LEN);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// One `packet { timestamp battery { … } }` of the battery as the health HAL reads it now
/// (the real charger, not what `dumpsys battery unplug` makes BatteryService say).
pub fn battery_packet(p: &Phone) -> Vec<u8> {
    let live = p.battery.live();
    // BatteryManager's sign: current into the battery is positive.
    let current_ua = match p.battery.power {
        Power::None => -p.battery.discharge_ua,
        _ => p.battery.charge_ua,
    } as i64;
    let mut counters = Vec::new();
    key(&mut counters, 1, VARINT);
    varint(&mut counters, live.charge_counter as u64);
    key(&mut counters, 2, FIXED32);
    // The HAL's capacity is whole percent, as `dumpsys battery` shows it.
    counters.extend_from_slice(&f32::from(live.level).to_le_bytes());
    key(&mut counters, 3, VARINT);
    varint(&mut counters, current_ua as u64); // int64: two's complement, 10 bytes when negative
    key(&mut counters, 7, VARINT);
    varint(&mut counters, i64::from(live.voltage) as u64 * 1000);
    let mut packet = Vec::new();
    key(&mut packet, 8, VARINT);
    // CLOCK_BOOTTIME, the data source's clock.
    varint(&mut packet, p.now_ms.saturating_sub(p.boot_ms) * 1_000_000);
    message(&mut packet, 38, &counters);
    let mut out = Vec::new();
    message(&mut out, 1, &packet);
    out
}

/// The session started: the file holds its first battery sample.
pub fn begin(path: &Path, p: &Phone) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(path, battery_packet(p))
}

/// The session ended: the rails it recorded and its last battery sample are appended.
pub fn finish(path: &Path, p: &Phone) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut f = fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(RAILS)?;
    f.write_all(&battery_packet(p))
}

#[cfg(test)]
mod tests {
    use lab::collect::android::perfetto::PowerTrace;

    use super::*;

    #[test]
    fn a_finished_session_decodes_to_the_fixtures_rails_and_the_models_battery() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pftrace");
        let mut p = Phone::new("S", 10_000_000);
        p.battery.power = Power::None;
        begin(&path, &p).unwrap();
        let start = p.battery.live().charge_counter;
        p.advance(10_000_000 + 36_000); // 250 mA for 36 s: 2.5 mAh
        finish(&path, &p).unwrap();

        let bytes = fs::read(&path).unwrap();
        let trace = PowerTrace::parse(&bytes).unwrap();
        assert_eq!(trace.energy_per_rail_uws(), PowerTrace::parse(RAILS).unwrap().energy_per_rail_uws());
        let charge: Vec<i64> = trace.battery.iter().filter_map(|b| b.charge_counter_uah).collect();
        assert_eq!(charge, [start, start - 2_500]);
        assert_eq!(trace.battery[0].current_ua, Some(-250_000));
        assert_eq!(trace.battery[1].ts_ns - trace.battery[0].ts_ns, 36_000_000_000);
        assert_eq!(trace.battery[0].capacity_percent, Some(80.0));
    }
}
