//! A device handed from one holder to the next inside this process, its lock never let go.
//!
//! While a lease of this process holds a device, a waiter of the same store in this process
//! whose turn comes next waits here, not on the server's (or the kernel's) lock: the two die
//! together, so that lock would tell it nothing the process does not know. When the holder is
//! done and the device's queue names one of these waiters first, one statement makes it the
//! holder (`LeaseSpace::hand_over`), and the lease, its lock still held, is given to it: no
//! unlock, no lock, no wake-up of another session. An agent's campaigns take turns on its
//! phones this way (docs/benchmarks.md, `agents`: a device's hand-off between campaigns).
//! Any other case lets the device go as before, and the waiters here go back to its lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard, PoisonError};

use super::lease::DeviceLease;

/// Gives a lease handed to a waiter straight to whoever awaits it (its task), not through
/// the waiting thread; `Err` gives the lease back when nobody takes it any more.
pub type Deliver = Box<dyn FnOnce(DeviceLease) -> Result<(), Box<DeviceLease>> + Send>;

/// A waiter's way to be given the device: set by the one that waits for it, taken by the
/// holder that hands it on.
#[derive(Clone, Default)]
pub(super) struct DeliverSlot(Arc<Mutex<Option<Deliver>>>);

impl DeliverSlot {
    pub(super) fn set(&self, deliver: Deliver) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(deliver);
    }

    fn take(&self) -> Option<Deliver> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl std::fmt::Debug for DeliverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DeliverSlot")
    }
}

/// A device of one store (by its location) in this process.
pub(super) type Key = (Arc<str>, String);

#[derive(Default)]
struct Local {
    /// A lease of this process holds the device.
    held: bool,
    /// The waiters waiting here, by ticket.
    waiting: BTreeMap<i64, Arc<Slot>>,
}

static LOCAL: LazyLock<Mutex<HashMap<Key, Local>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn local() -> MutexGuard<'static, HashMap<Key, Local>> {
    LOCAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a wait here ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The device is the waiter's: the lease (`None`: given to its [`Deliver`] already).
    Handed(Option<DeviceLease>),
    /// The holder let the device go: wait for its lock as anyone else does.
    Released,
    /// The waiter left the queue.
    Cancelled,
}

/// One waiter's place here.
pub(super) struct Slot {
    ended: Mutex<Option<Ended>>,
    woken: Condvar,
    deliver: DeliverSlot,
}

impl Slot {
    fn end(&self, how: Ended) {
        let mut e = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        if e.is_none() {
            *e = Some(how);
        }
        self.woken.notify_all();
    }

    /// Sleeps until the wait ends.
    pub(super) fn wait(&self) -> Ended {
        let mut e = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(how) = e.take() {
                return how;
            }
            e = self.woken.wait(e).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A lease of this process now holds the device.
pub(super) fn hold(key: &Key) {
    local().entry(key.clone()).or_default().held = true;
}

/// A place here for `ticket` if a lease of this process holds the device; `None`: wait for
/// its lock.
pub(super) fn wait_here(key: &Key, ticket: i64, deliver: &DeliverSlot) -> Option<Arc<Slot>> {
    let mut all = local();
    let entry = all.get_mut(key).filter(|l| l.held)?;
    let slot = Arc::new(Slot { ended: Mutex::new(None), woken: Condvar::new(), deliver: deliver.clone() });
    entry.waiting.insert(ticket, slot.clone());
    Some(slot)
}

/// The tickets waiting here for the device.
pub(super) fn waiting(key: &Key) -> Vec<i64> {
    local().get(key).map(|l| l.waiting.keys().copied().collect()).unwrap_or_default()
}

/// Gives `lease` to `ticket`'s waiter; back when it left meanwhile.
pub(super) fn give(key: &Key, ticket: i64, lease: DeviceLease) -> Result<(), Box<DeviceLease>> {
    let Some(slot) = local().get_mut(key).and_then(|l| l.waiting.remove(&ticket)) else { return Err(Box::new(lease)) };
    let deliver = slot.deliver.take();
    match deliver {
        None => {
            slot.end(Ended::Handed(Some(lease)));
            Ok(())
        }
        Some(deliver) => match deliver(lease) {
            Ok(()) => {
                slot.end(Ended::Handed(None));
                Ok(())
            }
            Err(lease) => {
                slot.end(Ended::Cancelled);
                Err(lease)
            }
        },
    }
}

/// The waiter of `ticket` leaves.
pub(super) fn cancel(key: &Key, ticket: i64) {
    let slot = {
        let mut all = local();
        let slot = all.get_mut(key).and_then(|l| l.waiting.remove(&ticket));
        tidy(&mut all, key);
        slot
    };
    if let Some(slot) = slot {
        slot.end(Ended::Cancelled);
    }
}

/// No lease of this process holds the device any more: the waiters here, to be told
/// ([`released`]) once its lock is free.
pub(super) fn let_go(key: &Key) -> Vec<Arc<Slot>> {
    let mut all = local();
    let slots = match all.get_mut(key) {
        Some(l) => {
            l.held = false;
            std::mem::take(&mut l.waiting).into_values().collect()
        }
        None => Vec::new(),
    };
    tidy(&mut all, key);
    slots
}

/// Tells the waiters [`let_go`] took that the device's lock is free.
pub(super) fn released(slots: Vec<Arc<Slot>>) {
    for s in slots {
        s.end(Ended::Released);
    }
}

fn tidy(all: &mut HashMap<Key, Local>, key: &Key) {
    if all.get(key).is_some_and(|l| !l.held && l.waiting.is_empty()) {
        all.remove(key);
    }
}
