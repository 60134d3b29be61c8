//! The powerlog a simulated iPhone leaves: its battery timeline, screen brightness and
//! Bluetooth written as an iOS powerlog database (the real tables' names and columns, a
//! subset of them), so a simulated trial reads its untethered evidence and its soak's
//! state the way a real iPhone's are read (`collect::ios::powerlog`).
//!
//! The powerlog clock runs `CLOCK_OFFSET_S` behind wall time, with the time-offset row
//! that says so, as a phone whose clock was set after boot does: the reader must apply it.

use std::cell::RefCell;

use rusqlite::{Connection, MAIN_DB, params};

use super::dump::DumpHeader;
use super::log::{EventKind, TrialLog};
use crate::collect::ParseError;
use crate::collect::ios::powerlog::{Layout, Powerlog};

pub const POWERLOG_FILE: &str = "powerlog.PLSQL";

/// Wall time (Unix seconds) of the simulated device clock's zero: 2026-01-01T00:00:00Z.
pub const WALL_EPOCH_S: f64 = 1_767_225_600.0;

/// The powerlog clock is this far behind wall time.
const CLOCK_OFFSET_S: f64 = 3600.0;

/// 1 KB pages: a trial's rows fit in one page a table, so the file is 6 KB where SQLite's
/// default 4 KB pages made it 24 KB (written, and read back, for every simulated iPhone's
/// trial). The reader takes any page size, as it must for real powerlogs.
const DDL: &str = "
PRAGMA page_size = 1024;
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

thread_local! {
    /// One powerlog database per thread, with the tables and no rows, and its layout. A
    /// trial's rows go in a transaction that is read, serialized and rolled back: the
    /// database is empty again (so the same rows give the same bytes whichever thread wrote
    /// them before), and its schema, layout and statements are looked up once per thread
    /// instead of twice per trial (writing and reading them back were most of a simulated
    /// iPhone's attempt).
    static DB: RefCell<Option<(Connection, Layout)>> = const { RefCell::new(None) };
}

/// The trial's battery records as a powerlog database: its bytes, and what
/// `collect::ios::powerlog::read` reads from that database.
pub fn write(header: &DumpHeader, log: &TrialLog) -> rusqlite::Result<(Vec<u8>, Result<Powerlog, ParseError>)> {
    DB.with_borrow_mut(|slot| {
        let (conn, layout) = match slot {
            Some(db) => db,
            None => {
                let conn = Connection::open_in_memory()?;
                conn.execute_batch(DDL)?;
                let layout = Layout::of(&conn).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                slot.insert((conn, layout))
            }
        };
        conn.prepare_cached("BEGIN")?.execute([])?;
        let written = fill(conn, header, log).and_then(|()| {
            let read = crate::collect::ios::powerlog::read_with(conn, layout);
            Ok((conn.serialize(MAIN_DB)?.to_vec(), read))
        });
        if conn.prepare_cached("ROLLBACK").and_then(|mut st| st.execute([])).is_err() {
            // Not back to empty: the next trial starts from a new database.
            *slot = None;
        }
        written
    })
}

/// The rows of the trial's powerlog, into a database that has the tables.
fn fill(conn: &Connection, header: &DumpHeader, log: &TrialLog) -> rusqlite::Result<()> {
    let launch = launch_wall_s(header) - CLOCK_OFFSET_S;
    conn.prepare_cached(
        "INSERT INTO PLStorageOperator_EventForward_TimeOffset (timestamp, baseband, kernel, system)
         VALUES (?1, 0, 0, ?2)",
    )?
    .execute(params![launch - 60.0, CLOCK_OFFSET_S])?;
    let mut st = conn.prepare_cached(
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
        conn.prepare_cached("INSERT INTO PLDisplayAgent_EventForward_Display (timestamp, Brightness) VALUES (?1, ?2)")?;
    st.execute(params![launch, log.brightness_pct / 100.0])?;
    for e in &log.events {
        if let EventKind::Brightness { pct } = e.kind {
            st.execute(params![launch + e.t.as_secs_f64(), pct / 100.0])?;
        }
    }
    drop(st);
    conn.prepare_cached(
        "INSERT INTO PLBluetoothAgent_EventForward_DeviceState (timestamp, DevicePowered) VALUES (?1, ?2)",
    )?
    .execute(params![launch, i64::from(log.bluetooth_on)])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::log::BatteryRecord;
    use super::*;
    use crate::config::Platform;

    #[test]
    fn the_powerlog_is_what_a_commit_would_write_and_reads_back_the_same_every_time() {
        let header = DumpHeader {
            device: "sim-iphone-1".into(),
            model: "iPhone 6s".into(),
            os: "15.8".into(),
            emulates: Platform::Ios,
            app: "app".into(),
            trial: "0000-k".into(),
            seed: 7,
            battery_mah: 1715.0,
            voltage_v: 3.8,
            request_interval: None,
            launched_at: Duration::from_secs(90),
        };
        let mut log = TrialLog { brightness_pct: 50.0, bluetooth_on: true, ..TrialLog::default() };
        for m in 0..12u32 {
            log.record(BatteryRecord {
                t: Duration::from_secs(u64::from(m) * 60),
                level_pct: 100 - m,
                charge_mah: 1700 - u64::from(m) * 10,
                current_ma: -250.0,
                external_power: false,
                charging: false,
                temp_c: 30.5,
            });
        }
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(DDL).unwrap();
        let tx = conn.transaction().unwrap();
        fill(&tx, &header, &log).unwrap();
        tx.commit().unwrap();
        let committed = conn.serialize(MAIN_DB).unwrap().to_vec();
        let (bytes, from_db) = write(&header, &log).unwrap();
        // Only the header's change counter and the version that wrote it may differ: the
        // rows are read before a commit would count them.
        let counters = [24..28, 92..100];
        let differ: Vec<usize> = (0..bytes.len()).filter(|&i| bytes.get(i) != committed.get(i)).collect();
        assert_eq!(bytes.len(), committed.len());
        assert!(differ.iter().all(|i| counters.iter().any(|r| r.contains(i))), "bytes {differ:?} differ");
        // Rolled back: another trial's rows in between leave the same rows the same bytes.
        let mut other = log.clone();
        other.records.truncate(3);
        assert_ne!(write(&header, &other).unwrap().0, bytes);
        assert!(write(&header, &log).unwrap().0 == bytes, "and every time");
        let read = crate::collect::ios::powerlog::parse(&bytes).unwrap();
        assert_eq!(from_db.unwrap(), read, "what the file reads is what the database read");
        assert_eq!((read.battery.len(), read.bluetooth.len(), read.time_offsets), (12, 1, 1));
    }
}
