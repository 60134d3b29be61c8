//! The stand-in iPhone (standins/iphone: usbmuxd and the phones behind it on a Unix
//! socket) against three clients: a raw usbmuxd client written here, libimobiledevice's
//! tools (`idevice_id`, `ideviceinfo`, `idevicediagnostics`; those tests are ignored where
//! they are missing, unless LAB_REQUIRE_IDEVICE=1 as in CI), and the real `idevice` crate, with every scripted fault.

use crate::common;

use common::iphone::{
    IOREG, REPLAY_UDID, StandIn, UDID, assert_the_workloads_requests_were_captured, http_server, launch, phone_toml,
    pinging,
};

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

use idevice::IdeviceError;
use idevice::IdeviceService;
use idevice::diagnostics_relay::DiagnosticsRelayClient;
use idevice::installation_proxy::InstallationProxyClient;
use idevice::lockdown::LockdownClient;
use idevice::mobile_image_mounter::ImageMounter;
use idevice::usbmuxd::errors::UsbmuxdError;
use sha2::{Digest, Sha256};

// ---- a) a raw usbmuxd client ----

fn mux_send(s: &mut UnixStream, tag: u32, body: plist::Dictionary) {
    let mut xml = Vec::new();
    plist::Value::Dictionary(body).to_writer_xml(&mut xml).unwrap();
    let mut frame = Vec::new();
    for v in [16 + xml.len() as u32, 1, 8, tag] {
        frame.extend_from_slice(&v.to_le_bytes());
    }
    frame.extend_from_slice(&xml);
    s.write_all(&frame).unwrap();
}

