//! The stand-in's iOS 17 path (standins/iphone: tunnel.rs, tcp.rs, http2.rs, xpc.rs, rsd.rs,
//! coredevice.rs, diagnostics.rs) against the real `idevice` crate, through the same steps
//! as the lab's src/device/ios/tunnel.rs: lockdown's CoreDeviceProxy, the crate's userspace
//! TCP inside the CDTunnel, the RSD handshake, then the app service and the diagnostics
//! service on their RSD ports; Instruments' dtservicehub (DVT: process control, the energy
//! gauge, sysmontap) and the pcapd shim for tethered samples.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::iphone::{
    RemoteServer, StandIn, UDID, assert_the_workloads_requests_were_captured, http_server, launch, phone17_toml,
    pinging,
};
use futures_util::StreamExt;
use idevice::core_device::{AppServiceClient, DiagnostisServiceClient};
use idevice::core_device_proxy::CoreDeviceProxy;
use idevice::rsd::RsdHandshake;
use idevice::tcp::handle::AdapterHandle;
use idevice::{IdeviceError, IdeviceService, ReadWrite, RsdService};

const APP: &str = "com.apple.coredevice.appservice";
const DIAG: &str = "com.apple.coredevice.diagnosticsservice";
const HUB: &str = "com.apple.instruments.dtservicehub";
const PCAPD: &str = "com.apple.pcapd.shim.remote";
const BUNDLE: &str = "io.example.envoy";
/// The app's profile (what sysmontap and the energy gauge report for it).
const CPU_PCT: f64 = 35.0;
const ENERGY_COST: f64 = 12.0;

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

fn standin(extra: &str) -> StandIn {
    let apps = format!(
        "[[apps]]\nCFBundleIdentifier = \"{BUNDLE}\"\nCFBundleVersion = \"7\"\n\
         LabStandIn = {{ CPUPercent = {CPU_PCT:?}, FootprintMB = 40.0, EnergyCost = {ENERGY_COST:?} }}\n"
    );
    StandIn::start_files(&[(UDID, phone17_toml(extra) + &apps)])
}

/// The tunnel, RSD's answer, and the handle that keeps the tunnel up.
async fn tunnel(s: &StandIn) -> (idevice::tunnel::TunnelInfo, RsdHandshake, AdapterHandle) {
    let proxy = CoreDeviceProxy::connect(&s.provider(UDID).await).await.unwrap();
    let info = proxy.tunnel_info().clone();
    let mut handle = proxy.create_software_tunnel().unwrap().to_async_handle();
    let rsd = handle.connect(info.server_rsd_port).await.unwrap();
    let hs = RsdHandshake::new(rsd).await.unwrap();
    (info, hs, handle)
}

async fn service(handle: &mut AdapterHandle, hs: &RsdHandshake, name: &str) -> Box<dyn ReadWrite> {
    Box::new(handle.connect(hs.services[name].port).await.unwrap())
}

/// The names of the services RSD listed, sorted.
fn listed(hs: &RsdHandshake) -> Vec<&str> {
    let mut names: Vec<&str> = hs.services.keys().map(String::as_str).collect();
    names.sort();
    names
}

/// No packet of the crate's was dropped (its checksums held, its addresses were the tunnel's).
fn no_drops(s: &StandIn) {
    assert_eq!(s.journalled("tunnel", "drop"), Vec::<serde_json::Value>::new());
}

