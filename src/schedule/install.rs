//! What `lab schedule install` prints: systemd timer + service, a crontab line, a
//! launchd plist. Each starts `lab schedule run-due`, which decides with croner what is
//! due; the triggers only have to come at (or after) every slot.
//!
//! systemd skips a calendar time that falls in a spring-forward gap, where croner runs
//! the slot at the first instant after the gap: for a fixed-time pattern the timer gets
//! one more `OnCalendar=` at that instant (e.g. 03:00 for 02:30 in Europe/Berlin), which
//! finds nothing due on ordinary days. Patterns with `L`, `W` or `#` cannot be written as
//! calendar events: their timers fire every 15 minutes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate, NaiveTime, TimeZone};
use croner::{Cron, JobType};

use crate::config::Schedule;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstallTarget {
    Systemd,
    Cron,
    Launchd,
}

/// Absolute paths the units name.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The `lab` binary.
    pub binary: PathBuf,
    /// The lab file.
    pub lab: PathBuf,
    /// Where `run-due` runs (the lab file's folder).
    pub workdir: PathBuf,
}

impl Paths {
    fn argv(&self, s: Option<&Schedule>) -> Vec<String> {
        let mut a =
            vec![path_text(&self.binary), "--lab".into(), path_text(&self.lab), "schedule".into(), "run-due".into()];
        if let Some(s) = s {
            a.extend(["--schedule".into(), s.name.clone()]);
        }
        a
    }
    fn log(&self) -> String {
        path_text(&self.workdir.join("schedule.log"))
    }
}

pub(super) fn path_text(p: &Path) -> String {
    p.display().to_string()
}

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];

/// The pattern's fields as lists, `None` for a whole-range field.
struct Fields {
    minutes: Vec<u16>,
    hours: Vec<u16>,
    days: Option<Vec<u16>>,
    months: Option<Vec<u16>>,
    weekdays: Option<Vec<u16>>,
    /// Both day fields restricted, matched when either matches (cron's rule).
    either_day: bool,
}

impl Fields {
    /// `None` when the pattern uses what calendar events cannot say (L, W, #).
    fn of(cron: &Cron) -> Option<Fields> {
        let p = &cron.pattern;
        if p.days.has_modifiers() || p.days_of_week.has_modifiers() {
            return None;
        }
        let months = p.months.values();
        let days = (!p.is_dom_wildcard()).then(|| p.days.values());
        let weekdays = (!p.is_dow_wildcard()).then(|| p.days_of_week.values());
        Some(Fields {
            minutes: p.minutes.values(),
            hours: p.hours.values(),
            either_day: days.is_some() && weekdays.is_some() && !p.matches_dom_and_dow(),
            days,
            months: (months.len() < 12).then_some(months),
            weekdays,
        })
    }

    /// Whether the pattern's date fields match `d`.
    fn date_matches(&self, d: NaiveDate) -> bool {
        let month = self.months.as_ref().is_none_or(|m| m.contains(&(d.month() as u16)));
        let dom = self.days.as_ref().map(|v| v.contains(&(d.day() as u16)));
        let dow = self.weekdays.as_ref().map(|v| v.contains(&(d.weekday().num_days_from_sunday() as u16)));
        month
            && match (dom, dow) {
                (Some(a), Some(b)) if self.either_day => a || b,
                (Some(a), Some(b)) => a && b,
                (Some(a), None) | (None, Some(a)) => a,
                (None, None) => true,
            }
    }
}

fn list(v: &[u16], width: usize) -> String {
    v.iter().map(|x| format!("{x:0width$}")).collect::<Vec<_>>().join(",")
}

