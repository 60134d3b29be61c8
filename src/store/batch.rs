//! Group commit: attempts recorded at the same time share one transaction.
//!
//! A caller queues its attempt, then takes the connection. If the caller that held the
//! connection before it already committed the attempt, it returns that result; otherwise it
//! records every queued attempt in one transaction. An attempt is still wholly there or not
//! at all and a duplicate fails alone: a duplicate is found before any of its rows is
//! written, and should anything else fail halfway through an attempt, the transaction is
//! rolled back and done again with each attempt inside its own savepoint. (A savepoint per
//! attempt on every transaction made SQLite copy each page an attempt touched to a
//! statement journal first.) Nobody returns before the COMMIT that holds its attempt: what
//! a caller was told is recorded survives a `kill -9` as before (WAL, `synchronous = NORMAL`).

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, Transaction};

use super::encoded_attempt::EncodedAttempt;
use super::error::StoreError;

/// Where one attempt's result is left by whoever committed it.
pub(super) type Ticket = Arc<Mutex<Option<Result<(), StoreError>>>>;

/// Attempts waiting for a transaction.
#[derive(Default)]
pub(super) struct AttemptQueue {
    jobs: Mutex<Vec<(EncodedAttempt, Ticket)>>,
}

/// What a caller holding the connection has to do.
pub(super) enum Turn {
    /// Another caller recorded the attempt: its result.
    Done(Result<(), StoreError>),
    /// Record these (the caller's own among them) in one transaction.
    Record(Vec<(EncodedAttempt, Ticket)>),
}

impl AttemptQueue {
    /// Queues every one of `all` at once (whoever takes the queue takes all of them); each
    /// ticket gets its attempt's result.
    pub(super) fn push_all(&self, all: Vec<EncodedAttempt>) -> Vec<Ticket> {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        all.into_iter()
            .map(|a| {
                let ticket = Ticket::default();
                jobs.push((a, ticket.clone()));
                ticket
            })
            .collect()
    }

    /// Called with the connection locked.
    pub(super) fn turn(&self, mine: &Ticket) -> Turn {
        if let Some(done) = mine.lock().unwrap_or_else(PoisonError::into_inner).take() {
            return Turn::Done(done);
        }
        let jobs = std::mem::take(&mut *self.jobs.lock().unwrap_or_else(PoisonError::into_inner));
        if jobs.iter().any(|(_, t)| Arc::ptr_eq(t, mine)) {
            Turn::Record(jobs)
        } else {
            // Taken by a caller that did not get to commit it (it panicked): not recorded.
            // What it took is lost with it; what is queued now is for the next caller.
            self.jobs.lock().unwrap_or_else(PoisonError::into_inner).extend(jobs);
            Turn::Done(Err(StoreError::Internal("the transaction that held this attempt did not finish".into())))
        }
    }
}

/// Records `jobs` in one transaction and leaves each result in its ticket. `insert` writes
/// one attempt, and fails with `Duplicate` before writing anything when it is there.
/// Returns how many commits it made (0 or 1).
pub(super) fn record(
    conn: &mut Connection,
    jobs: Vec<(EncodedAttempt, Ticket)>,
    insert: impl Fn(&Transaction<'_>, &EncodedAttempt) -> Result<(), StoreError>,
) -> u64 {
    // Without savepoints: a duplicate wrote nothing, any other failure may have written
    // part of an attempt, and then the whole transaction goes.
    let fast = (|| -> Result<Option<Vec<Result<(), StoreError>>>, StoreError> {
        let tx = conn.transaction()?;
        let mut results = Vec::with_capacity(jobs.len());
        for (a, _) in &jobs {
            match insert(&tx, a) {
                Err(e) if !matches!(e, StoreError::Duplicate { .. }) => return Ok(None),
                r => results.push(r),
            }
        }
        tx.commit()?;
        Ok(Some(results))
    })();
    let (committed, results) = match fast {
        Ok(Some(results)) => (Ok(()), results),
        // Rolled back as the transaction was dropped: each attempt again, on its own.
        Ok(None) => with_savepoints(conn, &jobs, &insert),
        Err(e) => (Err(e), Vec::new()),
    };
    hand_out(jobs, committed, results)
}

/// Records `jobs` in one transaction, each inside its own savepoint: one that fails is
/// rolled back alone.
fn with_savepoints(
    conn: &mut Connection,
    jobs: &[(EncodedAttempt, Ticket)],
    insert: &impl Fn(&Transaction<'_>, &EncodedAttempt) -> Result<(), StoreError>,
) -> (Result<(), StoreError>, Vec<Result<(), StoreError>>) {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(jobs.len());
    let committed = (|| -> Result<(), StoreError> {
        let tx = conn.transaction()?;
        for (a, _) in jobs {
            tx.prepare_cached("SAVEPOINT attempt")?.execute([])?;
            let r = insert(&tx, a);
            if r.is_err() {
                tx.prepare_cached("ROLLBACK TO attempt")?.execute([])?;
            }
            tx.prepare_cached("RELEASE attempt")?.execute([])?;
            results.push(r);
        }
        tx.commit()?;
        Ok(())
    })();
    (committed, results)
}

/// Leaves each attempt's result in its ticket; returns the commits made (0 or 1).
pub(super) fn hand_out(
    jobs: Vec<(EncodedAttempt, Ticket)>,
    committed: Result<(), StoreError>,
    mut results: Vec<Result<(), StoreError>>,
) -> u64 {
    let commits = u64::from(committed.is_ok());
    for (i, (_, ticket)) in jobs.into_iter().enumerate() {
        let r = match (&committed, results.get_mut(i)) {
            (Ok(()), Some(r)) => std::mem::replace(r, Ok(())),
            // An attempt refused on its own is refused whatever became of the others.
            (Err(_), Some(r)) if r.is_err() => std::mem::replace(r, Ok(())),
            (Err(e), _) => Err(e.copied()),
            (Ok(()), None) => Err(StoreError::Internal("attempt left out of its transaction".into())),
        };
        *ticket.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    }
    commits
}
