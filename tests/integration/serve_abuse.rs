//! `lab serve` under abuse, through the binary (docs/serve.md, "Limits"): a client that
//! sends its head a byte a second is cut at the header timeout; a thousand idle
//! connections are each closed at that timeout while other requests are answered, with
//! the server's memory bounded; the sixth token in a minute from one address is refused
//! without being compared (429, logged); a link swapped in while raw files are read never
//! lets a file outside the artifacts folder out.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::TempLab;

/// The header timeout the tests set (the default is 20 s).
const TIMEOUT: Duration = Duration::from_secs(2);

/// A running `lab serve` whose stderr goes to a file, killed when dropped.
pub(crate) struct Logged {
    child: Child,
    pub(crate) addr: String,
    log: PathBuf,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Logged {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The server's resident memory, from /proc (kB).
    fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
        line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
    }
}

/// `lab serve` on a free loopback port with `[serve]` holding `serve_toml`.
pub(crate) fn serve_with(lab: &TempLab, serve_toml: &str) -> Logged {
    let text = std::fs::read_to_string(&lab.lab).unwrap() + "\n[serve]\n" + serve_toml;
    std::fs::write(&lab.lab, text).unwrap();
    let log = lab.dir.path().join("serve.log");
    let mut child = lab
        .process(&["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let addr = super::serve::address_said(&mut child);
    Logged { child, addr, log }
}

/// One request on a connection of its own: the status, the headers and the body.
fn request(addr: &str, method: &str, path: &str, headers: &[&str], body: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (code, head.to_ascii_lowercase(), body.to_string())
}

/// How long until `s` is closed by the server (read gives end of file or a reset), at
/// most `within`; `None` when it was still open then.
fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Instant> {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 512];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        s.set_read_timeout(Some(left.max(Duration::from_millis(1)))).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(Instant::now()),
            // An answer (hyper may say 408) before closing: read on to the end.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return None,
            Err(_) => return Some(Instant::now()),
        }
    }
}

#[test]
fn a_client_sending_its_head_a_byte_a_second_is_cut_at_the_header_timeout() {
    let lab = TempLab::new();
    let server = serve_with(&lab, "header_timeout = \"2s\"\n");
    let head = format!("GET / HTTP/1.1\r\nHost: {}\r\nUser-Agent: slow\r\n\r\n", server.addr);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let opened = Instant::now();
    let mut sent = 0;
    let cut = loop {
        assert!(sent < head.len(), "the whole head went out a byte a second and was never cut");
        // A write after the cut may fail (reset): the read below says so.
        let _ = s.write_all(&head.as_bytes()[sent..sent + 1]);
        sent += 1;
        if let Some(at) = closed_within(&mut s, Duration::from_secs(1)) {
            break at;
        }
    };
    let after = cut - opened;
    assert!(after >= TIMEOUT - Duration::from_millis(100), "cut after {after:?}, before the timeout");
    assert!(after < TIMEOUT + Duration::from_secs(3), "cut after {after:?}, long past the timeout");
    assert!(sent < head.len() / 2, "cut after {sent} of {} bytes", head.len());
    // The server goes on.
    assert_eq!(request(&server.addr, "GET", "/", &[], "").0, 200);
}

/// Raises this test process's open-file limit to hold `n` more connections.
pub(crate) fn room_for(n: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < n + 256 {
        setrlimit(Resource::RLIMIT_NOFILE, (n + 256).min(hard), hard).unwrap();
    }
}

