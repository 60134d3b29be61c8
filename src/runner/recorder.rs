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

use crate::store::{EncodedAttempt, Store, StoreError};

type Job = (EncodedAttempt, oneshot::Sender<Result<(), StoreError>>);

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
                let (rows, replies): (Vec<EncodedAttempt>, Vec<_>) =
                    std::iter::once(first).chain(rx.try_iter()).unzip();
                for (result, reply) in store.record_rows(rows).into_iter().zip(replies) {
                    let _ = reply.send(result);
                }
            }
        })?;
        Ok(Recorder { jobs })
    }

    /// Records `a`; returns once it is committed (or refused).
    pub async fn record(&self, a: EncodedAttempt) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.jobs.send((a, tx)).map_err(|_| StoreError::Internal("the recording thread has stopped".into()))?;
        rx.await.unwrap_or_else(|_| Err(StoreError::Internal("the recording thread stopped before the commit".into())))
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
}
