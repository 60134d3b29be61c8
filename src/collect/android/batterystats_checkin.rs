//! `adb shell dumpsys batterystats --checkin` (or `-c`): the machine-readable battery stats.
//!
//! Every row is `9,<uid>,<category>,<type>,<fields…>` (AOSP `BatteryStats.dumpCheckinLocked`):
//! `9` is a legacy constant, `<category>` is `i` (info) or `l` (since last charge), and the
//! history rows are `9,hsp,…` and `9,h,…` (see [`crate::collect::android::batterystats_history`]). Fields are
//! positional; each Android release may append fields, so rows are read by position with
//! the layout of the checkin version in the `vers` row (11 = Android 5.0 … 35 = Android 12,
//! 36 = 2024 builds such as AP2A),
//! and extra trailing fields are tolerated. Row types this parser does not interpret are
//! counted and kept raw.
//!
//! Units as printed: times in ms, `pws`/`pwi` in mAh (estimates from the power profile),
//! `dc` discharge in % of the battery and, in recent versions, mAh measured by the fuel
//! gauge's coulomb counter, `bt` learned capacities in µAh.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::collect::android::batterystats_history::CheckinHistory;
use crate::collect::parse_error::ParseError;
use crate::collect::text::{excerpt, finite, number, numbered};

/// The checkin versions whose layouts this parser knows.
pub const KNOWN_VERSIONS: std::ops::RangeInclusive<u32> = 11..=36;

/// Version 14 moved Wi-Fi and network totals out of the `m` row (AOSP change 674773).
const MISC_LAYOUT_CHANGE: u32 = 14;

/// `9,0,i,vers,<checkin version>,<parcel version>,<start platform>,<end platform>`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Version {
    pub checkin: u32,
    pub parcel: Option<i64>,
    pub start_platform: Option<String>,
    pub end_platform: Option<String>,
}

/// `bt`: the battery-time summary since the last charge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatteryTimes {
    /// `None` when printed as `N/A`.
    pub start_count: Option<i64>,
    pub battery_realtime_ms: i64,
    pub battery_uptime_ms: i64,
    pub total_realtime_ms: i64,
    pub total_uptime_ms: i64,
    pub start_clock_time_ms: Option<i64>,
    pub screen_off_realtime_ms: Option<i64>,
    pub screen_off_uptime_ms: Option<i64>,
    /// Capacity the power profile declares, mAh.
    pub estimated_capacity_mah: Option<f64>,
    /// Learned by the fuel gauge, µAh.
    pub min_learned_capacity_uah: Option<i64>,
    pub max_learned_capacity_uah: Option<i64>,
    pub screen_doze_ms: Option<i64>,
}

/// `dc`: how much the battery discharged since the last charge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Discharge {
    /// Lower bound of the level drop, % (the current partial percent not counted).
    pub low_pct: i64,
    /// Upper bound of the level drop, %: unplug level − current level.
    pub high_pct: i64,
    pub screen_on_pct: i64,
    pub screen_off_pct: i64,
    /// Coulomb-counter discharge, mAh (recent versions only; 0 when the gauge has no counter).
    pub total_mah: Option<f64>,
    pub screen_off_mah: Option<f64>,
    pub screen_doze_pct: Option<i64>,
    pub screen_doze_mah: Option<f64>,
    pub light_doze_mah: Option<f64>,
    pub deep_doze_mah: Option<f64>,
}

impl Discharge {
    /// Screen-on share of the coulomb-counter discharge, mAh.
    pub fn screen_on_mah(&self) -> Option<f64> {
        Some(self.total_mah? - self.screen_off_mah?)
    }
}

/// `pws`: the power-profile estimate summary, mAh.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerSummary {
    pub capacity_mah: f64,
    pub computed_mah: f64,
    pub min_drained_mah: f64,
    pub max_drained_mah: f64,
}

/// `pwi`: one estimated consumer (an app when `label` is `uid`, else a component such as
/// `scrn`, `cell`, `wifi`, `idle`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PowerItem {
    pub uid: i64,
    pub label: String,
    pub mah: f64,
    pub hidden: Option<bool>,
    pub screen_mah: Option<f64>,
    pub proportional_smear_mah: Option<f64>,
}

