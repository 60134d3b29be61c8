//! Which slots of a schedule are due: croner's occurrences after a checkpoint, up to now.
//!
//! Slots are enumerated by stepping `iter_after` from the checkpoint (the schedule's last
//! slot, or its first sight), never by asking whether "now" matches: croner moves a
//! fixed-time slot that falls in a spring-forward gap to the first instant after it, and
//! that instant is only found by walking through the gap (an inclusive search from the
//! shifted instant itself skips to the next week). A slot is keyed by the UTC instant
//! croner returned.

use chrono::{DateTime, SecondsFormat, Utc};

use super::ScheduleError;
use crate::config::Schedule;

/// How far before its first sight a schedule's slots count: the trigger that started
/// the first `run-due` (a timer at the due time, cron every 15 minutes) may come a little
/// after the slot it was meant for.
pub const FIRST_SIGHT_LOOKBACK: chrono::Duration = chrono::Duration::minutes(15);

/// The slots due at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The latest slot due: the one to run.
    pub run: Option<DateTime<Utc>>,
    /// Earlier slots due too, oldest first: recorded as skipped (only the latest runs).
    pub skipped: Vec<DateTime<Utc>>,
    /// The first slot after now.
    pub next: Option<DateTime<Utc>>,
}

/// Where counting starts: just after the last slot, else a little before first sight.
pub fn checkpoint(last_slot: Option<DateTime<Utc>>, first_seen: DateTime<Utc>) -> DateTime<Utc> {
    last_slot.unwrap_or(first_seen - FIRST_SIGHT_LOOKBACK)
}

/// The slots after `checkpoint` (exclusive) that are due at `now` (inclusive).
pub fn due_slots(s: &Schedule, checkpoint: DateTime<Utc>, now: DateTime<Utc>) -> Result<Due, ScheduleError> {
    let mut due = Vec::new();
    let mut next = None;
    for t in s.cron.iter_after(checkpoint.with_timezone(&s.timezone)) {
        let t = t.with_timezone(&Utc);
        if t > now {
            next = Some(t);
            break;
        }
        due.push(t);
    }
    if next.is_none() && due.is_empty() {
        return Err(ScheduleError::Cron { schedule: s.name.clone(), message: "never falls due".into() });
    }
    let run = due.pop();
    Ok(Due { run, skipped: due, next })
}

/// The first slot after `checkpoint` that is later than `now` (walked from the
/// checkpoint, for the gap rule above).
pub fn next_after(s: &Schedule, checkpoint: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    s.cron.iter_after(checkpoint.with_timezone(&s.timezone)).map(|t| t.with_timezone(&Utc)).find(|t| *t > now)
}

/// `2026-03-29T01:00:00Z`: how slot times are stored (text order is time order).
pub fn utc_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Reads a stored `utc_text`.
pub fn parse_utc(s: &str) -> Result<DateTime<Utc>, ScheduleError> {
    DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&Utc)).map_err(|_| ScheduleError::Time(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BaselinePolicy, ConfirmSettings, NotifySettings, parse_cron};

    fn berlin_sunday_0230() -> Schedule {
        Schedule {
            name: "weekly".into(),
            cron: parse_cron("30 2 * * 0").unwrap(),
            timezone: chrono_tz::Europe::Berlin,
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

    fn t(s: &str) -> DateTime<Utc> {
        parse_utc(s).unwrap()
    }

    /// Every slot between two instants, each found from the previous one as a runner
    /// would (checkpoint = the last slot).
    fn slots_between(s: &Schedule, from: &str, to: &str) -> Vec<String> {
        let (mut cp, end) = (t(from), t(to));
        let mut out = Vec::new();
        while let Some(n) = next_after(s, cp, cp)
            && n <= end
        {
            let due = due_slots(s, cp, n).unwrap();
            assert!(due.skipped.is_empty());
            out.push(utc_text(due.run.unwrap()));
            cp = n;
        }
        out
    }

    #[test]
    fn spring_forward_sunday_has_exactly_one_slot_after_the_gap() {
        let s = berlin_sunday_0230();
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        let slots = slots_between(&s, "2026-03-28T12:00:00Z", "2026-03-30T00:00:00Z");
        assert_eq!(slots, ["2026-03-29T01:00:00Z"]); // 03:00 CEST
        let local = t(&slots[0]).with_timezone(&chrono_tz::Europe::Berlin);
        assert_eq!(local.format("%H:%M %Z").to_string(), "03:00 CEST");
        // And a runner that slept through the week finds the same single slot.
        let due = due_slots(&s, t("2026-03-22T01:30:00Z"), t("2026-03-29T12:00:00Z")).unwrap();
        assert_eq!((due.run, due.skipped.len()), (Some(t("2026-03-29T01:00:00Z")), 0));
    }

    #[test]
    fn fall_back_sunday_has_exactly_one_slot_at_the_first_pass() {
        let s = berlin_sunday_0230();
        // 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        let slots = slots_between(&s, "2026-10-24T12:00:00Z", "2026-10-26T00:00:00Z");
        assert_eq!(slots, ["2026-10-25T00:30:00Z"]); // 02:30 CEST, not 01:30Z (02:30 CET)
        let due = due_slots(&s, t("2026-10-25T00:30:00Z"), t("2026-10-25T02:00:00Z")).unwrap();
        assert_eq!(due.run, None, "the second 02:30 is not a slot");
        assert_eq!(due.next, Some(t("2026-11-01T01:30:00Z")));
    }

    #[test]
    fn a_year_of_sundays_is_one_slot_a_week() {
        let s = berlin_sunday_0230();
        let slots = slots_between(&s, "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z");
        assert_eq!(slots.len(), 52);
        for w in slots.windows(2) {
            let gap = t(&w[1]) - t(&w[0]);
            // A week, give or take the hour the clocks moved.
            assert!((gap - chrono::Duration::weeks(1)).num_minutes().abs() <= 60, "{w:?}");
        }
    }

    #[test]
    fn missed_slots_run_the_latest_once_and_name_the_others() {
        let s = berlin_sunday_0230();
        // Last slot 1 March; the machine was off until Wednesday 25 March.
        let due = due_slots(&s, t("2026-03-01T01:30:00Z"), t("2026-03-25T09:00:00Z")).unwrap();
        assert_eq!(due.run, Some(t("2026-03-22T01:30:00Z")));
        let skipped: Vec<String> = due.skipped.iter().map(|d| utc_text(*d)).collect();
        assert_eq!(skipped, ["2026-03-08T01:30:00Z", "2026-03-15T01:30:00Z"]);
        assert_eq!(due.next, Some(t("2026-03-29T01:00:00Z")));
    }

    #[test]
    fn first_sight_counts_a_slot_just_before_it_and_none_earlier() {
        let s = berlin_sunday_0230();
        // Seen first 5 minutes after a slot (a timer firing late): that slot counts.
        let cp = checkpoint(None, t("2026-03-22T01:35:00Z"));
        let due = due_slots(&s, cp, t("2026-03-22T01:35:00Z")).unwrap();
        assert_eq!(due.run, Some(t("2026-03-22T01:30:00Z")));
        // Seen first a day later: nothing before first sight is due.
        let cp = checkpoint(None, t("2026-03-23T01:35:00Z"));
        let due = due_slots(&s, cp, t("2026-03-23T01:35:00Z")).unwrap();
        assert_eq!((due.run, due.next), (None, Some(t("2026-03-29T01:00:00Z"))));
    }
}
