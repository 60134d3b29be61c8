//! What `lab status` shows per device, written to the store in few transactions.
//!
//! An attempt changes phase about nine times; on a fast (simulated) lab that was a commit
//! per phase per device. The board keeps the latest row per device and writes every
//! changed row in one transaction at most every `DELAY`, and only when something changed:
//! nothing ticks while the lab is idle or soaking. A change of state (a device that starts,
//! finishes, goes offline or is being waited for) and a real soak about to begin are
//! written before `set` returns.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::AbortHandle;

use super::trial::{RunError, blocking};
use crate::store::{DeviceStatusRow, Store};

/// How long a changed row may wait for others before it is written.
pub const DELAY: Duration = Duration::from_millis(250);

/// When a row must be in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Within `DELAY`, with whatever else changed meanwhile.
    Soon,
    /// Before `set` returns.
    Now,
}

pub struct StatusBoard {
    store: Store,
    board: Mutex<Board>,
    /// Held while rows are taken and written, so an older row never lands after a newer one.
    writing: Arc<Mutex<()>>,
}

#[derive(Default)]
struct Board {
    /// Rows not yet in the store, by device.
    changed: BTreeMap<String, DeviceStatusRow>,
    /// The pending delayed write, if one is scheduled.
    scheduled: Option<AbortHandle>,
    /// Each device's last state (`busy`, `idle`, …), written or not.
    states: BTreeMap<String, String>,
}

impl StatusBoard {
    pub fn new(store: Store) -> Arc<StatusBoard> {
        Arc::new(StatusBoard { store, board: Mutex::default(), writing: Arc::default() })
    }

    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces `row.device`'s row; a new state is written at once, whatever `when`. A row
    /// without a battery reading keeps the one of the row it replaces (as the store keeps
    /// the stored one).
    pub async fn set(self: &Arc<Self>, mut row: DeviceStatusRow, when: When) -> Result<(), RunError> {
        {
            let mut b = self.board();
            if let Some(old) = b.changed.get(&row.device) {
                row.battery_pct = row.battery_pct.or(old.battery_pct);
            }
            let same_state = b.states.get(&row.device) == Some(&row.state);
            if !same_state {
                b.states.insert(row.device.clone(), row.state.clone());
            }
            let when = if same_state { when } else { When::Now };
            b.changed.insert(row.device.clone(), row);
            match when {
                When::Now => {
                    // This write takes everything changed: no delayed write is left to wake for.
                    if let Some(s) = b.scheduled.take() {
                        s.abort();
                    }
                }
                When::Soon if b.scheduled.is_none() => {
                    let me = self.clone();
                    let task = tokio::spawn(async move {
                        tokio::time::sleep(DELAY).await;
                        let _ = me.write().await;
                    });
                    b.scheduled = Some(task.abort_handle());
                    return Ok(());
                }
                When::Soon => return Ok(()),
            }
        }
        self.write().await
    }

    /// Writes every changed row in one transaction.
    async fn write(self: &Arc<Self>) -> Result<(), RunError> {
        let me = self.clone();
        let writing = self.writing.clone();
        blocking(move || {
            let _w = writing.lock().unwrap_or_else(PoisonError::into_inner);
            let rows: Vec<DeviceStatusRow> = {
                let mut b = me.board();
                b.scheduled = None;
                std::mem::take(&mut b.changed).into_values().collect()
            };
            me.store.set_device_statuses(&rows)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(device: &str, state: &str, phase: Option<&str>, battery: Option<f64>) -> DeviceStatusRow {
        DeviceStatusRow {
            device: device.into(),
            state: state.into(),
            battery_pct: battery,
            campaign: Some("c1".into()),
            trial_key: phase.map(|_| "0000-k".into()),
            phase: phase.map(Into::into),
            updated_at: "t".into(),
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("lab.db")).unwrap();
        (dir, store)
    }

    #[tokio::test(start_paused = true)]
    async fn many_phase_updates_make_few_writes_and_the_final_state_is_stored_on_return() {
        let (_dir, store) = store();
        let board = StatusBoard::new(store.clone());
        let phases = ["prepare", "gate", "launch", "soak", "collect"];
        // Each device's first row (a new state: busy) is written at once.
        for d in 0..4 {
            board.set(row(&format!("d{d}"), "busy", Some("prepare"), None), When::Soon).await.unwrap();
            assert_eq!(store.device_statuses().unwrap().len(), d + 1);
        }
        for i in 0..1000 {
            let device = format!("d{}", i % 4);
            let battery = (i % 7 == 0).then_some(i as f64 / 10.0);
            board.set(row(&device, "busy", Some(phases[i % phases.len()]), battery), When::Soon).await.unwrap();
        }
        for d in 0..4 {
            board.set(row(&format!("d{d}"), "idle", None, None), When::Now).await.unwrap();
        }
        assert!(store.commits() <= 9, "{} commits for 1 000 phase updates and 8 states", store.commits());
        let got = store.device_statuses().unwrap();
        let states: Vec<(&str, &str, Option<&str>)> =
            got.iter().map(|s| (s.device.as_str(), s.state.as_str(), s.phase.as_deref())).collect();
        assert_eq!(states, [("d0", "idle", None), ("d1", "idle", None), ("d2", "idle", None), ("d3", "idle", None)]);
        // The last battery reading each device gave survives rows that had none.
        assert_eq!(got[0].battery_pct, Some(98.0), "d0's last reading was update 980");
        // Nothing is left to write, and nothing wakes later to write it.
        let before = store.commits();
        tokio::time::sleep(DELAY * 4).await;
        assert_eq!(store.commits(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn a_changed_row_is_written_within_the_delay_without_a_final_state() {
        let (_dir, store) = store();
        let board = StatusBoard::new(store.clone());
        board.set(row("d0", "busy", Some("prepare"), None), When::Soon).await.unwrap();
        board.set(row("d0", "busy", Some("gate"), Some(50.0)), When::Soon).await.unwrap();
        board.set(row("d0", "busy", Some("soak"), None), When::Soon).await.unwrap();
        let got = store.device_statuses().unwrap();
        assert_eq!(got[0].phase.as_deref(), Some("prepare"), "the phase changes are not written yet");
        tokio::time::sleep(DELAY * 2).await;
        let got = store.device_statuses().unwrap();
        assert_eq!((got[0].phase.as_deref(), got[0].battery_pct), (Some("soak"), Some(50.0)));
        assert_eq!(store.commits(), 2, "the new state at once, both phase changes in one write");
    }
}
