//! `lab status`'s battery section: each phone's health and cycle count with their trend
//! over the readings `lab care` stored, and the warnings of `care::summarize`.

use std::fmt::Write as _;

use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use crate::care::{HealthSummary, Reading, summarize};
use crate::cli::exit::CliError;
use crate::config::Lab;
use crate::store::Store;

#[derive(Debug, Serialize, Tabled)]
pub struct BatteryLine {
    pub device: String,
    pub battery: String,
    pub health: String,
    #[tabled(rename = "health / 30 d")]
    pub health_trend: String,
    pub cycles: String,
    #[tabled(rename = "cycles / 30 d")]
    pub cycles_trend: String,
    pub readings: usize,
    #[tabled(rename = "last reading")]
    pub last_reading: String,
    #[tabled(skip)]
    pub summary: HealthSummary,
}

#[derive(Debug, Serialize, Default)]
pub struct BatteryView {
    /// Devices with stored readings, in lab order.
    pub devices: Vec<BatteryLine>,
    /// `device: warning`, one a line.
    pub warnings: Vec<String>,
}

pub fn collect(lab: &Lab, store: Option<&Store>) -> Result<BatteryView, CliError> {
    let Some(store) = store else { return Ok(BatteryView::default()) };
    let mut view = BatteryView::default();
    for d in &lab.devices {
        let rows = store.battery_readings(&d.name)?;
        if rows.is_empty() {
            continue;
        }
        let readings: Vec<Reading> = rows
            .iter()
            .filter_map(|r| {
                let at = chrono::DateTime::parse_from_rfc3339(&r.at).ok()?.with_timezone(&chrono::Utc);
                Some(Reading { at, battery_pct: r.battery_pct, health_pct: r.health_pct, cycle_count: r.cycle_count })
            })
            .collect();
        let s = summarize(&readings);
        view.warnings.extend(s.warnings.iter().map(|w| format!("{}: {w}", d.name)));
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        view.devices.push(BatteryLine {
            device: d.name.clone(),
            battery: or_dash(s.battery_pct.map(|b| format!("{b:.0} %"))),
            health: or_dash(s.health_pct.map(|h| format!("{h:.1} %"))),
            health_trend: or_dash(s.health_per_30d.map(|t| format!("{t:+.1}"))),
            cycles: or_dash(s.cycle_count.map(|c| c.to_string())),
            cycles_trend: or_dash(s.cycles_per_30d.map(|t| format!("{t:+.0}"))),
            readings: s.readings,
            last_reading: or_dash(s.latest_at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())),
            summary: s,
        });
    }
    Ok(view)
}

/// Nothing when no device has readings.
pub fn render(v: &BatteryView, s: &mut String) {
    if v.devices.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nbatteries (read by `lab care`; trends over the stored readings):\n{}",
        Table::new(&v.devices).with(Style::rounded())
    );
    for w in &v.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
}
