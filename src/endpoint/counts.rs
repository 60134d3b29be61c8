//! Requests and bytes per trial token, as the endpoint counted them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

/// Traffic for one token (or for requests that named none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TrafficCount {
    pub requests: u64,
    /// Bytes received: request line, headers and body.
    pub bytes: u64,
}

impl TrafficCount {
    /// What happened between `earlier` and `self` (counts only grow).
    pub fn since(&self, earlier: &TrafficCount) -> TrafficCount {
        TrafficCount {
            requests: self.requests.saturating_sub(earlier.requests),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// Counters shared by the server (which adds) and the runner (which reads). A plain
/// mutex: reading never wakes the server's thread.
#[derive(Debug, Default)]
pub struct TokenCounts {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    by_token: HashMap<String, TrafficCount>,
    /// The app's state reports (`POST /t/<token>/state`), apart: they are not the workload.
    reports: HashMap<String, TrafficCount>,
    unmatched: TrafficCount,
}

impl TokenCounts {
    pub fn record(&self, token: Option<&str>, bytes: u64) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = match token {
            Some(t) => c.by_token.entry(t.to_string()).or_default(),
            None => &mut c.unmatched,
        };
        slot.requests += 1;
        slot.bytes += bytes;
    }

    /// A state report to `token` (good or malformed): counted apart from the workload.
    pub fn record_report(&self, token: &str, bytes: u64) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = c.reports.entry(token.to_string()).or_default();
        slot.requests += 1;
        slot.bytes += bytes;
    }

    /// The state reports `token` received.
    pub fn reports(&self, token: &str) -> TrafficCount {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).reports.get(token).copied().unwrap_or_default()
    }

    pub fn get(&self, token: &str) -> TrafficCount {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).by_token.get(token).copied().unwrap_or_default()
    }

    /// Removes what `token` counted (workload, state reports) and returns it: a trial's
    /// counts are read once it is over, so the counters hold only the trials in flight.
    pub fn take(&self, token: &str) -> (TrafficCount, TrafficCount) {
        let mut c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (c.by_token.remove(token).unwrap_or_default(), c.reports.remove(token).unwrap_or_default())
    }

    /// Requests whose path named no token (`/favicon.ico`, a misconfigured client).
    pub fn unmatched(&self) -> TrafficCount {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).unmatched
    }
}

/// The token of a request path: `/t/<token>` or `/t/<token>/anything`. Tokens are
/// letters, digits, `-` and `_` (what the runner makes them of).
pub fn token_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/t/")?;
    let token = rest.split('/').next()?;
    (!token.is_empty() && token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')).then_some(token)
}

/// Whether `path` is a token's state-report path, `/t/<token>/state` (with an optional
/// trailing slash).
pub fn is_state_path(path: &str) -> bool {
    token_of(path).is_some_and(|t| {
        let rest = &path["/t/".len() + t.len()..];
        rest == "/state" || rest == "/state/"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_come_from_the_path() {
        assert_eq!(token_of("/t/0001-this-host-control-r0-a0"), Some("0001-this-host-control-r0-a0"));
        assert_eq!(token_of("/t/abc/deeper/path"), Some("abc"));
        assert_eq!(token_of("/t/"), None);
        assert_eq!(token_of("/t/a%20b"), None);
        assert_eq!(token_of("/favicon.ico"), None);
        assert_eq!(token_of("/tt/abc"), None);
        assert!(is_state_path("/t/abc/state"));
        assert!(is_state_path("/t/abc/state/"));
        assert!(!is_state_path("/t/abc/states"));
        assert!(!is_state_path("/t/abc/x/state"));
        assert!(!is_state_path("/t/state"));
    }

    #[test]
    fn counts_add_up_per_token() {
        let c = TokenCounts::default();
        c.record(Some("a"), 10);
        c.record(Some("a"), 5);
        c.record(Some("b"), 1);
        c.record(None, 7);
        c.record_report("a", 100);
        assert_eq!(c.get("a"), TrafficCount { requests: 2, bytes: 15 }, "state reports are not the workload's");
        assert_eq!(c.reports("a"), TrafficCount { requests: 1, bytes: 100 });
        assert_eq!(c.reports("b"), TrafficCount::default());
        assert_eq!(c.get("b"), TrafficCount { requests: 1, bytes: 1 });
        assert_eq!(c.get("zzz"), TrafficCount::default());
        assert_eq!(c.unmatched(), TrafficCount { requests: 1, bytes: 7 });
        let before = TrafficCount { requests: 1, bytes: 10 };
        assert_eq!(c.get("a").since(&before), TrafficCount { requests: 1, bytes: 5 });
        // A trial that is over takes its counts: nothing of it is kept.
        assert_eq!(c.take("a"), (TrafficCount { requests: 2, bytes: 15 }, TrafficCount { requests: 1, bytes: 100 }));
        assert_eq!((c.get("a"), c.reports("a")), (TrafficCount::default(), TrafficCount::default()));
        assert_eq!(c.get("b").requests, 1, "other tokens keep theirs");
        assert_eq!(c.take("zzz"), (TrafficCount::default(), TrafficCount::default()));
    }
}
