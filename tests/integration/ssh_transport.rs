//! The SSH transport against a real OpenSSH server on 127.0.0.1.

use crate::common;

use std::time::{Duration, Instant};

use common::sshd::{self, Sshd};
use lab::transport::{CommandSpec, SpawnSpec, SshConfig, SshTransport, Transport, TransportError};

fn config(s: &Sshd, known_hosts: std::path::PathBuf) -> SshConfig {
    s.ssh_config(known_hosts)
}

#[test_needs::needs(sshd)]
#[tokio::test]
async fn arguments_reach_the_remote_program_literally() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let nasty = ["a b", "it's", "double \"quote\"", "; touch /tmp/lab-pwned", "$(id)", "`id`", "line1\nline2", "*"];
    let mut cmd = CommandSpec::new("printf", &["%s\\0"]);
    cmd.args.extend(nasty.iter().map(|x| x.to_string()));
    cmd.env.insert("LAB_X".into(), "v; w".into());
    let out = t.exec(&cmd).await.unwrap();
    assert!(out.success(), "{}", out.stderr_text());
    let got: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().split('\0').filter(|x| !x.is_empty()).collect();
    assert_eq!(got, nasty);
    let env = t.exec(&CommandSpec { env: cmd.env.clone(), ..CommandSpec::new("printenv", &["LAB_X"]) }).await.unwrap();
    assert_eq!(env.stdout_text(), "v; w\n");
    let fail = t.exec(&CommandSpec::new("sh", &["-c", "echo oops >&2; exit 3"])).await.unwrap();
    assert_eq!((fail.status, fail.stderr_text().as_str()), (Some(3), "oops\n"));
}

#[test_needs::needs(sshd)]
#[tokio::test]
async fn unknown_and_changed_host_keys_are_refused_before_anything_runs() {
    let s = sshd::start();
    let marker = s.dir.path().join("ran");
    let touch = CommandSpec::new("touch", &[marker.to_str().unwrap()]);

    let empty = s.dir.path().join("known_hosts_empty");
    std::fs::write(&empty, "").unwrap();
    let e = SshTransport::new(config(&s, empty.clone())).exec(&touch).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TransportError::HostKey { .. }), "{msg}");
    assert!(
        msg.contains("unknown host key") && msg.contains(&empty.display().to_string()) && msg.contains("SHA256:"),
        "{msg}"
    );

    let changed = s.wrong_known_hosts();
    let e = SshTransport::new(config(&s, changed.clone())).exec(&touch).await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("HOST KEY CHANGED"), "{msg}");
    assert!(msg.contains(&format!("{}:2", changed.display())), "names the known_hosts entry (line 2): {msg}");
    assert!(!marker.exists(), "nothing ran");

    // Non-strict checking accepts an unknown key, never a changed one.
    let mut lax = config(&s, empty);
    lax.ssh.strict_host_key_checking = false;
    SshTransport::new(lax).exec(&touch).await.unwrap();
    assert!(marker.exists());
}

#[test_needs::needs(sshd)]
#[tokio::test]
async fn builds_are_uploaded_once_per_host_and_files_come_back() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let local = s.dir.path().join("app.bin");
    std::fs::write(&local, b"build bytes").unwrap();
    let first = t.stage(&local).await.unwrap();
    assert!(first.uploaded);
    assert!(first.path.ends_with(format!("{}/app.bin", first.sha256)));
    let again = SshTransport::new(config(&s, s.known_hosts())).stage(&local).await.unwrap();
    assert_eq!((again.uploaded, &again.path), (false, &first.path));
    let back = s.dir.path().join("back/app.bin");
    t.download(&first.path, &back).await.unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), b"build bytes");
}

