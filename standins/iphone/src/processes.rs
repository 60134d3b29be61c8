//! The processes DVT process control started on a phone and has not killed, kept in
//! `DIR/phones/<UDID>.processes.json` so a test sees what runs.

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::phone::Store;
use crate::profile::Profile;

/// pids handed out start here (a fresh phone's apps get pids in the hundreds to thousands).
const FIRST_PID: u64 = 1001;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u64,
    pub bundle_id: String,
    pub env: serde_json::Map<String, serde_json::Value>,
    pub args: Vec<String>,
    pub suspended: bool,
    /// The bundle's executable name (pcapd's `comm`), from the installed app.
    #[serde(default)]
    pub executable: String,
    /// What it does while it runs (sysmontap, energy), from the installed app.
    #[serde(default)]
    pub profile: Profile,
}

impl Process {
    /// A launch of installed `app` (its executable name and profile), not started yet (pid 0).
    pub fn of(
        app: &crate::phone::App,
        env: serde_json::Map<String, serde_json::Value>,
        args: Vec<String>,
        suspended: bool,
    ) -> Process {
        // The process's name is its bundle's executable (else the id's last part).
        let executable =
            app.executable.clone().unwrap_or_else(|| app.bundle_id.rsplit('.').next().unwrap_or_default().to_string());
        Process {
            pid: 0,
            bundle_id: app.bundle_id.clone(),
            env,
            args,
            suspended,
            executable,
            profile: app.profile.unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Processes {
    pub next_pid: u64,
    pub running: Vec<Process>,
}

fn path(store: &Store, udid: &str) -> PathBuf {
    store.phones_dir().join(format!("{udid}.processes.json"))
}

impl Processes {
    pub fn load(store: &Store, udid: &str) -> io::Result<Processes> {
        let path = path(store, udid);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Processes { next_pid: FIRST_PID, running: Vec::new() }),
            Err(e) => Err(e),
        }
    }

    /// Reads, changes with `f` and writes back, alone among the stand-in's threads.
    pub fn update<T>(store: &Store, udid: &str, f: impl FnOnce(&mut Processes) -> T) -> io::Result<T> {
        store.locked(|| {
            let mut p = Processes::load(store, udid)?;
            let out = f(&mut p);
            std::fs::write(path(store, udid), serde_json::to_vec_pretty(&p)?)?;
            Ok(out)
        })
    }

    /// Starts `process` under a new pid (its `pid` is ignored); the pid.
    pub fn start(&mut self, mut process: Process) -> u64 {
        process.pid = self.next_pid.max(FIRST_PID);
        self.next_pid = process.pid + 1;
        self.running.push(process);
        self.next_pid - 1
    }

    /// Starts `process`, killing the bundle's running copies first when `kill_existing`;
    /// the pids killed and the new one.
    pub fn launch(&mut self, process: Process, kill_existing: bool) -> (Vec<u64>, u64) {
        let killed = if kill_existing { self.of(&process.bundle_id) } else { Vec::new() };
        for pid in &killed {
            self.kill(*pid);
        }
        (killed, self.start(process))
    }

    /// Kills `pid`; whether it ran.
    pub fn kill(&mut self, pid: u64) -> bool {
        let before = self.running.len();
        self.running.retain(|p| p.pid != pid);
        self.running.len() < before
    }

    pub fn get(&self, pid: u64) -> Option<&Process> {
        self.running.iter().find(|p| p.pid == pid)
    }

    /// The pids running `bundle_id`.
    pub fn of(&self, bundle_id: &str) -> Vec<u64> {
        self.running.iter().filter(|p| p.bundle_id == bundle_id).map(|p| p.pid).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_new_for_every_start_and_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("phones")).unwrap();
        let store = Store::new(dir.path());
        let app = |id: &str| Process {
            pid: 0,
            bundle_id: id.into(),
            env: serde_json::Map::new(),
            args: vec![],
            suspended: false,
            executable: "App".into(),
            profile: Profile::default(),
        };
        let a = Processes::update(&store, "U", |p| p.start(app("com.a"))).unwrap();
        let b = Processes::update(&store, "U", |p| p.start(app("com.b"))).unwrap();
        assert_eq!((a, b), (FIRST_PID, FIRST_PID + 1));
        assert!(Processes::update(&store, "U", |p| p.kill(a)).unwrap());
        assert!(!Processes::update(&store, "U", |p| p.kill(a)).unwrap(), "already gone");
        let now = Processes::load(&store, "U").unwrap();
        assert_eq!((now.of("com.a"), now.of("com.b")), (vec![], vec![b]));
        assert_eq!(Processes::update(&store, "U", |p| p.start(app("com.a"))).unwrap(), b + 1, "pids are not reused");
    }
}
