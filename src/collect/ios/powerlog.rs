//! The iPhone's own power log (`CurrentPowerlog.PLSQL`, `logs/powerlogs/powerlog_*.PLSQL` of a
//! sysdiagnose): a SQLite database read from its bytes (loaded into memory, so a copy
//! without its `-wal` beside it, or in a read-only place, reads the same).
//!
//! What is read, each table found by name and each column by `pragma_table_info` (tables
//! and columns vary between iOS versions; a missing column is `None`):
//! - `PLBatteryAgent_EventBackward_Battery`: level, charging, external power, raw capacity
//!   (`AppleRawCurrentCapacity`, mAh), voltage (mV);
//! - `PLStorageOperator_EventForward_TimeOffset`: the powerlog clock's offset to wall time.
//!   Wall time = `timestamp + system` of the offset row at or before it (the oldest row for
//!   earlier timestamps), as iLEAPP's and APOLLO's powerlog modules read it; one offset
//!   for the whole file would be wrong, a row is written whenever the clock changes;
//! - `PLDisplayAgent_EventForward_Display` (brightness) and
//!   `PLBluetoothAgent_EventForward_DeviceState` (`DevicePowered`), as evidence;
//! - `PLAccountingOperator_Aggregate_RootNodeEnergy` joined with
//!   `PLAccountingOperator_EventNone_Nodes`: Apple's per-node energy estimate, unit unknown.

use std::collections::BTreeMap;

use rusqlite::{Connection, MAIN_DB};
use serde::Serialize;

use crate::collect::parse_error::ParseError;

const BATTERY: &str = "PLBatteryAgent_EventBackward_Battery";
const TIME_OFFSET: &str = "PLStorageOperator_EventForward_TimeOffset";
const DISPLAY: &str = "PLDisplayAgent_EventForward_Display";
const BLUETOOTH: &str = "PLBluetoothAgent_EventForward_DeviceState";
const NODES: &str = "PLAccountingOperator_EventNone_Nodes";
const NODE_ENERGY: &str = "PLAccountingOperator_Aggregate_RootNodeEnergy";

/// One battery row, at wall time `t` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryPoint {
    pub t: f64,
    pub level_pct: Option<f64>,
    pub charging: Option<bool>,
    pub external_power: Option<bool>,
    pub raw_capacity_mah: Option<f64>,
    pub voltage_mv: Option<f64>,
}

impl BatteryPoint {
    /// On external power or charging: what a power cut must not show.
    fn powered(&self) -> bool {
        self.charging == Some(true) || self.external_power == Some(true)
    }
}

/// A powerlog's rows, in wall time and time order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Powerlog {
    pub battery: Vec<BatteryPoint>,
    /// (wall time, brightness as logged: 0–1 on recent iOS).
    pub display: Vec<(f64, f64)>,
    /// (wall time, Bluetooth powered).
    pub bluetooth: Vec<(f64, bool)>,
    /// (wall time, node name, energy): Apple's estimate, unit unknown.
    pub node_energy: Vec<(f64, String, f64)>,
    /// How many time-offset rows corrected the clock.
    pub time_offsets: usize,
}

/// What the log says about one soak window `[from, to]` (wall time).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakLog {
    pub from: f64,
    pub to: f64,
    /// Seconds of the window on external power or charging (0 for a real cut).
    pub charging_s: f64,
    /// The unplugged stretch around the window's start (from the unplug before it to the
    /// next plug-in, or the end of the log), when the window starts unplugged.
    pub unplugged: Option<(f64, f64)>,
    pub level_start_pct: Option<f64>,
    pub level_end_pct: Option<f64>,
    /// From the raw capacity at the window's two ends (mAh); not from integrating the
    /// current, which the log samples sparsely while the phone sleeps.
    pub charge_used_mah: Option<f64>,
    /// Charge used × the mean voltage over the window.
    pub energy_j: Option<f64>,
    /// (seconds since `from`, level %), the window's battery curve.
    pub series: Vec<(f64, f64)>,
    /// Brightness logged at the start and during the window.
    pub brightness: Vec<f64>,
    /// Bluetooth was powered at some time in the window (`None`: not logged).
    pub bluetooth_on: Option<bool>,
    /// Apple's per-node energy estimates inside the window, summed by node (unit unknown).
    pub node_energy: BTreeMap<String, f64>,
}

fn fail(message: impl Into<String>) -> ParseError {
    ParseError::Byte { offset: 0, message: message.into() }
}

