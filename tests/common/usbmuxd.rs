//! Debian's real usbmuxd (1.1.1 listens only on /var/run/usbmuxd and keeps pair records
//! in /var/lib/lockdown): the tests start it in the foreground when none is running, and
//! share it. This machine has no USB, so it lists no device.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const USBMUXD: &str = "/usr/sbin/usbmuxd";
pub const SOCKET: &str = "/var/run/usbmuxd";

/// The daemon for one test: started here (and stopped when dropped), or found running.
/// Tests that use it run one at a time.
pub struct Daemon {
    child: Option<Child>,
    _one_at_a_time: MutexGuard<'static, ()>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(SOCKET);
        }
    }
}

/// usbmuxd on its socket. The tests that need it are ignored where it is missing or cannot
/// be started (`#[test_needs::needs(usbmuxd)]`), unless LAB_REQUIRE_USBMUXD=1 (CI); one
/// that gets here without it fails.
pub fn usbmuxd() -> Daemon {
    static ONE: Mutex<()> = Mutex::new(());
    let guard = ONE.lock().unwrap_or_else(|p| p.into_inner());
    if UnixStream::connect(SOCKET).is_ok() {
        return Daemon { child: None, _one_at_a_time: guard };
    }
    assert!(Path::new(USBMUXD).exists(), "needs usbmuxd: {USBMUXD} is missing (apt-get install usbmuxd)");
    assert!(
        Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")),
        "needs usbmuxd: it must run as root to listen on {SOCKET}"
    );
    let _ = std::fs::remove_file(SOCKET);
    let child = Command::new(USBMUXD)
        .args(["-f", "-U", "root"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting usbmuxd");
    let daemon = Daemon { child: Some(child), _one_at_a_time: guard };
    let start = Instant::now();
    while UnixStream::connect(SOCKET).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "usbmuxd did not listen on {SOCKET} within 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    daemon
}
