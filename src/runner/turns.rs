//! A campaign's turns on its devices: each device's lease, held or waited for in the
//! device's queue (`store/queue.rs`). A device that is held by someone else is waited for
//! by a thread of its own that sleeps in the kernel until its turn: nothing in the
//! orchestrator wakes up for it.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use tokio::sync::{oneshot, watch};

use super::event::{Event, EventSink};
use super::trial::{RunError, blocking};
use crate::store::{DeviceLease, LeaseRequest, QueueTicket, Store, StoreError};

/// One device's turn.
#[derive(Debug)]
pub enum Turn {
    /// The lease is this campaign's.
    Held(DeviceLease),
    /// Waiting in the device's queue.
    Waiting(WaitingTurn),
    /// Given back when the device's worker was done: a later round joins the queue again.
    Released,
}

/// Joins `device`'s queue: its lease at once if it is free and nobody is ahead; else a
/// wait, announced with who has it.
pub async fn join(store: &Store, device: &str, req: LeaseRequest, events: &EventSink) -> Result<Turn, RunError> {
    let (s, dev) = (store.clone(), device.to_string());
    let joined = blocking(move || join_now(&s, &dev, &req)).await?;
    turn(device, joined, events)
}

/// What joining a queue came to: the ticket, and the lease or (who has it, how many are ahead).
type Joined = (Arc<QueueTicket>, Result<DeviceLease, (String, usize)>);

/// [`join`]'s store calls (blocking).
fn join_now(store: &Store, device: &str, req: &LeaseRequest) -> Result<Joined, StoreError> {
    let ticket = store.enqueue(device, req)?;
    let first = ticket.try_take_counting()?;
    Ok((ticket, first.map_err(|(busy, ahead)| (busy.describe(), ahead))))
}

/// The turn a join came to; a wait is announced with who has the device.
fn turn(device: &str, (ticket, first): Joined, events: &EventSink) -> Result<Turn, RunError> {
    Ok(match first {
        Ok(lease) => Turn::Held(lease),
        Err((busy, ahead)) => {
            events.emit(Event::DeviceWaiting {
                device: device.to_string(),
                position: ahead as u32 + 1,
                holder: busy.clone(),
            });
            Turn::Waiting(WaitingTurn::start(ticket, busy)?)
        }
    })
}

/// A place in a device's queue, being waited on. Dropping it leaves the queue.
#[derive(Debug)]
pub struct WaitingTurn {
    ticket: Arc<QueueTicket>,
    rx: oneshot::Receiver<Result<Option<DeviceLease>, StoreError>>,
    since: Instant,
    /// Who had the device or its turn when the wait began, in words.
    pub busy: String,
}

impl WaitingTurn {
    fn start(ticket: Arc<QueueTicket>, busy: String) -> Result<WaitingTurn, RunError> {
        let (tx, rx) = oneshot::channel();
        // One answer, from whichever comes first: the waiting thread, or a holder of this
        // process that hands the device on straight to this task (no thread to wake between).
        let tx = Arc::new(std::sync::Mutex::new(Some(tx)));
        let take = |tx: &std::sync::Mutex<Option<_>>| tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let handed = tx.clone();
        ticket.deliver_to(Box::new(move |lease| match take(&handed) {
            Some(tx) => tx.send(Ok(Some(lease))).map_err(|back| match back {
                Ok(Some(lease)) => Box::new(lease),
                _ => unreachable!("the lease sent is the one given back"),
            }),
            None => Err(Box::new(lease)),
        }));
        let t = ticket.clone();
        std::thread::Builder::new()
            .name(format!("queue {}", ticket.device()))
            .spawn(move || {
                let got = t.wait();
                // A lease nobody is there to take any more (the wait was dropped, or answered)
                // is given back.
                let unsent = match take(&tx) {
                    Some(tx) => tx.send(got).err(),
                    None => Some(got),
                };
                if let Some(Ok(Some(lease))) = unsent {
                    drop(lease);
                }
            })
            .map_err(|e| RunError::Internal(format!("cannot start the thread that waits for a device: {e}")))?;
        Ok(WaitingTurn { ticket, rx, since: Instant::now(), busy })
    }

    /// The lease, once it is this campaign's turn; `None` when `stop` is set first (the
    /// place in the queue is then given up).
    pub async fn taken(&mut self, stop: &mut watch::Receiver<bool>) -> Result<Option<DeviceLease>, RunError> {
        tokio::select! {
            got = &mut self.rx => got
                .map_err(|_| RunError::Internal(format!("the wait for {} ended without an answer", self.ticket.device())))?
                .map_err(RunError::from),
            _ = stop.wait_for(|s| *s) => {
                self.ticket.cancel();
                Ok(None)
            }
        }
    }
}

impl Drop for WaitingTurn {
    fn drop(&mut self) {
        self.ticket.cancel();
    }
}

/// What to wait for before a campaign starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartWhen {
    /// Every device now, or not at all (`lab run --no-wait`).
    AllNow,
    /// As soon as one device is this campaign's: the rest are waited for by their
    /// workers (`lab run`).
    AnyFree,
    /// Every device, waiting for them until the deadline (a schedule slot).
    All(Option<Instant>),
}

/// Every device's turn, by name.
#[derive(Debug, Default)]
pub struct Turns {
    pub turns: BTreeMap<String, Turn>,
    /// What the campaign asked for its devices with: a device given back after its worker
    /// was done is asked for again with it.
    pub request: LeaseRequest,
}

