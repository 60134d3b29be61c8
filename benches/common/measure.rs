//! A child process's wall time and peak RSS, for the benches that run the `lab` binary.

use std::process::Command;
use std::time::Instant;

/// One child process: wall time, peak RSS, whether it exited 0.
#[derive(Clone, Copy)]
pub struct Measured {
    pub secs: f64,
    pub peak_mb: f64,
    pub ok: bool,
}

/// Spawns `cmd` and reaps it with `wait4`, which gives the child's own peak RSS.
pub fn measure(cmd: &mut Command) -> Measured {
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data, so all-zero is a valid value; wait4 only writes
    // through the two pointers, which point at live locals, and reaps our own child (its
    // `Child` is dropped below without being waited on, which neither kills nor reaps).
    let (pid, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        (pid, usage)
    };
    let secs = start.elapsed().as_secs_f64();
    assert!(pid > 0, "wait4: {}", std::io::Error::last_os_error());
    drop(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    // Linux gives ru_maxrss in KiB.
    Measured { secs, peak_mb: usage.ru_maxrss as f64 / 1024.0, ok }
}

/// The median wall time of `runs` runs, with the peak of the same run; not ok if any failed.
pub fn median_of(runs: usize, mut f: impl FnMut() -> Measured) -> Measured {
    let mut all: Vec<Measured> = (0..runs).map(|_| f()).collect();
    let ok = all.iter().all(|m| m.ok);
    all.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    Measured { ok, ..all[all.len() / 2] }
}
