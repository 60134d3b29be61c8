//! The stand-in iPhone (standins/iphone): usbmuxd and the phones behind it on a Unix
//! socket of the test's own, each phone paired (its pair record in the stand-in's root).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idevice::usbmuxd::UsbmuxdAddr;

pub const UDID: &str = "00008110-000A1B2C3D4E5F60";
pub const REPLAY_UDID: &str = "63c3d055c4f83e960e5980fa68be0fbf7d4ba74c";
pub const IOREG: &str = "tests/fixtures/devices/ios/ioregistry_iopmpowersource_goios.plist";

pub fn phone_toml(extra: &str) -> String {
    format!(
        "DeviceName = \"Lab iPhone\"\nProductType = \"iPhone14,2\"\nProductVersion = \"16.7.2\"\nBuildVersion = \"20H115\"\n\
         ioregistry = \"{}\"\n{extra}\n[battery]\nBatteryCurrentCapacity = 85\nBatteryIsCharging = true\n\
         ExternalConnected = true\nExternalChargeCapable = true\nFullyCharged = false\nHasBattery = true\n",
        super::root().join(IOREG).display()
    )
}

/// An iOS 17 phone (the CoreDevice tunnel, RSD, the app and diagnostics services).
pub fn phone17_toml(extra: &str) -> String {
    phone_toml(extra).replace("\"16.7.2\"", "\"17.5.1\"").replace("\"20H115\"", "\"21F90\"")
}

pub struct StandIn {
    pub child: Child,
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
}

impl StandIn {
    /// Phones are `(udid, extra toml lines)`; each is paired unless its lines say `fault = "not_paired"`
    /// (its record is then still written, so the fault, not a missing file, answers).
    pub fn start(phones: &[(&str, &str)]) -> Self {
        let files: Vec<(&str, String)> = phones.iter().map(|(udid, extra)| (*udid, phone_toml(extra))).collect();
        Self::start_files(&files)
    }

