//! [`Locks`] on a PostgreSQL store: session-level advisory locks, which the server drops
//! with the session (the holder's process dying closes it). A lock waited for is held by
//! a connection of its own; the locks a process takes without waiting share one
//! ([`AtOnce`]). A device's lock is `pg_advisory_lock(key)`, its key from
//! `device_keys` (one number per device name, no collisions); a waiter's is the two-key
//! `pg_advisory_lock(a, b)` of its token. Whether a row's owner is alive is whether its
//! lock is held, whichever machine it runs on: tried, and let go at once if had.
//!
//! A session is the async client on a thread of its own, which sleeps on the connection
//! once the lock is held: it wakes only when the session ends, and then tells the holder
//! its lock is lost ([`Held::lost`]), without anyone asking the server in the meantime.
//! A lock let go is unlocked on its session, which then waits, asleep, for this process's
//! next lock (up to [`IDLE_SESSIONS`] of them): a new session costs the server a process
//! and an authentication, and the client SCRAM's 4 096 hash rounds.

use super::conn::DbError;
use super::locks::{Held, LockError, LockName, Locks, Owner};
use super::pg_owner::PgOwner;
use super::pg_tls::connect_watched;
use super::postgres_conn::placeholders;
use super::value::vals;
use crate::config::PgUrl;

#[derive(Debug)]
pub struct PgLocks {
    url: PgUrl,
    /// For keys and liveness; it never keeps a lock.
    admin: PgOwner,
    /// Which of the process's kept sessions may take this store's locks: its server,
    /// database and role.
    kept_key: String,
}

/// `device_keys` numbers already read in this process, by [`PgLocks::kept_key`] and name: a
/// name's number never changes, and each campaign's part opens a store of its own (one read
/// a device a part was two statements a device a campaign: docs/benchmarks.md, `agents`).
static NUMBERS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<(String, String), i64>>> =
    std::sync::LazyLock::new(Default::default);

fn numbers() -> std::sync::MutexGuard<'static, std::collections::HashMap<(String, String), i64>> {
    NUMBERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many sessions that hold nothing a process keeps for its next locks, in all.
const IDLE_SESSIONS: usize = 16;

/// The sessions this process keeps, oldest first, each with its [`PgLocks::kept_key`]; the
/// oldest closes when one more would pass [`IDLE_SESSIONS`]. A session waits for its next
/// lock while its sender is here, and closes when it is dropped.
static KEPT: std::sync::Mutex<std::collections::VecDeque<(String, Kept)>> =
    std::sync::Mutex::new(std::collections::VecDeque::new());

/// A kept session: what asks it for a lock.
#[derive(Debug)]
struct Kept(tokio::sync::mpsc::UnboundedSender<Job>);

/// A lock for a kept session, with the session's own sender: it keeps it while it works,
/// and gives it back to [`KEPT`] when it holds nothing again.
struct Job {
    ask: Ask,
    me: Kept,
}

fn kept() -> std::sync::MutexGuard<'static, std::collections::VecDeque<(String, Kept)>> {
    KEPT.lock().unwrap_or_else(|p| p.into_inner())
}

/// The newest kept session for `key`, taken out.
fn take_kept(key: &str) -> Option<Kept> {
    let mut all = kept();
    let at = all.iter().rposition(|(k, _)| k == key)?;
    all.remove(at).map(|(_, s)| s)
}

/// Keeps a session that holds nothing; the oldest kept closes if there are too many.
fn keep(key: &str, session: Kept) {
    let oldest = {
        let mut all = kept();
        all.push_back((key.to_string(), session));
        (all.len() > IDLE_SESSIONS).then(|| all.pop_front())
    };
    drop(oldest);
}

/// A lock for a session to take.
struct Ask {
    /// Takes it (waiting or not), returning whether it is held.
    sql: String,
    /// Lets it go, returning whether it was held.
    unlock: String,
    keys: Vec<i64>,
    got: std::sync::mpsc::Sender<Result<bool, LockError>>,
    /// The holder lets go: the sender it sends is dropped once the lock is free.
    release: tokio::sync::oneshot::Receiver<std::sync::mpsc::Sender<()>>,
    lost: tokio::sync::watch::Sender<bool>,
}