/// Wall times a fixed-time pattern's slot moves to when its time falls in a gap of the
/// zone (2020–2040, on days the pattern matches): croner runs it at the first valid
/// minute after.
fn gap_times(s: &Schedule, f: &Fields) -> BTreeSet<(u32, u32)> {
    let mut out = BTreeSet::new();
    let (&[h], &[m]) = (&f.hours[..], &f.minutes[..]) else { return out };
    if s.cron.determine_job_type() != JobType::FixedTime {
        return out;
    }
    let Some(time) = NaiveTime::from_hms_opt(u32::from(h), u32::from(m), 0) else { return out };
    let mut d = NaiveDate::from_ymd_opt(2020, 1, 1).unwrap_or_default();
    while d.year() < 2041 {
        if f.date_matches(d) && s.timezone.from_local_datetime(&d.and_time(time)).earliest().is_none() {
            let mut t = d.and_time(time);
            while s.timezone.from_local_datetime(&t).earliest().is_none() {
                t += chrono::Duration::minutes(1);
            }
            out.insert((t.time().hour_minute().0, t.time().hour_minute().1));
        }
        d = d.succ_opt().unwrap_or(d);
    }
    out
}

trait HourMinute {
    fn hour_minute(&self) -> (u32, u32);
}
impl HourMinute for NaiveTime {
    fn hour_minute(&self) -> (u32, u32) {
        use chrono::Timelike;
        (self.hour(), self.minute())
    }
}

/// `OnCalendar=` values for the pattern, in its zone.
fn on_calendar(s: &Schedule) -> Vec<String> {
    let Some(f) = Fields::of(&s.cron) else { return vec!["*:0/15".into()] };
    let zone = s.timezone.name();
    let month = f.months.as_ref().map_or("*".into(), |m| list(m, 2));
    let day = |days: Option<&Vec<u16>>| days.map_or("*".into(), |d| list(d, 2));
    let weekday =
        |w: Option<&Vec<u16>>| w.map(|w| w.iter().map(|d| DAYS[*d as usize % 7]).collect::<Vec<_>>().join(",") + " ");
    // Weekday and date combine with AND in systemd; cron's OR needs one line for each.
    let dates: Vec<(String, String)> = if f.either_day {
        vec![(weekday(f.weekdays.as_ref()).unwrap_or_default(), "*".into()), (String::new(), day(f.days.as_ref()))]
    } else {
        vec![(weekday(f.weekdays.as_ref()).unwrap_or_default(), day(f.days.as_ref()))]
    };
    let time = |h: &str, m: &str| format!("{h}:{m}:00");
    let hours = if f.hours.len() == 24 { "*".into() } else { list(&f.hours, 2) };
    let minutes = if f.minutes.len() == 60 { "*".into() } else { list(&f.minutes, 2) };
    let mut times = vec![time(&hours, &minutes)];
    for (h, m) in gap_times(s, &f) {
        times.push(time(&format!("{h:02}"), &format!("{m:02}")));
    }
    let mut out = Vec::new();
    for t in &times {
        for (w, d) in &dates {
            out.push(format!("{w}*-{month}-{d} {t} {zone}"));
        }
    }
    out
}

/// systemd's quoting of one ExecStart argument (`%` is a specifier).
pub(super) fn systemd_arg(a: &str) -> String {
    let a = a.replace('%', "%%");
    if a.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", a.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        a
    }
}

/// The timer and its service for one schedule: (file name, text) pairs.
pub fn systemd_units(s: &Schedule, p: &Paths) -> Vec<(String, String)> {
    let unit = format!("lab-{}", s.name);
    let mut timer = format!(
        "[Unit]\nDescription=lab schedule {name} (cron \"{cron}\", {zone})\n\n[Timer]\n",
        name = s.name,
        cron = s.cron.as_str(),
        zone = s.timezone.name()
    );
    for l in on_calendar(s) {
        timer.push_str(&format!("OnCalendar={l}\n"));
    }
    timer.push_str(&format!(
        "# Extra OnCalendar lines, if any, are the first minute after a spring-forward gap the slot falls in:\n\
         # croner runs the slot then, systemd would skip the day.\n\
         AccuracySec=1s\nPersistent=true\nUnit={unit}.service\n\n[Install]\nWantedBy=timers.target\n"
    ));
    let exec: Vec<String> = p.argv(Some(s)).iter().map(|a| systemd_arg(a)).collect();
    let service = format!(
        "[Unit]\nDescription=lab schedule {name}: run what is due\nWants=network-online.target\n\
         After=network-online.target\n\n[Service]\nType=oneshot\nWorkingDirectory={wd}\nExecStart={exec}\n\
         # Exit 5: a regression was confirmed and alerted; the run itself went well.\n\
         SuccessExitStatus=5\n",
        name = s.name,
        wd = systemd_arg(&path_text(&p.workdir)),
        exec = exec.join(" ")
    );
    vec![(format!("{unit}.timer"), timer), (format!("{unit}.service"), service)]
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c)) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