#[tokio::test]
async fn the_tunnel_opens_and_rsd_lists_the_core_device_instruments_and_pcapd_services() {
    let s = standin("");
    let (info, hs, mut handle) = tunnel(&s).await;
    assert_eq!((info.server_rsd_port, info.mtu, info.netmask.as_str()), (56307, 16000, "ffff:ffff:ffff:ffff::"));
    let (host, phone): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
        (info.client_address.parse().unwrap(), info.server_address.parse().unwrap());
    assert_eq!((host.segments()[7], phone.segments()[7], host.segments()[0] >> 8), (2, 1, 0xfd));
    assert_eq!(host.segments()[..4], phone.segments()[..4], "one /64");

    assert_eq!(hs.properties["UniqueDeviceID"].as_string(), Some(UDID));
    assert_eq!(hs.properties["OSVersion"].as_string(), Some("17.5.1"));
    assert_eq!(hs.properties["BuildVersion"].as_string(), Some("21F90"));
    assert!(hs.protocol_version > 0 && !hs.uuid.is_empty());
    assert_eq!(listed(&hs), [APP, DIAG, HUB, PCAPD]);
    let (app, diag) = (&hs.services[APP], &hs.services[DIAG]);
    assert_eq!((app.port, diag.port), (50056, 50063));
    assert!(app.uses_remote_xpc && diag.uses_remote_xpc);
    let features = app.features.clone().unwrap();
    for f in ["launchapplication", "sendsignaltoprocess"] {
        assert!(features.contains(&format!("com.apple.coredevice.feature.{f}")), "{features:?}");
    }
    assert_eq!(diag.features.clone().unwrap(), ["com.apple.coredevice.feature.capturesysdiagnose"]);
    // DTX on the stream, not RemoteXPC; the lockdown shim's RSDCheckin first.
    let hub = &hs.services[HUB];
    assert_eq!(
        (hub.port, hub.entitlement.as_str(), hub.uses_remote_xpc),
        (49664, "com.apple.private.dt.instruments.dtservicehub.client", false)
    );
    assert_eq!(hub.features.clone().unwrap(), ["com.apple.dt.profile"]);
    let shim = &hs.services[PCAPD];
    assert_eq!(
        (shim.port, shim.entitlement.as_str(), shim.uses_remote_xpc, shim.features.clone()),
        (49614, "com.apple.mobile.lockdown.remote.trusted", false, None)
    );

    // A port with nothing behind it answers the SYN with a reset.
    let e = handle.connect(4242).await.unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e:?}");

    let handshakes = s.journalled("coredeviceproxy", "handshake");
    assert_eq!(
        (handshakes[0]["type"].as_str(), handshakes[0]["mtu"].as_u64()),
        (Some("clientHandshakeRequest"), Some(16000))
    );
    let rsd = s.journalled("rsd", "Handshake");
    assert_eq!(rsd[0]["MessagingProtocolVersion"], 7, "the crate's version of the protocol, as it sent it");
    let ports: Vec<u64> = s.journalled("tunnel", "connect").iter().map(|j| j["port"].as_u64().unwrap()).collect();
    assert_eq!(ports, [56307]);
    no_drops(&s);
}

#[tokio::test]
async fn the_app_service_launches_with_env_and_args_in_order_and_sigterm_stops_it() {
    let s = standin("");
    let (_, hs, mut handle) = tunnel(&s).await;
    let mut app = AppServiceClient::from_stream(service(&mut handle, &hs, APP).await).await.unwrap();
    let env: plist::Dictionary = [("LAB_TRIAL", "3"), ("ZED", "last-sorted-first-sent"), ("ALPHA", "1")]
        .map(|(k, v)| (k.to_string(), plist::Value::from(v)))
        .into_iter()
        .collect();
    let args = ["-EnvoyTrace", "YES", "--", "b a"];
    let first = app.launch_application(BUNDLE, &args, true, false, Some(env.clone()), None, None).await.unwrap();
    let second = app.launch_application(BUNDLE, &args, true, false, Some(env), None, None).await.unwrap();
    assert!(second.pid > first.pid, "{first:?} {second:?}");
    assert!(second.executable_url.relative.ends_with("envoy.app/envoy"), "{second:?}");

    let launches = s.journalled("appservice", "launch");
    assert_eq!(launches.len(), 2, "{launches:?}");
    let l = &launches[1];
    assert_eq!(l["bundle_id"], BUNDLE);
    assert_eq!(l["args"], serde_json::json!(args));
    assert_eq!(l["env"]["ZED"], "last-sorted-first-sent");
    assert_eq!(l["env_order"], serde_json::json!(["LAB_TRIAL", "ZED", "ALPHA"]), "as sent");
    assert_eq!(l["options"], serde_json::json!({"terminateExisting": true, "startStopped": false}));
    assert_eq!((l["pid"].as_u64(), &l["killed"]), (Some(u64::from(second.pid)), &serde_json::json!([first.pid])));

    let stopped = app.send_signal(second.pid, 15).await.unwrap();
    assert_eq!((stopped.process.pid, stopped.signal), (second.pid, 15));
    let ts = SystemTime::from(stopped.device_timestamp);
    assert!(ts.duration_since(UNIX_EPOCH).unwrap().as_secs_f64() > now_s() - 60.0, "a date of now: {ts:?}");
    let signals = s.journalled("appservice", "signal");
    assert_eq!((signals[0]["pid"].as_u64(), signals[0]["ended"].as_bool()), (Some(u64::from(second.pid)), Some(true)));
    let running = std::fs::read_to_string(s.root().join(format!("phones/{UDID}.processes.json"))).unwrap();
    let running: serde_json::Value = serde_json::from_str(&running).unwrap();
    assert_eq!(running["running"], serde_json::json!([]));

    // Gone already, and a bundle the phone does not have: CoreDevice errors.
    let e = app.send_signal(second.pid, 15).await.unwrap_err();
    assert!(format!("{e:?}").contains("No such process"), "{e:?}");
    let e = app.launch_application("io.example.missing", &[], true, false, None, None, None).await.unwrap_err();
    assert!(matches!(&e, IdeviceError::CoreDevice(_)), "{e:?}");
    assert!(format!("{e:?}").contains("not installed"), "{e:?}");
    assert_eq!(s.journalled("appservice", "launch")[2]["bundle_id"], "io.example.missing");
    no_drops(&s);
}

