//! `results.csv`: every measurement of every attempt, one row each, for analysis
//! elsewhere (R, pandas, a spreadsheet).
//!
//! Deterministic: rows sorted by trial, attempt and metric display order; no campaign
//! id and no wall-clock time; values printed with Rust's shortest round-trip `{}` form.
//! The same runbook and seed therefore give a byte-identical file.

use std::fmt::Write as _;
use std::io;

use super::input::CampaignData;
use super::metric_order::metric_order;

pub const RESULTS_CSV_HEADER: [&str; 16] = [
    "trial", "key", "device", "model", "variant", "build", "config", "repeat", "block", "order", "attempt", "status",
    "metric", "value", "unit", "source",
];

/// Writes `results.csv` for `data` to `w`, streaming: one row at a time from the
/// columns, numbers formatted into reused buffers.
///
/// An attempt without measurements (it failed before collection) still gets one row,
/// with empty metric, value, unit and source, so every attempt is visible. Pending
/// trials (no attempt yet) have no row; nor have attempts of trials that are not
/// planned (the report warns of them). `device` is the device the attempt ran on.
pub fn write_results_csv<W: io::Write>(data: &CampaignData, w: W) -> io::Result<()> {
    let c = &data.cols;
    let names = &c.names;
    let mut seen = vec![false; names.len()];
    for &m in &c.m_metric {
        seen[m as usize] = true;
    }
    let observed = (0..names.len()).filter(|&m| seen[m]).map(|m| names.name(m as u32));
    let order = metric_order(&data.plan.metrics, observed);
    let mut rank = vec![usize::MAX; names.len()];
    for (i, m) in order.iter().enumerate() {
        if let Some(s) = names.get(m) {
            rank[s as usize] = i;
        }
    }

    let mut out = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(w);
    out.write_record(RESULTS_CSV_HEADER)?;
    // Reused for every row: the numbers' text, and the measurement order of an attempt.
    let mut nums: [String; 5] = Default::default();
    let mut ms: Vec<usize> = Vec::new();
    let mut value = String::new();
    for a in 0..c.attempts() {
        let t = c.a_trial[a] as usize;
        for (buf, n) in nums.iter_mut().zip([c.t_idx[t], c.t_repeat[t], c.t_block[t], c.t_order[t], c.a_attempt[a]]) {
            buf.clear();
            write!(buf, "{n}").expect("writing to a String");
        }
        let [trial, repeat, block, order, attempt] = &nums;
        // Where the attempt really ran (a trial can move off a lost device).
        let device = names.name(super::build::attempt_device(c, a));
        let status = if c.a_valid[a] { "valid" } else { "invalid" };
        let fixed: [&[u8]; 12] = [
            trial.as_bytes(),
            c.t_key[t].as_bytes(),
            device.as_bytes(),
            names.name(c.t_model[t]).as_bytes(),
            names.name(c.t_variant[t]).as_bytes(),
            names.name(c.t_build[t]).as_bytes(),
            names.name(c.t_config[t]).as_bytes(),
            repeat.as_bytes(),
            block.as_bytes(),
            order.as_bytes(),
            attempt.as_bytes(),
            status.as_bytes(),
        ];
        let range = c.measurements_of(a);
        if range.is_empty() {
            for f in fixed {
                out.write_field(f)?;
            }
            out.write_record([b"", b"", b"", b""])?;
            continue;
        }
        // Stable sort: a metric measured twice keeps the order it was recorded in.
        ms.clear();
        ms.extend(range);
        ms.sort_by_key(|&i| rank[c.m_metric[i] as usize]);
        for &i in &ms {
            for f in fixed {
                out.write_field(f)?;
            }
            value.clear();
            // `{}` is `f64::to_string`, the shortest text that reads back the same.
            write!(value, "{}", c.m_value[i]).expect("writing to a String");
            out.write_record([
                names.name(c.m_metric[i]).as_bytes(),
                value.as_bytes(),
                names.name(c.m_unit[i]).as_bytes(),
                names.name(c.m_source[i]).as_bytes(),
            ])?;
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
        let mut second = test_fixture::records("20250308-090000-envoy");
        second.campaign.created_at = "2025-03-08T09:00:00Z".into();
        second.attempts.reverse();
        for a in &mut second.attempts {
            a.started_at = "2025-03-08T09:00:00Z".into();
        }
        let (a, b) = (csv_of(&first), csv_of(&second.data()));
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
