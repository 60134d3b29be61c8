//! A device's queue: who waits for its lease, in order (higher priority first, then
//! first come, first served), each woken by the one ahead of it.
//!
//! A waiter holds an flock on a file of its own (`<device>.wait-<token>.lock`) from before
//! its row is written until its row is gone. The one behind it sleeps on that file: it
//! wakes when the one ahead got the device (and then sleeps on the device's own lock
//! until that one is done with it), left the queue, or died. The head of the queue sleeps
//! on the device's lock. Nobody polls, and a dead waiter frees its place the moment it
//! dies, as a dead holder frees the device.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, params};
use serde::Serialize;

use super::ProcessId;
use super::lease::{DeviceLease, LeaseHolder, LeaseRequest, now_rfc3339, who};
use super::process_id::start_from_column;
use super::sqlite::{Store, StoreError};

/// One waiter's row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waiter {
    pub ticket: i64,
    pub device: String,
    pub priority: i32,
    pub purpose: String,
    pub campaign: Option<String>,
    pub runbook: Option<String>,
    pub host: String,
    pub pid: u32,
    #[serde(skip)]
    pub start: Option<u64>,
    /// RFC 3339 UTC: since when it waits.
    pub since: String,
    /// How long it expects to hold the device once it has it, seconds.
    pub expect_s: Option<f64>,
    /// Names the waiter's lock file.
    #[serde(skip)]
    pub(crate) token: String,
}

impl Waiter {
    pub fn process(&self) -> ProcessId {
        ProcessId { pid: self.pid, start: self.start }
    }

    fn lock_name(&self) -> String {
        wait_lock_name(&self.device, &self.token)
    }

    /// One line naming the waiter.
    pub fn describe(&self) -> String {
        let what = who(self.campaign.as_deref(), self.runbook.as_deref(), &self.purpose);
        format!(
            "{what} on {} (pid {}), waiting since {} with priority {}",
            self.host, self.pid, self.since, self.priority
        )
    }
}

/// Why a device could not be had at once.
#[derive(Debug, Clone, PartialEq)]
pub enum Busy {
    /// Someone holds it (`None`: a holder that has not written its row yet).
    Held(Option<LeaseHolder>),
    /// It is free, but others are ahead in its queue: the first of them.
    Queued(Waiter),
}

impl Busy {
    /// Who has the device or its turn, in words.
    pub fn describe(&self) -> String {
        match self {
            Busy::Held(Some(h)) => format!("held by {}", h.describe()),
            Busy::Held(None) => "held by a process that is taking it right now".to_string(),
            Busy::Queued(w) => format!("next in its queue is {}", w.describe()),
        }
    }
}

/// A place in a device's queue. Dropping it leaves the queue.
#[derive(Debug)]
pub struct QueueTicket {
    store: Store,
    device: String,
    req: LeaseRequest,
    ticket: i64,
    /// The waiter's own locked file and its name, until it leaves the queue.
    own: Mutex<Option<(File, String)>>,
    cancelled: AtomicBool,
}

fn wait_lock_name(device: &str, token: &str) -> String {
    format!("{device}.wait-{token}.lock")
}

