//! The decision itself: how often a sequential campaign (`repeats = { min, max, stop =
//! "decided" }`) and a fixed one decide right, and how many device-hours each takes.
//!
//! `cargo bench --bench decide` runs `RUNS` simulated campaigns per true effect (0, ±½,
//! ±1, ±2 and ±4 times the practical threshold) of one variant against its baseline on one
//! phone: the simulator's two gating metrics, energy and CPU, each trial's value drawn as
//! the simulator draws a trial's power factor (1 + sd·z, clamped to [0.5, 1.5]) with the
//! trial-to-trial spread of a phone (`ENERGY_SD`, `CPU_SD`), the effect multiplying both.
//! Every look is decided by `lab::stats::verdict_of`, the report's own rule (Welch's test,
//! Holm, the relative change's intervals, TOST) at the look's group-sequential levels. The
//! fixed design is the one with the same α and the same power at twice the threshold as
//! the sequential one: the fewest trials per arm whose simulated power reaches it.
//! Printed per design and effect: worse / better / same / inconclusive rates, mean and
//! 95th-percentile device-hours to the decision (both arms, one-hour trials), and the
//! ratio to the fixed design's; then the targets in one line. Three scenarios: lab's
//! spending function with the effect on both metrics and on energy only, and the other
//! spending function for comparison. `DECIDE_RUNS=N` changes the runs per scenario
//! (about 4 minutes each at 1000 on 2 cores). Not a timed test: the figures are for
//! docs/statistics.md and the issue notes.

use lab::config::StatsSettings;
use lab::stats::sequential::{Design, LookLevels, SPENDING, Spending, decided};
use lab::stats::{DecisionRule, Verdict, verdict_of};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

const RUNS: usize = 1000;
const ALPHA: f64 = 0.05;
const THRESHOLD: f64 = 0.05;
/// A phone's trial-to-trial spread of energy and of CPU time (relative sd).
const ENERGY_SD: f64 = 0.05;
const CPU_SD: f64 = 0.03;
const MIN: u32 = 3;
const MAX: u32 = 30;
const EFFECTS: [f64; 9] = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0];

fn settings() -> StatsSettings {
    StatsSettings {
        alpha: ALPHA,
        practical_threshold: THRESHOLD,
        confidence: 0.95,
        gating: vec!["energy_j".into(), "cpu_pct".into()],
    }
}

/// One trial's value of a metric with mean `mean`, spread `sd` and true relative change `effect`.
fn draw(rng: &mut ChaCha8Rng, mean: f64, sd: f64, effect: f64) -> f64 {
    let z: f64 = rng.sample(StandardNormal);
    mean * (1.0 + effect) * (1.0 + sd * z).clamp(0.5, 1.5)
}

/// Both arms of a campaign, grown a trial at a time.
#[derive(Default)]
struct Arms {
    energy: (Vec<f64>, Vec<f64>),
    cpu: (Vec<f64>, Vec<f64>),
}

/// Which gating metrics a true effect moves.
#[derive(Clone, Copy, Debug)]
enum Moves {
    /// A build that costs more of everything: energy and CPU change alike.
    Both,
    /// An energy regression with CPU unchanged (the radio, the screen).
    EnergyOnly,
}

impl Arms {
    fn grow(&mut self, rng: &mut ChaCha8Rng, effect: f64, moves: Moves) {
        let cpu_effect = match moves {
            Moves::Both => effect,
            Moves::EnergyOnly => 0.0,
        };
        self.energy.0.push(draw(rng, 500.0, ENERGY_SD, effect));
        self.energy.1.push(draw(rng, 500.0, ENERGY_SD, 0.0));
        self.cpu.0.push(draw(rng, 20.0, CPU_SD, cpu_effect));
        self.cpu.1.push(draw(rng, 20.0, CPU_SD, 0.0));
    }

    fn verdict(&self, settings: &StatsSettings, look: Option<&LookLevels>) -> Verdict {
        let metrics: [(&str, &[f64], &[f64]); 2] =
            [("energy_j", &self.energy.0, &self.energy.1), ("cpu_pct", &self.cpu.0, &self.cpu.1)];
        let rule = DecisionRule {
            alpha: settings.alpha,
            threshold: settings.practical_threshold,
            confidence: settings.confidence,
            gating: &settings.gating,
        };
        verdict_of(&metrics, &rule, look)
    }
}

/// What one design did over the runs of one effect.
#[derive(Default)]
struct Tally {
    worse: usize,
    better: usize,
    same: usize,
    other: usize,
    /// Trials per arm at the decision, one per run.
    trials: Vec<u32>,
}

impl Tally {
    fn add(&mut self, v: Verdict, n: u32) {
        match v {
            Verdict::Worse => self.worse += 1,
            Verdict::Better => self.better += 1,
            Verdict::Same => self.same += 1,
            _ => self.other += 1,
        }
        self.trials.push(n);
    }

    fn rate(&self, k: usize) -> f64 {
        k as f64 / self.trials.len() as f64
    }

    /// Device-hours of both arms, one-hour trials.
    fn mean_hours(&self) -> f64 {
        2.0 * self.trials.iter().map(|&n| f64::from(n)).sum::<f64>() / self.trials.len() as f64
    }

    fn p95_hours(&self) -> f64 {
        let mut t = self.trials.clone();
        t.sort_unstable();
        2.0 * f64::from(t[((t.len() as f64 * 0.95).ceil() as usize).saturating_sub(1).min(t.len() - 1)])
    }
}

