//! Where the phone lives: ROOT/phone.json (the model, read and written around every
//! command so a test may edit it in between and a restarted stand-in is the same phone)
//! and ROOT/fs (the phone's files: `/data/local/tmp/x` is ROOT/fs/data/local/tmp/x).

use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::phone::Phone;
use crate::trace;

pub struct Store {
    root: PathBuf,
    serial: String,
    /// One command at a time changes the model (connections run on their own threads).
    lock: Mutex<()>,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Store {
    pub fn open(root: &Path, serial: &str) -> io::Result<Store> {
        let store = Store { root: root.to_path_buf(), serial: serial.to_string(), lock: Mutex::new(()) };
        for dir in [
            "data/local/tmp",
            "data/app",
            "data/misc/perfetto-traces",
            "data/misc/perfetto-configs",
            "sdcard",
            "system/bin",
        ] {
            fs::create_dir_all(store.fs().join(dir))?;
        }
        store.update(|_| ())?;
        Ok(store)
    }

    fn state_file(&self) -> PathBuf {
        self.root.join("phone.json")
    }

    /// The phone's `/`.
    pub fn fs(&self) -> PathBuf {
        self.root.join("fs")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where device path `path` (absolute, or relative to `/`) is on this machine;
    /// `..` cannot leave the phone.
    pub fn host_path(&self, path: &str) -> PathBuf {
        let mut out = self.fs();
        for c in Path::new(path).components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::ParentDir if out != self.fs() => {
                    out.pop();
                }
                _ => {}
            }
        }
        out
    }

    /// Loads the phone, brings it to now, runs `f` on it and saves it.
    pub fn update<R>(&self, f: impl FnOnce(&mut Phone) -> R) -> io::Result<R> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let _file = ModelLock::take(&self.root)?;
        let now = now_ms();
        let mut phone = match fs::read_to_string(self.state_file()) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", self.state_file().display()))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Phone::new(&self.serial, now),
            Err(e) => return Err(e),
        };
        for (_, out) in phone.advance(now) {
            self.finish_trace(&out, &phone);
        }
        let result = f(&mut phone);
        phone.note_battery();
        let tmp = self.root.join("phone.json.tmp");
        fs::write(&tmp, serde_json::to_string_pretty(&phone).expect("the model serializes"))?;
        fs::rename(tmp, self.state_file())?;
        Ok(result)
    }

    /// A perfetto session writing `device_path` started (see `trace.rs`).
    pub fn begin_trace(&self, device_path: &str, phone: &Phone) {
        let _ = trace::begin(&self.host_path(device_path), phone);
    }

    /// The session ended: the rest of its trace is written.
    pub fn finish_trace(&self, device_path: &str, phone: &Phone) {
        let _ = trace::finish(&self.host_path(device_path), phone);
    }
}

/// ROOT/phone.lock held exclusively (`flock`) while the model is read, changed and written,
/// so that a test editing phone.json at the same moment (tests/common/adb.rs `edit_state`
/// takes the same lock) or another stand-in process (`adb-phone power`) loses nothing.
pub struct ModelLock {
    _file: fs::File,
}

impl ModelLock {
    pub fn take(root: &Path) -> io::Result<ModelLock> {
        use std::os::fd::AsRawFd;
        let f = fs::OpenOptions::new().create(true).truncate(false).write(true).open(root.join("phone.lock"))?;
        // SAFETY: flock on a descriptor this function owns; it touches no memory. The lock
        // goes with the descriptor when the file is dropped.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ModelLock { _file: f })
    }
}