/// `m`: device-wide times, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Misc {
    pub screen_on_ms: i64,
    pub phone_on_ms: i64,
    pub full_wakelock_ms: i64,
    pub partial_wakelock_ms: i64,
    pub mobile_radio_active_ms: Option<i64>,
    pub interactive_ms: Option<i64>,
    pub power_save_mode_ms: Option<i64>,
    pub connectivity_changes: Option<i64>,
}

/// `nt` (per uid) and `gn` (device): traffic, bytes and packets.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Network {
    pub mobile_rx_bytes: i64,
    pub mobile_tx_bytes: i64,
    pub wifi_rx_bytes: i64,
    pub wifi_tx_bytes: i64,
    pub mobile_rx_packets: Option<i64>,
    pub mobile_tx_packets: Option<i64>,
    pub wifi_rx_packets: Option<i64>,
    pub wifi_tx_packets: Option<i64>,
    pub bt_rx_bytes: Option<i64>,
    pub bt_tx_bytes: Option<i64>,
}

impl Network {
    // Sums saturate: the inputs are untrusted and must not overflow.
    pub fn rx_bytes(&self) -> i64 {
        self.mobile_rx_bytes.saturating_add(self.wifi_rx_bytes)
    }
    pub fn tx_bytes(&self) -> i64 {
        self.mobile_tx_bytes.saturating_add(self.wifi_tx_bytes)
    }
    pub fn rx_packets(&self) -> i64 {
        self.mobile_rx_packets.unwrap_or(0).saturating_add(self.wifi_rx_packets.unwrap_or(0))
    }
    pub fn tx_packets(&self) -> i64 {
        self.mobile_tx_packets.unwrap_or(0).saturating_add(self.wifi_tx_packets.unwrap_or(0))
    }

    fn add(&mut self, o: &Network) {
        let opt = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.mobile_rx_bytes = self.mobile_rx_bytes.saturating_add(o.mobile_rx_bytes);
        self.mobile_tx_bytes = self.mobile_tx_bytes.saturating_add(o.mobile_tx_bytes);
        self.wifi_rx_bytes = self.wifi_rx_bytes.saturating_add(o.wifi_rx_bytes);
        self.wifi_tx_bytes = self.wifi_tx_bytes.saturating_add(o.wifi_tx_bytes);
        self.mobile_rx_packets = opt(self.mobile_rx_packets, o.mobile_rx_packets);
        self.mobile_tx_packets = opt(self.mobile_tx_packets, o.mobile_tx_packets);
        self.wifi_rx_packets = opt(self.wifi_rx_packets, o.wifi_rx_packets);
        self.wifi_tx_packets = opt(self.wifi_tx_packets, o.wifi_tx_packets);
        self.bt_rx_bytes = opt(self.bt_rx_bytes, o.bt_rx_bytes);
        self.bt_tx_bytes = opt(self.bt_tx_bytes, o.bt_tx_bytes);
    }
}

/// `cpu`: CPU time of a uid, ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuTime {
    pub user_ms: i64,
    pub system_ms: i64,
}

/// `pr`: one process of a uid.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessTime {
    pub name: String,
    pub user_ms: i64,
    pub system_ms: i64,
    pub foreground_ms: Option<i64>,
    pub starts: Option<i64>,
    pub anrs: Option<i64>,
    pub crashes: Option<i64>,
}

/// One wake-lock timer of a `wl` row: `<time ms>,<marker>,<count>[,<current>,<max>[,<total>]]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WakeTimer {
    pub time_ms: i64,
    pub count: i64,
    /// Checkin version 19+; −1 when not tracked.
    pub max_ms: Option<i64>,
    /// Checkin version 21+ (actual, not apportioned, time); −1 when not tracked.
    pub total_ms: Option<i64>,
}

/// `wl`: one named wake lock of a uid, with its full (`f`), partial (`p`), background partial
/// (`bp`, version 22+) and window (`w`) timers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wakelock {
    pub name: String,
    pub full: Option<WakeTimer>,
    pub partial: Option<WakeTimer>,
    pub background_partial: Option<WakeTimer>,
    pub window: Option<WakeTimer>,
}

