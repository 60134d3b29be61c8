//! A device's queue: who waits for its lease, in order (higher priority first, then
//! first come, first served), each woken by the one ahead of it.
//!
//! A waiter holds a lock of its own (its token's: a file next to a SQLite store, an
//! advisory lock on PostgreSQL) from before its row is written until its row is gone. The
//! one behind it sleeps on that lock: it wakes when the one ahead got the device (and
//! then sleeps on the device's own lock until that one is done with it), left the queue,
//! or died. The head of the queue sleeps on the device's lock. Nobody polls, and a dead
//! waiter frees its place the moment it dies, as a dead holder frees the device.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::ProcessId;
use super::backend::vals;
use super::backend::{
    Columns, Conn, DbError, FromRow, Held, LockError, LockName, Owner, Row, new_token, read_all, split_alive,
};
use super::behind;
use super::error::StoreError;
use super::handover::{self, Ended};
use super::lease::{DeviceLease, LeaseHolder, LeaseRequest, LeaseSpace, now_rfc3339, who, write_holder};
use super::port_cuts::PortCut;
use super::store::Store;

/// One waiter's row: a would-be holder (since when it waits, how long it expects to hold
/// the device once it has it) with its place in the queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Waiter {
    pub ticket: i64,
    #[serde(flatten)]
    pub holder: LeaseHolder,
    /// Names the waiter's own lock.
    #[serde(skip)]
    pub(crate) token: String,
}

/// A waiter's fields are its would-be holder's: `w.campaign`, `w.process()`.
impl std::ops::Deref for Waiter {
    type Target = LeaseHolder;

    fn deref(&self) -> &LeaseHolder {
        &self.holder
    }
}

/// From `ticket`, [`LeaseHolder::COLUMNS`], `token` (of `device_queue`).
impl FromRow<'_> for Waiter {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(Waiter { ticket: c.get()?, holder: c.read()?, token: c.get()? })
    }
}

impl Waiter {
    fn lock(&self) -> LockName {
        LockName::Waiter { device: self.device.clone(), token: self.token.clone() }
    }

    fn owner(&self) -> Owner {
        Owner { pid: self.pid, start: self.start, lock: self.lock() }
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
    space: LeaseSpace,
    device: String,
    req: LeaseRequest,
    ticket: i64,
    token: String,
    /// The waiter's own lock, until it leaves the queue.
    own: Mutex<Option<Box<dyn Held>>>,
    cancelled: AtomicBool,
    /// Where a device handed on in this process goes ([`handover`]): `None`, to `wait`'s caller.
    deliver: handover::DeliverSlot,
}

impl LeaseSpace {
    /// Joins the queue of `device`.
    pub fn enqueue(&self, device: &str, req: &LeaseRequest) -> Result<Arc<QueueTicket>, StoreError> {
        let lock_err = |source| StoreError::JoinQueue { device: device.to_string(), source: Box::new(source) };
        // The waiter's own lock first, so that whoever sees its row finds it held.
        let (token, own) = loop {
            let token = new_token();
            let name = LockName::Waiter { device: device.to_string(), token: token.clone() };
            if let Some(held) = self.locks.lock(&name, false).map_err(lock_err)? {
                break (token, held);
            }
        };
        // Rows of waiters that died are no one's place: `ahead` removes those it meets, and
        // a wait on a dead waiter's lock returns at once (`wait`).
        let me = ProcessId::current();
        let (d, r, t) = (device.to_string(), req.clone(), token.clone());
        let ticket = self
            .db
            .call(move |c| {
                c.query(
                    "INSERT INTO device_queue (device, priority, purpose, campaign, runbook, host, pid, pid_start,
                        since, expect_s, token)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) RETURNING ticket",
                    &vals![
                        &d,
                        r.priority,
                        &r.purpose,
                        r.campaign.clone(),
                        r.runbook.clone(),
                        &r.host,
                        me.pid,
                        me.start_column(),
                        now_rfc3339(),
                        r.expect_s,
                        &t
                    ],
                )?[0]
                    .read::<i64>()
            })
            .map_err(StoreError::from)?;
        behind::joined(&self.key(device), ticket);
        Ok(Arc::new(QueueTicket {
            space: self.clone(),
            device: device.to_string(),
            req: req.clone(),
            ticket,
            token,
            own: Mutex::new(Some(own)),
            cancelled: AtomicBool::new(false),
            deliver: Default::default(),
        }))
    }

    /// Every live waiter, by device, each device's in queue order.
    pub fn queued(&self) -> Result<Vec<Waiter>, StoreError> {
        let all = self.waiters("ORDER BY device, priority DESC, ticket", Vec::new())?;
        Ok(split_alive(self.locks.as_ref(), all, Waiter::owner).0)
    }

    fn waiters(&self, tail: &str, params: Vec<super::backend::Value>) -> Result<Vec<Waiter>, StoreError> {
        let sql = format!("SELECT ticket, {}, token FROM device_queue {tail}", LeaseHolder::COLUMNS);
        let rows = self.db.call(move |c| c.query(&sql, &params)).map_err(StoreError::from)?;
        Ok(read_all(&rows)?)
    }

    /// Removes a waiter's row; a waiter whose row was still there died, and its lock's
    /// file goes too.
    fn forget_waiter(&self, w: &Waiter) -> Result<(), StoreError> {
        let ticket = w.ticket;
        let gone = self
            .db
            .call(move |c| c.execute("DELETE FROM device_queue WHERE ticket = ?1", &vals![ticket]))
            .map_err(StoreError::from)?;
        if gone > 0 {
            self.locks.forget(&w.lock());
        }
        Ok(())
    }
}

