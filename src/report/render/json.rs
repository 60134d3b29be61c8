//! `report.json`: the report model, for tools.

use crate::report::model::report::Report;

/// The report as pretty-printed JSON (schema in docs/report.md). Ends with a newline.
pub fn render_json(report: &Report) -> String {
    // The model has string keys only and every f64 is finite or absent (non-finite
    // values are filtered before statistics), so serialization cannot fail.
    let mut s = serde_json::to_string_pretty(report).expect("report model serializes to JSON");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn json_report() {
        let r = build_report(&fixture::campaign("20250301-090000-envoy"));
        let json = render_json(&r);
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["schema_version"], 2);
        assert_eq!(back["models"][0]["rows"][0]["stats"]["n"], 3);
        insta::assert_snapshot!(json);
    }
}
