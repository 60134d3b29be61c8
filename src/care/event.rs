//! What `lab care` says as it goes; the CLI prints it (the library never prints).

use std::time::Duration;

use serde::Serialize;

/// `at`: time since care started, on its clock (virtual for simulated phones).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum CareEvent {
    /// A device care does not switch (no uhubctl tether, or it could not be opened).
    Skipped { device: String, why: String },
    /// A device someone else holds (a campaign) or waits for: left alone this pass; `by`
    /// names the holder, or the first in its queue.
    Busy { at: Duration, device: String, by: String },
    /// A reading, and whether the phone has USB power.
    Reading {
        at: Duration,
        device: String,
        battery_pct: f64,
        powered: bool,
        health_pct: Option<f64>,
        cycle_count: Option<u32>,
    },
    /// Care switched the device's port (`on: false`: cut at the upper limit).
    Switched { at: Duration, device: String, port: String, on: bool, battery_pct: Option<f64>, why: String },
    /// Something failed for this device this pass; care goes on with the others.
    Failed { at: Duration, device: String, error: String },
    /// When care stops: a port it had cut, switched on again.
    Restored { device: String, port: String },
    /// A port care had cut and could not switch on again: someone must.
    NotRestored { device: String, port: String, error: String },
}
