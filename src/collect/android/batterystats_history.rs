//! The history part of `dumpsys batterystats --checkin`: the string pool (`hsp`) and the
//! history records (`h`).
//!
//! ```text
//! 9,hsp,1,1001,"*telephony-radio*"
//! 9,h,0:RESET:TIME:1732816430344
//! 9,h,0,Bl=100,Bs=d,Bt=251,Bv=4395,+r,+w,+S
//! 9,h,10,+w=1
//! 9,h,10,-w=1
//! ```
//! Each record starts with the milliseconds since the previous record, optionally followed by
//! a command (`:RESET:TIME:<epoch ms>`, `:TIME:<epoch ms>`, `:START`, `:SHUTDOWN`,
//! `:*OVERFLOW*`). Items are `+X`/`-X` (a state turns on/off), `X=value` and `+X=<pool index>`
//! (an event naming a string-pool tag). `Bl` is the battery level (%), `Bt` the temperature in
//! tenths of °C, `Bv` the voltage in mV, `S` the screen and `w` the wake lock.

use serde::Serialize;

use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, number};

/// `9,hsp,<index>,<uid>,"<tag>"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolEntry {
    pub index: u32,
    pub uid: i64,
    pub tag: String,
}

/// A change of the screen state. `value` follows `android.view.Display.STATE_*` as trace
/// processors read it: 2 = on (`+S`), 1 = off (`-S`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScreenChange {
    pub ts_ms: i64,
    pub value: f64,
}

/// A wake lock held from `+w=<index>` to `-w=<index>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WakelockSlice {
    pub start_ms: i64,
    /// `None` while the history ends with the lock still held.
    pub dur_ms: Option<i64>,
    pub name: String,
    pub uid: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelSample {
    pub ts_ms: i64,
    pub level_pct: i64,
}

/// What the checkin history holds. Times are epoch milliseconds once a `TIME` command has been
/// seen (`clock_known`), else milliseconds since the first record.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CheckinHistory {
    pub string_pool: Vec<PoolEntry>,
    pub records: usize,
    pub clock_known: bool,
    pub start_ms: Option<i64>,
    pub end_ms: Option<i64>,
    pub screen: Vec<ScreenChange>,
    pub wakelocks: Vec<WakelockSlice>,
    pub levels: Vec<LevelSample>,
    #[serde(skip)]
    now_ms: i64,
    #[serde(skip)]
    screen_on: Option<bool>,
    /// Open wake locks: (pool index, index into `wakelocks`).
    #[serde(skip)]
    open: Vec<(u32, usize)>,
    /// Intervals with battery status charging (`Bs=c`): (start, end; `None` while open), ms.
    #[serde(skip)]
    pub charging: Vec<(i64, Option<i64>)>,
    /// Likewise for a plugged power source (`Bp=` other than `n`).
    #[serde(skip)]
    pub plugged: Vec<(i64, Option<i64>)>,
}

/// Opens or closes the last interval of a state that starts and ends at history records.
fn toggle(on: bool, now: i64, intervals: &mut Vec<(i64, Option<i64>)>) {
    let open = intervals.last().is_some_and(|(_, end)| end.is_none());
    match (on, open) {
        (true, false) => intervals.push((now, None)),
        (false, true) => {
            if let Some(last) = intervals.last_mut() {
                last.1 = Some(now);
            }
        }
        _ => {}
    }
}

/// Milliseconds of `intervals` inside `[from, to]` (open ones end at `last`).
fn overlap(intervals: &[(i64, Option<i64>)], last: i64, from: i64, to: i64) -> i64 {
    intervals.iter().map(|(a, b)| (b.unwrap_or(last).min(to) - (*a).max(from)).max(0)).sum()
}

impl CheckinHistory {
    /// Adds a `hsp` row (fields after `hsp`).
    pub(crate) fn add_pool(&mut self, n: usize, fields: &[String]) -> Result<(), ParseError> {
        let [index, uid, tag, ..] = fields else {
            return Err(ParseError::at(n, "`hsp` row needs <index>,<uid>,\"<tag>\""));
        };
        self.string_pool.push(PoolEntry {
            index: number(n, "hsp index", index)?,
            uid: number(n, "hsp uid", uid)?,
            tag: tag.clone(),
        });
        Ok(())
    }

    fn tag(&self, index: u32) -> (String, Option<i64>) {
        match self.string_pool.iter().rev().find(|e| e.index == index) {
            Some(e) => (e.tag.clone(), Some(e.uid)),
            None => (format!("<string pool #{index}>"), None),
        }
    }

    /// Adds an `h` row (fields after `h`).
    pub(crate) fn add_record(&mut self, n: usize, fields: &[String]) -> Result<(), ParseError> {
        let Some(head) = fields.first() else {
            return Err(ParseError::at(n, "`h` row without a time delta"));
        };
        let mut parts = head.split(':');
        let delta: i64 = number(n, "history time delta (ms)", parts.next().unwrap_or(""))?;
        if delta < 0 {
            return Err(ParseError::at(n, format!("history time delta {delta} ms is negative")));
        }
        self.now_ms = self.now_ms.saturating_add(delta);
        let cmd: Vec<&str> = parts.collect();
        if let Some(i) = cmd.iter().position(|c| *c == "TIME") {
            let t = cmd.get(i + 1).ok_or_else(|| ParseError::at(n, "`TIME` without a time"))?;
            self.now_ms = number(n, "history TIME (epoch ms)", t)?;
            self.clock_known = true;
        }
        self.records += 1;
        self.start_ms.get_or_insert(self.now_ms);
        self.end_ms = Some(self.now_ms);
        for item in &fields[1..] {
            self.item(n, item)?;
        }
        Ok(())
    }

