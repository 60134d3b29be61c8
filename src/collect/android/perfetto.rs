//! A Perfetto trace (`perfetto.protos.Trace`, the `.pftrace` of an `android.power` session):
//! power rails (energy per rail) and battery counters, read with the wire reader in
//! [`protobuf`](crate::collect::android::protobuf) so that no protoc is needed. Other packets are skipped.
//!
//! Field numbers (perfetto `protos/perfetto/trace/`): Trace.packet = 1; TracePacket.timestamp = 8,
//! battery = 38, power_rails = 40; PowerRails.rail_descriptor = 1, energy_data = 2,
//! session_uuid = 3; RailDescriptor.index = 1, rail_name = 2, subsys_name = 3; EnergyData.index = 1,
//! timestamp_ms = 2, energy = 3; BatteryCounters.charge_counter_uah = 1, capacity_percent = 2,
//! current_ua = 3, current_avg_ua = 4, name = 5, energy_counter_uwh = 6, voltage_uv = 7.

use std::collections::HashMap;

use serde::Serialize;

use crate::collect::android::protobuf::{WireField, WireReader};
use crate::collect::parse_error::ParseError;
use crate::measure::{BATTERY_PCT, Series};

pub const SRC_PERFETTO_BATTERY: &str = "perfetto battery counters";

/// One power rail's cumulative energy counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rail {
    pub name: String,
    pub subsystem: Option<String>,
    /// In time order; samples with equal times keep the trace's order.
    pub samples: Vec<EnergySample>,
}

/// One reading of a rail's cumulative energy counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EnergySample {
    /// The sample's own `timestamp_ms` in ns, else its packet's timestamp.
    pub ts_ns: u64,
    pub energy_uws: u64,
    /// The timestamp of the packet that carried it, when it had one.
    pub packet_ts_ns: Option<u64>,
}

/// One `BatteryCounters` packet; a field the phone did not send is `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatterySample {
    pub ts_ns: u64,
    /// Set only on phones with several batteries.
    pub name: Option<String>,
    pub charge_counter_uah: Option<i64>,
    pub capacity_percent: Option<f32>,
    pub current_ua: Option<i64>,
    pub current_avg_ua: Option<i64>,
    pub energy_counter_uwh: Option<i64>,
    pub voltage_uv: Option<i64>,
}

/// What an `android.power` trace says: rails by name (in the order they were described)
/// and battery samples in time order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PowerTrace {
    pub rails: Vec<Rail>,
    pub battery: Vec<BatterySample>,
    pub packets: usize,
}

/// An energy sample before its rail is known: descriptors may come after the data that
/// uses their index, and each session (`session_uuid`) numbers its rails on its own.
struct PendingEnergy {
    session: u64,
    index: u32,
    sample: EnergySample,
}

#[derive(Default)]
struct Decoder {
    trace: PowerTrace,
    /// (session_uuid, index) → position in `trace.rails`.
    rail_of: HashMap<(u64, u32), usize>,
    pending: Vec<PendingEnergy>,
}

impl PowerTrace {
    /// Decodes a whole trace; a truncated or garbled one is an error naming the byte.
    pub fn parse(bytes: &[u8]) -> Result<PowerTrace, ParseError> {
        let mut d = Decoder::default();
        for f in WireReader::new(bytes) {
            let f = f?;
            if f.number == 1 {
                d.packet(&f)?;
            }
        }
        Ok(d.finish())
    }

    /// Energy per rail over the trace in µWs: the counter's last value minus its first, as
    /// trace processor's counters give it (rails with one sample have used nothing visible).
    pub fn energy_per_rail_uws(&self) -> Vec<(String, u64)> {
        self.rails
            .iter()
            .filter_map(|r| {
                let (first, last) = (r.samples.first()?.energy_uws, r.samples.last()?.energy_uws);
                Some((r.name.clone(), last.saturating_sub(first)))
            })
            .collect()
    }

    /// The battery level (capacity_percent) over the trace, in seconds since the first
    /// battery sample; samples without a level are left out.
    pub fn battery_pct_series(&self) -> Series {
        let t0 = self.battery.first().map_or(0, |b| b.ts_ns);
        let points = self
            .battery
            .iter()
            .filter_map(|b| Some(((b.ts_ns.saturating_sub(t0)) as f64 / 1e9, f64::from(b.capacity_percent?))))
            .collect();
        Series::new(BATTERY_PCT, "%", SRC_PERFETTO_BATTERY, points)
    }
}

