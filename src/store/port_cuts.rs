//! The phones whose hub port `lab care` left switched off (`port_cuts`): care switches a
//! port only while it holds the phone's lease, and lets the lease go between its passes
//! with the port off; whoever takes the phone next switches it on first and clears the
//! row. A care process that dies leaves its rows, so the next holder still powers the
//! phone.

use super::backend::{Columns, DbError, FromRow, Row, vals};
use super::error::StoreError;
use super::store::Store;

/// A port care left off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCut {
    pub device: String,
    pub port: String,
    /// RFC 3339 UTC.
    pub since: String,
}

/// From `device, port, since`.
impl FromRow<'_> for PortCut {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(PortCut { device: c.get()?, port: c.get()?, since: c.get()? })
    }
}

impl Store {
    /// Records that `device`'s port is off, by care's hand.
    pub fn set_port_cut(&self, device: &str, port: &str, at: &str) -> Result<(), StoreError> {
        let row = vals![device, port, at];
        self.db.call(move |c| {
            c.execute(
                "INSERT INTO port_cuts (device, port, since) VALUES (?1, ?2, ?3)
                 ON CONFLICT (device) DO UPDATE SET port = ?2, since = ?3",
                &row,
            )
        })?;
        Ok(())
    }

    /// The port is on again.
    pub fn clear_port_cut(&self, device: &str) -> Result<(), StoreError> {
        let device = vals![device];
        self.db.call(move |c| c.execute("DELETE FROM port_cuts WHERE device = ?1", &device))?;
        Ok(())
    }

    /// Whether care left `device`'s port off.
    pub fn port_cut(&self, device: &str) -> Result<Option<PortCut>, StoreError> {
        let device = vals![device];
        let row = self
            .db
            .call(move |c| c.query_opt("SELECT device, port, since FROM port_cuts WHERE device = ?1", &device))?;
        Ok(row.as_ref().map(Row::read).transpose()?)
    }
}
