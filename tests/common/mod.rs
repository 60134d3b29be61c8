//! Shared helpers for the integration tests: each test gets its own copy of the
//! default lab in a temporary folder, so stores and artifacts never collide.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A cargo example built next to the `lab` binary (target/<profile>/examples/NAME).
pub fn example(name: &str) -> String {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_lab"));
    let path = bin.parent().unwrap().join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --examples` (plain `cargo test` builds it)",
        path.display()
    );
    path.display().to_string()
}

/// A protocol stand-in's binary (the workspace crate standins/NAME: adb-phone, iphone,
/// uhubctl) next to the `lab` binary, target/<profile>/NAME. `cargo test --workspace`
/// builds it before any test runs; when it is missing or older than its sources (a
/// `cargo test` of lab alone), it is built here, once, with `cargo build -p NAME`, and a
/// build that fails or leaves no binary fails the test that asked.
pub fn standin(name: &str) -> String {
    static CHECKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_lab")).parent().unwrap().to_path_buf();
    let path = dir.join(name);
    if !checked.iter().any(|c| c == name) {
        if let Some(why) = stale(&path, &root().join("standins").join(name)) {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
            let mut cmd = std::process::Command::new(cargo);
            cmd.arg("build").arg("--manifest-path").arg(root().join("Cargo.toml")).args(["-p", name, "--bin", name]);
            cmd.arg("--target-dir").arg(dir.parent().unwrap());
            if dir.file_name().is_some_and(|d| d == "release") {
                cmd.arg("--release");
            }
            eprintln!("the stand-in {name}: {why}; building it: {cmd:?}");
            let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
            assert!(
                out.status.success(),
                "the stand-in {name} did not build ({cmd:?}; `cargo test --workspace` builds it):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(
            path.exists(),
            "{} is missing after `cargo build -p {name}`: run `cargo test --workspace`",
            path.display()
        );
        checked.push(name.to_string());
    }
    path.display().to_string()
}

/// Why the binary at `bin` must be built again from the crate in `krate`, if it must.
fn stale(bin: &Path, krate: &Path) -> Option<String> {
    let Ok(built) = std::fs::metadata(bin).and_then(|m| m.modified()) else {
        return Some(format!("{} is missing", bin.display()));
    };
    let mut todo = vec![krate.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(meta) = std::fs::metadata(&p) else { continue };
        if meta.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if meta.modified().is_ok_and(|m| m > built) {
            return Some(format!("{} is newer than {}", p.display(), bin.display()));
        }
    }
    None
}

/// Writes an executable script (a stand-in tool, an app under test).
pub fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A temporary copy of the repository's `lab.toml` (artifacts and store inside it).
pub struct TempLab {
    pub dir: tempfile::TempDir,
    pub lab: PathBuf,
}

impl TempLab {
    pub fn new() -> Self {
        Self::from_text(&std::fs::read_to_string(root().join("lab.toml")).unwrap())
    }

    /// The default lab with its store on the PostgreSQL database at `url`.
    pub fn on_postgres(url: &str) -> Self {
        let text = std::fs::read_to_string(root().join("lab.toml")).unwrap();
        let text = text.replace("store = \"artifacts/lab.db\"", &format!("store = \"{url}\""));
        assert!(text.contains(url), "the default lab.toml names its store");
        Self::from_text(&text)
    }

    pub fn from_file(path: &Path) -> Self {
        Self::from_text(&std::fs::read_to_string(path).unwrap())
    }

    pub fn from_text(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let lab = dir.path().join("lab.toml");
        std::fs::write(&lab, text).unwrap();
        TempLab { dir, lab }
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("artifacts/lab.db")
    }

    pub fn artifacts(&self) -> PathBuf {
        self.dir.path().join("artifacts")
    }

    /// `lab --lab <this lab> ARGS`, run from the repository root.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::cargo_bin("lab").unwrap();
        c.current_dir(root()).arg("--lab").arg(&self.lab).args(args).env_remove("LAB_CONFIG").env_remove("LAB_STORE");
        c
    }

    /// `lab --lab <this lab> ARGS` as a std `Command`, to be spawned and run alongside others.
    pub fn process(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("lab"));
        c.current_dir(root()).arg("--lab").arg(&self.lab).args(args).env_remove("LAB_CONFIG").env_remove("LAB_STORE");
        c
    }

    /// Holds `device`'s lease in this process as `req` says (another campaign, `lab care`), on
    /// this lab's store, until the lease is dropped.
    pub fn hold(&self, device: &str, req: &lab::store::LeaseRequest) -> lab::store::DeviceLease {
        let store = lab::store::Store::open(&self.store()).unwrap();
        store.try_lease(device, req).unwrap().unwrap()
    }

    /// Ids of the store's campaigns, newest first.
    pub fn campaigns(&self) -> Vec<String> {
        if !self.store().exists() {
            return Vec::new();
        }
        let conn = rusqlite::Connection::open(self.store()).unwrap();
        let mut st = conn.prepare("SELECT id FROM campaigns ORDER BY created_at DESC").unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect()
    }

    pub fn sql<T: rusqlite::types::FromSql>(&self, q: &str) -> Vec<T> {
        self.try_sql(q).unwrap()
    }

    /// Like `sql`, but a store still being created (no tables yet) is an error, not a panic.
    pub fn try_sql<T: rusqlite::types::FromSql>(&self, q: &str) -> rusqlite::Result<Vec<T>> {
        let conn = rusqlite::Connection::open(self.store())?;
        let mut st = conn.prepare(q)?;
        st.query_map([], |r| r.get(0))?.collect()
    }
}

/// Mean of one metric per variant over valid rows of a results.csv.
pub fn csv_means(csv_text: &str, metric: &str) -> std::collections::BTreeMap<String, f64> {
    let mut rdr = csv::Reader::from_reader(csv_text.as_bytes());
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (v, m, s, x) = (col("variant"), col("metric"), col("status"), col("value"));
    let mut acc: std::collections::BTreeMap<String, (f64, u32)> = Default::default();
    for r in rdr.records() {
        let r = r.unwrap();
        if &r[m] == metric && &r[s] == "valid" {
            let e = acc.entry(r[v].to_string()).or_default();
            e.0 += r[x].parse::<f64>().unwrap();
            e.1 += 1;
        }
    }
    acc.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect()
}
/// Edits a stand-in's JSON state under its `flock` lock (the stand-ins take the same lock
/// around each command, so neither loses the other's change), written whole and renamed.
pub fn edit_json_locked(json: &Path, lock: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    use std::os::fd::AsRawFd;
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(lock).unwrap();
    // SAFETY: flock on a descriptor owned here; released when `lock` is dropped.
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0, "locking {}", json.display());
    let mut state: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    f(&mut state);
    let tmp = PathBuf::from(format!("{}.test", json.display()));
    std::fs::write(&tmp, serde_json::to_string_pretty(&state).unwrap()).unwrap();
    std::fs::rename(tmp, json).unwrap();
}

pub mod adb;
pub mod iphone;
pub mod otii;
pub mod s3;
pub mod sshd;
pub mod uhubctl;
pub mod usbmuxd;

/// A new, empty database on the throwaway server `LAB_TEST_POSTGRES` names (tests that
/// call it carry `#[test_needs::needs(postgres)]`); its URL, with the server's password.
pub fn fresh_postgres_database() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let admin = std::env::var("LAB_TEST_POSTGRES").expect("LAB_TEST_POSTGRES: start one with tests/pg-cluster.sh");
    let name = format!("lab_it{}_{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let owner = lab::store::PgOwner::connect(&lab::store::PgUrl::parse(&admin).unwrap()).unwrap();
    let create = format!("CREATE DATABASE {name}");
    owner.call(move |c| c.batch(&create)).unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}
