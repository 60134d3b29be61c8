//! `lab wait` (docs/agents.md): follows a campaign the agents run from its events in the
//! store, as `lab run` shows its own: the events are replayed from the first, then each
//! new burst as the agents append it. Sleeps on the store's events channel between
//! bursts. Stopping the follow (Ctrl-C) leaves the campaign running.

use tokio::sync::watch;

use super::event::{Event, EventSink};
use super::launch::LaunchError;
use super::trial::call;
use crate::store::{CampaignStatus, Channel, Store, StoreError, Wake};

/// How following a campaign ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followed {
    /// It ended: done, or interrupted (cancelled).
    Ended(CampaignStatus),
    /// It was cancelled while queued: it is gone.
    Removed,
    /// The follower stopped; the campaign goes on.
    Detached,
}

/// Events read per query.
const PAGE: u32 = 2000;

/// Follows campaign `id` until it ends or `stop` turns `true`, each stored event emitted to
/// `events` (a later part's `campaign_started` is left out: one campaign, one start).
pub async fn follow(
    store: Store,
    id: &str,
    events: EventSink,
    mut stop: watch::Receiver<bool>,
) -> Result<Followed, LaunchError> {
    let s = store.clone();
    let mut wakes = call(move || s.listen(Channel::Events)).await?;
    let mut seq = 0;
    let mut started = false;
    let mut finished = false;
    loop {
        // The status first, then the events: a campaign seen over has all its events
        // stored but its last one, which the finishing agent appends last.
        let (s, i) = (store.clone(), id.to_string());
        let status = match call(move || s.campaign_status(&i)).await {
            Ok(status) => status,
            Err(StoreError::NoCampaign(_)) => return Ok(Followed::Removed),
            Err(e) => return Err(e.into()),
        };
        loop {
            let (s, i) = (store.clone(), id.to_string());
            let page = call(move || s.events_after(&i, seq, PAGE)).await?;
            let n = page.len();
            for (k, text) in page {
                seq = k;
                let Ok(e) = serde_json::from_str::<Event>(&text) else { continue };
                match e {
                    Event::CampaignStarted { .. } if started => continue,
                    Event::CampaignStarted { .. } => started = true,
                    Event::CampaignFinished { .. } => finished = true,
                    _ => {}
                }
                events.emit(e);
            }
            if n < PAGE as usize {
                break;
            }
        }
        match status {
            CampaignStatus::Done if finished => return Ok(Followed::Ended(status)),
            CampaignStatus::Interrupted => return Ok(Followed::Ended(status)),
            _ => {}
        }
        if *stop.borrow() {
            return Ok(Followed::Detached);
        }
        loop {
            tokio::select! {
                w = wakes.next() => match w {
                    None => {
                        let s = store.clone();
                        wakes = call(move || s.listen(Channel::Events)).await?;
                        break;
                    }
                    // Another campaign's events: nothing here to read.
                    Some(Wake::Notified(about)) if !about.is_empty() && about != id => continue,
                    Some(_) => {
                        wakes.drain();
                        break;
                    }
                },
                // Not `wait_for`: its guard would make this future not Send (the schedule
                // follows a slot's campaign from a Send future).
                r = stop.changed() => if r.is_err() || *stop.borrow() {
                    return Ok(Followed::Detached);
                },
            }
        }
    }
}
