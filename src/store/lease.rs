//! Device leases on this store: one holder per device at a time (issue 32's first half).
//!
//! The exclusion is an `flock(2)` on `<store>.locks/<device>.lock`, held through the
//! holder's open file: the kernel enforces it between processes (and between two stores
//! opened in one process), frees it the moment the holder's process dies, SIGKILL
//! included, and wakes a waiter blocked on it then, without anybody polling. The
//! `device_leases` row says who holds the device (purpose, campaign, process, host, since)
//! for `lab status` and for a refusal's message; a row whose process is gone is stale and
//! is taken over by the next holder.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::ProcessId;
use super::process_id::start_from_column;
use super::sqlite::{Store, StoreError};

/// Who asks for a device, and why.
#[derive(Debug, Clone)]
pub struct LeaseRequest<'a> {
    /// `campaign`, `care`, …: what the device will be used for.
    pub purpose: &'a str,
    pub campaign: Option<&'a str>,
    /// This machine's name, as the holder shows.
    pub host: &'a str,
    /// RFC 3339 UTC.
    pub at: &'a str,
}

/// The holder of a device's lease, as its row says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseHolder {
    pub device: String,
    pub purpose: String,
    pub campaign: Option<String>,
    pub host: String,
    pub pid: u32,
    #[serde(skip)]
    pub start: Option<u64>,
    /// RFC 3339 UTC.
    pub since: String,
}

impl LeaseHolder {
    pub fn process(&self) -> ProcessId {
        ProcessId { pid: self.pid, start: self.start }
    }
}

/// A held lease: the device is this holder's until it is dropped (or its process dies).
#[derive(Debug)]
pub struct DeviceLease {
    device: String,
    conn: Arc<Mutex<Connection>>,
    /// The locked file: closing it releases the lock.
    _file: File,
}

impl DeviceLease {
    pub fn device(&self) -> &str {
        &self.device
    }
}

impl Drop for DeviceLease {
    fn drop(&mut self) {
        // The row first, then the lock (when `_file` closes): the next holder writes its own.
        let me = std::process::id();
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // Best effort: a row left behind names a dead or finished holder and is replaced.
        let _ = conn.execute("DELETE FROM device_leases WHERE device = ?1 AND pid = ?2", params![self.device, me]);
    }
}

impl Store {
    /// Where the lock files are: `<store file>.locks/`.
    pub fn lock_dir(&self) -> PathBuf {
        let mut name = self.path().as_os_str().to_owned();
        name.push(".locks");
        PathBuf::from(name)
    }

    fn lock_file(&self, device: &str) -> Result<File, StoreError> {
        let dir = self.lock_dir();
        let io = |e: std::io::Error| StoreError::Internal(format!("lock file of {device} in {}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(io)?;
        // Device names are config names (a safe alphabet), so the file stays in `dir`.
        OpenOptions::new().create(true).truncate(false).write(true).open(dir.join(format!("{device}.lock"))).map_err(io)
    }

    /// The lease of `device` if nobody holds it; else who does (`None`: a holder whose row
    /// is not written yet, or another store's process that keeps no row).
    pub fn try_lease(
        &self,
        device: &str,
        req: &LeaseRequest<'_>,
    ) -> Result<Result<DeviceLease, Option<LeaseHolder>>, StoreError> {
        let file = self.lock_file(device)?;
        match file.try_lock() {
            Ok(()) => self.hold(device, file, req).map(Ok),
            Err(TryLockError::WouldBlock) => Ok(Err(self.lease_holder(device)?)),
            Err(TryLockError::Error(e)) => Err(StoreError::Internal(format!("locking {device}: {e}"))),
        }
    }

    /// The lease of `device`, waiting for it as long as it is held: the calling thread
    /// sleeps in the kernel until the holder releases it or dies (call it on a blocking
    /// thread).
    pub fn lease(&self, device: &str, req: &LeaseRequest<'_>) -> Result<DeviceLease, StoreError> {
        let file = self.lock_file(device)?;
        file.lock().map_err(|e| StoreError::Internal(format!("locking {device}: {e}")))?;
        self.hold(device, file, req)
    }

    fn hold(&self, device: &str, file: File, req: &LeaseRequest<'_>) -> Result<DeviceLease, StoreError> {
        let me = ProcessId::current();
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).execute(
            "INSERT INTO device_leases (device, purpose, campaign, host, pid, pid_start, since)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (device) DO UPDATE SET purpose = ?2, campaign = ?3, host = ?4, pid = ?5, pid_start = ?6,
                since = ?7",
            params![device, req.purpose, req.campaign, req.host, me.pid, me.start_column(), req.at],
        )?;
        Ok(DeviceLease { device: device.to_string(), conn: self.conn.clone(), _file: file })
    }

    /// The live holder of `device`'s lease, if any (a row whose process is gone is stale).
    pub fn lease_holder(&self, device: &str) -> Result<Option<LeaseHolder>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let row = conn
            .query_row(&format!("SELECT {COLUMNS} FROM device_leases WHERE device = ?1"), [device], holder_row)
            .optional()?;
        Ok(row.filter(|h| h.process().alive()))
    }

