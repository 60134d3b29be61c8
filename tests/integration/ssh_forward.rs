//! Port forwarding over SSH against a real OpenSSH server on 127.0.0.1: TCP and Unix
//! targets, large transfers both ways, concurrency, half-close, refused targets, host
//! keys, stopping; and `lab hosts forward` through the real binary.

use crate::common;

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::TempLab;
use common::sshd::{self, Sshd};
use lab::config::SshHost;
use lab::transport::{CommandSpec, ForwardTarget, SshConfig, SshTransport, Transport, TransportError};
use sha2::{Digest, Sha256};

const MIB: usize = 1024 * 1024;

/// One exec session, so a forward that took it would show.
fn config(s: &Sshd, known_hosts: std::path::PathBuf) -> SshConfig {
    let base = s.ssh_config(known_hosts);
    SshConfig { connect_attempts: 2, ssh: SshHost { max_sessions: 1, ..base.ssh }, ..base }
}

/// The server, a runtime for the async calls, and a transport that trusts the server's key.
fn setup() -> (Sshd, tokio::runtime::Runtime, SshTransport) {
    let s = sshd::start();
    let t = SshTransport::new(config(&s, s.known_hosts()));
    (s, runtime(), t)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

/// A TCP echo server on 127.0.0.1 that answers end of file with end of file.
fn tcp_echo(listener: TcpListener) {
    thread::spawn(move || {
        for c in listener.incoming().flatten() {
            thread::spawn(move || {
                let _ = io::copy(&mut &c, &mut &c);
                let _ = c.shutdown(Shutdown::Write);
            });
        }
    });
}

fn tcp_echo_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    tcp_echo(l);
    port
}

/// The same on a Unix socket at `path`.
fn unix_echo(path: &Path) {
    let l = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            thread::spawn(move || {
                let _ = io::copy(&mut &c, &mut &c);
                let _ = c.shutdown(Shutdown::Write);
            });
        }
    });
}

/// Deterministic bytes that do not compress or repeat in any short period (xorshift64).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Sends `len` bytes through `addr` to an echo server while reading the echo on another
/// thread (so both directions are in flight at once), then half-closes. Returns the
/// sha256 of what was sent and of what came back, and the time taken.
fn round_trip(addr: SocketAddr, len: usize, seed: u64) -> (String, String, Duration) {
    let data = pattern(len, seed);
    let sent = hex::encode(Sha256::digest(&data));
    let start = Instant::now();
    let s = TcpStream::connect(addr).unwrap();
    let w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        for chunk in data.chunks(100_000) {
            (&w).write_all(chunk).unwrap();
        }
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::with_capacity(len);
    (&s).read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    (sent, hex::encode(Sha256::digest(&back)), start.elapsed())
}

#[test_needs::needs(sshd)]
#[test]
fn tcp_and_unix_targets_carry_8_mib_each_way_intact() {
    let (s, rt, t) = setup();
    let sock = s.dir.path().join("echo.sock");
    unix_echo(&sock);
    let targets =
        [ForwardTarget::Tcp { host: "127.0.0.1".into(), port: tcp_echo_port() }, ForwardTarget::Unix(sock.clone())];
    for target in targets {
        let fwd = rt.block_on(t.forward(0, &target)).unwrap();
        assert_eq!(fwd.local_addr().ip().to_string(), "127.0.0.1");
        assert_ne!(fwd.local_addr().port(), 0);
        assert_eq!(fwd.target(), &target);
        let (sent, back, took) = round_trip(fwd.local_addr(), 8 * MIB, 7);
        assert_eq!(sent, back, "{target}: the echo differs from what was sent");
        eprintln!("{target}: 8 MiB each way in {took:.2?} ({:.1} MiB/s each way)", 8.0 / took.as_secs_f64());
        assert_eq!((fwd.connections(), fwd.failed(), fwd.last_error()), (1, 0, None));
    }
}

#[test_needs::needs(sshd)]
#[test]
fn concurrent_connections_do_not_mix_and_do_not_take_exec_sessions() {
    // One exec session only: forwards must not take it, or the exec below would wait forever.
    let (_s, rt, t) = setup();
    let fwd =
        rt.block_on(t.forward(0, &ForwardTarget::Tcp { host: "127.0.0.1".into(), port: tcp_echo_port() })).unwrap();
    let addr = fwd.local_addr();
    // Two idle connections held open through the whole test.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let workers: Vec<_> =
        (0..8u64).map(|i| thread::spawn(move || round_trip(addr, 512 * 1024 + i as usize, i))).collect();
    let out = rt
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(20), t.exec(&CommandSpec::new("echo", &["still here"]))).await
        })
        .expect("exec waited for a session held by a forward")
        .unwrap();
    assert_eq!(out.stdout_text(), "still here\n");
    for w in workers {
        let (sent, back, _) = w.join().unwrap();
        assert_eq!(sent, back);
    }
    // The idle ones still work after all that.
    for c in &idle {
        (&*c).write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        (&*c).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
    }
    assert_eq!((fwd.connections(), fwd.failed()), (10, 0));
}

