//! An agent's part of a queued campaign is made ready while its devices are still another
//! campaign's: its recorder, its endpoint, its manifest, each device's worker waiting in the
//! device's queue. The campaign starts (`running` in the store, its manifest written, its
//! `CampaignStarted` told) when the first of those devices is its own, and its other
//! devices begin as soon as they are free, without waiting for the part to get ready then
//! (docs/benchmarks.md, `agents`: a device's hand-off from one campaign to the next).

use std::sync::Mutex;

use tokio::sync::OnceCell;

use super::event::{Event, EventSink};
use super::trial::{RunError, blocking};
use crate::store::Store;

/// What the campaign does once, when it starts; each worker passes it before touching its device.
pub struct StartGate {
    store: Store,
    id: String,
    events: EventSink,
    /// `true`: started; `false`: cancelled before any of its devices was free.
    opened: OnceCell<bool>,
    /// Done when the gate opens, in this order: the manifest written, the events told.
    on_open: Mutex<OnOpen>,
}

#[derive(Default)]
struct OnOpen {
    write: Option<Box<dyn FnOnce() -> Result<(), RunError> + Send>>,
    events: Vec<Event>,
    /// Set, under this lock, once the events waiting here were told.
    told: bool,
}

impl StartGate {
    pub fn new(store: Store, id: String, events: EventSink) -> StartGate {
        StartGate { store, id, events, opened: OnceCell::new(), on_open: Mutex::default() }
    }

    fn on_open(&self) -> std::sync::MutexGuard<'_, OnOpen> {
        self.on_open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `write` runs when the gate opens (the campaign's manifest), before its events.
    pub fn write_on_open(&self, write: impl FnOnce() -> Result<(), RunError> + Send + 'static) {
        self.on_open().write = Some(Box::new(write));
    }

    /// `event` is told when the gate opens (at once, if it is open).
    pub fn tell_on_open(&self, event: Event) {
        let mut o = self.on_open();
        match o.told {
            true => self.events.emit(event),
            false => o.events.push(event),
        }
    }

    /// Whether the campaign started here.
    pub fn is_open(&self) -> bool {
        self.opened.get() == Some(&true)
    }

    /// Starts the campaign if it has not started (the first caller does; the others wait for
    /// it): `false` when it was cancelled meanwhile, and then nothing may run.
    pub async fn open(&self) -> Result<bool, RunError> {
        let opened = self
            .opened
            .get_or_try_init(|| async {
                let (store, id) = (self.store.clone(), self.id.clone());
                if !blocking(move || store.start_submitted(&id)).await? {
                    return Ok(false);
                }
                let write = self.on_open().write.take();
                if let Some(write) = write {
                    write()?;
                }
                let mut o = self.on_open();
                for e in std::mem::take(&mut o.events) {
                    self.events.emit(e);
                }
                o.told = true;
                Ok::<bool, RunError>(true)
            })
            .await?;
        Ok(*opened)
    }
}