#[test]
fn a_thousand_idle_connections_are_closed_at_the_timeout_while_others_are_answered() {
    const IDLE: usize = 1000;
    room_for(IDLE as u64);
    let lab = TempLab::new();
    let server = serve_with(&lab, "header_timeout = \"2s\"\n");
    let a = server.addr.clone();
    assert_eq!(request(&a, "GET", "/", &[], "").0, 200);
    let before = server.rss_kb();
    let mut idle: Vec<(TcpStream, Instant)> =
        (0..IDLE).map(|_| (TcpStream::connect(&a).unwrap(), Instant::now())).collect();
    // Others are answered all along, while the idle ones are open and as they are closed.
    let others = std::thread::spawn(move || {
        let mut answered = 0;
        let until = Instant::now() + TIMEOUT * 2;
        while Instant::now() < until {
            let (code, _, body) = request(&a, "GET", "/", &[], "");
            assert_eq!(code, 200, "{body}");
            answered += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        answered
    });
    std::thread::sleep(TIMEOUT / 2);
    let during = server.rss_kb();
    let mut latest = Duration::ZERO;
    for (i, (s, opened)) in idle.iter_mut().enumerate() {
        let at = closed_within(s, TIMEOUT + Duration::from_secs(10))
            .unwrap_or_else(|| panic!("idle connection {i} still open 10 s past the timeout"));
        let after = at - *opened;
        assert!(after >= TIMEOUT - Duration::from_millis(100), "connection {i} closed after {after:?}");
        assert!(after < TIMEOUT + Duration::from_secs(3), "connection {i} closed after {after:?}, long past");
        latest = latest.max(after);
    }
    let answered = others.join().unwrap();
    assert!(answered >= 10, "{answered} requests answered meanwhile");
    // Memory: what a thousand connections cost, generously bounded (buffers of a few kB each).
    let grew = during.saturating_sub(before);
    assert!(grew < 64 * 1024, "VmRSS grew {grew} kB with {IDLE} idle connections ({before} → {during} kB)");
    let after = server.rss_kb();
    assert!(after < before + 64 * 1024, "VmRSS {after} kB after they closed, {before} kB before");
    assert_eq!(request(&server.addr, "GET", "/", &[], "").0, 200);
    eprintln!("VmRSS: {before} kB before, {during} kB with {IDLE} idle connections, {after} kB after");
    eprintln!("the last idle connection was closed {latest:?} after it opened; {answered} others answered");
}

#[test]
fn the_sixth_token_in_a_minute_from_one_address_is_refused_without_being_compared() {
    let lab = TempLab::new();
    let token = "0123456789abcdef0123456789abcdef";
    std::fs::write(lab.dir.path().join("serve.token"), format!("{token}\n")).unwrap();
    let server = serve_with(&lab, "token_file = \"serve.token\"\nmax_body_bytes = 4096\nheader_timeout = \"2s\"\n");
    let a = server.addr.as_str();
    let origin = format!("Origin: http://{a}");
    let form = ["Content-Type: application/x-www-form-urlencoded", origin.as_str()];
    let login = |t: &str| request(a, "POST", "/login", &form, &format!("token={t}"));
    // A body over the limit is refused before it is read, and is no attempt.
    let (code, _, _) = request(a, "POST", "/login", &form, &format!("token={}", "x".repeat(8192)));
    assert_eq!(code, 413);
    // A body sent a byte a second is cut at the timeout, and is no attempt either.
    let mut slow = TcpStream::connect(a).unwrap();
    write!(slow, "POST /login HTTP/1.1\r\nHost: {a}\r\n{}\r\n{}\r\nContent-Length: 60\r\n\r\nt", form[0], form[1])
        .unwrap();
    let started = Instant::now();
    let mut answer = String::new();
    slow.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    while answer.is_empty() && started.elapsed() < TIMEOUT + Duration::from_secs(5) {
        let _ = slow.write_all(b"o");
        let mut buf = [0u8; 512];
        if let Ok(n) = slow.read(&mut buf) {
            answer.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() >= TIMEOUT - Duration::from_millis(100), "cut after {:?}", started.elapsed());
    for n in 1..=5 {
        let (code, _, body) = login(&format!("wrong-token-number-{n}-of-thirty-two"));
        assert_eq!(code, 401, "attempt {n}: {body}");
    }
    let (code, head, body) = login("wrong-token-number-6-of-thirty-two");
    assert_eq!(code, 429, "{body}");
    let retry: u64 = head
        .lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("a Retry-After header: {head}"));
    assert!(retry >= 60, "{retry}");
    // The right token is refused too while the address is locked out: it was not compared.
    let (code, head, body) = login(token);
    assert_eq!(code, 429, "the right token during the lockout: {body}");
    assert!(!head.contains("set-cookie"), "{head}");
    let later: u64 = head.lines().find_map(|l| l.strip_prefix("retry-after: ")?.trim().parse().ok()).unwrap();
    assert!(later > retry, "the wait grows while attempts go on: {retry} s, then {later} s");
    // So is a script's bearer token, on a change.
    let bearer = format!("Authorization: Bearer {token}");
    assert_eq!(request(a, "POST", "/campaigns/x/cancel", &[&bearer, &origin], "").0, 429);
    // Each refusal is logged, with the lockout that began it.
    let log = server.log();
    assert!(log.contains("lab serve: 127.0.0.1: 5 wrong tokens within 60 s; its tokens are refused for 60 s"), "{log}");
    let refusals = log.matches("lab serve: 127.0.0.1: a token refused without comparing it").count();
    assert_eq!(refusals, 3, "{log}");
}

/// Swaps `at` between a link to `outside` and a file of its own, as fast as it can, until
/// `stop` is set.
fn swapper(at: PathBuf, outside: PathBuf, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u64 {
    let dir = at.parent().unwrap().to_path_buf();
    let (link, file) = (dir.join("swap.link"), dir.join("swap.file"));
    let mut swaps = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        std::fs::rename(&link, &at).unwrap();
        std::fs::write(&file, "inside the campaign").unwrap();
        std::fs::rename(&file, &at).unwrap();
        swaps += 2;
    }
    swaps
}

#[test]
fn a_link_swapped_in_while_raw_files_are_read_never_lets_an_outside_file_out() {
    let lab = TempLab::new();
    let id = super::serve::finished_campaign(&lab);
    let outside = lab.dir.path().join("outside.txt");
    std::fs::write(&outside, "THE OUTSIDE FILE").unwrap();
    let at = lab.artifacts().join(&id).join("swapped.txt");
    std::fs::write(&at, "inside the campaign").unwrap();
    let server = serve_with(&lab, "");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapping = {
        let (at, stop) = (at.clone(), stop.clone());
        std::thread::spawn(move || swapper(at, outside, stop))
    };
    let path = format!("/artifacts/{id}/swapped.txt");
    let (mut served, mut refused) = (0, 0);
    for _ in 0..3000 {
        let (code, _, body) = request(&server.addr, "GET", &path, &[], "");
        assert!(!body.contains("OUTSIDE"), "the outside file was served: {code} {body}");
        match code {
            200 => {
                assert_eq!(body, "inside the campaign");
                served += 1;
            }
            400 => {
                assert!(body.contains("leads through a link"), "{body}");
                refused += 1;
            }
            // Between the two renames nothing is missing (rename replaces), but say so.
            other => panic!("{other}: {body}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapping.join().unwrap();
    // Both sides of the race were met: the link refused, the file served.
    assert!(served > 0 && refused > 0, "served {served}, refused {refused} over {swaps} swaps");
    eprintln!("served {served}, refused {refused}, {swaps} swaps");
}