/// `(raw frame, tag, plist)` of one reply.
fn mux_read(s: &mut UnixStream) -> (Vec<u8>, u32, plist::Dictionary) {
    let mut header = [0u8; 16];
    s.read_exact(&mut header).unwrap();
    let word = |i: usize| u32::from_le_bytes(header[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!((word(1), word(2)), (1, 8), "plist protocol, plist message");
    let mut body = vec![0; word(0) as usize - 16];
    s.read_exact(&mut body).unwrap();
    let dict = plist::from_bytes(&body).unwrap();
    ([header.to_vec(), body].concat(), word(3), dict)
}

fn request(kind: &str, more: &[(&str, plist::Value)]) -> plist::Dictionary {
    let mut d = plist::Dictionary::new();
    d.insert("MessageType".into(), kind.into());
    for (k, v) in more {
        d.insert(k.to_string(), v.clone());
    }
    d
}

fn result_number(d: &plist::Dictionary) -> Option<u64> {
    assert_eq!(d.get("MessageType").and_then(|v| v.as_string()), Some("Result"), "{d:?}");
    d.get("Number").and_then(|v| v.as_unsigned_integer())
}

fn connect_request(device_id: u64, port: u16) -> plist::Dictionary {
    request(
        "Connect",
        &[
            ("DeviceID", plist::Value::Integer(device_id.into())),
            ("PortNumber", plist::Value::Integer(u64::from(port.to_be()).into())),
        ],
    )
}

fn lockdown_query_type(s: &mut UnixStream) -> Vec<u8> {
    let mut xml = Vec::new();
    let query: plist::Dictionary = [("Request".to_string(), plist::Value::from("QueryType"))].into_iter().collect();
    plist::Value::Dictionary(query).to_writer_xml(&mut xml).unwrap();
    s.write_all(&(xml.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&xml).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    [len.to_vec(), body].concat()
}

#[test]
fn a_raw_client_gets_the_replies_the_real_daemon_gives() {
    let standin = StandIn::start(&[(UDID, ""), ("zz-unpaired", "")]);
    std::fs::remove_file(standin.root().join("pair/zz-unpaired.plist")).unwrap();
    let mut s = UnixStream::connect(&standin.socket).unwrap();

    mux_send(&mut s, 11, request("ListDevices", &[("ClientVersionString", "test".into())]));
    let (_, tag, reply) = mux_read(&mut s);
    assert_eq!(tag, 11, "a reply carries its request's tag");
    let list = reply["DeviceList"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let first = list[0].as_dictionary().unwrap();
    let props = first["Properties"].as_dictionary().unwrap();
    assert_eq!(first["MessageType"].as_string(), Some("Attached"));
    assert_eq!(first["DeviceID"].as_unsigned_integer(), Some(1));
    assert_eq!(props["SerialNumber"].as_string(), Some(UDID));
    assert_eq!(props["ConnectionType"].as_string(), Some("USB"));

    mux_send(&mut s, 12, request("ReadPairRecord", &[("PairRecordID", UDID.into())]));
    let (_, _, reply) = mux_read(&mut s);
    let record: plist::Dictionary = plist::from_bytes(reply["PairRecordData"].as_data().unwrap()).unwrap();
    assert_eq!(record["UDID"].as_string(), Some(UDID));
    mux_send(&mut s, 13, request("ReadPairRecord", &[("PairRecordID", "zz-unpaired".into())]));
    assert_eq!(result_number(&mux_read(&mut s).2), Some(2), "no record: ENOENT as usbmuxd says it");
    mux_send(&mut s, 14, request("ReadBUID", &[]));
    assert_eq!(mux_read(&mut s).2["BUID"].as_string(), record["SystemBUID"].as_string());
    mux_send(&mut s, 15, connect_request(9, 62078));
    assert_eq!(result_number(&mux_read(&mut s).2), Some(2), "no such device");
    mux_send(&mut s, 16, connect_request(1, 1234));
    assert_eq!(result_number(&mux_read(&mut s).2), Some(3), "nothing listens there");
    mux_send(&mut s, 17, connect_request(1, 62078));
    let (_, tag, reply) = mux_read(&mut s);
    assert_eq!((tag, result_number(&reply)), (17, Some(0)));
    // The socket is now lockdownd's.
    let answer = lockdown_query_type(&mut s);
    let answer: plist::Dictionary = plist::from_bytes(&answer[4..]).unwrap();
    assert_eq!(answer["Type"].as_string(), Some("com.apple.mobile.lockdown"));
    assert_eq!(answer["Request"].as_string(), Some("QueryType"));

    let connects = standin.journalled("usbmuxd", "Connect");
    let ports: Vec<_> = connects.iter().map(|c| c["port"].as_u64().unwrap()).collect();
    assert_eq!(ports, [62078, 1234, 62078], "the port is decoded from network order");
}

#[test]
fn listen_sends_attached_events_and_pair_records_are_saved_and_deleted() {
    let standin = StandIn::start(&[(UDID, "")]);
    let mut s = UnixStream::connect(&standin.socket).unwrap();
    mux_send(&mut s, 3, request("Listen", &[]));
    let (_, tag, reply) = mux_read(&mut s);
    assert_eq!((tag, result_number(&reply)), (3, Some(0)));
    let (_, tag, event) = mux_read(&mut s);
    assert_eq!((tag, event["MessageType"].as_string()), (0, Some("Attached")), "events carry tag 0");
    assert_eq!(event["Properties"].as_dictionary().unwrap()["SerialNumber"].as_string(), Some(UDID));

    let mut s = UnixStream::connect(&standin.socket).unwrap();
    let record = standin.root().join("pair/other.plist");
    mux_send(
        &mut s,
        4,
        request(
            "SavePairRecord",
            &[("PairRecordID", "other".into()), ("PairRecordData", plist::Value::Data(b"rec".to_vec()))],
        ),
    );
    assert_eq!(result_number(&mux_read(&mut s).2), Some(0));
    assert_eq!(std::fs::read(&record).unwrap(), b"rec");
    mux_send(&mut s, 5, request("DeletePairRecord", &[("PairRecordID", "other".into())]));
    assert_eq!(result_number(&mux_read(&mut s).2), Some(0));
    assert!(!record.exists());
}

#[test]
fn replay_answers_with_the_captured_bytes_under_this_hosts_tag() {
    let standin = StandIn::start(&[(REPLAY_UDID, "replay = true")]);
    let root = common::root().join("tests/fixtures/devices/ios");
    let capture = |name: &str| std::fs::read(root.join(name)).unwrap();
    let retag = |mut b: Vec<u8>, tag: u32| {
        b[12..16].copy_from_slice(&tag.to_le_bytes());
        b
    };
    let mut s = UnixStream::connect(&standin.socket).unwrap();
    mux_send(&mut s, 5, request("ListDevices", &[]));
    let (raw, tag, reply) = mux_read(&mut s);
    assert_eq!(tag, 5);
    assert_eq!(raw, retag(capture("usbmux_listdevices_appium.bin"), 5));
    let device_id =
        reply["DeviceList"].as_array().unwrap()[0].as_dictionary().unwrap()["DeviceID"].as_unsigned_integer().unwrap();
    mux_send(&mut s, 6, connect_request(device_id, 62078));
    assert_eq!(mux_read(&mut s).0, retag(capture("usbmux_connect_result_appium.bin"), 6));
    assert_eq!(lockdown_query_type(&mut s), capture("lockdown_querytype_appium.bin"));
}

// ---- b) libimobiledevice's tools ----

/// The tool's path. The tests that use these tools are ignored where they are missing
/// (`#[test_needs::needs(idevice)]`), unless LAB_REQUIRE_IDEVICE=1 (CI); one that gets
/// here without them fails.
fn tool(name: &str) -> &'static str {
    let path: &'static str = Box::leak(format!("/usr/bin/{name}").into_boxed_str());
    assert!(Path::new(path).exists(), "needs idevice: {path} is missing (apt-get install libimobiledevice-utils)");
    path
}

fn run_tool(standin: &StandIn, path: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(path)
        .args(args)
        .env("USBMUXD_SOCKET_ADDRESS", format!("UNIX:{}", standin.socket.display()))
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test_needs::needs(idevice)]
#[test]
fn libimobiledevice_lists_and_reads_the_phone_through_a_tls_session() {
    let (id, info, diag) = (tool("idevice_id"), tool("ideviceinfo"), tool("idevicediagnostics"));
    let standin = StandIn::start(&[(UDID, "")]);
    let (code, out, err) = run_tool(&standin, id, &["-l"]);
    assert_eq!((code, out.as_str()), (0, format!("{UDID}\n").as_str()), "{err}");

    let (code, out, err) = run_tool(&standin, info, &["-u", UDID, "-k", "ProductVersion"]);
    assert_eq!((code, out.as_str()), (0, "16.7.2\n"), "{err}");
    let (code, out, err) = run_tool(&standin, info, &["-u", UDID]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "DeviceName: Lab iPhone",
        "ProductType: iPhone14,2",
        "BuildVersion: 20H115",
        &format!("UniqueDeviceID: {UDID}"),
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in {out}");
    }
    let (code, out, err) = run_tool(&standin, info, &["-u", UDID, "-q", "com.apple.mobile.battery"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "BatteryCurrentCapacity: 85",
            "BatteryIsCharging: true",
            "ExternalChargeCapable: true",
            "ExternalConnected: true",
            "FullyCharged: false",
            "HasBattery: true"
        ]
    );
    // It used the session: StartSession with the record's HostID, then StopSession.
    let record: plist::Dictionary = plist::from_file(standin.root().join(format!("pair/{UDID}.plist"))).unwrap();
    let sessions = standin.journalled("lockdownd", "StartSession");
    assert_eq!(sessions.len(), 3);
    assert!(sessions.iter().all(|s| s["HostID"].as_str() == record["HostID"].as_string()));
    assert_eq!(standin.journalled("lockdownd", "StopSession").len(), 3);

    let (code, out, err) = run_tool(&standin, diag, &["-u", UDID, "ioregentry", "AppleSmartBattery"]);
    assert_eq!(code, 0, "{err}");
    let printed: plist::Dictionary = plist::from_bytes(out.as_bytes()).unwrap();
    let canned: plist::Dictionary = plist::from_file(common::root().join(IOREG)).unwrap();
    assert_eq!(printed["IORegistry"], canned["Diagnostics"].as_dictionary().unwrap()["IORegistry"]);
}

#[test_needs::needs(idevice)]
#[test]
fn libimobiledevice_reports_an_untrusted_and_a_locked_phone() {
    let info = tool("ideviceinfo");
    let standin = StandIn::start(&[("a-untrusted", "fault = \"untrusted\""), ("b-locked", "fault = \"locked\"")]);
    let (code, _, err) = run_tool(&standin, info, &["-u", "a-untrusted"]);
    assert_eq!(code, 255);
    assert!(err.contains("Could not connect to lockdownd: Invalid HostID (-21)"), "{err}");
    // ideviceinfo prints nothing for a value the locked phone withholds, and exits 0.
    for args in [&["-u", "b-locked", "-k", "DeviceName"][..], &["-u", "b-locked"]] {
        let (code, out, err) = run_tool(&standin, info, args);
        assert_eq!((code, out.as_str()), (0, ""), "{args:?}: {err}");
    }
    let withheld = standin.journalled("lockdownd", "GetValue");
    assert!(withheld.iter().any(|g| g["udid"] == "b-locked" && g["Key"] == "DeviceName"), "{withheld:?}");
}

// ---- c) the idevice crate ----

async fn provider(standin: &StandIn, udid: &str) -> idevice::provider::UsbmuxdProvider {
    standin.provider(udid).await
}

async fn session(standin: &StandIn, udid: &str) -> Result<LockdownClient, IdeviceError> {
    let p = provider(standin, udid).await;
    let pf = standin.addr().connect(2).await?.get_pair_record(udid).await?;
    let mut ld = LockdownClient::connect(&p).await?;
    ld.start_session(&pf).await?;
    Ok(ld)
}

#[tokio::test]
async fn the_idevice_crate_identifies_reads_the_battery_and_installs() {
    let standin = StandIn::start(&[(UDID, "")]);
    let devices = standin.addr().connect(0).await.unwrap().get_devices().await.unwrap();
    assert_eq!(devices.iter().map(|d| (d.udid.as_str(), d.device_id)).collect::<Vec<_>>(), [(UDID, 1)]);
    let missing = standin.addr().connect(0).await.unwrap().get_device("nope").await.unwrap_err();
    assert!(matches!(missing, IdeviceError::DeviceNotFound), "{missing:?}");
    let bad = standin.addr().connect(0).await.unwrap().connect_to_device(7, 62078, "t").await.unwrap_err();
    assert!(matches!(bad, IdeviceError::Usbmuxd(UsbmuxdError::BadDevice)), "{bad:?}");

    let mut ld = session(&standin, UDID).await.unwrap();
    let mut got = Vec::new();
    for k in ["DeviceName", "ProductType", "ProductVersion", "BuildVersion", "UniqueDeviceID"] {
        got.push(ld.get_value(Some(k), None).await.unwrap().as_string().unwrap().to_string());
    }
    assert_eq!(got, ["Lab iPhone", "iPhone14,2", "16.7.2", "20H115", UDID]);
    let battery = ld.get_value(None, Some("com.apple.mobile.battery")).await.unwrap();
    let battery = battery.as_dictionary().unwrap();
    assert_eq!(battery["BatteryCurrentCapacity"].as_signed_integer(), Some(85));
    assert_eq!(battery["ExternalChargeCapable"].as_boolean(), Some(true));
    let dm = ld.get_value(Some("DeveloperModeStatus"), Some("com.apple.security.mac.amfi")).await.unwrap();
    assert_eq!(dm.as_boolean(), Some(true));
    ld.stop_session().await.unwrap();

    let p = provider(&standin, UDID).await;
    let mut diag = DiagnosticsRelayClient::connect(&p).await.unwrap();
    let io = diag.ioregistry(None, None, Some("IOPMPowerSource")).await.unwrap().unwrap();
    assert_eq!((io["CurrentCapacity"].as_signed_integer(), io["Voltage"].as_signed_integer()), (Some(85), Some(4269)));
    diag.goodbye().await.unwrap();
    let mut mounter = ImageMounter::connect(&p).await.unwrap();
    assert!(!mounter.lookup_image("Developer").await.unwrap().is_empty());
    assert!(mounter.query_developer_mode_status().await.unwrap());

    let ipa = standin.dir.path().join("app.ipa");
    let made = Command::new(common::standin("iphone"))
        .args(["ipa", "--bundle-id", "com.example.energy", "--version", "42", "--size", "300000", "--out"])
        .arg(&ipa)
        .status()
        .unwrap();
    assert!(made.success());
    idevice::utils::installation::install_package(&p, &ipa, None).await.unwrap();
    let installs = standin.journalled("com.apple.mobile.installation_proxy", "Install");
    assert_eq!(installs.len(), 1);
    assert_eq!(installs[0]["PackagePath"], "PublicStaging/idevice.ipa");
    assert_eq!(installs[0]["CFBundleIdentifier"], "com.example.energy");
    assert_eq!(installs[0]["sha256"].as_str().unwrap(), hex::encode(Sha256::digest(std::fs::read(&ipa).unwrap())));
    let mut inst = InstallationProxyClient::connect(&p).await.unwrap();
    let apps = inst.get_apps(Some("User"), Some(vec!["com.example.energy".into()])).await.unwrap();
    let app = apps["com.example.energy"].as_dictionary().unwrap();
    assert_eq!(app["CFBundleVersion"].as_string(), Some("42"));
    assert_eq!(inst.browse(None).await.unwrap().len(), 1);
}

#[tokio::test]
async fn each_fault_gives_the_idevice_error_a_real_phone_gives() {
    let standin = StandIn::start(&[
        ("a-not-paired", "fault = \"not_paired\""),
        ("b-untrusted", "fault = \"untrusted\""),
        ("c-locked", "fault = \"locked\""),
        ("d-locked-int", "fault = \"locked\"\nerror_form = \"integer\""),
        ("e-password", "fault = \"password_protected\""),
        ("f-no-devmode", "developer_mode = false"),
        ("g-no-image", "developer_image_mounted = false"),
    ]);
    let e = standin.addr().connect(0).await.unwrap().get_pair_record("a-not-paired").await.unwrap_err();
    assert!(matches!(e, IdeviceError::UnexpectedResponse(_)), "{e:?}");
    let e = session(&standin, "b-untrusted").await.unwrap_err();
    assert!(matches!(e, IdeviceError::InvalidHostID), "{e:?}");
    for udid in ["c-locked", "d-locked-int"] {
        let mut ld = session(&standin, udid).await.unwrap();
        let e = ld.get_value(None, Some("com.apple.mobile.battery")).await.unwrap_err();
        assert!(matches!(e, IdeviceError::GetProhibited), "{udid}: {e:?}");
    }
    let e = session(&standin, "e-password").await.unwrap_err();
    assert!(matches!(e, IdeviceError::PasswordProtected), "{e:?}");

    let p = provider(&standin, "f-no-devmode").await;
    assert!(!ImageMounter::connect(&p).await.unwrap().query_developer_mode_status().await.unwrap());
    let dm = session(&standin, "f-no-devmode")
        .await
        .unwrap()
        .get_value(Some("DeveloperModeStatus"), Some("com.apple.security.mac.amfi"))
        .await;
    assert_eq!(dm.unwrap().as_boolean(), Some(false));
    for udid in ["f-no-devmode", "g-no-image"] {
        let e = session(&standin, udid)
            .await
            .unwrap()
            .start_service("com.apple.instruments.remoteserver.DVTSecureSocketProxy")
            .await
            .unwrap_err();
        assert!(matches!(&e, IdeviceError::UnknownErrorType(s) if s == "InvalidService"), "{udid}: {e:?}");
    }
    let p = provider(&standin, "g-no-image").await;
    let e = ImageMounter::connect(&p).await.unwrap().lookup_image("Developer").await.unwrap_err();
    assert!(matches!(e, IdeviceError::NotFound), "{e:?}");
}

#[tokio::test]
async fn an_ios_17_phone_without_a_tunnel_refuses_core_device_proxy() {
    let standin = StandIn::start(&[("a-17", "fault = \"no_tunnel\"")]);
    std::fs::write(
        standin.root().join("phones/a-17.toml"),
        phone_toml("fault = \"no_tunnel\"").replace("16.7.2", "17.5.1"),
    )
    .unwrap();
    let mut ld = session(&standin, "a-17").await.unwrap();
    let e = ld.start_service("com.apple.internal.devicecompute.CoreDeviceProxy").await.unwrap_err();
    assert!(matches!(&e, IdeviceError::UnknownErrorType(s) if s == "InvalidService"), "{e:?}");
    let e = idevice::core_device_proxy::CoreDeviceProxy::connect(&provider(&standin, "a-17").await).await.unwrap_err();
    assert!(matches!(&e, IdeviceError::UnknownErrorType(s) if s == "InvalidService"), "{e:?}");
}

#[tokio::test]
async fn the_real_captures_replay_through_the_idevice_crate() {
    let standin = StandIn::start(&[(REPLAY_UDID, "replay = true")]);
    // ListDevices answered with appium's capture: the crate finds its one iPhone.
    let devices = standin.addr().connect(1).await.unwrap().get_devices().await.unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].udid, REPLAY_UDID);
    assert_eq!(devices[0].connection_type, idevice::usbmuxd::Connection::Usb);
    // Connect answered with the capture's `Result 0`, then lockdown's QueryType with its capture.
    let p = devices[0].to_provider(standin.addr(), "lab-test");
    let mut ld = LockdownClient::connect(&p).await.unwrap();
    assert_eq!(ld.idevice.get_type().await.unwrap(), "com.apple.mobile.lockdown");
}

// ---- d) DVT process control ----

fn running(standin: &StandIn, udid: &str) -> Vec<serde_json::Value> {
    let path = standin.root().join(format!("phones/{udid}.processes.json"));
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    state["running"].as_array().unwrap().clone()
}

#[tokio::test]
async fn the_idevice_crate_launches_an_installed_app_over_dvt_and_kills_it() {
    use idevice::dvt::process_control::ProcessControlClient;
    use idevice::dvt::remote_server::RemoteServerClient;
    let standin = StandIn::start(&[(
        UDID,
        "[[apps]]\nCFBundleIdentifier = \"io.example.control\"\nCFBundleVersion = \"42\"\nCFBundleShortVersionString = \"1.0\"",
    )]);
    let p = provider(&standin, UDID).await;
    let mut rs = RemoteServerClient::connect(&p).await.unwrap();
    let mut pc = ProcessControlClient::new(&mut rs).await.unwrap();
    let env: plist::Dictionary = [("ZETA", "1"), ("ALPHA", "two words")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), plist::Value::from(v)))
        .collect();
    let args: plist::Dictionary =
        ["--soak", "-v", "x y"].iter().enumerate().map(|(i, a)| (i.to_string(), plist::Value::from(*a))).collect();
    let pid = pc.launch_app("io.example.control", Some(env), Some(args), false, true).await.unwrap();
    let launches = standin.journalled("dvt", "launch");
    assert_eq!(launches.len(), 1, "{launches:?}");
    assert_eq!(launches[0]["bundle_id"], "io.example.control");
    assert_eq!(launches[0]["pid"], pid);
    assert_eq!(launches[0]["args"], serde_json::json!(["--soak", "-v", "x y"]));
    assert_eq!(launches[0]["env"], serde_json::json!({"ZETA": "1", "ALPHA": "two words"}));
    assert_eq!(launches[0]["options"], serde_json::json!({"StartSuspendedKey": false, "KillExisting": true}));
    let channels = standin.journalled("dvt", "channel");
    assert_eq!(channels[0]["identifier"], "com.apple.instruments.server.services.processcontrol");
    assert_eq!(running(&standin, UDID).iter().map(|p| p["pid"].clone()).collect::<Vec<_>>(), [pid]);
    pc.disable_memory_limit(pid).await.unwrap();

    // KillExisting: launching again replaces the running copy.
    let again = pc.launch_app("io.example.control", None, None, false, true).await.unwrap();
    assert_ne!(again, pid);
    assert_eq!(standin.journalled("dvt", "launch")[1]["killed"], serde_json::json!([pid]));
    assert_eq!(running(&standin, UDID).len(), 1);

    // killPid: asks for no reply; the next call's round trip shows it was acted on.
    pc.kill_app(again).await.unwrap();
    let e = pc.disable_memory_limit(again).await.unwrap_err();
    assert!(matches!(e, IdeviceError::Dvt(_)), "{e:?}");
    assert_eq!(
        standin.journalled("dvt", "kill"),
        [serde_json::json!({"udid": UDID, "service": "dvt",
        "request": "kill", "pid": again, "running": true})]
    );
    assert!(running(&standin, UDID).is_empty());

    // A bundle the phone does not have: the process-control NSError, which the crate
    // reports as a reply without a pid; nothing starts.
    let e = pc.launch_app("io.example.missing", None, None, false, true).await.unwrap_err();
    assert!(matches!(&e, IdeviceError::UnexpectedResponse(m) if m.contains("PID")), "{e:?}");
    let failed = standin.journalled("dvt", "launch").pop().unwrap();
    assert_eq!(failed["error"], "Request to launch io.example.missing failed.", "{failed}");
    assert!(running(&standin, UDID).is_empty());
}

