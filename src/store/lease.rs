//! Device leases: one holder per device at a time, on either backend.
//!
//! The exclusion is a lock that dies with its holder ([`Locks`]): an `flock(2)` on
//! `<store>.locks/<device>.lock` next to a SQLite store, a session-level advisory lock on
//! PostgreSQL. It is enforced by the kernel or the server, not by a look at a row; it is
//! freed the moment its holder dies, SIGKILL included; and a waiter blocked on it wakes
//! then, without anybody polling. The `device_leases` row says who holds the device
//! (purpose, campaign, process, host, since) for `lab status` and for a refusal's message;
//! a row whose owner no longer holds its lock is stale and is taken over by the next
//! holder. Waiting for a device, in order, is `queue.rs`.

use std::sync::Arc;

use serde::Serialize;

use super::ProcessId;
use super::backend::vals;
use super::backend::{
    Columns, Conn, Db, DbError, FromRow, Held, LockError, LockName, Locks, Owner, Row, read_all, split_alive,
};
use super::error::StoreError;
use super::handover;
use super::port_cuts::PortCut;
use super::process_id::start_from_column;
use super::queue::Busy;
use super::store::Store;

/// Who asks for a device, and why.
#[derive(Debug, Clone, Default)]
pub struct LeaseRequest {
    /// `campaign`, `care`, …: what the device will be used for.
    pub purpose: String,
    pub campaign: Option<String>,
    pub runbook: Option<String>,
    /// This machine's name, as the holder shows.
    pub host: String,
    /// Higher first; equal priorities in the order they asked.
    pub priority: i32,
    /// How long the device is expected to be held, seconds (the plan's estimate): the
    /// queue's estimated starts come from it.
    pub expect_s: Option<f64>,
}

impl LeaseRequest {
    /// A request for `purpose` from this machine (by its host name).
    pub fn new(purpose: &str) -> LeaseRequest {
        LeaseRequest { purpose: purpose.into(), host: this_host(), ..LeaseRequest::default() }
    }
}

/// What a holder or waiter is, in words: `campaign C (runbook R)`, or `` `lab care` ``.
pub fn who(campaign: Option<&str>, runbook: Option<&str>, purpose: &str) -> String {
    match (campaign, runbook) {
        (Some(c), Some(r)) => format!("campaign {c} (runbook {r})"),
        (Some(c), None) => format!("campaign {c}"),
        _ => format!("`lab {purpose}`"),
    }
}

/// This machine's name, as leases and schedule slots name their holder.
pub fn this_host() -> String {
    nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_else(|_| "localhost".into())
}

/// Who holds a device's lease, as its row says; a [`Waiter`](super::Waiter) is one of these
/// waiting for it, with its place in the queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaseHolder {
    pub device: String,
    pub purpose: String,
    pub campaign: Option<String>,
    pub runbook: Option<String>,
    pub host: String,
    pub pid: u32,
    #[serde(skip)]
    pub start: Option<u64>,
    /// RFC 3339 UTC: since when it holds the device (a waiter: since when it waits).
    pub since: String,
    pub priority: i32,
    /// How long it expects to hold it, seconds.
    pub expect_s: Option<f64>,
}

impl LeaseHolder {
    /// The columns `from_row` reads, in order (of `device_leases`, and of `device_queue`).
    pub(super) const COLUMNS: &str =
        "device, purpose, campaign, runbook, host, pid, pid_start, since, priority, expect_s";
}

impl FromRow<'_> for LeaseHolder {
    fn from_row(c: &mut Columns<'_>) -> Result<Self, DbError> {
        Ok(LeaseHolder {
            device: c.get()?,
            purpose: c.get()?,
            campaign: c.get()?,
            runbook: c.get()?,
            host: c.get()?,
            pid: c.get()?,
            start: start_from_column(c.get()?),
            since: c.get()?,
            priority: c.get()?,
            expect_s: c.get()?,
        })
    }
}

impl LeaseHolder {
    pub fn process(&self) -> ProcessId {
        ProcessId { pid: self.pid, start: self.start }
    }