impl Store {
    /// [`LeaseSpace::enqueue`] on this store.
    pub fn enqueue(&self, device: &str, req: &LeaseRequest) -> Result<Arc<QueueTicket>, StoreError> {
        self.leases().enqueue(device, req)
    }

    /// [`LeaseSpace::queued`] on this store.
    pub fn queued(&self) -> Result<Vec<Waiter>, StoreError> {
        self.leases().queued()
    }
}

impl QueueTicket {
    pub fn device(&self) -> &str {
        &self.device
    }

    /// The live waiters ahead of this one, in queue order; the rows of dead ones ahead are
    /// removed.
    pub fn ahead(&self) -> Result<Vec<Waiter>, StoreError> {
        let rows = self.rows_ahead()?;
        if rows.is_empty() {
            return Ok(rows);
        }
        let (live, dead) = split_alive(self.space.locks.as_ref(), rows, Waiter::owner);
        for w in &dead {
            self.space.forget_waiter(w)?;
        }
        Ok(live)
    }

    /// The rows ahead of this one, live or not, in queue order: for `wait`, where a dead
    /// one's lock is had at once (and its row then removed), no liveness is asked.
    fn rows_ahead(&self) -> Result<Vec<Waiter>, StoreError> {
        self.space.waiters(
            "WHERE device = ?1 AND (priority > ?2 OR (priority = ?2 AND ticket < ?3)) ORDER BY priority DESC, ticket",
            vals![&self.device, self.req.priority, self.ticket].to_vec(),
        )
    }

    fn lock_err(&self, source: LockError) -> StoreError {
        StoreError::Wait { device: self.device.clone(), source: Box::new(source) }
    }

    /// The device's lease if it is free and nobody is ahead; else who has it or its turn.
    /// The ticket keeps its place either way (until dropped).
    pub fn try_take(&self) -> Result<Result<DeviceLease, Busy>, StoreError> {
        Ok(self.try_take_counting()?.map_err(|(busy, _)| busy))
    }

    /// [`QueueTicket::try_take`], and when busy how many live waiters are ahead.
    pub fn try_take_counting(&self) -> Result<Result<DeviceLease, (Busy, usize)>, StoreError> {
        let ahead = self.ahead()?;
        let n = ahead.len();
        if let Some(first) = ahead.into_iter().next() {
            return Ok(Err((Busy::Queued(first), n)));
        }
        let name = LockName::Device(self.device.clone());
        match self.space.locks.lock(&name, false).map_err(|e| self.lock_err(e))? {
            Some(held) => match self.promote(held, false)? {
                Promoted::Lease(lease) => Ok(Ok(lease)),
                Promoted::Cancelled | Promoted::Behind => Err(self.lock_err(LockError::Cancelled)),
            },
            None => Ok(Err((Busy::Held(self.space.lease_holder(&self.device)?), 0))),
        }
    }

