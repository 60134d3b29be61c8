//! Probes the tools lab's integration tests need and writes `$OUT_DIR/probed.rs` for
//! `#[needs(…)]` (src/lib.rs): for each need, the reason to ignore its tests, or none.
//!
//! A need is met when its probe finds the tool (the same paths the tests use), and
//! treated as met when its `LAB_REQUIRE_*` variable is `1` (CI): then its tests run, and
//! fail if the tool is missing. Adding a need is one line in `needs()`, then
//! `#[test_needs::needs(name)]` on the tests and an assertion with the same hint where the
//! test uses the tool.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A tool some tests need: its name in `#[needs(…)]`, the variable that makes CI run its
/// tests anyway, and a probe that says what is missing and how to install it.
struct Need {
    name: &'static str,
    require: &'static str,
    probe: Box<dyn Fn() -> Result<(), String>>,
}

fn needs() -> Vec<Need> {
    let need = |name, require, probe: Box<dyn Fn() -> Result<(), String>>| Need { name, require, probe };
    vec![
        need("sshd", "LAB_REQUIRE_SSHD", Box::new(|| file("/usr/sbin/sshd", "apt-get install openssh-server"))),
        need("adb", "LAB_REQUIRE_ADB", Box::new(|| file("/usr/bin/adb", "apt-get install adb"))),
        need("usbmuxd", "LAB_REQUIRE_USBMUXD", Box::new(usbmuxd)),
        need(
            "idevice",
            "LAB_REQUIRE_IDEVICE",
            Box::new(|| {
                ["idevice_id", "ideviceinfo", "idevicediagnostics"]
                    .iter()
                    .try_for_each(|t| file(&format!("/usr/bin/{t}"), "apt-get install libimobiledevice-utils"))
            }),
        ),
        need(
            "chromium",
            "LAB_REQUIRE_CHROMIUM",
            Box::new(|| match on_path(&["chromium", "chromium-browser"]) {
                Some(_) => Ok(()),
                None => Err("chromium is not installed (Debian: apt-get install chromium)".into()),
            }),
        ),
        need(
            "chromedriver",
            "LAB_REQUIRE_CHROMEDRIVER",
            Box::new(|| match (on_path(&["chromium", "chromium-browser"]), on_path(&["chromedriver"])) {
                (Some(_), Some(_)) => Ok(()),
                _ => Err("chromium and its chromedriver are not both installed (Debian: apt-get install chromium \
chromium-driver)"
                    .into()),
            }),
        ),
        need("scipy", "LAB_REQUIRE_SCIPY", Box::new(|| imports("python3", "scipy, numpy", "scipy"))),
        need("pandas", "LAB_REQUIRE_PANDAS", Box::new(|| imports(&bench_python(), "pandas, scipy", "pandas scipy"))),
        need(
            "otii_client",
            "LAB_REQUIRE_OTII_CLIENT",
            Box::new(|| imports("python3", "otii_tcp_client", "otii-tcp-client==1.0.13")),
        ),
        need(
            "monsoon_py",
            "LAB_REQUIRE_MONSOON_PY",
            Box::new(|| imports("python3", "Monsoon.HVPM, Monsoon.LVPM, Monsoon.sampleEngine", "monsoon==0.1.88")),
        ),
        need(
            "junitparser",
            "LAB_REQUIRE_JUNITPARSER",
            Box::new(|| imports("python3", "xmlschema, junitparser", "xmlschema junitparser")),
        ),
        need(
            "systemd_analyze",
            "LAB_REQUIRE_SYSTEMD_ANALYZE",
            Box::new(|| runs("systemd-analyze", "Debian: apt-get install systemd")),
        ),
        need("cgroup", "LAB_REQUIRE_CGROUP", Box::new(cgroup)),
        need("zsh", "LAB_REQUIRE_ZSH", Box::new(|| tool("zsh", "apt-get install zsh"))),
        need("fish", "LAB_REQUIRE_FISH", Box::new(|| tool("fish", "apt-get install fish"))),
        need("groff", "LAB_REQUIRE_GROFF", Box::new(|| tool("groff", "apt-get install groff-base"))),
        need("postgres", "LAB_REQUIRE_POSTGRES", Box::new(postgres)),
        // An S3 API: moto's server mode, started by tests/s3-server.sh (by .ci/run once, or
        // by a test that stops and starts its own).
        need("s3", "LAB_REQUIRE_S3", Box::new(|| imports("python3", "moto.server, flask, boto3", "'moto[server]'"))),
    ]
}