    fn item(&mut self, n: usize, item: &str) -> Result<(), ParseError> {
        let (sign, body) = match item.as_bytes().first() {
            Some(b'+') => (Some(true), &item[1..]),
            Some(b'-') => (Some(false), &item[1..]),
            _ => (None, item),
        };
        let (key, value) = match body.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (body, None),
        };
        match (sign, key, value) {
            (Some(on), "S", None) if self.screen_on != Some(on) => {
                self.screen_on = Some(on);
                self.screen.push(ScreenChange { ts_ms: self.now_ms, value: if on { 2.0 } else { 1.0 } });
            }
            (Some(on), "w", Some(v)) => {
                let index: u32 = number(n, "wake lock string-pool index", v)?;
                if on {
                    if !self.open.iter().any(|(i, _)| *i == index) {
                        let (name, uid) = self.tag(index);
                        self.open.push((index, self.wakelocks.len()));
                        self.wakelocks.push(WakelockSlice { start_ms: self.now_ms, dur_ms: None, name, uid });
                    }
                } else if let Some(pos) = self.open.iter().position(|(i, _)| *i == index) {
                    let (_, slot) = self.open.remove(pos);
                    if let Some(s) = self.wakelocks.get_mut(slot) {
                        s.dur_ms = Some(self.now_ms.saturating_sub(s.start_ms));
                    }
                }
            }
            (None, "Bl", Some(v)) => {
                let level: i64 = number(n, "history battery level Bl", v)?;
                if self.levels.last().is_none_or(|l| l.level_pct != level) {
                    self.levels.push(LevelSample { ts_ms: self.now_ms, level_pct: level });
                }
            }
            (None, "Bs", Some(v)) => {
                toggle(v == "c", self.now_ms, &mut self.charging);
            }
            (None, "Bp", Some(v)) => {
                toggle(v != "n", self.now_ms, &mut self.plugged);
            }
            (_, "", _) => return Err(ParseError::at(n, format!("empty history item `{}`", excerpt(item)))),
            _ => {}
        }
        Ok(())
    }

    /// Milliseconds the history shows the battery charging (`Bs=c`) up to its last record:
    /// evidence that a soak was not really off USB power.
    pub fn charging_ms(&self) -> i64 {
        self.charging_ms_between(i64::MIN / 2, i64::MAX / 2)
    }

    /// Like `charging_ms`, counting only `[from, to]` (history time: epoch ms when
    /// `clock_known`): the soak, not the charging before and after it.
    pub fn charging_ms_between(&self, from: i64, to: i64) -> i64 {
        overlap(&self.charging, self.end_ms.unwrap_or(self.now_ms), from, to)
    }

    /// Milliseconds with a power source plugged (`Bp=a|u|w…`; a `dumpsys battery unplug`
    /// records `n` here while the phone still charges, so `charging_ms` is the stronger evidence).
    pub fn plugged_ms(&self) -> i64 {
        overlap(&self.plugged, self.end_ms.unwrap_or(self.now_ms), i64::MIN / 2, i64::MAX / 2)
    }

    /// Wake lock slices sorted by start, then name (the order trace processors list them in).
    pub fn sorted_wakelocks(&self) -> Vec<&WakelockSlice> {
        let mut v: Vec<&WakelockSlice> = self.wakelocks.iter().collect();
        v.sort_by(|a, b| a.start_ms.cmp(&b.start_ms).then_with(|| a.name.cmp(&b.name)));
        v
    }
}

#[cfg(test)]
mod tests {
    const CHECKIN: &str = include_str!("../../../tests/fixtures/devices/android/batterystats_checkin_v36_perfetto.txt");

    #[test]
    fn charging_and_plugged_time_are_summed_from_the_history() {
        let text = format!("{CHECKIN}9,h,60000,Bs=c,Bp=u\n9,h,30000,Bs=d,Bp=n\n9,h,10000,Bs=c\n9,h,5000,+w=1\n");
        let h = crate::collect::android::batterystats_checkin::parse(&text).unwrap().history;
        // 30 s charging and plugged, then 5 s charging until the last record (still open).
        assert_eq!(h.charging_ms(), 35_000);
        assert_eq!(h.plugged_ms(), 30_000);
        // Only what falls in a window: the first 10 s of the first interval, none of the second.
        let start = h.charging[0].0;
        assert_eq!(h.charging_ms_between(start - 5_000, start + 10_000), 10_000);
        let unplugged = crate::collect::android::batterystats_checkin::parse(CHECKIN).unwrap().history;
        assert_eq!((unplugged.charging_ms(), unplugged.plugged_ms()), (0, 0), "the fixture discharges throughout");
    }
}