/// Everything recorded for one uid (rows with category `l`).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct UidStats {
    pub uid: i64,
    pub cpu: Option<CpuTime>,
    pub processes: Vec<ProcessTime>,
    pub network: Option<Network>,
    pub wakelocks: Vec<Wakelock>,
}

/// A row kept as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawRow {
    pub line: usize,
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Checkin {
    pub version: Option<Version>,
    /// App id (uid mod 100 000) → packages (`uid` rows).
    pub packages: BTreeMap<i64, Vec<String>>,
    pub battery: Option<BatteryTimes>,
    pub discharge: Option<Discharge>,
    pub power_summary: Option<PowerSummary>,
    pub power_items: Vec<PowerItem>,
    pub misc: Option<Misc>,
    pub global_network: Option<Network>,
    pub uids: BTreeMap<i64, UidStats>,
    pub history: CheckinHistory,
    /// Rows of other types (or other categories), counted by `<category>,<type>`.
    pub other_rows: BTreeMap<String, usize>,
    #[serde(skip)]
    pub other_raw: Vec<RawRow>,
    pub warnings: Vec<String>,
}

/// Per-package view of one app (all of its uids, e.g. one per user profile).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppUsage {
    /// The packages sharing the app id, or `uid:<n>` when the checkin names none.
    pub name: String,
    pub packages: Vec<String>,
    pub uids: Vec<i64>,
    /// Sum of the app's `pwi` rows: power-profile estimate, mAh.
    pub estimated_mah: Option<f64>,
    pub cpu_user_ms: Option<i64>,
    pub cpu_system_ms: Option<i64>,
    /// `cpu` when the uid has a `cpu` row; `pr` when summed over its processes (old versions).
    pub cpu_source: Option<&'static str>,
    pub network: Option<Network>,
    /// Sum of the partial wake-lock timers (apportioned time), ms.
    pub wakelock_partial_ms: i64,
    pub wakelock_partial_count: i64,
    pub wakelocks: usize,
}

impl AppUsage {
    pub fn cpu_ms(&self) -> Option<i64> {
        Some(self.cpu_user_ms?.saturating_add(self.cpu_system_ms?))
    }
}

/// App id of a uid (`UserHandle.getAppId`).
pub fn app_id(uid: i64) -> i64 {
    uid.rem_euclid(100_000)
}

impl Checkin {
    pub fn checkin_version(&self) -> Option<u32> {
        self.version.as_ref().map(|v| v.checkin)
    }

    /// Every uid with recorded activity or an estimate, grouped by app id, largest estimate first.
    pub fn apps(&self) -> Vec<AppUsage> {
        let mut ids: Vec<i64> = self.uids.keys().map(|u| app_id(*u)).collect();
        ids.extend(self.power_items.iter().filter(|p| p.label == "uid").map(|p| app_id(p.uid)));
        ids.sort_unstable();
        ids.dedup();
        let mut apps: Vec<AppUsage> = ids.into_iter().map(|id| self.app_usage(id)).collect();
        apps.sort_by(|a, b| {
            b.estimated_mah.unwrap_or(0.0).total_cmp(&a.estimated_mah.unwrap_or(0.0)).then_with(|| a.name.cmp(&b.name))
        });
        apps
    }

    /// The app that holds `package`, if the checkin's `uid` rows name it.
    pub fn app(&self, package: &str) -> Option<AppUsage> {
        let id = self.packages.iter().find(|(_, pkgs)| pkgs.iter().any(|p| p == package)).map(|(id, _)| *id)?;
        Some(self.app_usage(id))
    }