/// A held lock: let go of when this is dropped.
#[derive(Debug)]
struct Session {
    release: Option<tokio::sync::oneshot::Sender<std::sync::mpsc::Sender<()>>>,
    lost: tokio::sync::watch::Receiver<bool>,
}

impl Held for Session {
    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.lost.clone())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            let (done_tx, done) = std::sync::mpsc::channel::<()>();
            if release.send(done_tx).is_ok() {
                // The lock is free when this returns (unlocked, or its session closed): the
                // next holder may take it.
                let _ = done.recv();
            }
        }
    }
}

/// The lock's session's settings: the server's timeouts must not end it or its wait (a
/// role's `statement_timeout` would cut a wait short; `idle_session_timeout`, from
/// PostgreSQL 14, would free a held lock while its holder still works). Only the settings
/// this server has are set.
const NO_TIMEOUTS: &str = "SELECT set_config('statement_timeout', '0', false), set_config('lock_timeout', '0', false),
    set_config('idle_in_transaction_session_timeout', '0', false),
    CASE WHEN current_setting('server_version_num')::int >= 140000
         THEN set_config('idle_session_timeout', '0', false) END";

/// The open stores' locks in this process, by the URL's settings, while any store has them.
static SHARED: super::per_url::PerUrl<PgLocks> = super::per_url::PerUrl::new();

impl PgLocks {
    pub fn new(url: &PgUrl) -> Result<PgLocks, DbError> {
        Ok(PgLocks {
            url: url.clone(),
            admin: PgOwner::connect_reconnecting(&url.named("lab-admin"))?,
            kept_key: format!("{:?}", url.config),
        })
    }

    /// The locks of `url`'s stores in this process: one for every store open on it at once,
    /// so that a store opened next to another (an agent's campaign part, next to the agent's
    /// own) makes no session of its own for keys and liveness (docs/benchmarks.md, `agents`:
    /// eighty parts starting at once opened 240 sessions, each a server process and a SCRAM
    /// exchange). A new one once no store has it, so that nothing outlives the stores.
    pub fn shared(url: &PgUrl) -> Result<std::sync::Arc<PgLocks>, DbError> {
        SHARED.get(url, || PgLocks::new(url))
    }

    /// The advisory-lock call's arguments: one key or two.
    fn key(&self, name: &LockName) -> Result<(&'static str, Vec<i64>), LockError> {
        match name {
            LockName::Device(d) => self.named_key(d.clone()),
            // An agent's key is a `device_keys` row too, under a name no device has
            // (config names have no spaces): a number of its own.
            LockName::Agent(h) => self.named_key(format!("agent {h}")),
            LockName::Waiter { token, .. } => {
                let (a, b) = token.split_once('-').ok_or(LockError::BadToken)?;
                let number = |n: &str| n.parse::<i64>().map_err(|_| LockError::BadToken);
                let (a, b) = (number(a)?, number(b)?);
                // The two-key form takes INTEGERs; the keys are sent as BIGINTs.
                Ok(("CAST(CAST(?1 AS BIGINT) AS INTEGER), CAST(CAST(?2 AS BIGINT) AS INTEGER)", vec![a, b]))
            }
        }
    }
}

impl PgLocks {
    /// The one-key lock of `name` (its number from `device_keys`).
    fn named_key(&self, name: String) -> Result<(&'static str, Vec<i64>), LockError> {
        let known = numbers().get(&(self.kept_key.clone(), name.clone())).copied();
        let key = match known {
            Some(key) => key,
            None => {
                let n = name.clone();
                let key = self.admin.call(move |c| {
                    c.execute(
                        "INSERT INTO device_keys (device) VALUES (?1) ON CONFLICT (device) DO NOTHING",
                        &vals![&n],
                    )?;
                    c.query("SELECT key FROM device_keys WHERE device = ?1", &vals![&n])?[0].read::<i64>()
                })?;
                numbers().insert((self.kept_key.clone(), name), key);
                key
            }
        };
        Ok(("?1", vec![key]))
    }
}