impl Decoder {
    fn packet(&mut self, packet: &WireField<'_>) -> Result<(), ParseError> {
        self.trace.packets += 1;
        let mut ts = None;
        let mut rails = Vec::new();
        let mut battery = Vec::new();
        for f in packet.message()? {
            let f = f?;
            match f.number {
                8 => ts = Some(f.varint()?),
                38 => battery.push(f),
                40 => rails.push(f),
                _ => {}
            }
        }
        // The timestamp may follow the payload in the encoding, so payloads are read last.
        for r in &rails {
            self.power_rails(r, ts)?;
        }
        for b in &battery {
            self.battery(b, ts.unwrap_or(0))?;
        }
        Ok(())
    }

    fn power_rails(&mut self, f: &WireField<'_>, packet_ts: Option<u64>) -> Result<(), ParseError> {
        let mut session = 0;
        let mut descriptors = Vec::new();
        let mut energy = Vec::new();
        for g in f.message()? {
            let g = g?;
            match g.number {
                1 => descriptors.push(g),
                2 => energy.push(g),
                3 => session = g.varint()?,
                _ => {}
            }
        }
        for d in &descriptors {
            self.descriptor(session, d)?;
        }
        for e in &energy {
            let (mut index, mut ts_ms, mut uws) = (0, None, 0);
            for h in e.message()? {
                let h = h?;
                match h.number {
                    1 => index = h.uint32()?,
                    2 => ts_ms = Some(h.varint()?),
                    3 => uws = h.varint()?,
                    _ => {}
                }
            }
            // The sample's own time wins over the packet's, as in trace processor.
            let ts_ns = match ts_ms {
                Some(ms) => ms.saturating_mul(1_000_000),
                None => packet_ts.unwrap_or(0),
            };
            let sample = EnergySample { ts_ns, energy_uws: uws, packet_ts_ns: packet_ts };
            self.pending.push(PendingEnergy { session, index, sample });
        }
        Ok(())
    }

    fn descriptor(&mut self, session: u64, f: &WireField<'_>) -> Result<(), ParseError> {
        let (mut index, mut name, mut subsystem) = (0, None, None);
        for g in f.message()? {
            let g = g?;
            match g.number {
                1 => index = g.uint32()?,
                2 => name = Some(g.string()?),
                3 => subsystem = Some(g.string()?),
                _ => {}
            }
        }
        let name = name.unwrap_or_else(|| format!("rail_{index}"));
        // One rail per name: a later session that describes the same rail continues it.
        let pos = match self.trace.rails.iter().position(|r| r.name == name) {
            Some(p) => p,
            None => {
                self.trace.rails.push(Rail { name, subsystem, samples: Vec::new() });
                self.trace.rails.len() - 1
            }
        };
        self.rail_of.insert((session, index), pos);
        Ok(())
    }

    fn battery(&mut self, f: &WireField<'_>, ts_ns: u64) -> Result<(), ParseError> {
        let mut b = BatterySample {
            ts_ns,
            name: None,
            charge_counter_uah: None,
            capacity_percent: None,
            current_ua: None,
            current_avg_ua: None,
            energy_counter_uwh: None,
            voltage_uv: None,
        };
        for g in f.message()? {
            let g = g?;
            match g.number {
                1 => b.charge_counter_uah = Some(g.int64()?),
                2 => b.capacity_percent = Some(g.float()?),
                3 => b.current_ua = Some(g.int64()?),
                4 => b.current_avg_ua = Some(g.int64()?),
                5 => b.name = Some(g.string()?),
                6 => b.energy_counter_uwh = Some(g.int64()?),
                7 => b.voltage_uv = Some(g.int64()?),
                _ => {}
            }
        }
        self.trace.battery.push(b);
        Ok(())
    }