    fn owner(&self) -> Owner {
        Owner { pid: self.pid, start: self.start, lock: LockName::Device(self.device.clone()) }
    }

    /// One line naming the holder, for a refusal or a wait: campaign (runbook) on host,
    /// pid, since, and when it expects to be done.
    pub fn describe(&self) -> String {
        let what = who(self.campaign.as_deref(), self.runbook.as_deref(), &self.purpose);
        let eta = self.expected_end().map(|t| format!(", expected done by {t}")).unwrap_or_default();
        format!("{what} on {} (pid {}) since {}{eta}", self.host, self.pid, self.since)
    }

    /// `since` + `expect_s`, RFC 3339 UTC.
    pub fn expected_end(&self) -> Option<String> {
        let since = chrono::DateTime::parse_from_rfc3339(&self.since).ok()?;
        let s = self.expect_s.filter(|s| s.is_finite() && *s >= 0.0)?;
        let end = since + chrono::Duration::milliseconds((s * 1000.0) as i64);
        Some(end.with_timezone(&chrono::Utc).to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }
}

/// Where a store's leases are: its rows, and its locks.
#[derive(Debug, Clone)]
pub struct LeaseSpace {
    pub(super) db: Db,
    pub(super) locks: Arc<dyn Locks>,
    /// The store, as this process's devices handed on in it are known by ([`handover`]):
    /// every store opened on one database in a process is one (the process holds the locks).
    pub(super) place: Arc<str>,
}

impl LeaseSpace {
    /// The lease of `device` if nobody holds it and nobody waits for it; else who does.
    pub fn try_lease(&self, device: &str, req: &LeaseRequest) -> Result<Result<DeviceLease, Busy>, StoreError> {
        self.enqueue(device, req)?.try_take()
    }

    /// The lease of `device`, waiting in its queue as long as it is held: the calling
    /// thread sleeps until its turn (call it on a blocking thread).
    pub fn lease(&self, device: &str, req: &LeaseRequest) -> Result<DeviceLease, StoreError> {
        let ticket = self.enqueue(device, req)?;
        ticket
            .wait()?
            .ok_or_else(|| StoreError::Wait { device: device.to_string(), source: Box::new(LockError::Cancelled) })
    }

    /// The lease of a device whose lock `held` is this process's and whose holder's row
    /// is written ([`write_holder`]).
    pub(super) fn lease_of(&self, device: &str, held: Box<dyn Held>) -> DeviceLease {
        handover::hold(&self.key(device));
        DeviceLease { device: device.to_string(), space: self.clone(), held: Some(held), port_cut: None }
    }

    /// `device` of this store, in this process ([`handover`]).
    pub(super) fn key(&self, device: &str) -> handover::Key {
        (self.place.clone(), device.to_string())
    }

    /// The same store's leases as another process would have them (tests run two "processes"
    /// in one): nothing is handed between the two in the process.
    #[cfg(test)]
    pub(crate) fn apart(mut self) -> LeaseSpace {
        static APART: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = APART.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.place = format!("{} (apart {n})", self.place).into();
        self
    }

