//! One campaign as columns: what the report reads, without a `String` per row.
//!
//! `Store::attempts` gives a record per attempt with about a dozen heap allocations
//! (3 Strings per measurement, whole JSON trees per state snapshot); at 144 000 trials
//! that is gigabytes. Here names are interned once ([`Names`]), trials and attempts are
//! parallel vectors, and measurements are flat columns indexed by attempt
//! (`a_meas`). The rows come in the order `Store::attempts` gives them — trial, attempt,
//! then `seq` — because that order decides the summation order, so the last bits of
//! every mean.
//!
//! [`CampaignColumns::from_records`] builds the same columns from records, so tests and
//! in-memory campaigns go through the same code as a store, and both paths can be
//! compared ([`PartialEq`] compares floats by their bits).

use std::collections::HashMap;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension, Row};

use super::backend::{Columns, DbError, FromRow};
use super::columns_reader::{AttemptRow, ColumnsReader};
use super::error::StoreError;
use super::measurement_columns::Fetch;
use super::records::{AttemptRecord, AttemptStatus, Attestation, TrialOutcome, TrialRecord};
use super::state_digest::{Kept, MOMENTS, Reading, SETTINGS, SOURCES, StateDigest};
use super::store::Store;
use crate::measure::{BATTERY_PCT, Series, UntetherMode};

/// A name's index in [`Names`].
pub type Sym = u32;

/// A series' points: (seconds, value).
pub type Points = Vec<(f64, f64)>;

/// Every distinct device, model, variant, build, config, metric, unit and source name
/// of a campaign, each held once.
#[derive(Debug, Clone, Default)]
pub struct Names {
    names: Vec<Box<str>>,
    at: HashMap<Box<str>, Sym>,
}

impl Names {
    /// The symbol of `name`, adding it on first sight (the only allocation per name).
    pub fn intern(&mut self, name: &str) -> Sym {
        if let Some(&s) = self.at.get(name) {
            return s;
        }
        let s = Sym::try_from(self.names.len()).expect("fewer than 2^32 names");
        self.names.push(name.into());
        self.at.insert(name.into(), s);
        s
    }

    /// As `intern`, but first compares with the column's previous symbol: consecutive
    /// rows mostly repeat a name (one device's trials, one source's metrics), and a byte
    /// comparison is cheaper than a hash.
    fn intern_after(&mut self, last: &mut Option<Sym>, name: &str) -> Sym {
        if let Some(s) = *last
            && *self.names[s as usize] == *name
        {
            return s;
        }
        let s = self.intern(name);
        *last = Some(s);
        s
    }

    /// The symbol of `name`, if the campaign has it.
    pub fn get(&self, name: &str) -> Option<Sym> {
        self.at.get(name).copied()
    }

