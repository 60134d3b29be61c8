//! Device leases on this store: one holder per device at a time.
//!
//! The exclusion is an `flock(2)` on `<store>.locks/<device>.lock`, held through the
//! holder's open file: the kernel enforces it between processes (and between two stores
//! opened in one process), frees it the moment the holder's process dies, SIGKILL
//! included, and wakes a waiter blocked on it then, without anybody polling. The
//! `device_leases` row says who holds the device (purpose, campaign, process, host, since)
//! for `lab status` and for a refusal's message; a row whose process is gone is stale and
//! is taken over by the next holder. Waiting for a device, in order, is `queue.rs`.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::ProcessId;
use super::process_id::start_from_column;
use super::queue::Busy;
use super::sqlite::{Store, StoreError};

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

/// The holder of a device's lease, as its row says.
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
    /// RFC 3339 UTC: since when it holds the device.
    pub since: String,
    pub priority: i32,
    /// How long it expects to hold it, seconds.
    pub expect_s: Option<f64>,
}

impl LeaseHolder {
    pub fn process(&self) -> ProcessId {
        ProcessId { pid: self.pid, start: self.start }
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

    /// The file whose flock is `device`'s lease.
    pub(super) fn lock_file(&self, device: &str) -> Result<File, StoreError> {
        self.open_lock(&format!("{device}.lock"), true)
    }

    /// Opens (creating if `create`) a file in the lock folder.
    pub(super) fn open_lock(&self, name: &str, create: bool) -> Result<File, StoreError> {
        let dir = self.lock_dir();
        let io = |e: std::io::Error| StoreError::Internal(format!("lock file {name} in {}: {e}", dir.display()));
        if create {
            std::fs::create_dir_all(&dir).map_err(io)?;
        }
        // Device names are config names (a safe alphabet), so the file stays in `dir`.
        OpenOptions::new().create(create).truncate(false).write(true).open(dir.join(name)).map_err(io)
    }

    /// The lease of `device` if nobody holds it and nobody waits for it; else who does.
    pub fn try_lease(&self, device: &str, req: &LeaseRequest) -> Result<Result<DeviceLease, Busy>, StoreError> {
        self.enqueue(device, req)?.try_take()
    }

    /// The lease of `device`, waiting in its queue as long as it is held: the calling
    /// thread sleeps in the kernel until its turn (call it on a blocking thread).
    pub fn lease(&self, device: &str, req: &LeaseRequest) -> Result<DeviceLease, StoreError> {
        let ticket = self.enqueue(device, req)?;
        ticket.wait()?.ok_or_else(|| StoreError::Internal(format!("waiting for {device}: cancelled")))
    }

    /// Writes the holder's row for a device whose lock `file` this process holds.
    pub(super) fn hold(
        &self,
        conn: &Connection,
        device: &str,
        file: File,
        req: &LeaseRequest,
    ) -> Result<DeviceLease, StoreError> {
        let me = ProcessId::current();
        conn.execute(
            "INSERT INTO device_leases (device, purpose, campaign, runbook, host, pid, pid_start, since, priority,
                expect_s)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (device) DO UPDATE SET purpose = ?2, campaign = ?3, runbook = ?4, host = ?5, pid = ?6,
                pid_start = ?7, since = ?8, priority = ?9, expect_s = ?10",
            params![
                device,
                req.purpose,
                req.campaign,
                req.runbook,
                req.host,
                me.pid,
                me.start_column(),
                now_rfc3339(),
                req.priority,
                req.expect_s
            ],
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

/// Now, RFC 3339 UTC to the second, as the rows keep times.
pub(super) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

const COLUMNS: &str = "device, purpose, campaign, runbook, host, pid, pid_start, since, priority, expect_s";

fn holder_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LeaseHolder> {
    Ok(LeaseHolder {
        device: r.get(0)?,
        purpose: r.get(1)?,
        campaign: r.get(2)?,
        runbook: r.get(3)?,
        host: r.get(4)?,
        pid: r.get(5)?,
        start: start_from_column(r.get(6)?),
        since: r.get(7)?,
        priority: r.get(8)?,
        expect_s: r.get(9)?,
    })
}
#[cfg(test)]
pub(crate) mod tests {
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

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

    /// `flock -o FILE sleep 30`: another process holding the device's lock, as a `lab run`
    /// would (`-o`: the lock is flock's own, not inherited by `sleep`, as the lab's files are
    /// opened close-on-exec and never reach the apps it starts).
    pub(crate) fn other_holder(s: &Store, device: &str) -> Child {
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
