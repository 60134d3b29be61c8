//! Loader tests for what the repository's files do not exercise: every key of the
//! format accepted with its value, defaults, and file checks against real files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

const LAB: &str = r#"
[lab]
name = "bench"
artifacts = "out"
store = "db/lab.db"
endpoint_bind = "0.0.0.0:8765"
endpoint_url = "http://192.0.2.10:8765/"

[[host]]
name = "local"

[[device]]
name = "pixel-1"
platform = "android"
model = "Pixel 5"
os = "Android 13"
tags = ["android", "phone", "android"]
tether = { uhubctl = { location = "1-1.4", port = 2 } }
[device.android]
serial = "0A1B2C"
adb_server = "10.0.0.7:5038"
perfetto = true

[[device]]
name = "pixel-2"
platform = "android"
model = "Pixel 5"
[device.android]
serial = "192.168.1.7:5555"

[[device]]
name = "iphone-1"
platform = "ios"
model = "iPhone 6s"
[device.ios]
udid = "00008020-001A"
usbmuxd = "/var/run/usbmuxd-shelf"
samples = ["cpu", "energy", "cpu", "packets"]

[[device]]
name = "iphone-2"
platform = "ios"
model = "iPhone 6s"
[device.ios]
udid = "0123456789abcdef0123456789abcdef01234567"
usbmuxd = "[::1]:27015"

[[device]]
name = "laptop"
platform = "host"
model = "ThinkPad"

[[device]]
name = "sim-a"
host = "local"
platform = "sim"
model = "Pixel 5"
tether = "manual"
[device.sim]
emulates = "android"
seed = 9
battery_mah = 3000
battery_start_pct = 90
voltage_v = 3.9
base_mw = 300
screen_mw_max = 700.5
cpu_mw_per_pct = 8
wakeup_mj = 0.2
request_mj = 12
radio_tail_mw = 100
radio_tail = "150ms"
charge_ma = 900
ambient_c = -5
thermal_c_per_w = 3
thermal_tau = "5m"
device_effect_sd = "3%"
trial_noise_sd = 0.01
brightness_pct = 70
usb_only = true
battery_health_pct = 91.5
cycle_count = 412
[device.sim.faults]
disconnect = 0.1
reconnect_after = "1m30s"
brightness_reset = "5%"
charging_during_soak = 0
stays_lost = 0.25
"#;

