//! `[[schedule]]` entries of lab.toml: name, cron, timezone, runbook, baseline,
//! `[schedule.confirm]` and `[schedule.notify]`.

use std::path::Path;

use chrono::TimeZone;

use crate::config::schedule::model::{
    BaselinePolicy, ConfirmSettings, NotifySettings, Schedule, SeedPolicy, parse_cron,
};
use crate::config::syntax::files::absolute;
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::suggest::closest;
use crate::config::syntax::table::{Field, Table};
use crate::stats::ChangePointOptions;

const SCHEDULE_KEYS: &[&str] = &[
    "name", "cron", "timezone", "runbook", "baseline", "confirm", "notify", "seed", "changes", "priority", "max_wait",
];
const CHANGES_KEYS: &[&str] = &["window_len", "max_pvalue", "min_magnitude"];
const CONFIRM_KEYS: &[&str] = &["enabled", "min_trials_per_arm", "max_trials_per_arm"];
const NOTIFY_KEYS: &[&str] = &["webhook", "command"];
const BASELINES: &[&str] = &["last-change-point", "previous"];

const CRON_FIX: &str = "write five fields, minute hour day-of-month month day-of-week, e.g. \
`cron = \"30 2 * * 0\"` (Sundays at 02:30; 1 = Monday, 0 or 7 = Sunday)";

/// Every `[[schedule]]`; entries with a problem are reported and left out.
pub(crate) fn read_schedules(root: &Table, p: &mut Problems, base: &Path) -> Vec<Schedule> {
    let tables = root.get("schedule").and_then(|f| f.tables(p)).unwrap_or_default();
    let mut names = NameSet::new("schedule");
    let mut out = Vec::new();
    for t in &tables {
        let before = p.len();
        t.check_keys(p, SCHEDULE_KEYS);
        let name = t.required(p, "name", "name = \"weekly-cpu\"").and_then(|f| {
            let n = f.text(p)?;
            check_name(p, f.span(), &f.path, "schedule", &n).then(|| {
                names.add(p, &n, f.span(), &f.path);
                n
            })
        });
        let cron = t.required(p, "cron", "cron = \"30 2 * * 0\"").and_then(|f| read_cron(&f, p));
        let timezone = t.required(p, "timezone", "timezone = \"Europe/Berlin\"").and_then(|f| read_zone(&f, p));
        let runbook = t.required(p, "runbook", "runbook = \"runbooks/quickstart.toml\"").and_then(|f| {
            let written = f.text(p)?;
            let path = absolute(&base.join(&written));
            if !path.is_file() {
                f.problem(
                    p,
                    format!("runbook {written} does not exist"),
                    "give the path of a runbook, relative to the lab file's folder",
                );
                return None;
            }
            Some(path)
        });
        let baseline = t.get("baseline").and_then(|f| read_baseline(&f, p)).unwrap_or_default();
        let confirm = read_confirm(t, p);
        let notify = read_notify(t, p);
        let seed = match t.get("seed").and_then(|f| f.one_of(p, &["per-slot", "runbook"])) {
            Some("runbook") => SeedPolicy::Runbook,
            _ => SeedPolicy::PerSlot,
        };
        let changes = read_changes(t, p);
        let priority = t.get("priority").and_then(|f| f.integer_in(p, -1000, 1000)).unwrap_or(0) as i32;
        let max_wait = t.get("max_wait").and_then(|f| f.duration(p));
        if let (Some(name), Some(cron), Some(timezone), Some(runbook), true) =
            (name, cron, timezone, runbook, p.len() == before)
        {
            out.push(Schedule {
                name,
                cron,
                timezone,
                runbook,
                baseline,
                confirm,
                notify,
                seed,
                changes,
                priority,
                max_wait,
            });
        }
    }
    out
}

fn read_cron(f: &Field, p: &mut Problems) -> Option<croner::Cron> {
    let text = f.text(p)?;
    let cron = match parse_cron(&text) {
        Ok(c) => c,
        Err(e) => {
            let why = e.to_string();
            f.problem(p, format!("`{text}` is not a cron pattern: {}", why.trim_end_matches('.')), CRON_FIX);
            return None;
        }
    };
    // A pattern that never matches (30 February) would leave the schedule silent forever.
    let from = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).single()?;
    if cron.find_next_occurrence(&from, false).is_err() {
        f.problem(p, format!("`{text}` never falls due"), "check the day of month against the month");
        return None;
    }
    Some(cron)
}