    fn app_usage(&self, id: i64) -> AppUsage {
        let packages = self.packages.get(&id).cloned().unwrap_or_default();
        let stats: Vec<&UidStats> = self.uids.values().filter(|u| app_id(u.uid) == id).collect();
        let items: Vec<&PowerItem> =
            self.power_items.iter().filter(|p| p.label == "uid" && app_id(p.uid) == id).collect();
        let mut uids: Vec<i64> = stats.iter().map(|s| s.uid).chain(items.iter().map(|p| p.uid)).collect();
        uids.sort_unstable();
        uids.dedup();
        let (mut user, mut system, mut source) = (None::<i64>, None::<i64>, None);
        for s in &stats {
            let (u, sy, src) = match &s.cpu {
                Some(c) => (c.user_ms, c.system_ms, "cpu"),
                None if !s.processes.is_empty() => (
                    s.processes.iter().fold(0i64, |a, p| a.saturating_add(p.user_ms)),
                    s.processes.iter().fold(0i64, |a, p| a.saturating_add(p.system_ms)),
                    "pr",
                ),
                None => continue,
            };
            user = Some(user.unwrap_or(0).saturating_add(u));
            system = Some(system.unwrap_or(0).saturating_add(sy));
            source = Some(if source.is_some_and(|s| s != src) { "cpu+pr" } else { src });
        }
        let mut network: Option<Network> = None;
        for n in stats.iter().filter_map(|s| s.network.as_ref()) {
            network.get_or_insert_with(Network::default).add(n);
        }
        let partial = stats.iter().flat_map(|s| &s.wakelocks).filter_map(|w| w.partial.as_ref());
        let (wakelock_partial_ms, wakelock_partial_count) = partial
            .fold((0i64, 0i64), |(t, c), p| (t.saturating_add(p.time_ms.max(0)), c.saturating_add(p.count.max(0))));
        AppUsage {
            name: if packages.is_empty() { format!("uid:{id}") } else { packages.join("|") },
            packages,
            uids,
            estimated_mah: (!items.is_empty()).then(|| items.iter().map(|p| p.mah).sum()),
            cpu_user_ms: user,
            cpu_system_ms: system,
            cpu_source: source,
            network,
            wakelock_partial_ms,
            wakelock_partial_count,
            wakelocks: stats.iter().map(|s| s.wakelocks.len()).sum(),
        }
    }
}

/// Splits a row at commas outside double quotes and strips the quotes.
fn split_row(n: usize, line: &str) -> Result<Vec<String>, ParseError> {
    let (mut fields, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if quoted {
        return Err(ParseError::at(n, "a quoted field is not closed (truncated line?)"));
    }
    fields.push(cur);
    Ok(fields)
}

/// Positional access to a row's fields after the type, with errors that name the row.
struct Row<'a> {
    n: usize,
    kind: &'a str,
    f: &'a [String],
}

impl Row<'_> {
    fn need(&self, count: usize, names: &str) -> Result<(), ParseError> {
        if self.f.len() < count {
            return Err(ParseError::at(
                self.n,
                format!(
                    "`{}` row has {} field(s) after the type, needs at least {count} ({names}); truncated?",
                    self.kind,
                    self.f.len()
                ),
            ));
        }
        Ok(())
    }
    fn text(&self, i: usize) -> &str {
        self.f.get(i).map_or("", String::as_str)
    }
    fn int(&self, i: usize, what: &str) -> Result<i64, ParseError> {
        number(self.n, &format!("`{}` {what}", self.kind), self.text(i))
    }
    fn mah(&self, i: usize, what: &str) -> Result<f64, ParseError> {
        finite(self.n, &format!("`{}` {what} (mAh)", self.kind), self.text(i))
    }
    /// Optional trailing field: absent is `None`, present must parse.
    fn opt_int(&self, i: usize, what: &str) -> Result<Option<i64>, ParseError> {
        if i < self.f.len() { self.int(i, what).map(Some) } else { Ok(None) }
    }
    fn opt_mah(&self, i: usize, what: &str) -> Result<Option<f64>, ParseError> {
        if i < self.f.len() { self.mah(i, what).map(Some) } else { Ok(None) }
    }
}

fn network(r: &Row, bt_at: usize) -> Result<Network, ParseError> {
    r.need(4, "mobile rx/tx bytes, wifi rx/tx bytes")?;
    Ok(Network {
        mobile_rx_bytes: r.int(0, "mobile rx bytes")?,
        mobile_tx_bytes: r.int(1, "mobile tx bytes")?,
        wifi_rx_bytes: r.int(2, "wifi rx bytes")?,
        wifi_tx_bytes: r.int(3, "wifi tx bytes")?,
        mobile_rx_packets: r.opt_int(4, "mobile rx packets")?,
        mobile_tx_packets: r.opt_int(5, "mobile tx packets")?,
        wifi_rx_packets: r.opt_int(6, "wifi rx packets")?,
        wifi_tx_packets: r.opt_int(7, "wifi tx packets")?,
        bt_rx_bytes: r.opt_int(bt_at, "bluetooth rx bytes")?,
        bt_tx_bytes: r.opt_int(bt_at + 1, "bluetooth tx bytes")?,
    })
}

