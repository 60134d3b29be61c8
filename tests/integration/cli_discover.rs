//! `lab discover` and `lab init` through the real binary on the stand-ins: two adb phones
//! through Debian's adb (one unauthorized), two iPhones through the stand-in's usbmuxd
//! socket (one not paired), the stand-in uhubctl with all of them on a hub that switches
//! per port, on this machine and on an SSH lab host (the test sshd).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::adb::{self, Adb, Phone};
use crate::common::iphone::{self, StandIn, UDID};
use crate::common::uhubctl::{Hubs, usb2_hub};
use crate::common::{self, TempLab};

const PAIRED_SERIAL: &str = "2A111FDH200B4Z";
const UNPAIRED_UDID: &str = "00008030-00AA00BB00CC00DD";

struct Shelf {
    adb: Adb,
    phones: Vec<Phone>,
    roots: tempfile::TempDir,
    iphones: StandIn,
    hubs: Hubs,
}

impl Shelf {
    fn new() -> Shelf {
        let adb = Adb::start();
        let roots = tempfile::tempdir().unwrap();
        // Listed by serial (`127.0.0.1:PORT`): the ready phone on the lower port comes first.
        let mut ports = [adb::free_port(), adb::free_port()];
        ports.sort();
        let ready = Phone::start(&roots.path().join("ready"), ports[0], &["--serial", PAIRED_SERIAL]);
        let locked_out = Phone::start(&roots.path().join("unauthorized"), ports[1], &["--auth", "never"]);
        adb.connect(&ready);
        adb.connect(&locked_out);
        let iphones = StandIn::start(&[(UDID, ""), (UNPAIRED_UDID, "fault = \"not_paired\"")]);
        let device = |id: &str, vendor: &str, product: &str, serial: &str| json!({ "device": { "id": id, "vendor": vendor, "product": product, "serial": serial, "speed": "high" } });
        let hubs = Hubs::new(&usb2_hub(
            "1-1",
            vec![
                device("18d1:4ee7", "Google", "Pixel 5", PAIRED_SERIAL),
                device("05ac:12a8", "Apple Inc.", "iPhone", &UDID.replace('-', "")),
                device("05ac:12a8", "Apple Inc.", "iPhone", &UNPAIRED_UDID.replace('-', "")),
                json!({}),
            ],
        ));
        Shelf { adb, phones: vec![ready, locked_out], roots, iphones, hubs }
    }

    /// `--adb-server`, `--usbmuxd`, and an Otii address nothing listens on.
    fn reach(&self) -> Vec<String> {
        vec![
            "--adb-server".into(),
            format!("127.0.0.1:{}", self.adb.port),
            "--usbmuxd".into(),
            self.iphones.socket.display().to_string(),
            "--otii".into(),
            format!("127.0.0.1:{}", adb::free_port()),
        ]
    }

    fn discover(&self, lab: &TempLab, extra: &[&str]) -> (i32, String, String) {
        let mut args = vec!["discover"];
        args.extend_from_slice(extra);
        let reach = self.reach();
        args.extend(reach.iter().map(String::as_str));
        let out = lab.cmd(&args).envs(self.hubs.env()).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    }

    /// What changes between runs (ports, temporary paths) replaced by names.
    fn stable(&self, text: &str) -> String {
        let mut s = text.to_string();
        for (i, p) in self.phones.iter().enumerate() {
            // Ports are ephemeral, so five digits: five characters keep the table's columns.
            s = s.replace(&p.serial, &format!("127.0.0.1:PHON{i}"));
        }
        s.replace(&self.adb.port.to_string(), "ADBPT").replace(&self.iphones.socket.display().to_string(), "USBMUXD")
    }

    /// What a lab could change on the phones (props, settings, apps, the battery service and
    /// its history's reset), to show discovery changed none of it; time moves the rest.
    fn android_states(&self) -> Vec<Value> {
        let keep = |s: Value| {
            let b = &s["battery"];
            json!([
                s["props"],
                s["settings"],
                s["packages"],
                s["launches"],
                s["processes"],
                s["history"]["reset_ms"],
                b["power"],
                b["input_suspended"],
                b["frozen"]
            ])
        };
        ["ready", "unauthorized"].iter().map(|r| keep(adb::state(&self.roots.path().join(r)))).collect()
    }
}