#[test_needs::needs(sshd)]
#[test]
fn half_close_passes_end_of_file_both_ways() {
    let (s, rt, t) = setup();
    // A server that answers only after the client's end of file, then closes.
    let sock = s.dir.path().join("count.sock");
    let l = UnixListener::bind(&sock).unwrap();
    thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut got = Vec::new();
            (&c).read_to_end(&mut got).unwrap();
            (&c).write_all(format!("got {} bytes", got.len()).as_bytes()).unwrap();
        }
    });
    let fwd = rt.block_on(t.forward(0, &ForwardTarget::Unix(sock))).unwrap();
    let c = TcpStream::connect(fwd.local_addr()).unwrap();
    (&c).write_all(b"hello").unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reply = String::new();
    (&c).read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "got 5 bytes", "the reply came after the client's end of file, then end of file");
}

#[test_needs::needs(sshd)]
#[test]
fn a_refused_target_closes_that_connection_is_reported_and_the_listener_keeps_serving() {
    let (_s, rt, t) = setup();
    // A port with nothing listening (yet).
    let spare = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = spare.local_addr().unwrap().port();
    drop(spare);
    let target = ForwardTarget::Tcp { host: "127.0.0.1".into(), port };
    let fwd = rt.block_on(t.forward(0, &target)).unwrap();
    let mut failures = fwd.failures();
    let c = TcpStream::connect(fwd.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    // Closed without a byte (a reset is fine too).
    let n = (&c).read_to_end(&mut buf).unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(fwd.failed(), 1);
    assert!(failures.has_changed().unwrap(), "the failure is signalled");
    let why = fwd.last_error().unwrap();
    assert!(why.contains(&format!("forwarding to tcp:127.0.0.1:{port}")), "{why}");
    assert!(why.contains("refused") && why.contains("AllowTcpForwarding"), "{why}");

    // Now something listens there: the same forward serves the next connection.
    tcp_echo(TcpListener::bind(("127.0.0.1", port)).unwrap());
    let (sent, back, _) = round_trip(fwd.local_addr(), 1000, 3);
    assert_eq!(sent, back);
    assert_eq!((fwd.connections(), fwd.failed()), (2, 1));
    let _ = failures.borrow_and_update();
}

#[test_needs::needs(sshd)]
#[test]
fn an_unknown_host_key_or_a_dead_host_opens_no_forward() {
    let mut s = sshd::start();
    let rt = runtime();
    let target = ForwardTarget::Tcp { host: "127.0.0.1".into(), port: tcp_echo_port() };
    let spare = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = spare.local_addr().unwrap().port();
    drop(spare);

    let empty = s.dir.path().join("known_hosts_empty");
    std::fs::write(&empty, "").unwrap();
    let e = rt.block_on(SshTransport::new(config(&s, empty)).forward(port, &target)).unwrap_err();
    assert!(matches!(e, TransportError::HostKey { .. }), "{e}");
    assert!(e.to_string().contains("unknown host key"), "{e}");
    let e = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "nothing listens on the asked port");

    s.stop();
    let e = rt.block_on(SshTransport::new(config(&s, s.known_hosts())).forward(port, &target)).unwrap_err();
    assert!(matches!(e, TransportError::Unreachable { .. }), "{e}");
}

#[test_needs::needs(sshd)]
#[test]
fn an_idle_connection_survives_keepalives_and_dropping_the_forward_closes_everything() {
    let s = sshd::start();
    let rt = runtime();
    // Keepalives every 2 s (libssh2's shortest), so the idle wait below sends one.
    let mut cfg = config(&s, s.known_hosts());
    cfg.ssh.keepalive = Duration::from_secs(1);
    let t = SshTransport::new(cfg);
    let fwd =
        rt.block_on(t.forward(0, &ForwardTarget::Tcp { host: "127.0.0.1".into(), port: tcp_echo_port() })).unwrap();
    let addr = fwd.local_addr();
    let c = TcpStream::connect(addr).unwrap();
    let mut buf = [0u8; 4];
    for word in [b"ping", b"pong"] {
        (&c).write_all(word).unwrap();
        (&c).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, word);
        thread::sleep(Duration::from_millis(4500));
    }
    assert_eq!((fwd.active(), fwd.failed()), (1, 0));
    drop(fwd);
    let e = TcpStream::connect(addr).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "still listening after drop");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = Vec::new();
    assert_eq!((&c).read_to_end(&mut rest).unwrap_or(0), 0, "the open connection was closed");
}

