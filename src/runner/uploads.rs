//! A campaign's raw files on their way to the lab's bucket (docs/artifacts.md). Each
//! recorded attempt hands its folder over (`recorded`: a channel send, the trial goes on at
//! once); one task hashes the files, records them pending in the store, and uploads them a
//! few at a time, each confirmed by reading the object back. When the object store cannot
//! be reached the files are tried again with backoff, and stay local and pending. At its
//! start the task takes up this machine's files left pending by earlier runs too; at the
//! campaign's end `finish` waits for it, at most `drain_timeout`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::event::{Event, EventSink};
use super::trial::RunError;
use crate::store::{RawFileRow, RawFiles, RawFilesError, Store, note_failure, upload_confirmed};

/// Uploads at once: enough to hide a round trip's latency, few enough to leave the
/// devices' hosts their bandwidth.
const AT_ONCE: usize = 4;
/// A file that fails for another reason than an unreachable store (a mismatch, a refusal)
/// is tried this many times in a run; it stays pending after.
const TRIES: u32 = 3;
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// A folder (`<trial key>.attempt-<n>`) or file (`manifest.json`) of a campaign's folder.
struct Job {
    campaign: String,
    sub: String,
}

#[derive(Default)]
struct Tally {
    queued: AtomicU64,
    confirmed: AtomicU64,
    bytes: AtomicU64,
}

pub struct Uploads {
    /// `None` once finishing: the task then ends when its queue is empty.
    jobs: std::sync::Mutex<Option<mpsc::UnboundedSender<Job>>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    tally: Arc<Tally>,
    drain_timeout: Duration,
}

impl Uploads {
    /// The uploader of a lab whose raw files go to a bucket; `None` for a folder.
    pub fn start(raw: &RawFiles, store: &Store, events: &EventSink, drain_timeout: Duration) -> Option<Arc<Uploads>> {
        raw.bucket()?;
        let (jobs, rx) = mpsc::unbounded_channel();
        let tally = Arc::new(Tally::default());
        let task = tokio::spawn(run(raw.clone(), store.clone(), events.clone(), rx, tally.clone()));
        Some(Arc::new(Uploads {
            jobs: std::sync::Mutex::new(Some(jobs)),
            task: std::sync::Mutex::new(Some(task)),
            tally,
            drain_timeout,
        }))
    }