impl Locks for PgLocks {
    fn lock(&self, name: &LockName, wait: bool) -> Result<Option<Box<dyn Held>>, LockError> {
        let (args, keys) = self.key(name)?;
        let sql = placeholders(&if wait {
            format!("SELECT true FROM (SELECT pg_advisory_lock({args})) AS held")
        } else {
            format!("SELECT pg_try_advisory_lock({args})")
        });
        let unlock = placeholders(&format!("SELECT pg_advisory_unlock({args})"));
        if !wait {
            return take_at_once(&self.url, &self.kept_key, sql, unlock, keys);
        }
        // A kept session first; one whose connection failed meanwhile is given up, and the
        // lock asked of a new one.
        loop {
            let (got_tx, got) = std::sync::mpsc::channel::<Result<bool, LockError>>();
            let (release, released) = tokio::sync::oneshot::channel();
            let (lost_tx, lost) = tokio::sync::watch::channel(false);
            let ask = Ask {
                sql: sql.clone(),
                unlock: unlock.clone(),
                keys: keys.clone(),
                got: got_tx,
                release: released,
                lost: lost_tx,
            };
            let kept = take_kept(&self.kept_key);
            let fresh = kept.is_none();
            match kept {
                Some(session) => {
                    let to = session.0.clone();
                    if to.send(Job { ask, me: session }).is_err() {
                        continue;
                    }
                }
                None => start_session(self.url.with_keepalives().named("lab-lock"), self.kept_key.clone(), ask)?,
            }
            match got.recv() {
                Ok(Ok(true)) => return Ok(Some(Box::new(Session { release: Some(release), lost }))),
                Ok(Ok(false)) => return Ok(None),
                Ok(Err(e)) if fresh => return Err(e),
                Err(_) if fresh => return Err(LockError::NoAnswer),
                Ok(Err(_)) | Err(_) => continue,
            }
        }
    }

    /// An owner whose lock cannot be looked up (a connection lost) counts as alive: its row
    /// is never removed on a doubt.
    fn alive(&self, owner: &Owner) -> bool {
        self.alive_all(std::slice::from_ref(owner))[0]
    }

    /// Asked by trying each owner's lock on the admin session, which holds none: had at
    /// once, the owner is gone, and the lock is let go in the same statement. Not from
    /// `pg_locks`, whose every read walks the lock table of all `max_connections` slots:
    /// with the 2 500 the agents bench allows, the reads were 5 % of the server's CPU. A
    /// try by someone else in that instant finds the lock busy, and only a dead owner's.
    fn alive_all(&self, owners: &[Owner]) -> Vec<bool> {
        // An owner whose key cannot be had counts as alive (as in `alive`).
        let keys: Vec<Option<Vec<i64>>> = owners.iter().map(|o| self.key(&o.lock).ok().map(|(_, k)| k)).collect();
        let asked: Vec<&Vec<i64>> = keys.iter().flatten().collect();
        if asked.is_empty() {
            return vec![true; owners.len()];
        }
        let sql = placeholders(&alive_sql(asked.len()));
        // (the form: 1 for one key, 2 for two; the keys, the second 0 for one key)
        let params: Vec<super::value::Value> =
            asked.iter().flat_map(|k| vals![k.len() as i64, k[0], k.get(1).copied().unwrap_or(0)]).collect();
        let held = self.admin.call(move |c| {
            let rows = c.query(&sql, &params)?;
            rows.iter().map(|r| r.read::<bool>()).collect::<Result<Vec<_>, _>>()
        });
        match held {
            Ok(held) if held.len() == asked.len() => {
                let mut held = held.into_iter();
                keys.iter().map(|k| k.is_none() || held.next().unwrap_or(true)).collect()
            }
            _ => vec![true; owners.len()],
        }
    }

    fn forget(&self, _name: &LockName) {}
}

/// Whether each of `n` locks is held by someone, in the order asked: rows of (form, a, b)
/// as [`PgLocks::alive_all`] sends them; each lock had at once is let go at once.
fn alive_sql(n: usize) -> String {
    let rows: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "({i}, CAST(?{} AS BIGINT), CAST(?{} AS BIGINT), CAST(?{} AS BIGINT))",
                3 * i + 1,
                3 * i + 2,
                3 * i + 3
            )
        })
        .collect();
    format!(
        "SELECT CASE WHEN o.form = 1
                THEN CASE WHEN pg_try_advisory_lock(o.a) THEN NOT pg_advisory_unlock(o.a) ELSE true END
                ELSE CASE WHEN pg_try_advisory_lock(CAST(o.a AS INTEGER), CAST(o.b AS INTEGER))
                          THEN NOT pg_advisory_unlock(CAST(o.a AS INTEGER), CAST(o.b AS INTEGER)) ELSE true END
                END
           FROM (VALUES {}) AS o (i, form, a, b) ORDER BY o.i",
        rows.join(", ")
    )
}