#[tokio::test]
async fn the_remote_server_needs_developer_mode_and_the_developer_image() {
    use idevice::dvt::remote_server::RemoteServerClient;
    let standin = StandIn::start(&[
        ("f-no-devmode", "developer_mode = false"),
        ("g-no-image", "developer_image_mounted = false"),
    ]);
    for udid in ["f-no-devmode", "g-no-image"] {
        let e = RemoteServerClient::connect(&provider(&standin, udid).await).await.unwrap_err();
        assert!(matches!(&e, IdeviceError::UnknownErrorType(s) if s == "InvalidService"), "{udid}: {e:?}");
    }
    assert!(standin.journalled("dvt", "launch").is_empty());
}

// ---- e) crash reports and the operator's sysdiagnose ----

#[tokio::test]
async fn a_sysdiagnose_is_flushed_listed_pulled_and_removed_through_crash_report_copy() {
    use idevice::crashreportcopymobile::{CrashReportCopyMobileClient, flush_reports};
    let standin = StandIn::start(&[(UDID, "")]);
    let (from, to, charging) = (1_772_359_200.0, 1_772_362_800.0, 120.0);
    let made = Command::new(common::standin("iphone"))
        .args(["sysdiagnose", "--root"])
        .arg(standin.root())
        .args(["--udid", UDID, "--from", &from.to_string(), "--to", &to.to_string(), "--charging-s", "120"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let written = Path::new(String::from_utf8(made.stdout).unwrap().trim()).to_path_buf();
    let name = written.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(name, "sysdiagnose_2026.03.01_11-00-00+0000_iPhone-OS_iPhone_20H115.tar.gz");

    let p = provider(&standin, UDID).await;
    flush_reports(&p).await.unwrap();
    assert_eq!(standin.journalled("com.apple.crashreportmover", "flush").len(), 1);
    let mut crc = CrashReportCopyMobileClient::connect(&p).await.unwrap();
    assert_eq!(crc.ls(None).await.unwrap(), ["DiagnosticLogs"]);
    assert_eq!(crc.ls(Some("DiagnosticLogs/sysdiagnose")).await.unwrap(), std::slice::from_ref(&name));
    let bytes = crc.pull(format!("DiagnosticLogs/sysdiagnose/{name}")).await.unwrap();
    assert_eq!(bytes, std::fs::read(&written).unwrap());

    // What lab reads out of it: one powerlog whose soak is the window asked for.
    let logs = lab::collect::ios::sysdiagnose::powerlogs(bytes.as_slice()).unwrap();
    assert_eq!(logs.len(), 1, "{:?}", logs.iter().map(|l| &l.path).collect::<Vec<_>>());
    let log = lab::collect::ios::powerlog::parse(&logs[0].bytes).unwrap();
    assert_eq!(log.time_offsets, 1);
    let soak = log.soak(from, to);
    assert!((soak.charging_s - charging).abs() < 1e-6, "{}", soak.charging_s);
    assert_eq!(soak.unplugged.map(|(a, _)| a), Some(from), "unplugged from the window's start");
    assert_eq!(log.soak(from - 300.0, from).charging_s, 300.0, "plugged in before it");
    assert_eq!(log.soak(to, to + 300.0).charging_s, 300.0, "and after it");
    assert!(soak.level_end_pct < soak.level_start_pct, "{soak:?}");
    assert!(soak.charge_used_mah.is_some_and(|c| c > 0.0), "{soak:?}");
    assert_eq!((soak.bluetooth_on, soak.brightness.as_slice()), (Some(false), &[0.5][..]));

    crc.remove(format!("DiagnosticLogs/sysdiagnose/{name}")).await.unwrap();
    assert!(!written.exists());
    assert!(crc.ls(Some("DiagnosticLogs/sysdiagnose")).await.unwrap().iter().all(|n| n.starts_with('.')));
}

// ---- e) tethered samples: the energy gauge, sysmontap, pcapd ----

/// Builds an .ipa of `bundle_id` with these `iphone ipa` options and installs it.
async fn install_app(standin: &StandIn, p: &idevice::provider::UsbmuxdProvider, bundle_id: &str, options: &[&str]) {
    let ipa = standin.dir.path().join(format!("{bundle_id}.ipa"));
    let made = Command::new(common::standin("iphone"))
        .args(["ipa", "--bundle-id", bundle_id, "--version", "1", "--out"])
        .arg(&ipa)
        .args(options)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    idevice::utils::installation::install_package(p, &ipa, None).await.unwrap();
}

#[tokio::test]
async fn the_energy_gauge_reports_the_launched_apps_profile_split_into_parts() {
    use idevice::dvt::energy_monitor::{EnergyMonitorClient, EnergySample};
    use idevice::dvt::remote_server::RemoteServerClient;
    let standin = StandIn::start(&[(UDID, "")]);
    let p = provider(&standin, UDID).await;
    install_app(&standin, &p, "com.example.energy", &["--energy-cost", "12"]).await;
    let mut rs = RemoteServerClient::connect(&p).await.unwrap();
    let pid = launch(&mut rs, "com.example.energy", &[]).await;
    let mut energy = EnergyMonitorClient::new(&mut rs).await.unwrap();
    energy.start_sampling(&[pid as u32]).await.unwrap();
    let not_running = pid as u32 + 100;
    for _ in 0..3 {
        let samples =
            EnergySample::from_bytes(&energy.sample_attributes(&[pid as u32, not_running]).await.unwrap()).unwrap();
        assert_eq!(samples.iter().map(|s| s.pid).collect::<Vec<_>>(), [pid as u32], "{samples:?}");
        let s = samples[0];
        assert!((s.total_energy - 12.0).abs() <= 12.0 * 0.05, "{s:?}");
        let parts = s.cpu_energy
            + s.gpu_energy
            + s.networking_energy
            + s.display_energy
            + s.location_energy
            + s.appstate_energy;
        assert!((parts - s.total_energy).abs() < 1e-9, "{s:?}");
        assert!(s.cpu_energy > 0.0 && s.display_energy > 0.0, "{s:?}");
    }
    energy.stop_sampling(&[pid as u32]).await.unwrap();
    // stop asks for no reply: a further sample's round trip shows it arrived.
    energy.sample_attributes(&[pid as u32]).await.unwrap();

    let channels: Vec<_> = standin.journalled("dvt", "channel").iter().map(|c| c["identifier"].clone()).collect();
    assert!(channels.contains(&"com.apple.xcode.debug-gauge-data-providers.Energy".into()), "{channels:?}");
    assert_eq!(standin.journalled("dvt", "start_sampling")[0]["pids"], serde_json::json!([pid]));
    assert_eq!(standin.journalled("dvt", "stop_sampling")[0]["pids"], serde_json::json!([pid]));
    let sampled = standin.journalled("dvt", "sample_attributes");
    assert_eq!(sampled.len(), 4);
    assert_eq!(
        (sampled[0]["pids"].clone(), sampled[0]["present"].clone()),
        (serde_json::json!([pid, not_running]), serde_json::json!([pid]))
    );
}

#[tokio::test]
async fn sysmontap_samples_the_apps_cpu_and_footprint_among_the_system_daemons() {
    use idevice::dvt::remote_server::RemoteServerClient;
    use idevice::dvt::sysmontap::{SysmontapClient, SysmontapConfig};
    let standin = StandIn::start(&[(UDID, "")]);
    let p = provider(&standin, UDID).await;
    install_app(&standin, &p, "com.example.busy", &["--cpu-pct", "35", "--footprint-mb", "120"]).await;
    let mut rs = RemoteServerClient::connect(&p).await.unwrap();
    let pid = launch(&mut rs, "com.example.busy", &[]).await;
    let mut tap = SysmontapClient::new(&mut rs).await.unwrap();
    let attrs = ["pid", "name", "cpuUsage", "physFootprint", "memResidentSize", "ppid"];
    let config = SysmontapConfig {
        interval_ms: 100,
        process_attributes: attrs.iter().map(|a| a.to_string()).collect(),
        system_attributes: vec!["vmFreeCount".into()],
    };
    tap.set_config(&config).await.unwrap();
    tap.start().await.unwrap();
    let column = |name: &str| attrs.iter().position(|a| *a == name).unwrap();
    let row = |s: &idevice::dvt::sysmontap::SysmontapSample, pid: u64| {
        s.processes.as_ref().unwrap().get(&pid.to_string()).and_then(|v| v.as_array()).cloned()
    };
    // The first sample's cpuUsage is meaningless on a real phone (0 here): skipped.
    let first = tap.next_sample().await.unwrap();
    assert_eq!(row(&first, pid).unwrap()[column("cpuUsage")].as_real(), Some(0.0));
    let mib = 1048576.0;
    for _ in 0..3 {
        let s = tap.next_sample().await.unwrap();
        let app = row(&s, pid).expect("the app's pid is sampled");
        assert_eq!(app[column("pid")].as_unsigned_integer(), Some(pid));
        assert_eq!(app[column("name")].as_string(), Some("App"));
        let cpu = app[column("cpuUsage")].as_real().unwrap();
        assert!((cpu - 35.0).abs() <= 35.0 * 0.05, "{app:?}");
        let footprint = app[column("physFootprint")].as_unsigned_integer().unwrap() as f64;
        assert!((footprint - 120.0 * mib).abs() <= 120.0 * mib * 0.05, "{app:?}");
        assert!(app[column("memResidentSize")].as_unsigned_integer().unwrap() as f64 >= footprint);
        assert_eq!(app[column("ppid")].as_unsigned_integer(), Some(0), "not modelled");
        let names: Vec<String> = s
            .processes
            .as_ref()
            .unwrap()
            .values()
            .filter_map(|v| v.as_array()?.get(column("name"))?.as_string().map(str::to_string))
            .collect();
        assert!(names.contains(&"SpringBoard".into()) && names.contains(&"backboardd".into()), "{names:?}");
        assert_eq!(s.system.as_ref().unwrap().len(), 1);
        let total = s.system_cpu_usage.as_ref().unwrap()["CPU_TotalLoad"].as_real().unwrap();
        assert!(total > cpu, "the app's share and the daemons': {total}");
    }
    tap.stop().await.unwrap();
    let config_line = standin.journalled("dvt", "sysmontap_config").pop().unwrap();
    assert_eq!(
        (config_line["interval_ms"].clone(), config_line["procAttrs"].clone()),
        (serde_json::json!(100), serde_json::json!(attrs))
    );
    assert_eq!(standin.journalled("dvt", "sysmontap_start").len(), 1);
    // stop asks for no reply: wait for the journal to show it.
    for _ in 0..50 {
        if !standin.journalled("dvt", "sysmontap_stop").is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no sysmontap_stop in the journal");
}

#[tokio::test]
async fn pcapd_shows_the_launched_apps_real_http_requests_under_its_pid() {
    use idevice::dvt::remote_server::RemoteServerClient;
    use idevice::pcapd::PcapdClient;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    // The phone resolves the lab's name to this machine, as a phone on the lab's Wi-Fi would.
    let standin = StandIn::start(&[(UDID, "hosts = { \"lab-machine.invalid\" = \"127.0.0.1\" }")]);
    let p = provider(&standin, UDID).await;
    install_app(&standin, &p, "com.example.net", &[]).await;
    let (port, received) = http_server();
    let mut pcap = PcapdClient::connect(&p).await.unwrap();
    let mut rs = RemoteServerClient::connect(&p).await.unwrap();
    let pid = launch(&mut rs, "com.example.net", &pinging(port)).await;

    assert_the_workloads_requests_were_captured(&standin, &mut pcap, pid, port, &received, "App").await;
    assert_eq!(standin.journalled("pcapd", "connect").len(), 1);
    assert_eq!(standin.journalled("workload", "start")[0]["interval_ms"], 100);

    // A server that refuses: no traffic, the failure journalled once, the count 0.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = [
        ("LAB_ENDPOINT_URL", format!("http://127.0.0.1:{closed}/")),
        ("LAB_REQUEST_INTERVAL_MS", "50".to_string()),
        ("LAB_DURATION_MS", "300".to_string()),
    ];
    let refused = launch(&mut rs, "com.example.net", &env).await;
    for _ in 0..100 {
        if standin.journalled("workload", "end").len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = standin.journalled("workload", "end").pop().unwrap();
    assert_eq!((end["pid"].clone(), end["requests"].clone()), (serde_json::json!(refused), serde_json::json!(0)));
    assert!(end["failures"].as_u64().unwrap() > 1, "{end}");
    let errors = standin.journalled("workload", "error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(tokio::time::timeout(Duration::from_millis(300), pcap.next_packet()).await.is_err(), "no packets");

    // Without a duration the workload runs until its pid is killed.
    let env =
        [("LAB_ENDPOINT_URL", format!("http://127.0.0.1:{port}/")), ("LAB_REQUEST_INTERVAL_MS", "50".to_string())];
    let before = received.load(Ordering::SeqCst);
    let endless = launch(&mut rs, "com.example.net", &env).await;
    while received.load(Ordering::SeqCst) < before + 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut pc = idevice::dvt::process_control::ProcessControlClient::new(&mut rs).await.unwrap();
    pc.kill_app(endless).await.unwrap();
    for _ in 0..100 {
        if standin.journalled("workload", "end").len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let end = standin.journalled("workload", "end").pop().unwrap();
    assert_eq!((end["pid"].clone(), end["reason"].clone()), (serde_json::json!(endless), "killed".into()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(end["requests"], received.load(Ordering::SeqCst) - before, "nothing sent after the kill");
}
