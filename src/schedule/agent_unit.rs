//! The systemd service `lab agent install --systemd` prints: a host's agent started at
//! boot and again whenever it ends (`Restart=always`), stopped by SIGTERM, which drains it.

use std::time::Duration;

use super::install::{Paths, path_text, systemd_arg};

/// Where and how one host's agent runs.
#[derive(Debug, Clone)]
pub struct AgentUnit {
    /// The `lab` binary and the lab file; the agent runs in the lab file's folder, as
    /// `lab schedule run-due` does.
    pub paths: Paths,
    /// The `[[host]]` it serves.
    pub host: String,
    /// How long systemd waits after SIGTERM for the trials in progress to finish before it
    /// kills the agent (their attempts are then recorded interrupted, "agent lost").
    pub stop_timeout: Duration,
}

impl AgentUnit {
    /// The service's file name, `lab-agent-HOST.service`.
    pub fn file_name(&self) -> String {
        format!("lab-agent-{}.service", self.host)
    }

    fn argv(&self) -> Vec<String> {
        vec![
            path_text(&self.paths.binary),
            "--lab".into(),
            path_text(&self.paths.lab),
            "agent".into(),
            "--host".into(),
            self.host.clone(),
        ]
    }

    /// The unit's text.
    pub fn systemd_service(&self) -> String {
        let exec: Vec<String> = self.argv().iter().map(|a| systemd_arg(a)).collect();
        // systemd rounds a stop timeout to seconds; 0 would mean "wait forever".
        let timeout = self.stop_timeout.as_secs().max(1);
        format!(
            "[Unit]\nDescription=lab agent: serves host {host}'s devices with the lab's campaigns\n\
             Wants=network-online.target\nAfter=network-online.target\n\n\
             [Service]\nType=exec\nWorkingDirectory={wd}\nExecStart={exec}\n\
             # SIGTERM drains: the trials in progress finish, nothing new is taken, exit 0.\n\
             # Only the agent gets it (mixed): the programs of a trial in progress keep running\n\
             # until it has finished them; whatever is left is killed at the timeout.\n\
             KillSignal=SIGTERM\nKillMode=mixed\nTimeoutStopSec={timeout}s\n\
             # Up again after a crash, a kill or `lab agent drain {host}` from elsewhere (which\n\
             # starts the binary in place then: an upgrade); `systemctl stop` keeps it stopped.\n\
             Restart=always\nRestartSec=10s\n\n\
             [Install]\nWantedBy=default.target\n",
            host = self.host,
            wd = systemd_arg(&path_text(&self.paths.workdir)),
            exec = exec.join(" "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_quotes_its_paths_and_drains_within_the_timeout() {
        let unit = AgentUnit {
            paths: Paths {
                binary: "/opt/my lab/lab".into(),
                lab: "/srv/lab/lab.toml".into(),
                workdir: "/srv/lab".into(),
            },
            host: "rack-1".into(),
            stop_timeout: Duration::from_secs(2 * 3600),
        };
        let text = unit.systemd_service();
        let lines: Vec<&str> = text.lines().collect();
        for want in [
            "ExecStart=\"/opt/my lab/lab\" --lab /srv/lab/lab.toml agent --host rack-1",
            "WorkingDirectory=/srv/lab",
            "KillSignal=SIGTERM",
            "TimeoutStopSec=7200s",
            "Restart=always",
        ] {
            assert!(lines.contains(&want), "{want} in\n{text}");
        }
        assert_eq!(unit.file_name(), "lab-agent-rack-1.service");
    }
}
