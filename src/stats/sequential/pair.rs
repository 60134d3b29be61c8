//! The decision on one treatment × reference pair of a model: by the fixed rule, or in a
//! sequential campaign at its look, where it stands (which look, its information, what the
//! fixed design would have needed). The report and the runner's looks both ask here, so a
//! look stops a pair exactly when its report says it is decided.

use super::design::Design;
use super::levels::{LookLevels, decided, fractions, information};
use crate::stats::{
    Arm, DecisionRule, MetricDecision, MetricPair, Summary, Verdict, judge, overall_verdict, summarize,
};

/// A look the plan recorded for the pair: its fraction, the arms' values then, its
/// verdict, and whether it stopped the pair.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    pub t: f64,
    pub n_treatment: u32,
    pub n_reference: u32,
    pub verdict: Verdict,
    pub stopped: bool,
}

/// Where a pair stands at a look.
#[derive(Debug, Clone)]
pub struct PairLook {
    /// The levels its verdicts were judged at.
    pub levels: LookLevels,
    /// Looks at this pair so far (the verdict is the last one's) and at most.
    pub look: usize,
    pub max_looks: usize,
    /// The look at which it was first decided, if it was.
    pub decided_at: Option<usize>,
    /// Valid values of the treatment and of the reference at this look (the fewest of a
    /// gating metric, or of any metric without one), and the information fraction.
    pub n_treatment: u32,
    pub n_reference: u32,
    pub t: f64,
    /// The fixed design with the same α and the same power at twice the threshold, for
    /// the noisiest gating metric's CV: (that power, trials per arm).
    pub fixed: Option<(f64, u32)>,
}

impl PairLook {
    /// The treatment's device-hours at `trial_hours` a trial.
    pub fn device_hours(&self, trial_hours: f64) -> f64 {
        f64::from(self.n_treatment) * trial_hours
    }

    /// The fixed design's device-hours at `trial_hours` a trial.
    pub fn fixed_device_hours(&self, trial_hours: f64) -> Option<f64> {
        self.fixed.map(|f| f64::from(f.1) * trial_hours)
    }
}

/// What one pair's comparison decided.
#[derive(Debug, Clone)]
pub struct PairDecision {
    /// The metrics judged (indices into the pairs given), each with its decision.
    pub judged: Vec<(usize, MetricDecision)>,
    pub verdict: Verdict,
    /// In a sequential campaign: where the pair stands.
    pub look: Option<PairLook>,
}

/// A sequential campaign's design on the pair's model, and the looks the plan recorded for
/// the pair, in the order they were taken.
#[derive(Debug, Clone, Copy)]
pub struct Looked<'a> {
    pub design: &'a Design,
    pub recorded: &'a [Recorded],
}

/// A stopped pair's arms as its look had them: values and summary of each.
type Prefix = (Vec<f64>, Summary, Vec<f64>, Summary);

/// Decides a pair from its metrics in both arms (`pairs`, whole arms in trial order), by
/// the fixed rule or, with `looked`, at the pair's look. A pair that a look stopped is
/// judged on the data of that look: the first values of each arm, as many as it had
/// (a metric without them left out). `None` when no metric is left to compare.
pub fn decide_pair(pairs: &[MetricPair], rule: &DecisionRule, looked: Option<Looked>) -> Option<PairDecision> {
    let stopped = looked.and_then(|l| stopped_at(l.recorded));
    let frozen = stopped.as_ref().map(|(_, r)| (r.n_treatment as usize, r.n_reference as usize));
    // A stopped pair's arms as they were at its look (values come in trial order).
    let prefixes: Vec<Option<Prefix>> = pairs
        .iter()
        .map(|p| {
            let (nt, nb) = frozen?;
            let t: Vec<f64> = p.treatment.values.iter().copied().take(nt).collect();
            let r: Vec<f64> = p.reference.values.iter().copied().take(nb).collect();
            let (ts, rs) = (summarize(&t, rule.confidence)?, summarize(&r, rule.confidence)?);
            Some((t, ts, r, rs))
        })
        .collect();
    let kept: Vec<usize> = (0..pairs.len()).filter(|&k| frozen.is_none() || prefixes[k].is_some()).collect();
    if kept.is_empty() {
        return None;
    }
    let judged_pairs: Vec<MetricPair> = kept
        .iter()
        .map(|&k| match &prefixes[k] {
            Some((t, ts, r, rs)) => MetricPair {
                metric: pairs[k].metric,
                treatment: Arm { values: t, stats: ts },
                reference: Arm { values: r, stats: rs },
            },
            None => pairs[k],
        })
        .collect();
    let mut look = looked.map(|l| pair_look(l, stopped.as_ref(), &judged_pairs, rule));
    let decisions = judge(&judged_pairs, rule, look.as_ref().map(|l| &l.levels));
    let verdict =
        overall_verdict(judged_pairs.iter().map(|p| p.metric).zip(decisions.iter().map(|d| d.verdict)), rule.gating);
    if let Some(look) = look.as_mut()
        && look.decided_at.is_none()
        && decided(verdict)
    {
        look.decided_at = Some(look.look);
    }
    Some(PairDecision { judged: kept.into_iter().zip(decisions).collect(), verdict, look })
}

/// The look that stopped a pair (decided, or at `max`), if one did: the fractions of the
/// looks up to it, and its record.
fn stopped_at(recorded: &[Recorded]) -> Option<(Vec<f64>, Recorded)> {
    let mut fractions: Vec<f64> = Vec::new();
    for l in recorded {
        if fractions.last().is_none_or(|&last| l.t > last) {
            fractions.push(l.t);
        }
        if l.stopped {
            return Some((fractions, *l));
        }
    }
    None
}

/// The levels of this look of the pair (for a stopped pair, of the look that stopped it:
/// `pairs` then hold the data it had), and where it stands.
fn pair_look(
    looked: Looked,
    stopped: Option<&(Vec<f64>, Recorded)>,
    pairs: &[MetricPair],
    rule: &DecisionRule,
) -> PairLook {
    let design = looked.design;
    let gated: Vec<&MetricPair> = pairs.iter().filter(|p| rule.gates(p.metric)).collect();
    let counted = if gated.is_empty() { pairs.iter().collect() } else { gated.clone() };
    let n_t = counted.iter().map(|p| p.treatment.values.len()).min().unwrap_or(0);
    let n_b = counted.iter().map(|p| p.reference.values.len()).min().unwrap_or(0);
    let (fractions, t, decided_at) = match stopped {
        Some((fractions, rec)) => (fractions.clone(), rec.t, decided(rec.verdict).then_some(fractions.len())),
        None => {
            let t = information(n_t, n_b, design.max);
            (fractions(looked.recorded.iter().map(|l| l.t), t), t, None)
        }
    };
    // The noisiest gating metric sets what the fixed design would need.
    let cv = gated
        .iter()
        .filter_map(|p| Some(p.treatment.stats.cv?.max(p.reference.stats.cv?)))
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    PairLook {
        look: fractions.len(),
        max_looks: design.planned_counts().len(),
        decided_at,
        n_treatment: n_t as u32,
        n_reference: n_b as u32,
        t,
        fixed: cv.and_then(|cv| design.fixed_equivalent(cv)),
        levels: design.levels(fractions),
    }
}
