//! `results.csv`: every measurement of every attempt, one row each, for analysis
//! elsewhere (R, pandas, a spreadsheet).
//!
//! Deterministic: rows sorted by trial, attempt and metric display order; no campaign
//! id and no wall-clock time; values printed with Rust's shortest round-trip `{}` form
//! (by [`push_f64`], which writes the same bytes faster).
//! The same runbook and seed therefore give a byte-identical file.

use std::io;

use crate::measure::metric_order;
use crate::report::model::input::CampaignData;
use crate::report::render::float_text::push_f64;

pub const RESULTS_CSV_HEADER: [&str; 16] = [
    "trial", "key", "device", "model", "variant", "build", "config", "repeat", "block", "order", "attempt", "status",
    "metric", "value", "unit", "source",
];

/// Writes `results.csv` for `data` to `w`, streaming: one row at a time from the
/// columns into a reused buffer.
///
/// An attempt without measurements (it failed before collection) still gets one row,
/// with empty metric, value, unit and source, so every attempt is visible. Pending
/// trials (no attempt yet) have no row; nor have attempts of trials that are not
/// planned (the report warns of them). `device` is the device the attempt ran on.
///
/// Quoted as the `csv` crate quotes (`QuoteStyle::Necessary`, the test compares the two
/// byte for byte), but each name is quoted once, not once per row, and the twelve
/// fields an attempt's rows share once per attempt: through the crate's per-field checks
/// a million rows took about twice as long.
pub fn write_results_csv<W: io::Write>(data: &CampaignData, mut w: W) -> io::Result<()> {
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
    // Every name as it stands in a row, quoted if it must be.
    let quoted: Vec<Vec<u8>> = (0..names.len())
        .map(|s| {
            let mut q = Vec::new();
            push_field(&mut q, names.name(s as u32).as_bytes());
            q
        })
        .collect();

    let mut out: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    for (i, h) in RESULTS_CSV_HEADER.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_field(&mut out, h.as_bytes());
    }
    out.push(b'\n');
    // Reused for every attempt: its shared fields, its measurement order, a number's text.
    let mut prefix: Vec<u8> = Vec::new();
    let mut ms: Vec<usize> = Vec::new();
    for a in 0..c.attempts() {
        let t = c.a_trial[a] as usize;
        prefix.clear();
        push_num(&mut prefix, c.t_idx[t]);
        push_field(&mut prefix, c.t_key[t].as_bytes());
        prefix.push(b',');
        // Where the attempt really ran (a trial can move off a lost device).
        for s in [
            crate::report::model::build_report::attempt_device(c, a),
            c.t_model[t],
            c.t_variant[t],
            c.t_build[t],
            c.t_config[t],
        ] {
            prefix.extend_from_slice(&quoted[s as usize]);
            prefix.push(b',');
        }
        for n in [c.t_repeat[t], c.t_block[t], c.t_order[t], c.a_attempt[a]] {
            push_num(&mut prefix, n);
        }
        prefix.extend_from_slice(if c.a_valid[a] { b"valid," } else { b"invalid," });
        let range = c.measurements_of(a);
        if range.is_empty() {
            out.extend_from_slice(&prefix);
            out.extend_from_slice(b",,,\n");
        } else {
            // Stable sort: a metric measured twice keeps the order it was recorded in.
            ms.clear();
            ms.extend(range);
            ms.sort_by_key(|&i| rank[c.m_metric[i] as usize]);
            for &i in &ms {
                out.extend_from_slice(&prefix);
                out.extend_from_slice(&quoted[c.m_metric[i] as usize]);
                out.push(b',');
                // Digits, a sign, a point, `NaN` or `inf`: nothing that needs quotes.
                push_f64(&mut out, c.m_value[i]);
                out.push(b',');
                out.extend_from_slice(&quoted[c.m_unit[i] as usize]);
                out.push(b',');
                out.extend_from_slice(&quoted[c.m_source[i] as usize]);
                out.push(b'\n');
            }
        }
        if out.len() >= FLUSH_AT {
            w.write_all(&out)?;
            out.clear();
        }
    }
    w.write_all(&out)?;
    w.flush()
}

/// Rows are handed to the writer in chunks of about this many bytes.
const FLUSH_AT: usize = 64 * 1024;

/// `n` and a comma.
fn push_num(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    out.push(b',');
}