    /// As `start`, each phone given by its whole file.
    pub fn start_files(phones: &[(&str, String)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("phones")).unwrap();
        for (udid, text) in phones {
            std::fs::write(root.join(format!("phones/{udid}.toml")), text).unwrap();
            let paired = Command::new(super::standin("iphone"))
                .args(["pair", "--root"])
                .arg(&root)
                .args(["--udid", udid])
                .output()
                .unwrap();
            assert!(paired.status.success(), "{}", String::from_utf8_lossy(&paired.stderr));
        }
        let socket = dir.path().join("usbmuxd");
        let mut child = Command::new(super::standin("iphone"))
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--root")
            .arg(&root)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("listening {}", socket.display()));
        StandIn { child, dir, socket }
    }

    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn addr(&self) -> UsbmuxdAddr {
        UsbmuxdAddr::UnixSocket(self.socket.display().to_string())
    }

    /// The crate's provider for one phone, as the backend makes it.
    pub async fn provider(&self, udid: &str) -> idevice::provider::UsbmuxdProvider {
        let addr = self.addr();
        let dev = addr.connect(1).await.unwrap().get_device(udid).await.unwrap();
        dev.to_provider(addr, "lab-test")
    }

    pub fn journal(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.root().join("journal.jsonl")).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    pub fn journalled(&self, service: &str, request: &str) -> Vec<serde_json::Value> {
        self.journal().into_iter().filter(|j| j["service"] == service && j["request"] == request).collect()
    }

    /// What `iphone sysdiagnose` printed: the archive it left for the phone.
    pub fn sysdiagnose(&self, udid: &str, from: f64, to: f64, charging_s: Option<f64>) -> PathBuf {
        let mut c = Command::new(super::standin("iphone"));
        c.args(["sysdiagnose", "--root"]).arg(self.root()).args(["--udid", udid]);
        c.args(["--from", &format!("{from:.3}"), "--to", &format!("{to:.3}")]);
        if let Some(s) = charging_s {
            c.args(["--charging-s", &s.to_string()]);
        }
        let made = c.output().unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        PathBuf::from(String::from_utf8(made.stdout).unwrap().trim())
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A minimal `.ipa` of `bundle` at `dir/name`.
pub fn ipa(dir: &Path, name: &str, bundle: &str) {
    let made = Command::new(super::standin("iphone"))
        .args(["ipa", "--bundle-id", bundle, "--version", "7", "--out"])
        .arg(dir.join(name))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
}

/// A lab with the stand-in's phone on a manual tether, the lab's endpoint on this machine
/// under a name the phone resolves (its file's `hosts`); `ios_extra`: more `[device.ios]` lines.
pub fn iphone_lab(standin: &StandIn, ios_extra: &str) -> super::TempLab {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    super::TempLab::from_text(&format!(
        "[lab]\nname = \"ios\"\nendpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = \"http://lab-machine.invalid:{port}\"\n\n\
         [[host]]\nname = \"local\"\n\n\
         [[device]]\nname = \"iphone-1\"\nhost = \"local\"\nplatform = \"ios\"\nmodel = \"iPhone 14\"\ntether = \"manual\"\n\
         [device.ios]\nudid = \"{UDID}\"\nusbmuxd = \"{}\"\n{ios_extra}",
        standin.socket.display()
    ))
}

/// A lab with the stand-in's phone (manual tether) and a campaign of two builds, one trial
/// each, untethered, with a config's environment and arguments.
pub fn campaign(standin: &StandIn) -> (super::TempLab, PathBuf) {
    let lab = iphone_lab(standin, "");
    ipa(lab.dir.path(), "Control.ipa", "io.example.control");
    ipa(lab.dir.path(), "Envoy.ipa", "io.example.envoy");
    let rb = lab.dir.path().join("ios.toml");
    std::fs::write(
        &rb,
        "name = \"ios\"\nduration = \"3s\"\nrepeats = 1\nretries = 0\norder = \"sequential\"\ndevices = [\"iphone-1\"]\n\n\
         [builds.control]\nbaseline = true\n[builds.control.ios]\nipa = \"Control.ipa\"\nbundle_id = \"io.example.control\"\n\n\
         [builds.envoy]\n[builds.envoy.ios]\nipa = \"Envoy.ipa\"\nbundle_id = \"io.example.envoy\"\n\n\
         [configs.dns-1m]\n[configs.dns-1m.ios]\nenv = { ENVOY_DNS_REFRESH_S = \"60\" }\nargs = [\"-EnvoyTrace\", \"YES\"]\n\n\
         [preconditions]\nuntethered = true\n",
    )
    .unwrap();
    (lab, rb)
}

/// The phone's battery as lockdown reports it: on the cable or off it (the rest of its file kept).
pub fn plugged(standin: &StandIn, on: bool) {
    let file = standin.root().join(format!("phones/{UDID}.toml"));
    let text: String = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| match l.split_once(" = ") {
            Some((k @ ("BatteryIsCharging" | "ExternalConnected"), _)) => format!("{k} = {on}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    // Whole or not at all: the stand-in reads the file on every connection.
    let tmp = file.with_extension("toml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, file).unwrap();
}

/// What `lab run` did: the operator steps it asked for (each answered with `lab confirm` from
/// another process, after `at_step`), its exit code, stdout and stderr.
pub struct Run {
    pub steps: Vec<String>,
    pub code: Option<i32>,
    pub out: String,
    pub err: String,
}

pub fn run_campaign(lab: &super::TempLab, rb: &Path, mut at_step: impl FnMut(&str)) -> Run {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("lab"))
        .current_dir(super::root())
        .env_remove("LAB_CONFIG")
        .args(["--lab", lab.lab.to_str().unwrap(), "run", rb.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut steps) = (String::new(), Vec::new());
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        let Some(cmd) = line.contains("OPERATOR").then(|| line.split('`').nth(1)).flatten() else { continue };
        let args: Vec<&str> = cmd.split_whitespace().collect();
        assert_eq!(args[..2], ["lab", "confirm"], "{line}");
        let step = args.iter().skip_while(|a| **a != "--step").nth(1).expect("--step").to_string();
        at_step(&step);
        let o = lab.cmd(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
        steps.push(step);
    }
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    Run { steps, code: status.code(), out, err }
}

/// The first trial valid and read from the powerlog (its figures, its battery curve, only
/// the powerlog kept of the sysdiagnose); the second, which charged 2 s, invalid.
pub fn assert_soaks_read_from_the_powerlog(lab: &super::TempLab) {
    let status: Vec<String> = lab.sql("SELECT status FROM attempts ORDER BY trial_idx");
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts ORDER BY trial_idx");
    let rows: Vec<(String, String)> = status.into_iter().zip(reasons).collect();
    assert_eq!(rows[0].0, "valid", "{rows:?}");
    assert_eq!(rows[1].0, "invalid", "{rows:?}");
    assert!(rows[1].1.contains("charg"), "{rows:?}");
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements WHERE trial_idx = 0 ORDER BY metric");
    for m in ["battery_drop_pct", "charge_used_mah", "energy_j", "battery_temp_c", "cycle_count"] {
        assert!(metrics.iter().any(|x| x == m), "{m} missing from {metrics:?}");
    }
    // One value per metric: the soak's from the powerlog, the rest read over USB.
    let all: Vec<String> = lab.sql("SELECT metric FROM measurements WHERE trial_idx = 0");
    assert_eq!(all.len(), metrics.len(), "{all:?}");
    let drop_source: Vec<String> =
        lab.sql("SELECT source FROM measurements WHERE trial_idx = 0 AND metric = 'charge_used_mah'");
    assert!(drop_source[0].contains("powerlog"), "{drop_source:?}");
    let series: Vec<String> = lab.sql("SELECT source FROM series WHERE trial_idx = 0");
    assert!(series.iter().any(|s| s.contains("powerlog")), "{series:?}");
    let kept: Vec<String> = lab.sql("SELECT artifact_dir FROM attempts ORDER BY trial_idx");
    let dir = lab.artifacts().join(&kept[0]);
    assert!(dir.join("powerlog.PLSQL").exists(), "{}", dir.display());
    assert!(!dir.join("sysdiagnose.tar.gz").exists());
}

/// The files left in a folder of the stand-in's root (none when it does not exist).
pub fn left_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

/// Each launch of the campaign (`campaign`) had the trial's environment and the config's
/// arguments, in order.
pub fn assert_launched_with_the_trials_settings(launches: &[serde_json::Value]) {
    assert_eq!(launches.len(), 2, "{launches:?}");
    for l in launches {
        assert_eq!(l["env"]["ENVOY_DNS_REFRESH_S"], "60", "{l}");
        assert_eq!(l["env"]["LAB_DURATION_MS"], "3000", "{l}");
        assert!(l["env"]["LAB_ENDPOINT_URL"].as_str().unwrap().starts_with("http://lab-machine.invalid:"), "{l}");
        assert_eq!(l["args"], serde_json::json!(["-EnvoyTrace", "YES"]), "{l}");
    }
}

// ---- tethered samples: shared by the lockdown (iphone_standin.rs) and RSD (iphone17_standin.rs) tests ----

pub type RemoteServer = idevice::dvt::remote_server::RemoteServerClient<Box<dyn idevice::ReadWrite>>;

/// Launches `bundle_id` through DVT's process control; its pid.
pub async fn launch(rs: &mut RemoteServer, bundle_id: &str, env: &[(&str, String)]) -> u64 {
    let mut pc = idevice::dvt::process_control::ProcessControlClient::new(rs).await.unwrap();
    let env: plist::Dictionary = env.iter().map(|(k, v)| (k.to_string(), plist::Value::from(v.as_str()))).collect();
    pc.launch_app(bundle_id, Some(env), None, false, true).await.unwrap()
}

/// A plain HTTP server answering 200 to every request; the count of requests it got.
pub fn http_server() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let mut conn = conn;
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            if got.starts_with(b"GET ") {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            }
        }
    });
    (port, count)
}