    /// The name of `sym`. Panics on a symbol from another campaign's `Names`.
    pub fn name(&self, sym: Sym) -> &str {
        &self.names[sym as usize]
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Same names with the same symbols (the map follows from the list).
impl PartialEq for Names {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names
    }
}

/// One campaign's planned trials, attempts and measurements, as parallel columns.
#[derive(Debug, Clone, Default)]
pub struct CampaignColumns {
    pub names: Names,
    // Trials, in plan order (ascending idx).
    pub t_idx: Vec<u32>,
    pub t_key: Vec<Box<str>>,
    pub t_device: Vec<Sym>,
    /// The planned device's model, as stored (pooling by untether mode is the report's).
    pub t_model: Vec<Sym>,
    pub t_variant: Vec<Sym>,
    pub t_build: Vec<Sym>,
    pub t_config: Vec<Sym>,
    pub t_repeat: Vec<u32>,
    pub t_block: Vec<u32>,
    pub t_order: Vec<u32>,
    /// Attempts recorded, and the outcome by `Store::trials`'s rule.
    pub t_attempts: Vec<u32>,
    pub t_outcome: Vec<TrialOutcome>,
    // Attempts, in (trial idx, attempt) order. `a_trial` is the trial's row in `t_*`;
    // attempts of trials not in the plan are dropped, as `Store::attempts`'s join does.
    pub a_trial: Vec<u32>,
    pub a_attempt: Vec<u32>,
    pub a_valid: Vec<bool>,
    /// The device it ran on; empty when the store kept an empty name (the planned one).
    pub a_device: Vec<Sym>,
    pub a_untether: Vec<Option<UntetherMode>>,
    pub a_soak_start_s: Vec<f64>,
    /// Seconds of the first `soak` phase, if there was one.
    pub a_soak_s: Vec<Option<f64>>,
    /// The measurements of attempt `i` are `m_*[a_meas[i]..a_meas[i + 1]]`
    /// (`len` = attempts + 1).
    pub a_meas: Vec<u32>,
    /// A non-empty `battery_pct` series is stored with the attempt.
    pub a_has_battery: Vec<bool>,
    /// Sparse, by attempt row: the reasons of invalid attempts that have some.
    pub reasons: Vec<(u32, Vec<String>)>,
    /// Sparse, by attempt row: attempts with labels.
    pub labels: Vec<(u32, Vec<String>)>,
    /// Sparse, by attempt row, as given.
    pub attestations: Vec<(u32, Attestation)>,
    // Measurements, by attempt then as recorded.
    pub m_metric: Vec<Sym>,
    pub m_value: Vec<f64>,
    pub m_unit: Vec<Sym>,
    pub m_source: Vec<Sym>,
    /// The battery series loaded, by attempt row: (seconds, %). `from_records` keeps every
    /// one; `read_columns` none (the report fetches the few it draws with
    /// [`Store::battery_points`]).
    pub battery: Vec<(u32, Points)>,
    /// The devices' known state readings, grouped (see [`StateGroup`]).
    pub states: StateGroups,
    /// Sparse, by attempt row: the whole digest of each attempt with an attestation (to
    /// set what the operator said beside what the lab read).
    pub attested_states: Vec<(u32, StateDigest)>,
    /// (trial idx, attempt) of attempts whose trial is not planned, left out: only
    /// records can have them (the store's join drops them), and the report says so.
    pub unplanned: Vec<(u32, u32)>,
}

/// The known readings of one (device, moment, setting, source) over a campaign's
/// attempts: numbers as a range, switches as the values seen. The device is the
/// attempt's, else its trial's.
#[derive(Debug, Clone, PartialEq)]
pub struct StateGroup {
    pub device: Sym,
    pub moment: u8,
    pub setting: u8,
    pub source: u8,
    pub range: Option<(f64, f64)>,
    pub on: bool,
    pub off: bool,
    pub attempts: u32,
    pub valid: u32,
}

/// Groups in the order first seen (attempt by attempt, each in digest order).
#[derive(Debug, Clone, Default)]
pub struct StateGroups {
    pub groups: Vec<StateGroup>,
    /// Per device: the group of each (moment, setting, source), `u32::MAX` for none; the
    /// device last used first looked at (an attempt's readings are all one device's).
    at: Vec<(Sym, Vec<u32>)>,
    last: usize,
}

const SLOTS: usize = MOMENTS.len() * SETTINGS.len() * SOURCES.len();

impl PartialEq for StateGroups {
    fn eq(&self, o: &Self) -> bool {
        self.groups == o.groups
    }
}

impl StateGroups {
    fn add(&mut self, device: Sym, valid: bool, r: Reading) {
        if self.at.get(self.last).is_none_or(|(d, _)| *d != device) {
            self.last = match self.at.iter().position(|(d, _)| *d == device) {
                Some(i) => i,
                None => {
                    self.at.push((device, vec![u32::MAX; SLOTS]));
                    self.at.len() - 1
                }
            };
        }
        let slot = (r.moment as usize * SETTINGS.len() + r.setting as usize) * SOURCES.len() + r.source as usize;
        let at = &mut self.at[self.last].1[slot];
        if *at == u32::MAX {
            *at = self.groups.len() as u32;
            self.groups.push(StateGroup {
                device,
                moment: r.moment,
                setting: r.setting,
                source: r.source,
                range: None,
                on: false,
                off: false,
                attempts: 0,
                valid: 0,
            });
        }
        let g = &mut self.groups[*at as usize];
        match r.value {
            Kept::Switch(true) => g.on = true,
            Kept::Switch(false) => g.off = true,
            Kept::Float(x) | Kept::Integer(x) => {
                g.range = Some(g.range.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
            }
        }
        g.attempts += 1;
        g.valid += u32::from(valid);
    }
}

/// Floats compare by their bits, so NaN equals itself and the test of "same columns"
/// means the same bytes.
impl PartialEq for CampaignColumns {
    fn eq(&self, o: &Self) -> bool {
        // Destructured so that a new column cannot be left out of the comparison.
        let CampaignColumns {
            names,
            t_idx,
            t_key,
            t_device,
            t_model,
            t_variant,
            t_build,
            t_config,
            t_repeat,
            t_block,
            t_order,
            t_attempts,
            t_outcome,
            a_trial,
            a_attempt,
            a_valid,
            a_device,
            a_untether,
            a_soak_start_s,
            a_soak_s,
            a_meas,
            a_has_battery,
            reasons,
            labels,
            attestations,
            m_metric,
            m_value,
            m_unit,
            m_source,
            battery,
            states,
            attested_states,
            unplanned,
        } = self;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let soak_bits = |v: &[Option<f64>]| v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>();
        let battery_bits = |v: &[(u32, Vec<(f64, f64)>)]| {
            v.iter()
                .map(|(r, p)| (*r, p.iter().map(|(t, y)| (t.to_bits(), y.to_bits())).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
        };
        *names == o.names
            && *t_idx == o.t_idx
            && *t_key == o.t_key
            && *t_device == o.t_device
            && *t_model == o.t_model
            && *t_variant == o.t_variant
            && *t_build == o.t_build
            && *t_config == o.t_config
            && *t_repeat == o.t_repeat
            && *t_block == o.t_block
            && *t_order == o.t_order
            && *t_attempts == o.t_attempts
            && *t_outcome == o.t_outcome
            && *a_trial == o.a_trial
            && *a_attempt == o.a_attempt
            && *a_valid == o.a_valid
            && *a_device == o.a_device
            && *a_untether == o.a_untether
            && bits(a_soak_start_s) == bits(&o.a_soak_start_s)
            && soak_bits(a_soak_s) == soak_bits(&o.a_soak_s)
            && *a_meas == o.a_meas
            && *a_has_battery == o.a_has_battery
            && *reasons == o.reasons
            && *labels == o.labels
            && *attestations == o.attestations
            && *m_metric == o.m_metric
            && bits(m_value) == bits(&o.m_value)
            && *m_unit == o.m_unit
            && *m_source == o.m_source
            && battery_bits(battery) == battery_bits(&o.battery)
            && *states == o.states
            && *attested_states == o.attested_states
            && *unplanned == o.unplanned
    }
}

/// The previous symbol of each interned column (see [`Names::intern_after`]).
#[derive(Default, Clone)]
pub(super) struct Last {
    device: Option<Sym>,
    model: Option<Sym>,
    variant: Option<Sym>,
    build: Option<Sym>,
    config: Option<Sym>,
    a_device: Option<Sym>,
    metric: Option<Sym>,
    unit: Option<Sym>,
    source: Option<Sym>,
}

/// One planned trial's fields, borrowed from a record or a row.
pub(super) struct TrialIn<'a> {
    pub idx: u32,
    pub key: &'a str,
    pub device: &'a str,
    pub model: &'a str,
    pub variant: &'a str,
    pub build: &'a str,
    pub config: &'a str,
    pub repeat: u32,
    pub block: u32,
    pub order: u32,
}

/// From `idx, key, device, device_model, variant, build, config, repeat, block,
/// device_order` (`columns_reader::TRIALS`; SQLite's borrowed read has its own).
impl<'r> FromRow<'r> for TrialIn<'r> {
    fn from_row(c: &mut Columns<'r>) -> Result<Self, DbError> {
        Ok(TrialIn {
            idx: c.get()?,
            key: c.str()?,
            device: c.str()?,
            model: c.str()?,
            variant: c.str()?,
            build: c.str()?,
            config: c.str()?,
            repeat: c.get()?,
            block: c.get()?,
            order: c.get()?,
        })
    }
}

/// One attempt's fields, borrowed; `trial` is its row in `t_*`.
pub(super) struct AttemptIn<'a> {
    pub trial: u32,
    pub attempt: u32,
    pub valid: bool,
    /// `None`: the trial's (a NULL in the store).
    pub device: Option<&'a str>,
    pub untether: Option<UntetherMode>,
    pub soak_start_s: f64,
    pub soak_s: Option<f64>,
    /// A non-empty `battery_pct` series is stored with it.
    pub has_battery: bool,
}

/// Both paths push through here, in the same order, so they intern the same symbols.
impl CampaignColumns {
    pub(super) fn push_trial(&mut self, last: &mut Last, t: TrialIn<'_>) {
        let n = &mut self.names;
        self.t_idx.push(t.idx);
        self.t_key.push(t.key.into());
        self.t_device.push(n.intern_after(&mut last.device, t.device));
        self.t_model.push(n.intern_after(&mut last.model, t.model));
        self.t_variant.push(n.intern_after(&mut last.variant, t.variant));
        self.t_build.push(n.intern_after(&mut last.build, t.build));
        self.t_config.push(n.intern_after(&mut last.config, t.config));
        self.t_repeat.push(t.repeat);
        self.t_block.push(t.block);
        self.t_order.push(t.order);
    }

    pub(super) fn push_attempt(&mut self, last: &mut Last, a: AttemptIn<'_>) {
        self.a_trial.push(a.trial);
        self.a_attempt.push(a.attempt);
        self.a_valid.push(a.valid);
        let device = match a.device {
            Some(d) => self.names.intern_after(&mut last.a_device, d),
            None => self.t_device[a.trial as usize],
        };
        self.a_device.push(device);
        self.a_untether.push(a.untether);
        self.a_soak_start_s.push(a.soak_start_s);
        self.a_soak_s.push(a.soak_s);
        self.a_has_battery.push(a.has_battery);
    }

    /// Adds attempt row `row`'s state readings to the groups, and keeps its digest when it
    /// has attestations.
    pub(super) fn push_state(&mut self, row: usize, readings: impl Iterator<Item = Reading>, keep: bool) {
        let own = self.a_device[row];
        let device = if self.names.name(own).is_empty() { self.t_device[self.a_trial[row] as usize] } else { own };
        let valid = self.a_valid[row];
        let mut kept = keep.then(StateDigest::default);
        for r in readings {
            self.states.add(device, valid, r);
            if let Some(k) = &mut kept {
                k.readings.push(r);
            }
        }
        if let Some(k) = kept {
            self.attested_states.push((row as u32, k));
        }
    }

