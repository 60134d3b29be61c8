//! The phones whose hub port `lab care` left switched off (`port_cuts`): care switches a
//! port only while it holds the phone's lease, and lets the lease go between its passes
//! with the port off; whoever takes the phone next switches it on first and clears the
//! row. A care process that dies leaves its rows, so the next holder still powers the
//! phone.

use rusqlite::{OptionalExtension, params};

use super::sqlite::{Store, StoreError};

/// A port care left off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCut {
    pub device: String,
    pub port: String,
    /// RFC 3339 UTC.
    pub since: String,
}

impl Store {
    /// Records that `device`'s port is off, by care's hand.
    pub fn set_port_cut(&self, device: &str, port: &str, at: &str) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute(
            "INSERT INTO port_cuts (device, port, since) VALUES (?1, ?2, ?3)
             ON CONFLICT (device) DO UPDATE SET port = ?2, since = ?3",
            params![device, port, at],
        )?;
        Ok(())
    }

    /// The port is on again.
    pub fn clear_port_cut(&self, device: &str) -> Result<(), StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute("DELETE FROM port_cuts WHERE device = ?1", [device])?;
        Ok(())
    }

    /// Whether care left `device`'s port off.
    pub fn port_cut(&self, device: &str) -> Result<Option<PortCut>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let row = conn
            .query_row("SELECT device, port, since FROM port_cuts WHERE device = ?1", [device], |r| {
                Ok(PortCut { device: r.get(0)?, port: r.get(1)?, since: r.get(2)? })
            })
            .optional()?;
        Ok(row)
    }
}
