//! A campaign's measurements as columns: read in the table's own order, in parts on
//! threads of their own, then placed by attempt ([`Measurements::place`]).
//!
//! Reading a million rows is most of a large report's time, and the attempts are read
//! meanwhile on the caller's connection: the rows are split into [`PARTS`] rowid ranges
//! so that both cores stay busy to the end of the read.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, Row};

use super::columns::{CampaignColumns, Names, Sym, real};
use super::error::StoreError;

/// Rowid ranges read at once (the reading thread and one more).
const PARTS: usize = 2;

/// One measurement as read in table order, its names interned in its part's [`Names`].
struct Raw {
    key: (u32, u32),
    seq: u32,
    value: f64,
    metric: Sym,
    unit: Sym,
    source: Sym,
}

/// One rowid range's rows, and the names they use.
#[derive(Default)]
struct Part {
    rows: Vec<Raw>,
    names: Names,
}

/// The measurements of one campaign as read, part by part, not yet placed.
#[derive(Default)]
pub(super) struct Measurements {
    parts: Vec<Part>,
}

/// A campaign's measurements, read on threads of their own while the caller reads the
/// attempts; [`Fetch::join`] waits for them.
pub(super) struct Fetch(std::thread::JoinHandle<Result<Measurements, StoreError>>);

impl Fetch {
    /// Starts reading campaign `id`'s measurements from the database at `path`, each part
    /// on a read-only connection of its own. Their transactions start after the caller's
    /// (already started), so they see every attempt the caller reads with all its
    /// measurements: an attempt's rows commit together, and rows are never changed.
    pub(super) fn start(path: &std::path::Path, id: &str) -> Fetch {
        let (path, id) = (path.to_path_buf(), id.to_string());
        Fetch(std::thread::spawn(move || {
            let mut conn = open_reader(&path)?;
            let tx = conn.transaction()?;
            let Some((lo, hi)) = measurement_rowids(&tx, &id)? else {
                return Ok(Measurements { parts: Vec::new() });
            };
            let ranges = split(lo, hi, PARTS);
            // The first range here, the others on threads of their own.
            let others: Vec<_> = ranges[1..]
                .iter()
                .map(|&(lo, hi)| {
                    let (path, id) = (path.clone(), id.clone());
                    std::thread::spawn(move || {
                        let mut conn = open_reader(&path)?;
                        let tx = conn.transaction()?;
                        read_part(&tx, &id, lo, hi)
                    })
                })
                .collect();
            let mut parts = vec![read_part(&tx, &id, ranges[0].0, ranges[0].1)?];
            for t in others {
                parts.push(t.join().unwrap_or_else(|_| Err(panicked()))?);
            }
            Ok(Measurements { parts })
        }))
    }

    pub(super) fn join(self) -> Result<Measurements, StoreError> {
        self.0.join().unwrap_or_else(|_| Err(panicked()))
    }
}

fn panicked() -> StoreError {
    StoreError::Internal("reading measurements panicked".into())
}

fn open_reader(path: &std::path::Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // No `mmap_size`: mapping the file saved copying pages (a tenth of the read) but made
    // every page read resident in the process, 550 MB more peak memory at a million rows.
    Ok(conn)
}

