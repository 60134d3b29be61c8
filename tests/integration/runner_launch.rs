//! A campaign started through the library's one call, `runner::launch`, with no CLI type:
//! what the schedule does, and what an agent will.

use lab::runner::{self, Ending, Event, EventSink, LaunchError, LaunchFailure, Queueing, Start, StartWhen};
use tokio::sync::{mpsc, watch};

use crate::common::{TempLab, root};

fn queueing() -> Queueing {
    Queueing { priority: 0, start: StartWhen::AnyFree }
}

/// Launches `start` on `lab` and collects every event it sent.
async fn launch(lab: &TempLab, start: Start) -> (Result<runner::Launched, LaunchError>, Vec<Event>) {
    let config = lab::config::load_lab(&lab.lab).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (_stop_tx, stop) = watch::channel(false);
    let result = runner::launch(config, start, queueing(), EventSink::new(tx), stop).await;
    let mut events = Vec::new();
    // The sink went with the campaign: the channel is closed once drained.
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quickstart_runs_through_the_runner_as_lab_run_runs_it() {
    let lab = TempLab::new();
    let path = root().join("runbooks/quickstart.toml");
    let (result, events) = launch(&lab, Start::Runbook { path, id: Some("q1".into()), seed: None }).await;
    let launched = result.expect("the quickstart runs");
    assert_eq!(launched.id, "q1");
    assert_eq!(launched.ending, Ending::Complete);
    assert_eq!((launched.summary.valid, launched.summary.failed, launched.summary.pending), (16, 0, 0));
    assert!(matches!(events.first(), Some(Event::CampaignStarted { id, .. }) if id == "q1"), "{:?}", events.first());
    let recorded = events.iter().filter(|e| matches!(e, Event::AttemptRecorded { valid: true, .. })).count();
    assert_eq!(recorded, 16, "one valid attempt recorded per trial");
    let names: Vec<String> =
        launched.files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["report.md", "report.html", "results.csv", "summary.csv", "report.json"]);
    for f in &launched.files {
        assert!(f.starts_with(lab.artifacts().join("q1")) && f.exists(), "{}", f.display());
    }
    assert!(launched.text().contains("report files:") && launched.tables.contains("cpu_pct"), "{}", launched.text());

    // The same runbook and seed through the binary gives the same results, byte for byte.
    let by_cli = TempLab::new();
    by_cli.cmd(&["run", "runbooks/quickstart.toml"]).assert().success();
    let cli_id = &by_cli.campaigns()[0];
    let read = |l: &TempLab, id: &str| std::fs::read(l.artifacts().join(id).join("results.csv")).unwrap();
    assert!(read(&lab, "q1") == read(&by_cli, cli_id), "results.csv of runner::launch and of `lab run` differ");
}

#[tokio::test]
async fn bad_input_is_refused_before_the_store_is_touched() {
    let lab = TempLab::new();
    let path = lab.dir.path().join("no-such-runbook.toml");
    let (result, events) = launch(&lab, Start::Runbook { path, id: None, seed: None }).await;
    let e = result.expect_err("a missing runbook is refused");
    assert_eq!(e.failure(), LaunchFailure::BadInput, "{e}");
    assert!(e.to_string().contains("no-such-runbook.toml"), "{e}");
    assert!(events.is_empty(), "nothing ran: {events:?}");
    assert!(!lab.store().exists(), "no store was made");

    let (result, _) = launch(&lab, Start::Resume("nothing-1".into())).await;
    let e = result.expect_err("nothing to resume");
    assert_eq!(e.failure(), LaunchFailure::BadInput);
    assert!(e.to_string().starts_with("no store at "), "{e}");
    assert!(!lab.store().exists(), "still no store");
}