/// `field` as the `csv` crate writes it within a record of several fields
/// (`QuoteStyle::Necessary`, `\n` terminator): in quotes, with quotes doubled, when it
/// holds a comma, a quote or a line break; as it is otherwise.
fn push_field(out: &mut Vec<u8>, field: &[u8]) {
    if !field.iter().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        out.extend_from_slice(field);
        return;
    }
    out.push(b'"');
    for &b in field {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixture;

    fn csv_of(data: &CampaignData) -> String {
        let mut buf = Vec::new();
        write_results_csv(data, &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn results_csv() {
        insta::assert_snapshot!(csv_of(&fixture::campaign("20250301-090000-envoy")));
    }

    #[test]
    fn byte_identical_across_runs() {
        // Another run of the same runbook and seed: new campaign id, new timestamps,
        // attempts stored in another order.
        let first = fixture::campaign("20250301-090000-envoy");
        let mut second = fixture::records("20250308-090000-envoy");
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

    /// results.csv as the `csv` crate writes it, field by field: what the writer above
    /// must equal byte for byte.
    fn csv_crate_reference(data: &CampaignData) -> Vec<u8> {
        let mut out = csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(Vec::new());
        out.write_record(RESULTS_CSV_HEADER).unwrap();
        let c = &data.cols;
        let observed: Vec<&str> = {
            let mut seen: Vec<u32> = c.m_metric.clone();
            seen.sort_unstable();
            seen.dedup();
            seen.into_iter().map(|m| c.names.name(m)).collect()
        };
        let order = metric_order(&data.plan.metrics, observed);
        for a in 0..c.attempts() {
            let t = c.a_trial[a] as usize;
            let fixed: Vec<String> = vec![
                c.t_idx[t].to_string(),
                c.t_key[t].to_string(),
                c.names.name(crate::report::model::build_report::attempt_device(c, a)).into(),
                c.names.name(c.t_model[t]).into(),
                c.names.name(c.t_variant[t]).into(),
                c.names.name(c.t_build[t]).into(),
                c.names.name(c.t_config[t]).into(),
                c.t_repeat[t].to_string(),
                c.t_block[t].to_string(),
                c.t_order[t].to_string(),
                c.a_attempt[a].to_string(),
                if c.a_valid[a] { "valid" } else { "invalid" }.into(),
            ];
            let mut ms: Vec<usize> = c.measurements_of(a).collect();
            if ms.is_empty() {
                out.write_record(fixed.iter().map(String::as_str).chain(["", "", "", ""])).unwrap();
            }
            ms.sort_by_key(|&i| order.iter().position(|m| m == c.names.name(c.m_metric[i])));
            for i in ms {
                let value = c.m_value[i].to_string();
                let tail =
                    [c.names.name(c.m_metric[i]), &value, c.names.name(c.m_unit[i]), c.names.name(c.m_source[i])];
                out.write_record(fixed.iter().map(String::as_str).chain(tail)).unwrap();
            }
        }
        out.into_inner().unwrap()
    }

    #[test]
    fn quotes_and_orders_exactly_as_the_csv_crate_does() {
        assert_eq!(csv_of(&fixture::campaign("c1")).into_bytes(), csv_crate_reference(&fixture::campaign("c1")));
        // Names that need quoting, and names that look as if they might.
        let tricky =
            ["a,b", "say \"hi\"", "two\nlines", "cr\rhere", " lead", "trail ", "\"", ",", "", "tab\there", "é ünï"];
        let mut r = fixture::records("c1");
        for (n, a) in r.attempts.iter_mut().enumerate() {
            a.device = tricky[n % tricky.len()].into();
            for (k, m) in a.measurements.iter_mut().enumerate() {
                m.unit = tricky[(n + k) % tricky.len()].into();
                m.source = tricky[(n + 2 * k + 1) % tricky.len()].into();
                m.value = [0.1 + 0.2, -0.0, 1e21, 1e-7, f64::NAN, f64::INFINITY, 123456789.0][(n + k) % 7];
            }
            if n % 3 == 0
                && let Some(m) = a.measurements.first_mut()
            {
                m.metric = tricky[n % tricky.len()].into();
            }
        }
        for (n, t) in r.trials.iter_mut().enumerate() {
            t.row.key = format!("{}{}", tricky[n % tricky.len()], n);
        }
        r.plan.trials.iter_mut().zip(&r.trials).for_each(|(p, t)| p.key = t.row.key.clone());
        let data = r.data();
        let ours = csv_of(&data);
        assert!(ours.contains("\"a,b\"") && ours.contains("\"say \"\"hi\"\"\"") && ours.contains("\"cr\rhere\""));
        assert_eq!(ours.into_bytes(), csv_crate_reference(&data));
    }

    #[test]
    fn lists_invalid_attempts_and_attempts_without_measurements() {
        let csv = csv_of(&fixture::campaign("c1"));
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