/// A new session on a thread of its own, which takes `first`, then each lock it is asked
/// for while it is kept (in [`KEPT`]), until it is let go from there or its connection
/// ends.
fn start_session(url: PgUrl, key: String, first: Ask) -> Result<(), LockError> {
    let (me, mut asks) = tokio::sync::mpsc::unbounded_channel::<Job>();
    // Its own sender, while it works; in `KEPT` while it waits, and its end there (the
    // last sender gone) ends the session.
    let mut me = Some(Kept(me));
    let first_got = first.got.clone();
    std::thread::Builder::new()
        .name("lab-lock".into())
        .spawn(move || {
            let ran = super::pg_tls::on_own_runtime(async move {
                let (client, mut ended) = match lock_session(&url).await {
                    Ok(c) => c,
                    Err(e) => return drop(first.got.send(Err(LockError::Db(e)))),
                };
                let mut next = Some(first);
                let freed = loop {
                    let ask = match next.take() {
                        Some(a) => a,
                        None => tokio::select! {
                            job = asks.recv() => match job {
                                Some(job) => {
                                    me = Some(job.me);
                                    job.ask
                                }
                                None => break None,
                            },
                            _ = &mut ended => break None,
                        },
                    };
                    match serve(&client, &mut ended, ask).await {
                        Served::Kept => {}
                        Served::Close(done) => break done,
                    }
                    let Some(mine) = me.take() else { break None };
                    keep(&key, mine);
                };
                // Closed before the holder hears its lock is free.
                drop(client);
                // (A task's handle must not be polled again once it has answered.)
                if !ended.is_finished() {
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), ended).await;
                }
                drop(freed);
            });
            if let Err(e) = ran {
                let _ = first_got.send(Err(LockError::Runtime(e)));
            }
        })
        .map_err(LockError::Thread)?;
    Ok(())
}

/// How long letting go of a lock may take before its session is closed instead.
const UNLOCK_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// A new session for locks, its server's timeouts off; and its connection's task.
async fn lock_session(url: &PgUrl) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), DbError> {
    let (client, ended) = connect_watched(url).await?;
    client.batch_execute(NO_TIMEOUTS).await.map_err(DbError::from)?;
    Ok((client, ended))
}

/// What became of a session after a lock.
enum Served {
    /// It holds nothing and can take the next lock.
    Kept,
    /// It must close (its connection failed, or the lock was not let go); the holder's
    /// signal, if any, to send once it is closed.
    Close(Option<std::sync::mpsc::Sender<()>>),
}