    /// Makes the first of `device`'s queue its holder if it is one of `tickets` (waiters of
    /// this process, [`handover`]): its row leaves the queue and becomes the holder's, in
    /// one statement on PostgreSQL. Its ticket and the port `lab care` left off; `None`
    /// when the first is another (or nobody), and then nothing changed.
    pub(super) fn hand_over(
        &self,
        device: &str,
        tickets: &[i64],
    ) -> Result<Option<(i64, Option<PortCut>)>, StoreError> {
        if tickets.is_empty() {
            return Ok(None);
        }
        let mut params = vals![device, now_rfc3339()].to_vec();
        let first = params.len() + 1;
        params.extend(tickets.iter().map(|t| super::backend::Value::from(*t)));
        let listed: Vec<String> = (first..first + tickets.len()).map(|i| format!("?{i}")).collect();
        let listed = listed.join(", ");
        let head = "SELECT ticket, device, purpose, campaign, runbook, host, pid, pid_start, priority, expect_s
                      FROM device_queue WHERE device = ?1 ORDER BY priority DESC, ticket LIMIT 1";
        let postgres = matches!(self.db, Db::Postgres(_));
        let got = self
            .db
            .call(move |c| {
                if postgres {
                    let sql = format!(
                        "WITH head AS ({head}),
                         taken AS (DELETE FROM device_queue q USING head
                                    WHERE q.ticket = head.ticket AND q.ticket IN ({listed}) RETURNING head.*),
                         holder AS (INSERT INTO device_leases (device, purpose, campaign, runbook, host, pid, pid_start,
                                        since, priority, expect_s)
                                    SELECT device, purpose, campaign, runbook, host, pid, pid_start, ?2, priority, expect_s
                                      FROM taken
                                    ON CONFLICT (device) DO UPDATE SET purpose = excluded.purpose,
                                       campaign = excluded.campaign, runbook = excluded.runbook, host = excluded.host,
                                       pid = excluded.pid, pid_start = excluded.pid_start, since = excluded.since,
                                       priority = excluded.priority, expect_s = excluded.expect_s)
                         SELECT taken.ticket, cut.device, cut.port, cut.since
                           FROM taken LEFT JOIN port_cuts cut ON cut.device = taken.device"
                    );
                    return c.query_opt(&sql, &params)?.map(|r| read_handed(&r)).transpose();
                }
                c.transaction(|c| {
                    let Some(first) = c.query_opt(head, &params[..1])? else { return Ok(None) };
                    let ticket = first.get::<i64>(0)?;
                    if !tickets_has(&params[2..], ticket) {
                        return Ok(None);
                    }
                    // The waiter's row becomes the holder's, as PostgreSQL's statement does.
                    c.execute(
                        "INSERT INTO device_leases (device, purpose, campaign, runbook, host, pid, pid_start, since,
                            priority, expect_s)
                         SELECT device, purpose, campaign, runbook, host, pid, pid_start, ?2, priority, expect_s
                           FROM device_queue WHERE ticket = ?1
                         ON CONFLICT (device) DO UPDATE SET purpose = excluded.purpose,
                            campaign = excluded.campaign, runbook = excluded.runbook, host = excluded.host,
                            pid = excluded.pid, pid_start = excluded.pid_start, since = excluded.since,
                            priority = excluded.priority, expect_s = excluded.expect_s",
                        &vals![ticket, params[1].clone()],
                    )?;
                    c.execute("DELETE FROM device_queue WHERE ticket = ?1", &vals![ticket])?;
                    let cut = c.query_opt(
                        "SELECT ?2, device, port, since FROM port_cuts WHERE device = ?1",
                        &vals![params[0].clone(), ticket],
                    )?;
                    Ok(Some(match cut {
                        Some(r) => read_handed(&r)?,
                        None => (ticket, None),
                    }))
                })
            })
            .map_err(StoreError::from)?;
        Ok(got)
    }

    /// The live holder of `device`'s lease, if any (a row whose owner let go of its lock is stale).
    pub fn lease_holder(&self, device: &str) -> Result<Option<LeaseHolder>, StoreError> {
        let device = device.to_string();
        let rows = self
            .db
            .call(move |c| {
                c.query(
                    &format!("SELECT {} FROM device_leases WHERE device = ?1", LeaseHolder::COLUMNS),
                    &vals![&device],
                )
            })
            .map_err(StoreError::from)?;
        Ok(self.live(rows)?.into_iter().next())
    }

    /// Every live holder, by device name.
    pub fn lease_holders(&self) -> Result<Vec<LeaseHolder>, StoreError> {
        let rows = self
            .db
            .call(|c| c.query(&format!("SELECT {} FROM device_leases ORDER BY device", LeaseHolder::COLUMNS), &[]))
            .map_err(StoreError::from)?;
        self.live(rows)
    }

    fn live(&self, rows: Vec<Row>) -> Result<Vec<LeaseHolder>, StoreError> {
        let holders: Vec<LeaseHolder> = read_all(&rows)?;
        Ok(split_alive(self.locks.as_ref(), holders, LeaseHolder::owner).0)
    }
}

