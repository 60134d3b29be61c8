//! The stand-in Otii 3 TCP server (standins/otii) for integration tests: started on a free
//! port with its state file, stopped (killed) when dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use super::standin;

pub struct Otii {
    pub dir: TempDir,
    pub port: u16,
    child: Child,
}

impl Otii {
    /// A server whose device draws `base_ma`, plus `pulse_ma` for the first 0.1 s of every
    /// second of a recording (`extra`: more of its arguments).
    pub fn start(base_ma: f64, pulse_ma: f64, extra: &[&str]) -> Otii {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(standin("otii"))
            .args(["--port", "0", "--state"])
            .arg(dir.path().join("state.json"))
            .args(["--base-ma", &base_ma.to_string(), "--pulse-ma", &pulse_ma.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().rsplit(':').next().and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("the stand-in Otii server said {line:?}"));
        Otii { dir, port, child }
    }

    /// What the server holds: licences, recordings with their markers, supply settings and
    /// the commands received (standins/otii/src/server.rs).
    pub fn state(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.state_file()).unwrap()).unwrap()
    }

    pub fn state_file(&self) -> PathBuf {
        self.dir.path().join("state.json")
    }
}

impl Drop for Otii {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
