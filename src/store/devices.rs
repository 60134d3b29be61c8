//! What `lab status` shows of each device, and its battery readings.

use std::sync::atomic::Ordering;

use super::backend::{read_all, vals};
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
        if rows.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> = rows
            .iter()
            .map(|s| {
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
        self.db.call(move |c| {
            c.transaction(|c| {
                for row in &rows {
                    c.execute(
                        "INSERT INTO device_status (device, state, battery_pct, campaign, trial_key, phase, updated_at)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                         ON CONFLICT(device) DO UPDATE SET state = ?2,
                            battery_pct = COALESCE(?3, device_status.battery_pct), campaign = ?4, trial_key = ?5,
                            phase = ?6, updated_at = ?7
                         WHERE device_status.updated_at <= ?7",
                        row,
                    )?;
                }
                Ok(())
            })
        })?;
        self.commits.fetch_add(1, Ordering::Relaxed);
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
