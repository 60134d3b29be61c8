//! An S3 API for the object-store tests: moto's server (tests/s3-server.sh), the one
//! `.ci/run` started (`LAB_TEST_S3`) or one of the test's own, which it may stop and start.

use std::collections::BTreeMap;
use std::process::Command;

use super::root;

pub struct S3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// A server this test started (and stops when dropped).
    own: Option<u32>,
}

impl S3 {
    /// `LAB_TEST_S3`'s server, else one of this test's own.
    pub fn shared() -> S3 {
        match std::env::var("LAB_TEST_S3") {
            Ok(e) if !e.is_empty() => S3 { endpoint: e, own: None },
            _ => S3::start(None),
        }
    }

    /// A server of this test's own, on `port` or a free one.
    pub fn start(port: Option<u16>) -> S3 {
        let mut cmd = Command::new(root().join("tests/s3-server.sh"));
        if let Some(p) = port {
            cmd.arg(p.to_string());
        }
        let out = cmd.output().expect("tests/s3-server.sh runs");
        assert!(
            out.status.success(),
            "moto's server did not start (needs s3: pip install 'moto[server]'): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let var = |name: &str| {
            let at = text.find(&format!("{name}='")).unwrap_or_else(|| panic!("{name} in {text}")) + name.len() + 2;
            text[at..].split('\'').next().unwrap().to_string()
        };
        S3 { endpoint: var("LAB_TEST_S3"), own: Some(var("LAB_TEST_S3_PID").parse().unwrap()) }
    }

    pub fn port(&self) -> u16 {
        self.endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Stops this test's own server (its buckets go with it: moto keeps them in memory).
    pub fn stop(&mut self) {
        if let Some(pid) = self.own.take() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
            let _ = nix::sys::wait::waitpid(pid, None);
        }
    }

    /// Stops this test's own server where it is (SIGSTOP): connections are still taken by
    /// the kernel, and nothing answers. `thaw` lets it go on, with its buckets.
    pub fn freeze(&self, frozen: bool) {
        let pid = nix::unistd::Pid::from_raw(self.own.expect("a server of the test's own") as i32);
        let signal = if frozen { nix::sys::signal::Signal::SIGSTOP } else { nix::sys::signal::Signal::SIGCONT };
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    /// Makes a bucket, named for the test; its name.
    pub fn bucket(&self, name: &str) -> String {
        let unique =
            format!("{name}-{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        self.list(&unique, &["--create"]);
        unique
    }

    /// Every object of `bucket` as boto3 reads it: key → (size, SHA-256 of its bytes).
    pub fn objects(&self, bucket: &str) -> BTreeMap<String, (u64, String)> {
        self.list(bucket, &[])
    }

    /// Makes the bucket `bucket` (again, after a restart).
    pub fn list_create(&self, bucket: &str) {
        self.list(bucket, &["--create"]);
    }

    fn list(&self, bucket: &str, flags: &[&str]) -> BTreeMap<String, (u64, String)> {
        let out = Command::new("python3")
            .arg(root().join("tests/s3_objects.py"))
            .args([&self.endpoint, bucket])
            .args(flags)
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "listing {bucket}: {}", String::from_utf8_lossy(&out.stderr));
        let json: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        json.into_iter()
            .map(|(k, v)| (k, (v["size"].as_u64().unwrap(), v["sha256"].as_str().unwrap().to_string())))
            .collect()
    }
}

static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Drop for S3 {
    fn drop(&mut self) {
        self.stop();
    }
}