fn lab() -> Lab {
    parse_lab(LAB, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn messages(e: &ConfigError) -> Vec<String> {
    e.diagnostics.iter().map(|d| format!("{}: {}", d.key, d.message)).collect()
}

#[test]
fn lab_keys_and_defaults() {
    let lab = lab();
    assert_eq!(lab.name, "bench");
    assert_eq!(lab.artifacts_dir, PathBuf::from("/labs/bench/out"));
    assert_eq!(lab.store.sqlite_path(), Some(std::path::Path::new("/labs/bench/db/lab.db")));
    assert_eq!(lab.text, LAB);
    assert_eq!(lab.hosts.len(), 1);

    let pixel = lab.device("pixel-1").unwrap();
    assert_eq!(pixel.platform(), Platform::Android);
    assert_eq!(pixel.host, "local");
    assert_eq!(pixel.os, "Android 13");
    assert_eq!(pixel.tags, ["android", "phone"], "duplicate tags are dropped");
    assert_eq!(pixel.tether, TetherSpec::Uhubctl { location: "1-1.4".into(), port: 2, repeat: None });
    assert!(pixel.sim().is_none() && pixel.ios().is_none());

    // Default tethers by platform; default os is empty.
    let iphone = lab.device("iphone-1").unwrap();
    assert_eq!(iphone.tether, TetherSpec::Manual);
    assert_eq!(iphone.os, "");
    assert_eq!(lab.device("laptop").unwrap().tether, TetherSpec::None);
}

#[test]
fn a_postgres_store_is_read_and_shown_and_kept_without_its_password() {
    let text = LAB.replace(
        "store = \"db/lab.db\"",
        "store = \"postgres://lab:hunter2@db.example:6432/labdb\"\nstore_password_command = [\"pass\", \"lab\"]",
    );
    let lab = parse_lab(&text, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    let StoreLocation::Postgres { url, password_command } = &lab.store else { panic!("{:?}", lab.store) };
    assert_eq!(url.shown(), "postgres://lab@db.example:6432/labdb");
    assert_eq!(password_command, &["pass", "lab"]);
    assert!(!lab.text.contains("hunter2"), "{}", lab.text);
    assert!(!serde_json::to_string(&lab).unwrap().contains("hunter2"));
    assert_eq!(serde_json::to_value(&lab.store).unwrap(), "postgres://lab@db.example:6432/labdb");

    let bad = |store: &str| {
        let t = LAB.replace("store = \"db/lab.db\"", store);
        let e = parse_lab(&t, Path::new("lab.toml")).unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        messages(&e)
    };
    let m = bad("store = \"postgres://lab:hunter2@db.example:notaport/labdb\"");
    assert!(m[0].starts_with("lab.store: not a PostgreSQL URL"), "{m:?}");
    assert!(bad("store = \"mysql://db/lab\"")[0].starts_with("lab.store: not a store this lab knows"));
    let m = bad("store = \"db/lab.db\"\nstore_password_command = [\"pass\"]");
    assert_eq!(m, ["lab.store_password_command: only a PostgreSQL store has a password"]);
    let m = bad("store = \"postgres://lab@db/labdb\"\nstore_password_command = []");
    assert_eq!(m, ["lab.store_password_command: the command is empty"]);
}

#[test]
fn phone_sections_and_the_endpoint_address() {
    let lab = lab();
    let adb = AdbServer { host: "10.0.0.7".into(), port: 5038 };
    assert_eq!(adb.adb_args(), ["-H", "10.0.0.7", "-P", "5038"]);
    let pixel = AndroidDevice { serial: "0A1B2C".into(), adb_server: Some(adb), perfetto: true };
    assert_eq!(lab.device("pixel-1").unwrap().kind, DeviceKind::Android(pixel));
    // adb over Wi-Fi names the phone by its address; the default adb server.
    // No trace unless asked for: only some phones have power rails.
    let wifi = AndroidDevice { serial: "192.168.1.7:5555".into(), adb_server: None, perfetto: false };
    assert_eq!(lab.device("pixel-2").unwrap().android(), Some(&wifi));

    let socket = lab.device("iphone-1").unwrap();
    assert_eq!(socket.platform(), Platform::Ios);
    let ios = socket.ios().unwrap();
    assert_eq!(ios.udid, "00008020-001A");
    assert_eq!(ios.usbmuxd, Some(UsbmuxdAddress::Socket("/var/run/usbmuxd-shelf".into())));
    assert_eq!(ios.samples, [IosSample::Cpu, IosSample::Energy, IosSample::Packets], "in order, once each");
    let tcp = lab.device("iphone-2").unwrap().ios().unwrap();
    assert_eq!(tcp.usbmuxd, Some(UsbmuxdAddress::Tcp { host: "::1".into(), port: 27015 }));
    assert_eq!(tcp.usbmuxd.as_ref().unwrap().to_string(), "[::1]:27015");
    assert!(tcp.samples.is_empty(), "nothing sampled unless asked");

    // The trailing `/` is dropped: trial URLs are `<url>/t/<token>`.
    let endpoint =
        LabEndpoint { bind: Some("0.0.0.0:8765".parse().unwrap()), url: Some("http://192.0.2.10:8765".into()) };
    assert_eq!(lab.endpoint, endpoint);
    let runbook = EndpointSettings { bind: "127.0.0.1:0".parse().unwrap(), status: 204, ..EndpointSettings::default() };
    let applied = lab.endpoint.apply(&runbook);
    assert_eq!(applied.bind, endpoint.bind.unwrap());
    assert_eq!(applied.public_url, endpoint.url);
    assert_eq!(applied.status, 204, "the runbook still says how to answer");
    // A lab without endpoint keys leaves the runbook's settings as they are.
    assert_eq!(LabEndpoint::default().apply(&runbook), runbook);
}

#[test]
fn a_phone_on_a_named_lan_address_needs_no_url() {
    let text = "[lab]\nname = \"x\"\nendpoint_bind = \"192.0.2.10:0\"\n[[device]]\nname = \"p\"\nplatform = \"android\"\nmodel = \"m\"\n[device.android]\nserial = \"S\"\n";
    let lab = parse_lab(text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.endpoint, LabEndpoint { bind: Some("192.0.2.10:0".parse().unwrap()), url: None });
}

#[test]
fn every_sim_key_overrides_the_default() {
    let lab = lab();
    let d = lab.device("sim-a").unwrap();
    assert_eq!(d.tether, TetherSpec::Manual);
    let s = d.sim().unwrap();
    let expected = SimParams {
        emulates: Platform::Android,
        seed: 9,
        battery_mah: 3000.0,
        battery_start_pct: 90.0,
        voltage_v: 3.9,
        base_mw: 300.0,
        screen_mw_max: 700.5,
        cpu_mw_per_pct: 8.0,
        wakeup_mj: 0.2,
        request_mj: 12.0,
        radio_tail_mw: 100.0,
        radio_tail: Duration::from_millis(150),
        charge_ma: 900.0,
        ambient_c: -5.0,
        thermal_c_per_w: 3.0,
        thermal_tau: Duration::from_secs(300),
        device_effect_sd: 0.03,
        trial_noise_sd: 0.01,
        brightness_pct: 70.0,
        usb_only: true,
        usb_serial: None,
        standin_hub: false,
        battery_health_pct: 91.5,
        cycle_count: 412,
        faults: SimFaults {
            disconnect: 0.1,
            reconnect_after: Duration::from_secs(90),
            brightness_reset: 0.05,
            charging_during_soak: 0.0,
            stays_lost: 0.25,
        },
    };
    assert_eq!(s, &expected);
    // Every field of SimParams was set to a non-default value above, so this test
    // notices a key that is read into the wrong field.
    let defaults = SimParams::defaults(Platform::Android);
    assert_ne!(s.battery_start_pct, defaults.battery_start_pct);
    assert_ne!(s.faults.reconnect_after, defaults.faults.reconnect_after);
}

#[test]
fn local_host_exists_without_a_host_table() {
    let lab = parse_lab(
        "[lab]\nname = \"x\"\n[[device]]\nname = \"l\"\nplatform = \"host\"\nmodel = \"m\"\n",
        Path::new("lab.toml"),
    )
    .unwrap();
    assert_eq!(lab.hosts.len(), 1);
    assert_eq!(lab.hosts[0].name, "local");
    assert_eq!(lab.hosts[0].kind, HostKind::Local);
    assert_eq!(lab.devices[0].host, "local");
}

#[test]
fn lab_syntax_error_is_one_placed_diagnostic() {
    let e = parse_lab("[lab]\nname = \"x\"\n[[device]\n", Path::new("lab.toml")).unwrap_err();
    assert_eq!(e.diagnostics.len(), 1);
    assert_eq!(e.diagnostics[0].line, Some(3));
    assert!(e.diagnostics[0].message.starts_with("invalid TOML"));
}

#[test]
fn non_utf8_file_is_reported_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lab.toml");
    std::fs::write(&path, b"[lab]\nname = \"\xff\"\n").unwrap();
    let e = load_lab(&path).unwrap_err();
    let d = &e.diagnostics[0];
    assert_eq!((d.line, d.column), (Some(2), Some(9)));
    assert_eq!(d.message, "the lab file is not UTF-8 text");
}

/// A runbook folder with real build and config files.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("builds")).unwrap();
        std::fs::create_dir_all(dir.path().join("server")).unwrap();
        std::fs::write(dir.path().join("builds/App.ipa"), b"ipa bytes").unwrap();
        std::fs::write(dir.path().join("builds/app.apk"), b"apk bytes").unwrap();
        std::fs::write(dir.path().join("envoy.yaml"), b"stats_flush: 5s\n").unwrap();
        Fixture { dir }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("rb.toml")
    }
    fn load(&self, text: &str) -> Result<Runbook, ConfigError> {
        std::fs::write(self.path(), text).unwrap();
        load_runbook(&self.path(), &lab())
    }
}

const FULL: &str = r#"
name = "full"
description = "every key"
duration = "1h30m"
repeats = 2
seed = 0
order = "random"
cooldown = "90s"
retries = 0
devices = ["pixel-*", "model:iPhone 6s", "tag:phone", "laptop"]

[builds.control]
baseline = true
[builds.control.ios]
ipa = "builds/App.ipa"
bundle_id = "io.example.control"
[builds.control.android]
apk = "builds/app.apk"
package = "io.example.control"
activity = ".MainActivity"
[builds.control.host]
command = ["./server", "--port", "0"]
build = ["make", "server"]
env = { RUST_LOG = "info" }
cwd = "server"
[builds.control.sim]
cpu_pct = 10
wakeups_per_s = 20.5
memory_mb = 30
cache_hit_ratio = "10%"
crash_probability = 0.01

[builds.candidate.sim]
cpu_pct = 0
wakeups_per_s = 0
memory_mb = 0

[configs.quiet]

[configs.chatty]
env = { TRACE = "1" }
args = ["--stats-flush", "1s"]
files = [{ src = "envoy.yaml", dest = "config/envoy.yaml" }]
[configs.chatty.sim]
cpu_scale = 1.5
wakeups_scale = 2
memory_mb_add = -1
cache_hit_ratio = 0
crash_probability = "1%"

