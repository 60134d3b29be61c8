//! The decision itself, compared at equal power: how often each design `lab` offers
//! decides right, how often it errs at the practical threshold, and how many
//! device-hours it takes, against the fixed design a statistician would choose.
//!
//! `cargo bench --bench decide` runs `RUNS` simulated campaigns per true effect (0, ±½,
//! ±1, ±2 and ±4 times the practical threshold) of one variant against its baseline on
//! one phone (`lab::stats::sequential::campaign`: energy and CPU time gating, a phone's
//! trial-to-trial spread, every look decided by the report's own rule). For each target
//! power (80 % and 90 % to call a change of twice the threshold `worse`) three designs,
//! all sized for that power at the energy's CV (`ENERGY_SD`), the noisiest gating metric:
//!
//! - **fixed**: the fewest trials per arm whose exact noncentral-t power reaches the
//!   target (`stats::trials_per_arm`, Julious 2004) for `worse` at twice the threshold:
//!   a one-sided test at α/2 of a distance ln((1 + 2Δ)/(1 + Δ)) on the log scale the
//!   relative change's interval is computed on; decided once;
//! - **every round**: `repeats = { min = 3, max = M, stop = "decided" }`, a look after
//!   every trial per arm, no futility bound, M the smallest whose power
//!   (`Design::power`: recursive integration, each look on the t scale) reaches the target;
//! - **sized**: `repeats = { stop = "decided", power = P }`, `DEFAULT_LOOKS` looks after
//!   equal blocks with a futility bound (`stats::sequential::Target`).
//!
//! Two scenarios per power: the effect on energy only (the sizing's assumption holds)
//! and on both metrics (CPU, less noisy, moves too). Printed per design and effect: the
//! verdicts' rates, mean and 95th-percentile device-hours (both arms, one-hour trials) and
//! the mean's ratio to the fixed design's; then each design's type-I errors at the
//! threshold — P(`worse` | +1×), P(`better` | −1×), P(`same` | ±1×) — and the issue's
//! targets. `DECIDE_RUNS=N` changes the campaigns per effect (2 000 by default: about
//! 10 minutes on 2 cores). Not a timed test: the figures are for docs/statistics.md and
//! docs/benchmarks.md.

use lab::stats::sequential::{DEFAULT_LOOKS, Decider, Design, GATING, Moves, Phone, Target, campaign};
use lab::stats::{DecisionRule, Verdict};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const RUNS: usize = 2000;
const ALPHA: f64 = 0.05;
const THRESHOLD: f64 = 0.05;
/// A phone's trial-to-trial spread of energy and of CPU time (relative sd).
const ENERGY_SD: f64 = 0.05;
const CPU_SD: f64 = 0.03;
const EFFECTS: [f64; 9] = [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0];

fn gating() -> Vec<String> {
    GATING.iter().map(|g| g.to_string()).collect()
}

