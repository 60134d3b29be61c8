//! An iPhone in the lab file, through Debian's real usbmuxd and the real idevice crate:
//! with no phone on this machine's (absent) USB, the phone is "not connected", and
//! `lab run` stops with exit 3 before anything is recorded.

mod common;

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

#[test]
fn a_configured_iphone_that_usbmuxd_does_not_list_stops_the_run_before_any_trial() {
    let Some(_daemon) = usbmuxd() else { return };
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