[workload]
request_interval = "1.5s"
request_tolerance = 0.05

[endpoint]
bind = "0.0.0.0:8080"
status = 204
body_bytes = 512
cache_control = "max-age=60"

[preconditions]
brightness = [0, 100]
bluetooth = false
wifi = true
low_power = false
battery_min = 80.5
temperature_max = 35
untethered = false
app_foreground = false
load_max = 0.5
ac_power = true
auto_fix = false

[metrics]
collect = ["requests", "cpu_pct"]

[statistics]
alpha = "1%"
practical_threshold = 0.1
confidence = 0.99
gating = ["cpu_pct"]

[timeouts]
prepare = "1m"
gate = "2h"
launch = "30s"
tether = "45s"
collect = "5m"
reconnect = "10m"
operator = "20m"

[[steps]]
name = "screen"
text = "Set brightness to 50 % and switch Bluetooth off"
when = "before-campaign"
attest = ["brightness", "bluetooth"]

[[steps]]
text = "Check the phone shows no charging icon"
when = "untether"
confirm = false
"#;

#[test]
fn every_runbook_key_is_read() {
    let fx = Fixture::new();
    let rb = fx.load(FULL).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.name, "full");
    assert_eq!(rb.description, "every key");
    assert_eq!(rb.source, fx.path());
    assert_eq!(rb.sha256, crate::seed::sha256_hex(FULL.as_bytes()));
    assert_eq!(rb.duration, Duration::from_secs(5400));
    assert_eq!((rb.repeats, rb.seed, rb.retries), (2, 0, 0));
    assert_eq!(rb.order, Order::Random);
    assert_eq!(rb.cooldown, Duration::from_secs(90));
    assert_eq!(
        rb.devices,
        [
            Selector::Name("pixel-*".into()),
            Selector::Model("iPhone 6s".into()),
            Selector::Tag("phone".into()),
            Selector::Name("laptop".into()),
        ]
    );

    let control = &rb.builds[0];
    assert!(control.baseline);
    let ios = control.ios.as_ref().unwrap();
    assert_eq!(ios.ipa, fx.dir.path().join("builds/App.ipa"));
    assert_eq!(ios.bundle_id, "io.example.control");
    assert_eq!(ios.sha256, crate::seed::sha256_hex(b"ipa bytes"));
    let android = control.android.as_ref().unwrap();
    let apk = ApkFile { path: fx.dir.path().join("builds/app.apk"), sha256: crate::seed::sha256_hex(b"apk bytes") };
    assert_eq!(android.apks, [apk]);
    assert_eq!(android.activity.as_deref(), Some(".MainActivity"));
    assert_eq!(android.sha256, crate::seed::sha256_hex(b"apk bytes"), "one APK: the file's own hash");
    let host = control.host.as_ref().unwrap();
    assert_eq!(host.command, ["./server", "--port", "0"]);
    assert_eq!(host.build.as_deref(), Some(&["make".to_string(), "server".to_string()][..]));
    assert_eq!(host.env.get("RUST_LOG").map(String::as_str), Some("info"));
    assert_eq!(host.cwd.as_deref(), Some(fx.dir.path().join("server").as_path()));
    assert_eq!(
        control.sim,
        Some(SimProfile {
            cpu_pct: 10.0,
            wakeups_per_s: 20.5,
            memory_mb: 30.0,
            cache_hit_ratio: 0.1,
            crash_probability: 0.01,
            build_id: None
        })
    );
    let candidate = &rb.builds[1];
    assert_eq!(candidate.name, "candidate");
    assert!(!candidate.baseline);
    assert!(candidate.runs_on(Platform::Sim) && !candidate.runs_on(Platform::Android));

    let names: Vec<&str> = rb.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["quiet", "chatty"]);
    assert_eq!(rb.configs[0].sim, SimAdjust::default());
    assert_eq!((&rb.configs[0].android, &rb.configs[0].ios), (&AndroidLaunch::default(), &IosLaunch::default()));
    let chatty = &rb.configs[1];
    assert_eq!(chatty.env.get("TRACE").map(String::as_str), Some("1"));
    assert_eq!(chatty.args, ["--stats-flush", "1s"]);
    assert_eq!(chatty.files.len(), 1);
    assert_eq!(chatty.files[0].src, fx.dir.path().join("envoy.yaml"));
    assert_eq!(chatty.files[0].dest, "config/envoy.yaml");
    assert_eq!(chatty.files[0].sha256, crate::seed::sha256_hex(b"stats_flush: 5s\n"));
    assert_eq!(
        chatty.sim,
        SimAdjust {
            cpu_scale: 1.5,
            wakeups_scale: 2.0,
            memory_mb_add: -1.0,
            cache_hit_ratio: Some(0.0),
            crash_probability: Some(0.01)
        }
    );

    assert_eq!(rb.workload, Workload { request_interval: Some(Duration::from_millis(1500)), request_tolerance: 0.05 });
    assert_eq!(
        rb.preconditions,
        Preconditions {
            brightness: Some((0.0, 100.0)),
            bluetooth: Some(false),
            wifi: Some(true),
            low_power: Some(false),
            battery_min: Some(80.5),
            temperature_max: Some(35.0),
            untethered: false,
            app_foreground: false,
            load_max: Some(0.5),
            ac_power: Some(true),
            auto_fix: false,
        }
    );
    assert_eq!(
        rb.endpoint,
        EndpointSettings {
            bind: "0.0.0.0:8080".parse().unwrap(),
            status: 204,
            body_bytes: 512,
            cache_control: Some("max-age=60".into()),
            public_url: None,
        }
    );
    assert_eq!(rb.metrics, ["requests", "cpu_pct"]);
    assert_eq!(
        rb.statistics,
        StatsSettings { alpha: 0.01, practical_threshold: 0.1, confidence: 0.99, gating: vec!["cpu_pct".into()] }
    );
    assert_eq!(rb.adaptive, None);
    assert_eq!(
        rb.timeouts,
        PhaseTimeouts {
            prepare: Duration::from_secs(60),
            gate: Duration::from_secs(7200),
            launch: Duration::from_secs(30),
            tether: Duration::from_secs(45),
            collect: Duration::from_secs(300),
            reconnect: Duration::from_secs(600),
            operator: Duration::from_secs(1200),
        }
    );
    use crate::config::{AttestKey, OperatorStep, StepWhen};
    assert_eq!(
        rb.steps,
        [
            OperatorStep {
                name: "screen".into(),
                text: "Set brightness to 50 % and switch Bluetooth off".into(),
                when: StepWhen::BeforeCampaign,
                confirm: true,
                attest: vec![AttestKey::Brightness, AttestKey::Bluetooth],
            },
            OperatorStep {
                name: "step-2".into(),
                text: "Check the phone shows no charging icon".into(),
                when: StepWhen::Untether,
                confirm: false,
                attest: vec![],
            },
        ]
    );
}

