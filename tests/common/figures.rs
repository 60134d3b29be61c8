//! The pandas script's figures (benches/report_pandas.py) against a report.json: used by
//! `cargo bench --bench report_scale` and tests/integration/crosscheck.rs.

use serde_json::Value;

/// Every figure the pandas script computed, against report.json's: one line per
/// difference beyond `tolerance` (relative), the number of figures compared, the largest
/// relative difference.
pub fn compare_figures(lab: &Value, pandas: &Value, tolerance: f64) -> (Vec<String>, usize, f64) {
    let mut diffs = Vec::new();
    let (mut checked, mut largest) = (0usize, 0f64);
    let mut close = |where_: &str, what: &str, got: &Value, want: &Value| {
        checked += 1;
        match (got.as_f64(), want.as_f64()) {
            (None, None) => {}
            (Some(g), Some(w)) => {
                let err = (g - w).abs();
                let rel = if w != 0.0 { err / w.abs() } else { err };
                largest = largest.max(rel);
                if err > (tolerance * w.abs()).max(1e-12) {
                    diffs.push(format!("{where_}: {what}: lab {g}, pandas {w} (relative {rel:.1e})"));
                }
            }
            _ => diffs.push(format!("{where_}: {what}: lab {got}, pandas {want}")),
        }
    };
    let find_row = |model: &str, variant: &str, metric: &str| -> Option<&Value> {
        lab["models"].as_array()?.iter().find(|m| m["model"] == model)?["rows"]
            .as_array()?
            .iter()
            .find(|r| r["variant"] == variant && r["metric"] == metric)
    };
    let (empty, mut missing) = (Vec::new(), Vec::new());
    for p in pandas["rows"].as_array().unwrap_or(&empty) {
        let (model, variant, metric) = (s(&p["model"]), s(&p["variant"]), s(&p["metric"]));
        let where_ = format!("{model} / {variant} / {metric}");
        let Some(row) = find_row(model, variant, metric) else {
            missing.push(format!("{where_}: not in report.json"));
            continue;
        };
        close(&where_, "n", &row["n"], &p["n"]);
        for k in ["mean", "sd", "ci_low", "ci_high", "median"] {
            close(&where_, k, &row["stats"][k], &p[k]);
        }
    }
    for p in pandas["comparisons"].as_array().unwrap_or(&empty) {
        let (model, variant, metric, against) = (s(&p["model"]), s(&p["variant"]), s(&p["metric"]), s(&p["against"]));
        let where_ = format!("{model} / {variant} / {metric} vs {against}");
        let cmp = find_row(model, variant, metric)
            .and_then(|r| r["comparisons"].as_array())
            .and_then(|cs| cs.iter().find(|c| c["against"] == against));
        let Some(c) = cmp else {
            missing.push(format!("{where_}: comparison not in report.json"));
            continue;
        };
        close(&where_, "welch t", &c["welch"]["t"], &p["welch_t"]);
        close(&where_, "welch df", &c["welch"]["df"], &p["welch_df"]);
        close(&where_, "welch p", &c["welch"]["p"], &p["welch_p"]);
        close(&where_, "mann-whitney U", &c["mann_whitney"]["u"], &p["mwu_u"]);
        if !p["mwu_p"].is_null() {
            close(&where_, "mann-whitney p", &c["mann_whitney"]["p"], &p["mwu_p"]);
        }
        close(&where_, "holm p", &c["p_adjusted"], &p["p_adjusted"]);
    }
    diffs.extend(missing);
    (diffs, checked, largest)
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}
