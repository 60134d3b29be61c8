//! The powerlog a sysdiagnose carries (`logs/powerlogs/powerlog_<date>_<id>.PLSQL`): a
//! SQLite database made from the real schema (tests/fixtures/devices/ios/
//! powerlog_core_schema.sql), holding a battery series around a soak window — plugged in
//! before it, unplugged inside (but for `charging_s` seconds of charging in its middle),
//! plugged in again at its end — one time-offset row, display and Bluetooth rows. As
//! src/device/sim/powerlog.rs does, the powerlog clock runs `CLOCK_OFFSET_S` behind
//! wall time and the offset row says so.

use rusqlite::{Connection, MAIN_DB, params};

const SCHEMA: &str = include_str!("../../../tests/fixtures/devices/ios/powerlog_core_schema.sql");
const CLOCK_OFFSET_S: f64 = 3600.0;
/// Logged before and after the window, plugged in.
pub const MARGIN_S: f64 = 300.0;
/// A battery row a minute, as the phone logs when its level moves.
const STEP_S: f64 = 60.0;
/// iPhone 13 Pro's design capacity (mAh).
const DESIGN_MAH: f64 = 3095.0;
const START_PCT: f64 = 80.0;
/// Drain off power and gain on it, per hour.
const DRAIN_PCT_PER_H: f64 = 6.0;
const CHARGE_PCT_PER_H: f64 = 40.0;

/// The soak window `[from, to]` (wall time, Unix seconds) and the seconds charged inside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub from: f64,
    pub to: f64,
    pub charging_s: f64,
}

impl Window {
    /// The charging stretch inside the window, centred (empty when `charging_s` is 0).
    fn charging(&self) -> (f64, f64) {
        let start = self.from + (self.to - self.from - self.charging_s) / 2.0;
        (start, start + self.charging_s)
    }

    fn powered(&self, t: f64) -> bool {
        let (a, b) = self.charging();
        t < self.from || t >= self.to || (self.charging_s > 0.0 && t >= a && t < b)
    }

    /// Every row's time: a minute apart, and each change of power exactly.
    fn times(&self) -> Vec<f64> {
        let (a, b) = self.charging();
        let mut t: Vec<f64> = Vec::new();
        let mut at = self.from - MARGIN_S;
        while at <= self.to + MARGIN_S {
            t.push(at);
            at += STEP_S;
        }
        t.extend([self.from, self.to]);
        if self.charging_s > 0.0 {
            t.extend([a, b]);
        }
        t.sort_by(f64::total_cmp);
        t.dedup();
        t
    }
}

/// The database's bytes.
pub fn write(w: &Window) -> rusqlite::Result<Vec<u8>> {
    let mut conn = Connection::open_in_memory()?;
    conn.execute_batch(SCHEMA)?;
    let clock = |wall: f64| wall - CLOCK_OFFSET_S;
    let first = w.from - MARGIN_S;
    conn.execute(
        "INSERT INTO PLStorageOperator_EventForward_TimeOffset (timestamp, baseband, kernel, system) VALUES (?1, 0, 0, ?2)",
        params![clock(first) - 60.0, CLOCK_OFFSET_S],
    )?;
    conn.execute(
        "INSERT INTO PLDisplayAgent_EventForward_Display (timestamp, Brightness, SliderValue) VALUES (?1, 0.5, 50)",
        params![clock(first)],
    )?;
    // Off for the soak, as the lab asks of a phone.
    conn.execute(
        "INSERT INTO PLBluetoothAgent_EventForward_DeviceState (timestamp, DeviceConnectable, DeviceConnected,
            DeviceDiscoverable, DevicePowered) VALUES (?1, 0, 0, 0, 0)",
        params![clock(first)],
    )?;
    let mut st = conn.prepare(
        "INSERT INTO PLBatteryAgent_EventBackward_Battery (timestamp, Level, Voltage, AppleRawCurrentCapacity,
            DesignCapacity, IsCharging, ExternalConnected, FullyCharged, Temperature)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, 30.0)",
    )?;
    let mut level = START_PCT;
    let mut last = first;
    for t in w.times() {
        // The level moves by what the stretch since the last row did.
        let rate = if w.powered(last) { CHARGE_PCT_PER_H } else { -DRAIN_PCT_PER_H };
        level = (level + rate * (t - last) / 3600.0).clamp(1.0, 100.0);
        last = t;
        let on = i64::from(w.powered(t));
        st.execute(params![
            clock(t),
            level,
            (3700.0 + level * 5.0).round() as i64,
            (DESIGN_MAH * level / 100.0).round() as i64,
            DESIGN_MAH as i64,
            on,
            on,
        ])?;
    }
    drop(st);
    Ok(conn.serialize(MAIN_DB)?.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_changes_at_the_window_and_around_the_charging_stretch() {
        let w = Window { from: 1000.0, to: 4600.0, charging_s: 600.0 };
        assert!(w.powered(999.0) && !w.powered(1000.0) && w.powered(4600.0));
        assert!(w.powered(2500.0) && w.powered(3099.0) && !w.powered(3100.0) && !w.powered(2499.0));
        let t = w.times();
        for edge in [1000.0, 2500.0, 3100.0, 4600.0] {
            assert!(t.contains(&edge), "{edge}");
        }
        assert!(t.windows(2).all(|p| p[0] < p[1]));
        assert!(!Window { from: 0.0, to: 100.0, charging_s: 0.0 }.powered(50.0));
    }

    #[test]
    fn the_database_has_the_real_tables() {
        let bytes = write(&Window { from: 1000.0, to: 2000.0, charging_s: 0.0 }).unwrap();
        assert!(bytes.starts_with(b"SQLite format 3\0"));
        let mut conn = Connection::open_in_memory().unwrap();
        let len = bytes.len();
        conn.deserialize_read_exact(MAIN_DB, bytes.as_slice(), len, true).unwrap();
        let n: i64 =
            conn.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0)).unwrap();
        assert!(n >= 5, "{n} tables");
        let rows: i64 =
            conn.query_row("SELECT COUNT(*) FROM PLBatteryAgent_EventBackward_Battery", [], |r| r.get(0)).unwrap();
        assert_eq!(rows as usize, 1 + (1000 + 2 * 300) / 60 + 1, "a row a minute and the window's ends");
    }
}