const MINIMAL: &str = r#"
name = "minimal"
duration = "10m"
repeats = 1
devices = ["sim-a"]
[builds.only]
baseline = true
[builds.only.sim]
cpu_pct = 1
wakeups_per_s = 1
memory_mb = 1
"#;

#[test]
fn runbook_defaults() {
    let fx = Fixture::new();
    let rb = fx.load(MINIMAL).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.description, "");
    assert_eq!(rb.seed, DEFAULT_SEED);
    assert_eq!(rb.retries, DEFAULT_RETRIES);
    assert_eq!(rb.order, Order::Balanced);
    assert_eq!(rb.cooldown, Duration::ZERO);
    assert_eq!(rb.configs.len(), 1);
    assert_eq!(rb.configs[0].name, "default");
    assert_eq!(rb.workload, Workload { request_interval: None, request_tolerance: 0.02 });
    assert_eq!(
        rb.preconditions,
        Preconditions { untethered: true, app_foreground: true, auto_fix: true, ..Preconditions::default() }
    );
    assert_eq!(rb.endpoint, EndpointSettings::default());
    assert_eq!(rb.endpoint.bind.to_string(), "127.0.0.1:0");
    assert!(rb.metrics.is_empty());
    assert_eq!(rb.statistics, StatsSettings::default());
    assert_eq!(rb.timeouts, PhaseTimeouts::default());
}

#[test]
fn problems_inside_inline_tables_and_arrays_are_found() {
    let fx = Fixture::new();
    let text = MINIMAL.to_string()
        + r#"
[configs.c]
files = [{ src = "envoy.yaml", dest = "a.yaml", mode = "644" }, { src = "envoy.yaml", dest = "a.yaml" }, "x"]
args = ["--a", 1]
"#;
    let e = fx.load(&text).unwrap_err();
    assert_eq!(
        messages(&e),
        [
            "configs.c.files[0].mode: unknown key `mode`",
            "configs.c.files[1].dest: two files are pushed to \"a.yaml\"",
            "configs.c.files[2]: expected a table, found string",
            "configs.c.args[1]: expected a string, found integer",
        ]
    );
}

#[test]
fn endpoint_and_host_precondition_problems_are_each_reported() {
    let fx = Fixture::new();
    let text = MINIMAL.to_string()
        + r#"
[endpoint]
bind = "localhost:80"
status = 99
body_bytes = -1
cache_control = "max-age=1\u0007"
port = 1
[preconditions]
load_max = 0
ac_power = "yes"
"#;
    let e = fx.load(&text).unwrap_err();
    assert_eq!(
        messages(&e),
        [
            "endpoint.bind: \"localhost:80\" is not an IP address and port",
            "endpoint.status: must be ≥ 200, got 99",
            "endpoint.body_bytes: must be ≥ 0, got -1",
            "endpoint.cache_control: is not a valid header value (only visible ASCII characters and spaces)",
            "endpoint.port: unknown key `port`",
            "preconditions.load_max: must be > 0 (a 1-minute load average), got 0",
            "preconditions.ac_power: expected true or false, found the string \"yes\"",
        ]
    );
    let e = fx.load(&(MINIMAL.to_string() + "[builds.h.host]\ncommand = [\"x\"]\nbuild = []\n")).unwrap_err();
    assert_eq!(messages(&e), ["builds.h.host.build: the build command is empty"]);
}

#[test]
fn ssh_hosts_are_read_with_defaults_and_checked() {
    let lab = parse_lab(
        "[lab]\nname = \"x\"\n[[host]]\nname = \"far\"\naddress = \"10.0.0.1:2222\"\nuser = \"ci\"\nknown_hosts = \"kh\"\n",
        Path::new("/labs/lab.toml"),
    )
    .unwrap();
    let far = lab.host("far").unwrap();
    let HostKind::Ssh(s) = &far.kind else { panic!("{far:?}") };
    assert_eq!((s.address.as_str(), s.user.as_str(), s.identity.as_ref()), ("10.0.0.1:2222", "ci", None));
    assert_eq!(s.known_hosts, Path::new("/labs/kh"));
    assert!(s.strict_host_key_checking);
    assert_eq!((s.connect_timeout.as_secs(), s.keepalive.as_secs(), s.max_sessions), (10, 30, 4));
    assert_eq!(lab.host("local").unwrap().kind, HostKind::Local);

    let e = parse_lab(
        "[lab]\nname = \"x\"\n[[host]]\nname = \"local\"\naddress = \"a\"\nuser = \"u\"\n[[host]]\nname = \"b\"\nuser = \"u\"\n",
        Path::new("lab.toml"),
    )
    .unwrap_err();
    assert_eq!(
        messages(&e),
        [
            "host[0].name: the host named `local` is this machine",
            "host[1].user: `user` only makes sense for an SSH host"
        ]
    );
}

#[test]
fn selectors_are_checked_against_the_given_lab() {
    let fx = Fixture::new();
    let text = MINIMAL.replace("devices = [\"sim-a\"]", "devices = [\"sim-*\", \"model:Pixel 5\", \"tag:ios\", []]");
    let e = fx.load(&text).unwrap_err();
    assert_eq!(
        messages(&e),
        [
            "devices[2]: `tag:ios` matches no device in lab /labs/bench/lab.toml",
            "devices[3]: expected a string, found array"
        ]
    );
    let text = MINIMAL.replace("devices = [\"sim-a\"]", "devices = []");
    assert_eq!(messages(&fx.load(&text).unwrap_err()), ["devices: no devices selected"]);
}

#[test]
fn three_baselines_are_all_named() {
    let fx = Fixture::new();
    let mut text = MINIMAL.to_string();
    for b in ["b", "c"] {
        text += &format!(
            "[builds.{b}]\nbaseline = true\n[builds.{b}.sim]\ncpu_pct = 1\nwakeups_per_s = 1\nmemory_mb = 1\n"
        );
    }
    assert_eq!(
        messages(&fx.load(&text).unwrap_err()),
        ["builds.c.baseline: 3 builds have baseline = true: `only`, `b`, `c`"]
    );
}