/// What one design did over the runs of one effect.
#[derive(Default, Clone)]
struct Tally {
    worse: usize,
    better: usize,
    same: usize,
    no_large: usize,
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
            Verdict::NoLargeChange => self.no_large += 1,
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

/// `runs` campaigns of `decider` at `effect` (a multiple of the threshold), on both cores.
fn tally(decider: Decider, phone: &Phone, effect: f64, runs: usize, seed: u64) -> Tally {
    let gating = gating();
    let rule = DecisionRule { alpha: ALPHA, threshold: THRESHOLD, confidence: 0.95, gating: &gating };
    let halves: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|h| {
                let rule = &rule;
                s.spawn(move || {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed * 2 + h);
                    let mut t = Tally::default();
                    for _ in 0..runs / 2 + (runs % 2) * (h as usize) {
                        let (v, n) = campaign(decider, rule, phone, effect * THRESHOLD, &mut rng);
                        t.add(v, n);
                    }
                    t
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a simulation thread")).collect()
    });
    let mut all = Tally::default();
    for h in halves {
        all.worse += h.worse;
        all.better += h.better;
        all.same += h.same;
        all.no_large += h.no_large;
        all.other += h.other;
        all.trials.extend(h.trials);
    }
    all
}

/// The every-round design (`min = 3`) with the smallest `max` whose power reaches `power`.
fn every_round(power: f64) -> Design {
    let design = |max: u32| Design { min: 3, max, devices: 1, alpha: ALPHA, threshold: THRESHOLD, target: None };
    let max = (4..400).find(|&m| design(m).fixed_equivalent(ENERGY_SD).is_some_and(|(p, _)| p >= power));
    design(max.unwrap_or(400))
}

/// The design sized from `power` at the energy's CV, with `looks` looks, and the fixed
/// design's trials per arm for that power.
fn sized(power: f64, looks: u32) -> (Design, u32) {
    let target = Target { power, looks, cv: ENERGY_SD };
    let s = target.size(ALPHA, THRESHOLD).expect("a design for a valid power and CV");
    let max = *s.counts.last().expect("a look");
    (Design { min: s.counts[0], max, devices: 1, alpha: ALPHA, threshold: THRESHOLD, target: Some(target) }, s.fixed)
}

fn main() {
    let runs: usize = std::env::var("DECIDE_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(RUNS);
    let mc = (ALPHA * (1.0 - ALPHA) / runs as f64).sqrt();
    println!(
        "decide: {runs} campaigns per effect; α = {ALPHA}, threshold ±{:.0} %, gating energy (sd {:.0} %) and cpu \
(sd {:.0} %); Monte-Carlo error of a rate near α: ±{:.2} %",
        THRESHOLD * 100.0,
        ENERGY_SD * 100.0,
        CPU_SD * 100.0,
        mc * 100.0
    );
    for power in [0.8, 0.9] {
        for moves in [Moves::EnergyOnly, Moves::Both] {
            scenario(power, moves, runs, mc);
        }
    }
}

fn scenario(power: f64, moves: Moves, runs: usize, mc: f64) {
    let phone = Phone { energy_sd: ENERGY_SD, cpu_sd: CPU_SD, moves };
    let (sized, fixed) = sized(power, DEFAULT_LOOKS);
    let rounds = every_round(power);
    println!(
        "\npower {:.0} % at 2× threshold, effect on {moves:?}: fixed {fixed} trials per arm; every round min 3, max {}; \
sized {} looks at {:?} trials per arm",
        power * 100.0,
        rounds.max,
        sized.planned_counts().len(),
        sized.planned_counts()
    );
    println!(
        "{:>7}  {:<11} {:>7} {:>7} {:>7} {:>8} {:>7}  {:>10} {:>9} {:>8}",
        "effect", "design", "worse", "better", "same", "no large", "incon.", "mean dev-h", "p95 dev-h", "vs fixed"
    );
    let designs: [(&str, Decider); 3] = [
        ("fixed", Decider::Fixed(fixed)),
        ("every round", Decider::Sequential(&rounds)),
        ("sized", Decider::Sequential(&sized)),
    ];
    // Per design, per effect.
    let mut tallies: Vec<Vec<Tally>> = vec![Vec::new(); designs.len()];
    for (i, &e) in EFFECTS.iter().enumerate() {
        for (d, (_, decider)) in designs.iter().enumerate() {
            tallies[d].push(tally(*decider, &phone, e, runs, 1000 * (d as u64 + 1) + i as u64));
        }
        let base = tallies[0][i].mean_hours();
        for (d, (name, _)) in designs.iter().enumerate() {
            let t = &tallies[d][i];
            println!(
                "{:>+6.1}×  {:<11} {:>6.1}% {:>6.1}% {:>6.1}% {:>7.1}% {:>6.1}%  {:>10.1} {:>9.0} {:>7.0}%",
                e,
                name,
                100.0 * t.rate(t.worse),
                100.0 * t.rate(t.better),
                100.0 * t.rate(t.same),
                100.0 * t.rate(t.no_large),
                100.0 * t.rate(t.other),
                t.mean_hours(),
                t.p95_hours(),
                100.0 * t.mean_hours() / base
            );
        }
    }
    let at = |d: usize, e: f64| &tallies[d][EFFECTS.iter().position(|&x| x == e).expect("an effect")];
    let power_mc = (power * (1.0 - power) / runs as f64).sqrt();
    for (d, (name, _)) in designs.iter().enumerate() {
        let (up, down) = (at(d, 1.0), at(d, -1.0));
        let (plus2, minus2) = (at(d, 2.0), at(d, -2.0));
        println!(
            "{name:<11}: type-I at the threshold: worse | +1× {:.2} %, better | −1× {:.2} %, same | +1× {:.2} %, \
same | −1× {:.2} % (each ≤ α = {:.0} % ± {:.2} %); power at ±2×: {:.1} % / {:.1} % (target {:.0} % ± {:.1} %); \
device-hours vs fixed at 0: {:.0} %, at +2×: {:.0} %, at −2×: {:.0} %",
            100.0 * up.rate(up.worse),
            100.0 * down.rate(down.better),
            100.0 * up.rate(up.same),
            100.0 * down.rate(down.same),
            100.0 * ALPHA,
            100.0 * mc,
            100.0 * plus2.rate(plus2.worse),
            100.0 * minus2.rate(minus2.better),
            100.0 * power,
            100.0 * power_mc,
            100.0 * at(d, 0.0).mean_hours() / at(0, 0.0).mean_hours(),
            100.0 * plus2.mean_hours() / at(0, 2.0).mean_hours(),
            100.0 * minus2.mean_hours() / at(0, -2.0).mean_hours(),
        );
    }
}
