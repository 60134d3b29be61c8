//! What the live pages are sent: each page's live part (the inside of its `<main
//! id="live">`), rendered on the watcher's thread from its own store connection.

use super::cancel::QueuedCampaign;
use super::pages;
use super::report_cache::ReportCache;
use super::routes::{campaign_id, lab_view};
use super::submitted::SubmittedCampaign;
use crate::cli::lab_view::StatusView;
use crate::config::Lab;
use crate::report;
use crate::store::Store;

/// The live parts of `pages`, rendered from `store` (the watcher's): what `page` events
/// carry. A path that is no live page is left out. The lab and campaigns pages share one
/// read of the status and of the queued and submitted campaigns.
/// A finished campaign's report is drawn once and kept in `reports` while unchanged.
pub fn live_parts(lab: &Lab, reports: &ReportCache, store: &Store, pages: &[String]) -> Vec<(String, String)> {
    let read = std::cell::OnceCell::new();
    let view = || read.get_or_init(|| lab_view(lab, store).ok()).as_ref();
    pages.iter().filter_map(|p| Some((p.clone(), live_part(lab, reports, store, p, &view)?))).collect()
}

fn live_part<'v>(
    lab: &Lab,
    reports: &ReportCache,
    store: &Store,
    path: &str,
    view: &impl Fn() -> Option<&'v (StatusView, Vec<QueuedCampaign>, Vec<SubmittedCampaign>)>,
) -> Option<String> {
    match path {
        "/" => view().map(|(v, queued, submitted)| pages::lab_main(v, queued, submitted)),
        "/campaigns" => view().map(|(v, queued, submitted)| pages::campaigns_main(v, queued, submitted)),
        "/steps" => Some(pages::steps_main(&store.pending_steps(None).ok()?)),
        "/history" => Some(pages::histories_main(&store.runbook_names().ok()?)),
        _ => {
            if let Some(id) = path.strip_prefix("/campaigns/") {
                let html = reports.report(store, campaign_id(id).ok()?).ok()?;
                return Some(pages::body_of(&html).to_string());
            }
            let name = percent_decoded(path.strip_prefix("/history/")?)?;
            let history = report::history_for(store, lab, &name, &report::HistoryFilter::default()).ok()?;
            let html = report::render_history_html_linked(&history, &history_link);
            Some(pages::body_of(&html).to_string())
        }
    }
}

pub(super) fn history_link(campaign: &str) -> Option<String> {
    campaign_id(campaign).is_ok().then(|| format!("/campaigns/{campaign}"))
}

/// A path segment with its `%XX` escapes decoded; `None` when not UTF-8 or malformed.
pub(super) fn percent_decoded(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_names_in_paths_are_decoded_and_bad_escapes_refused() {
        assert_eq!(percent_decoded("envoy%20poll%2F%C3%BC").as_deref(), Some("envoy poll/ü"));
        assert_eq!(percent_decoded("plain").as_deref(), Some("plain"));
        for bad in ["%ZZ", "%2", "%C3", "%+F"] {
            assert_eq!(percent_decoded(bad), None, "{bad}");
        }
        assert_eq!(history_link("c-1").as_deref(), Some("/campaigns/c-1"));
        assert_eq!(history_link("../x"), None);
    }
}