fn runbook(dir: &Path, devices: &[&str]) -> PathBuf {
    std::fs::write(dir.join("app.apk"), adb::apk("com.example.app", None, 4000)).unwrap();
    iphone::ipa(dir, "App.ipa", "io.example.app");
    let rb = dir.join("rb.toml");
    let names: Vec<String> = devices.iter().map(|d| format!("\"{d}\"")).collect();
    std::fs::write(
        &rb,
        format!(
            "name = \"first\"\nduration = \"10m\"\nrepeats = 2\ndevices = [{}]\n\
             [builds.app]\nbaseline = true\n\
             [builds.app.android]\napk = \"app.apk\"\npackage = \"com.example.app\"\nactivity = \".Main\"\n\
             [builds.app.ios]\nipa = \"App.ipa\"\nbundle_id = \"io.example.app\"\n\
             [preconditions]\nuntethered = true\n",
            names.join(", ")
        ),
    )
    .unwrap();
    rb
}

#[test_needs::needs(adb)]
#[test]
fn discover_lists_every_phone_its_state_port_and_fix_and_writes_nothing() {
    let shelf = Shelf::new();
    let lab = TempLab::new();
    let before = shelf.android_states();
    let (code, stdout, stderr) = shelf.discover(&lab, &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    insta::assert_snapshot!("discover_table", shelf.stable(&stdout));
    // Each problem is one line with its fix.
    assert!(
        stdout.contains("is unauthorized: it has not accepted this host's adb key; fix: unlock the phone"),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("iPhone {UNPAIRED_UDID} is not paired with host local")), "{stdout}");
    assert!(stdout.contains(&format!("idevicepair pair -u {UNPAIRED_UDID}")), "{stdout}");

    let (_, json, _) = shelf.discover(&lab, &["--json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let phones = v[0]["phones"].as_array().unwrap();
    let by_id = |id: &str| phones.iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("{id} in {json}"));
    let ready = by_id(&shelf.phones[0].serial);
    assert_eq!((ready["state"].as_str(), ready["usb_serial"].as_str()), (Some("ready"), Some(PAIRED_SERIAL)));
    assert_eq!(ready["hub"], json!({"kind": "switching", "location": "1-1", "port": 1, "auto": false}));
    assert_eq!(by_id(&shelf.phones[1].serial)["state"], "unauthorized");
    let iphone = by_id(UDID);
    assert_eq!((iphone["state"].as_str(), iphone["model"].as_str()), (Some("ready"), Some("iPhone 13 Pro")));
    assert_eq!(iphone["os"], "iOS 16.7.2 (20H115)");
    assert_eq!(iphone["label"], "Lab iPhone");
    assert_eq!(iphone["hub"]["port"], 2);
    let unpaired = by_id(UNPAIRED_UDID);
    // Not paired, yet named from what lockdown tells any host.
    assert_eq!((unpaired["state"].as_str(), unpaired["model"].as_str()), (Some("not_paired"), Some("iPhone 13 Pro")));
    assert_eq!(v[0]["monitors"], json!([]));

    // Read-only: the hubs were listed (`-f`) and never switched; no phone was changed; the
    // iPhones were asked for values in sessions, never paired, given a service, or installed to.
    let calls: Vec<String> = shelf.hubs.calls().into_iter().map(|(a, _)| a).collect();
    assert!(!calls.is_empty() && calls.iter().all(|c| c == "-f"), "{calls:?}");
    assert_eq!(shelf.android_states(), before);
    let requests: Vec<String> =
        shelf.iphones.journal().iter().map(|j| format!("{}/{}", j["service"], j["request"])).collect();
    let allowed = [
        "QueryType",
        "GetValue",
        "StartSession",
        "StopSession",
        "Goodbye",
        "ListDevices",
        "ReadPairRecord",
        "Connect",
        "ReadBUID",
        "Listen",
    ];
    for r in &requests {
        assert!(allowed.iter().any(|a| r.ends_with(&format!("/\"{a}\""))), "{r} in {requests:?}");
    }
    assert!(requests.iter().any(|r| r.contains("GetValue")), "{requests:?}");
}

#[test_needs::needs(adb)]
#[test]
fn discover_toml_appended_to_the_default_lab_loads_plans_and_maps_each_phone_to_its_port() {
    let shelf = Shelf::new();
    let lab = TempLab::new();
    let (code, toml, stderr) = shelf.discover(&lab, &["--toml"]);
    assert_eq!(code, 0, "{toml}\n{stderr}");
    let shown = shelf.stable(&toml).replace(&lan_line(&toml), "#   endpoint_url = LAN");
    insta::assert_snapshot!("discover_toml", shown.replace(&lab.lab.display().to_string(), "LAB"));
    // The user's two steps: the endpoint lines the header gives go under [lab], the blocks at the end.
    let endpoint: String = toml
        .lines()
        .filter_map(|l| l.strip_prefix("#   "))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .replace("0.0.0.0:8765", &format!("0.0.0.0:{}", adb::free_port()));
    assert!(endpoint.contains("endpoint_url"), "{toml}");
    let text = std::fs::read_to_string(&lab.lab).unwrap().replacen("[lab]\n", &format!("[lab]\n{endpoint}"), 1);
    std::fs::write(&lab.lab, format!("{text}\n{toml}")).unwrap();
    // Named from the model and a counter, in UDID order: -1 is the unpaired one.
    let rb = runbook(lab.dir.path(), &["pixel-5-1", "iphone-13-pro-1", "iphone-13-pro-2"]);
    let out = lab.cmd(&["plan", rb.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("pixel-5-1") && plan.contains("iphone-13-pro-2"), "{plan}");

    // `lab hubs` finds the iPhones (`uhubctl = "auto"`) on their ports; the adb phone, reached
    // over TCP here, has its port written out.
    let out = lab.cmd(&["hubs", "--json"]).envs(shelf.hubs.env()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ports: Vec<(String, Value)> = v[0]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["device"].as_str().unwrap().to_string(), d["found"].clone()))
        .collect();
    assert_eq!(
        ports,
        [
            ("iphone-13-pro-1".to_string(), json!({"location": "1-1", "port": 3})),
            ("iphone-13-pro-2".to_string(), json!({"location": "1-1", "port": 2})),
        ]
    );
    assert!(toml.contains("tether = { uhubctl = { location = \"1-1\", port = 1 } }"), "{toml}");

    // Now the lab has them: nothing new, and the table names them.
    let (_, again, _) = shelf.discover(&lab, &["--toml"]);
    assert!(!again.contains("\n[[device]]"), "{again}");
    assert!(again.contains("on local: not written: phone 127.0.0.1:"), "{again}");
    let (_, table, _) = shelf.discover(&lab, &[]);
    assert!(table.contains("pixel-5-1") && table.contains("iphone-13-pro-2"), "{table}");
}

fn lan_line(toml: &str) -> String {
    toml.lines().find(|l| l.starts_with("#   endpoint_url")).unwrap_or("(none)").to_string()
}

#[test_needs::needs(adb)]
#[test]
fn lab_init_writes_a_lab_that_loads_and_never_writes_over_one() {
    let shelf = Shelf::new();
    let dir = tempfile::tempdir().unwrap();
    let init = |args: &[&str]| {
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        let reach = shelf.reach();
        all.extend(reach.iter().map(String::as_str));
        let mut c = assert_cmd::Command::cargo_bin("lab").unwrap();
        c.current_dir(dir.path()).args(&all).env_remove("LAB_CONFIG").envs(shelf.hubs.env());
        c.output().unwrap()
    };
    let out = init(&["--name", "shelf", "--endpoint-url", "http://lab-machine.invalid:9876"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("wrote lab.toml: 1 host(s), 3 device(s)"), "{stdout}");
    let written = std::fs::read_to_string(dir.path().join("lab.toml")).unwrap();
    assert!(written.contains("name = \"shelf\"") && written.contains("udid = \"00008030-00AA00BB00CC00DD\""));
    // Phones were found: the endpoint where they reach it, listening on every interface.
    assert!(
        written.contains("endpoint_bind = \"0.0.0.0:9876\"\nendpoint_url = \"http://lab-machine.invalid:9876\""),
        "{written}"
    );
    let rb = runbook(dir.path(), &["pixel-5-1", "iphone-13-pro-1"]);
    let mut plan = assert_cmd::Command::cargo_bin("lab").unwrap();
    let out =
        plan.current_dir(dir.path()).args(["plan", rb.to_str().unwrap()]).env_remove("LAB_CONFIG").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}\n{written}", String::from_utf8_lossy(&out.stderr));

    // A second init refuses and leaves the file as it was; so does a loopback endpoint.
    let out = init(&["--endpoint-url", "http://127.0.0.1:8765"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a phone cannot reach this machine's loopback"));
    let out = init(&[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("lab.toml exists: `lab init` never writes over a lab file; fix: "), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.path().join("lab.toml")).unwrap(), written);
}

#[test_needs::needs(adb, sshd)]
#[test]
fn discover_on_an_ssh_lab_host_finds_the_same_through_its_transport() {
    let shelf = Shelf::new();
    let sshd = common::sshd::start_with(&shelf.hubs.sshd_env());
    let lab = TempLab::from_text(&format!("[lab]\nname = \"remote\"\n\n{}", sshd.host_table("")));
    let (code, json, stderr) = shelf.discover(&lab, &["--json", "--host", "shelf-1"]);
    assert_eq!(code, 0, "{json}\n{stderr}");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!((v[0]["host"].as_str(), v.as_array().unwrap().len()), (Some("shelf-1"), 1));
    assert_eq!(v[0]["notes"], json!([]), "{json}");
    let states: Vec<(String, String, Value)> = v[0]["phones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (p["platform"].as_str().unwrap().into(), p["state"].as_str().unwrap().into(), p["hub"]["port"].clone())
        })
        .collect();
    assert_eq!(
        states,
        [
            ("android".into(), "ready".into(), json!(1)),
            ("android".into(), "unauthorized".into(), Value::Null),
            ("ios".into(), "not_paired".into(), json!(3)),
            ("ios".into(), "ready".into(), json!(2)),
        ]
    );
    // uhubctl ran in an SSH session on the host.
    assert!(shelf.hubs.calls().iter().all(|(a, ssh)| a == "-f" && ssh.is_some()), "{:?}", shelf.hubs.calls());
    let (_, toml, _) = shelf.discover(&lab, &["--toml", "--host", "shelf-1"]);
    assert!(toml.contains("host = \"shelf-1\"") && toml.contains("found on shelf-1"), "{toml}");

    // `lab init` with that host: it and its phones in a lab file that loads and checks. (This
    // machine is looked at too, and here it sees the same stand-ins.)
    let dir = tempfile::tempdir().unwrap();
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let init = |ssh: &str| {
        let mut c = assert_cmd::Command::cargo_bin("lab").unwrap();
        c.current_dir(dir.path()).env_remove("LAB_CONFIG").args(["init", "--ssh", ssh]);
        c.args([
            "--identity",
            sshd.client_key().to_str().unwrap(),
            "--known-hosts",
            sshd.known_hosts().to_str().unwrap(),
        ]);
        c.args(shelf.reach()).args(["--timeout", "3s", "--endpoint-url", "http://lab-machine.invalid:8765"]);
        c.envs(shelf.hubs.env()).output().unwrap()
    };
    let out = init(&format!("shelf-1={}@{}", sshd.user, sshd.address()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(dir.path().join("lab.toml")).unwrap();
    let shelf_1_devices = written.matches("host = \"shelf-1\"").count();
    assert_eq!(shelf_1_devices, 3, "{written}");
    let lab_out = assert_cmd::Command::cargo_bin("lab")
        .unwrap()
        .current_dir(dir.path())
        .args(["hosts", "check"])
        .envs(shelf.hubs.env())
        .output()
        .unwrap();
    assert_eq!(lab_out.status.code(), Some(0), "{}", String::from_utf8_lossy(&lab_out.stdout));
    std::fs::remove_file(dir.path().join("lab.toml")).unwrap();
    // A host that is not there: nothing written, exit 3.
    let out = init(&format!("shelf-9={user}@127.0.0.1:{}", adb::free_port()));
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing written: host shelf-9 could not be reached"));
    assert!(!dir.path().join("lab.toml").exists());

    // A host that is not there: reported with the reason, exit 3, within the limit.
    let dead = TempLab::from_text(&format!(
        "[lab]\nname = \"dead\"\n\n{}",
        sshd.host_table("").replace(&sshd.address(), &format!("127.0.0.1:{}", adb::free_port()))
    ));
    let (code, out, _) = shelf.discover(&dead, &["--timeout", "2s", "--host", "shelf-1"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("shelf-1: not looked at: ") && out.contains("lab hosts check"), "{out}");
}

#[test_needs::needs(adb)]
#[test]
fn a_hung_adb_or_usbmuxd_is_reported_within_the_limit_and_bad_flags_change_nothing() {
    let shelf = Shelf::new();
    // Something that accepts and never answers: a hung server.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hung.local_addr().unwrap().port().to_string();
    let lab = TempLab::new();
    let started = std::time::Instant::now();
    let out = lab
        .cmd(&[
            "discover",
            "--timeout",
            "1s",
            "--adb-server",
            &format!("127.0.0.1:{port}"),
            "--usbmuxd",
            &format!("127.0.0.1:{port}"),
        ])
        .envs(shelf.hubs.env())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("local: Android phones not looked for: "), "{stdout}");
    assert!(stdout.contains("local: iPhones not looked for: usbmuxd does not answer"), "{stdout}");
    drop(hung);

    // No adb and no uhubctl on the host: each says how to install it.
    let out = lab.cmd(&["discover", "--usbmuxd", "/nonexistent"]).env("PATH", "/nonexistent").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "local: Android phones not looked for: adb is not installed on local; fix: `apt-get install adb`"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("local: uhubctl is not installed on local; fix: `apt-get install uhubctl` there"),
        "{stdout}"
    );

    for (args, said) in [
        (vec!["discover", "--adb-server", "nowhere"], "--adb-server nowhere: not a host and port"),
        (vec!["discover", "--timeout", "soon"], "--timeout soon: not a duration"),
        (vec!["discover", "--host", "shelf-9"], "--host shelf-9: no such [[host]]"),
    ] {
        let out = lab.cmd(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(said), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn an_otii_server_is_found_by_asking_for_its_devices_only() {
    let server = crate::common::otii::Otii::start(100.0, 0.0, &["--device-name", "Arc 1234"]);
    let lab = TempLab::new();
    // No adb or iPhones asked for here: a port nothing listens on stands for each.
    let nothing = format!("127.0.0.1:{}", adb::free_port());
    let args = ["discover", "--json", "--otii", &format!("127.0.0.1:{}", server.port), "--adb-server", &nothing];
    let out = lab.cmd(&[&args[..], &["--usbmuxd", &nothing, "--timeout", "3s"]].concat()).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v[0]["monitors"][0];
    assert_eq!((m["kind"].as_str(), m["in_lab"].as_str()), (Some("otii"), None), "{v}");
    assert!(m["detail"].as_str().unwrap().contains("(Arc 1234)"), "{m}");
    // Asked for its devices, nothing else: no licence reserved, no supply switched on.
    let state = server.state();
    let commands: Vec<&str> = state["commands"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(commands, ["otii_get_devices"], "{state}");
    assert!(state["licences"].as_array().unwrap().iter().all(|l| l["reserved"] == false));

    let toml = lab
        .cmd(&[
            "discover",
            "--toml",
            "--otii",
            &format!("127.0.0.1:{}", server.port),
            "--adb-server",
            &nothing,
            "--usbmuxd",
            &nothing,
            "--timeout",
            "3s",
        ])
        .output()
        .unwrap();
    let toml = String::from_utf8_lossy(&toml.stdout);
    assert!(
        toml.contains("# [[monitor]]\n# name = \"otii-1\"") && toml.contains("# model = \"arc\"\n# voltage_v = …\n"),
        "{toml}"
    );
}