fn wakelock(r: &Row) -> Result<Wakelock, ParseError> {
    r.need(1, "name")?;
    let t = &r.f[1..];
    let is_marker = |s: &str| matches!(s, "f" | "p" | "bp" | "w");
    let marks: Vec<usize> = (0..t.len()).filter(|&i| is_marker(&t[i])).collect();
    if marks.is_empty() {
        return Err(ParseError::at(r.n, "`wl` row without f/p/bp/w timer markers"));
    }
    let mut w = Wakelock { name: r.f[0].clone(), full: None, partial: None, background_partial: None, window: None };
    for (k, &i) in marks.iter().enumerate() {
        // The timer's time precedes its marker; its count and extras follow, up to the
        // field before the next marker (that one is the next timer's time).
        let next = marks.get(k + 1).map_or(t.len(), |&j| j - 1);
        let time = i.checked_sub(1).and_then(|p| t.get(p)).filter(|s| !is_marker(s));
        let (Some(time), Some(count)) = (time, t.get(i + 1)) else {
            return Err(ParseError::at(r.n, format!("`wl` timer `{}` lacks its time or count", t[i])));
        };
        let extra = |e: usize| -> Result<Option<i64>, ParseError> {
            let at = i + 2 + e;
            if at < next { number(r.n, "`wl` timer duration", &t[at]).map(Some) } else { Ok(None) }
        };
        let timer = WakeTimer {
            time_ms: number(r.n, "`wl` timer time (ms)", time)?,
            count: number(r.n, "`wl` timer count", count)?,
            max_ms: extra(1)?,
            total_ms: extra(2)?,
        };
        match t[i].as_str() {
            "f" => w.full = Some(timer),
            "p" => w.partial = Some(timer),
            "bp" => w.background_partial = Some(timer),
            _ => w.window = Some(timer),
        }
    }
    Ok(w)
}

fn misc(r: &Row, version: u32) -> Result<Misc, ParseError> {
    if version < MISC_LAYOUT_CHANGE {
        // screen, phone, wifi on, wifi running, bt on, 4 × bytes, full wl, partial wl,
        // legacy input count, radio active, radio adjusted, interactive, low power, conn changes.
        r.need(11, "screen on … partial wake lock time")?;
        Ok(Misc {
            screen_on_ms: r.int(0, "screen on time")?,
            phone_on_ms: r.int(1, "phone on time")?,
            full_wakelock_ms: r.int(9, "full wake lock time")?,
            partial_wakelock_ms: r.int(10, "partial wake lock time")?,
            mobile_radio_active_ms: r.opt_int(12, "mobile radio active time")?,
            interactive_ms: r.opt_int(14, "interactive time")?,
            power_save_mode_ms: r.opt_int(15, "power save time")?,
            connectivity_changes: r.opt_int(16, "connectivity changes")?,
        })
    } else {
        r.need(4, "screen on, phone on, full and partial wake lock time")?;
        Ok(Misc {
            screen_on_ms: r.int(0, "screen on time")?,
            phone_on_ms: r.int(1, "phone on time")?,
            full_wakelock_ms: r.int(2, "full wake lock time")?,
            partial_wakelock_ms: r.int(3, "partial wake lock time")?,
            mobile_radio_active_ms: r.opt_int(4, "mobile radio active time")?,
            interactive_ms: r.opt_int(6, "interactive time")?,
            power_save_mode_ms: r.opt_int(7, "power save time")?,
            connectivity_changes: r.opt_int(8, "connectivity changes")?,
        })
    }
}

