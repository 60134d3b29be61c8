//! An agent's threads ask the kernel for short time slices.
//!
//! An agent runs little and waits much: its work is handing a phone from one trial or one
//! campaign to the next, each step a thread woken by the store's answer. On a lab host
//! busy with other work (its PostgreSQL, other agents, the trials' own programs), a woken
//! thread waited tens of milliseconds for a core before it ran (docs/benchmarks.md,
//! `agents`). Linux's EEVDF scheduler (6.6 and newer) picks the runnable thread with the
//! earliest virtual deadline, and from 6.12 a thread may ask for a shorter slice
//! (`sched_setattr`'s `sched_runtime` for `SCHED_OTHER`), which makes its deadline earlier:
//! it runs sooner when woken, for less time each turn, with the same share of the CPU
//! over time (its weight, its nice level, is unchanged). Older kernels take the call and
//! ignore the slice; nothing else changes.

/// The slice asked for: the shortest the kernel grants (`sched_runtime` is clamped to
/// 0.1–100 ms; the default slice is 3 ms).
pub const SHORT_SLICE_NS: u64 = 100_000;

/// Asks for [`SHORT_SLICE_NS`] slices for the calling thread (a runtime's
/// `on_thread_start`): its policy and nice level stay as they are.
pub fn ask_short_slice() -> std::io::Result<()> {
    // The thread's nice level (Linux: `PRIO_PROCESS` 0 is the calling thread), kept.
    nix::errno::Errno::clear();
    // SAFETY: no pointers; -1 is a valid level, told apart from an error by errno.
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    if nice == -1 && nix::errno::Errno::last_raw() != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attr = libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: SHORT_SLICE_NS,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: `attr` is a valid `sched_attr` of the size it states, read by the kernel
    // for the calling thread (pid 0) only.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0u32) };
    match r {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Whether this kernel keeps the slices threads ask for (Linux 6.12 and newer), by its
/// release from `uname`: where it does not, the call is taken and the slice ignored.
pub fn kernel_keeps_slices() -> bool {
    let Ok(name) = nix::sys::utsname::uname() else { return false };
    let release = name.release().to_string_lossy().into_owned();
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (6, 12)
}

/// The calling thread's slice as the kernel keeps it (`sched_runtime`), in nanoseconds.
#[cfg(test)]
fn slice_ns() -> std::io::Result<u64> {
    let mut attr = libc::sched_attr {
        size: 0,
        sched_policy: 0,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 0,
        sched_deadline: 0,
        sched_period: 0,
    };
    let size = std::mem::size_of::<libc::sched_attr>() as u32;
    // SAFETY: the kernel writes at most `size` bytes into `attr`, which has that size.
    let r = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut libc::sched_attr, size, 0u32) };
    match r {
        0 => Ok(attr.sched_runtime),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_asks_gets_the_short_slice_where_the_kernel_has_them() {
        let (before, asked, after) =
            std::thread::spawn(|| (slice_ns(), ask_short_slice(), slice_ns())).join().expect("the thread");
        asked.expect("sched_setattr refused the short slice");
        let (before, after) = (before.expect("sched_getattr"), after.expect("sched_getattr"));
        if kernel_keeps_slices() {
            // The default slice first (3 ms on EEVDF), then the one asked for.
            assert_ne!(before, SHORT_SLICE_NS, "the thread had the short slice before it asked");
            assert_eq!(after, SHORT_SLICE_NS, "the kernel keeps custom slices but did not take this one");
        }
    }
}