/// A workload's environment: GET the server on `port` by the name the phone file's `hosts`
/// gives (`lab-machine.invalid`) every 100 ms for a second.
pub fn pinging(port: u16) -> [(&'static str, String); 3] {
    [
        ("LAB_ENDPOINT_URL", format!("http://lab-machine.invalid:{port}/ping")),
        ("LAB_REQUEST_INTERVAL_MS", "100".to_string()),
        ("LAB_DURATION_MS", "1000".to_string()),
    ]
}

/// The TCP payload and destination port of an en0 packet (Ethernet, IPv4, TCP).
pub fn tcp_payload(data: &[u8]) -> (u16, &[u8]) {
    let ip = &data[14..];
    assert_eq!(ip[0] >> 4, 4, "IPv4");
    assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len(), "the IPv4 total length");
    let tcp = &ip[usize::from(ip[0] & 0xf) * 4..];
    (u16::from_be_bytes([tcp[2], tcp[3]]), &tcp[usize::from(tcp[12] >> 4) * 4..])
}

/// Reads the tap until the `pinging` workload of `pid` ends itself: every request the server
/// got, and each answer, is a packet of the app's (`comm`) under its pid.
pub async fn assert_the_workloads_requests_were_captured(
    standin: &StandIn,
    pcap: &mut idevice::pcapd::PcapdClient,
    pid: u64,
    port: u16,
    received: &AtomicUsize,
    comm: &str,
) {
    let mut packets = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while tokio::time::Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(500), pcap.next_packet()).await {
            Ok(packet) => packets.push(packet.unwrap()),
            Err(_) if !standin.journalled("workload", "end").is_empty() => break,
            Err(_) => {}
        }
    }
    let end = standin.journalled("workload", "end");
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!((end[0]["pid"].clone(), end[0]["reason"].clone()), (serde_json::json!(pid), "duration".into()));
    let served = received.load(Ordering::SeqCst);
    assert!(served >= 5, "about ten requests in a second at 100 ms: {served}");
    assert_eq!(end[0]["requests"], served, "{end:?}");
    assert_eq!(end[0]["responses"], served, "{end:?}");

    let strays: Vec<_> = packets
        .iter()
        .filter(|p| p.pid != pid as u32 || p.comm != comm || p.interface_name != "en0")
        .map(|p| (p.pid, p.comm.clone(), p.interface_name.clone()))
        .take(3)
        .collect();
    assert!(strays.is_empty(), "packets not of {pid} ({comm}) on en0: {strays:?}");
    assert!(packets.iter().all(|p| p.header_version == 2 && p.frame_pre_length == 14));
    let gets = packets
        .iter()
        .filter(|p| {
            let (dst, payload) = tcp_payload(&p.data);
            p.io == 1 && dst == port && payload.starts_with(b"GET ")
        })
        .count();
    assert!(gets.abs_diff(served) <= 1, "{gets} GET packets, {served} requests served");
    let answers = packets.iter().filter(|p| tcp_payload(&p.data).1.starts_with(b"HTTP/1.1 200")).count();
    assert!(answers.abs_diff(served) <= 1, "{answers} answers, {served} requests served");
}