/// Reads a powerlog database from its bytes.
pub fn parse(bytes: &[u8]) -> Result<Powerlog, ParseError> {
    const HEADER: &[u8] = b"SQLite format 3\0";
    if bytes.len() < 100 || !bytes.starts_with(HEADER) {
        return Err(fail("not a SQLite database (no `SQLite format 3` header): not a powerlog .PLSQL"));
    }
    let mut data = bytes.to_vec();
    // A WAL-mode file (bytes 18 and 19 = 2) does not open from memory; read as a
    // rollback-journal file it is the same database (the `-wal` is not in the bytes anyway).
    data[18] = 1;
    data[19] = 1;
    let mut conn = Connection::open_in_memory().map_err(|e| fail(format!("SQLite: {e}")))?;
    let len = data.len();
    conn.deserialize_read_exact(MAIN_DB, data.as_slice(), len, true)
        .map_err(|e| fail(format!("the database does not open ({e}): truncated or corrupt")))?;
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| fail(format!("the database is truncated or corrupt ({e})")))?;
    if check != "ok" {
        return Err(fail(format!("the database is truncated or corrupt (SQLite quick_check: {check})")));
    }
    read(&conn)
}

/// The tables of a powerlog database and the columns each has: what `read` looks up
/// before it reads. Tables and columns vary between iOS versions; one database's layout
/// holds for as long as its schema does.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Table → its columns.
    tables: Vec<(String, Vec<String>)>,
}

impl Layout {
    /// The layout of the database open in `conn`.
    pub fn of(conn: &Connection) -> Result<Layout, ParseError> {
        let names = table_names(conn)?;
        let mut tables = Vec::with_capacity(names.len());
        for table in names {
            let columns = {
                let mut st = conn
                    .prepare_cached("SELECT name FROM pragma_table_info(?1)")
                    .map_err(|e| fail(format!("{table}: {e}")))?;
                st.query_map([&table], |r| r.get::<_, String>(0))
                    .and_then(|r| r.collect())
                    .map_err(|e| fail(format!("{table}: {e}")))?
            };
            tables.push((table, columns));
        }
        Ok(Layout { tables })
    }

    fn has(&self, table: &str) -> bool {
        self.tables.iter().any(|(t, _)| t == table)
    }

    fn columns(&self, table: &str) -> &[String] {
        self.tables.iter().find(|(t, _)| t == table).map_or(&[], |(_, c)| c.as_slice())
    }
}

/// Reads a powerlog database open in `conn` (its statements are cached on the connection,
/// so a caller that reads many powerlogs on one connection prepares them once).
pub fn read(conn: &Connection) -> Result<Powerlog, ParseError> {
    read_with(conn, &Layout::of(conn)?)
}

/// Reads a powerlog database whose layout is known (a simulated iPhone writes every trial's
/// into the same tables, and looking them up was a third of reading it back).
pub fn read_with(conn: &Connection, layout: &Layout) -> Result<Powerlog, ParseError> {
    let has = |t: &str| layout.has(t);
    let rows = |table: &str, columns: &[&str]| rows(conn, layout, table, columns);
    if !has(BATTERY) {
        return Err(fail(format!("no {BATTERY} table: not a powerlog, or one without battery records")));
    }
    let offsets = if has(TIME_OFFSET) { rows(TIME_OFFSET, &["timestamp", "system"])? } else { Vec::new() };
    let offsets: Vec<(f64, f64)> =
        offsets.into_iter().filter_map(|r| Some((r[0]?, r[1].unwrap_or(0.0)))).collect::<Vec<_>>();
    let wall = |ts: f64| ts + offset_at(&offsets, ts);

    let cols = ["timestamp", "Level", "IsCharging", "ExternalConnected", "AppleRawCurrentCapacity", "Voltage"];
    let mut battery: Vec<BatteryPoint> = rows(BATTERY, &cols)?
        .into_iter()
        .filter_map(|r| {
            Some(BatteryPoint {
                t: wall(r[0]?),
                level_pct: r[1],
                charging: r[2].map(|v| v != 0.0),
                external_power: r[3].map(|v| v != 0.0),
                raw_capacity_mah: r[4],
                voltage_mv: r[5],
            })
        })
        .collect();
    if battery.is_empty() {
        return Err(fail(format!("{BATTERY} has no rows: nothing was logged about the battery")));
    }
    battery.sort_by(|a, b| a.t.total_cmp(&b.t));
    let pairs = |table: &str, col: &str| -> Result<Vec<(f64, f64)>, ParseError> {
        if !has(table) {
            return Ok(Vec::new());
        }
        let mut v: Vec<(f64, f64)> =
            rows(table, &["timestamp", col])?.into_iter().filter_map(|r| Some((wall(r[0]?), r[1]?))).collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(v)
    };
    let display = pairs(DISPLAY, "Brightness")?;
    let bluetooth = pairs(BLUETOOTH, "DevicePowered")?.into_iter().map(|(t, v)| (t, v != 0.0)).collect();
    let node_energy = if has(NODES) && has(NODE_ENERGY) { node_energy(conn, &wall)? } else { Vec::new() };
    Ok(Powerlog { battery, display, bluetooth, node_energy, time_offsets: offsets.len() })
}