    /// Every live holder, by device name.
    pub fn lease_holders(&self) -> Result<Vec<LeaseHolder>, StoreError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut st = conn.prepare(&format!("SELECT {COLUMNS} FROM device_leases ORDER BY device"))?;
        let rows = st.query_map([], holder_row)?.collect::<Result<Vec<_>, _>>()?;
        Ok(rows.into_iter().filter(|h| h.process().alive()).collect())
    }
}

const COLUMNS: &str = "device, purpose, campaign, host, pid, pid_start, since";

fn holder_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseHolder> {
    Ok(LeaseHolder {
        device: r.get(0)?,
        purpose: r.get(1)?,
        campaign: r.get(2)?,
        host: r.get(3)?,
        pid: r.get(4)?,
        start: start_from_column(r.get(5)?),
        since: r.get(6)?,
    })
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    use super::*;

    fn req(campaign: &str) -> LeaseRequest<'_> {
        LeaseRequest { purpose: "campaign", campaign: Some(campaign), host: "bench-1", at: "2026-12-04T20:00:00Z" }
    }

    fn two_stores() -> (tempfile::TempDir, Store, Store) {
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
        let Err(Some(holder)) = b.try_lease("pixel-1", &req("c-2")).unwrap() else { panic!("a second holder") };
        assert_eq!(
            (holder.campaign.as_deref(), holder.pid, holder.host.as_str(), holder.since.as_str()),
            (Some("c-1"), std::process::id(), "bench-1", "2026-12-04T20:00:00Z")
        );
        assert!(b.try_lease("pixel-2", &req("c-2")).unwrap().is_ok(), "another device is free");
        drop(held);
        assert_eq!(b.lease_holder("pixel-1").unwrap(), None, "the row goes with the lease");
        let again = b.try_lease("pixel-1", &req("c-2")).unwrap().unwrap();
        assert_eq!(b.lease_holders().unwrap()[0].campaign.as_deref(), Some("c-2"));
        drop(again);
    }

    /// `flock -o FILE sleep 30`: another process holding the device's lock, as a `lab run`
    /// would (`-o`: the lock is flock's own, not inherited by `sleep`, as the lab's files are
    /// opened close-on-exec and never reach the apps it starts).
    fn other_holder(s: &Store, device: &str) -> Child {
        std::fs::create_dir_all(s.lock_dir()).unwrap();
        let file = s.lock_dir().join(format!("{device}.lock"));
        let child = Command::new("flock").arg("-o").arg(&file).args(["sleep", "30"]).spawn().unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while s.try_lease(device, &req("probe")).unwrap().is_ok() {
            assert!(Instant::now() < until, "flock never took the lock");
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }

    #[test]
    fn a_waiter_gets_the_device_the_moment_its_holder_is_killed() {
        let (_d, a, b) = two_stores();
        let mut holder = other_holder(&a, "pixel-1");
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let lease = b.lease("pixel-1", &req("c-2")).unwrap();
            tx.send(Instant::now()).unwrap();
            drop(lease);
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err(), "the waiter got a held device");
        holder.kill().unwrap(); // SIGKILL: no chance to release anything itself
        let killed = Instant::now();
        holder.wait().unwrap();
        let got = rx.recv_timeout(Duration::from_secs(10)).expect("the waiter never got the device");
        waiter.join().unwrap();
        assert!(got.duration_since(killed) < Duration::from_secs(5), "{:?}", got.duration_since(killed));
    }

    #[test]
    fn a_row_of_a_dead_holder_is_stale_and_taken_over() {
        let (_d, a, _b) = two_stores();
        let mut gone = Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        a.conn
            .lock()
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
