//! Group commit: attempts recorded at the same time share one transaction.
//!
//! A caller queues its attempt, then takes the connection. If the caller that held the
//! connection before it already committed the attempt, it returns that result; otherwise it
//! records every queued attempt in one transaction, each inside its own savepoint, so an
//! attempt is still wholly there or not at all and a duplicate fails alone. Nobody returns
//! before the COMMIT that holds its attempt: what a caller was told is recorded survives a
//! `kill -9` as before (WAL, `synchronous = NORMAL`).

use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{Connection, Transaction};

use super::records::AttemptRecord;
use super::sqlite::StoreError;

/// Where one attempt's result is left by whoever committed it.
pub(super) type Ticket = Arc<Mutex<Option<Result<(), StoreError>>>>;

/// Attempts waiting for a transaction.
#[derive(Default)]
pub(super) struct AttemptQueue {
    jobs: Mutex<Vec<(AttemptRecord, Ticket)>>,
}

/// What a caller holding the connection has to do.
pub(super) enum Turn {
    /// Another caller recorded the attempt: its result.
    Done(Result<(), StoreError>),
    /// Record these (the caller's own among them) in one transaction.
    Record(Vec<(AttemptRecord, Ticket)>),
}

impl AttemptQueue {
    /// Queues every one of `all` at once (whoever takes the queue takes all of them); each
    /// ticket gets its attempt's result.
    pub(super) fn push_all(&self, all: Vec<AttemptRecord>) -> Vec<Ticket> {
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

/// Records `jobs` in one transaction, each in its own savepoint, and leaves each result in
/// its ticket. `insert` writes one attempt (and fails with `Duplicate` when it is there).
/// Returns how many commits it made (0 or 1).
pub(super) fn record(
    conn: &mut Connection,
    jobs: Vec<(AttemptRecord, Ticket)>,
    insert: impl Fn(&Transaction<'_>, &AttemptRecord) -> Result<(), StoreError>,
) -> u64 {
    let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(jobs.len());
    let committed = (|| -> Result<(), StoreError> {
        let tx = conn.transaction()?;
        for (a, _) in &jobs {
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
    let commits = u64::from(committed.is_ok());
    for (i, (_, ticket)) in jobs.into_iter().enumerate() {
        let r = match (&committed, results.get_mut(i)) {
            (Ok(()), Some(r)) => std::mem::replace(r, Ok(())),
            // An attempt refused on its own is refused whatever became of the others.
            (Err(_), Some(r)) if r.is_err() => std::mem::replace(r, Ok(())),
            (Err(e), _) => Err(copy(e)),
            (Ok(()), None) => Err(StoreError::Internal("attempt left out of its transaction".into())),
        };
        *ticket.lock().unwrap_or_else(PoisonError::into_inner) = Some(r);
    }
    commits
}

/// The same error for every attempt of a transaction that failed.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Duplicate { campaign, trial, attempt } => {
            StoreError::Duplicate { campaign: campaign.clone(), trial: *trial, attempt: *attempt }
        }
        other => StoreError::Internal(other.to_string()),
    }
}
