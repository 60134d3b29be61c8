//! Waiting behind a waiter of this process: a device's queue whose waiter just ahead is in
//! this process (an agent's campaigns queue for its own phones) is waited on here, until
//! that waiter leaves the queue, not on its lock in the server. On PostgreSQL a wait on a
//! lock needs a session of its own (a server process, a TLS handshake, SCRAM's 4 096
//! hash rounds on both sides): one for each waiter behind another, which in the agents
//! bench were about 390 sessions, an eighth of the server's CPU. The two die together,
//! so the server's lock would tell the one behind nothing the process does not know.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, LazyLock, Mutex, PoisonError};

use super::handover::Key;

/// A waiter's place in this process: `true` once it has left the queue.
#[derive(Default)]
pub(super) struct Place {
    left: Mutex<bool>,
    gone: Condvar,
    /// Those asleep in [`Place::wait`], for tests.
    sleeping: std::sync::atomic::AtomicUsize,
}

impl Place {
    /// Sleeps until the waiter has left the queue.
    pub(super) fn wait(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        self.sleeping.fetch_add(1, SeqCst);
        while !*left {
            left = self.gone.wait(left).unwrap_or_else(PoisonError::into_inner);
        }
        self.sleeping.fetch_sub(1, SeqCst);
    }
}

/// Waiters' places by their device (of one store) and ticket.
type Places = HashMap<(Key, i64), Arc<Place>>;

/// The waiters of this process still in a queue.
static HERE: LazyLock<Mutex<Places>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn here() -> std::sync::MutexGuard<'static, Places> {
    HERE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A waiter of this process joined the queue with `ticket`.
pub(super) fn joined(key: &Key, ticket: i64) {
    here().insert((key.clone(), ticket), Arc::default());
}

/// The waiter left the queue (it holds the device, or went): those behind it wake.
pub(super) fn left(key: &Key, ticket: i64) {
    if let Some(place) = here().remove(&(key.clone(), ticket)) {
        *place.left.lock().unwrap_or_else(PoisonError::into_inner) = true;
        place.gone.notify_all();
    }
}

/// The place of `ticket` if it is a waiter of this process still in the queue.
pub(super) fn of_this_process(key: &Key, ticket: i64) -> Option<Arc<Place>> {
    here().get(&(key.clone(), ticket)).cloned()
}

/// How many sleep behind the waiter `ticket` of this process.
#[cfg(test)]
pub(super) fn sleepers(key: &Key, ticket: i64) -> usize {
    of_this_process(key, ticket).map_or(0, |p| p.sleeping.load(std::sync::atomic::Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn one_behind_sleeps_until_the_waiter_ahead_leaves() {
        let key: Key = (Arc::from("store"), "pixel-1".to_string());
        joined(&key, 7);
        let place = of_this_process(&key, 7).expect("a waiter of this process");
        let (tx, rx) = std::sync::mpsc::channel();
        let behind = std::thread::spawn(move || {
            place.wait();
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "woke before the one ahead left");
        assert_eq!(sleepers(&key, 7), 1);
        left(&key, 7);
        rx.recv_timeout(Duration::from_secs(10)).expect("never woke");
        behind.join().unwrap();
        assert!(of_this_process(&key, 7).is_none(), "a waiter that left is still here");
        assert!(of_this_process(&(Arc::from("other store"), "pixel-1".into()), 7).is_none());
    }
}