#[test]
fn uhubctl_tether_as_a_sub_table() {
    let text = r#"
[lab]
name = "hub"
endpoint_bind = "0.0.0.0:8765"
endpoint_url = "http://lab-1.example:8765"
[[device]]
name = "pixel-1"
platform = "android"
model = "Pixel 5"
[device.android]
serial = "0A1B2C"
[device.tether.uhubctl]
location = "2-1.4"
port = 3
repeat = 10
"#;
    let lab = parse_lab(text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.devices[0].tether, TetherSpec::Uhubctl { location: "2-1.4".into(), port: 3, repeat: Some(10) });
    let e = parse_lab(&text.replace("repeat = 10", "repeat = 0"), Path::new("lab.toml")).unwrap_err().to_string();
    assert!(e.contains("device[0].tether.uhubctl.repeat"), "{e}");
}

#[test]
fn uhubctl_auto_tether_and_a_simulated_phones_usb_serial() {
    let text = r#"
[lab]
name = "hub"
[[device]]
name = "sim-1"
platform = "sim"
model = "Pixel 5"
tether = { uhubctl = "auto" }
[device.sim]
emulates = "android"
usb_serial = "SIM0001"
"#;
    let lab = parse_lab(text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.devices[0].tether, TetherSpec::UhubctlAuto);
    assert_eq!(lab.devices[0].sim().unwrap().usb_serial.as_deref(), Some("SIM0001"));
    let bad = text.replace("\"auto\" }", "\"nearest\" }");
    let e = parse_lab(&bad, Path::new("lab.toml")).unwrap_err().to_string();
    assert!(e.contains("device[0].tether.uhubctl") && e.contains("auto"), "{e}");
}

