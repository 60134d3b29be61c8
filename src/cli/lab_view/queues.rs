//! `lab status`'s queue part: who holds each device and who waits for it, in the order
//! they will get it, with when each expects to be done or to start.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tabled::settings::Style;
use tabled::{Table, Tabled};

use crate::cli::exit::CliError;
use crate::store::{LeaseHolder, Store, Waiter, who};

#[derive(Debug, Serialize, Tabled)]
pub struct QueueLine {
    pub device: String,
    /// `holds`, or the place in the queue (1 = next).
    pub place: String,
    /// `campaign C (runbook R)`, or `lab care`.
    pub who: String,
    /// Machine and pid.
    #[tabled(rename = "machine (pid)")]
    pub machine: String,
    pub priority: i32,
    /// Since when it holds the device, or waits for it (RFC 3339 UTC).
    pub since: String,
    /// The holder: when it expects to be done; a waiter: its estimated start (its own and
    /// those ahead of it, from their plans' estimates). `-` where unknown.
    pub expected: String,
}

/// Every held device and every queue, by device.
pub fn collect(store: Option<&Store>, now: DateTime<Utc>) -> Result<Vec<QueueLine>, CliError> {
    let Some(store) = store else { return Ok(Vec::new()) };
    Ok(lines(store.lease_holders()?, store.queued()?, now))
}

fn lines(holders: Vec<LeaseHolder>, waiters: Vec<Waiter>, now: DateTime<Utc>) -> Vec<QueueLine> {
    let mut devices: Vec<&str> =
        holders.iter().map(|h| h.device.as_str()).chain(waiters.iter().map(|w| w.device.as_str())).collect();
    devices.sort_unstable();
    devices.dedup();
    let mut out = Vec::new();
    for d in devices {
        // When the device is expected to be free: the holder's end, or now.
        let mut free: Option<DateTime<Utc>> = Some(now);
        if let Some(h) = holders.iter().find(|h| h.device == d) {
            let end = h.expected_end().and_then(|t| parse(&t));
            free = end.map(|e| e.max(now));
            out.push(QueueLine {
                device: d.to_string(),
                place: "holds".into(),
                who: who(h.campaign.as_deref(), h.runbook.as_deref(), &h.purpose),
                machine: format!("{} ({})", h.host, h.pid),
                priority: h.priority,
                since: h.since.clone(),
                expected: end.map(|e| format!("done by {}", text(e))).unwrap_or_else(|| "-".into()),
            });
        }
        for (k, w) in waiters.iter().filter(|w| w.device == d).enumerate() {
            out.push(QueueLine {
                device: d.to_string(),
                place: (k + 1).to_string(),
                who: who(w.campaign.as_deref(), w.runbook.as_deref(), &w.purpose),
                machine: format!("{} ({})", w.host, w.pid),
                priority: w.priority,
                since: w.since.clone(),
                expected: free.map(|t| format!("starts {}", text(t))).unwrap_or_else(|| "-".into()),
            });
            free = match (free, w.expect_s) {
                (Some(t), Some(s)) if s.is_finite() && s >= 0.0 => {
                    Some(t + chrono::Duration::milliseconds((s * 1000.0) as i64))
                }
                _ => None,
            };
        }
    }
    out
}

fn parse(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc))
}

fn text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn render(s: &mut String, lines: &[QueueLine]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\ndevices held and waited for (in the order they get them):\n{}",
        Table::new(lines).with(Style::rounded())
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(device: &str, since: &str, expect_s: Option<f64>) -> LeaseHolder {
        LeaseHolder {
            device: device.into(),
            purpose: "campaign".into(),
            campaign: Some("c-0".into()),
            runbook: Some("battery".into()),
            host: "bench-1".into(),
            pid: 41,
            start: None,
            since: since.into(),
            priority: 0,
            expect_s,
        }
    }

    #[test]
    fn waiters_start_after_the_holder_and_those_ahead_of_them() {
        let now = parse("2026-12-04T12:00:00Z").unwrap();
        let waiter = |ticket, priority, campaign: &str, runbook: &str, expect_s| Waiter {
            ticket,
            holder: LeaseHolder {
                device: "pixel-1".into(),
                priority,
                purpose: "campaign".into(),
                campaign: Some(campaign.into()),
                runbook: Some(runbook.into()),
                host: "ci-7".into(),
                pid: 77,
                start: None,
                since: "2026-12-04T11:59:00Z".into(),
                expect_s,
            },
            token: String::new(),
        };
        // As the store lists them: in queue order.
        let waiters = vec![waiter(3, 5, "c-2", "cpu", Some(600.0)), waiter(2, 0, "c-1", "battery", None)];
        let l = lines(vec![holder("pixel-1", "2026-12-04T11:00:00Z", Some(7200.0))], waiters, now);
        let got: Vec<_> = l.iter().map(|l| (l.place.as_str(), l.who.as_str(), l.expected.as_str())).collect();
        assert_eq!(
            got,
            [
                ("holds", "campaign c-0 (runbook battery)", "done by 2026-12-04T13:00:00Z"),
                ("1", "campaign c-2 (runbook cpu)", "starts 2026-12-04T13:00:00Z"),
                ("2", "campaign c-1 (runbook battery)", "starts 2026-12-04T13:10:00Z"),
            ]
        );
        // A holder past its estimate: the next starts now, not in the past.
        let l = lines(vec![holder("pixel-1", "2026-12-04T09:00:00Z", Some(60.0))], Vec::new(), now);
        assert_eq!(l[0].expected, "done by 2026-12-04T09:01:00Z");
    }
}
