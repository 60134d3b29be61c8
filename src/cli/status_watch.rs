//! `lab status --watch`: the status drawn again whenever the store changes. Only the watcher
//! works for it: once a second it asks its kept-open connection for the store's data
//! version (SQLite's `PRAGMA data_version`; on PostgreSQL the `lab_changes` notifications
//! received), which moves when another connection commits, at no table read: the runner
//! does nothing extra and an idle lab costs one round trip a second.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::time::MissedTickBehavior;

use super::context;
use super::exit::CliError;
use super::lab_view::{self, StatusView};
use super::status_cmd::StatusArgs;
use crate::config::Lab;
use crate::store::{CampaignStatus, ProcessId, Store};

/// ANSI: cursor home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Runs until Ctrl-C, SIGTERM or stdout's reader going away; each ends it with exit 0.
pub async fn run(lab_arg: Option<&Path>, args: &StatusArgs) -> Result<(), CliError> {
    let lab = context::load_lab(lab_arg)?;
    let signal_error = |e| CliError::internal(format!("cannot listen for Ctrl-C / SIGTERM: {e}"));
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let terminal = std::io::stdout().is_terminal();
    let mut seen = Seen::default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // After a slow draw, the next check comes a second later, not in a burst.
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            _ = tick.tick() => {}
        }
        if reader_gone() {
            return Ok(());
        }
        let Some(view) = seen.changed(&lab)? else { continue };
        let frame = if args.json {
            serde_json::to_string(&view).map_err(CliError::internal)? + "\n"
        } else if terminal {
            format!("{CLEAR}{}", lab_view::render(&view))
        } else {
            // A blank line between drawings keeps a piped stream readable and splittable.
            lab_view::render(&view) + "\n"
        };
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(frame.as_bytes()).and_then(|()| stdout.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(CliError::internal(format!("cannot write the status to stdout: {e}"))),
        }
    }
}

/// What the last drawing was made from; while none of it changed, nothing is drawn.
#[derive(Default)]
struct Seen {
    /// Kept open: `data_version` compares commits since this connection's previous look.
    store: Option<Store>,
    drawn: bool,
    /// `data_version` at the last drawing; `None`: there was no store yet.
    version: Option<i64>,
    /// Runners of the campaigns drawn as running: one that dies (kill -9) turns its campaign
    /// into "interrupted" without any commit.
    runners: Vec<ProcessId>,
}

impl Seen {
    /// The status to draw, or `None` when nothing changed since the last drawing.
    fn changed(&mut self, lab: &Lab) -> Result<Option<StatusView>, CliError> {
        if self.store.is_none() {
            // The lab's first `lab run` creates the store while we watch.
            self.store = context::open_store_existing(lab)?;
        }
        // Read before the status: a commit in between is drawn again at the next check.
        let version = self.store.as_ref().map(Store::data_version).transpose()?;
        if self.drawn && version == self.version && self.runners.iter().all(ProcessId::alive) {
            return Ok(None);
        }
        let view = lab_view::collect(lab, self.store.as_ref())?;
        self.runners = match &self.store {
            Some(store) => store
                .campaign_list()?
                .iter()
                .filter(|c| c.status == CampaignStatus::Running)
                .filter_map(|c| c.runner().filter(ProcessId::alive))
                .collect(),
            None => Vec::new(),
        };
        self.drawn = true;
        self.version = version;
        Ok(Some(view))
    }
}

/// Whether stdout's reader went away: a pipe whose reader closed polls POLLERR (Linux), a
/// hung-up terminal POLLHUP. While nothing changes nothing is written, so no write would
/// find out.
fn reader_gone() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;

    let stdout = std::io::stdout();
    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::empty())];
    // A zero timeout never blocks.
    let ready = poll(&mut fds, PollTimeout::ZERO).unwrap_or(0);
    ready > 0 && fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}