#[test_needs::needs(sshd)]
#[tokio::test]
async fn a_restarted_server_is_reconnected_and_a_stopped_one_is_unreachable() {
    let mut s = sshd::start();
    let mut cfg = config(&s, s.known_hosts());
    cfg.ssh.connect_timeout = Duration::from_secs(2);
    cfg.connect_attempts = 2;
    let t = SshTransport::new(cfg);
    assert!(t.exec(&CommandSpec::new("true", &[])).await.unwrap().success());
    s.restart();
    assert!(t.exec(&CommandSpec::new("true", &[])).await.unwrap().success(), "reconnected after the restart");
    s.stop();
    let start = Instant::now();
    let e = t.exec(&CommandSpec::new("true", &[])).await.unwrap_err();
    assert!(matches!(e, TransportError::Unreachable { .. }), "{e}");
    // Two refused attempts with a 0.5 s backoff: well inside the configured timeouts.
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

/// Polls `f` every 20 ms for up to 10 s; whether it came true.
async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn spawn_spec(script: &str, out: std::path::PathBuf, cgroup: Option<std::path::PathBuf>) -> SpawnSpec {
    SpawnSpec { cmd: CommandSpec::new("sh", &["-c", script]), stdout: Some(out), stderr: None, cgroup }
}

/// An app on an SSH host runs in the cgroup asked for: a child that leaves the process
/// group (`setsid`) is in it, its CPU is in the cgroup's `cpu.stat`, and stop kills it and
/// removes the folder.
#[test_needs::needs(sshd, cgroup)]
#[tokio::test]
async fn an_app_on_an_ssh_host_runs_in_its_cgroup_and_stop_removes_it() {
    let s = sshd::start();
    let base = sshd::cgroup();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let pidfile = s.dir.path().join("escaped.pid");
    let script = format!("setsid sh -c 'echo $$ > {}; while :; do :; done' & sleep 30", pidfile.display());
    let cg = base.join(format!("lab-{}-ssh-transport-0", std::process::id()));
    let p = t.spawn(&spawn_spec(&script, s.dir.path().join("out.txt"), Some(cg.clone()))).await.unwrap();
    assert_eq!((p.cgroup(), p.cgroup_note()), (Some(cg.as_path()), None));
    assert!(eventually(|| std::fs::read_to_string(&pidfile).is_ok_and(|t| t.ends_with('\n'))).await);
    let escaped: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let members = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
    let members: Vec<u32> = members.lines().map(|l| l.parse().unwrap()).collect();
    assert!(members.contains(&p.pid()) && members.contains(&escaped), "{members:?}");
    let usec = |t: String| t.lines().find_map(|l| l.strip_prefix("usage_usec ")?.parse::<u64>().ok()).unwrap();
    let before = usec(std::fs::read_to_string(cg.join("cpu.stat")).unwrap());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = usec(std::fs::read_to_string(cg.join("cpu.stat")).unwrap());
    assert!(after - before > 100_000, "the escaped spinner's CPU is the cgroup's: {} µs in 0.5 s", after - before);

    let info = p.stop(Duration::from_millis(300)).await.unwrap();
    assert!(info.signal.is_some() || info.code.is_some(), "{info}");
    assert!(eventually(|| !sshd::alive(escaped)).await, "the escaped child was stopped with the cgroup");
    assert!(!sshd::alive(p.pid()));
    assert!(!cg.exists(), "stop removed the cgroup {}", cg.display());
}

/// A cgroup that cannot be made (a missing parent) or joined (a plain folder, not in a
/// cgroup v2 hierarchy) is not an error: the app runs in its process group, the note says why.
#[test_needs::needs(sshd)]
#[tokio::test]
async fn an_ssh_app_whose_cgroup_cannot_be_made_runs_in_its_process_group() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let plain = s.dir.path().join("lab-not-a-cgroup");
    let cases = [
        (s.dir.path().join("no/such/lab-cgroup"), "cannot create cgroup", "No such file or directory"),
        (plain.clone(), "cannot start in cgroup", "not a cgroup v2 folder (no cgroup.procs)"),
    ];
    for (i, (cg, what, why)) in cases.into_iter().enumerate() {
        let out = s.dir.path().join(format!("out-{i}.txt"));
        let p = t.spawn(&spawn_spec("echo ran; sleep 30", out.clone(), Some(cg.clone()))).await.unwrap();
        assert_eq!(p.cgroup(), None);
        let note = p.cgroup_note().unwrap();
        assert_eq!(note, format!("{what} {}: {why}", cg.display()));
        assert!(eventually(|| std::fs::read_to_string(&out).is_ok_and(|o| o == "ran\n")).await, "the app still ran");
        assert!(sshd::alive(p.pid()));
        p.stop(Duration::from_millis(300)).await.unwrap();
        assert!(eventually(|| !sshd::alive(p.pid())).await, "the process group was stopped");
    }
    assert!(!plain.exists(), "the plain folder made for the cgroup was removed again");
}

