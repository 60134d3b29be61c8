//! Where a campaign's events go in the terminal: the reporter, and the operator's prompter
//! for the steps the runner waits on.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::event_lines::EventLines;
use super::operator;
use super::reporter::{Output, Reporter};
use crate::config::StoreLocation;
use crate::runner::EventSink;

/// The readers of one campaign's events, to wait for once the campaign dropped its sink.
pub struct Listener {
    relay: JoinHandle<()>,
    reporter: JoinHandle<Reporter>,
}

/// A sink for a campaign's events and their readers: the reporter (`output`), and, when
/// standard input is a terminal, a prompter that answers operator steps into `store`.
pub fn listen(store: &StoreLocation, verbose: bool, output: Output) -> (EventSink, Listener) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (report_tx, report_rx) = mpsc::unbounded_channel();
    let reporter = tokio::spawn(Reporter::new(verbose, output).run(report_rx));
    // Steps the runner waits on go to the terminal's prompter too, when there is one.
    let prompter = operator::spawn_terminal(store.clone());
    let relay = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            if let (Some(p), Some(tx)) = (operator::Prompt::from_event(&e), &prompter) {
                let _ = tx.send(p);
            }
            let _ = report_tx.send(e);
        }
    });
    (EventSink::new(tx), Listener { relay, reporter })
}

impl Listener {
    /// Waits until every event was reported; the event stream's writer, when that is
    /// the output, for the lines that follow the runner's.
    pub async fn finish(self) -> Option<EventLines> {
        let _ = self.relay.await;
        self.reporter.await.ok().and_then(Reporter::into_stream)
    }
}
