//! The state file, held locked (`flock` on STATE.lock) from reading to the last write of a
//! run, so that parallel runs, `--standin-*` calls and a test editing it with the same lock
//! lose no update; written whole to STATE.tmp and renamed, so a reader without the lock
//! never sees half a file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::state::State;

pub struct Store {
    path: PathBuf,
    _lock: fs::File,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

impl Store {
    /// Takes the lock (waiting for it), reads and checks the state.
    pub fn open(path: &Path) -> Result<(Store, State), String> {
        use std::os::fd::AsRawFd;
        let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(with_suffix(path, ".lock"))
            .map_err(|e| at(&e))?;
        // SAFETY: flock on a descriptor this function owns; it touches no memory. The lock
        // goes with the descriptor when the Store is dropped.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(at(&io::Error::last_os_error()));
        }
        let text = fs::read_to_string(path).map_err(|e| at(&e))?;
        let state: State = serde_json::from_str(&text).map_err(|e| at(&e))?;
        state.check().map_err(|e| at(&e))?;
        Ok((Store { path: path.to_path_buf(), _lock: lock }, state))
    }

    pub fn save(&self, state: &State) -> io::Result<()> {
        let tmp = with_suffix(&self.path, ".tmp");
        fs::write(&tmp, serde_json::to_string_pretty(state).expect("the state serializes") + "\n")?;
        fs::rename(tmp, &self.path)
    }
}