    /// Waits for this ticket's turn, then takes the device: the calling thread sleeps
    /// meanwhile (run it on a thread of its own). `None`: cancelled.
    pub fn wait(&self) -> Result<Option<DeviceLease>, StoreError> {
        loop {
            if self.is_cancelled() {
                return Ok(None);
            }
            if let Some(pred) = self.rows_ahead()?.pop() {
                // A waiter of this process: waited for here ([`behind`]).
                if let Some(place) = behind::of_this_process(&self.space.key(&self.device), pred.ticket) {
                    place.wait();
                    continue;
                }
                // Sleep until the one just ahead is gone from the queue (it got the device,
                // left, or died).
                let held = self.space.locks.lock(&pred.lock(), true).map_err(|e| self.lock_err(e))?;
                self.space.forget_waiter(&pred)?;
                drop(held);
                continue;
            }
            // Held by this process: handed on here when its holder is done (`handover`).
            let key = self.space.key(&self.device);
            if let Some(slot) = handover::wait_here(&key, self.ticket, &self.deliver) {
                if self.is_cancelled() {
                    handover::cancel(&key, self.ticket);
                    return Ok(None);
                }
                match slot.wait() {
                    Ended::Handed(lease) => {
                        self.let_own_go();
                        return Ok(lease.filter(|_| !self.is_cancelled()));
                    }
                    Ended::Released => continue,
                    Ended::Cancelled => return Ok(None),
                }
            }
            let name = LockName::Device(self.device.clone());
            let held = self.space.locks.lock(&name, true).map_err(|e| self.lock_err(e))?;
            let Some(held) = held else { continue };
            // One with a higher priority may have come while this one slept on the lock:
            // asked in the promotion's own transaction.
            match self.promote(held, true)? {
                Promoted::Lease(lease) => return Ok(Some(lease)),
                Promoted::Cancelled => return Ok(None),
                Promoted::Behind => continue,
            }
        }
    }

    /// Leaves the queue now, from any thread; a `wait` in progress returns `None` once it
    /// wakes (and gives back whatever it got).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        handover::cancel(&self.space.key(&self.device), self.ticket);
        self.leave();
    }

    /// A device handed on in this process ([`handover`]) goes to `deliver` rather than to
    /// `wait`'s caller, which then gets `None`.
    pub fn deliver_to(&self, deliver: handover::Deliver) {
        self.deliver.set(deliver);
    }

    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The device's lock is held: the queue row becomes the holder's row, and the
    /// waiter's own lock is let go (the one behind wakes, and sleeps on the device). In the
    /// same call (one turn on the store's connection, which the holder's other work
    /// shares): when `check_ahead`, whether a waiter came ahead meanwhile (then nothing is
    /// changed, and the lock goes back), and the port `lab care` left off, which the new
    /// holder switches on before anything else.
    fn promote(&self, held: Box<dyn Held>, check_ahead: bool) -> Result<Promoted, StoreError> {
        let own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_cancelled() || own.is_none() {
            return Ok(Promoted::Cancelled);
        }
        let (device, req, ticket) = (self.device.clone(), self.req.clone(), self.ticket);
        let taken = self
            .space
            .db
            .call(move |c: &mut dyn Conn| {
                c.transaction(|c| {
                    if check_ahead {
                        let ahead = c.query_opt(
                            "SELECT ticket FROM device_queue WHERE device = ?1
                               AND (priority > ?2 OR (priority = ?2 AND ticket < ?3)) LIMIT 1",
                            &vals![&device, req.priority, ticket],
                        )?;
                        if ahead.is_some() {
                            return Ok(None);
                        }
                    }
                    c.execute("DELETE FROM device_queue WHERE ticket = ?1", &vals![ticket])?;
                    write_holder(c, &device, &req)?;
                    let cut =
                        c.query_opt("SELECT device, port, since FROM port_cuts WHERE device = ?1", &vals![&device])?;
                    Ok(Some(cut.as_ref().map(Row::read::<PortCut>).transpose()?))
                })
            })
            .map_err(StoreError::from)?;
        let Some(cut) = taken else {
            drop(held);
            return Ok(Promoted::Behind);
        };
        // Made outside the call: a lease dropped there would wait on the connection it is in.
        let lease = self.space.lease_of(&self.device, held).with_port_cut(cut);
        drop(own);
        self.let_own_go();
        Ok(Promoted::Lease(lease))
    }

    /// The ticket's row is gone (it holds the device): its own lock is let go, and the one
    /// behind wakes (and then waits for the device).
    fn let_own_go(&self) {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = own.take() {
            self.space.locks.forget(&LockName::Waiter { device: self.device.clone(), token: self.token.clone() });
            drop(held);
        }
        behind::left(&self.space.key(&self.device), self.ticket);
    }

    /// Removes the row, then lets go of the waiter's own lock.
    fn leave(&self) {
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = own.take() {
            let ticket = self.ticket;
            // Best effort: a row left behind has no lock held, and is skipped and removed.
            let _ =
                self.space.db.call(move |c| c.execute("DELETE FROM device_queue WHERE ticket = ?1", &vals![ticket]));
            self.space.locks.forget(&LockName::Waiter { device: self.device.clone(), token: self.token.clone() });
            drop(held);
        }
        behind::left(&self.space.key(&self.device), self.ticket);
    }
}

