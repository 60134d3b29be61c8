//! Where a campaign's attempts go to the store: one thread that records whatever attempts
//! are waiting in one transaction (the store's group commit), while the devices' tasks
//! await their answer.
//!
//! With each attempt on a blocking-pool thread of its own, 200 simulated phones ending
//! attempts together kept 200 threads queued on the store's connection, and the handing
//! over between them was a large part of a fast campaign's time. An attempt's task still
//! returns only once the transaction that holds the attempt is committed. Each attempt comes
//! encoded (`EncodedAttempt`, made by its own task): every device waits on this one thread, so
//! it does nothing but SQLite.

use tokio::sync::oneshot;

use std::time::{Duration, Instant};

use crate::store::{Dialect, EncodedAttempt, InFlight, Store, StoreError};

type Reply = oneshot::Sender<Result<(), StoreError>>;

/// What the recording thread is sent: an attempt to record, or an agent's attempt that
/// begins (its `attempts_in_flight` row).
enum Job {
    Record(Box<EncodedAttempt>, Reply),
    Begin(InFlight, Reply),
}

pub struct Recorder {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl Recorder {
    /// Starts the recording thread; it ends when the recorder is dropped and the
    /// attempts sent before are recorded.
    pub fn start(store: Store) -> std::io::Result<Recorder> {
        let (jobs, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new().name("lab-recorder".into()).spawn(move || {
            while let Ok(first) = rx.recv() {
                let (mut rows, mut replies, mut begins, mut begun) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for job in std::iter::once(first).chain(rx.try_iter()) {
                    match job {
                        Job::Record(a, reply) => {
                            rows.push(*a);
                            replies.push(reply);
                        }
                        Job::Begin(a, reply) => {
                            begins.push(a);
                            begun.push(reply);
                        }
                    }
                }
                // The attempts that begin first: their devices wait for it. One commit for
                // all of them, where each was a commit on the store's connection.
                if !begins.is_empty() {
                    let result = store.begin_attempts(&begins);
                    for reply in begun {
                        let _ = reply.send(result.as_ref().map_err(StoreError::copied).copied());
                    }
                }
                if rows.is_empty() {
                    continue;
                }
                // Kept for a retry only where a connection can be lost (PostgreSQL).
                let kept = (store.dialect() == Dialect::Postgres).then(|| rows.clone());
                let mut results = store.record_rows(rows);
                if let Some(rows) = kept {
                    retry_lost(&store, &rows, &mut results);
                }
                for (result, reply) in results.into_iter().zip(replies) {
                    let _ = reply.send(result);
                }
            }
        })?;
        Ok(Recorder { jobs })
    }

    /// Records `a`; returns once it is committed (or refused).
    pub async fn record(&self, a: EncodedAttempt) -> Result<(), StoreError> {
        committed(self.submit(a)?).await
    }

    /// Sends `a` to be recorded and returns at once: [`committed`] of the answer resolves
    /// once it is committed (or refused).
    pub fn submit(&self, a: EncodedAttempt) -> Result<Answer, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Record(Box::new(a), tx))?;
        Ok(Answer(rx))
    }

    /// Stores that an agent's attempt begins (`attempts_in_flight`), with whatever else
    /// the thread has waiting; returns once committed.
    pub async fn begin(&self, a: InFlight) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Begin(a, tx))?;
        committed(Answer(rx)).await
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        self.jobs.send(job).map_err(|_| StoreError::Internal("the recording thread has stopped".into()))
    }
}

/// The recording thread's answer for one attempt it was sent.
pub struct Answer(oneshot::Receiver<Result<(), StoreError>>);

/// Waits for `answer`: the attempt committed, or why not.
pub async fn committed(answer: Answer) -> Result<(), StoreError> {
    answer
        .0
        .await
        .unwrap_or_else(|_| Err(StoreError::Internal("the recording thread stopped before the commit".into())))
}

/// How long attempts whose recording lost the store's connection are tried again.
const RETRY_FOR: Duration = Duration::from_secs(600);