/// Takes `ask`'s lock; once held, sleeps until the holder lets go (then unlocks) or the
/// session ends (then tells the holder it is lost).
async fn serve(client: &tokio_postgres::Client, ended: &mut tokio::task::JoinHandle<()>, ask: Ask) -> Served {
    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
        ask.keys.iter().map(|k| k as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
    // Waiting for the lock is one statement that returns once it is held.
    let got = match client.query_one(&ask.sql, &refs).await {
        Ok(row) => row.get::<_, bool>(0),
        Err(e) => {
            let _ = ask.got.send(Err(LockError::Db(DbError::from(e))));
            return Served::Close(None);
        }
    };
    let _ = ask.got.send(Ok(got));
    if !got {
        return Served::Kept;
    }
    tokio::select! {
        _ = &mut *ended => {
            let _ = ask.lost.send(true);
            Served::Close(None)
        }
        done = ask.release => {
            let done = done.ok();
            // Bounded: a server that does not answer gets the session closed instead.
            let unlocked = tokio::time::timeout(UNLOCK_WITHIN, client.query_one(&ask.unlock, &refs)).await;
            match unlocked.map(|r| r.map(|r| r.get::<_, bool>(0))) {
                // Free: the holder hears it now.
                Ok(Ok(true)) => Served::Kept,
                _ => Served::Close(done),
            }
        }
    }
}

/// A process's session for the locks it takes without waiting (a waiter's own lock, a
/// device free at once, an agent's lock): none of its statements blocks, so it holds
/// them all, where a session each cost the server a process per waiting place (20
/// agents with three campaigns queued on their 200 phones held 1 300 sessions).
/// Session-level locks are reentrant in a session, so `held` refuses what this process
/// holds on it already, as another session would.
struct AtOnce {
    jobs: tokio::sync::mpsc::UnboundedSender<AtOnceJob>,
    lost: tokio::sync::watch::Receiver<bool>,
    held: std::sync::Mutex<std::collections::HashSet<HeldName>>,
}

/// A lock as the [`AtOnce`] session holds it: its unlock statement and keys.
type HeldName = (String, Vec<i64>);

/// A statement for the session: take (`pg_try_advisory_lock`) or let go.
struct AtOnceJob {
    sql: String,
    keys: Vec<i64>,
    reply: std::sync::mpsc::Sender<Result<bool, LockError>>,
}

/// This process's [`AtOnce`] session per server, database and role.
static AT_ONCE: std::sync::Mutex<Vec<(String, std::sync::Arc<AtOnce>)>> = std::sync::Mutex::new(Vec::new());

/// The session for `key`, a new one if there is none or it ended.
fn at_once_session(url: &PgUrl, key: &str) -> Result<std::sync::Arc<AtOnce>, LockError> {
    let mut all = AT_ONCE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, s)) = all.iter().find(|(k, s)| k == key && !*s.lost.borrow() && !s.jobs.is_closed()) {
        return Ok(s.clone());
    }
    all.retain(|(k, _)| k != key);
    let (jobs, mut rx) = tokio::sync::mpsc::unbounded_channel::<AtOnceJob>();
    let (lost_tx, lost) = tokio::sync::watch::channel(false);
    let (ready_tx, ready) = std::sync::mpsc::channel::<Result<(), LockError>>();
    let url = url.with_keepalives().named("lab-lock");
    std::thread::Builder::new()
        .name("lab-locks".into())
        .spawn(move || {
            let no_runtime = ready_tx.clone();
            let ran = super::pg_tls::on_own_runtime(async move {
                let (client, mut ended) = match lock_session(&url).await {
                    Ok(c) => c,
                    Err(e) => return drop(ready_tx.send(Err(LockError::Db(e)))),
                };
                let _ = ready_tx.send(Ok(()));
                loop {
                    tokio::select! {
                        job = rx.recv() => {
                            let Some(job) = job else { break };
                            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                                job.keys.iter().map(|k| k as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                            let got = client.query_one(&job.sql, &refs).await;
                            let _ = job.reply.send(got.map(|r| r.get::<_, bool>(0)).map_err(|e| LockError::Db(e.into())));
                        }
                        _ = &mut ended => break,
                    }
                }
                // Every lock it held is gone with it: their holders hear so.
                let _ = lost_tx.send(true);
            });
            if let Err(e) = ran {
                let _ = no_runtime.send(Err(LockError::Runtime(e)));
            }
        })
        .map_err(LockError::Thread)?;
    ready.recv().map_err(|_| LockError::NoAnswer)??;
    let session = std::sync::Arc::new(AtOnce { jobs, lost, held: Default::default() });
    all.push((key.to_string(), session.clone()));
    Ok(session)
}

impl AtOnce {
    fn ask(&self, sql: &str, keys: &[i64]) -> Result<bool, LockError> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.jobs
            .send(AtOnceJob { sql: sql.to_string(), keys: keys.to_vec(), reply })
            .map_err(|_| LockError::NoAnswer)?;
        answer.recv().map_err(|_| LockError::NoAnswer)?
    }
}