/// Parses `dumpsys batterystats --checkin` output.
pub fn parse(text: &str) -> Result<Checkin, ParseError> {
    let mut c = Checkin::default();
    let mut rows = 0usize;
    for (n, line) in numbered(text) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f = split_row(n, line)?;
        if f.len() < 2 || f[0].parse::<u32>().is_err() {
            return Err(ParseError::at(
                n,
                format!("not a batterystats checkin row (expected `9,<uid>,<category>,<type>,…`): `{}`", excerpt(line)),
            ));
        }
        rows += 1;
        match f[1].as_str() {
            "hsp" => c.history.add_pool(n, &f[2..])?,
            "h" => c.history.add_record(n, &f[2..])?,
            _ => row(&mut c, n, &f)?,
        }
    }
    if rows == 0 {
        return Err(ParseError::at(1, "empty input: expected `dumpsys batterystats --checkin` rows"));
    }
    match c.checkin_version() {
        None => c
            .warnings
            .push(format!("no `vers` row: rows were read with the checkin version {} layout", KNOWN_VERSIONS.end())),
        Some(v) if !KNOWN_VERSIONS.contains(&v) => c.warnings.push(format!(
            "checkin version {v} is outside the known {}–{}: rows were read with the nearest known layout",
            KNOWN_VERSIONS.start(),
            KNOWN_VERSIONS.end()
        )),
        Some(_) => {}
    }
    Ok(c)
}

fn row(c: &mut Checkin, n: usize, f: &[String]) -> Result<(), ParseError> {
    let [_, uid, category, kind, rest @ ..] = f else {
        return Err(ParseError::at(n, "checkin row needs at least `9,<uid>,<category>,<type>` (truncated?)"));
    };
    let uid: i64 = number(n, "uid", uid)?;
    let r = Row { n, kind, f: rest };
    let version = c.checkin_version().unwrap_or(*KNOWN_VERSIONS.end());
    match (category.as_str(), kind.as_str()) {
        ("i", "vers") => {
            r.need(1, "checkin version")?;
            c.version = Some(Version {
                checkin: number(n, "`vers` checkin version", r.text(0))?,
                parcel: r.opt_int(1, "parcel version")?,
                start_platform: r.f.get(2).cloned(),
                end_platform: r.f.get(3).cloned(),
            });
        }
        ("i", "uid") => {
            r.need(2, "uid, package")?;
            let pkgs = c.packages.entry(app_id(r.int(0, "uid")?)).or_default();
            if !pkgs.contains(&r.f[1]) {
                pkgs.push(r.f[1].clone());
            }
        }
        ("l", "bt") => {
            r.need(5, "start count, battery realtime/uptime, total realtime/uptime")?;
            c.battery = Some(BatteryTimes {
                start_count: if r.text(0) == "N/A" { None } else { Some(r.int(0, "start count")?) },
                battery_realtime_ms: r.int(1, "battery realtime")?,
                battery_uptime_ms: r.int(2, "battery uptime")?,
                total_realtime_ms: r.int(3, "total realtime")?,
                total_uptime_ms: r.int(4, "total uptime")?,
                start_clock_time_ms: r.opt_int(5, "start clock time")?,
                screen_off_realtime_ms: r.opt_int(6, "screen-off realtime")?,
                screen_off_uptime_ms: r.opt_int(7, "screen-off uptime")?,
                estimated_capacity_mah: r.opt_mah(8, "estimated capacity")?,
                min_learned_capacity_uah: r.opt_int(9, "min learned capacity")?,
                max_learned_capacity_uah: r.opt_int(10, "max learned capacity")?,
                screen_doze_ms: r.opt_int(11, "screen doze time")?,
            });
        }
        ("l", "dc") => {
            r.need(4, "low and high discharge %, screen on and off %")?;
            c.discharge = Some(Discharge {
                low_pct: r.int(0, "low discharge %")?,
                high_pct: r.int(1, "high discharge %")?,
                screen_on_pct: r.int(2, "screen-on discharge %")?,
                screen_off_pct: r.int(3, "screen-off discharge %")?,
                total_mah: r.opt_mah(4, "discharge")?,
                screen_off_mah: r.opt_mah(5, "screen-off discharge")?,
                screen_doze_pct: r.opt_int(6, "screen-doze discharge %")?,
                screen_doze_mah: r.opt_mah(7, "screen-doze discharge")?,
                light_doze_mah: r.opt_mah(8, "light-doze discharge")?,
                deep_doze_mah: r.opt_mah(9, "deep-doze discharge")?,
            });
        }
        ("l", "pws") => {
            r.need(4, "capacity, computed, min and max drained mAh")?;
            c.power_summary = Some(PowerSummary {
                capacity_mah: r.mah(0, "capacity")?,
                computed_mah: r.mah(1, "computed power")?,
                min_drained_mah: r.mah(2, "min drained")?,
                max_drained_mah: r.mah(3, "max drained")?,
            });
        }
        ("l", "pwi") => {
            r.need(2, "label, mAh")?;
            c.power_items.push(PowerItem {
                uid,
                label: r.f[0].clone(),
                mah: r.mah(1, "power")?,
                hidden: r.opt_int(2, "hidden flag")?.map(|h| h != 0),
                screen_mah: r.opt_mah(3, "screen power")?,
                proportional_smear_mah: r.opt_mah(4, "proportional smear")?,
            });
        }
        ("l", "m") => c.misc = Some(misc(&r, version)?),
        ("l", "gn") => c.global_network = Some(network(&r, 8)?),
        ("l", "nt") => {
            // Per-uid rows put mobile active time and count before the Bluetooth bytes.
            let net = network(&r, 10)?;
            let u = uid_stats(c, uid);
            u.network.get_or_insert_with(Network::default).add(&net);
        }
        ("l", "cpu") => {
            r.need(2, "user ms, system ms")?;
            let cpu = CpuTime { user_ms: r.int(0, "user time")?, system_ms: r.int(1, "system time")? };
            uid_stats(c, uid).cpu = Some(cpu);
        }
        ("l", "pr") => {
            r.need(3, "process name, user ms, system ms")?;
            let p = ProcessTime {
                name: r.f[0].clone(),
                user_ms: r.int(1, "user time")?,
                system_ms: r.int(2, "system time")?,
                foreground_ms: r.opt_int(3, "foreground time")?,
                starts: r.opt_int(4, "starts")?,
                anrs: r.opt_int(5, "ANRs")?,
                crashes: r.opt_int(6, "crashes")?,
            };
            uid_stats(c, uid).processes.push(p);
        }
        ("l", "wl") => {
            let w = wakelock(&r)?;
            uid_stats(c, uid).wakelocks.push(w);
        }
        _ => {
            *c.other_rows.entry(format!("{category},{kind}")).or_default() += 1;
            c.other_raw.push(RawRow { line: n, fields: f.to_vec() });
        }
    }
    Ok(())
}