/// Records again, with backoff, each of `rows` whose result says the connection was lost
/// (the store connects again on its next call). One whose commit went through just before
/// the loss is a duplicate the second time: it was recorded, once. After [`RETRY_FOR`] the
/// error stands, the campaign ends, and `lab run --resume` runs those trials again.
fn retry_lost(store: &Store, rows: &[EncodedAttempt], results: &mut [Result<(), StoreError>]) {
    let until = Instant::now() + RETRY_FOR;
    let mut pause = Duration::from_millis(250);
    loop {
        let lost: Vec<usize> =
            (0..results.len()).filter(|&i| matches!(results[i], Err(StoreError::Unreachable(_)))).collect();
        if lost.is_empty() || Instant::now() + pause > until {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(10));
        let again = store.record_rows(lost.iter().map(|&i| rows[i].clone()).collect());
        for (i, r) in lost.into_iter().zip(again) {
            results[i] = match r {
                Err(StoreError::Duplicate { .. }) => Ok(()),
                r => r,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AttemptStatus, test_attempt, test_campaign};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn attempts_sent_together_are_each_answered_once_committed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        store.create_campaign(&test_campaign("c1", 300), 2, 1).unwrap();
        let recorder = std::sync::Arc::new(Recorder::start(store.clone()).unwrap());
        let tasks: Vec<_> = (0..300u32)
            .map(|i| {
                let r = recorder.clone();
                tokio::spawn(
                    async move { r.record(EncodedAttempt::encode(test_attempt("c1", i, 0, i % 5 != 0))).await },
                )
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let e = recorder.record(EncodedAttempt::encode(test_attempt("c1", 7, 0, true))).await.unwrap_err();
        assert!(matches!(e, StoreError::Duplicate { trial: 7, attempt: 0, .. }), "{e}");
        let stored = store.attempts("c1").unwrap();
        assert_eq!(stored.len(), 300);
        assert_eq!(stored.iter().filter(|a| a.status == AttemptStatus::Valid).count(), 240);
        assert!(store.commits() < 300, "sent together, committed together: {} commits", store.commits());
    }

    /// Agents' attempts that begin at once are stored together, each told once its row is
    /// committed; recording them ends their rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn attempts_that_begin_together_are_in_flight_until_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        store.create_campaign(&test_campaign("c1", 40), 2, 1).unwrap();
        let recorder = std::sync::Arc::new(Recorder::start(store.clone()).unwrap());
        let begun = |i: u32| InFlight {
            campaign: "c1".into(),
            trial_idx: i,
            attempt: 0,
            device: format!("d{}", i % 4),
            host: "h".into(),
            pid: 1,
            started_at: "t".into(),
            artifact_dir: format!("a/{i}"),
        };
        let tasks: Vec<_> = (0..40u32)
            .map(|i| {
                let r = recorder.clone();
                tokio::spawn(async move { r.begin(begun(i)).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let in_flight = |d: &str| store.in_flight_on(d).unwrap().len();
        assert_eq!((0..4).map(|d| in_flight(&format!("d{d}"))).sum::<usize>(), 40);
        for i in 0..40u32 {
            recorder.record(EncodedAttempt::encode(test_attempt("c1", i, 0, true))).await.unwrap();
        }
        assert_eq!((0..4).map(|d| in_flight(&format!("d{d}"))).sum::<usize>(), 0, "recorded: no longer in flight");
        assert_eq!(store.attempts("c1").unwrap().len(), 40);
    }

    /// Attempts whose recording lost the connection are recorded once it is back: the one
    /// whose commit had gone through counts as recorded (not twice), the other is recorded.
    #[test]
    fn attempts_whose_connection_was_lost_are_recorded_once_when_it_is_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        store.create_campaign(&test_campaign("c1", 3), 2, 1).unwrap();
        let rows: Vec<EncodedAttempt> =
            (0..3).map(|i| EncodedAttempt::encode(test_attempt("c1", i, 0, true))).collect();
        // Attempt 0 was committed before the connection broke; 1 was not; 2 was refused on its own.
        store.record_rows(vec![rows[0].clone()]).pop().unwrap().unwrap();
        let lost = || Err(StoreError::Unreachable("the connection to the store was lost".into()));
        let mut results = vec![lost(), lost(), Err(StoreError::Internal("refused".into()))];
        retry_lost(&store, &rows, &mut results);
        assert!(results[0].is_ok() && results[1].is_ok(), "{results:?}");
        assert!(matches!(results[2], Err(StoreError::Internal(_))), "not a lost connection: not tried again");
        let stored: Vec<u32> = store.attempts("c1").unwrap().iter().map(|a| a.trial_idx).collect();
        assert_eq!(stored, [0, 1]);
    }
}