    /// Measurements of attempt row `row` follow; rows come in ascending order, and the
    /// attempts skipped have none.
    fn start_measurements(&mut self, row: usize) {
        while self.a_meas.len() <= row {
            self.a_meas.push(self.m_value.len() as u32);
        }
    }

    /// Adds a measurement to the attempt of the last `start_measurements`.
    fn push_measurement(&mut self, last: &mut Last, metric: &str, value: f64, unit: &str, source: &str) {
        let n = &mut self.names;
        self.m_metric.push(n.intern_after(&mut last.metric, metric));
        self.m_value.push(value);
        self.m_unit.push(n.intern_after(&mut last.unit, unit));
        self.m_source.push(n.intern_after(&mut last.source, source));
    }

    /// Closes the offsets: `a_meas` gets one entry per attempt plus the final end.
    fn finish(&mut self) {
        self.start_measurements(self.attempts());
    }

    /// The row in `t_*` of trial `idx`.
    pub fn trial_row(&self, idx: u32) -> Option<u32> {
        self.t_idx.binary_search(&idx).ok().map(|r| r as u32)
    }

    /// The row in `a_*` of attempt `key` = (trial idx, attempt): a binary search, as
    /// attempts are in key order.
    pub fn encoded_attempt(&self, key: (u32, u32)) -> Option<usize> {
        let key_of = |a: usize| (self.t_idx[self.a_trial[a] as usize], self.a_attempt[a]);
        let (mut lo, mut hi) = (0usize, self.attempts());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key_of(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.attempts() && key_of(lo) == key).then_some(lo)
    }

    /// Number of attempts (rows in `a_*`).
    pub fn attempts(&self) -> usize {
        self.a_trial.len()
    }

    /// The measurement rows of attempt row `a`.
    pub fn measurements_of(&self, a: usize) -> std::ops::Range<usize> {
        self.a_meas[a] as usize..self.a_meas[a + 1] as usize
    }

    /// The columns of records as `Store::trials` and `Store::attempts` give them (the
    /// attempts in any order: they are taken by trial, then attempt, keeping the order of
    /// equal keys). Outcomes and attempt counts are the records'.
    pub fn from_records(trials: &[TrialRecord], attempts: &[AttemptRecord]) -> Self {
        let mut c = CampaignColumns::default();
        let mut last = Last::default();
        let mut trials: Vec<&TrialRecord> = trials.iter().collect();
        trials.sort_by_key(|t| t.row.idx);
        for t in &trials {
            let r = &t.row;
            c.push_trial(
                &mut last,
                TrialIn {
                    idx: r.idx,
                    key: &r.key,
                    device: &r.device,
                    model: &r.device_model,
                    variant: &r.variant,
                    build: &r.build,
                    config: &r.config,
                    repeat: r.repeat,
                    block: r.block,
                    order: r.device_order,
                },
            );
            c.t_attempts.push(t.attempts);
            c.t_outcome.push(t.outcome);
        }
        let mut attempts: Vec<&AttemptRecord> = attempts.iter().collect();
        attempts.sort_by_key(|a| (a.trial_idx, a.attempt));
        let mut kept = Vec::with_capacity(attempts.len());
        for a in attempts {
            let Some(trial) = c.trial_row(a.trial_idx) else {
                c.unplanned.push((a.trial_idx, a.attempt));
                continue;
            };
            let row = c.a_trial.len() as u32;
            kept.push((row as usize, a));
            let valid = a.status == AttemptStatus::Valid;
            c.push_attempt(
                &mut last,
                AttemptIn {
                    trial,
                    attempt: a.attempt,
                    valid,
                    device: Some(&a.device),
                    untether: a.untether,
                    soak_start_s: a.soak_start_s,
                    soak_s: a.phases.iter().find(|(p, _)| p == "soak").map(|(_, s)| *s),
                    has_battery: battery_series(&a.series).is_some(),
                },
            );
            if !valid && !a.reasons.is_empty() {
                c.reasons.push((row, a.reasons.clone()));
            }
            if !a.labels.is_empty() {
                c.labels.push((row, a.labels.clone()));
            }
            c.attestations.extend(a.attestations.iter().map(|x| (row, x.clone())));
            let digest = StateDigest::from_json(&a.state_before, &a.state_soak, &a.state_after);
            c.push_state(row as usize, digest.readings.into_iter(), !a.attestations.is_empty());
            if let Some(s) = battery_series(&a.series) {
                c.battery.push((row, s.points.clone()));
            }
        }
        // Measurements after every attempt, as the store reads them, so that both paths
        // intern names in the same order.
        for (row, a) in kept {
            c.start_measurements(row);
            for m in &a.measurements {
                c.push_measurement(&mut last, &m.metric, m.value, &m.unit, &m.source);
            }
        }
        c.finish();
        c
    }
}

fn battery_series(series: &[Series]) -> Option<&Series> {
    series.iter().find(|s| s.name == BATTERY_PCT && !s.points.is_empty())
}

/// A column's text, borrowed from the row (no `String`).
fn text<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<&'r str> {
    let v = r.get_ref(i)?;
    v.as_str().map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)))
}

/// A column's text, or `None` for NULL.
fn text_or_null<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<Option<&'r str>> {
    let v = r.get_ref(i)?;
    v.as_str_or_null().map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)))
}

/// A REAL column; an INTEGER is widened, as `Row::get::<f64>` does.
pub(super) fn real(r: &Row<'_>, i: usize) -> rusqlite::Result<f64> {
    match r.get_ref(i)? {
        ValueRef::Real(x) => Ok(x),
        ValueRef::Integer(x) => Ok(x as f64),
        v => Err(rusqlite::Error::InvalidColumnType(i, String::new(), v.data_type())),
    }
}

/// The first `soak` phase's seconds. The text as the store writes it (no escapes) is
/// scanned for its `["soak",` pair, without parsing the list: outside a string that can
/// only open the pair named `soak`, and inside one a `"` is escaped. Anything else takes
/// the borrowed parse, and phase names with escapes the owned one. Unreadable text is no
/// phases, as `Store::attempts` reads it.
pub(super) fn soak_seconds(phases: &str) -> Option<f64> {
    fn soak<S: AsRef<str>>(p: Vec<(S, f64)>) -> Option<f64> {
        p.into_iter().find(|(n, _)| n.as_ref() == "soak").map(|(_, s)| s)
    }
    const PAIR: &str = "[\"soak\",";
    if !phases.contains('\\')
        && let Some(at) = phases.find(PAIR)
        && let Some(len) = phases[at + PAIR.len()..].find(']')
        && let Ok(s) = phases[at + PAIR.len()..][..len].trim().parse::<f64>()
    {
        return Some(s);
    }
    match serde_json::from_str::<Vec<(&str, f64)>>(phases) {
        Ok(p) => soak(p),
        Err(_) => soak(serde_json::from_str::<Vec<(String, f64)>>(phases).unwrap_or_default()),
    }
}

