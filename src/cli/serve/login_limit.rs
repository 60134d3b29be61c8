//! Wrong tokens limited per client address: after [`FAILS`] wrong tokens within
//! [`WINDOW`] from one address, that address's tokens are refused without being compared,
//! for [`LOCK`] at first; each attempt while refused doubles the wait from then (up to
//! [`LOCK_MAX`]), so a client that keeps trying keeps being refused. An IPv6 address
//! counts by its /64, which one host usually holds whole. The table is bounded: entries
//! end when their lock and failures are past, and at [`ENTRIES`] the least recently seen
//! not locked goes.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens that lock an address when they fall within [`WINDOW`].
pub const FAILS: usize = 5;
pub const WINDOW: Duration = Duration::from_secs(60);
/// The first lock; each refused attempt doubles the wait from then.
pub const LOCK: Duration = Duration::from_secs(60);
pub const LOCK_MAX: Duration = Duration::from_secs(3600);
/// Addresses kept at most: about 200 bytes each.
const ENTRIES: usize = 10_000;

/// A refusal: how long the address waits, and how many of its attempts were refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lockout {
    pub retry_after: Duration,
    pub refused: u32,
}

#[derive(Debug)]
struct Entry {
    /// The wrong tokens within the window, oldest first (at most [`FAILS`]).
    fails: VecDeque<Instant>,
    locked_until: Option<Instant>,
    refused: u32,
    seen: Instant,
}

impl Entry {
    /// Whether the entry says nothing any more at `now`.
    fn spent(&self, now: Instant) -> bool {
        self.locked_until.is_none_or(|t| t <= now) && self.fails.back().is_none_or(|&t| now >= t + WINDOW)
    }
}

#[derive(Debug, Default)]
pub struct LoginLimit {
    table: Mutex<HashMap<IpAddr, Entry>>,
}

/// The key an address counts under: itself for IPv4, its /64 for IPv6.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
        v4 => v4,
    }
}

impl LoginLimit {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called before a token from `ip` is compared: `Err` when the address is locked out
    /// (the token must then not be compared), and the wait grows.
    pub fn before_compare(&self, ip: IpAddr, now: Instant) -> Result<(), Lockout> {
        let mut table = self.lock();
        let Some(e) = table.get_mut(&key(ip)) else { return Ok(()) };
        e.seen = now;
        match e.locked_until {
            Some(until) if until > now => {
                e.refused += 1;
                let wait = LOCK.saturating_mul(1 << e.refused.min(12)).min(LOCK_MAX);
                let until = until.max(now + wait);
                e.locked_until = Some(until);
                Err(Lockout { retry_after: until - now, refused: e.refused })
            }
            _ => Ok(()),
        }
    }

    /// A wrong token from `ip`: `Some` when it locks the address (the [`FAILS`]th within
    /// the window).
    pub fn failed(&self, ip: IpAddr, now: Instant) -> Option<Lockout> {
        let mut table = self.lock();
        if table.len() >= ENTRIES && !table.contains_key(&key(ip)) {
            table.retain(|_, e| !e.spent(now));
            // Still full: a tenth goes at once (so this sort is rare), the least recently
            // seen of those not locked first.
            if table.len() >= ENTRIES {
                let mut order: Vec<_> =
                    table.iter().map(|(k, e)| (e.locked_until.is_some_and(|t| t > now), e.seen, *k)).collect();
                order.sort_unstable();
                for (_, _, k) in order.into_iter().take(ENTRIES / 10) {
                    table.remove(&k);
                }
            }
        }
        let e = table.entry(key(ip)).or_insert_with(|| Entry {
            fails: VecDeque::with_capacity(FAILS),
            locked_until: None,
            refused: 0,
            seen: now,
        });
        e.seen = now;
        while e.fails.front().is_some_and(|&t| now >= t + WINDOW) {
            e.fails.pop_front();
        }
        if e.fails.len() == FAILS {
            e.fails.pop_front();
        }
        e.fails.push_back(now);
        (e.fails.len() == FAILS).then(|| {
            e.locked_until = Some(now + LOCK);
            Lockout { retry_after: LOCK, refused: e.refused }
        })
    }

    /// The right token from `ip`: its wrong ones are forgotten.
    pub fn succeeded(&self, ip: IpAddr) {
        self.lock().remove(&key(ip));
    }

    /// Addresses kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sixth_attempt_within_a_minute_is_refused_and_the_wait_grows_while_attempts_go_on() {
        let limit = LoginLimit::default();
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.7".parse().unwrap(), "192.0.2.8".parse().unwrap());
        let t0 = Instant::now();
        for n in 0..FAILS as u64 {
            let at = t0 + Duration::from_secs(10 * n);
            assert_eq!(limit.before_compare(a, at), Ok(()), "attempt {n} is compared");
            let locks = limit.failed(a, at);
            assert_eq!(locks.is_some(), n == FAILS as u64 - 1, "attempt {n}: {locks:?}");
        }
        let t5 = t0 + Duration::from_secs(40);
        // The sixth: refused, and the wait doubles from now with each refused attempt.
        let first = limit.before_compare(a, t5 + Duration::from_secs(1)).unwrap_err();
        assert_eq!(first, Lockout { retry_after: LOCK * 2, refused: 1 });
        let second = limit.before_compare(a, t5 + Duration::from_secs(2)).unwrap_err();
        assert_eq!(second, Lockout { retry_after: LOCK * 4, refused: 2 });
        for s in 3..20 {
            let l = limit.before_compare(a, t5 + Duration::from_secs(s)).unwrap_err();
            assert!(l.retry_after <= LOCK_MAX, "{l:?}");
        }
        // Another address is not affected.
        assert_eq!(limit.before_compare(b, t5), Ok(()));
        // Once the wait is over, tokens are compared again; the right one forgets it all.
        assert_eq!(limit.before_compare(a, t5 + LOCK_MAX + Duration::from_secs(60)), Ok(()));
        limit.succeeded(a);
        assert_eq!(limit.len(), 0);
    }

    #[test]
    fn wrong_tokens_spread_over_more_than_a_minute_lock_nothing() {
        let limit = LoginLimit::default();
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        let t0 = Instant::now();
        for n in 0..20u64 {
            assert_eq!(limit.failed(ip, t0 + Duration::from_secs(16 * n)), None, "{n}");
        }
        // An IPv6 host counts by its /64: its other addresses share the count.
        let same_64: IpAddr = "2001:db8::2".parse().unwrap();
        let t = t0 + Duration::from_secs(16 * 19) + WINDOW;
        let locks = (0..FAILS as u64).filter_map(|n| limit.failed(same_64, t + Duration::from_secs(n))).count();
        assert_eq!(locks, 1);
        assert!(limit.before_compare(ip, t + Duration::from_secs(FAILS as u64)).is_err());
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_the_locked() {
        let limit = LoginLimit::default();
        let t0 = Instant::now();
        let locked: IpAddr = "198.51.100.1".parse().unwrap();
        for n in 0..FAILS as u64 {
            limit.failed(locked, t0 + Duration::from_millis(n));
        }
        for n in 0..(ENTRIES as u32 + 500) {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            // A flood from many addresses, each with one wrong token.
            limit.failed(ip, t0 + Duration::from_secs(1) + Duration::from_millis(u64::from(n)));
        }
        assert!(limit.len() <= ENTRIES, "{}", limit.len());
        assert!(limit.before_compare(locked, t0 + Duration::from_secs(30)).is_err(), "the locked address stays");
    }
}