fn main() {
    let mut probed = String::from("const PROBED: &[(&str, Option<&str>)] = &[\n");
    for need in needs() {
        println!("cargo:rerun-if-env-changed={}", need.require);
        let required = std::env::var(need.require).as_deref() == Ok("1");
        let reason = match (need.probe)() {
            Ok(()) => None,
            Err(missing) => Some(format!("needs {}: {missing}", need.name)),
        };
        let ignore = match (reason, required) {
            (Some(reason), true) => {
                println!("cargo:warning={}=1 but {reason}: its tests will run and fail", need.require);
                None
            }
            (reason, _) => reason,
        };
        writeln!(probed, "    ({:?}, {:?}),", need.name, ignore).unwrap();
    }
    probed.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("probed.rs");
    std::fs::write(out, probed).unwrap();

    // Probe again when what the probes read changes: the variables, and the folders tools
    // and Python packages are installed in (only ones that exist: cargo would take a
    // missing one as always changed).
    for var in ["PATH", "LAB_BENCH_PYTHON", "PYTHONPATH", "PYENV_VERSION", "LAB_TEST_POSTGRES"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let mut watched = BTreeSet::new();
    watched.extend(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from));
    watched.extend(path_dirs());
    watched.extend(site_packages("python3"));
    watched.extend(site_packages(&bench_python()));
    for dir in watched.iter().filter(|d| d.is_dir()) {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
}

/// The interpreter crosscheck.rs gives the benchmark's pandas script.
fn bench_python() -> String {
    std::env::var("LAB_BENCH_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// A PostgreSQL server the tests may create databases on: `LAB_TEST_POSTGRES`.
fn postgres() -> Result<(), String> {
    match std::env::var("LAB_TEST_POSTGRES") {
        Ok(url) if !url.is_empty() => Ok(()),
        _ => Err("LAB_TEST_POSTGRES is not set (start a throwaway server: `eval \"$(tests/pg-cluster.sh)\"`; \
Debian: apt-get install postgresql)"
            .into()),
    }
}

fn file(path: &str, install: &str) -> Result<(), String> {
    if Path::new(path).exists() { Ok(()) } else { Err(format!("{path} is missing ({install})")) }
}

fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default()
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_dirs()
        .iter()
        .flat_map(|d| names.iter().map(move |n| d.join(n)))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// `name` is an executable on PATH.
fn tool(name: &str, install: &str) -> Result<(), String> {
    on_path(&[name]).map(|_| ()).ok_or_else(|| format!("{name} is not on PATH ({install})"))
}

/// `program --version` starts.
fn runs(program: &str, install: &str) -> Result<(), String> {
    let started = Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    started.map(|_| ()).map_err(|_| format!("{program} is not installed ({install})"))
}

/// `python -c "import MODULES"` succeeds.
fn imports(python: &str, modules: &str, packages: &str) -> Result<(), String> {
    let ok = Command::new(python)
        .args(["-c", &format!("import {modules}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok { Ok(()) } else { Err(format!("{python} cannot import {modules} (python3 -m pip install {packages})")) }
}

/// Where `python` installs packages (nothing if it does not run).
fn site_packages(python: &str) -> Vec<PathBuf> {
    let script = "import site\nfor p in site.getsitepackages() + [site.getusersitepackages()]: print(p)";
    let out = Command::new(python).args(["-c", script]).stderr(Stdio::null()).output();
    let text = out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    text.unwrap_or_default().lines().map(PathBuf::from).collect()
}

/// The effective user is root (`Uid:` real, effective, … in /proc/self/status).
fn root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1)) == Some("0")
}

/// A running usbmuxd's socket, or Debian's usbmuxd and root to start one on it (as
/// tests/common/usbmuxd.rs does).
fn usbmuxd() -> Result<(), String> {
    if std::os::unix::net::UnixStream::connect("/var/run/usbmuxd").is_ok() {
        return Ok(());
    }
    file("/usr/sbin/usbmuxd", "apt-get install usbmuxd")?;
    if root() { Ok(()) } else { Err("usbmuxd must run as root to listen on /var/run/usbmuxd".into()) }
}

/// A cgroup v2 this process is in, and root to write it (tests/common/sshd.rs `cgroup_base`).
fn cgroup() -> Result<(), String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if !mounts.lines().any(|l| l.split_whitespace().nth(2) == Some("cgroup2"))
        || !own.lines().any(|l| l.starts_with("0::"))
    {
        return Err("no cgroup v2 here".into());
    }
    if root() { Ok(()) } else { Err("a writable cgroup v2: run the tests as root".into()) }
}