/// A JSON list of strings, `[]` without parsing; unreadable text is empty, as
/// `Store::attempts` reads it.
pub(super) fn strings(text: &str) -> Vec<String> {
    if text == "[]" { Vec::new() } else { serde_json::from_str(text).unwrap_or_default() }
}

/// Walks `rows` keyed by (trial idx, attempt) in that order onto the attempt rows of `c`,
/// as `attempts::merge` does; rows of unknown attempts are skipped.
pub(super) struct Cursor {
    pub i: usize,
}

impl Cursor {
    pub(super) fn seek(&mut self, c: &CampaignColumns, key: (u32, u32)) -> Option<usize> {
        let at = |i: usize| (c.t_idx[c.a_trial[i] as usize], c.a_attempt[i]);
        while self.i < c.attempts() && at(self.i) < key {
            self.i += 1;
        }
        (self.i < c.attempts() && at(self.i) == key).then_some(self.i)
    }
}

/// An attempt's first non-empty battery series: its `attempt_report` row, then its range
/// of series ids.
pub(super) const BATTERY_POINTS: &str = "
    SELECT s.points FROM attempt_report r JOIN series s ON s.id BETWEEN r.series_from AND r.series_to
    WHERE r.campaign = ?1 AND r.trial_idx = ?2 AND r.attempt = ?3
        AND s.campaign = r.campaign AND s.trial_idx = r.trial_idx AND s.attempt = r.attempt
        AND s.name = ?4 AND length(s.points) > 0
    ORDER BY s.seq LIMIT 1";

fn max_attempts(conn: &Connection, id: &str) -> Result<u32, StoreError> {
    conn.query_row("SELECT max_attempts FROM campaigns WHERE id = ?1", [id], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::NoCampaign(id.into()))
}

impl Store {
    /// One campaign as columns, in the order of `Store::trials` and `Store::attempts`
    /// (trial, attempt, then measurement `seq`), read in one transaction so that a
    /// running `lab run` cannot split an attempt from its measurements. Text is read
    /// borrowed from SQLite and interned; no row becomes a `String`. Battery series are
    /// only flagged (`a_has_battery`); [`Store::battery_points`] fetches those drawn.
    pub fn read_columns(&self, id: &str) -> Result<CampaignColumns, StoreError> {
        self.read_columns_stamped(id).map(|(c, _)| c)
    }

    /// [`Store::read_columns`], and the [`Store::report_stamp`] of what was read (taken in
    /// the same transaction, while the measurements are being read).
    pub fn read_columns_stamped(&self, id: &str) -> Result<(CampaignColumns, String), StoreError> {
        if let super::backend::Db::Postgres(owner) = &self.db {
            return super::columns_reader::read_on_postgres(owner, id);
        }
        let mut conn = self.lock()?;
        let mut tx = conn.transaction()?;
        // The first read starts this transaction's snapshot.
        let max_attempts = max_attempts(&tx, id)?;
        let file = self.location().sqlite_file().expect("`lock` answered: a SQLite store");
        let fetch = Fetch::start(file, id);
        let stamp = super::campaigns::report_stamp_on(&mut tx, id)?;
        let mut reader = ColumnsReader::default();
        {
            let mut st = tx.prepare(
                "SELECT idx, key, device, device_model, variant, build, config, repeat, block, device_order
                 FROM trials WHERE campaign = ?1 ORDER BY idx",
            )?;
            let mut rows = st.query([id])?;
            while let Some(r) = rows.next()? {
                reader.trial(TrialIn {
                    idx: r.get(0)?,
                    key: text(r, 1)?,
                    device: text(r, 2)?,
                    model: text(r, 3)?,
                    variant: text(r, 4)?,
                    build: text(r, 5)?,
                    config: text(r, 6)?,
                    repeat: r.get(7)?,
                    block: r.get(8)?,
                    order: r.get(9)?,
                });
            }
        }
        reader.start_attempts(super::operator_steps::attestation_rows(&mut tx, id)?);
        {
            let mut st = tx.prepare(
                "SELECT trial_idx, attempt, status, device, untether, soak_start_s, phases, reasons, labels, state_digest,
                    battery
                 FROM attempt_report WHERE campaign = ?1 ORDER BY trial_idx, attempt",
            )?;
            let mut old_state = tx.prepare(
                "SELECT state_before, state_soak, state_after FROM attempts
                 WHERE campaign = ?1 AND trial_idx = ?2 AND attempt = ?3",
            )?;
            let mut rows = st.query([id])?;
            while let Some(r) = rows.next()? {
                let (idx, attempt): (u32, u32) = (r.get(0)?, r.get(1)?);
                let a = AttemptRow {
                    idx,
                    attempt,
                    status: text(r, 2)?,
                    device: text_or_null(r, 3)?,
                    untether: text_or_null(r, 4)?,
                    soak_start_s: real(r, 5)?,
                    phases: text(r, 6)?,
                    reasons: text(r, 7)?,
                    labels: text(r, 8)?,
                    digest: match r.get_ref(9)? {
                        ValueRef::Blob(b) => Some(b),
                        _ => None,
                    },
                    has_battery: r.get(10)?,
                };
                reader.attempt(a, || {
                    let mut json = old_state.query(rusqlite::params![id, idx, attempt])?;
                    Ok(match json.next()? {
                        Some(j) => Some(StateDigest::from_text(text(j, 0)?, text_or_null(j, 1)?, text(j, 2)?)),
                        None => None,
                    })
                })?;
            }
        }
        // The measurements, read meanwhile on connections of their own (see `Fetch`).
        let c = reader.finish(max_attempts, fetch.join()?);
        tx.commit()?;
        Ok((c, stamp))
    }

