//! `ProcessId`: the process that owns a row (a campaign's runner, a schedule slot's
//! claimant), as its pid and its start time: a pid alone can be the kernel's reuse of it
//! for some other process after the owner died.

use crate::collect::linux::proc_stat;

/// A process on this machine: its pid, and when it started (clock ticks after boot, field
/// 22 of `/proc/<pid>/stat`; `None` where that could not be read, as for rows written
/// before the store kept it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: u32,
    pub start: Option<u64>,
}

impl ProcessId {
    /// This process.
    pub fn current() -> ProcessId {
        ProcessId::of(std::process::id())
    }

    /// Process `pid` as it is now (its start time read if it exists).
    pub fn of(pid: u32) -> ProcessId {
        ProcessId { pid, start: start_ticks(pid) }
    }

    /// The start time as the store's column holds it.
    pub(super) fn start_column(&self) -> Option<i64> {
        self.start.map(|t| t as i64)
    }

    /// Whether this process still runs: its pid exists (signal 0; a process of another
    /// user answers EPERM, and exists) and, where its start time is known, the process
    /// with that pid started then.
    pub fn alive(&self) -> bool {
        use nix::errno::Errno;
        let Ok(pid) = i32::try_from(self.pid) else { return false };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
            Ok(()) | Err(Errno::EPERM) => {}
            Err(_) => return false,
        }
        match (self.start, start_ticks(self.pid)) {
            (Some(recorded), Some(now)) => recorded == now,
            // Gone between the two looks, or no /proc: the signal's answer stands.
            (Some(_), None) => !std::path::Path::new("/proc/self/stat").exists(),
            (None, _) => true,
        }
    }
}

/// A start column's value (SQLite's INTEGER is i64; clock ticks after boot fit in it).
pub(super) fn start_from_column(start: Option<i64>) -> Option<u64> {
    start.map(|t| t as u64)
}

/// When process `pid` started, from `/proc/<pid>/stat` (Linux).
fn start_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    proc_stat::parse(&text).ok()?.start_time_ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_knows_when_it_started() {
        let me = ProcessId::current();
        assert_eq!(me.pid, std::process::id());
        assert!(me.start.is_some(), "no start time read from /proc");
        assert!(me.alive());
        assert!(ProcessId { start: None, ..me }.alive(), "without a start time the pid decides");
    }

    #[test]
    fn a_reused_pid_is_not_the_process_that_was_recorded() {
        // As if the recorded owner died and the kernel gave its pid to this process.
        let me = ProcessId::current();
        let earlier = ProcessId { start: Some(me.start.unwrap() - 1), ..me };
        assert!(!earlier.alive());
    }

    #[test]
    fn a_process_that_exited_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = ProcessId::of(child.id());
        child.wait().unwrap();
        assert!(!id.alive(), "{id:?}");
    }
}
