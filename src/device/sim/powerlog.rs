//! The powerlog a simulated iPhone leaves: its battery timeline, screen brightness and
//! Bluetooth written as an iOS powerlog database (the real tables' names and columns, a
//! subset of them), so a simulated trial reads its untethered evidence and its soak's
//! state the way a real iPhone's are read (`collect::powerlog`).
//!
//! The powerlog clock runs `CLOCK_OFFSET_S` behind wall time, with the time-offset row
//! that says so, as a phone whose clock was set after boot does: the reader must apply it.

use rusqlite::{Connection, MAIN_DB, params};

use super::dump::DumpHeader;
use super::log::{EventKind, TrialLog};

pub const POWERLOG_FILE: &str = "powerlog.PLSQL";

/// Wall time (Unix seconds) of the simulated device clock's zero: 2026-01-01T00:00:00Z.
pub const WALL_EPOCH_S: f64 = 1_767_225_600.0;

/// The powerlog clock is this far behind wall time.
const CLOCK_OFFSET_S: f64 = 3600.0;

const DDL: &str = "
CREATE TABLE 'PLBatteryAgent_EventBackward_Battery' ('ID' INTEGER PRIMARY KEY AUTOINCREMENT, 'timestamp' REAL,
  'Level' REAL, 'Voltage' INTEGER, 'InstantAmperage' INTEGER, 'AppleRawCurrentCapacity' INTEGER,
  'IsCharging' INTEGER, 'Temperature' REAL, 'ExternalConnected' INTEGER);
CREATE TABLE 'PLStorageOperator_EventForward_TimeOffset' ('ID' INTEGER PRIMARY KEY AUTOINCREMENT, 'timestamp' REAL,
  'baseband' REAL, 'kernel' REAL, 'system' REAL);
CREATE TABLE 'PLDisplayAgent_EventForward_Display' ('ID' INTEGER PRIMARY KEY AUTOINCREMENT, 'timestamp' REAL,
  'Brightness' REAL);
CREATE TABLE 'PLBluetoothAgent_EventForward_DeviceState' ('ID' INTEGER PRIMARY KEY AUTOINCREMENT, 'timestamp' REAL,
  'DevicePowered' INTEGER);
";

/// The launch's wall time: the device clock's launch time after `WALL_EPOCH_S`.
pub fn launch_wall_s(header: &DumpHeader) -> f64 {
    WALL_EPOCH_S + header.launched_at.as_secs_f64()
}

/// The trial's battery records as a powerlog database, its bytes.
pub fn write(header: &DumpHeader, log: &TrialLog) -> rusqlite::Result<Vec<u8>> {
    let mut conn = Connection::open_in_memory()?;
    conn.execute_batch(DDL)?;
    let launch = launch_wall_s(header) - CLOCK_OFFSET_S;
    conn.execute(
        "INSERT INTO PLStorageOperator_EventForward_TimeOffset (timestamp, baseband, kernel, system)
         VALUES (?1, 0, 0, ?2)",
        params![launch - 60.0, CLOCK_OFFSET_S],
    )?;
    let mut st = conn.prepare(
        "INSERT INTO PLBatteryAgent_EventBackward_Battery (timestamp, Level, Voltage, InstantAmperage,
            AppleRawCurrentCapacity, IsCharging, Temperature, ExternalConnected)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for r in &log.records {
        st.execute(params![
            launch + r.t.as_secs_f64(),
            f64::from(r.level_pct),
            (header.voltage_v * 1000.0).round() as i64,
            r.current_ma.round() as i64,
            r.charge_mah as i64,
            i64::from(r.charging),
            r.temp_c,
            i64::from(r.external_power),
        ])?;
    }
    drop(st);
    // Brightness as recent iOS logs it, a 0–1 fraction: at launch, then at every change.
    let mut st =
        conn.prepare("INSERT INTO PLDisplayAgent_EventForward_Display (timestamp, Brightness) VALUES (?1, ?2)")?;
    st.execute(params![launch, log.brightness_pct / 100.0])?;
    for e in &log.events {
        if let EventKind::Brightness { pct } = e.kind {
            st.execute(params![launch + e.t.as_secs_f64(), pct / 100.0])?;
        }
    }
    drop(st);
    conn.execute(
        "INSERT INTO PLBluetoothAgent_EventForward_DeviceState (timestamp, DevicePowered) VALUES (?1, ?2)",
        params![launch, i64::from(log.bluetooth_on)],
    )?;
    Ok(conn.serialize(MAIN_DB)?.to_vec())
}