fn uid_stats(c: &mut Checkin, uid: i64) -> &mut UidStats {
    c.uids.entry(uid).or_insert_with(|| UidStats { uid, ..UidStats::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows in the layouts of checkin version 35/36 (Android 12–15), written from
    /// `BatteryStats.dumpCheckinLocked`.
    const V36: &str = "9,0,i,vers,36,214,AP1A.240305.019.A1,AP2A.240805.005.S4
9,0,i,uid,10216,com.android.chrome
9,0,i,uid,10250,com.example.envoy
9,0,l,bt,0,3600000,1200000,3700000,1300000,1732816430344,3000000,900000,4500,4100000,4400000,0
9,0,l,gn,1000,2000,3000,4000,10,20,30,40,0,0
9,0,l,m,600000,0,0,120000,50000,40000,650000,0,3,0,0,0,0,5
9,0,l,dc,4,5,2,3,180,120,0,0,10,20
9,0,l,pws,4500.0,150.5,170.0,230.0
9,0,l,pwi,scrn,40.2,0,0,0
9,10250,l,pwi,uid,12.5,0,3.1,1.0
9,1010250,l,pwi,uid,0.5,0,0,0
9,10216,l,pwi,uid,30.0,0,5.0,2.0
9,10250,l,nt,100,200,5000,6000,1,2,50,60,0,0,0,0,0,0,0,0,0,0,0,0,0,0
9,10250,l,cpu,4000,1500,0
9,10250,l,wl,*job*/x,0,f,0,0,0,0,2000,p,4,0,800,2100,500,bp,1,0,500,500,0,w,0,0,0,0
9,10250,l,pr,\"com.example.envoy\",3000,1000,20000,1,0,0
9,10250,l,ctf,A,2,10,20,0,0
";

    #[test]
    fn rows_of_a_recent_version() {
        let c = parse(V36).unwrap();
        assert_eq!(c.checkin_version(), Some(36));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let d = c.discharge.as_ref().unwrap();
        assert_eq!((d.low_pct, d.high_pct, d.total_mah, d.screen_on_mah()), (4, 5, Some(180.0), Some(60.0)));
        assert_eq!(c.battery.as_ref().unwrap().estimated_capacity_mah, Some(4500.0));
        assert_eq!(c.power_summary.as_ref().unwrap().computed_mah, 150.5);
        assert_eq!(c.misc.as_ref().unwrap().partial_wakelock_ms, 120000);
        let app = c.app("com.example.envoy").unwrap();
        assert_eq!(app.uids, [10250, 1010250]);
        assert_eq!(app.estimated_mah, Some(13.0));
        assert_eq!((app.cpu_user_ms, app.cpu_system_ms, app.cpu_source), (Some(4000), Some(1500), Some("cpu")));
        let net = app.network.unwrap();
        assert_eq!((net.rx_bytes(), net.tx_bytes(), net.rx_packets(), net.tx_packets()), (5100, 6200, 51, 62));
        assert_eq!((app.wakelock_partial_ms, app.wakelock_partial_count), (2000, 4));
        let w = &c.uids[&10250].wakelocks[0];
        assert_eq!(w.partial.as_ref().unwrap().total_ms, Some(2100));
        assert_eq!(w.background_partial.as_ref().unwrap().time_ms, 500);
        assert_eq!(c.other_rows.get("l,ctf"), Some(&1));
        assert_eq!(c.apps()[0].name, "com.android.chrome");
    }

    #[test]
    fn old_layouts() {
        // Version 11 (Android 5.0): `m` still carries Wi-Fi and byte totals; `wl` timers
        // have no durations; per-app CPU comes from `pr` rows.
        let v11 = "9,0,i,vers,11,116,LRX21O,LRX21O
9,0,i,uid,10050,com.example
9,0,l,bt,0,100000,50000,110000,60000,1416000000000,80000,30000
9,0,l,m,20000,0,90000,90000,0,1,2,3,4,1500,7000,0,0,0,20000,0
9,0,l,dc,3,4,1,2
9,10050,l,wl,sync,0,f,0,1200,p,3,0,w,0
9,10050,l,pr,com.example,700,300,0,1,0,0
9,10050,l,pr,com.example:bg,100,50,0,1,0,0
";
        let c = parse(v11).unwrap();
        let m = c.misc.as_ref().unwrap();
        assert_eq!((m.screen_on_ms, m.full_wakelock_ms, m.partial_wakelock_ms), (20000, 1500, 7000));
        assert_eq!(c.discharge.as_ref().unwrap().total_mah, None);
        let app = c.app("com.example").unwrap();
        assert_eq!((app.cpu_ms(), app.cpu_source), (Some(1150), Some("pr")));
        assert_eq!(app.wakelock_partial_ms, 1200);
        assert_eq!(app.estimated_mah, None);
        assert!(c.app("com.other").is_none());
    }

    #[test]
    fn unknown_version_and_rows_are_tolerated() {
        let c = parse("9,0,i,vers,40,300,X,Y\n9,0,l,zz,1,2,3\n9,0,l,pws,1,2,3,4,5,6\n").unwrap();
        assert_eq!(c.other_rows.get("l,zz"), Some(&1));
        assert_eq!(c.other_raw[0].line, 2);
        assert_eq!(c.power_summary.as_ref().unwrap().max_drained_mah, 4.0);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("9,0,i,vers,36,214,A,B\nhello world\n").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        let e = parse("9,0,i,vers,36,214,A,B\n9,0,l,pwi,uid\n").unwrap_err();
        assert_eq!(e.line(), Some(2));
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = parse("9,0,i,vers,36\n9,0,l,dc,1,2,x,4\n").unwrap_err();
        assert!(e.to_string().contains("screen-on discharge"), "{e}");
        let e = parse("9,10,l,wl,name,0,f\n").unwrap_err();
        assert_eq!(e.line(), Some(1), "{e}");
        assert_eq!(parse("9,hsp,1,1000,\"unterminated\n").unwrap_err().line(), Some(1));
        assert_eq!(parse("\n\n").unwrap_err().line(), Some(1));
    }
}
