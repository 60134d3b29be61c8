//! What `lab status` shows of each device, and its battery readings.

use std::sync::atomic::Ordering;

use super::backend::{Value, read_all, vals};
use super::error::StoreError;
use super::records::*;
use super::store::Store;

impl Store {
    pub fn set_device_status(&self, s: &DeviceStatusRow) -> Result<(), StoreError> {
        self.set_device_statuses(std::slice::from_ref(s))
    }

    /// Writes what `lab status` shows for several devices in one transaction. A row
    /// without a battery reading keeps the last one stored. A row older than the stored one
    /// (`updated_at`, RFC 3339 UTC to the millisecond) is not written: a worker writes its
    /// device's last state after letting the device go, stamped before, and the next
    /// holder's first row must not be overwritten by it.
    pub fn set_device_statuses(&self, rows: &[DeviceStatusRow]) -> Result<(), StoreError> {
        // One row a device (the last given), so that one statement writes them all: an upsert
        // may not meet a row twice.
        let mut last: Vec<&DeviceStatusRow> = Vec::with_capacity(rows.len());
        for s in rows {
            match last.iter_mut().find(|l| l.device == s.device) {
                Some(l) => *l = s,
                None => last.push(s),
            }
        }
        if last.is_empty() {
            return Ok(());
        }
        // One statement, no transaction: a board's write was a `BEGIN`, a statement a row and
        // a `COMMIT`, three round trips for one changed row (docs/benchmarks.md, `agents`).
        for chunk in last.chunks(500) {
            let tuples: Vec<String> = (0..chunk.len())
                .map(|i| {
                    let n = 7 * i;
                    format!("(?{}, ?{}, ?{}, ?{}, ?{}, ?{}, ?{})", n + 1, n + 2, n + 3, n + 4, n + 5, n + 6, n + 7)
                })
                .collect();
            let sql = format!(
                "INSERT INTO device_status (device, state, battery_pct, campaign, trial_key, phase, updated_at)
                 VALUES {}
                 ON CONFLICT(device) DO UPDATE SET state = excluded.state,
                    battery_pct = COALESCE(excluded.battery_pct, device_status.battery_pct),
                    campaign = excluded.campaign, trial_key = excluded.trial_key, phase = excluded.phase,
                    updated_at = excluded.updated_at
                 WHERE device_status.updated_at <= excluded.updated_at",
                tuples.join(", ")
            );
            let params: Vec<Value> = chunk
                .iter()
                .flat_map(|s| {
                    vals![
                        &s.device,
                        &s.state,
                        s.battery_pct,
                        s.campaign.clone(),
                        s.trial_key.clone(),
                        s.phase.clone(),
                        &s.updated_at
                    ]
                })
                .collect();
            self.db.call(move |c| c.execute(&sql, &params))?;
            self.commits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    pub fn device_statuses(&self) -> Result<Vec<DeviceStatusRow>, StoreError> {
        let rows = self.db.call(|c| {
            c.query(&format!("SELECT {} FROM device_status ORDER BY device", DeviceStatusRow::COLUMNS), &[])
        })?;
        Ok(read_all(&rows)?)
    }

    pub fn add_battery_reading(&self, r: &BatteryReadingRow) -> Result<(), StoreError> {
        let row = vals![&r.device, &r.at, r.battery_pct, r.health_pct, r.cycle_count, &r.source];
        self.db.call(move |c| {
            c.execute(
                "INSERT INTO battery_readings (device, at, battery_pct, health_pct, cycle_count, source)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                &row,
            )
        })?;
        Ok(())
    }

    /// Every reading of `device`, oldest first (two at one time in the order written).
    pub fn battery_readings(&self, device: &str) -> Result<Vec<BatteryReadingRow>, StoreError> {
        let device = device.to_string();
        let rows = self.db.call(move |c| {
            let order = if c.dialect() == super::Dialect::Sqlite { "rowid" } else { "id" };
            c.query(
                &format!(
                    "SELECT {} FROM battery_readings WHERE device = ?1 ORDER BY at, {order}",
                    BatteryReadingRow::COLUMNS
                ),
                &vals![&device],
            )
        })?;
        Ok(read_all(&rows)?)
    }
}