// ---- `lab hosts forward` through the real binary ----

fn lab_with(s: &Sshd, known_hosts: &Path) -> TempLab {
    TempLab::from_text(&format!(
        "[lab]\nname = \"remote\"\n\n[[host]]\nname = \"local\"\n\n[[host]]\nname = \"shelf-1\"\naddress = \"{}\"\nuser = \
         \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\nconnect_timeout = \"3s\"\n",
        s.address(),
        s.user,
        s.client_key().display(),
        known_hosts.display()
    ))
}

/// Kills the child when the test ends, passing or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Context switches of every thread of `pid` so far (each wakeup of a sleeping thread is one).
fn context_switches(pid: u32) -> u64 {
    let mut n = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        n += status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

fn start_forward(lab: &TempLab, args: &[&str]) -> (Running, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lab"));
    cmd.current_dir(common::root()).arg("--lab").arg(&lab.lab).args(args).env_remove("LAB_CONFIG");
    let mut child = Running(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap());
    let mut first = String::new();
    BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut first).unwrap();
    (child, first)
}

#[test_needs::needs(sshd)]
#[test]
fn lab_hosts_forward_prints_its_address_moves_data_and_stops_on_sigterm() {
    let s = sshd::start();
    let lab = lab_with(&s, &s.known_hosts());
    let sock = s.dir.path().join("usbmuxd.sock");
    unix_echo(&sock);
    let target = format!("unix:{}", sock.display());
    let (mut child, line) = start_forward(&lab, &["hosts", "forward", "shelf-1", &target]);
    // `forwarding 127.0.0.1:PORT → shelf-1 unix:/…; Ctrl-C to stop`
    let addr: SocketAddr = line
        .strip_prefix("forwarding ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .parse()
        .unwrap();
    assert_eq!(line.trim_end(), format!("forwarding {addr} → shelf-1 {target}; Ctrl-C to stop"));
    let (sent, back, took) = round_trip(addr, 4 * MIB, 11);
    assert_eq!(sent, back);
    eprintln!("lab hosts forward: 4 MiB each way in {took:.2?}");
    // Idle with a connection open: every thread of the forward sleeps in poll or on a signal.
    let idle = TcpStream::connect(addr).unwrap();
    (&idle).write_all(b"ping").unwrap();
    (&idle).read_exact(&mut [0u8; 4]).unwrap();
    let before = context_switches(child.0.id());
    thread::sleep(Duration::from_secs(2));
    let woke = context_switches(child.0.id()) - before;
    eprintln!("lab hosts forward: {woke} context switches in 2 s idle");
    assert!(woke <= 4, "{woke} wakeups in 2 s while idle");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.0.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is the normal way to stop");
    assert_eq!(TcpStream::connect(addr).unwrap_err().kind(), io::ErrorKind::ConnectionRefused);

    // JSON, a chosen port, and the local host.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (child, line) =
        start_forward(&lab, &["hosts", "forward", "local", &target, "--local-port", &port.to_string(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["host"], "local");
    assert_eq!(v["listen"], format!("127.0.0.1:{port}"));
    assert_eq!(v["target"], target.as_str());
    let (sent, back, _) = round_trip(format!("127.0.0.1:{port}").parse().unwrap(), MIB, 12);
    assert_eq!(sent, back);
    drop(child);
}

#[test_needs::needs(sshd)]
#[test]
fn lab_hosts_forward_rejects_bad_input_with_exit_2_and_a_dead_host_with_exit_3() {
    let mut s = sshd::start();
    let lab = lab_with(&s, &s.known_hosts());
    let err = |args: &[&str], code: i32| {
        let out = lab.cmd(args).timeout(Duration::from_secs(60)).assert().code(code).get_output().clone();
        assert!(out.stdout.is_empty());
        String::from_utf8(out.stderr).unwrap()
    };
    let msg = err(&["hosts", "forward", "shelf-1", "usbmuxd"], 2);
    assert_eq!(
        msg.trim_end(),
        "error: bad forward target `usbmuxd`: it must start with tcp: or unix:; fix: write tcp:HOST:PORT (e.g. \
         tcp:127.0.0.1:5037) or unix:/PATH (e.g. unix:/var/run/usbmuxd)"
    );
    let msg = err(&["hosts", "forward", "shelf-9", "tcp:127.0.0.1:5037"], 2);
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(msg.contains("unknown host `shelf-9`") && msg.contains("local, shelf-1"), "{msg}");
    assert!(msg.contains(&lab.lab.display().to_string()), "names the lab file: {msg}");
    s.stop();
    let msg = err(&["hosts", "forward", "shelf-1", "tcp:127.0.0.1:5037"], 3);
    assert!(msg.contains("shelf-1 is unreachable"), "{msg}");
}
