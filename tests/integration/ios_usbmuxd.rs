//! An iPhone in the lab file, through Debian's real usbmuxd and the real idevice crate:
//! with no phone on this machine's (absent) USB, the phone is "not connected", and
//! `lab run` stops with exit 3 before anything is recorded.

use crate::common;

use common::TempLab;
use common::usbmuxd::usbmuxd;

const UDID: &str = "00008030-001A2B3C4D5E6F70";

fn lab() -> TempLab {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"ios\"\nendpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = \"http://lab-machine.invalid:{port}\"\n\n\
         [[host]]\nname = \"local\"\n\n\
         [[device]]\nname = \"iphone-1\"\nhost = \"local\"\nplatform = \"ios\"\nmodel = \"iPhone 12\"\n\
         [device.ios]\nudid = \"{UDID}\"\n"
    ));
    std::fs::write(lab.dir.path().join("App.ipa"), b"not opened before the phone answers").unwrap();
    std::fs::write(
        lab.dir.path().join("ios.toml"),
        "name = \"ios\"\nduration = \"1m\"\nrepeats = 1\ndevices = [\"iphone-1\"]\n\n\
         [builds.control]\nbaseline = true\n[builds.control.ios]\nipa = \"App.ipa\"\nbundle_id = \"io.example.control\"\n\n\
         [configs.default]\n",
    )
    .unwrap();
    lab
}

#[test_needs::needs(usbmuxd)]
#[test]
fn a_configured_iphone_that_usbmuxd_does_not_list_stops_the_run_before_any_trial() {
    let _daemon = usbmuxd();
    let lab = lab();
    let rb = lab.dir.path().join("ios.toml");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let line = stderr.lines().find(|l| l.contains(UDID)).unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("iphone-1"), "{line}");
    assert!(
        line.contains("device iphone-1 is not connected: usbmuxd at /var/run/usbmuxd on host local lists"),
        "{line}"
    );
    assert!(line.contains("fix: plug it in"), "{line}");
    // Nothing was recorded: no campaign in the store.
    assert!(lab.campaigns().is_empty(), "{:?}", lab.campaigns());
}

/// Debian's usbmuxd keeps pair records in /var/lib/lockdown: the crate reads one the test
/// made (with the stand-in's `pair`, in usbmuxd's own format), and a phone without one gets
/// usbmuxd's `Result 2` — the answer the backend reports as "not paired".
#[test_needs::needs(usbmuxd)]
#[tokio::test]
async fn the_real_daemon_hands_out_pair_records_and_refuses_unknown_phones() {
    let _daemon = usbmuxd();
    let made = tempfile::tempdir().unwrap();
    let udid = "00008030-00FEEDFACE00";
    let paired = std::process::Command::new(common::standin("iphone"))
        .args(["pair", "--root"])
        .arg(made.path())
        .args(["--udid", udid])
        .output()
        .unwrap();
    assert!(paired.status.success(), "{}", String::from_utf8_lossy(&paired.stderr));
    let record = std::fs::read(made.path().join(format!("pair/{udid}.plist"))).unwrap();
    let dir = std::path::Path::new("/var/lib/lockdown");
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{udid}.plist"));
    std::fs::write(&path, &record).unwrap();
    let addr = idevice::usbmuxd::UsbmuxdAddr::UnixSocket(common::usbmuxd::SOCKET.into());
    let got = addr.connect(1).await.unwrap().get_pair_record(udid).await;
    let _ = std::fs::remove_file(&path);
    let want: plist::Dictionary = plist::from_bytes(&record).unwrap();
    assert_eq!(Some(got.unwrap().host_id.as_str()), want.get("HostID").and_then(plist::Value::as_string));
    let missing = addr.connect(2).await.unwrap().get_pair_record("00008030-00000000DEAD").await;
    assert!(matches!(missing, Err(idevice::IdeviceError::UnexpectedResponse(_))), "{missing:?}");
}
