//! The command channel: a program run from argv (never a shell) with the alert's JSON
//! on stdin. It is run once: a pager retries by itself, and paging twice is worse than
//! a duplicate webhook.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::error::answer_text;
use super::{ANSWER_LIMIT, Delivery, NotifyError};

/// What to run and for how long at most.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Program and arguments; `argv[0]` is looked up on PATH when it has no `/`.
    pub argv: Vec<String>,
    /// From start to exit; then its process group is killed.
    pub timeout: Duration,
}

impl Command {
    /// 60 s to finish.
    pub fn new(argv: Vec<String>) -> Command {
        Command { argv, timeout: Duration::from_secs(60) }
    }

    /// Runs it once with `body` on stdin. Exit 0 is sent; stdout is the response.
    pub async fn run(&self, body: &[u8]) -> Delivery {
        match self.run_once(body).await {
            Ok(stdout) => Delivery { sent: true, tries: 1, response: Some(stdout), error: None },
            Err((tries, stdout, e)) => Delivery { sent: false, tries, response: stdout, error: Some(e.to_string()) },
        }
    }

    fn program(&self) -> String {
        self.argv.first().cloned().unwrap_or_default()
    }

    /// stdout on exit 0; else the tries made (0 when it could not start), stdout if
    /// it ran, and why.
    async fn run_once(&self, body: &[u8]) -> Result<String, (u32, Option<String>, NotifyError)> {
        let program = self.program();
        let Some((exe, args)) = self.argv.split_first() else {
            return Err((0, None, NotifyError::Spawn { program, message: "the command is empty".into() }));
        };
        let mut child = tokio::process::Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that a timeout also kills what a script started.
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| (0, None, NotifyError::Spawn { program: program.clone(), message: e.to_string() }))?;
        let (mut stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let feed = async {
            if let Some(s) = stdin.as_mut() {
                // A command may exit without reading all of it; its exit status decides.
                let _ = s.write_all(body).await;
            }
            drop(stdin.take());
        };
        let finished = async {
            let (_, out, err, status) = tokio::join!(feed, read_bounded(stdout), read_bounded(stderr), child.wait());
            (out, err, status)
        };
        let Ok((out, err, status)) = tokio::time::timeout(self.timeout, finished).await else {
            kill_group(&child);
            let _ = child.kill().await;
            return Err((1, None, NotifyError::CommandTimeout { program, after: self.timeout }));
        };
        let status =
            status.map_err(|e| (1, None, NotifyError::Spawn { program: program.clone(), message: e.to_string() }))?;
        if status.success() {
            Ok(out)
        } else {
            Err((1, Some(out), NotifyError::Exit { program, code: status.code(), stderr: err }))
        }
    }
}

/// SIGKILL to the command's process group (its id, as `process_group(0)` made it).
fn kill_group(child: &tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
    }
}

/// The first [`ANSWER_LIMIT`] bytes of a pipe, read to its end so the command never
/// blocks on a full pipe.
async fn read_bounded(pipe: Option<impl AsyncRead + Unpin>) -> String {
    let Some(mut pipe) = pipe else { return String::new() };
    let (mut kept, mut buf) = (Vec::new(), [0u8; 8192]);
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = ANSWER_LIMIT.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    answer_text(&kept)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    const BODY: &[u8] = br#"{"schema_version":1,"alert_id":"weekly/2025-03-09T01:30:00Z"}"#;

    fn sh(script: &str) -> Command {
        Command::new(vec!["sh".into(), "-c".into(), script.into()])
    }

    #[test]
    fn the_default_timeout_is_a_minute() {
        assert_eq!(Command::new(vec!["true".into()]).timeout, Duration::from_secs(60));
    }

    #[tokio::test]
    async fn the_command_gets_the_json_on_stdin_and_its_stdout_is_the_response() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("alert.json");
        let d = sh(&format!("cat > '{}'; echo paged", file.display())).run(BODY).await;
        assert_eq!(d, Delivery { sent: true, tries: 1, response: Some("paged".into()), error: None });
        assert_eq!(std::fs::read(&file).unwrap(), BODY);
    }

    #[tokio::test]
    async fn a_failing_command_is_recorded_with_its_status_and_stderr_and_run_once() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let d = sh(&format!("echo run >> '{}'; echo partial; echo 'no route to pager' >&2; exit 3", runs.display()))
            .run(BODY)
            .await;
        assert_eq!((d.sent, d.tries, d.response.as_deref()), (false, 1, Some("partial")));
        assert_eq!(
            d.error.unwrap(),
            "command sh: exited with status 3, stderr: no route to pager; fix: run it by hand with the alert JSON on stdin and look at what it says"
        );
        assert_eq!(std::fs::read_to_string(&runs).unwrap(), "run\n");
    }

    #[tokio::test]
    async fn a_hanging_command_is_killed_at_the_timeout() {
        let c = Command { argv: vec!["sleep".into(), "30".into()], timeout: Duration::from_millis(200) };
        let started = Instant::now();
        let d = c.run(BODY).await;
        let took = started.elapsed();
        assert_eq!((d.sent, d.tries, d.response), (false, 1, None));
        assert!(d.error.unwrap().starts_with("command sleep: still running after 200ms, killed; fix: "));
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[tokio::test]
    async fn a_timeout_also_kills_what_a_script_started() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let c = Command {
            timeout: Duration::from_millis(300),
            ..sh(&format!("sleep 30 & echo $! > '{}'; wait", pid_file.display()))
        };
        let d = c.run(BODY).await;
        assert!(!d.sent);
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // The grandchild is gone (or a zombie of the killed shell's, reaped by init soon).
        let gone = (0..50).any(|_| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
            let alive = state.is_some_and(|s| !s.split(") ").nth(1).is_some_and(|rest| rest.starts_with('Z')));
            if alive {
                std::thread::sleep(Duration::from_millis(20));
            }
            !alive
        });
        assert!(gone, "sleep {pid} outlived the timeout");
    }

    #[tokio::test]
    async fn output_is_kept_to_4_kib_and_a_large_one_does_not_block_the_command() {
        let d = sh("head -c 1000000 /dev/zero | tr '\\0' y; head -c 1000000 /dev/zero | tr '\\0' z >&2; exit 1")
            .run(BODY)
            .await;
        assert_eq!(d.response.unwrap(), "y".repeat(ANSWER_LIMIT));
        assert!(d.error.unwrap().contains(&format!("stderr: {}; fix", "z".repeat(ANSWER_LIMIT))));
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_with_no_try() {
        let d = Command::new(vec!["/nonexistent/page-me".into()]).run(BODY).await;
        assert_eq!((d.sent, d.tries), (false, 0));
        let error = d.error.unwrap();
        assert!(error.starts_with("command /nonexistent/page-me: cannot start it: "), "{error}");
        assert!(error.contains("fix: check that the program exists and is executable"), "{error}");
    }
}