impl Store {
    /// Joins the queue of `device`.
    pub fn enqueue(&self, device: &str, req: &LeaseRequest) -> Result<Arc<QueueTicket>, StoreError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let me = ProcessId::current();
        let token = format!("{}-{}-{}", me.pid, me.start.unwrap_or(0), NEXT.fetch_add(1, Ordering::Relaxed));
        let name = wait_lock_name(device, &token);
        let file = self.open_lock(&name, true)?;
        // A new file nobody else knows of yet: the lock is ours at once.
        file.try_lock().map_err(|e| StoreError::Internal(format!("locking {name}: {e}")))?;
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // Rows of waiters that died are no one's place.
        for w in waiters(&conn, "WHERE device = ?1", params![device])? {
            if !w.process().alive() {
                self.forget_waiter(&conn, &w)?;
            }
        }
        conn.execute(
            "INSERT INTO device_queue (device, priority, purpose, campaign, runbook, host, pid, pid_start, since,
                expect_s, token)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                device,
                req.priority,
                req.purpose,
                req.campaign,
                req.runbook,
                req.host,
                me.pid,
                me.start_column(),
                now_rfc3339(),
                req.expect_s,
                token
            ],
        )?;
        let ticket = conn.last_insert_rowid();
        drop(conn);
        Ok(Arc::new(QueueTicket {
            store: self.clone(),
            device: device.to_string(),
            req: req.clone(),
            ticket,
            own: Mutex::new(Some((file, name))),
            cancelled: AtomicBool::new(false),
        }))
    }

    /// Every live waiter, by device, each device's in queue order.
    pub fn queued(&self) -> Result<Vec<Waiter>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let all = waiters(&conn, "ORDER BY device, priority DESC, ticket", [])?;
        Ok(all.into_iter().filter(|w| w.process().alive()).collect())
    }

    /// Removes a waiter's row; a waiter whose row was still there died, and its file goes too.
    fn forget_waiter(&self, conn: &Connection, w: &Waiter) -> Result<(), StoreError> {
        if conn.execute("DELETE FROM device_queue WHERE ticket = ?1", [w.ticket])? > 0 {
            let _ = std::fs::remove_file(self.lock_dir().join(w.lock_name()));
        }
        Ok(())
    }
}

impl QueueTicket {
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The live waiters ahead of this one, in queue order.
    pub fn ahead(&self) -> Result<Vec<Waiter>, StoreError> {
        let conn = self.store.conn.lock().unwrap_or_else(|p| p.into_inner());
        let rows = waiters(
            &conn,
            "WHERE device = ?1 AND (priority > ?2 OR (priority = ?2 AND ticket < ?3)) ORDER BY priority DESC, ticket",
            params![self.device, self.req.priority, self.ticket],
        )?;
        Ok(rows.into_iter().filter(|w| w.process().alive()).collect())
    }