    /// The first non-empty `battery_pct` series of each (trial idx, attempt), in the
    /// order asked; `None` where the attempt has none. A lookup of its `attempt_report` row
    /// and a walk over its series' ids each.
    pub fn battery_points(&self, id: &str, attempts: &[(u32, u32)]) -> Result<Vec<Option<Points>>, StoreError> {
        let (id_, attempts) = (id.to_string(), attempts.to_vec());
        let blobs = self.db.call(move |c| {
            let id = &id_;
            attempts
                .iter()
                .map(|&(idx, attempt)| {
                    let row = c.query_opt(BATTERY_POINTS, &super::backend::vals![id, idx, attempt, BATTERY_PCT])?;
                    Ok(row.and_then(|r| Columns::new(&r).blob().map(<[u8]>::to_vec)))
                })
                .collect::<Result<Vec<_>, DbError>>()
        })?;
        blobs
            .into_iter()
            .map(|b| {
                b.map(|b| Series::points_from_blob(&b))
                    .transpose()
                    .map_err(|e| StoreError::Internal(format!("a battery series of campaign {id}: {e}")))
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::measure::Measurement;
    use crate::store::{CampaignRecord, PlannedTrialRow, TrialMove};
    use crate::testing::fixture;

    /// A store holding `attempts` of the campaign, planned with `trials`.
    fn store_of(
        c: &CampaignRecord,
        trials: &[TrialRecord],
        attempts: &[AttemptRecord],
        max_attempts: u32,
    ) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        fill(&store, c, trials, attempts, max_attempts);
        (dir, store)
    }

    pub(crate) fn fill(
        store: &Store,
        c: &CampaignRecord,
        trials: &[TrialRecord],
        attempts: &[AttemptRecord],
        max_attempts: u32,
    ) {
        store.create_campaign(&fixture::new_campaign(c, trials), max_attempts, 1).unwrap();
        for a in attempts {
            store.record_attempt(a.clone()).unwrap();
        }
    }

    crate::testing::postgres::on_both!(
        every_read_path_gives_the_same_columns,
        the_report_stamp_changes_with_every_change_a_report_shows,
        battery_readings_come_oldest_first_in_the_order_written,
    );

    /// `read_columns` (SQLite: its borrowed, parallel read; PostgreSQL: the generic one),
    /// the generic read on either, and the records all agree, field for field.
    fn every_read_path_gives_the_same_columns(store: &Store) {
        let (record, trials, attempts) = varied();
        fill(store, &record, &trials, &attempts, 2);
        let data = fixture::records("c1");
        fill(store, &data.campaign, &data.trials, &data.attempts, data.plan.max_attempts);
        let moved = TrialMove { trial_idx: 6, to_device: "pixel-1".into(), device_order: 9 };
        assert_eq!(store.move_trials(&record.id, &[moved]).unwrap(), 1);
        for id in [record.id.as_str(), "c1"] {
            let read = read_with_battery(store, id);
            assert_eq!(read, from_store_records(store, id), "{id}");
            let id_ = id.to_string();
            let (generic, stamp) =
                store.db.call(move |c| Ok(super::super::columns_reader::read_on(c, &id_))).unwrap().unwrap();
            let mut plain = read.clone();
            plain.battery.clear();
            assert_eq!(generic, plain, "{id}");
            assert_eq!(stamp, store.report_stamp(id).unwrap());
        }
        let data_read = store.read_columns("c1").unwrap();
        assert_eq!(data_read, CampaignColumns::from_records(&data.trials, &data.attempts));
        assert!(matches!(store.read_columns("nope"), Err(StoreError::NoCampaign(id)) if id == "nope"));
    }

    fn battery_readings_come_oldest_first_in_the_order_written(store: &Store) {
        let reading = |at: &str, pct: f64| super::super::BatteryReadingRow {
            device: "pixel-1".into(),
            at: at.into(),
            battery_pct: Some(pct),
            health_pct: None,
            cycle_count: Some(3),
            source: "dumpsys".into(),
        };
        for r in [reading("2026-01-02T00:00:00Z", 50.0), reading("2026-01-01T00:00:00Z", 70.0)] {
            store.add_battery_reading(&r).unwrap();
        }
        for pct in [60.0, 61.0, 59.0] {
            store.add_battery_reading(&reading("2026-01-01T12:00:00Z", pct)).unwrap();
        }
        let got: Vec<f64> = store.battery_readings("pixel-1").unwrap().iter().map(|r| r.battery_pct.unwrap()).collect();
        assert_eq!(got, [70.0, 60.0, 61.0, 59.0, 50.0]);
        assert_eq!(store.battery_readings("pixel-1").unwrap()[0], reading("2026-01-01T00:00:00Z", 70.0));
        assert!(store.battery_readings("pixel-2").unwrap().is_empty());
    }

    /// The report's path of today, as columns.
    fn from_store_records(store: &Store, id: &str) -> CampaignColumns {
        CampaignColumns::from_records(&store.trials(id).unwrap(), &store.attempts(id).unwrap())
    }

    /// `read_columns` with every battery series fetched, as `from_records` keeps them.
    fn read_with_battery(store: &Store, id: &str) -> CampaignColumns {
        let mut c = store.read_columns(id).unwrap();
        let rows: Vec<usize> = (0..c.attempts()).filter(|&i| c.a_has_battery[i]).collect();
        let keys: Vec<(u32, u32)> = rows.iter().map(|&i| (c.t_idx[c.a_trial[i] as usize], c.a_attempt[i])).collect();
        let points = store.battery_points(id, &keys).unwrap();
        c.battery = rows.iter().zip(points).map(|(&i, p)| (i as u32, p.expect("flagged series exists"))).collect();
        c
    }

    fn row(idx: u32, device: &str, model: &str, variant: &str, repeat: u32) -> TrialRecord {
        TrialRecord {
            row: PlannedTrialRow {
                idx,
                key: format!("{idx:04}-{device}-{variant}-r{repeat}"),
                device: device.into(),
                device_model: model.into(),
                variant: variant.into(),
                build: variant.into(),
                config: "default".into(),
                repeat,
                block: repeat,
                device_order: idx / 2,
            },
            attempts: 0,
            outcome: TrialOutcome::Pending,
        }
    }

    /// Two models, two variants, and each case the report must see as it does today:
    /// a moved trial, an attempt without measurements, infinite values, one metric in two
    /// units, a duplicate metric in one attempt, a soft-untethered (pooled) attempt,
    /// labels, attestations, battery series, and a phase name written with an escape.
    pub(crate) fn varied() -> (CampaignRecord, Vec<TrialRecord>, Vec<AttemptRecord>) {
        let id = "c-varied";
        let trials = vec![
            row(0, "sim-iphone-1", "iPhone 6s", "idle", 0),
            row(1, "pixel-1", "Pixel 5", "idle", 0),
            row(2, "sim-iphone-1", "iPhone 6s", "busy", 0),
            row(3, "pixel-1", "Pixel 5", "busy", 0),
            row(4, "sim-iphone-2", "iPhone 6s", "idle", 1),
            row(5, "pixel-2", "Pixel 5", "busy", 1),
            row(6, "pixel-2", "Pixel 5", "idle", 1),
        ];
        let plan = fixture::plan(trials.iter().map(|t| t.row.clone()).collect());
        let record = fixture::campaign_record(id, &plan);
        let at = |idx: u32, n: u32, reasons: &[&str], values: &[(&str, f64, &str)]| {
            let mut a = fixture::attempt(id, idx, n, reasons, values);
            a.device = trials[idx as usize].row.device.clone();
            a
        };
        let battery = |pts: Vec<(f64, f64)>| vec![Series::new(BATTERY_PCT, "%", "sim", pts)];
        let mut attempts = vec![
            at(0, 0, &[], &[("cpu_pct", 12.0, "%"), ("energy_level", f64::INFINITY, "level")]),
            at(1, 0, &["app died during the soak"], &[("cpu_pct", 3.0, "%")]),
            at(1, 1, &[], &[("cpu_pct", 4.5, "%"), ("cpu_pct", 4.25, "%"), ("memory_mb", 80.0, "MB")]),
            at(2, 0, &["charged for 12 s"], &[]),
            at(2, 1, &[], &[("memory_mb", 1.5e-3, "GB"), ("energy_level", f64::NEG_INFINITY, "level")]),
            at(3, 0, &[], &[("charge_used_mah", 0.1 + 0.2, "mAh"), ("cpu_pct", -0.0, "%")]),
            at(4, 0, &[], &[("cpu_pct", 1e16, "%")]),
            at(5, 0, &[], &[("cpu_pct", 7.0, "%")]),
        ];
        attempts[0].series = battery(vec![(0.0, 100.0), (60.0, 99.5)]);
        attempts[0].phases = vec![("launch".into(), 2.0), ("soak".into(), 600.0), ("soak".into(), 1.0)];
        // A backend's series with no points, and another series: no curve.
        attempts[1].series =
            vec![Series::new(BATTERY_PCT, "%", "sim", vec![]), Series::new("temp_c", "°C", "sim", vec![(0.0, 25.0)])];
        attempts[2].series = battery(vec![(0.0, 98.0), (30.0, 97.25), (90.0, 96.0)]);
        attempts[2].untether = Some(UntetherMode::SoftUntethered);
        attempts[2].labels = vec!["charged on while soft-untethered".into()];
        attempts[3].phases = vec![("so\"ak".into(), 5.0), ("soak".into(), 30.0)];
        attempts[4].untether = Some(UntetherMode::PowerCut);
        attempts[4].attestations = vec![Attestation {
            step: "brightness".into(),
            when: "before-trial".into(),
            text: "Set brightness to 50%".into(),
            by: "ana".into(),
            at: "2025-03-01T09:00:00Z".into(),
            values: json!({"brightness": 50}).as_object().unwrap().clone(),
        }];
        attempts[5].soak_start_s = 1234.5;
        attempts[5].phases = Vec::new();
        // Ran on the other Pixel: the trial was moved there.
        attempts[7].device = "pixel-1".into();
        // State readings of every kind: numbers (float and integer), switches, unknown
        // ones and a source nobody knows (both left out), the attested attempt's too.
        let known = |value: serde_json::Value, from: &str| json!({"state": "known", "value": value, "from": from});
        for (i, a) in attempts.iter_mut().enumerate() {
            a.state_before = json!({
                "brightness_pct": known(json!(40.0 + i as f64), "read"),
                "thermal_status": known(json!(i % 3), "read"),
                "wifi_on": {"state": "unknown"},
                "low_power": known(json!(i % 2 == 0), "app"),
                "screen_on": known(json!(true), "elsewhere"),
            });
            a.state_soak =
                if i % 2 == 0 { json!({"bluetooth_on": known(json!(false), "powerlog")}) } else { json!(null) };
            a.state_after = json!({"brightness_pct": known(json!(70.0), "operator")});
        }
        (record, trials, attempts)
    }

    #[test]
    fn the_fixture_reads_back_as_its_records_give_it() {
        let data = fixture::records("c1");
        let (_dir, store) = store_of(&data.campaign, &data.trials, &data.attempts, data.plan.max_attempts);
        let read = store.read_columns("c1").unwrap();
        assert_eq!(read, from_store_records(&store, "c1"));
        // The in-memory fixture (attempts out of order, outcomes given by hand) is the same too.
        assert_eq!(read, CampaignColumns::from_records(&data.trials, &data.attempts));
        assert_eq!(read.attempts(), 9);
        assert_eq!(read.t_outcome, data.trials.iter().map(|t| t.outcome).collect::<Vec<_>>());
        // Trial 4's second attempt has no measurements: an empty range, between neighbours.
        let empty = (0..read.attempts()).find(|&i| read.t_idx[read.a_trial[i] as usize] == 4 && read.a_attempt[i] == 1);
        assert!(read.measurements_of(empty.unwrap()).is_empty());
    }

    #[test]
    fn measurements_are_found_among_another_campaigns_and_past_attempts_without_any() {
        let (record, trials, mut attempts) = varied();
        // The campaign's first and last recorded attempts have no measurements.
        attempts.swap(0, 3);
        let mut died = fixture::attempt(&record.id, 6, 0, &["app died during the soak"], &[]);
        died.device = trials[6].row.device.clone();
        attempts.push(died);
        let mut other = record.clone();
        other.id = "c-other".into();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        for c in [&record, &other] {
            store.create_campaign(&fixture::new_campaign(c, &trials), 2, 1).unwrap();
        }
        // Recorded in turns, the other campaign's rows before, between and after.
        for a in &attempts {
            let mut o = a.clone();
            o.campaign = other.id.clone();
            o.measurements.push(Measurement::new("cpu_pct", 99.0, "%", "other"));
            store.record_attempt(o).unwrap();
            store.record_attempt(a.clone()).unwrap();
        }
        let mut o = fixture::attempt(&other.id, 6, 1, &[], &[("cpu_pct", 98.0, "%")]);
        o.device = trials[6].row.device.clone();
        store.record_attempt(o).unwrap();
        for id in [&record.id, &other.id] {
            let read = read_with_battery(&store, id);
            assert_eq!(read, from_store_records(&store, id), "{id}");
        }
        let read = store.read_columns(&record.id).unwrap();
        assert_eq!((read.attempts(), read.m_value.len()), (9, 12));
        assert!(read.m_value.iter().all(|&v| v != 99.0 && v != 98.0), "no other campaign's row");
        // The battery series are found the same way (the first and last recorded attempts have none).
        assert_eq!(read.a_has_battery.iter().filter(|&&b| b).count(), 2);
        assert_eq!(store.read_columns(&other.id).unwrap().m_value.len(), 12 + 10);
    }

    #[test]
    fn rows_stored_out_of_seq_order_and_across_both_read_parts_come_in_seq_order() {
        let (record, trials, attempts) = varied();
        let (_dir, store) = store_of(&record, &trials, &attempts, 2);
        let before = store.read_columns(&record.id).unwrap();
        // Each attempt's first two measurements swap places in seq, not in table order.
        store
            .lock()
            .unwrap()
            .execute_batch(
                "UPDATE measurements SET seq = -1 WHERE seq = 0;
                 UPDATE measurements SET seq = 0 WHERE seq = 1 AND EXISTS (SELECT 1 FROM measurements m
                     WHERE m.campaign = measurements.campaign AND m.trial_idx = measurements.trial_idx
                         AND m.attempt = measurements.attempt AND m.seq = -1);
                 UPDATE measurements SET seq = 1 WHERE seq = -1 AND EXISTS (SELECT 1 FROM measurements m
                     WHERE m.campaign = measurements.campaign AND m.trial_idx = measurements.trial_idx
                         AND m.attempt = measurements.attempt AND m.seq = 0);
                 UPDATE measurements SET seq = 0 WHERE seq = -1;",
            )
            .unwrap();
        let read = read_with_battery(&store, &record.id);
        assert_eq!(read, from_store_records(&store, &record.id));
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_ne!(bits(&read.m_value), bits(&before.m_value), "the swap shows");
        // The rows are read in two parts: the attempts on both sides of the cut are whole.
        let n: i64 = store.lock().unwrap().query_row("SELECT count(*) FROM measurements", [], |r| r.get(0)).unwrap();
        assert_eq!(read.m_value.len() as i64, n);
    }

    #[test]
    fn attempts_whose_rowids_run_against_their_measurements_ids_still_read_every_measurement() {
        // As a store copied row by row in key order leaves it: the attempts' rowids no
        // longer grow with their measurements' ids. The range read comes from each
        // attempt's own id range, not from which attempt was written first.
        let (record, trials, attempts) = varied();
        let (_dir, store) = store_of(&record, &trials, &attempts, 2);
        let before = store.read_columns(&record.id).unwrap();
        store.lock().unwrap().execute_batch("UPDATE attempts SET rowid = 1000000 - rowid;").unwrap();
        let first: (u32, u32) = store
            .lock()
            .unwrap()
            .query_row("SELECT trial_idx, attempt FROM attempts ORDER BY rowid LIMIT 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        let last_written = attempts.last().map(|a| (a.trial_idx, a.attempt)).unwrap();
        assert_eq!(first, last_written, "the rowids run backwards");
        let read = read_with_battery(&store, &record.id);
        assert_eq!(read, from_store_records(&store, &record.id));
        assert_eq!(read.m_value.len(), before.m_value.len());
        assert_eq!(read.m_value.len(), 12);
    }

    #[test]
    fn varied_attempts_read_back_field_by_field() {
        let (record, trials, attempts) = varied();
        let (_dir, store) = store_of(&record, &trials, &attempts, 2);
        let moved = TrialMove { trial_idx: 6, to_device: "pixel-1".into(), device_order: 9 };
        assert_eq!(store.move_trials(&record.id, &[moved]).unwrap(), 1);
        let read = read_with_battery(&store, &record.id);
        let old = from_store_records(&store, &record.id);
        assert_eq!(read, old);
        // What each case became, so the equality above is not between two empty columns.
        assert_eq!((read.t_idx.len(), read.attempts(), read.m_value.len()), (7, 8, 12));
        let name = |s: Sym| read.names.name(s);
        assert_eq!(read.t_device.iter().map(|&s| name(s)).nth(6), Some("pixel-1"));
        assert_eq!(read.t_outcome[6], TrialOutcome::Pending);
        assert_eq!(read.t_outcome[1], TrialOutcome::Valid);
        assert_eq!(read.m_value.iter().filter(|v| v.is_infinite()).count(), 2);
        // SQLite keeps an integral REAL as an integer on disk, so -0.0 comes back as 0.0 (on
        // both paths) and 12.0 as an INTEGER value that `real` widens.
        assert_eq!(read.m_value.iter().filter(|v| v.to_bits() == 0.0f64.to_bits()).count(), 1);
        let units: HashSet<&str> = (0..read.m_value.len())
            .filter(|&i| name(read.m_metric[i]) == "memory_mb")
            .map(|i| name(read.m_unit[i]))
            .collect();
        assert_eq!(units, HashSet::from(["MB", "GB"]));
        let of_1_1: Vec<(&str, f64)> =
            read.measurements_of(2).map(|i| (name(read.m_metric[i]), read.m_value[i])).collect();
        assert_eq!(of_1_1, [("cpu_pct", 4.5), ("cpu_pct", 4.25), ("memory_mb", 80.0)]);
        assert_eq!(read.a_soak_s[0], Some(600.0));
        assert_eq!(read.a_soak_s[3], Some(30.0));
        assert_eq!(read.a_soak_s[5], None);
        assert_eq!(read.a_has_battery, [true, false, true, false, false, false, false, false]);
        assert_eq!(read.battery.iter().map(|(r, p)| (*r, p.len())).collect::<Vec<_>>(), [(0, 2), (2, 3)]);
        assert_eq!(read.a_untether[2], Some(UntetherMode::SoftUntethered));
        assert_eq!(read.reasons.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(read.labels.len(), 1);
        assert_eq!(read.attestations.iter().map(|(r, x)| (*r, x.by.as_str())).collect::<Vec<_>>(), [(4, "ana")]);
        assert_eq!(name(read.a_device[7]), "pixel-1");
    }

    #[test]
    fn a_phase_name_with_an_escape_is_read_through_the_owned_parse() {
        assert_eq!(soak_seconds(r#"[["so\u0061k", 12.5]]"#), Some(12.5));
        assert_eq!(soak_seconds(r#"[["launch", 1.0], ["soak", 3.0]]"#), Some(3.0));
        assert_eq!(soak_seconds("not json"), None);
    }

    #[test]
    fn the_soak_is_found_without_parsing_as_the_parse_finds_it() {
        let phases = |p: &[(&str, f64)]| serde_json::to_string(&p).unwrap();
        for p in [
            vec![("prepare", 0.25), ("gate", 0.0), ("launch", 1.5), ("soak", 600.000_000_000_1), ("collect", 2.0)],
            vec![("soak", 1e-7), ("soak", 3.0)],
            vec![("soak", 0.1 + 0.2)],
            vec![("launch", 1.0)],
            vec![],
        ] {
            let text = phases(&p);
            let parsed: Vec<(String, f64)> = serde_json::from_str(&text).unwrap();
            let want = parsed.iter().find(|(n, _)| n == "soak").map(|(_, s)| *s);
            assert_eq!(soak_seconds(&text).map(f64::to_bits), want.map(f64::to_bits), "{text}");
        }
        // Not numbers where they are expected: the parse decides (no phases).
        assert_eq!(soak_seconds(r#"[["soak",null]]"#), None);
        assert_eq!(soak_seconds(r#"[["soak","x"]]"#), None);
        // An escaped name earlier than a plain one: the first named soak counts.
        assert_eq!(soak_seconds(r#"[["so\u0061k",1.0],["soak",2.0]]"#), Some(1.0));
    }

    #[test]
    fn a_nan_value_stays_in_records_and_the_store_refuses_it() {
        let (record, trials, mut attempts) = varied();
        attempts[5].measurements.push(Measurement::new("cpu_pct", f64::NAN, "%", "sim model"));
        let cols = CampaignColumns::from_records(&trials, &attempts);
        assert_eq!(cols.m_value.iter().filter(|v| v.is_nan()).count(), 1);
        assert_eq!(cols, cols.clone(), "columns compare floats by bits");
        // SQLite stores NaN as NULL and `value` is NOT NULL: the attempt is not recorded
        // (wholly), so no store path has to read a NaN.
        let (_dir, store) = store_of(&record, &trials, &attempts[..5], 2);
        assert!(store.record_attempt(attempts[5].clone()).is_err());
        let read = read_with_battery(&store, &record.id);
        assert_eq!(read, from_store_records(&store, &record.id));
        assert_eq!(read.attempts(), 5);
    }

    #[test]
    fn state_readings_are_grouped_and_attempts_from_before_the_digest_read_their_json() {
        let (record, trials, attempts) = varied();
        let (_dir, store) = store_of(&record, &trials, &attempts, 2);
        let read = read_with_battery(&store, &record.id);
        assert_eq!(read, from_store_records(&store, &record.id));
        // brightness (read), thermal, low_power (app) before; bluetooth during; brightness after.
        let g = &read.states.groups;
        assert!(g.iter().all(|g| g.source != 4 || g.moment == 1), "{g:?}");
        let before_brightness: Vec<_> =
            g.iter().filter(|g| g.moment == 0 && g.setting == 0).map(|g| (g.range, g.attempts)).collect();
        assert_eq!(before_brightness.iter().map(|(_, n)| n).sum::<u32>(), read.attempts() as u32, "{g:?}");
        assert!(
            g.iter().all(|g| super::super::SETTINGS[g.setting as usize].0 != "screen_on"),
            "unknown source left out"
        );
        let attested: Vec<u32> = read.attested_states.iter().map(|(r, _)| *r).collect();
        assert_eq!(attested, [4]);
        // A store from before migration 10: no digests, the same columns from the JSON.
        store.lock().unwrap().execute("UPDATE attempt_report SET state_digest = NULL", []).unwrap();
        assert_eq!(read_with_battery(&store, &record.id), read);
        // A digest that does not decode falls back to the JSON too.
        store.lock().unwrap().execute("UPDATE attempt_report SET state_digest = x'ff'", []).unwrap();
        assert_eq!(read_with_battery(&store, &record.id), read);
    }

    fn the_report_stamp_changes_with_every_change_a_report_shows(store: &Store) {
        let (record, trials, attempts) = varied();
        fill(store, &record, &trials, &attempts[..4], 2);
        let id = record.id.as_str();
        let mut seen = vec![store.report_stamp(id).unwrap()];
        assert_eq!(store.report_stamp(id).unwrap(), seen[0], "nothing changed");
        let mut changed = |what: &str| {
            let now = store.report_stamp(id).unwrap();
            assert!(!seen.contains(&now), "{what}: {now}");
            // What the report reads is stamped the same, in its own read transaction.
            assert_eq!(store.read_columns_stamped(id).unwrap().1, now, "{what}");
            seen.push(now);
        };
        store.record_attempt(attempts[4].clone()).unwrap();
        changed("an attempt recorded");
        store.move_trials(id, &[TrialMove { trial_idx: 6, to_device: "pixel-1".into(), device_order: 9 }]).unwrap();
        changed("a trial moved");
        store.move_trials(id, &[TrialMove { trial_idx: 6, to_device: "pixel-3".into(), device_order: 9 }]).unwrap();
        changed("moved again, same place in the queue");
        store.finish_campaign(id, super::super::CampaignStatus::Done, "2026-01-01T00:00:00Z", None, None).unwrap();
        changed("the campaign ended");
        store
            .finish_campaign(id, super::super::CampaignStatus::Done, "2026-01-01T00:00:00Z", Some("a note"), None)
            .unwrap();
        changed("a note");
        assert!(matches!(store.report_stamp("nope"), Err(StoreError::NoCampaign(_))));
    }

    #[test]
    fn attempts_of_unplanned_trials_are_dropped_as_the_join_drops_them() {
        let (_, trials, mut attempts) = varied();
        let planned = CampaignColumns::from_records(&trials, &attempts);
        attempts.push(fixture::attempt("c-varied", 99, 0, &[], &[("cpu_pct", 1.0, "%")]));
        let mut with_unplanned = CampaignColumns::from_records(&trials, &attempts);
        // Named, so the report can say so, and otherwise left out.
        assert_eq!(std::mem::take(&mut with_unplanned.unplanned), [(99, 0)]);
        assert_eq!(with_unplanned, planned);
    }

    #[test]
    fn each_distinct_name_is_held_once() {
        let (record, trials, attempts) = varied();
        let (_dir, store) = store_of(&record, &trials, &attempts, 2);
        let cols = store.read_columns(&record.id).unwrap();
        let mut distinct: HashSet<&str> = HashSet::new();
        for t in &trials {
            let r = &t.row;
            distinct.extend([&r.device, &r.device_model, &r.variant, &r.build, &r.config].map(String::as_str));
        }
        for a in &attempts {
            distinct.insert(&a.device);
            for m in &a.measurements {
                distinct.extend([m.metric.as_str(), m.unit.as_str(), m.source.as_str()]);
            }
        }
        assert_eq!(cols.names.len(), distinct.len());
        assert!(distinct.iter().all(|n| cols.names.get(n).is_some_and(|s| cols.names.name(s) == *n)));
        // Fixed-size columns: one entry per trial, attempt (+ 1 offset) and measurement.
        let measurements: usize = attempts.iter().map(|a| a.measurements.len()).sum();
        assert_eq!(cols.a_meas.len(), cols.attempts() + 1);
        assert_eq!(*cols.a_meas.last().unwrap() as usize, measurements);
        assert_eq!([cols.m_metric.len(), cols.m_unit.len(), cols.m_source.len()], [measurements; 3]);
        assert!(cols.battery.is_empty(), "read_columns decodes no series");
    }

    #[test]
    fn an_unknown_campaign_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        assert!(matches!(store.read_columns("nope"), Err(StoreError::NoCampaign(id)) if id == "nope"));
    }

    /// One attempt drawn by the proptest: valid, untether mode, labelled, battery points,
    /// and measurements as (metric, unit, value) picks.
    type Drawn = (bool, u8, bool, u8, Vec<(u8, u8, f64)>);

    fn drawn_campaign(plan: &[(u8, u8, Vec<Drawn>)]) -> (CampaignRecord, Vec<TrialRecord>, Vec<AttemptRecord>) {
        const DEVICES: [(&str, &str); 3] =
            [("sim-iphone-1", "iPhone 6s"), ("pixel-1", "Pixel 5"), ("pixel-2", "Pixel 5")];
        const METRICS: [&str; 3] = ["cpu_pct", "memory_mb", "energy_level"];
        const UNITS: [&str; 2] = ["%", "MB"];
        const MODES: [Option<UntetherMode>; 3] =
            [None, Some(UntetherMode::PowerCut), Some(UntetherMode::SoftUntethered)];
        let id = "c-prop";
        let mut trials = Vec::new();
        let mut attempts = Vec::new();
        for (idx, (device, variant, drawn)) in plan.iter().enumerate() {
            let (device, model) = DEVICES[*device as usize % 3];
            let variant = ["idle", "busy"][*variant as usize % 2];
            trials.push(row(idx as u32, device, model, variant, idx as u32));
            for (n, (valid, mode, labelled, points, ms)) in drawn.iter().enumerate() {
                let reasons: &[&str] = if *valid { &[] } else { &["app died during the soak"] };
                let values: Vec<(&str, f64, &str)> =
                    ms.iter().map(|(m, u, v)| (METRICS[*m as usize % 3], *v, UNITS[*u as usize % 2])).collect();
                let mut a = fixture::attempt(id, idx as u32, n as u32, reasons, &values);
                a.device = device.into();
                a.untether = MODES[*mode as usize % 3];
                if *labelled {
                    a.labels = vec!["charged on".into()];
                }
                let pts = (0..*points % 4).map(|k| (60.0 * f64::from(k), 100.0 - f64::from(k) / 3.0)).collect();
                a.series = vec![Series::new(BATTERY_PCT, "%", "sim", pts)];
                attempts.push(a);
            }
        }
        let plan = fixture::plan(trials.iter().map(|t| t.row.clone()).collect());
        (fixture::campaign_record(id, &plan), trials, attempts)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn random_campaigns_read_back_as_their_records_give_them(
            plan in prop::collection::vec(
                (0u8..3, 0u8..2, prop::collection::vec(
                    (any::<bool>(), 0u8..3, any::<bool>(), 0u8..4,
                     prop::collection::vec((0u8..3, 0u8..2, any::<f64>().prop_filter("a NaN is not stored", |v| !v.is_nan())), 0..5)),
                    0..3)),
                1..7)
        ) {
            let (record, trials, attempts) = drawn_campaign(&plan);
            let (_dir, store) = store_of(&record, &trials, &attempts, 2);
            let read = read_with_battery(&store, &record.id);
            prop_assert_eq!(read.attempts(), attempts.len());
            prop_assert_eq!(&read, &from_store_records(&store, &record.id));
        }
    }

    #[test]
    fn interning_gives_one_symbol_per_name() {
        let mut n = Names::default();
        let mut last = None;
        let a = n.intern_after(&mut last, "cpu_pct");
        assert_eq!(n.intern_after(&mut last, "cpu_pct"), a);
        let b = n.intern_after(&mut last, "memory_mb");
        assert_eq!((n.intern("cpu_pct"), n.len(), n.name(b)), (a, 2, "memory_mb"));
        assert_eq!(n.get("requests"), None);
    }
}
