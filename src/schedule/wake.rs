//! One sleep until a wall-clock instant.
//!
//! On Linux this is a `timerfd` on CLOCK_REALTIME with an absolute expiry: a machine that
//! was suspended past the instant wakes the sleeper as soon as it resumes (a monotonic
//! sleep would go on for the time it was suspended), and `TFD_TIMER_CANCEL_ON_SET` ends
//! the sleep when the clock is set, so the caller recomputes from the new wall time.
//! Elsewhere, a tokio sleep for the remaining time.

use chrono::{DateTime, Utc};

use super::{Now, ScheduleError};

/// Sleeps until `target` on `now`'s clock (a pinned clock: for as long as `target` is
/// after the pinned instant). Returns early when the system clock is set.
pub async fn until(target: DateTime<Utc>, now: Now) -> Result<(), ScheduleError> {
    let left = (target - now.get()).to_std().unwrap_or_default();
    let deadline = Utc::now() + chrono::Duration::from_std(left).unwrap_or_default();
    sleep_until(deadline, left).await
}

#[cfg(target_os = "linux")]
async fn sleep_until(deadline: DateTime<Utc>, _left: std::time::Duration) -> Result<(), ScheduleError> {
    use std::os::fd::{AsFd, AsRawFd, RawFd};

    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;

    struct Timer(TimerFd);
    impl AsRawFd for Timer {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_fd().as_raw_fd()
        }
    }
    let err = |e: std::io::Error| ScheduleError::Timer(e.to_string());
    let nix_err = |e: nix::Error| ScheduleError::Timer(e.to_string());
    let fd =
        TimerFd::new(ClockId::CLOCK_REALTIME, TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC).map_err(nix_err)?;
    let at = TimeSpec::new(deadline.timestamp(), i64::from(deadline.timestamp_subsec_nanos()));
    fd.set(Expiration::OneShot(at), TimerSetTimeFlags::TFD_TIMER_ABSTIME | TimerSetTimeFlags::TFD_TIMER_CANCEL_ON_SET)
        .map_err(nix_err)?;
    // SAFETY: `Timer` owns the descriptor, which lives as long as the AsyncFd and is
    // closed only when it is dropped (after deregistration).
    let fd = unsafe { AsyncFd::register_with_interest(Timer(fd), Interest::READABLE) }
        .map_err(|e| ScheduleError::Timer(e.to_string()))?;
    loop {
        let mut ready = fd.readable().await.map_err(err)?;
        let mut buf = [0u8; 8];
        match nix::unistd::read(&fd.get_ref().0, &mut buf) {
            Ok(8) => return Ok(()),
            Ok(_) | Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
            // The clock was set: the caller recomputes what is due.
            Err(nix::errno::Errno::ECANCELED) => return Ok(()),
            Err(e) => return Err(nix_err(e)),
        }
    }
}

#[cfg(not(target_os = "linux"))]
async fn sleep_until(_deadline: DateTime<Utc>, left: std::time::Duration) -> Result<(), ScheduleError> {
    tokio::time::sleep(left).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_at_the_wall_clock_instant() {
        let start = std::time::Instant::now();
        until(Utc::now() + chrono::Duration::milliseconds(150), Now::System).await.unwrap();
        let slept = start.elapsed();
        assert!(slept >= std::time::Duration::from_millis(140), "{slept:?}");
        assert!(slept < std::time::Duration::from_secs(2), "{slept:?}");
    }

    #[tokio::test]
    async fn a_past_instant_returns_at_once() {
        let start = std::time::Instant::now();
        until(Utc::now() - chrono::Duration::hours(1), Now::System).await.unwrap();
        assert!(start.elapsed() < std::time::Duration::from_millis(500));
    }
}
