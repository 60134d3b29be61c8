//! One live instance per PostgreSQL URL in this process, shared by whoever asks while any
//! of them holds it, and made anew once none does (so that nothing outlives its users): the
//! sessions an agent's campaign parts share (docs/benchmarks.md, `agents`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::conn::DbError;
use crate::config::PgUrl;

pub struct PerUrl<T>(Mutex<BTreeMap<String, Weak<T>>>);

impl<T> PerUrl<T> {
    pub const fn new() -> PerUrl<T> {
        PerUrl(Mutex::new(BTreeMap::new()))
    }

    /// The instance for `url`'s settings (its application name included), or a new one from
    /// `connect`, called without the cache's lock held: a server that is away holds up this
    /// caller alone. Of two made at once, the first stored is kept.
    pub fn get(&self, url: &PgUrl, connect: impl FnOnce() -> Result<T, DbError>) -> Result<Arc<T>, DbError> {
        let key = format!("{:?}", url.config);
        let all = || self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = all().get(&key).and_then(Weak::upgrade) {
            return Ok(found);
        }
        let new = Arc::new(connect()?);
        let mut all = all();
        all.retain(|_, w| w.strong_count() > 0);
        if let Some(found) = all.get(&key).and_then(Weak::upgrade) {
            return Ok(found);
        }
        all.insert(key, Arc::downgrade(&new));
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One instance per URL while it is held; a new one once nobody holds it; another URL
    /// (another application name) has its own.
    #[test]
    fn an_instance_is_shared_while_held_and_made_anew_after() {
        let cache: PerUrl<u32> = PerUrl::new();
        let url = PgUrl::parse("postgres://lab@db.example/lab").unwrap();
        let mut made = 0;
        let mut make = || {
            made += 1;
            Ok(made)
        };
        let first = cache.get(&url, &mut make).unwrap();
        let again = cache.get(&url, &mut make).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let other = cache.get(&url.named("lab-other"), &mut make).unwrap();
        assert_eq!((*first, *other), (1, 2));
        drop((first, again));
        assert_eq!(*cache.get(&url, &mut make).unwrap(), 3, "made anew once none held it");
        let failed = cache.get(&url.named("down"), || Err(DbError::Closed("down".into())));
        assert!(failed.is_err());
    }
}