fn read_zone(f: &Field, p: &mut Problems) -> Option<chrono_tz::Tz> {
    let text = f.text(p)?;
    match text.parse::<chrono_tz::Tz>() {
        Ok(z) => Some(z),
        Err(_) => {
            let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()).collect();
            let fix = match closest(&text, &names) {
                Some(c) => format!("did you mean \"{c}\"?"),
                None => "write an IANA time zone name, e.g. `timezone = \"Europe/Berlin\"` or `\"UTC\"`".into(),
            };
            f.problem(p, format!("unknown time zone \"{text}\""), fix);
            None
        }
    }
}

fn read_baseline(f: &Field, p: &mut Problems) -> Option<BaselinePolicy> {
    let fix = "write `baseline = \"last-change-point\"` (the default), `\"previous\"`, or \
`{ campaign = \"CAMPAIGN-ID\" }` (an id from `lab status`)";
    if f.item.is_str() {
        return match f.one_of(p, BASELINES)? {
            "previous" => Some(BaselinePolicy::Previous),
            _ => Some(BaselinePolicy::LastChangePoint),
        };
    }
    if f.item.as_table_like().is_none() {
        f.wrong_type(p, "a string or `{ campaign = \"ID\" }`", fix);
        return None;
    }
    let t = f.table(p)?;
    t.check_keys(p, &["campaign"]);
    let id = t.required(p, "campaign", "campaign = \"CAMPAIGN-ID\"")?.text(p)?;
    Some(BaselinePolicy::Campaign(id))
}

fn read_confirm(t: &Table, p: &mut Problems) -> ConfirmSettings {
    let mut c = ConfirmSettings::default();
    let Some(ct) = t.get("confirm").and_then(|f| f.table(p)) else {
        return c;
    };
    ct.check_keys(p, CONFIRM_KEYS);
    if let Some(b) = ct.get("enabled").and_then(|f| f.bool(p)) {
        c.enabled = b;
    }
    // Two trials per arm are the fewest a variance can be estimated from.
    if let Some(n) = ct.get("min_trials_per_arm").and_then(|f| f.u32_at_least(p, 2)) {
        c.min_trials_per_arm = n;
    }
    if let Some(f) = ct.get("max_trials_per_arm")
        && let Some(n) = f.u32_at_least(p, 2)
    {
        if n < c.min_trials_per_arm {
            f.problem(
                p,
                format!("must be at least min_trials_per_arm ({}), got {n}", c.min_trials_per_arm),
                "raise max_trials_per_arm or lower min_trials_per_arm",
            );
        } else {
            c.max_trials_per_arm = n;
        }
    }
    if ct.get("max_trials_per_arm").is_none() {
        c.max_trials_per_arm = c.max_trials_per_arm.max(c.min_trials_per_arm);
    }
    c
}

/// `[schedule.changes]`: the change-point options, as `lab changes` takes them.
fn read_changes(t: &Table, p: &mut Problems) -> ChangePointOptions {
    let mut c = ChangePointOptions::default();
    let Some(ct) = t.get("changes").and_then(|f| f.table(p)) else {
        return c;
    };
    ct.check_keys(p, CHANGES_KEYS);
    // A window needs two points to have a split.
    if let Some(n) = ct.get("window_len").and_then(|f| f.u32_at_least(p, 2)) {
        c.window_len = n as usize;
    }
    if let Some(v) = ct.get("max_pvalue").and_then(|f| f.number_where(p, |v| v > 0.0 && v <= 1.0, "in (0, 1]")) {
        c.max_pvalue = v;
    }
    if let Some(v) = ct.get("min_magnitude").and_then(|f| f.number_where(p, |v| v >= 0.0, "≥ 0")) {
        c.min_magnitude = v;
    }
    c
}

fn read_notify(t: &Table, p: &mut Problems) -> NotifySettings {
    let mut n = NotifySettings::default();
    let Some(nt) = t.get("notify").and_then(|f| f.table(p)) else {
        return n;
    };
    nt.check_keys(p, NOTIFY_KEYS);
    if let Some(f) = nt.get("webhook")
        && let Some(url) = f.text(p)
    {
        if let Some(why) = webhook_problem(&url) {
            f.problem(
                p,
                format!("\"{url}\" {why}"),
                "write `webhook = \"http://HOST:PORT/PATH\"` (plain HTTP; put a relay in front of an https endpoint)",
            );
        } else {
            n.webhook = Some(url);
        }
    }
    if let Some(f) = nt.get("command") {
        let fix = "write the command as a list of arguments, e.g. `command = [\"/usr/local/bin/page\", \"--team\", \"perf\"]`";
        if let Some(s) = f.item.as_str() {
            f.problem(p, format!("`{s}` is a shell string; the command is run as argv, without a shell"), fix);
        } else if let Some(args) = f.strings(p) {
            match args.first() {
                None => f.problem(p, "must not be empty", fix),
                Some((a, span)) if a.trim().is_empty() => {
                    p.push(span.clone(), &format!("{}[0]", f.path), "the program must not be empty", fix);
                }
                Some(_) => n.command = Some(args.into_iter().map(|(a, _)| a).collect()),
            }
        }
    }
    n
}