/// The `system` offset of the row at or before `ts` (the oldest row before all of them).
fn offset_at(offsets: &[(f64, f64)], ts: f64) -> f64 {
    let mut best: Option<(f64, f64)> = None;
    for &(t, s) in offsets {
        if t <= ts && best.is_none_or(|(bt, _)| t >= bt) {
            best = Some((t, s));
        }
    }
    best.or_else(|| offsets.iter().copied().min_by(|a, b| a.0.total_cmp(&b.0))).map_or(0.0, |(_, s)| s)
}

fn table_names(conn: &Connection) -> Result<Vec<String>, ParseError> {
    let mut st = conn
        .prepare_cached("SELECT name FROM sqlite_master WHERE type = 'table'")
        .map_err(|e| fail(format!("the database is truncated or corrupt ({e})")))?;
    let names = st.query_map([], |r| r.get(0)).and_then(|r| r.collect()).map_err(|e| fail(format!("SQLite: {e}")))?;
    Ok(names)
}

/// `columns` of every row of `table` as numbers; a column the table lacks is `None`.
fn rows(
    conn: &Connection,
    layout: &Layout,
    table: &str,
    columns: &[&str],
) -> Result<Vec<Vec<Option<f64>>>, ParseError> {
    let present = layout.columns(table);
    let select: Vec<String> = columns
        .iter()
        .map(|c| if present.iter().any(|p| p == c) { format!("CAST(\"{c}\" AS REAL)") } else { "NULL".into() })
        .collect();
    let sql = format!("SELECT {} FROM '{table}'", select.join(", "));
    let mut st = conn.prepare_cached(&sql).map_err(|e| fail(format!("{table}: {e}")))?;
    let n = columns.len();
    let out = st
        .query_map([], |r| (0..n).map(|i| r.get::<_, Option<f64>>(i)).collect::<Result<Vec<_>, _>>())
        .and_then(|r| r.collect())
        .map_err(|e| fail(format!("{table}: {e} (truncated or corrupt)")))?;
    Ok(out)
}

fn node_energy(conn: &Connection, wall: &dyn Fn(f64) -> f64) -> Result<Vec<(f64, String, f64)>, ParseError> {
    let sql = format!(
        "SELECT e.timestamp, COALESCE(n.Name, 'node ' || e.NodeID), CAST(e.Energy AS REAL)
         FROM '{NODE_ENERGY}' e LEFT JOIN '{NODES}' n ON n.ID = e.NodeID WHERE e.Energy IS NOT NULL"
    );
    let mut st = conn.prepare_cached(&sql).map_err(|e| fail(format!("{NODE_ENERGY}: {e}")))?;
    let rows: Vec<(f64, String, f64)> = st
        .query_map([], |r| Ok((r.get::<_, f64>(0)?, r.get::<_, String>(1)?, r.get::<_, f64>(2)?)))
        .and_then(|r| r.collect())
        .map_err(|e| fail(format!("{NODE_ENERGY}: {e}")))?;
    Ok(rows.into_iter().map(|(t, n, e)| (wall(t), n, e)).collect())
}

impl Powerlog {
    /// The battery row in force at `t`: the last at or before it.
    fn at(&self, t: f64) -> Option<&BatteryPoint> {
        self.battery.iter().take_while(|p| p.t <= t).last()
    }

    /// The last unplugged stretch of the log: from an unplug to the next plug-in (or the
    /// log's end). `None` when the phone never was off power.
    pub fn last_unplugged(&self) -> Option<(f64, f64)> {
        let mut found = None;
        let mut start: Option<f64> = None;
        for p in &self.battery {
            match (p.powered(), start) {
                (false, None) => start = Some(p.t),
                (true, Some(s)) => {
                    found = Some((s, p.t));
                    start = None;
                }
                _ => {}
            }
        }
        let last = self.battery.last().map(|p| p.t);
        match (start, last) {
            (Some(s), Some(end)) if end > s => Some((s, end)),
            _ => found,
        }
    }