fn sequential(spending: Spending, moves: Moves, effect: f64, runs: usize, seed: u64) -> Tally {
    let settings = settings();
    let counts = Design { min: MIN, max: MAX, devices: 1, alpha: ALPHA, threshold: THRESHOLD }.planned_counts();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for _ in 0..runs {
        let mut arms = Arms::default();
        let mut fractions = Vec::new();
        let mut last = (Verdict::Inconclusive, 0);
        for &n in &counts {
            while (arms.energy.0.len() as u32) < n {
                arms.grow(&mut rng, effect, moves);
            }
            fractions.push(f64::from(n) / f64::from(MAX));
            let look = LookLevels { fractions: fractions.clone(), alpha: ALPHA, spending };
            let v = arms.verdict(&settings, Some(&look));
            last = (v, n);
            if decided(v) {
                break;
            }
        }
        tally.add(last.0, last.1);
    }
    tally
}

fn fixed(n: u32, moves: Moves, effect: f64, runs: usize, seed: u64) -> Tally {
    let settings = settings();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for _ in 0..runs {
        let mut arms = Arms::default();
        for _ in 0..n {
            arms.grow(&mut rng, effect, moves);
        }
        tally.add(arms.verdict(&settings, None), n);
    }
    tally
}

/// The fewest trials per arm whose fixed design calls a change of twice the threshold
/// `worse` at least as often as `power` (bisection; simulated power rises with n).
fn fixed_matching(power: f64, moves: Moves, runs: usize) -> u32 {
    let (mut lo, mut hi) = (4u32, 4 * MAX);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let t = fixed(mid, moves, 2.0 * THRESHOLD, runs, 77);
        if t.rate(t.worse) >= power {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

fn main() {
    let runs: usize = std::env::var("DECIDE_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(RUNS);
    let mc = (ALPHA * (1.0 - ALPHA) / runs as f64).sqrt();
    println!(
        "decide: {runs} campaigns per effect; α = {ALPHA}, threshold ±{:.0} %, gating energy (sd {:.0} %) and cpu (sd \
{:.0} %), sequential min {MIN}, max {MAX}, a look after every trial per arm; Monte-Carlo error of a rate near α: ±{:.2} %",
        THRESHOLD * 100.0,
        ENERGY_SD * 100.0,
        CPU_SD * 100.0,
        mc * 100.0
    );
    let chosen = SPENDING;
    let other = match chosen {
        Spending::Pocock => Spending::ObrienFleming,
        Spending::ObrienFleming => Spending::Pocock,
    };
    for (spending, moves) in [(chosen, Moves::Both), (chosen, Moves::EnergyOnly), (other, Moves::Both)] {
        scenario(spending, moves, runs, mc);
    }
}

fn scenario(spending: Spending, moves: Moves, runs: usize, mc: f64) {
    let seq: Vec<(f64, Tally)> = EFFECTS
        .iter()
        .enumerate()
        .map(|(i, &e)| (e, sequential(spending, moves, e * THRESHOLD, runs, 1000 + i as u64)))
        .collect();
    let power = seq.iter().find(|(e, _)| *e == 2.0).map(|(_, t)| t.rate(t.worse)).unwrap_or(0.0);
    let n_fixed = fixed_matching(power, moves, runs.max(2000));
    let chosen = if spending == SPENDING { " (lab's)" } else { "" };
    println!(
        "\nspending {spending:?}{chosen}, effect on {moves:?}: power at 2× threshold {:.1} %; the fixed design with that \
power: {n_fixed} trials per arm",
        power * 100.0
    );
    println!(
        "{:>7}  {:<10} {:>7} {:>7} {:>7} {:>7}  {:>10} {:>9} {:>8}",
        "effect", "design", "worse", "better", "same", "incon.", "mean dev-h", "p95 dev-h", "vs fixed"
    );
    let mut ratios = Vec::new();
    let mut fixed_power = 0.0;
    for (i, (e, s)) in seq.iter().enumerate() {
        let f = fixed(n_fixed, moves, e * THRESHOLD, runs, 5000 + i as u64);
        for (name, t) in [("sequential", s), ("fixed", &f)] {
            println!(
                "{:>+6.1}×  {:<10} {:>6.1}% {:>6.1}% {:>6.1}% {:>6.1}%  {:>10.1} {:>9.0} {:>7.0}%",
                e,
                name,
                100.0 * t.rate(t.worse),
                100.0 * t.rate(t.better),
                100.0 * t.rate(t.same),
                100.0 * t.rate(t.other),
                t.mean_hours(),
                t.p95_hours(),
                100.0 * t.mean_hours() / f.mean_hours()
            );
        }
        ratios.push((*e, s.mean_hours() / f.mean_hours()));
        if *e == 2.0 {
            fixed_power = f.rate(f.worse);
        }
    }
    let at = |x: f64| ratios.iter().find(|r| r.0 == x).map_or(f64::NAN, |r| r.1);
    let null = &seq[0].1;
    let power_mc = (power * (1.0 - power) / runs as f64).sqrt().max(1.0 / runs as f64);
    println!(
        "targets: false positives at 0: {:.1} % (≤ α = {:.0} %, ±{:.1} %); false same at ±threshold: {:.1} % / {:.1} %; \
device-hours vs fixed at 0: {:.0} %, at +2×: {:.0} %, at −2×: {:.0} % (target ≤ 60 %); power at 2×: {:.1} % vs fixed \
{:.1} % (±{:.1} %)",
        100.0 * null.rate(null.worse + null.better),
        100.0 * ALPHA,
        100.0 * mc,
        100.0 * seq[3].1.rate(seq[3].1.same),
        100.0 * seq[4].1.rate(seq[4].1.same),
        100.0 * at(0.0),
        100.0 * at(2.0),
        100.0 * at(-2.0),
        100.0 * power,
        100.0 * fixed_power,
        100.0 * 2.0 * power_mc
    );
}