/// A user crontab line. It fires every 15 minutes whatever the pattern: cron runs in the
/// host's one zone (Debian's cron has no CRON_TZ), and `run-due` decides in the
/// schedule's. A slot runs at most 15 minutes late.
pub fn crontab(s: Option<&Schedule>, p: &Paths) -> String {
    let cmd: Vec<String> = p.argv(s).iter().map(|a| shell_quote(a)).collect();
    // An unescaped `%` in a crontab command is a newline.
    let line = format!(
        "*/15 * * * * cd {} && {} >> {} 2>&1",
        shell_quote(&path_text(&p.workdir)),
        cmd.join(" "),
        shell_quote(&p.log())
    )
    .replace('%', "\\%");
    let what = s.map_or("every schedule of the lab".to_string(), |s| format!("schedule {}", s.name));
    format!("# lab: {what}; `crontab -e` and add:\n{line}\n")
}

/// A launchd agent for one schedule. launchd has no zone key: `StartCalendarInterval`
/// is in the Mac's own zone, which must be the schedule's (else edit the times).
pub fn launchd_plist(s: &Schedule, p: &Paths) -> String {
    use plist::{Dictionary, Value};
    let mut d = Dictionary::new();
    d.insert("Label".into(), Value::String(format!("dev.lab.schedule.{}", s.name)));
    d.insert("ProgramArguments".into(), Value::Array(p.argv(Some(s)).into_iter().map(Value::String).collect()));
    d.insert("WorkingDirectory".into(), Value::String(path_text(&p.workdir)));
    match calendar_intervals(s) {
        Some(intervals) => {
            d.insert(
                "StartCalendarInterval".into(),
                Value::Array(intervals.into_iter().map(Value::Dictionary).collect()),
            );
        }
        None => {
            d.insert("StartInterval".into(), Value::Integer(900.into()));
        }
    }
    d.insert("StandardOutPath".into(), Value::String(p.log()));
    d.insert("StandardErrorPath".into(), Value::String(p.log()));
    let mut out = Vec::new();
    // Writing a dictionary of strings and integers into memory cannot fail.
    let _ = Value::Dictionary(d).to_writer_xml(&mut out);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push('\n');
    text
}

/// The most calendar entries written out before falling back to a 15-minute interval.
const MAX_INTERVALS: usize = 200;

