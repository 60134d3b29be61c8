//! The stand-in `uhubctl` (standins/uhubctl) for integration tests: a folder with
//! `bin/uhubctl` (a symlink to the built stand-in, so it is found on PATH under uhubctl's
//! name), the JSON state of its hubs and the log of its calls.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use tempfile::TempDir;

use super::standin;

pub struct Hubs {
    pub dir: TempDir,
    /// UHUBCTL_STATE.
    pub state: PathBuf,
    /// UHUBCTL_LOG.
    pub log: PathBuf,
}

impl Hubs {
    /// Hubs described by `state` (the shape is in standins/uhubctl/src/main.rs).
    pub fn new(state: &Value) -> Hubs {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::os::unix::fs::symlink(standin("uhubctl"), dir.path().join("bin/uhubctl")).unwrap();
        let (state_file, log) = (dir.path().join("hubs.json"), dir.path().join("uhubctl.log"));
        std::fs::write(&state_file, serde_json::to_string_pretty(state).unwrap()).unwrap();
        Hubs { dir, state: state_file, log }
    }

    pub fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// This machine's PATH with the stand-in first.
    pub fn path(&self) -> String {
        format!("{}:{}", self.bin().display(), std::env::var("PATH").unwrap_or_default())
    }

    /// What a process needs to find the stand-in and its hubs.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [
            ("PATH", self.path()),
            ("UHUBCTL_STATE", self.state.display().to_string()),
            ("UHUBCTL_LOG", self.log.display().to_string()),
        ]
    }

    /// The sshd_config line that gives an SSH session the stand-in on its PATH (only) and
    /// its state and log (`sshd::start_with`).
    pub fn sshd_env(&self) -> String {
        format!(
            "SetEnv PATH={}:/usr/local/bin:/usr/bin:/bin UHUBCTL_STATE={} UHUBCTL_LOG={}",
            self.bin().display(),
            self.state.display(),
            self.log.display()
        )
    }

    /// `uhubctl ARGS`, found on PATH as a tether would find it.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new("uhubctl");
        c.args(args).envs(self.env().map(|(k, v)| (k, v)));
        c
    }

    /// The logged calls: (arguments, SSH_CONNECTION if the call ran in an SSH session).
    pub fn calls(&self) -> Vec<(String, Option<String>)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| match l.split_once("\tSSH_CONNECTION=") {
                Some((args, ssh)) => (args.to_string(), Some(ssh.to_string())),
                None => (l.to_string(), None),
            })
            .collect()
    }

    pub fn state(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(&self.state).unwrap()).unwrap()
    }

    /// Whether port `port` (1-based) of the hub at `location` is powered in the state.
    pub fn powered(&self, location: &str, port: usize) -> bool {
        let state = self.state();
        let hub = state["hubs"].as_array().unwrap().iter().find(|h| h["location"] == location).unwrap().clone();
        hub["ports"][port - 1]["powered"].as_bool().unwrap_or(true)
    }

    /// Changes the state as the physical world would, under the stand-in's lock.
    pub fn edit(&self, f: impl FnOnce(&mut Value)) {
        super::edit_json_locked(&self.state, &PathBuf::from(format!("{}.lock", self.state.display())), f);
    }
}

/// A stand-in state of one USB 2 hub at `location` that switches per port, its ports as
/// in `ports` (`{}`: powered, nothing plugged in; see standins/uhubctl/src/main.rs).
pub fn usb2_hub(location: &str, ports: Vec<Value>) -> Value {
    serde_json::json!({ "hubs": [
        { "location": location, "id": "2109:2817", "vendor": "VIA Labs, Inc.", "product": "USB2.0 Hub",
          "usb": "2.10", "switching": "ppps", "ports": ports } ]})
}

/// A two-trial runbook (20 min soaks, untethered) for the lab's device `pixel`, next to its
/// lab file.
pub fn pixel_runbook(lab: &super::TempLab) -> PathBuf {
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        "name = \"hub\"\nduration = \"20m\"\nrepeats = 2\ndevices = [\"pixel\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [preconditions]\nuntethered = true\n",
    )
    .unwrap();
    runbook
}

/// The `-a` switching calls of a uhubctl log, and a check that the rest is exactly the
/// listings the lab's tether makes around them: `-l L -p P` before and after an off, after
/// an on (it looks for the phone, then waits for it to leave or come back).
pub fn switches_with_their_listings(calls: &[String]) -> Vec<String> {
    let switches: Vec<String> = calls.iter().filter(|c| c.contains(" -a ")).cloned().collect();
    let mut expected = Vec::new();
    for s in &switches {
        let list = s.split(" -a ").next().unwrap_or_default().to_string();
        if s.ends_with(" -a off") || s.contains(" -a off ") {
            expected.extend([list.clone(), s.clone(), list]);
        } else {
            expected.extend([s.clone(), list]);
        }
    }
    assert_eq!(calls, expected, "switches and the tether's listings around them");
    switches
}