impl Store {
    /// This store's leases: its rows, and its locks.
    pub fn leases(&self) -> LeaseSpace {
        LeaseSpace { db: self.lease_db(), locks: self.locks.clone(), place: format!("{:?}", self.location()).into() }
    }

    /// [`LeaseSpace::try_lease`] on this store.
    pub fn try_lease(&self, device: &str, req: &LeaseRequest) -> Result<Result<DeviceLease, Busy>, StoreError> {
        self.leases().try_lease(device, req)
    }

    /// [`LeaseSpace::lease`] on this store.
    pub fn lease(&self, device: &str, req: &LeaseRequest) -> Result<DeviceLease, StoreError> {
        self.leases().lease(device, req)
    }

    /// [`LeaseSpace::lease_holder`] on this store.
    pub fn lease_holder(&self, device: &str) -> Result<Option<LeaseHolder>, StoreError> {
        self.leases().lease_holder(device)
    }

    /// [`LeaseSpace::lease_holders`] on this store.
    pub fn lease_holders(&self) -> Result<Vec<LeaseHolder>, StoreError> {
        self.leases().lease_holders()
    }
}

/// A held lease: the device is this holder's until it is dropped (or its process dies).
#[derive(Debug)]
pub struct DeviceLease {
    device: String,
    space: LeaseSpace,
    /// The device's lock: let go of when the lease is dropped, unless it is handed on
    /// ([`handover`]); `None` once it was.
    held: Option<Box<dyn Held>>,
    /// The port `lab care` left off, as read when the lease was taken from the device's
    /// queue; `None` where it was not read.
    port_cut: Option<Option<PortCut>>,
}

impl DeviceLease {
    pub fn device(&self) -> &str {
        &self.device
    }

    pub(super) fn with_port_cut(mut self, cut: Option<PortCut>) -> DeviceLease {
        self.port_cut = Some(cut);
        self
    }

    /// The port `lab care` left off when the lease was taken (`Some(None)`: none), if it
    /// was read then: the holder switches it on before anything else.
    pub fn port_cut(&self) -> Option<Option<PortCut>> {
        self.port_cut.clone()
    }

    /// Turns `true` if the lease is lost while its holder lives ([`Held::lost`]: on
    /// PostgreSQL, the session that holds it ended); `None` where it cannot be.
    pub fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.held.as_ref().and_then(|h| h.lost())
    }
}

impl Drop for DeviceLease {
    fn drop(&mut self) {
        let Some(mut held) = self.held.take() else { return };
        let key = self.space.key(&self.device);
        // To the next in the device's queue, if it waits in this process: its lock kept. A
        // waiter that left meanwhile gives the lease back, and the next is asked.
        loop {
            let Ok(Some((ticket, cut))) = self.space.hand_over(&self.device, &handover::waiting(&key)) else { break };
            let next = DeviceLease {
                device: self.device.clone(),
                space: self.space.clone(),
                held: Some(held),
                port_cut: Some(cut),
            };
            match handover::give(&key, ticket, next) {
                Ok(()) => return,
                Err(mut back) => match back.held.take() {
                    Some(h) => held = h,
                    None => return,
                },
            }
        }
        let waiters = handover::let_go(&key);
        // The row first, then the lock: the next holder writes its own.
        let (device, me) = (self.device.clone(), std::process::id());
        // Best effort: a row left behind names a holder without its lock, and is replaced.
        let _ = self
            .space
            .db
            .call(move |c| c.execute("DELETE FROM device_leases WHERE device = ?1 AND pid = ?2", &vals![&device, me]));
        drop(held);
        handover::released(waiters);
    }
}

/// A handed device's ticket and port cut, from `ticket`, then `port_cuts`' columns (all
/// null: none).
fn read_handed(r: &Row) -> Result<(i64, Option<PortCut>), DbError> {
    let ticket = r.get::<i64>(0)?;
    let cut = match r.get::<Option<String>>(1)? {
        Some(_) => Some(PortCut { device: r.get(1)?, port: r.get(2)?, since: r.get(3)? }),
        None => None,
    };
    Ok((ticket, cut))
}