#[tokio::test]
async fn capture_sysdiagnose_streams_the_staged_archive_byte_for_byte_and_removes_it() {
    let s = standin("");
    let staged = s.sysdiagnose(UDID, now_s() - 600.0, now_s(), None);
    assert!(staged.starts_with(s.root().join("sysdiagnose").join(UDID)), "{}", staged.display());
    assert!(
        !s.root().join(format!("crashes/{UDID}/DiagnosticLogs/sysdiagnose")).exists(),
        "not in crash reports on 17"
    );
    // Beside it an older, larger one (past both the TCP and the HTTP/2 windows) and then the newest.
    let dir = staged.parent().unwrap().to_path_buf();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let big_name = "sysdiagnose_2099.01.01_00-00-00+0000_iPhone-OS_iPhone_21F90.tar.gz";
    std::fs::write(dir.join(big_name), &big).unwrap();

    for (name, want) in [
        (big_name.to_string(), big.clone()),
        (staged.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&staged).unwrap()),
    ] {
        let (_, hs, mut handle) = tunnel(&s).await;
        let mut diag = DiagnostisServiceClient::from_stream(service(&mut handle, &hs, DIAG).await).await.unwrap();
        let mut res = diag.capture_sysdiagnose(false).await.unwrap();
        assert_eq!((res.preferred_filename.as_str(), res.expected_length), (name.as_str(), want.len()));
        let mut got = Vec::new();
        while let Some(chunk) = res.stream.next().await {
            got.extend(chunk.unwrap());
        }
        assert!(
            got == want,
            "{} of {} bytes, first difference at {:?}",
            got.len(),
            want.len(),
            got.iter().zip(&want).position(|(a, b)| a != b)
        );
        drop(res);
        // Removed from the phone once streamed.
        let path = dir.join(&name);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while path.exists() && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!path.exists(), "{} still staged", path.display());
    }
    let captures = s.journalled("diagnosticsservice", "capture");
    assert_eq!(captures.len(), 2, "{captures:?}");
    use sha2::Digest;
    assert_eq!(captures[0]["sha256"].as_str().unwrap(), hex::encode(sha2::Sha256::digest(&big)));
    assert_eq!((captures[1]["streamed"].as_bool(), captures[1]["collectFullLogs"].as_bool()), (Some(true), Some(true)));

    // None left: the capture fails with the device's error.
    let (_, hs, mut handle) = tunnel(&s).await;
    let mut diag = DiagnostisServiceClient::from_stream(service(&mut handle, &hs, DIAG).await).await.unwrap();
    let e = diag.capture_sysdiagnose(false).await.map(|r| r.expected_length).unwrap_err();
    assert!(format!("{e:?}").contains("none is staged"), "{e:?}");
    no_drops(&s);
}