#[test]
fn a_sim_on_the_stand_in_hub_needs_a_uhubctl_tether() {
    let text = "[lab]\nname = \"hub\"\n[[device]]\nname = \"sim-1\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
                tether = { uhubctl = \"auto\" }\n[device.sim]\nemulates = \"android\"\nstandin_hub = true\n";
    let lab = parse_lab(text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(lab.devices[0].sim().unwrap().standin_hub);
    let e = parse_lab(&text.replace("{ uhubctl = \"auto\" }", "\"manual\""), Path::new("lab.toml")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "lab.toml:10:15: device[0].sim.standin_hub: a simulated phone asks the stand-in hub at its tether's port, but its tether is `manual`; fix: give it tether = { uhubctl = { location = \"1-1\", port = 2 } } (or \"auto\"), or remove standin_hub"
    );
}

#[test]
fn adaptive_repeats_and_the_default_gating_family() {
    let fx = Fixture::new();
    let text = MINIMAL.replace("repeats = 1", "repeats = { min = 5, max = 30, target_ci = \"3%\" }");
    assert_ne!(text, MINIMAL, "MINIMAL has `repeats = 1`");
    let rb = fx.load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.repeats, 5);
    assert_eq!(rb.adaptive, Some(AdaptiveRepeats::precise(5, 30, 0.03)));
    assert_eq!(rb.statistics.gating, ["energy_level", "charge_used_mah", "cpu_pct", "memory_mb"]);
    // The default family keeps only what is collected.
    let rb = fx.load(&(MINIMAL.to_string() + "[metrics]\ncollect = [\"cpu_pct\", \"requests\"]\n")).unwrap();
    assert_eq!(rb.statistics.gating, ["cpu_pct"]);
}

#[test]
fn adaptive_repeats_and_gating_problems() {
    let fx = Fixture::new();
    let text = MINIMAL.replace("repeats = 1", "repeats = { min = 8, max = 4, target = 1 }")
        + "[metrics]\ncollect = [\"cpu_pct\"]\n[statistics]\ngating = [\"cpu\", \"memory_mb\"]\n";
    let e = fx.load(&text).unwrap_err().to_string();
    for want in [
        "repeats.target: unknown key `target`; fix: remove it or use one of the valid keys: min, max, target_ci, stop",
        "repeats.target_ci: missing required key `target_ci`; fix: add `target_ci = \"3%\"`",
        "repeats: max 4 is below min 8",
        "statistics.gating[0]: unknown metric `cpu`; fix: remove it or use one of the valid metrics",
        "statistics.gating: gating metric `memory_mb` is not in `[metrics] collect`",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
    let e = fx.load(&(MINIMAL.to_string() + "[statistics]\ngating = []\n")).unwrap_err().to_string();
    assert!(e.contains("statistics.gating: the gating family is empty"), "{e}");
}

#[test]
fn sequential_repeats_stop_when_decided() {
    let fx = Fixture::new();
    let text = MINIMAL.replace("repeats = 1", "repeats = { min = 3, max = 30, stop = \"decided\" }");
    let rb = fx.load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.repeats, 3);
    assert_eq!(rb.adaptive, Some(AdaptiveRepeats::decided(3, 30)));
    assert!(rb.adaptive.unwrap().sequential());
    // `stop = "precise"` is the default spelled out.
    let text = MINIMAL.replace("repeats = 1", "repeats = { min = 3, max = 9, target_ci = \"5%\", stop = \"precise\" }");
    assert_eq!(fx.load(&text).unwrap().adaptive, Some(AdaptiveRepeats::precise(3, 9, 0.05)));
    for (repeats, want) in [
        (
            "{ min = 3, max = 30, stop = \"soon\" }",
            "repeats.stop: unknown stop rule `soon`; fix: write `stop = \"decided\"`",
        ),
        (
            "{ min = 3, max = 30, stop = \"decided\", target_ci = \"3%\" }",
            "repeats.target_ci: `target_ci` with `stop = \"decided\"`; fix: remove `target_ci`",
        ),
        ("{ min = 3, max = 30, stop = 1 }", "repeats.stop:"),
    ] {
        let e = fx.load(&MINIMAL.replace("repeats = 1", &format!("repeats = {repeats}"))).unwrap_err().to_string();
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}

#[test]
fn rail_energy_metrics_are_named_by_their_prefix() {
    let fx = Fixture::new();
    let rails = "[metrics]\ncollect = [\"cpu_pct\", \"rail_energy_mj.S4M_VDD_CPUCL0\"]\n\
                 [statistics]\ngating = [\"rail_energy_mj.S4M_VDD_CPUCL0\"]\n";
    let rb = fx.load(&(MINIMAL.to_string() + rails)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rb.metrics, ["cpu_pct", "rail_energy_mj.S4M_VDD_CPUCL0"]);
    assert_eq!(rb.statistics.gating, ["rail_energy_mj.S4M_VDD_CPUCL0"]);
    let e = fx.load(&(MINIMAL.to_string() + "[metrics]\ncollect = [\"rail_energy_mj.\"]\n")).unwrap_err();
    assert_eq!(
        e.diagnostics.iter().map(|d| format!("{}: {}; fix: {}", d.key, d.message, d.fix)).collect::<Vec<_>>(),
        ["metrics.collect[0]: metric `rail_energy_mj.` names no power rail; fix: write the rail's name as the \
          phone's Perfetto trace gives it after `rail_energy_mj.`, e.g. `rail_energy_mj.S4M_VDD_CPUCL0` \
          (`lab import perfetto TRACE` prints the rail metrics of a trace)"]
    );
}

#[test]
fn perfetto_must_be_true_or_false() {
    let text = "[lab]\nname = \"x\"\nendpoint_bind = \"192.0.2.10:0\"\n[[device]]\nname = \"p\"\n\
                platform = \"android\"\nmodel = \"m\"\n[device.android]\nserial = \"S\"\nperfetto = \"yes\"\n";
    let e = parse_lab(text, Path::new("lab.toml")).unwrap_err();
    assert_eq!(
        e.to_string().trim(),
        "lab.toml:10:12: device[0].android.perfetto: expected true or false, found the string \"yes\"; \
         fix: write `perfetto = true` or `perfetto = false` (no quotes)"
    );
}

#[test]
fn split_apks_are_hashed_in_order() {
    let fx = Fixture::new();
    std::fs::write(fx.dir.path().join("builds/base.apk"), b"base").unwrap();
    std::fs::write(fx.dir.path().join("builds/split_config.arm64_v8a.apk"), b"arm64").unwrap();
    let text = MINIMAL.to_string()
        + "[builds.only.android]\napks = [\"builds/base.apk\", \"builds/split_config.arm64_v8a.apk\"]\npackage = \"io.example\"\n";
    let rb = fx.load(&text).unwrap_or_else(|e| panic!("{e}"));
    let a = rb.builds[0].android.as_ref().unwrap();
    let (base, split) = (crate::seed::sha256_hex(b"base"), crate::seed::sha256_hex(b"arm64"));
    let paths: Vec<_> = a.apks.iter().map(|f| (f.path.clone(), f.sha256.clone())).collect();
    assert_eq!(
        paths,
        [
            (fx.dir.path().join("builds/base.apk"), base.clone()),
            (fx.dir.path().join("builds/split_config.arm64_v8a.apk"), split.clone())
        ]
    );
    assert_eq!(a.sha256, crate::seed::sha256_hex(format!("{base}\n{split}\n").as_bytes()));
    // The order is part of the hash: a reordered list installs as another build.
    let swapped = text.replace(
        "[\"builds/base.apk\", \"builds/split_config.arm64_v8a.apk\"]",
        "[\"builds/split_config.arm64_v8a.apk\", \"builds/base.apk\"]",
    );
    let other = fx.load(&swapped).unwrap();
    assert_ne!(other.builds[0].android.as_ref().unwrap().sha256, a.sha256);

    let twice = text.replace("\"builds/split_config.arm64_v8a.apk\"]", "\"builds/base.apk\"]");
    assert_eq!(
        messages(&fx.load(&twice).unwrap_err()),
        ["builds.only.android.apks[1]: builds/base.apk is listed twice"]
    );
}

#[test]
fn platform_launch_values_are_typed() {
    let fx = Fixture::new();
    let text = MINIMAL.to_string()
        + r#"
[configs.tuned]
env = { ENVOY_DNS_REFRESH_S = "60" }
[configs.tuned.android]
extras = { dns_refresh_s = 60, trace = true, mode = "fast", "io.envoy.ratio" = 0.5 }
[configs.tuned.ios]
env = { ENVOY_DNS_REFRESH_S = "60" }
args = ["-EnvoyTrace", "YES"]
"#;
    let rb = fx.load(&text).unwrap_or_else(|e| panic!("{e}"));
    let c = &rb.configs[0];
    assert_eq!(c.env.get("ENVOY_DNS_REFRESH_S").map(String::as_str), Some("60"));
    let extras: Vec<(&str, &IntentExtra)> = c.android.extras.iter().map(|(k, v)| (k.as_str(), v)).collect();
    assert_eq!(
        extras,
        [
            ("dns_refresh_s", &IntentExtra::Int(60)),
            ("io.envoy.ratio", &IntentExtra::Float(0.5)),
            ("mode", &IntentExtra::Str("fast".into())),
            ("trace", &IntentExtra::Bool(true)),
        ]
    );
    let am: Vec<[String; 3]> = c.android.extras.iter().map(|(k, v)| v.am_args(k)).collect();
    assert_eq!(
        am,
        [
            ["--ei", "dns_refresh_s", "60"],
            ["--ef", "io.envoy.ratio", "0.5"],
            ["--es", "mode", "fast"],
            ["--ez", "trace", "true"],
        ]
    );
    assert_eq!(c.ios.env.get("ENVOY_DNS_REFRESH_S").map(String::as_str), Some("60"));
    assert_eq!(c.ios.args, ["-EnvoyTrace", "YES"]);
}

/// A lab with one Android phone and `lab_keys` under `[lab]`.
fn phone_lab(lab_keys: &str) -> Result<Lab, ConfigError> {
    let text = format!(
        "[lab]\nname = \"x\"\n{lab_keys}\n[[device]]\nname = \"p\"\nplatform = \"android\"\nmodel = \"m\"\n[device.android]\nserial = \"S\"\n"
    );
    parse_lab(&text, Path::new("lab.toml"))
}

#[test]
fn where_a_phone_is_sent_decides_whether_the_lab_loads() {
    let refused = |keys: &str| messages(&phone_lab(keys).unwrap_err());
    let loopback = "device[0].platform: android device `p` would be given a loopback URL for the traffic endpoint";
    for keys in ["", "endpoint_bind = \"127.0.0.1:8765\"", "endpoint_bind = \"[::]:8765\""] {
        let m = refused(keys);
        assert!(m.len() == 1 && m[0].starts_with(loopback), "{keys}: {m:?}");
    }
    assert!(
        refused("endpoint_bind = \"0.0.0.0:8765\"")[0].contains("without `endpoint_url` devices are given 127.0.0.1")
    );
    for url in ["http://127.0.0.2:8765", "http://[::1]:8765", "http://LOCALHOST"] {
        let m = refused(&format!("endpoint_bind = \"0.0.0.0:8765\"\nendpoint_url = \"{url}\""));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].contains(&format!("at {url} (`endpoint_url`), a loopback address")), "{m:?}");
    }
    // A LAN address to listen on is what devices are given, even with a free port.
    for keys in
        ["endpoint_bind = \"192.0.2.10:0\"", "endpoint_bind = \"0.0.0.0:80\"\nendpoint_url = \"http://lab-1.local\""]
    {
        phone_lab(keys).unwrap_or_else(|e| panic!("{keys}: {e}"));
    }
    assert_eq!(
        phone_lab("endpoint_bind = \"0.0.0.0:80\"\nendpoint_url = \"http://lab-1.local\"")
            .unwrap()
            .endpoint
            .url
            .as_deref(),
        Some("http://lab-1.local")
    );

    // Malformed URLs and a URL without a bind are refused for every lab, phones or not.
    let url_problem = |url: &str| refused(&format!("endpoint_bind = \"0.0.0.0:8765\"\nendpoint_url = \"{url}\""));
    assert_eq!(
        url_problem("http://192.0.2.10:8765/lab"),
        ["lab.endpoint_url: \"http://192.0.2.10:8765/lab\" has a path; trial URLs are <url>/t/<token>"]
    );
    assert_eq!(
        url_problem("http://0.0.0.0:8765"),
        ["lab.endpoint_url: \"http://0.0.0.0:8765\": 0.0.0.0 is not an address a device can connect to"]
    );
    assert_eq!(url_problem("192.0.2.10:8765"), ["lab.endpoint_url: \"192.0.2.10:8765\" is not an http:// URL"]);
    assert_eq!(
        url_problem("http://192.0.2.10:0"),
        ["lab.endpoint_url: \"http://192.0.2.10:0\" is not a valid URL: port `0` is not 1 to 65535"]
    );
    let no_bind = parse_lab("[lab]\nname = \"x\"\nendpoint_url = \"http://192.0.2.10:8765\"\n", Path::new("lab.toml"));
    assert_eq!(
        messages(&no_bind.unwrap_err()),
        [
            "lab.endpoint_url: `endpoint_url` needs `endpoint_bind`: without it the endpoint listens where the runbook says (a free port on 127.0.0.1 by default), not where the URL points"
        ]
    );
}