fn calendar_intervals(s: &Schedule) -> Option<Vec<plist::Dictionary>> {
    use plist::{Dictionary, Value};
    let f = Fields::of(&s.cron)?;
    let mut times: Vec<(Option<u16>, Option<u16>)> = Vec::new();
    let hours: Vec<Option<u16>> =
        if f.hours.len() == 24 { vec![None] } else { f.hours.iter().map(|h| Some(*h)).collect() };
    let minutes: Vec<Option<u16>> =
        if f.minutes.len() == 60 { vec![None] } else { f.minutes.iter().map(|m| Some(*m)).collect() };
    for h in &hours {
        for m in &minutes {
            times.push((*h, *m));
        }
    }
    for (h, m) in gap_times(s, &f) {
        times.push((Some(h as u16), Some(m as u16)));
    }
    // (key, value) day constraints; one entry each, OR-ed as launchd ORs its entries.
    let mut days: Vec<Option<(&str, u16)>> = Vec::new();
    match (&f.days, &f.weekdays) {
        (None, None) => days.push(None),
        (Some(d), None) => days.extend(d.iter().map(|x| Some(("Day", *x)))),
        (None, Some(w)) => days.extend(w.iter().map(|x| Some(("Weekday", *x)))),
        (Some(d), Some(w)) if f.either_day => {
            days.extend(w.iter().map(|x| Some(("Weekday", *x))));
            days.extend(d.iter().map(|x| Some(("Day", *x))));
        }
        // Both at once: launchd has no AND of two day keys in one entry list; fall back.
        (Some(_), Some(_)) => return None,
    }
    let months: Vec<Option<u16>> = f.months.as_ref().map_or(vec![None], |m| m.iter().map(|x| Some(*x)).collect());
    let mut out = Vec::new();
    for month in &months {
        for day in &days {
            for (h, m) in &times {
                let mut e = Dictionary::new();
                let mut put = |k: &str, v: Option<u16>| {
                    if let Some(v) = v {
                        e.insert(k.into(), Value::Integer(i64::from(v).into()));
                    }
                };
                put("Month", *month);
                if let Some((k, v)) = day {
                    put(k, Some(*v));
                }
                put("Hour", *h);
                put("Minute", *m);
                out.push(e);
                if out.len() > MAX_INTERVALS {
                    return None;
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BaselinePolicy, ConfirmSettings, NotifySettings, parse_cron};

    fn schedule(cron: &str, zone: chrono_tz::Tz) -> Schedule {
        Schedule {
            name: "weekly".into(),
            cron: parse_cron(cron).unwrap(),
            timezone: zone,
            runbook: "runbooks/quickstart.toml".into(),
            baseline: BaselinePolicy::default(),
            confirm: ConfirmSettings::default(),
            notify: NotifySettings::default(),
            seed: Default::default(),
            changes: Default::default(),
            priority: 0,
            max_wait: None,
        }
    }

    #[test]
    fn a_berlin_sunday_0230_timer_has_the_line_after_the_gap() {
        let s = schedule("30 2 * * 0", chrono_tz::Europe::Berlin);
        assert_eq!(on_calendar(&s), ["Sun *-*-* 02:30:00 Europe/Berlin", "Sun *-*-* 03:00:00 Europe/Berlin"]);
        // Mondays never meet a Berlin transition (those are on Sundays): no extra line.
        let s = schedule("30 2 * * 1", chrono_tz::Europe::Berlin);
        assert_eq!(on_calendar(&s), ["Mon *-*-* 02:30:00 Europe/Berlin"]);
        // Not in a gap at all.
        let s = schedule("0 9 * * 1-5", chrono_tz::UTC);
        assert_eq!(on_calendar(&s), ["Mon,Tue,Wed,Thu,Fri *-*-* 09:00:00 UTC"]);
    }

    #[test]
    fn day_of_month_or_weekday_is_two_lines_and_modifiers_a_dense_timer() {
        let s = schedule("0 6 1,15 * 1", chrono_tz::UTC);
        assert_eq!(on_calendar(&s), ["Mon *-*-* 06:00:00 UTC", "*-*-01,15 06:00:00 UTC"]);
        let s = schedule("0 6 L * *", chrono_tz::UTC);
        assert_eq!(on_calendar(&s), ["*:0/15"]);
        let s = schedule("*/20 * * 1,7 *", chrono_tz::UTC);
        assert_eq!(on_calendar(&s), ["*-01,07-* *:00,20,40:00 UTC"]);
    }

    #[test]
    fn launchd_entries_follow_the_pattern_and_the_gap() {
        let s = schedule("30 2 * * 0", chrono_tz::Europe::Berlin);
        let e = calendar_intervals(&s).unwrap();
        let got: Vec<Vec<(String, i64)>> =
            e.iter().map(|d| d.iter().map(|(k, v)| (k.clone(), v.as_signed_integer().unwrap())).collect()).collect();
        let want = |h, m| vec![("Weekday".to_string(), 0), ("Hour".into(), h), ("Minute".into(), m)];
        assert_eq!(got, [want(2, 30), want(3, 0)]);
    }

    #[test]
    fn quoting() {
        assert_eq!(systemd_arg("/opt/my lab/lab"), "\"/opt/my lab/lab\"");
        assert_eq!(systemd_arg("50%"), "50%%");
        assert_eq!(shell_quote("/opt/my lab"), "'/opt/my lab'");
        assert_eq!(shell_quote("/usr/bin/lab"), "/usr/bin/lab");
    }
}