#[tokio::test]
async fn dtservicehub_launches_the_app_and_samples_its_energy_and_cpu_over_dtx() {
    use idevice::dvt::energy_monitor::{EnergyMonitorClient, EnergySample};
    use idevice::dvt::sysmontap::{SysmontapClient, SysmontapConfig};
    let s = standin("");
    let (_, hs, mut handle) = tunnel(&s).await;
    let mut rs = <RemoteServer as RsdService>::from_stream(service(&mut handle, &hs, HUB).await).await.unwrap();
    let pid = launch(&mut rs, BUNDLE, &[]).await;
    let launched = s.journalled("dvt", "launch");
    assert_eq!((launched[0]["bundle_id"].as_str(), launched[0]["pid"].as_u64()), (Some(BUNDLE), Some(pid)));

    let mut energy = EnergyMonitorClient::new(&mut rs).await.unwrap();
    energy.start_sampling(&[pid as u32]).await.unwrap();
    let samples = EnergySample::from_bytes(&energy.sample_attributes(&[pid as u32]).await.unwrap()).unwrap();
    assert_eq!(samples.iter().map(|e| e.pid).collect::<Vec<_>>(), [pid as u32], "{samples:?}");
    assert!((samples[0].total_energy - ENERGY_COST).abs() <= ENERGY_COST * 0.05, "{samples:?}");

    let mut tap = SysmontapClient::new(&mut rs).await.unwrap();
    let config = SysmontapConfig {
        interval_ms: 100,
        process_attributes: vec!["pid".into(), "cpuUsage".into()],
        system_attributes: Vec::new(),
    };
    tap.set_config(&config).await.unwrap();
    tap.start().await.unwrap();
    tap.next_sample().await.unwrap(); // the first sample's cpuUsage means nothing
    let sample = tap.next_sample().await.unwrap();
    let row = sample.processes.as_ref().unwrap()[&pid.to_string()].as_array().unwrap().clone();
    assert_eq!(row[0].as_unsigned_integer(), Some(pid));
    let cpu = row[1].as_real().unwrap();
    assert!((cpu - CPU_PCT).abs() <= CPU_PCT * 0.05, "{row:?}");
    tap.stop().await.unwrap();

    let ports: Vec<u64> = s.journalled("tunnel", "connect").iter().map(|j| j["port"].as_u64().unwrap()).collect();
    assert_eq!(ports, [56307, 49664]);
    assert_eq!(s.journalled("dvt", "sysmontap_start").len(), 1);
    no_drops(&s);
}

#[tokio::test]
async fn the_pcapd_shim_checks_in_and_taps_the_launched_apps_http_requests_under_its_pid() {
    use idevice::pcapd::PcapdClient;
    let s = standin("hosts = { \"lab-machine.invalid\" = \"127.0.0.1\" }");
    let (_, hs, mut handle) = tunnel(&s).await;
    let (port, received) = http_server();
    let mut pcap = <PcapdClient as RsdService>::from_stream(service(&mut handle, &hs, PCAPD).await).await.unwrap();
    let checkins = s.journalled("rsd", "RSDCheckin");
    assert_eq!(checkins.len(), 1, "{checkins:?}");
    assert_eq!((checkins[0]["shim"].as_str(), checkins[0]["ProtocolVersion"].as_str()), (Some(PCAPD), Some("2")));

    // Launched the lab's iOS 17 way, through the app service.
    let mut app = AppServiceClient::from_stream(service(&mut handle, &hs, APP).await).await.unwrap();
    let env: plist::Dictionary =
        pinging(port).iter().map(|(k, v)| (k.to_string(), plist::Value::from(v.as_str()))).collect();
    let launched = app.launch_application(BUNDLE, &[], true, false, Some(env), None, None).await.unwrap();
    assert_the_workloads_requests_were_captured(&s, &mut pcap, u64::from(launched.pid), port, &received, "envoy").await;
    assert_eq!(s.journalled("pcapd", "connect").len(), 1);
    no_drops(&s);
}

#[tokio::test]
async fn without_the_image_the_tunnel_opens_but_rsd_lists_only_the_lockdown_shim() {
    let s = standin("developer_image_mounted = false");
    let (_, hs, mut handle) = tunnel(&s).await;
    assert_eq!(listed(&hs), [PCAPD], "no dtservicehub nor CoreDevice service without the image");
    // Their ports have no listener: a reset, as for any port with none.
    for port in [49664, 50056] {
        let e = handle.connect(port).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{port}: {e:?}");
    }
    <idevice::pcapd::PcapdClient as RsdService>::from_stream(service(&mut handle, &hs, PCAPD).await).await.unwrap();
    no_drops(&s);
}

#[tokio::test]
async fn a_phone_with_developer_mode_off_refuses_the_proxy() {
    for extra in ["developer_mode = false", "fault = \"no_tunnel\""] {
        let s = standin(extra);
        let e = CoreDeviceProxy::connect(&s.provider(UDID).await).await.unwrap_err();
        assert!(matches!(&e, IdeviceError::UnknownErrorType(x) if x == "InvalidService"), "{extra}: {e:?}");
        assert!(s.journalled("coredeviceproxy", "handshake").is_empty());
    }
}
