//! `results.csv`: every measurement of every attempt, one row each, for analysis
//! elsewhere (R, pandas, a spreadsheet).
//!
//! Deterministic: rows sorted by trial, attempt and metric display order; no campaign
//! id and no wall-clock time; values printed with Rust's shortest round-trip `{}` form.
//! The same runbook and seed therefore give a byte-identical file.

use std::collections::HashMap;
use std::io;

use super::input::CampaignData;
use super::metric_order::metric_order;
use crate::store::{AttemptRecord, PlannedTrialRow};

pub const RESULTS_CSV_HEADER: [&str; 16] = [
    "trial", "key", "device", "model", "variant", "build", "config", "repeat", "block", "order", "attempt", "status",
    "metric", "value", "unit", "source",
];

/// Writes `results.csv` for `data` to `w`.
///
/// An attempt without measurements (it failed before collection) still gets one row,
/// with empty metric, value, unit and source, so every attempt is visible. Pending
/// trials (no attempt yet) have no row. An attempt whose trial is not in `data.trials`
/// keeps its trial number and leaves the planned-trial columns empty. `device` is the
/// device the attempt ran on.
pub fn write_results_csv<W: io::Write>(data: &CampaignData, w: W) -> io::Result<()> {
    let order = metric_order(
        &data.plan.metrics,
        data.attempts.iter().flat_map(|a| a.measurements.iter().map(|m| m.metric.as_str())),
    );
    let rank: HashMap<&str, usize> = order.iter().enumerate().map(|(i, m)| (m.as_str(), i)).collect();
    let rows: HashMap<u32, &PlannedTrialRow> = data.trials.iter().map(|t| (t.row.idx, &t.row)).collect();
    let mut attempts: Vec<&AttemptRecord> = data.attempts.iter().collect();
    attempts.sort_by_key(|a| (a.trial_idx, a.attempt));

    let mut out = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(w);
    out.write_record(RESULTS_CSV_HEADER)?;
    for a in attempts {
        let planned: [String; 9] = match rows.get(&a.trial_idx) {
            Some(r) => [
                r.key.clone(),
                // Where the attempt really ran (a trial can move off a lost device).
                if a.device.is_empty() { r.device.clone() } else { a.device.clone() },
                r.device_model.clone(),
                r.variant.clone(),
                r.build.clone(),
                r.config.clone(),
                r.repeat.to_string(),
                r.block.to_string(),
                r.device_order.to_string(),
            ],
            None => Default::default(),
        };
        let mut record: Vec<String> = Vec::with_capacity(RESULTS_CSV_HEADER.len());
        record.push(a.trial_idx.to_string());
        record.extend(planned);
        record.push(a.attempt.to_string());
        record.push(a.status.as_str().to_string());
        if a.measurements.is_empty() {
            record.extend(std::iter::repeat_n(String::new(), 4));
            out.write_record(&record)?;
            continue;
        }
        // Stable sort: a metric measured twice keeps the order it was recorded in.
        let mut ms: Vec<_> = a.measurements.iter().collect();
        ms.sort_by_key(|m| rank[m.metric.as_str()]);
        let fixed = record.len();
        for m in ms {
            record.truncate(fixed);
            record.extend([m.metric.clone(), m.value.to_string(), m.unit.clone(), m.source.clone()]);
            out.write_record(&record)?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_fixture;

    fn csv_of(data: &CampaignData) -> String {
        let mut buf = Vec::new();
        write_results_csv(data, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn results_csv() {
        insta::assert_snapshot!(csv_of(&test_fixture::campaign("20250301-090000-envoy")));
    }

    #[test]
    fn byte_identical_across_runs() {
        // Another run of the same runbook and seed: new campaign id, new timestamps,
        // attempts stored in another order.
        let first = test_fixture::campaign("20250301-090000-envoy");
        let mut second = test_fixture::campaign("20250308-090000-envoy");
        second.campaign.created_at = "2025-03-08T09:00:00Z".into();
        second.attempts.reverse();
        for a in &mut second.attempts {
            a.started_at = "2025-03-08T09:00:00Z".into();
        }
        let (a, b) = (csv_of(&first), csv_of(&second));
        assert_eq!(a.as_bytes(), b.as_bytes());
        assert!(!a.contains("20250301"), "campaign id leaked into results.csv");
        assert!(!a.contains("2025-03-01"), "timestamp leaked into results.csv");
    }

    #[test]
    fn lists_invalid_attempts_and_attempts_without_measurements() {
        let csv = csv_of(&test_fixture::campaign("c1"));
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], RESULTS_CSV_HEADER.join(","));
        // 6 valid + 2 invalid attempts with 3 metrics each, 1 invalid attempt without any.
        assert_eq!(lines.len(), 1 + 8 * 3 + 1);
        assert!(lines.contains(
            &"2,0002-sim-iphone-2-envoy-poll-r1,sim-iphone-2,iPhone 6s,envoy-poll,envoy-poll,default,1,0,0,0,invalid,battery_drop_pct,0.4,%,sim model"
        ));
        assert!(lines.contains(
            &"4,0004-sim-iphone-1-control-r2,sim-iphone-1,iPhone 6s,control,control,default,2,1,2,1,invalid,,,,"
        ));
    }
}
