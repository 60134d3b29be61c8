//! Time for the runner and the devices.
//!
//! Real devices run on `Clock::Tokio`, which goes through `tokio::time`, so tests can
//! pause and advance it (`tokio::time::pause`) and an hour-long trial runs in
//! milliseconds. Simulated devices get a `Clock::Virtual` of their own: sleeping just
//! moves that device's clock forward, which makes simulated campaigns fast and
//! deterministic whatever the machine's load.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Clone, Debug)]
pub enum Clock {
    Tokio { epoch: tokio::time::Instant },
    Virtual(Arc<VirtualClock>),
}

#[derive(Debug, Default)]
pub struct VirtualClock {
    nanos: AtomicU64,
}

impl Clock {
    pub fn tokio() -> Self {
        Clock::Tokio { epoch: tokio::time::Instant::now() }
    }

    pub fn virtual_clock() -> Self {
        Clock::Virtual(Arc::new(VirtualClock::default()))
    }

    /// Time since this clock's epoch.
    pub fn now(&self) -> Duration {
        match self {
            Clock::Tokio { epoch } => epoch.elapsed(),
            Clock::Virtual(v) => Duration::from_nanos(v.nanos.load(Ordering::SeqCst)),
        }
    }

    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }

    /// Sleeps `d` on this clock. A virtual clock jumps forward and yields once, so
    /// other tasks still get to run.
    pub async fn sleep(&self, d: Duration) {
        match self {
            Clock::Tokio { .. } => tokio::time::sleep(d).await,
            Clock::Virtual(v) => {
                v.nanos.fetch_add(d.as_nanos() as u64, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn virtual_clock_advances_without_waiting() {
        let c = Clock::virtual_clock();
        let wall = std::time::Instant::now();
        c.sleep(Duration::from_secs(3600)).await;
        assert_eq!(c.now(), Duration::from_secs(3600));
        assert!(wall.elapsed() < Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let c = Clock::tokio();
        c.sleep(Duration::from_secs(7200)).await;
        assert!(c.now() >= Duration::from_secs(7200));
    }
}