impl Turns {
    /// Joins the queue of each device (`expect_s`: how long the campaign expects to hold
    /// it): those free and with nobody ahead are held at once; the others are waited for,
    /// each announced with who has it.
    pub async fn join(
        store: &Store,
        devices: &[(String, f64)],
        req: &LeaseRequest,
        events: &EventSink,
    ) -> Result<Turns, RunError> {
        // In one blocking call, not one a device: under load each call's hand-over to a
        // thread and back cost tens of milliseconds, and a part of ten phones got ready
        // seconds after it was claimed (docs/benchmarks.md, `agents`).
        let (s, all, r) = (store.clone(), devices.to_vec(), req.clone());
        let joined = blocking(move || {
            let mut out = Vec::with_capacity(all.len());
            for (device, expect_s) in all {
                let req = LeaseRequest { expect_s: Some(expect_s), ..r.clone() };
                out.push((device.clone(), join_now(&s, &device, &req)?));
            }
            Ok(out)
        })
        .await?;
        let mut turns = BTreeMap::new();
        for (device, j) in joined {
            let t = turn(&device, j, events)?;
            turns.insert(device, t);
        }
        Ok(Turns { turns, request: req.clone() })
    }

    /// Every device's lease, taken one at a time in name order, each waited for until
    /// `deadline`: what a schedule slot (which starts only with all its devices) does.
    /// `None` when the deadline passed or `stop` was set first; then nothing is held and
    /// `busy` names who had the device it was waiting for. Holding devices in one order
    /// means two of them cannot each hold what the other waits for.
    pub async fn join_all_in_order(
        store: &Store,
        devices: &[(String, f64)],
        req: &LeaseRequest,
        events: &EventSink,
        deadline: Option<Instant>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<Result<Turns, Vec<(String, String)>>, RunError> {
        let mut sorted = devices.to_vec();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let mut held = Turns { turns: BTreeMap::new(), request: req.clone() };
        for (device, expect_s) in sorted {
            let turn = join(store, &device, LeaseRequest { expect_s: Some(expect_s), ..req.clone() }, events).await?;
            let mut one = Turns { turns: BTreeMap::from([(device.clone(), turn)]), request: req.clone() };
            if !one.until(StartWhen::All(deadline), stop, events).await? {
                let busy = one.waiting().into_iter().map(|(d, b)| (d.to_string(), b.to_string())).collect();
                return Ok(Err(busy));
            }
            held.turns.extend(one.turns);
        }
        Ok(Ok(held))
    }

    /// Every device's lease now, or an error naming the first that is busy (blocking; for
    /// a caller that must not wait, such as a test that owns its store).
    pub fn take_now(store: &Store, devices: &[String], req: &LeaseRequest) -> Result<Turns, RunError> {
        let mut turns = BTreeMap::new();
        for d in devices {
            match store.try_lease(d, req)? {
                Ok(lease) => turns.insert(d.clone(), Turn::Held(lease)),
                Err(busy) => return Err(RunError::Internal(format!("{d} is {}", busy.describe()))),
            };
        }
        Ok(Turns { turns, request: req.clone() })
    }

    /// The devices still waited for, with who had them.
    pub fn waiting(&self) -> Vec<(&str, &str)> {
        self.turns
            .iter()
            .filter_map(|(d, t)| match t {
                Turn::Waiting(w) => Some((d.as_str(), w.busy.as_str())),
                Turn::Held(_) | Turn::Released => None,
            })
            .collect()
    }

    /// Waits until `when` is met: `false` when it cannot be (a device is held with
    /// `AllNow`, the deadline passed) or `stop` was set first.
    pub async fn until(
        &mut self,
        when: StartWhen,
        stop: &mut watch::Receiver<bool>,
        events: &EventSink,
    ) -> Result<bool, RunError> {
        loop {
            let held = self.turns.values().filter(|t| matches!(t, Turn::Held(_))).count();
            let met = match when {
                StartWhen::AnyFree => held > 0 || self.turns.is_empty(),
                StartWhen::AllNow | StartWhen::All(_) => held == self.turns.len(),
            };
            if met {
                return Ok(true);
            }
            if when == StartWhen::AllNow || *stop.borrow() {
                return Ok(false);
            }
            let deadline = match when {
                StartWhen::All(Some(d)) => Some(tokio::time::Instant::from_std(d)),
                _ => None,
            };
            let next = std::future::poll_fn(|cx| {
                for (device, turn) in self.turns.iter_mut() {
                    if let Turn::Waiting(w) = turn
                        && let Poll::Ready(got) = Pin::new(&mut w.rx).poll(cx)
                    {
                        return Poll::Ready((device.clone(), got, w.since));
                    }
                }
                Poll::Pending
            });
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                (device, got, since) = next => {
                    let got = got.map_err(|_| RunError::Internal(format!("the wait for {device} ended without an answer")))??;
                    let Some(lease) = got else { return Ok(false) };
                    events.emit(Event::DeviceAcquired { device: device.clone(), waited_s: since.elapsed().as_secs_f64() });
                    self.turns.insert(device, Turn::Held(lease));
                }
                _ = stop.wait_for(|s| *s) => return Ok(false),
                _ = sleep => return Ok(false),
            }
        }
    }
}