    /// The device's lease if it is free and nobody is ahead; else who has it or its turn.
    /// The ticket keeps its place either way (until dropped).
    pub fn try_take(&self) -> Result<Result<DeviceLease, Busy>, StoreError> {
        if let Some(first) = self.ahead()?.into_iter().next() {
            return Ok(Err(Busy::Queued(first)));
        }
        let file = self.store.lock_file(&self.device)?;
        match file.try_lock() {
            Ok(()) => match self.promote(file)? {
                Some(lease) => Ok(Ok(lease)),
                None => Err(self.cancelled_error()),
            },
            Err(std::fs::TryLockError::WouldBlock) => Ok(Err(Busy::Held(self.store.lease_holder(&self.device)?))),
            Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Internal(format!("locking {}: {e}", self.device))),
        }
    }

    /// Waits for this ticket's turn, then takes the device: the calling thread sleeps in
    /// the kernel meanwhile (run it on a thread of its own). `None`: cancelled.
    pub fn wait(&self) -> Result<Option<DeviceLease>, StoreError> {
        let lock_err = |what: &str, e: std::io::Error| StoreError::Internal(format!("waiting for {what}: {e}"));
        loop {
            if self.is_cancelled() {
                return Ok(None);
            }
            if let Some(pred) = self.ahead()?.pop() {
                // Sleep until the one just ahead is gone from the queue (it got the device,
                // left, or died); a file already gone means it already is.
                match std::fs::OpenOptions::new().write(true).open(self.store.lock_dir().join(pred.lock_name())) {
                    Ok(f) => f.lock().map_err(|e| lock_err(&pred.lock_name(), e))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(lock_err(&pred.lock_name(), e)),
                }
                let conn = self.store.conn.lock().unwrap_or_else(|p| p.into_inner());
                self.store.forget_waiter(&conn, &pred)?;
                continue;
            }
            let file = self.store.lock_file(&self.device)?;
            file.lock().map_err(|e| lock_err(&self.device, e))?;
            // One with a higher priority may have come while this one slept on the lock.
            if !self.is_cancelled() && !self.ahead()?.is_empty() {
                continue;
            }
            return self.promote(file);
        }
    }

    /// Leaves the queue now, from any thread; a `wait` in progress returns `None` once it
    /// wakes (and gives back whatever it got).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.leave();
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn cancelled_error(&self) -> StoreError {
        StoreError::Internal(format!("waiting for {}: cancelled", self.device))
    }

    /// The device's lock is held (`file`): the queue row becomes the holder's row, and
    /// the waiter's own file is let go (the one behind wakes, and sleeps on the device).
    fn promote(&self, file: File) -> Result<Option<DeviceLease>, StoreError> {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_cancelled() || own.is_none() {
            return Ok(None);
        }
        let conn = self.store.conn.lock().unwrap_or_else(|p| p.into_inner());
        let tx = conn.unchecked_transaction()?;
        tx.execute("DELETE FROM device_queue WHERE ticket = ?1", [self.ticket])?;
        let lease = self.store.hold(&tx, &self.device, file, &self.req)?;
        tx.commit()?;
        drop(conn);
        if let Some((f, name)) = own.take() {
            let _ = std::fs::remove_file(self.store.lock_dir().join(name));
            drop(f);
        }
        Ok(Some(lease))
    }

    /// Removes the row, then lets go of the waiter's file.
    fn leave(&self) {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((f, name)) = own.take() {
            let conn = self.store.conn.lock().unwrap_or_else(|p| p.into_inner());
            // Best effort: a row left behind names this process, and goes when it ends.
            let _ = conn.execute("DELETE FROM device_queue WHERE ticket = ?1", [self.ticket]);
            drop(conn);
            let _ = std::fs::remove_file(self.store.lock_dir().join(name));
            drop(f);
        }
    }
}

impl Drop for QueueTicket {
    fn drop(&mut self) {
        self.leave();
    }
}

const COLUMNS: &str =
    "ticket, device, priority, purpose, campaign, runbook, host, pid, pid_start, since, expect_s, token";