    fn finish(mut self) -> PowerTrace {
        for p in std::mem::take(&mut self.pending) {
            let pos = match self.rail_of.get(&(p.session, p.index)) {
                Some(&pos) => pos,
                // Data for a rail that was never described keeps its index as a name.
                None => {
                    let name = format!("rail_{}", p.index);
                    self.trace.rails.push(Rail { name, subsystem: None, samples: Vec::new() });
                    let pos = self.trace.rails.len() - 1;
                    self.rail_of.insert((p.session, p.index), pos);
                    pos
                }
            };
            self.trace.rails[pos].samples.push(p.sample);
        }
        // Stable sorts: equal times keep the order they were recorded in.
        for r in &mut self.trace.rails {
            r.samples.sort_by_key(|s| s.ts_ns);
        }
        self.trace.battery.sort_by_key(|b| b.ts_ns);
        self.trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds wire bytes by hand: (field, varint) and (field, nested bytes).
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    fn v(field: u32, x: u64) -> Vec<u8> {
        let mut o = Vec::new();
        varint(&mut o, u64::from(field) << 3);
        varint(&mut o, x);
        o
    }
    fn msg(field: u32, body: &[u8]) -> Vec<u8> {
        let mut o = Vec::new();
        varint(&mut o, (u64::from(field) << 3) | 2);
        varint(&mut o, body.len() as u64);
        o.extend_from_slice(body);
        o
    }
    fn f32_field(field: u32, x: f32) -> Vec<u8> {
        let mut o = Vec::new();
        varint(&mut o, (u64::from(field) << 3) | 5);
        o.extend_from_slice(&x.to_bits().to_le_bytes());
        o
    }

    fn battery_packet(ts: u64, pct: f32, charge: i64, current: i64) -> Vec<u8> {
        let b = [f32_field(2, pct), v(1, charge as u64), v(3, current as u64), v(7, 3_900_000)].concat();
        msg(1, &[v(8, ts), msg(38, &b)].concat())
    }

    #[test]
    fn battery_counters_give_samples_and_the_pct_series() {
        let trace = [
            battery_packet(3_000_000_000, 99.0, 2_000_000, -150_000),
            battery_packet(1_000_000_000, 100.0, 2_001_000, 200_000),
        ]
        .concat();
        let t = PowerTrace::parse(&trace).unwrap();
        assert_eq!(t.battery.len(), 2);
        let b = &t.battery[0];
        assert_eq!((b.ts_ns, b.capacity_percent, b.charge_counter_uah), (1_000_000_000, Some(100.0), Some(2_001_000)));
        assert_eq!((b.current_ua, b.voltage_uv, b.current_avg_ua), (Some(200_000), Some(3_900_000), None));
        assert_eq!(t.battery[1].current_ua, Some(-150_000));
        let s = t.battery_pct_series();
        assert_eq!((s.name.as_str(), s.source.as_str()), (BATTERY_PCT, SRC_PERFETTO_BATTERY));
        assert_eq!(s.points, vec![(0.0, 100.0), (2.0, 99.0)]);
    }

    #[test]
    fn battery_counters_map_to_level_drop_and_charge_used() {
        let trace =
            [battery_packet(1_000_000_000, 100.0, 2_001_000, 0), battery_packet(5_000_000_000, 98.0, 1_950_500, 0)]
                .concat();
        let ms = crate::collect::metrics_map::perfetto(&PowerTrace::parse(&trace).unwrap());
        let got: Vec<(&str, f64, &str)> = ms.iter().map(|m| (m.metric.as_str(), m.value, m.source.as_str())).collect();
        assert_eq!(
            got,
            [
                ("battery_drop_pct", 2.0, SRC_PERFETTO_BATTERY),
                ("charge_used_mah", 50.5, "perfetto battery charge counter")
            ]
        );
    }

    #[test]
    fn energy_before_its_descriptor_and_undescribed_rails() {
        let data = msg(2, &[v(1, 7), v(2, 5), v(3, 40)].concat());
        let later = msg(2, &[v(1, 7), v(2, 9), v(3, 100)].concat());
        let orphan = msg(2, &[v(1, 2), v(3, 1)].concat());
        let desc = msg(1, &[v(1, 7), msg(2, b"S4M_VDD_CPU")].concat());
        let trace = [
            msg(1, &[v(8, 1), msg(40, &data)].concat()),
            msg(1, &[v(8, 2), msg(40, &[later, orphan].concat())].concat()),
            msg(1, &msg(40, &desc)),
        ]
        .concat();
        let t = PowerTrace::parse(&trace).unwrap();
        assert_eq!(t.rails.len(), 2);
        let pairs = |r: &Rail| r.samples.iter().map(|s| (s.ts_ns, s.energy_uws, s.packet_ts_ns)).collect::<Vec<_>>();
        assert_eq!(t.rails[0].name, "S4M_VDD_CPU");
        assert_eq!(pairs(&t.rails[0]), [(5_000_000, 40, Some(1)), (9_000_000, 100, Some(2))]);
        // No timestamp_ms: the packet's time.
        assert_eq!((t.rails[1].name.as_str(), pairs(&t.rails[1])), ("rail_2", vec![(2, 1, Some(2))]));
        assert_eq!(t.energy_per_rail_uws(), vec![("S4M_VDD_CPU".to_string(), 60), ("rail_2".to_string(), 0)]);
    }

    #[test]
    fn a_wrong_wire_type_in_a_packet_is_an_error_not_a_skip() {
        let trace = msg(1, &msg(8, b"x"));
        let e = PowerTrace::parse(&trace).unwrap_err();
        assert_eq!(e.to_string(), "byte 4: field 8: expected a varint, found a length-delimited value");
    }
}
