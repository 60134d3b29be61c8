//! [`Locks`] next to a SQLite store: `flock(2)` on files in `<store>.locks/`, held
//! through an open file, dropped by the kernel when the holder's process dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::PathBuf;

use super::locks::{Held, LockError, LockName, Locks, Owner};
use crate::store::ProcessId;

#[derive(Debug)]
pub struct FileLocks {
    pub dir: PathBuf,
}

#[derive(Debug)]
struct HeldFile(#[expect(dead_code, reason = "held for its lock: closing it releases it")] File);

impl Held for HeldFile {}

impl FileLocks {
    fn name(lock: &LockName) -> String {
        // Device names are config names (a safe alphabet), and tokens digits and `-`:
        // the files stay in the folder.
        match lock {
            LockName::Device(d) => format!("{d}.lock"),
            LockName::Waiter { device, token } => format!("{device}.wait-{token}.lock"),
            // A folder of their own: a host and a device may share a name.
            LockName::Agent(host) => format!("agents/{host}.lock"),
        }
    }
}

impl Locks for FileLocks {
    fn lock(&self, name: &LockName, wait: bool) -> Result<Option<Box<dyn Held>>, LockError> {
        let path = self.dir.join(Self::name(name));
        let io = |source: std::io::Error| LockError::File { path: path.clone(), source };
        // A device's file, and a waiter's own, are made; another waiter's that is gone
        // means that waiter is gone.
        let own = match name {
            LockName::Device(_) | LockName::Agent(_) => true,
            LockName::Waiter { .. } => !wait,
        };
        if own {
            std::fs::create_dir_all(path.parent().unwrap_or(&self.dir)).map_err(io)?;
        }
        let file = match OpenOptions::new().create(own).truncate(false).write(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(Box::new(Nothing))),
            Err(e) => return Err(io(e)),
        };
        if wait {
            file.lock().map_err(io)?;
            return Ok(Some(Box::new(HeldFile(file))));
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(Box::new(HeldFile(file)))),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(io(e)),
        }
    }

    fn alive(&self, owner: &Owner) -> bool {
        ProcessId { pid: owner.pid, start: owner.start }.alive()
    }

    fn forget(&self, name: &LockName) {
        if let LockName::Waiter { .. } = name {
            let _ = std::fs::remove_file(self.dir.join(Self::name(name)));
        }
    }
}

/// The lock of a waiter that is gone: nothing to hold.
#[derive(Debug)]
struct Nothing;

impl Held for Nothing {}
