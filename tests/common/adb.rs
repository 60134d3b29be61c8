//! Debian's real adb client and server and the device-side stand-in (standins/adb-phone),
//! for the tests that drive phones: a private adb server per test (`adb -P PORT`,
//! `ADB_EMU=0`, its own HOME and so its own key) and phones on 127.0.0.1.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use super::{TempLab, standin};

pub const ADB: &str = "/usr/bin/adb";

/// A free port from the kernel (ephemeral, so never 5037 nor 5555–5585).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A device-side stand-in on 127.0.0.1; its state lives in `root`.
pub struct Phone {
    pub child: Child,
    pub serial: String,
    pub port: u16,
    pub log: PathBuf,
}

impl Phone {
    pub fn start(root: &Path, port: u16, flags: &[&str]) -> Phone {
        let log = root.with_extension("log");
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let mut child = Command::new(standin("adb-phone"))
            .args(["--listen", &format!("127.0.0.1:{port}"), "--root", root.to_str().unwrap()])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr =
            line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("stand-in said {line:?}")).to_string();
        let port = addr.rsplit(':').next().unwrap().parse().unwrap();
        Phone { child, serial: addr, port, log }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Phone {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The model file, which the stand-in reads and writes around every command; a test edits
/// it between commands as a tether or the physical world would change the phone.
pub fn edit_state(root: &Path, f: impl FnOnce(&mut Value)) {
    // The stand-in's lock on its model (standins/adb-phone/src/store.rs `ModelLock`): an edit
    // made while it runs a command is not overwritten by it.
    super::edit_json_locked(&root.join("phone.json"), &root.join("phone.lock"), f);
}

pub fn state(root: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("phone.json")).unwrap()).unwrap()
}

/// A private adb server.
pub struct Adb {
    pub port: u16,
    pub home: TempDir,
}

pub struct Run {
    pub out: String,
    pub err: String,
    pub code: i32,
}

impl Adb {
    /// A test that needs it is ignored where Debian's adb is missing
    /// (`#[test_needs::needs(adb)]`) unless LAB_REQUIRE_ADB=1 (CI); one that gets here
    /// without it fails.
    pub fn start() -> Adb {
        assert!(Path::new(ADB).exists(), "needs adb: {ADB} is missing (apt-get install adb)");
        let adb = Adb { port: free_port(), home: tempfile::tempdir().unwrap() };
        let started = adb.run(&["start-server"]);
        assert_eq!(started.code, 0, "adb start-server: {}", started.err);
        adb
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(ADB);
        c.arg("-P").arg(self.port.to_string()).args(args);
        c.env("HOME", self.home.path()).env("ADB_EMU", "0").env_remove("ANDROID_SERIAL");
        c
    }

    pub fn output(&self, args: &[&str], stdin: &[u8], timeout: Duration) -> Output {
        let mut child =
            self.command(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        let deadline = Instant::now() + timeout;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("adb {args:?} did not finish in {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, b"")
    }

    pub fn run_with(&self, args: &[&str], stdin: &[u8]) -> Run {
        let o = self.output(args, stdin, Duration::from_secs(60));
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        Run { out: text(o.stdout), err: text(o.stderr), code: o.status.code().unwrap_or(-1) }
    }

    /// `adb connect`; with AUTH it says "failed to authenticate" while the phone has not
    /// (yet) allowed the host.
    pub fn connect(&self, phone: &Phone) {
        let r = self.run(&["connect", &phone.serial]);
        let said = format!("{}{}", r.out, r.err);
        assert!(said.contains("connected to") || said.contains("failed to authenticate to"), "adb connect: {said}");
    }

    /// `adb -s SERIAL ARGS…`.
    pub fn on(&self, phone: &Phone, args: &[&str]) -> Run {
        let mut all = vec!["-s", &phone.serial];
        all.extend_from_slice(args);
        self.run(&all)
    }

    pub fn shell(&self, phone: &Phone, script: &str) -> Run {
        self.on(phone, &["shell", script])
    }

    /// Stdout of a shell command that must succeed.
    pub fn sh(&self, phone: &Phone, script: &str) -> String {
        let r = self.shell(phone, script);
        assert_eq!(r.code, 0, "adb shell {script:?}: {} {}", r.out, r.err);
        r.out
    }

    pub fn devices(&self) -> String {
        self.run(&["devices", "-l"]).out
    }
}

impl Drop for Adb {
    fn drop(&mut self) {
        let _ = self.output(&["kill-server"], b"", Duration::from_secs(20));
    }
}

/// An adb server connected to a fresh phone; `dir` holds the phone's root and log.
pub fn setup(flags: &[&str]) -> (Adb, Phone, TempDir) {
    let adb = Adb::start();
    let dir = tempfile::tempdir().unwrap();
    let phone = Phone::start(&dir.path().join("phone"), 0, flags);
    adb.connect(&phone);
    (adb, phone, dir)
}

pub fn root(dir: &TempDir) -> PathBuf {
    dir.path().join("phone")
}

/// Bytes that install as `package` (see standins/adb-phone/src/packages.rs), with a tail of
/// pseudo-random bytes so the APK spans several WRTE packets.
pub fn apk(package: &str, split: Option<&str>, len: usize) -> Vec<u8> {
    let split = split.map(|s| format!(" split=\"{s}\"")).unwrap_or_default();
    let mut bytes = format!("PK\x03\x04<manifest package=\"{package}\"{split}/>").into_bytes();
    let mut x: u32 = 0x9e37_79b9 ^ len as u32;
    while bytes.len() < len {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.push(x as u8);
    }
    bytes
}

pub fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A lab named `name` with `phone` as its one device, `pixel-1`, on this machine's private
/// adb server, with `tether` as its TOML value and `android_extra` as more
/// `[device.android]` lines. Phones must be given an address they can reach: nothing in these
/// tests connects to it, so a name that resolves nowhere is enough.
pub fn android_lab(name: &str, adb: &Adb, phone: &Phone, tether: &str, android_extra: &str) -> TempLab {
    TempLab::from_text(&format!(
        "[lab]\nname = \"{name}\"\n{}\n\n\
         [[device]]\nname = \"pixel-1\"\nplatform = \"android\"\nmodel = \"Pixel 5\"\ntether = {tether}\n\
         [device.android]\nserial = \"{}\"\nadb_server = \"127.0.0.1:{}\"\n{android_extra}",
        endpoint_keys(),
        phone.serial,
        adb.port
    ))
}

/// `endpoint_bind` and `endpoint_url` on a port free now: the runner starts the endpoint
/// for every campaign whose devices talk to it, and these tests run side by side.
pub fn endpoint_keys() -> String {
    let port = std::net::TcpListener::bind("0.0.0.0:0").unwrap().local_addr().unwrap().port();
    format!("endpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = \"http://lab-machine.invalid:{port}\"")
}
