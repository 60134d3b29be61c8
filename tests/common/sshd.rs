//! A real OpenSSH server on 127.0.0.1 for the tests, with a temporary host key and an
//! authorized client key. `.ci/run` installs openssh-server; where it is missing the
//! tests that need it are ignored (`#[test_needs::needs(sshd)]`, decided when they are
//! built), unless LAB_REQUIRE_SSHD=1 (set by CI), where they run and fail.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    pub user: String,
    child: Option<Child>,
}

/// The server; a test that gets here without an sshd (see the module's note) fails.
pub fn start() -> Sshd {
    start_with("")
}

/// Like `start`, with more `sshd_config` lines (e.g. `SetEnv PATH=…` for the sessions).
pub fn start_with(extra_config: &str) -> Sshd {
    assert!(Path::new(SSHD).exists(), "needs sshd: {SSHD} is missing (apt-get install openssh-server)");
    let dir = tempfile::tempdir().unwrap();
    keygen(&dir.path().join("host_key"));
    keygen(&dir.path().join("client_key"));
    std::fs::copy(dir.path().join("client_key.pub"), dir.path().join("authorized_keys")).unwrap();
    let port = free_port();
    let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap().trim().to_string();
    let d = dir.path().display();
    std::fs::write(
        dir.path().join("sshd_config"),
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\n\
             PermitRootLogin prohibit-password\nUsePAM no\nPidFile {d}/sshd.pid\nLogLevel INFO\nMaxStartups 50\nSubsystem sftp internal-sftp\n\
             AllowTcpForwarding yes\nAllowStreamLocalForwarding yes\n{extra_config}\n"
        ),
    )
    .unwrap();
    // Privilege separation wants this folder (normally made by the service unit).
    let _ = std::fs::create_dir_all("/run/sshd");
    let mut s = Sshd { dir, port, user, child: None };
    s.restart();
    s
}

fn keygen(path: &Path) {
    let ok = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "ssh-keygen failed");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Sshd {
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `[[host]] shelf-1` of a lab.toml: this server, reached with its real key, and `extra` keys.
    pub fn host_table(&self, extra: &str) -> String {
        format!(
            "[[host]]\nname = \"shelf-1\"\naddress = \"{}\"\nuser = \"{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\n\
             connect_timeout = \"3s\"\ncache_dir = \"{}\"\n{extra}\n",
            self.address(),
            self.user,
            self.client_key().display(),
            self.known_hosts().display(),
            self.dir.path().join("cache").display(),
        )
    }

    /// How many SSH connections the server has accepted (logins, counted on the server side).
    pub fn accepted_logins(&self) -> usize {
        let log = std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default();
        log.lines().filter(|l| l.contains("Accepted publickey")).count()
    }

    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client_key")
    }

    /// How the lab reaches this server as host `shelf-1`, checking its key against `known_hosts`.
    pub fn ssh_config(&self, known_hosts: PathBuf) -> lab::transport::SshConfig {
        lab::transport::SshConfig {
            host: "shelf-1".into(),
            ssh: lab::config::SshHost {
                address: self.address(),
                user: self.user.clone(),
                identity: Some(self.client_key()),
                known_hosts,
                strict_host_key_checking: true,
                connect_timeout: Duration::from_secs(5),
                keepalive: Duration::from_secs(30),
                cache_dir: self.dir.path().join("cache").display().to_string(),
                max_sessions: 2,
            },
            connect_attempts: 3,
        }
    }

    /// A known_hosts file that holds this server's real key.
    pub fn known_hosts(&self) -> PathBuf {
        let path = self.dir.path().join("known_hosts");
        let key = std::fs::read_to_string(self.dir.path().join("host_key.pub")).unwrap();
        let mut parts = key.split_whitespace();
        let (kind, b64) = (parts.next().unwrap(), parts.next().unwrap());
        std::fs::write(&path, format!("[127.0.0.1]:{} {kind} {b64}\n", self.port)).unwrap();
        path
    }

    /// A known_hosts file naming this host with some other key (as after a reinstall).
    pub fn wrong_known_hosts(&self) -> PathBuf {
        let other = self.dir.path().join("other_key");
        keygen(&other);
        let key = std::fs::read_to_string(other.with_extension("pub")).unwrap();
        let mut parts = key.split_whitespace();
        let (kind, b64) = (parts.next().unwrap(), parts.next().unwrap());
        let path = self.dir.path().join("known_hosts_changed");
        std::fs::write(&path, format!("# lab test\n[127.0.0.1]:{} {kind} {b64}\n", self.port)).unwrap();
        path
    }

    /// Kills the server and every connection it accepted (they live in its children).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("pkill").args(["-KILL", "-P", &c.id().to_string()]).status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.stop();
        // The log (appended across restarts) tells how many logins the server accepted.
        let child = Command::new(SSHD)
            .arg("-D")
            .arg("-E")
            .arg(self.dir.path().join("sshd.log"))
            .arg("-f")
            .arg(self.dir.path().join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not start on port {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the lab makes cgroups on this sshd's sessions, for a test that needs them
/// (`#[test_needs::needs(cgroup)]`: ignored where there is no cgroup v2 or the tests do not
/// run as root); one that gets here without them fails.
pub fn cgroup() -> PathBuf {
    cgroup_base().expect("needs cgroup: a writable cgroup v2 (mounted, and the tests run as root)")
}

/// Where the lab makes cgroups on this sshd's sessions: the cgroup v2 this test process is
/// in (sshd runs as its child, without PAM, so its sessions stay there). `None` when there
/// is no cgroup v2 or it is not writable (not root), where a test checks what it can.
pub fn cgroup_base() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let base = lab::collect::linux::procfs::cgroup2_mount(&mounts)
        .zip(lab::collect::linux::procfs::own_cgroup2(&own))
        .map(|(m, o)| m.join(o.trim_start_matches('/')));
    let root = nix::unistd::geteuid().is_root();
    match base {
        Some(b) if root => Some(b),
        _ => {
            eprintln!("skipping the cgroup part: no writable cgroup v2 here (run as root)");
            None
        }
    }
}

/// Whether process `pid` is still running on this machine (a zombie is not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}