    /// What the log says about the soak `[from, to]` (wall time).
    pub fn soak(&self, from: f64, to: f64) -> SoakLog {
        let start = self.at(from).or(self.battery.first());
        let end = self.at(to);
        // Time on power inside the window, from the step function of the rows.
        let mut charging_s = 0.0;
        let mut t = from;
        let mut powered = start.is_some_and(|p| p.powered());
        for p in self.battery.iter().filter(|p| p.t > from && p.t < to) {
            if powered {
                charging_s += p.t - t;
            }
            (t, powered) = (p.t, p.powered());
        }
        if powered {
            charging_s += to - t;
        }
        let unplugged = (!start.is_some_and(|p| p.powered())).then(|| {
            let began = self.battery.iter().filter(|p| p.t <= from).rev().take_while(|p| !p.powered()).last();
            let ended = self.battery.iter().find(|p| p.t > from && p.powered());
            (began.map_or(from, |p| p.t), ended.or(self.battery.last()).map_or(to, |p| p.t.max(from)))
        });
        let charge_used_mah = match (start.and_then(|p| p.raw_capacity_mah), end.and_then(|p| p.raw_capacity_mah)) {
            (Some(a), Some(b)) => Some(a - b),
            _ => None,
        };
        let inside: Vec<&BatteryPoint> = self.battery.iter().filter(|p| p.t >= from && p.t <= to).collect();
        // The row in force at the start, then those logged after it.
        let volts: Vec<f64> = start
            .into_iter()
            .chain(inside.iter().copied().filter(|p| p.t > from))
            .filter_map(|p| p.voltage_mv)
            .collect();
        let mean_v = (!volts.is_empty()).then(|| volts.iter().sum::<f64>() / volts.len() as f64 / 1000.0);
        // mAh × V = mWh; × 3.6 = J.
        let energy_j = charge_used_mah.zip(mean_v).map(|(mah, v)| mah * v * 3.6);
        let mut series: Vec<(f64, f64)> = start.and_then(|p| p.level_pct).map(|l| (0.0, l)).into_iter().collect();
        series.extend(inside.iter().filter(|p| p.t > from).filter_map(|p| Some((p.t - from, p.level_pct?))));
        let in_window = |t: f64| t > from && t <= to;
        let before = |v: &[(f64, f64)]| v.iter().rfind(|(t, _)| *t <= from).map(|(_, x)| *x);
        let mut brightness: Vec<f64> = before(&self.display).into_iter().collect();
        brightness.extend(self.display.iter().filter(|(t, _)| in_window(*t)).map(|(_, b)| *b));
        let bt_start = self.bluetooth.iter().rfind(|(t, _)| *t <= from).map(|(_, b)| *b);
        let bt_inside: Vec<bool> = self.bluetooth.iter().filter(|(t, _)| in_window(*t)).map(|(_, b)| *b).collect();
        let bluetooth_on = match (bt_start, bt_inside.is_empty()) {
            (None, true) => None,
            (s, _) => Some(s == Some(true) || bt_inside.contains(&true)),
        };
        let mut node_energy = BTreeMap::new();
        for (t, name, e) in &self.node_energy {
            if in_window(*t) {
                *node_energy.entry(name.clone()).or_insert(0.0) += e;
            }
        }
        SoakLog {
            from,
            to,
            charging_s,
            unplugged,
            level_start_pct: start.and_then(|p| p.level_pct),
            level_end_pct: end.and_then(|p| p.level_pct),
            charge_used_mah,
            energy_j,
            series,
            brightness,
            bluetooth_on,
            node_energy,
        }
    }
}

impl SoakLog {
    /// The brightest the screen was over the window, in percent. Recent iOS logs
    /// `Brightness` as a 0–1 fraction; a log whose values go above 1 is taken as percent.
    pub fn brightness_max_pct(&self) -> Option<f64> {
        let max = self.brightness.iter().copied().fold(None, |m: Option<f64>, b| Some(m.map_or(b, |m| m.max(b))))?;
        Some(if max <= 1.0 { max * 100.0 } else { max })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_in_force_is_the_row_at_or_before_else_the_oldest() {
        let o = [(100.0, 5.0), (200.0, 7.0)];
        assert_eq!(offset_at(&o, 150.0), 5.0);
        assert_eq!(offset_at(&o, 200.0), 7.0);
        assert_eq!(offset_at(&o, 50.0), 5.0, "older than every row: the oldest");
        assert_eq!(offset_at(&[], 50.0), 0.0);
    }

    #[test]
    fn the_brightest_moment_is_a_percentage_whatever_the_scale_logged() {
        let log = |brightness: Vec<f64>| SoakLog {
            from: 0.0,
            to: 1.0,
            charging_s: 0.0,
            unplugged: None,
            level_start_pct: None,
            level_end_pct: None,
            charge_used_mah: None,
            energy_j: None,
            series: Vec::new(),
            brightness,
            bluetooth_on: None,
            node_energy: BTreeMap::new(),
        };
        assert_eq!(log(vec![0.5, 0.75, 0.25]).brightness_max_pct(), Some(75.0));
        assert_eq!(log(vec![40.0, 55.0]).brightness_max_pct(), Some(55.0));
        assert_eq!(log(Vec::new()).brightness_max_pct(), None);
    }

    #[test]
    fn what_is_not_a_database_is_refused_in_one_line() {
        let e = parse(b"hello").unwrap_err();
        assert!(e.to_string().contains("not a SQLite database"), "{e}");
    }
}