fn waiters(conn: &Connection, tail: &str, p: impl rusqlite::Params) -> Result<Vec<Waiter>, StoreError> {
    let mut st = conn.prepare(&format!("SELECT {COLUMNS} FROM device_queue {tail}"))?;
    let rows = st
        .query_map(p, |r| {
            Ok(Waiter {
                ticket: r.get(0)?,
                device: r.get(1)?,
                priority: r.get(2)?,
                purpose: r.get(3)?,
                campaign: r.get(4)?,
                runbook: r.get(5)?,
                host: r.get(6)?,
                pid: r.get(7)?,
                start: start_from_column(r.get(8)?),
                since: r.get(9)?,
                expect_s: r.get(10)?,
                token: r.get(11)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::store::lease::tests::{req, two_stores};

    fn with_priority(campaign: &str, priority: i32) -> LeaseRequest {
        LeaseRequest { priority, ..req(campaign) }
    }

    /// Waits on `store` for `pixel-1` in a thread of its own, which reports the campaign
    /// that got it and holds it for `hold`.
    fn waiter(store: &Store, r: LeaseRequest, tx: mpsc::Sender<String>, hold: Duration) -> std::thread::JoinHandle<()> {
        let ticket = store.enqueue("pixel-1", &r).unwrap();
        std::thread::spawn(move || {
            let lease = ticket.wait().unwrap().unwrap();
            tx.send(r.campaign.clone().unwrap()).unwrap();
            std::thread::sleep(hold);
            drop(lease);
        })
    }

    #[test]
    fn waiters_get_the_device_by_priority_then_in_the_order_they_came() {
        let (_d, a, b) = two_stores();
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel();
        let hold = Duration::from_millis(50);
        let first = waiter(&b, with_priority("c-1", 0), tx.clone(), hold);
        let second = waiter(&a, with_priority("c-2", 0), tx.clone(), hold);
        let urgent = waiter(&b, with_priority("c-3", 5), tx.clone(), hold);
        std::thread::sleep(Duration::from_millis(200));
        assert!(rx.try_recv().is_err(), "a waiter got a held device");
        let queue: Vec<_> = a.queued().unwrap().into_iter().map(|w| w.campaign.unwrap()).collect();
        assert_eq!(queue, ["c-3", "c-1", "c-2"], "the queue in the order it is served");
        let Err(Busy::Queued(next)) = a.try_lease("pixel-1", &req("c-4")).unwrap() else {
            panic!("a try jumped the queue or found the device free")
        };
        assert_eq!(next.campaign.as_deref(), Some("c-3"));
        drop(held);
        let order: Vec<String> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        assert_eq!(order, ["c-3", "c-1", "c-2"]);
        for t in [first, second, urgent] {
            t.join().unwrap();
        }
        assert!(a.queued().unwrap().is_empty() && a.lease_holders().unwrap().is_empty(), "nothing left behind");
        assert_eq!(std::fs::read_dir(a.lock_dir()).unwrap().count(), 1, "only the device's own lock file stays");
    }

    #[test]
    fn a_cancelled_wait_leaves_no_place_and_the_next_one_is_served() {
        let (_d, a, b) = two_stores();
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let ticket = b.enqueue("pixel-1", &req("c-1")).unwrap();
        let t = ticket.clone();
        let (tx, rx) = mpsc::channel();
        let waiting = std::thread::spawn(move || tx.send(t.wait().unwrap().is_none()).unwrap());
        let (tx2, rx2) = mpsc::channel();
        let behind = waiter(&a, req("c-2"), tx2, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(100));
        ticket.cancel();
        assert_eq!(a.queued().unwrap().len(), 1, "the cancelled place is gone at once");
        drop(held);
        assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "a cancelled wait took the device");
        assert_eq!(rx2.recv_timeout(Duration::from_secs(10)).unwrap(), "c-2");
        waiting.join().unwrap();
        behind.join().unwrap();
    }

    /// A waiter ahead that dies (SIGKILL, in another process) frees its place at once.
    #[test]
    fn a_waiter_ahead_that_is_killed_frees_its_place() {
        let (_d, a, b) = two_stores();
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        // Another process's place in the queue: its row, and its file locked by `flock`.
        let token = "other-1";
        let file = a.lock_dir().join(wait_lock_name("pixel-1", token));
        std::fs::write(&file, "").unwrap();
        let mut other = Command::new("flock").arg("-o").arg(&file).args(["sleep", "30"]).spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while std::fs::File::open(&file).unwrap().try_lock().is_ok() {
            assert!(Instant::now() < until, "flock never took the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid = ProcessId::of(other.id());
        a.conn
            .lock()
            .unwrap()
            .execute(
                "INSERT INTO device_queue (device, priority, purpose, campaign, host, pid, pid_start, since, token)
                 VALUES ('pixel-1', 0, 'campaign', 'c-other', 'bench-2', ?1, ?2, 't', ?3)",
                params![pid.pid, pid.start_column(), token],
            )
            .unwrap();
        let (tx, rx) = mpsc::channel();
        let mine = waiter(&b, req("c-1"), tx, Duration::ZERO);
        drop(held);
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "served before the waiter ahead");
        other.kill().unwrap();
        let killed = Instant::now();
        other.wait().unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "c-1");
        assert!(killed.elapsed() < Duration::from_secs(5));
        mine.join().unwrap();
        assert!(a.queued().unwrap().is_empty(), "the dead waiter's row is gone");
        assert!(!file.exists(), "… and its file");
    }
}