/// Takes a lock without waiting, on this process's [`AtOnce`] session.
fn take_at_once(
    url: &PgUrl,
    kept_key: &str,
    sql: String,
    unlock: String,
    keys: Vec<i64>,
) -> Result<Option<Box<dyn Held>>, LockError> {
    let session = at_once_session(url, kept_key)?;
    let name = (unlock.clone(), keys.clone());
    {
        let mut held = session.held.lock().unwrap_or_else(|p| p.into_inner());
        // Held here already: busy, as for anyone else.
        if !held.insert(name.clone()) {
            return Ok(None);
        }
    }
    let got = session.ask(&sql, &keys);
    if !matches!(got, Ok(true)) {
        session.held.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
    }
    match got? {
        true => Ok(Some(Box::new(HeldAtOnce { lost: session.lost.clone(), session, unlock, keys }))),
        false => Ok(None),
    }
}

/// A lock held on the [`AtOnce`] session: let go of when dropped.
struct HeldAtOnce {
    session: std::sync::Arc<AtOnce>,
    lost: tokio::sync::watch::Receiver<bool>,
    unlock: String,
    keys: Vec<i64>,
}

impl std::fmt::Debug for HeldAtOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeldAtOnce({:?})", self.keys)
    }
}

impl Held for HeldAtOnce {
    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        Some(self.lost.clone())
    }
}

impl Drop for HeldAtOnce {
    fn drop(&mut self) {
        // Free when this returns (unlocked, or gone with its session).
        if !*self.lost.borrow() {
            let _ = self.session.ask(&self.unlock, &self.keys);
        }
        let name = (std::mem::take(&mut self.unlock), std::mem::take(&mut self.keys));
        self.session.held.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::PgLocks;

    /// Stores open on one database at once share their locks (one session for keys and
    /// liveness); once no store has them they are gone, and the next store makes its own.
    #[test_needs::needs(postgres)]
    #[test]
    fn stores_open_at_once_share_their_locks_until_none_has_them() {
        let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        let a = PgLocks::shared(&url).unwrap();
        let b = PgLocks::shared(&url).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "a second store made locks of its own");
        let gone = Arc::downgrade(&a);
        drop((a, b));
        assert!(gone.upgrade().is_none(), "the locks outlived every store that had them");
        let c = PgLocks::shared(&url).unwrap();
        assert_eq!(Arc::strong_count(&c), 1, "the next store's locks are its own");
        let other = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        assert!(!Arc::ptr_eq(&c, &PgLocks::shared(&other).unwrap()), "two databases shared their locks");
    }

    /// An owner is alive while someone holds its lock, one key or two; asking takes a free
    /// lock only for the moment of the statement, and an owner whose key cannot be read
    /// counts as alive.
    #[test_needs::needs(postgres)]
    #[test]
    fn an_owner_is_alive_while_its_lock_is_held_and_asking_keeps_nothing() {
        use super::super::locks::{LockName, Locks, Owner};
        let url = crate::store::PgUrl::parse(&crate::testing::postgres::fresh_database()).unwrap();
        let _tables = crate::store::Store::open_postgres(&url).unwrap();
        let locks = PgLocks::shared(&url).unwrap();
        let device = |d: &str| LockName::Device(d.into());
        let waiter = |t: &str| LockName::Waiter { device: "pixel-1".into(), token: t.into() };
        let owner = |lock: LockName| Owner { pid: 1, start: None, lock };
        let held_device = locks.lock(&device("pixel-1"), false).unwrap().expect("pixel-1 free");
        let held_waiter = locks.lock(&waiter("17-4711"), true).unwrap().expect("the token free");
        let owners = [
            owner(device("pixel-1")),
            owner(device("pixel-2")),
            owner(waiter("17-4711")),
            owner(waiter("17-4712")),
            owner(waiter("not-a-token")),
        ];
        assert_eq!(locks.alive_all(&owners), [true, false, true, false, true]);
        assert!(locks.alive(&owners[0]) && !locks.alive(&owners[1]) && !locks.alive(&owners[3]));
        // Nothing asked about is left held by the asking session.
        let free_again = locks.lock(&device("pixel-2"), false).unwrap();
        assert!(free_again.is_some(), "pixel-2's lock was kept by the liveness check");
        assert!(locks.lock(&waiter("17-4712"), false).unwrap().is_some(), "the token was kept");
        drop(held_device);
        drop(held_waiter);
        assert_eq!(locks.alive_all(&owners[..3]), [false, true, false], "pixel-2 is held now, the others let go");
    }
}