/// What [`QueueTicket::promote`] came to.
enum Promoted {
    Lease(DeviceLease),
    /// The ticket was cancelled (or has left the queue): nothing taken.
    Cancelled,
    /// A waiter came ahead while this one slept on the device's lock: it waits again.
    Behind,
}

impl Drop for QueueTicket {
    fn drop(&mut self) {
        self.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::store::lease::tests::req;

    /// Two handles on one store's leases, as two processes have them (`b` apart: nothing
    /// is handed on between them in this process), and what keeps the store alive (SQLite:
    /// its folder).
    struct Pair {
        a: LeaseSpace,
        b: LeaseSpace,
        dir: Option<tempfile::TempDir>,
        url: Option<String>,
    }

    fn sqlite() -> Pair {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        let (a, b) = (Store::open(&path).unwrap().leases(), Store::open(&path).unwrap().leases().apart());
        Pair { a, b, dir: Some(dir), url: None }
    }

    fn postgres() -> Pair {
        let url = crate::testing::postgres::fresh_database();
        let parsed = crate::store::PgUrl::parse(&url).unwrap();
        let a = Store::open_postgres(&parsed).unwrap().leases();
        let b = Store::open_postgres(&parsed).unwrap().leases().apart();
        Pair { a, b, dir: None, url: Some(url) }
    }

    impl Pair {
        /// Another process holding `lock` (and nothing else), as a `lab run` would: `flock`
        /// on the lock's file, or `psql` holding the advisory lock in an idle session.
        fn other_process(&self, lock: &LockName) -> Child {
            let child = match (&self.dir, &self.url) {
                (Some(dir), _) => {
                    let file = match lock {
                        LockName::Device(d) => format!("{d}.lock"),
                        LockName::Waiter { device, token } => format!("{device}.wait-{token}.lock"),
                        LockName::Agent(_) => unreachable!("the queue's tests hold no agent's lock"),
                    };
                    let dir = dir.path().join("lab.db.locks");
                    std::fs::create_dir_all(&dir).unwrap();
                    let path = dir.join(file);
                    std::fs::write(&path, "").unwrap();
                    Command::new("flock").arg("-o").arg(&path).args(["sleep", "30"]).spawn().unwrap()
                }
                (None, Some(url)) => {
                    let args = match lock {
                        LockName::Device(d) => {
                            let d = d.clone();
                            let key = self
                                .a
                                .db
                                .call(move |c| {
                                    c.execute(
                                        "INSERT INTO device_keys (device) VALUES (?1) ON CONFLICT (device) DO NOTHING",
                                        &vals![&d],
                                    )?;
                                    c.query("SELECT key FROM device_keys WHERE device = ?1", &vals![&d])?[0]
                                        .get::<i64>(0)
                                })
                                .unwrap();
                            key.to_string()
                        }
                        LockName::Waiter { token, .. } => token.replace('-', ", "),
                        LockName::Agent(_) => unreachable!("the queue's tests hold no agent's lock"),
                    };
                    let mut psql = Command::new("psql")
                        .args([url.as_str(), "-q", "-v", "ON_ERROR_STOP=1"])
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("psql (Debian: apt-get install postgresql-client)");
                    writeln!(psql.stdin.as_mut().unwrap(), "SELECT pg_advisory_lock({args});").unwrap();
                    psql
                }
                _ => unreachable!(),
            };
            let until = Instant::now() + Duration::from_secs(10);
            while self.a.locks.lock(lock, false).unwrap().is_some() {
                assert!(Instant::now() < until, "the other process never took {lock:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            child
        }
    }

    fn with_priority(campaign: &str, priority: i32) -> LeaseRequest {
        LeaseRequest { priority, ..req(campaign) }
    }

    /// Waits on `space` for `pixel-1` in a thread of its own, which reports the campaign
    /// that got it and holds it for `hold`.
    fn waiter(
        space: &LeaseSpace,
        r: LeaseRequest,
        tx: mpsc::Sender<String>,
        hold: Duration,
    ) -> std::thread::JoinHandle<()> {
        let ticket = space.enqueue("pixel-1", &r).unwrap();
        std::thread::spawn(move || {
            let lease = ticket.wait().unwrap().unwrap();
            tx.send(r.campaign.clone().unwrap()).unwrap();
            std::thread::sleep(hold);
            drop(lease);
        })
    }

    fn waiters_get_the_device_by_priority_then_in_the_order_they_came(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel();
        let hold = Duration::from_millis(50);
        let first = waiter(b, with_priority("c-1", 0), tx.clone(), hold);
        let second = waiter(a, with_priority("c-2", 0), tx.clone(), hold);
        let urgent = waiter(b, with_priority("c-3", 5), tx.clone(), hold);
        std::thread::sleep(Duration::from_millis(300));
        assert!(rx.try_recv().is_err(), "a waiter got a held device");
        let queue: Vec<_> = a.queued().unwrap().into_iter().map(|w| w.holder.campaign.unwrap()).collect();
        assert_eq!(queue, ["c-3", "c-1", "c-2"], "the queue in the order it is served");
        let Err(Busy::Queued(next)) = b.try_lease("pixel-1", &req("c-4")).unwrap() else {
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
        if let Some(dir) = &p.dir {
            let files = std::fs::read_dir(dir.path().join("lab.db.locks")).unwrap().count();
            assert_eq!(files, 1, "only the device's own lock file stays");
        }
    }

    #[test]
    fn waiters_get_the_device_by_priority_then_in_the_order_they_came_on_sqlite() {
        waiters_get_the_device_by_priority_then_in_the_order_they_came(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn waiters_get_the_device_by_priority_then_in_the_order_they_came_on_postgres() {
        waiters_get_the_device_by_priority_then_in_the_order_they_came(postgres());
    }

    fn a_cancelled_wait_leaves_no_place_and_the_next_one_is_served(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let ticket = b.enqueue("pixel-1", &req("c-1")).unwrap();
        let t = ticket.clone();
        let (tx, rx) = mpsc::channel();
        let waiting = std::thread::spawn(move || tx.send(t.wait().unwrap().is_none()).unwrap());
        let (tx2, rx2) = mpsc::channel();
        let behind = waiter(a, req("c-2"), tx2, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(200));
        ticket.cancel();
        assert_eq!(a.queued().unwrap().len(), 1, "the cancelled place is gone at once");
        drop(held);
        assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "a cancelled wait took the device");
        assert_eq!(rx2.recv_timeout(Duration::from_secs(10)).unwrap(), "c-2");
        waiting.join().unwrap();
        behind.join().unwrap();
    }

    #[test]
    fn a_cancelled_wait_leaves_no_place_and_the_next_one_is_served_on_sqlite() {
        a_cancelled_wait_leaves_no_place_and_the_next_one_is_served(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn a_cancelled_wait_leaves_no_place_and_the_next_one_is_served_on_postgres() {
        a_cancelled_wait_leaves_no_place_and_the_next_one_is_served(postgres());
    }

    /// Waiters of one process for one device wait behind each other in the process
    /// ([`behind`]), with no session of their own on the server, and are served in order.
    fn waiters_of_one_process_wait_behind_each_other_here(p: Pair) {
        let a = &p.a;
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel();
        let hold = Duration::from_millis(20);
        let served: Vec<_> = ["c-1", "c-2", "c-3"].map(|c| waiter(a, req(c), tx.clone(), hold)).into();
        let tickets: Vec<i64> = a.queued().unwrap().iter().map(|w| w.ticket).collect();
        assert_eq!(tickets.len(), 3);
        let key = a.key("pixel-1");
        let until = Instant::now() + Duration::from_secs(10);
        while behind::sleepers(&key, tickets[0]) + behind::sleepers(&key, tickets[1]) != 2 {
            assert!(Instant::now() < until, "the second and third never slept behind the one ahead here");
            std::thread::sleep(Duration::from_millis(10));
        }
        if p.url.is_some() {
            let blocked =
                a.db.call(|c| {
                    c.query(
                        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()
                           AND wait_event_type = 'Lock'",
                        &[],
                    )
                })
                .unwrap()[0]
                    .read::<i64>()
                    .unwrap();
            assert_eq!(blocked, 0, "a waiter waits in a session of its own on the server");
        }
        drop(held);
        let order: Vec<String> = (0..3).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        assert_eq!(order, ["c-1", "c-2", "c-3"]);
        served.into_iter().for_each(|w| w.join().unwrap());
        assert!(a.queued().unwrap().is_empty());
    }

    #[test]
    fn waiters_of_one_process_wait_behind_each_other_here_on_sqlite() {
        waiters_of_one_process_wait_behind_each_other_here(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn waiters_of_one_process_wait_behind_each_other_here_on_postgres() {
        waiters_of_one_process_wait_behind_each_other_here(postgres());
    }

    /// A waiter ahead that dies (SIGKILL, in another process) frees its place at once, and
    /// so does a holder: on PostgreSQL, by the end of its session.
    fn the_dead_free_their_places_and_devices_at_once(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        // Another process's place in the queue: its row, and its lock held by that process.
        let token = "17-4711".to_string();
        let mut other = p.other_process(&LockName::Waiter { device: "pixel-1".into(), token: token.clone() });
        let pid = ProcessId::of(other.id());
        a.db.call(move |c| {
            c.execute(
                "INSERT INTO device_queue (device, priority, purpose, campaign, host, pid, pid_start, since, token)
                 VALUES ('pixel-1', 0, 'campaign', 'c-other', 'bench-2', ?1, ?2, 't', ?3)",
                &vals![pid.pid, pid.start_column(), &token],
            )
        })
        .unwrap();
        let (tx, rx) = mpsc::channel();
        let mine = waiter(b, req("c-1"), tx, Duration::ZERO);
        drop(held);
        assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "served before the waiter ahead");
        other.kill().unwrap();
        let killed = Instant::now();
        other.wait().unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "c-1");
        assert!(killed.elapsed() < Duration::from_secs(5), "{:?}", killed.elapsed());
        mine.join().unwrap();
        assert!(a.queued().unwrap().is_empty(), "the dead waiter's row is gone");

        // A holder in another process, killed: the device is free at once.
        let mut holder = p.other_process(&LockName::Device("pixel-2".into()));
        assert!(matches!(b.try_lease("pixel-2", &req("c-2")).unwrap(), Err(Busy::Held(None))));
        let (tx, rx) = mpsc::channel();
        let b2 = b.clone();
        let got = std::thread::spawn(move || {
            let lease = b2.lease("pixel-2", &req("c-2")).unwrap();
            tx.send(Instant::now()).unwrap();
            drop(lease);
        });
        assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "the waiter got a held device");
        holder.kill().unwrap();
        let killed = Instant::now();
        holder.wait().unwrap();
        let at = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter never got the device");
        got.join().unwrap();
        assert!(at.duration_since(killed) < Duration::from_secs(5), "{:?}", at.duration_since(killed));
    }

    #[test]
    fn the_dead_free_their_places_and_devices_at_once_on_sqlite() {
        the_dead_free_their_places_and_devices_at_once(sqlite());
    }

    /// A database whose sessions time out statements after 200 ms: a wait of a second for
    /// a held device still ends with the device, not with the server's timeout.
    #[test_needs::needs(postgres)]
    #[test]
    fn a_server_timeout_does_not_cut_a_wait_short_on_postgres() {
        let p = postgres();
        let name = p.url.as_deref().unwrap().rsplit_once('/').unwrap().1.to_string();
        let sql = format!("ALTER DATABASE {name} SET statement_timeout = '200ms'");
        p.a.db.call(move |c| c.batch(&sql)).unwrap();
        let url = crate::store::PgUrl::parse(p.url.as_deref().unwrap()).unwrap();
        let (a, b) = (Store::open_postgres(&url).unwrap().leases(), Store::open_postgres(&url).unwrap().leases());
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel();
        let w = waiter(&b, req("c-1"), tx, Duration::ZERO);
        std::thread::sleep(Duration::from_secs(1));
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), "c-1");
        w.join().unwrap();
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn the_dead_free_their_places_and_devices_at_once_on_postgres() {
        the_dead_free_their_places_and_devices_at_once(postgres());
    }

    /// A lease taken from the queue says which port `lab care` left off, read in the same
    /// call as the lease (whether the device was free at once or waited for): the new
    /// holder switches it on before anything else.
    fn a_lease_from_the_queue_carries_the_port_care_left_off(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let cut = |sql: &'static str| a.db.call(move |c| c.execute(sql, &[])).unwrap();
        cut("INSERT INTO port_cuts (device, port, since) VALUES ('pixel-1', '1-1:2', 't')");
        let first = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        assert_eq!(first.port_cut().unwrap().map(|c| c.port).as_deref(), Some("1-1:2"));
        // Its holder switched it on; the next, who waited, is told there is none.
        cut("DELETE FROM port_cuts WHERE device = 'pixel-1'");
        let ticket = b.enqueue("pixel-1", &req("c-1")).unwrap();
        let next = std::thread::spawn(move || ticket.wait().unwrap().unwrap().port_cut());
        drop(first);
        assert_eq!(next.join().unwrap(), Some(None));
    }

    #[test]
    fn a_lease_from_the_queue_carries_the_port_care_left_off_on_sqlite() {
        a_lease_from_the_queue_carries_the_port_care_left_off(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn a_lease_from_the_queue_carries_the_port_care_left_off_on_postgres() {
        a_lease_from_the_queue_carries_the_port_care_left_off(postgres());
    }

    /// Waits until `n` waiters of `space` wait in this process for `pixel-1`.
    fn waiting_here(space: &LeaseSpace, n: usize) {
        let key = space.key("pixel-1");
        let until = Instant::now() + Duration::from_secs(10);
        while handover::waiting(&key).len() != n {
            assert!(Instant::now() < until, "{n} waiters never waited here: {:?}", handover::waiting(&key));
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A holder done with a device hands it to the next in its queue when that one waits in
    /// the same process: its lock kept, the waiter's row made the holder's, the lease given
    /// straight to the waiter's `deliver` (not to its waiting thread), with the port `lab
    /// care` left off. A waiter of this process that left meanwhile is passed over.
    fn a_device_goes_to_the_next_waiter_of_this_process_with_its_lock_held(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel::<DeviceLease>();
        let ticket = a.enqueue("pixel-1", &req("c-1")).unwrap();
        ticket.deliver_to(Box::new(move |lease| tx.send(lease).map_err(|e| Box::new(e.0))));
        let t = ticket.clone();
        let waiting = std::thread::spawn(move || t.wait().unwrap().is_none());
        waiting_here(a, 1);
        // One more here, which leaves before the device is free.
        let (gone_tx, gone_rx) = mpsc::channel::<DeviceLease>();
        let gone = a.enqueue("pixel-1", &with_priority("c-gone", 9)).unwrap();
        gone.deliver_to(Box::new(move |lease| gone_tx.send(lease).map_err(|e| Box::new(e.0))));
        let g = gone.clone();
        let leaving = std::thread::spawn(move || g.wait().unwrap().is_none());
        waiting_here(a, 2);
        gone.cancel();
        assert!(leaving.join().unwrap(), "a waiter that left got the device");
        waiting_here(a, 1);
        a.db.call(|c| c.execute("INSERT INTO port_cuts (device, port, since) VALUES ('pixel-1', '1-1:2', 't')", &[]))
            .unwrap();
        drop(held);
        let lease = rx.recv_timeout(Duration::from_secs(10)).expect("the device was not handed on");
        assert!(waiting.join().unwrap(), "the waiting thread got the device as well");
        assert!(gone_rx.try_recv().is_err(), "the waiter that left was handed the device");
        assert_eq!(lease.port_cut().unwrap().map(|c| c.port).as_deref(), Some("1-1:2"));
        let holder = a.lease_holder("pixel-1").unwrap().expect("the new holder's row");
        assert_eq!((holder.campaign.as_deref(), holder.pid), (Some("c-1"), std::process::id()));
        assert!(a.queued().unwrap().is_empty(), "the waiter's row left the queue");
        assert!(
            matches!(b.try_lease("pixel-1", &req("c-2")).unwrap(), Err(Busy::Held(Some(h))) if h.campaign.as_deref() == Some("c-1")),
            "another process finds it held by c-1"
        );
        drop(lease);
        assert!(a.lease_holders().unwrap().is_empty() && a.queued().unwrap().is_empty(), "nothing left behind");
        assert!(b.try_lease("pixel-1", &req("c-3")).unwrap().is_ok(), "let go when nobody here waits");
    }

    #[test]
    fn a_device_goes_to_the_next_waiter_of_this_process_with_its_lock_held_on_sqlite() {
        a_device_goes_to_the_next_waiter_of_this_process_with_its_lock_held(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn a_device_goes_to_the_next_waiter_of_this_process_with_its_lock_held_on_postgres() {
        a_device_goes_to_the_next_waiter_of_this_process_with_its_lock_held(postgres());
    }

    /// A waiter of another process first in the queue is served before one of this
    /// process: the device is let go, and this one waits for it again.
    fn a_waiter_of_another_process_ahead_is_served_before_this_ones(p: Pair) {
        let (a, b) = (&p.a, &p.b);
        let held = a.try_lease("pixel-1", &req("c-0")).unwrap().unwrap();
        let (tx, rx) = mpsc::channel();
        let hold = Duration::from_millis(50);
        let mine = waiter(a, with_priority("c-1", 0), tx.clone(), hold);
        waiting_here(a, 1);
        let urgent = waiter(b, with_priority("c-2", 5), tx.clone(), hold);
        std::thread::sleep(Duration::from_millis(300));
        drop(held);
        let order: Vec<String> = (0..2).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap()).collect();
        assert_eq!(order, ["c-2", "c-1"]);
        for t in [mine, urgent] {
            t.join().unwrap();
        }
        assert!(a.queued().unwrap().is_empty() && a.lease_holders().unwrap().is_empty(), "nothing left behind");
    }

    #[test]
    fn a_waiter_of_another_process_ahead_is_served_before_this_ones_on_sqlite() {
        a_waiter_of_another_process_ahead_is_served_before_this_ones(sqlite());
    }

    #[test_needs::needs(postgres)]
    #[test]
    fn a_waiter_of_another_process_ahead_is_served_before_this_ones_on_postgres() {
        a_waiter_of_another_process_ahead_is_served_before_this_ones(postgres());
    }

    /// On PostgreSQL the leases and queues have a connection of their own: a device is
    /// taken while the store's own connection waits on something else (a campaign's write
    /// behind a lock), not after it.
    #[test_needs::needs(postgres)]
    #[test]
    fn leases_are_taken_while_the_stores_own_connection_is_busy() {
        let url = crate::testing::postgres::fresh_database();
        let store = Store::open_postgres(&crate::store::PgUrl::parse(&url).unwrap()).unwrap();
        let mut blocker = Command::new("psql")
            .args([url.as_str(), "-q", "-v", "ON_ERROR_STOP=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("psql (Debian: apt-get install postgresql-client)");
        writeln!(blocker.stdin.as_mut().unwrap(), "SELECT pg_advisory_lock(4242);").unwrap();
        let waits = |granted: bool| {
            let other = Store::open_postgres(&crate::store::PgUrl::parse(&url).unwrap()).unwrap();
            move || {
                other
                    .db
                    .call(move |c| {
                        c.query(
                            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND granted = ?1",
                            &vals![granted],
                        )
                    })
                    .unwrap()
                    .len()
            }
        };
        let held = waits(true);
        let until = Instant::now() + Duration::from_secs(10);
        while held() == 0 {
            assert!(Instant::now() < until, "psql never took the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
        let busy = {
            let s = store.clone();
            std::thread::spawn(move || {
                s.db.call(|c| c.query("SELECT 1 FROM (SELECT pg_advisory_lock(4242)) AS l", &[]).map(|_| ()))
            })
        };
        let waiting = waits(false);
        while waiting() == 0 {
            assert!(Instant::now() < until, "the store's connection never waited");
            std::thread::sleep(Duration::from_millis(20));
        }
        let (tx, rx) = mpsc::channel();
        let s = store.clone();
        std::thread::spawn(move || tx.send(s.try_lease("pixel-1", &req("c-0")).map(|l| l.is_ok())).unwrap());
        let took = rx.recv_timeout(Duration::from_secs(60)).expect("the lease waited behind the busy connection");
        assert!(took.unwrap(), "the device was free");
        assert!(!busy.is_finished(), "the store's own connection was still waiting");
        blocker.kill().unwrap();
        let _ = blocker.wait();
        busy.join().unwrap().unwrap();
    }
}