    /// `sub` of `campaign`'s folder (an attempt's folder, or `manifest.json`) is written
    /// and recorded: upload it. Never waits.
    pub fn recorded(&self, campaign: &str, sub: &str) {
        if let Some(jobs) = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            let _ = jobs.send(Job { campaign: campaign.into(), sub: sub.into() });
        }
    }

    /// Waits for the uploads still going, at most `drain_timeout`, and not at all once
    /// `stop` is (or becomes) `true` (Ctrl-C: the user wants the prompt back); what is left
    /// stays pending in the store (and local). Says so with `UploadsWaiting` and
    /// `UploadsDone`.
    pub async fn finish(&self, events: &EventSink, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some(mut task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        // No more jobs: the task ends once its queue is empty.
        drop(self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take());
        let started = Instant::now();
        let outstanding =
            || self.tally.queued.load(Ordering::Relaxed).saturating_sub(self.tally.confirmed.load(Ordering::Relaxed));
        if outstanding() > 0 {
            events.emit(Event::UploadsWaiting { files: outstanding() });
        }
        let stopped = async move {
            if stop.wait_for(|s| *s).await.is_err() {
                // Nobody can ask any more: only the timeout ends the wait.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = &mut task => {}
            _ = tokio::time::sleep(self.drain_timeout) => {}
            _ = stopped => {}
        }
        if !task.is_finished() {
            task.abort();
            let _ = task.await;
        }
        events.emit(Event::UploadsDone {
            confirmed: self.tally.confirmed.load(Ordering::Relaxed),
            bytes: self.tally.bytes.load(Ordering::Relaxed),
            pending: outstanding(),
            waited: started.elapsed(),
        });
    }
}

/// The uploader of `lab`'s campaigns: `None` when its raw files stay in a folder.
pub fn start_for(
    lab: &crate::config::Lab,
    store: &Store,
    events: &EventSink,
) -> Result<Option<Arc<Uploads>>, RunError> {
    let Some(settings) = &lab.object_store else { return Ok(None) };
    let raw = RawFiles::of_lab(lab).map_err(|e| RunError::Internal(e.to_string()))?;
    Ok(Uploads::start(&raw, store, events, settings.drain_timeout))
}

/// The task: jobs in, uploads out, a few at a time, pausing while the store is away.
async fn run(raw: RawFiles, store: Store, events: EventSink, mut rx: mpsc::UnboundedReceiver<Job>, tally: Arc<Tally>) {
    let Some(bucket) = raw.bucket().cloned() else { return };
    let mut queue: VecDeque<(RawFileRow, u32)> = left_pending(&raw, &store).await.into_iter().map(|r| (r, 0)).collect();
    tally.queued.fetch_add(queue.len() as u64, Ordering::Relaxed);
    let mut going: JoinSet<(RawFileRow, u32, Result<u64, RawFilesError>)> = JoinSet::new();
    let (mut open, mut pause, mut resume_at, mut outage) = (true, Duration::ZERO, Instant::now(), false);
    let keep_local = matches!(raw, RawFiles::Bucket { keep_local: true, .. });
    loop {
        while going.len() < AT_ONCE && Instant::now() >= resume_at {
            let Some((row, tries)) = queue.pop_front() else { break };
            let (b, s, root) = (bucket.clone(), store.clone(), raw.local().to_path_buf());
            going.spawn(async move {
                let r = upload_confirmed(&b, &s, &row, &root, keep_local).await;
                (row, tries, r)
            });
        }
        if !open && queue.is_empty() && going.is_empty() {
            return;
        }
        let wait_to_resume = !queue.is_empty() && going.len() < AT_ONCE;
        tokio::select! {
            job = rx.recv(), if open => match job {
                Some(job) => match raw.add(&store, &job.campaign, &job.sub).await {
                    Ok(rows) => {
                        tally.queued.fetch_add(rows.len() as u64, Ordering::Relaxed);
                        queue.extend(rows.into_iter().map(|r| (r, 0)));
                    }
                    // Not recorded: `lab artifacts sync` finds the folder's files by the
                    // store's attempts and records them then.
                    Err(e) => events.emit(Event::UploadsFailing { place: bucket.place().into(), detail: e.to_string() }),
                },
                None => open = false,
            },
            Some(done) = going.join_next(), if !going.is_empty() => {
                let Ok((row, tries, result)) = done else { continue };
                match result {
                    Ok(bytes) => {
                        tally.confirmed.fetch_add(1, Ordering::Relaxed);
                        tally.bytes.fetch_add(bytes, Ordering::Relaxed);
                        (pause, outage) = (Duration::ZERO, false);
                    }
                    Err(e) => {
                        note_failure(&store, &row, &e).await;
                        if e.is_unreachable() {
                            // The store is away: everything waits, longer each time.
                            if !outage {
                                events.emit(Event::UploadsFailing { place: bucket.place().into(), detail: e.to_string() });
                                outage = true;
                            }
                            pause = (pause * 2).clamp(FIRST_PAUSE, LONGEST_PAUSE);
                            resume_at = Instant::now() + pause;
                            queue.push_back((row, tries));
                        } else if tries + 1 < TRIES {
                            queue.push_back((row, tries + 1));
                        }
                        // Else it stays pending, with its error, for the next run or sync.
                    }
                }
            },
            // (A deadline already past returns at once: the loop starts the next uploads.)
            _ = tokio::time::sleep_until(resume_at.into()), if wait_to_resume => {},
        }
    }
}

/// This machine's files of the lab's bucket that earlier runs left pending, whose local
/// copy is here.
async fn left_pending(raw: &RawFiles, store: &Store) -> Vec<RawFileRow> {
    let Some(bucket) = raw.bucket() else { return Vec::new() };
    let (s, place, root, host) =
        (store.clone(), bucket.place().to_string(), raw.local().to_path_buf(), crate::store::this_host());
    tokio::task::spawn_blocking(move || {
        let rows = s.pending_raw_files(&place).unwrap_or_default();
        rows.into_iter().filter(|r| r.host == host && root.join(&r.campaign).join(&r.path).is_file()).collect()
    })
    .await
    .unwrap_or_default()
}