/// Why a webhook URL cannot be posted to, if it cannot.
fn webhook_problem(url: &str) -> Option<&'static str> {
    if url.starts_with("https://") {
        return Some("is HTTPS; the lab posts plain HTTP");
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Some("is not an http:// URL");
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || rest.contains(char::is_whitespace) {
        return Some("has no host");
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{BaselinePolicy, parse_lab};

    const LAB: &str = "[lab]\nname = \"l\"\n";

    #[test]
    fn every_key_is_read() {
        let text = format!(
            "{LAB}[[schedule]]\nname = \"weekly-cpu\"\ncron = \"30 2 * * 0\"\ntimezone = \"Europe/Berlin\"\n\
             runbook = \"runbooks/quickstart.toml\"\nbaseline = {{ campaign = \"quickstart-1\" }}\n\
             seed = \"runbook\"\n[schedule.changes]\nwindow_len = 12\nmax_pvalue = 0.01\nmin_magnitude = 0.05\n\
             [schedule.confirm]\nenabled = false\nmin_trials_per_arm = 12\n\
             [schedule.notify]\nwebhook = \"http://127.0.0.1:9000/hook\"\ncommand = [\"/bin/echo\", \"x\"]\n\
             [[schedule]]\nname = \"daily\"\ncron = \"0 6 * * 1-5\"\ntimezone = \"UTC\"\nrunbook = \"runbooks/quickstart.toml\"\n\
             baseline = \"previous\"\n"
        );
        let lab = parse_lab(&text, Path::new("lab.toml")).unwrap();
        let w = lab.schedule("weekly-cpu").unwrap();
        assert_eq!((w.cron.as_str(), w.timezone.name()), ("30 2 * * 0", "Europe/Berlin"));
        assert!(w.runbook.is_absolute() && w.runbook.ends_with("runbooks/quickstart.toml"));
        assert_eq!(w.baseline, BaselinePolicy::Campaign("quickstart-1".into()));
        assert_eq!((w.confirm.enabled, w.confirm.min_trials_per_arm, w.confirm.max_trials_per_arm), (false, 12, 40));
        assert_eq!(w.notify.webhook.as_deref(), Some("http://127.0.0.1:9000/hook"));
        assert_eq!(w.notify.command, Some(vec!["/bin/echo".to_string(), "x".to_string()]));
        assert_eq!(w.seed, crate::config::SeedPolicy::Runbook);
        assert_eq!(
            w.changes,
            crate::stats::ChangePointOptions { window_len: 12, max_pvalue: 0.01, min_magnitude: 0.05 }
        );
        let d = lab.schedule("daily").unwrap();
        assert_eq!(
            (d.baseline.clone(), d.confirm.enabled, d.notify.command.clone()),
            (BaselinePolicy::Previous, true, None)
        );
        assert_eq!((d.seed, d.changes), (crate::config::SeedPolicy::PerSlot, Default::default()));
        // Defaults: the last change point; no schedule at all is fine.
        assert!(parse_lab(LAB, Path::new("lab.toml")).unwrap().schedules.is_empty());
    }

    #[test]
    fn weekdays_are_posix() {
        use chrono::TimeZone;
        let text = format!(
            "{LAB}[[schedule]]\nname = \"m\"\ncron = \"0 9 * * 1\"\ntimezone = \"UTC\"\nrunbook = \"runbooks/quickstart.toml\"\n\
             [[schedule]]\nname = \"s\"\ncron = \"0 9 * * 7\"\ntimezone = \"UTC\"\nrunbook = \"runbooks/quickstart.toml\"\n"
        );
        let lab = parse_lab(&text, Path::new("lab.toml")).unwrap();
        // 2026-03-28 is a Saturday.
        let from = chrono::Utc.with_ymd_and_hms(2026, 3, 28, 0, 0, 0).unwrap();
        let next = |n: &str| lab.schedule(n).unwrap().cron.find_next_occurrence(&from, false).unwrap().to_rfc3339();
        assert_eq!(next("m"), "2026-03-30T09:00:00+00:00"); // 1 = Monday
        assert_eq!(next("s"), "2026-03-29T09:00:00+00:00"); // 7 = Sunday
    }
}