/// A command that fills stderr before it writes any stdout (adb and build tools do) completes
/// well inside its timeout: both streams are read as they come. 1 MiB fits libssh2's 2 MiB
/// receive window; 4 MiB overflows it, which stalled the old stdout-then-stderr reading until
/// the timeout.
#[test_needs::needs(sshd)]
#[tokio::test]
async fn a_command_writing_mebibytes_of_stderr_before_stdout_completes() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    for mib in [1, 4] {
        let script = format!("head -c {} /dev/zero | tr '\\0' x >&2; echo done", mib << 20);
        let mut cmd = CommandSpec::new("sh", &["-c", &script]);
        cmd.timeout = Duration::from_secs(20);
        let start = Instant::now();
        let out = t.exec(&cmd).await.unwrap();
        let took = start.elapsed();
        assert_eq!((out.status, out.stdout_text().as_str()), (Some(0), "done\n"), "{mib} MiB");
        assert_eq!(out.stderr.len(), mib << 20);
        assert!(out.stderr.iter().all(|&b| b == b'x'), "{mib} MiB of stderr arrived intact");
        assert!(took < Duration::from_secs(5), "{mib} MiB took {took:?} of a {:?} timeout", cmd.timeout);
    }
    // The session went back to the pool in blocking mode: an upload and a plain command still work.
    let local = s.dir.path().join("after.txt");
    std::fs::write(&local, b"after").unwrap();
    t.upload(&local, &s.dir.path().join("after-up.txt")).await.unwrap();
    assert_eq!(std::fs::read(s.dir.path().join("after-up.txt")).unwrap(), b"after");
    assert_eq!(t.exec(&CommandSpec::new("echo", &["ok"])).await.unwrap().stdout_text(), "ok\n");
}

/// A command that outlives its timeout fails with `Timeout` soon after it, output or not.
#[test_needs::needs(sshd)]
#[tokio::test]
async fn a_command_past_its_timeout_is_a_timeout() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let mut cmd = CommandSpec::new("sh", &["-c", "echo partial; echo err >&2; sleep 10"]);
    cmd.timeout = Duration::from_secs(1);
    let start = Instant::now();
    let e = t.exec(&cmd).await.unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, TransportError::Timeout { timeout, .. } if timeout == cmd.timeout), "{e}");
    assert!(took >= cmd.timeout && took < Duration::from_secs(4), "{took:?}");
    assert!(t.exec(&CommandSpec::new("true", &[])).await.unwrap().success(), "the next command gets a session");
}

/// The processes under `pid` (children, grandchildren…), from /proc.
fn descendants(pid: u32) -> Vec<u32> {
    let parent = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
    };
    let all: Vec<u32> =
        std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(all.iter().copied().filter(|&c| parent(c) == Some(p)));
        i += 1;
    }
    found.split_off(1)
}

fn signal_all(pids: &[u32], sig: &str) {
    for p in pids {
        let _ = std::process::Command::new("kill").args(["-s", sig, &p.to_string()]).status();
    }
}

/// A host that stops answering in the middle of a command (frozen, or the network gone) is
/// `Unreachable`, the lost-host path, not a slow command's `Timeout`.
#[test_needs::needs(sshd)]
#[tokio::test]
async fn a_host_gone_silent_during_a_command_is_unreachable() {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    let server: u32 = std::fs::read_to_string(s.dir.path().join("sshd.pid")).unwrap().trim().parse().unwrap();
    let started = s.dir.path().join("started");
    let mut cmd = CommandSpec::new("sh", &["-c", "touch \"$1\"; sleep 3", "sh", started.to_str().unwrap()]);
    cmd.timeout = Duration::from_secs(2);
    // Once the command runs, its session's server side (the listener's children) is frozen:
    // silent the way a lost host is.
    let freezer = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !started.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let frozen = descendants(server);
        signal_all(&frozen, "STOP");
        frozen
    });
    let start = Instant::now();
    let e = t.exec(&cmd).await.unwrap_err();
    let took = start.elapsed();
    let frozen = freezer.join().unwrap();
    signal_all(&frozen, "CONT");
    assert!(!frozen.is_empty(), "the session had a server process");
    assert!(matches!(e, TransportError::Unreachable { .. }), "{e}");
    assert!(e.to_string().contains("no answer from the host within 2s"), "{e}");
    // The timeout, then at most the connect timeout (5 s) to learn that no channel opens.
    assert!(took < Duration::from_secs(9), "{took:?}");
}