#[test]
fn an_ipa_must_exist_only_when_the_runbook_selects_an_iphone() {
    let fx = Fixture::new();
    let with_ipa =
        MINIMAL.to_string() + "[builds.only.ios]\nipa = \"builds/Missing.ipa\"\nbundle_id = \"io.example.x\"\n";
    // Only simulated phones: the .ipa is not installed, so it need not be there.
    let rb = fx.load(&with_ipa).unwrap_or_else(|e| panic!("{e}"));
    let ios = rb.builds[0].ios.as_ref().unwrap();
    assert_eq!((ios.ipa.clone(), ios.sha256.as_str()), (fx.dir.path().join("builds/Missing.ipa"), ""));
    // An iPhone in the campaign: the missing file is the usual one-line error.
    let e = fx.load(&with_ipa.replace("devices = [\"sim-a\"]", "devices = [\"sim-a\", \"iphone-1\"]")).unwrap_err();
    let m = messages(&e);
    assert_eq!(m.len(), 1, "{m:?}");
    assert!(m[0].starts_with("builds.only.ios.ipa: missing build file "), "{m:?}");
}

const MONITORED: &str = r#"
[lab]
name = "bench"
endpoint_bind = "0.0.0.0:8765"
endpoint_url = "http://192.0.2.10:8765/"

[[host]]
name = "shelf"
address = "shelf.example"
user = "lab"
known_hosts = "kh"

[[device]]
name = "sim-1"
platform = "sim"
model = "iPhone 6s"
monitor = "sim-mon"
[device.sim]
emulates = "ios"

[[device]]
name = "pixel-1"
platform = "android"
model = "Pixel 5"
host = "shelf"
monitor = "arc-1"
[device.android]
serial = "0A1B2C"

[[device]]
name = "board"
platform = "host"
model = "dev board"
monitor = "hv"

[[monitor]]
name = "sim-mon"
kind = "sim"

[[monitor]]
name = "arc-1"
kind = "otii"
host = "shelf"
device = "Arc 1234"
voltage_v = 3.85
current_limit_a = 2.5

[[monitor]]
name = "hv"
kind = "monsoon"
serial = "20001"
voltage_v = 5.0

[[monitor]]
name = "spare"
kind = "otii"
model = "ace"
address = "10.0.0.9:1906"
voltage_v = 12
sample_rate_hz = 50000

[[monitor]]
name = "sim-2"
kind = "sim"
"#;

