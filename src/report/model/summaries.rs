//! A report's rows as the store keeps them (`campaign_summaries`): what history and
//! schedule reviews read instead of measurements.

use crate::report::model::input::CampaignData;
use crate::report::model::report::Report;
use crate::stats::SUMMARY_VERSION;
use crate::store::SummaryRow;

/// One row per model × variant × metric of `report`, in report order, with the build,
/// config and build hash of the variant from the campaign's plan and stored hashes.
pub fn summary_rows(report: &Report, data: &CampaignData) -> Vec<SummaryRow> {
    let mut out = Vec::new();
    for m in &report.models {
        // A model's devices share its platform; a pooled model (`Pixel 8 (soft-untethered)`)
        // names the plan's devices too.
        let platform =
            m.devices.iter().find_map(|d| data.plan.devices.iter().find(|p| &p.name == d)).map(|d| d.platform);
        for r in &m.rows {
            let variant = data.plan.variants.iter().find(|v| v.name == r.variant);
            let build = variant.map_or_else(|| r.variant.clone(), |v| v.build.clone());
            let build_sha256 = platform
                .and_then(|p| data.campaign.content_hashes["builds"][&build][p.as_str()].as_str().map(str::to_string));
            out.push(SummaryRow {
                campaign: report.campaign.id.clone(),
                model: m.model.clone(),
                variant: r.variant.clone(),
                metric: r.metric.clone(),
                build,
                config: variant.map_or_else(String::new, |v| v.config.clone()),
                build_sha256,
                devices: m.devices.clone(),
                unit: r.unit.clone(),
                sources: r.sources.clone(),
                gating: r.gating,
                n: r.n,
                non_finite: r.non_finite,
                mean: r.stats.as_ref().map(|s| s.mean),
                ci_low: r.stats.as_ref().and_then(|s| s.ci_low),
                ci_high: r.stats.as_ref().and_then(|s| s.ci_high),
                confidence: report.statistics.confidence,
                summary: r.stats.clone(),
                values: r.values.clone(),
                summary_version: SUMMARY_VERSION,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::build_report;
    use crate::testing::fixture;

    #[test]
    fn every_metric_row_becomes_a_summary_row_with_its_build_hash() {
        let mut data = fixture::campaign("c1");
        data.campaign.content_hashes = serde_json::json!({
            "builds": {"control": {"sim": "aa01"}, "envoy-poll": {"sim": "bb02", "ios": "not this platform"}},
            "files": {}
        });
        let rep = build_report(&data);
        let rows = summary_rows(&rep, &data);
        let m = &rep.models[0];
        assert_eq!(rows.len(), m.rows.len());
        for (s, r) in rows.iter().zip(&m.rows) {
            assert_eq!(
                (s.variant.as_str(), s.metric.as_str(), s.n, &s.values),
                (r.variant.as_str(), r.metric.as_str(), r.n, &r.values)
            );
            assert_eq!(s.summary, r.stats);
            assert_eq!(s.mean, r.stats.as_ref().map(|x| x.mean));
            assert_eq!((s.campaign.as_str(), s.model.as_str(), &s.devices), ("c1", fixture::MODEL, &m.devices));
            assert_eq!((s.build.as_str(), s.config.as_str()), (s.variant.as_str(), "default"));
            assert_eq!(s.summary_version, SUMMARY_VERSION);
        }
        let cpu = |v: &str| rows.iter().find(|s| s.variant == v && s.metric == "cpu_pct").unwrap();
        assert_eq!(cpu("control").build_sha256.as_deref(), Some("aa01"));
        assert_eq!(cpu("envoy-poll").build_sha256.as_deref(), Some("bb02"), "the sim's hash, not the ios one");
        // Valid attempts only: control's valid cpu values are trials 0, 3 and 6.
        assert_eq!(cpu("control").values, [12.0, 12.5, 11.5]);
        assert!(cpu("control").gating);
        assert_eq!(cpu("control").confidence, rep.statistics.confidence);

        // The fixture's flat hashes (from before `builds`) give no build hash.
        let plain = fixture::campaign("c2");
        assert!(summary_rows(&build_report(&plain), &plain).iter().all(|s| s.build_sha256.is_none()));
    }
}