fn tickets_has(tickets: &[super::backend::Value], ticket: i64) -> bool {
    tickets.iter().any(|t| *t == super::backend::Value::from(ticket))
}

/// Writes (in `c`) the holder's row of a device whose lock this process holds.
pub(super) fn write_holder(c: &mut dyn Conn, device: &str, req: &LeaseRequest) -> Result<(), DbError> {
    let me = ProcessId::current();
    c.execute(
        "INSERT INTO device_leases (device, purpose, campaign, runbook, host, pid, pid_start, since, priority, expect_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (device) DO UPDATE SET purpose = ?2, campaign = ?3, runbook = ?4, host = ?5, pid = ?6,
            pid_start = ?7, since = ?8, priority = ?9, expect_s = ?10",
        &vals![
            device,
            &req.purpose,
            req.campaign.clone(),
            req.runbook.clone(),
            &req.host,
            me.pid,
            me.start_column(),
            now_rfc3339(),
            req.priority,
            req.expect_s
        ],
    )?;
    Ok(())
}

/// Now, RFC 3339 UTC to the second, as the rows keep times.
pub(super) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::process::Command;

    use super::*;

    pub(crate) fn req(campaign: &str) -> LeaseRequest {
        LeaseRequest {
            purpose: "campaign".into(),
            campaign: Some(campaign.into()),
            runbook: Some("battery".into()),
            host: "bench-1".into(),
            ..LeaseRequest::default()
        }
    }

    pub(crate) fn two_stores() -> (tempfile::TempDir, Store, Store) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.db");
        let a = Store::open(&path).unwrap();
        let b = Store::open(&path).unwrap();
        (dir, a, b)
    }

    #[test]
    fn one_holder_at_a_time_and_the_refusal_names_it() {
        let (_d, a, b) = two_stores();
        let held = a.try_lease("pixel-1", &req("c-1")).unwrap().unwrap();
        assert_eq!(held.device(), "pixel-1");
        let Err(Busy::Held(Some(holder))) = b.try_lease("pixel-1", &req("c-2")).unwrap() else {
            panic!("a second holder")
        };
        assert_eq!(
            (holder.campaign.as_deref(), holder.pid, holder.host.as_str()),
            (Some("c-1"), std::process::id(), "bench-1")
        );
        assert!(
            holder
                .describe()
                .starts_with(&format!("campaign c-1 (runbook battery) on bench-1 (pid {}) since 20", holder.pid)),
            "{}",
            holder.describe()
        );
        assert!(b.queued().unwrap().is_empty(), "a refused try leaves no place in the queue");
        assert!(b.try_lease("pixel-2", &req("c-2")).unwrap().is_ok(), "another device is free");
        drop(held);
        assert_eq!(b.lease_holder("pixel-1").unwrap(), None, "the row goes with the lease");
        let again = b.try_lease("pixel-1", &req("c-2")).unwrap().unwrap();
        assert_eq!(b.lease_holders().unwrap()[0].campaign.as_deref(), Some("c-2"));
        drop(again);
    }

    #[test]
    fn a_row_of_a_dead_holder_is_stale_and_taken_over() {
        let (_d, a, _b) = two_stores();
        let mut gone = Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        a.lock()
            .unwrap()
            .execute(
                "INSERT INTO device_leases (device, purpose, campaign, host, pid, pid_start, since)
                 VALUES ('pixel-1', 'campaign', 'c-0', 'bench-1', ?1, NULL, 't')",
                [pid],
            )
            .unwrap();
        assert_eq!(a.lease_holder("pixel-1").unwrap(), None);
        assert!(a.lease_holders().unwrap().is_empty());
        let held = a.try_lease("pixel-1", &req("c-1")).unwrap().unwrap();
        assert_eq!(a.lease_holder("pixel-1").unwrap().unwrap().campaign.as_deref(), Some("c-1"));
        drop(held);
    }
}
