//! Which earlier campaigns a scheduled campaign is compared with (`baseline` of
//! `[[schedule]]`, docs/schedule.md).

use crate::config::BaselinePolicy;

/// The most earlier weeks pooled into one baseline: enough for a stable arm, few enough
/// that a slow drift of the lab does not hide in it.
pub const BASELINE_MAX: usize = 8;

/// The baseline campaigns of one series, oldest first.
/// `weeks`: the schedule's earlier campaigns that ran, oldest first; `last_confirmed`:
/// the campaign where the series' newest confirmed change point starts, if any.
/// An `Err` is a note: this series has no usable baseline.
pub fn baseline_campaigns(
    policy: &BaselinePolicy,
    weeks: &[&str],
    last_confirmed: Option<&str>,
) -> Result<Vec<String>, NoBaseline> {
    let chosen: Vec<&str> = match policy {
        BaselinePolicy::Previous => weeks.last().copied().into_iter().collect(),
        BaselinePolicy::Campaign(id) => vec![id.as_str()],
        BaselinePolicy::LastChangePoint => {
            // A confirmed change is the new level: only the weeks from it on are compared
            // with, so it is alerted once, not every week after.
            let from = last_confirmed.and_then(|c| weeks.iter().position(|w| *w == c)).unwrap_or(0);
            let since = &weeks[from..];
            since[since.len().saturating_sub(BASELINE_MAX)..].to_vec()
        }
    };
    if chosen.is_empty() {
        return Err(NoBaseline);
    }
    Ok(chosen.into_iter().map(str::to_string).collect())
}

/// No earlier campaign of the series to compare with: a note of the review, not a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no earlier campaign to compare with yet (the first week)")]
pub struct NoBaseline;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_picks_its_weeks() {
        let weeks: Vec<String> = (1..=12).map(|w| format!("w{w}")).collect();
        let w: Vec<&str> = weeks.iter().map(String::as_str).collect();
        let lcp = BaselinePolicy::LastChangePoint;
        // No confirmed change: the newest eight.
        assert_eq!(baseline_campaigns(&lcp, &w, None).unwrap(), &weeks[4..]);
        // A confirmed change at week 8: weeks 8.. only.
        assert_eq!(baseline_campaigns(&lcp, &w[..10], Some("w8")).unwrap(), ["w8", "w9", "w10"]);
        assert_eq!(baseline_campaigns(&BaselinePolicy::Previous, &w, None).unwrap(), ["w12"]);
        let pinned = BaselinePolicy::Campaign("release-1".into());
        assert_eq!(baseline_campaigns(&pinned, &w, Some("w8")).unwrap(), ["release-1"]);
        assert!(baseline_campaigns(&lcp, &[], None).unwrap_err().to_string().contains("first week"));
    }
}