#[test]
fn monitors_are_read_with_their_defaults_and_the_device_each_supplies() {
    let lab = parse_lab(MONITORED, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    let sim = lab.monitor_of("sim-1").unwrap();
    assert_eq!((sim.kind.clone(), sim.voltage_v, sim.sample_rate_hz), (MonitorKind::Sim, 3.85, 10));
    let arc = lab.monitor_of("pixel-1").unwrap();
    assert_eq!(
        arc.kind,
        MonitorKind::Otii { model: OtiiModel::Arc, address: "127.0.0.1:1905".into(), device: Some("Arc 1234".into()) }
    );
    assert_eq!((arc.host.as_str(), arc.voltage_v, arc.current_limit_a, arc.sample_rate_hz), ("shelf", 3.85, 2.5, 4000));
    let hv = lab.monitor_of("board").unwrap();
    assert_eq!(hv.kind, MonitorKind::Monsoon { model: MonsoonModel::Hvpm, serial: "20001".into() });
    assert_eq!((hv.current_limit_a, hv.sample_rate_hz), (3.0, 5000));
    let spare = lab.monitors.iter().find(|m| m.name == "spare").unwrap();
    assert_eq!((spare.supplies.as_ref(), spare.sample_rate_hz, spare.kind.label()), (None, 50_000, "Otii Ace"));
}

#[test]
fn a_monitor_that_cannot_supply_its_device_is_refused_with_the_fix() {
    let bad = |from: &str, to: &str| {
        let text = MONITORED.replacen(from, to, 1);
        assert_ne!(text, MONITORED, "{from}");
        let e = parse_lab(&text, Path::new("lab.toml")).unwrap_err();
        // One line each, naming the file, the key and the fix.
        for line in e.to_string().lines().filter(|l| !l.trim().is_empty()) {
            assert!(line.starts_with("lab.toml:"), "{line}");
        }
        messages(&e)
    };
    assert_eq!(
        bad("monitor = \"hv\"", "monitor = \"nope\""),
        ["device[2].monitor: monitor `nope` is not defined in this lab"]
    );
    assert_eq!(
        bad("monitor = \"hv\"", "monitor = \"arc-1\""),
        ["device[2].monitor: monitor `arc-1` already supplies device `pixel-1`: a monitor powers one device"]
    );
    assert_eq!(
        bad("host = \"shelf\"\nmonitor = \"arc-1\"", "monitor = \"arc-1\""),
        ["device[1].monitor: monitor `arc-1` is on host `shelf`, device `pixel-1` on host `local`"]
    );
    assert_eq!(
        bad("monitor = \"sim-mon\"", "monitor = \"spare\""),
        ["device[0].monitor: a simulated device runs in simulated time: the Otii Ace cannot measure it"]
    );
    assert_eq!(
        bad("monitor = \"hv\"", "monitor = \"sim-2\""),
        ["device[2].monitor: a simulated monitor measures only simulated devices, not `board`"]
    );
    assert_eq!(
        bad("voltage_v = 5.0", "voltage_v = 14"),
        ["monitor[2].voltage_v: must be between 0.8 and 13.5 V on the Monsoon HVPM, got 14"]
    );
    assert_eq!(
        bad("voltage_v = 5.0", "model = \"lvpm\"\nvoltage_v = 5.0"),
        ["monitor[2].voltage_v: must be between 2.01 and 4.55 V on the Monsoon LVPM, got 5"]
    );
    assert_eq!(
        bad("voltage_v = 5.0", ""),
        ["monitor[2].voltage_v: missing `voltage_v`: the Monsoon HVPM supplies the device in place of its battery"]
    );
    assert_eq!(
        bad("voltage_v = 5.0", "voltage_v = 5.0\nsample_rate_hz = 1000"),
        ["monitor[2].sample_rate_hz: the Monsoon HVPM samples at 5000 Hz, which cannot be set"]
    );
    assert_eq!(
        bad("current_limit_a = 2.5", "current_limit_a = 2.5\nsample_rate_hz = 1000"),
        ["monitor[1].sample_rate_hz: the Otii Arc samples at 4000 Hz, which cannot be set"]
    );
    assert_eq!(
        bad("sample_rate_hz = 50000", "sample_rate_hz = 3000"),
        ["monitor[3].sample_rate_hz: the Otii Ace cannot sample at 3000 Hz"]
    );
    assert_eq!(
        bad("current_limit_a = 2.5", "current_limit_a = 6"),
        ["monitor[1].current_limit_a: must be above 0 and at most 5 A on the Otii Arc, got 6"]
    );
    assert_eq!(
        bad("address = \"10.0.0.9:1906\"", "address = \"10.0.0.9\""),
        ["monitor[3].address: `10.0.0.9` is not HOST:PORT"]
    );
    assert_eq!(
        bad("serial = \"20001\"", "address = \"x:1\""),
        [
            "monitor[2].serial: missing required key `serial`",
            "monitor[2].address: a `monsoon` monitor has no `address`",
        ]
    );
    assert_eq!(bad("kind = \"sim\"", "kind = \"joulescope\""), ["monitor[0].kind: unknown value \"joulescope\""]);
    // A Monsoon is read over this machine's USB, not through an SSH host.
    assert_eq!(
        bad("kind = \"monsoon\"", "kind = \"monsoon\"\nhost = \"shelf\""),
        [
            "monitor[2].host: a Monsoon is read over the USB of the machine `lab` runs on, and host `shelf` is reached over SSH"
        ]
    );
    // `tether = "monitor"` only where a Monsoon supplies the device.
    assert_eq!(
        bad("host = \"shelf\"\nmonitor = \"arc-1\"", "host = \"shelf\"\nmonitor = \"arc-1\"\ntether = \"monitor\""),
        [
            "device[1].tether: `tether = \"monitor\"` needs a Monsoon supplying the device: its monitor `arc-1` is an Otii Arc, which has no USB passthrough to switch"
        ]
    );
}

#[test]
fn a_monsoon_passthrough_is_a_tether() {
    let text = MONITORED.replacen("monitor = \"hv\"", "monitor = \"hv\"\ntether = \"monitor\"", 1);
    let lab = parse_lab(&text, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.device("board").unwrap().tether, TetherSpec::Monitor);
    let text = MONITORED.replacen("model = \"dev board\"", "model = \"dev board\"\ntether = \"monitor\"", 1).replacen(
        "monitor = \"hv\"\n",
        "",
        1,
    );
    let e = parse_lab(&text, Path::new("lab.toml")).unwrap_err();
    assert_eq!(
        messages(&e),
        ["device[2].tether: `tether = \"monitor\"` needs a Monsoon supplying the device: no [[monitor]] supplies it"]
    );
}

#[test]
fn serve_settings_are_read_and_bad_ones_refused_with_the_fix() {
    let lab = parse_lab(LAB, Path::new("/labs/bench/lab.toml")).unwrap();
    let beside = crate::config::ServeSettings { runbooks: "/labs/bench/runbooks".into(), ..Default::default() };
    assert_eq!(lab.serve, beside, "the defaults, the runbook folder beside the lab file");
    assert_eq!(lab.serve.bind.to_string(), "127.0.0.1:8470");
    let text = format!("{LAB}\n[serve]\nrunbooks = \"../shared/runbooks\"\n");
    let lab = parse_lab(&text, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.serve.runbooks, Path::new("/labs/bench/../shared/runbooks"));
    let text = format!("{LAB}\n[serve]\nbind = \"0.0.0.0:9000\"\ntoken_file = \"serve.token\"\npublic_read = true\n");
    let lab = parse_lab(&text, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lab.serve.bind.to_string(), "0.0.0.0:9000");
    assert_eq!(lab.serve.token_file.as_deref(), Some(Path::new("/labs/bench/serve.token")));
    assert!(lab.serve.public_read);
    let text = format!("{LAB}\n[serve]\nheader_timeout = \"2s\"\nmax_connections = 50\nmax_body_bytes = 4096\n");
    let lab = parse_lab(&text, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    let limits = (lab.serve.header_timeout, lab.serve.max_connections, lab.serve.max_body_bytes);
    assert_eq!(limits, (std::time::Duration::from_secs(2), 50, 4096));
    let text = format!("{LAB}\n[serve]\npublic_url = \"https://Lab.example.org:443/\"\n");
    let lab = parse_lab(&text, Path::new("/labs/bench/lab.toml")).unwrap_or_else(|e| panic!("{e}"));
    let want = crate::config::PublicUrl { host: "lab.example.org".into(), https: true };
    assert_eq!(lab.serve.public_url, Some(want));
    let text = format!(
        "{LAB}\n[serve]\nbind = \"localhost\"\ntoken = \"x\"\npublic_read = \"yes\"\npublic_url = \"lab.example.org/x\"\n\
header_timeout = 20\nmax_connections = 0\nmax_body_bytes = 10\nrunbooks = \" \"\n"
    );
    let e = parse_lab(&text, Path::new("lab.toml")).unwrap_err().to_string();
    for want in [
        "serve.bind: `localhost` is not an address and port; fix: write `bind = \"127.0.0.1:8470\"`",
        "serve.token: unknown key `token`",
        "serve.public_read:",
        "serve.public_url: `lab.example.org/x` is not the address of a site; fix: write the scheme and host",
        "serve.header_timeout:",
        "add a unit and quotes, e.g. `header_timeout = \"20s\"`",
        "serve.max_connections: must be ≥ 1, got 0",
        "serve.max_body_bytes: must be ≥ 1024, got 10",
        "serve.runbooks: the runbook folder is empty; fix: name the folder",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}