/// The rowids of campaign `id`'s first and last measurement, from the id ranges each
/// attempt's `attempt_report` row holds (migration 13): a walk over the campaign's
/// 144 000 report rows (34 ms here), not over its 1 008 000 measurements. Exact whatever
/// order the rows were written or copied in, so no measurement can fall outside it.
fn measurement_rowids(tx: &Connection, id: &str) -> Result<Option<(i64, i64)>, StoreError> {
    let (lo, hi): (Option<i64>, Option<i64>) = tx.query_row(
        "SELECT min(measurements_from), max(measurements_to) FROM attempt_report WHERE campaign = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(lo.zip(hi))
}

/// `lo..=hi` cut into `n` consecutive ranges as even as can be (fewer when it is short).
fn split(lo: i64, hi: i64, n: usize) -> Vec<(i64, i64)> {
    let len = hi - lo + 1;
    let n = (n as i64).clamp(1, len.max(1));
    (0..n).map(|i| (lo + len * i / n, lo + len * (i + 1) / n - 1)).collect()
}

/// The measurements of campaign `id` with ids in `lo..=hi`, in table order — where one
/// attempt's rows are consecutive and attempts come as they were recorded.
fn read_part(tx: &Connection, id: &str, lo: i64, hi: i64) -> Result<Part, StoreError> {
    let mut names = Names::default();
    // Rows of other campaigns can lie in the range, but mostly it is this one's: one
    // allocation, not a dozen doublings of a vector of millions.
    let mut rows: Vec<Raw> = Vec::with_capacity(usize::try_from(hi - lo + 1).unwrap_or(0).min(1 << 22));
    // `+campaign`: no index for that term, so SQLite walks the rowid range.
    let mut st = tx.prepare(
        "SELECT trial_idx, attempt, seq, metric, value, unit, source FROM measurements
         WHERE rowid BETWEEN ?2 AND ?3 AND +campaign = ?1",
    )?;
    let mut q = st.query(rusqlite::params![id, lo, hi])?;
    let (mut metric, mut unit, mut source) = (Recent::default(), Recent::default(), Recent::default());
    while let Some(r) = q.next()? {
        rows.push(Raw {
            key: (r.get(0)?, r.get(1)?),
            seq: r.get(2)?,
            metric: intern_recent(&mut names, &mut metric, bytes(r, 3)?, 3)?,
            value: real(r, 4)?,
            unit: intern_recent(&mut names, &mut unit, bytes(r, 5)?, 5)?,
            source: intern_recent(&mut names, &mut source, bytes(r, 6)?, 6)?,
        });
    }
    Ok(Part { rows, names })
}

impl Measurements {
    /// Fills the measurement columns of `c` (whose attempts are read) in (trial, attempt,
    /// seq) order. Rows of attempts `c` does not have (of unplanned trials, or recorded
    /// after `c`'s attempts were read) are left out.
    ///
    /// A counting sort by attempt row that reads the rows once, in table order, and
    /// writes each where it goes: gathering them in attempt order instead waited on a
    /// cache miss per row. Within an attempt, table order is seq order unless rows were
    /// written otherwise; those attempts are sorted afterwards. Names are interned in the
    /// final order, so the symbols are those `from_records` gives.
    pub(super) fn place(self, c: &mut CampaignColumns) {
        // Each part's names in one scratch table.
        let mut scratch = Names::default();
        let to_scratch: Vec<Vec<Sym>> = self
            .parts
            .iter()
            .map(|p| (0..p.names.len()).map(|s| scratch.intern(p.names.name(s as Sym))).collect())
            .collect();
        let rows = self.parts.iter().flat_map(|p| p.rows.iter());
        // Each row's attempt row; a run of rows of one attempt looks it up once.
        let mut row_of: Vec<u32> = Vec::with_capacity(self.parts.iter().map(|p| p.rows.len()).sum());
        let mut cached: Option<((u32, u32), u32)> = None;
        for m in rows.clone() {
            let row = match cached {
                Some((k, row)) if k == m.key => row,
                _ => {
                    let row = c.encoded_attempt(m.key).map_or(u32::MAX, |r| r as u32);
                    cached = Some((m.key, row));
                    row
                }
            };
            row_of.push(row);
        }
        let n = c.attempts();
        let mut start = vec![0u32; n + 1];
        for &r in row_of.iter().filter(|&&r| r != u32::MAX) {
            start[r as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let total = start[n] as usize;
        let (mut metric, mut value, mut unit, mut source) =
            (vec![0 as Sym; total], vec![0f64; total], vec![0 as Sym; total], vec![0 as Sym; total]);
        let mut seq = vec![0u32; total];
        let mut unsorted: Vec<u32> = Vec::new();
        let mut next = start.clone();
        let tagged = self.parts.iter().zip(&to_scratch).flat_map(|(p, map)| p.rows.iter().map(move |m| (m, map)));
        for ((m, map), &r) in tagged.zip(&row_of) {
            if r == u32::MAX {
                continue;
            }
            let at = next[r as usize] as usize;
            next[r as usize] += 1;
            if at > start[r as usize] as usize && seq[at - 1] > m.seq && unsorted.last() != Some(&r) {
                unsorted.push(r);
            }
            metric[at] = map[m.metric as usize];
            value[at] = m.value;
            unit[at] = map[m.unit as usize];
            source[at] = map[m.source as usize];
            seq[at] = m.seq;
        }
        drop(row_of);
        drop(self.parts);
        unsorted.sort_unstable();
        unsorted.dedup();
        for r in unsorted {
            let range = start[r as usize] as usize..start[r as usize + 1] as usize;
            // Stable: rows with the same seq keep table order.
            let mut order: Vec<usize> = range.clone().collect();
            order.sort_by_key(|&i| seq[i]);
            let sorted: Vec<(Sym, f64, Sym, Sym)> =
                order.iter().map(|&i| (metric[i], value[i], unit[i], source[i])).collect();
            for (i, (m, v, u, s)) in range.zip(sorted) {
                (metric[i], value[i], unit[i], source[i]) = (m, v, u, s);
            }
        }
        // Scratch symbols to final ones, interned in the final order.
        let mut to_final: Vec<Option<Sym>> = vec![None; scratch.len()];
        let mut fin = |s: Sym| *to_final[s as usize].get_or_insert_with(|| c.names.intern(scratch.name(s)));
        for i in 0..total {
            // Row by row, metric, unit, source: the order `from_records` interns in.
            metric[i] = fin(metric[i]);
            unit[i] = fin(unit[i]);
            source[i] = fin(source[i]);
        }
        c.a_meas = start;
        (c.m_metric, c.m_value, c.m_unit, c.m_source) = (metric, value, unit, source);
    }
}

/// Measurements pushed one by one, in any order, as one part: the read of a backend
/// without SQLite's parallel one.
#[derive(Default)]
pub(super) struct Collect {
    part: Part,
    recent: [Recent; 3],
}

impl Collect {
    pub(super) fn push(&mut self, key: (u32, u32), seq: u32, metric: &str, value: f64, unit: &str, source: &str) {
        let (names, [m, u, s]) = (&mut self.part.names, &mut self.recent);
        self.part.rows.push(Raw {
            key,
            seq,
            metric: intern_str(names, m, metric),
            value,
            unit: intern_str(names, u, unit),
            source: intern_str(names, s, source),
        });
    }

    pub(super) fn done(self) -> Measurements {
        Measurements { parts: vec![self.part] }
    }
}

fn intern_str(names: &mut Names, recent: &mut Recent, name: &str) -> Sym {
    // Text that is already a `str` is valid UTF-8: this cannot fail.
    intern_recent(names, recent, name.as_bytes(), 0).unwrap_or_else(|_| names.intern(name))
}

/// The last few symbols of one column, checked by bytes before a name is hashed: a
/// campaign's metrics repeat in a short cycle.
#[derive(Default)]
struct Recent {
    syms: [Sym; 8],
    len: usize,
    next: usize,
}

/// `name`, the text of `column`, interned in `names` (its UTF-8 checked only when it is
/// not one of `recent`).
fn intern_recent(names: &mut Names, recent: &mut Recent, name: &[u8], column: usize) -> rusqlite::Result<Sym> {
    if let Some(&s) = recent.syms[..recent.len].iter().find(|&&s| names.name(s).as_bytes() == name) {
        return Ok(s);
    }
    let text = std::str::from_utf8(name).map_err(|e| rusqlite::Error::Utf8Error(column, e))?;
    let s = names.intern(text);
    recent.syms[recent.next] = s;
    recent.next = (recent.next + 1) % recent.syms.len();
    recent.len = (recent.len + 1).min(recent.syms.len());
    Ok(s)
}

/// A text column's bytes, borrowed from the row, not yet checked as UTF-8.
fn bytes<'r>(r: &'r Row<'_>, i: usize) -> rusqlite::Result<&'r [u8]> {
    match r.get_ref(i)? {
        ValueRef::Text(b) => Ok(b),
        other => Err(rusqlite::Error::InvalidColumnType(i, String::new(), other.data_type())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_split_evenly_without_gaps_or_overlaps() {
        assert_eq!(split(1, 10, 2), vec![(1, 5), (6, 10)]);
        assert_eq!(split(1, 11, 2), vec![(1, 5), (6, 11)]);
        assert_eq!(split(7, 7, 2), vec![(7, 7)]);
        assert_eq!(split(3, 5, 4), vec![(3, 3), (4, 4), (5, 5)]);
        for (lo, hi, n) in [(1, 1000, 3), (-5, 17, 4), (100, 101, 2)] {
            let r = split(lo, hi, n);
            assert_eq!((r[0].0, r[r.len() - 1].1), (lo, hi));
            assert!(r.windows(2).all(|w| w[0].1 + 1 == w[1].0 && w[0].0 <= w[0].1));
        }
    }
}
