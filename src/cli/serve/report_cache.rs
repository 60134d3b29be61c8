//! Campaign report pages kept once drawn, while their campaign is not running: a finished
//! campaign's report does not change with the rest of the lab, yet every change in the
//! store (another campaign's trial) made the watcher draw every watched page again, and a
//! big campaign's report takes seconds. Each page is kept with the store's report stamp
//! of its campaign (its status, end, note, trials and attempts: `Store::report_stamp`), so
//! whatever changes what the report shows draws it again. Running campaigns are drawn
//! each time, as before.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::routes::{Failure, load, report_html, store_failure};
use crate::store::{CampaignStatus, Store};

/// How many pages are kept: a page is tens of kilobytes to a few megabytes (a report's
/// plots), and the pages watched at once are few.
const KEPT: usize = 16;

/// Report pages by campaign, with the stamp each was drawn at.
#[derive(Default)]
pub struct ReportCache {
    /// (campaign, stamp, the report's HTML document), the most recently used last.
    pages: Mutex<Vec<(String, String, std::sync::Arc<str>)>>,
    /// Reports drawn (kept or not): what the tests count.
    drawn: AtomicU64,
}

impl ReportCache {
    /// Campaign `id`'s report page as `lab report --format html` draws it: the kept one
    /// while its campaign's stamp is unchanged and it is not running, else drawn now.
    pub fn report(&self, store: &Store, id: &str) -> Result<std::sync::Arc<str>, Failure> {
        let stamp = store.report_stamp(id).map_err(|e| store_failure(e, id))?;
        let mut pages = self.lock();
        if let Some(at) = pages.iter().position(|(c, s, _)| c == id && *s == stamp) {
            let kept = pages.remove(at);
            let html = std::sync::Arc::clone(&kept.2);
            pages.push(kept);
            return Ok(html);
        }
        drop(pages);
        let data = load(store, id)?;
        let html: std::sync::Arc<str> = report_html(&data).into();
        self.drawn.fetch_add(1, Ordering::Relaxed);
        let mut pages = self.lock();
        pages.retain(|(c, _, _)| c != id);
        if data.campaign.status != CampaignStatus::Running {
            if pages.len() >= KEPT {
                pages.remove(0);
            }
            pages.push((id.to_string(), stamp, std::sync::Arc::clone(&html)));
        }
        Ok(html)
    }

    /// Reports drawn so far.
    #[cfg(test)]
    pub fn drawn(&self) -> u64 {
        self.drawn.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, String, std::sync::Arc<str>)>> {
        self.pages.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixture;

    /// A store with the fixture campaign as `id`, with its status.
    fn stored(store: &Store, id: &str, status: CampaignStatus) {
        let data = fixture::records(id);
        crate::store::fill_for_tests(store, &data.campaign, &data.trials, &data.attempts, data.plan.max_attempts);
        if status != CampaignStatus::Running {
            store.finish_campaign(id, status, "2025-03-01T17:40:00Z", None, None).unwrap();
        }
    }

    #[test]
    fn a_finished_campaigns_report_is_drawn_once_until_what_it_shows_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        stored(&store, "done-1", CampaignStatus::Done);
        stored(&store, "run-1", CampaignStatus::Running);
        let cache = ReportCache::default();
        let first = cache.report(&store, "done-1").unwrap();
        assert!(first.contains("done-1"), "the campaign's report");
        cache.report(&store, "run-1").unwrap();
        assert_eq!(cache.drawn(), 2);
        // The store moves (the running campaign's row, as a trial landing would): the
        // finished campaign's page is the one kept, the running one's is drawn again.
        for n in 0..3 {
            store.set_running("run-1", 4000 + n).unwrap();
            assert_eq!(cache.report(&store, "done-1").unwrap(), first);
            cache.report(&store, "run-1").unwrap();
        }
        assert_eq!(cache.drawn(), 2 + 3, "only the running campaign was drawn again");
        // What the finished report shows changes (a note at its end): drawn again, once.
        store.finish_campaign("done-1", CampaignStatus::Done, "2025-03-01T17:41:00Z", Some("checked"), None).unwrap();
        let noted = cache.report(&store, "done-1").unwrap();
        assert!(noted.contains("checked") && !first.contains("checked"), "the new stamp draws the new report");
        cache.report(&store, "done-1").unwrap();
        assert_eq!(cache.drawn(), 6);
        assert!(cache.report(&store, "nope").is_err(), "an unknown campaign is an error, not a page");
    }
}
