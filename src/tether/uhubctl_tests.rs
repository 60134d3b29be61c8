//! The uhubctl tether on a scripted host: the order of its commands, and each way the
//! phone fails to leave the bus or to come back, on a simulated phone's virtual clock.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::device::sim::SimDevice;
use crate::testing::{Reply, ScriptedTransport, uhubctl_port_listing, uhubctl_switch_output};

const PHONE: &str = "0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 0A1B2C3D]";
const OFF: &str = "0000 off";
const EMPTY: &str = "0100 power";

/// A simulated phone with USB serial `serial` (none: `None`) on hub 1-1 port 2.
fn phone(serial: Option<&str>) -> SimDevice {
    let serial = serial.map_or(String::new(), |s| format!("usb_serial = \"{s}\"\n"));
    let lab = crate::config::parse_lab(
        &format!(
            "[lab]\nname = \"t\"\n[[device]]\nname = \"pixel\"\nplatform = \"sim\"\nmodel = \"Pixel 7\"\n\
             tether = {{ uhubctl = {{ location = \"1-1\", port = 2 }} }}\n[device.sim]\nemulates = \"android\"\n{serial}"
        ),
        std::path::Path::new("lab.toml"),
    )
    .unwrap();
    SimDevice::new(lab.devices[0].clone())
}

/// A host whose hub switches port 2 and lists it as `listings` say, one after the other.
fn host(listings: &[&str]) -> Arc<ScriptedTransport> {
    let h = Arc::new(ScriptedTransport::new("local"));
    for (action, on) in [("off", false), ("on", true)] {
        h.on(&["uhubctl", "-l", "1-1", "-p", "2", "-a", action], vec![Reply::ok(&uhubctl_switch_output("1-1", 2, on))]);
    }
    h.on(
        &["uhubctl", "-l", "1-1", "-p", "2"],
        listings.iter().map(|l| Reply::ok(&uhubctl_port_listing("1-1", 2, l))).collect(),
    );
    h
}

fn tether(h: &Arc<ScriptedTransport>) -> UhubctlTether {
    UhubctlTether::new(h.clone(), "1-1", 2, None)
}

fn err(r: Result<impl std::fmt::Debug, TetherError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn uhubctl_command_is_an_argv_with_the_configured_port() {
    let t = UhubctlTether::new(Arc::new(crate::transport::LocalTransport::new("local")), "1-1.4", 3, None);
    let c = t.command("off");
    assert_eq!(c.program, "uhubctl");
    assert_eq!(c.args, ["-l", "1-1.4", "-p", "3", "-a", "off"]);
    assert_eq!(t.list_command().args, ["-l", "1-1.4", "-p", "3"], "the port's listing");
    let t = UhubctlTether { repeat: Some(10), ..t };
    assert_eq!(t.command("off").args, ["-l", "1-1.4", "-p", "3", "-a", "off", "-r", "10"]);
    assert_eq!(t.command("on").args, ["-l", "1-1.4", "-p", "3", "-a", "on"], "repeats are for off only");
}

#[tokio::test]
async fn the_phone_is_seen_here_cut_gone_and_back_by_its_serial_polling_on_its_clock() {
    // Still listed once after the off, and enumerating (`connect []`) once after the on.
    let h = host(&[PHONE, "0101 off connect", OFF, "0101 power connect []", PHONE]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    assert_eq!(t.untether(&d).await.unwrap(), UntetherMode::PowerCut);
    assert_eq!(d.clock().now(), Duration::from_secs(1), "one poll interval");
    t.retether(&d).await.unwrap();
    assert_eq!(d.clock().now(), Duration::from_secs(2));
    assert_eq!(
        h.calls_of("uhubctl"),
        [
            "-l 1-1 -p 2",
            "-l 1-1 -p 2 -a off",
            "-l 1-1 -p 2",
            "-l 1-1 -p 2",
            "-l 1-1 -p 2 -a on",
            "-l 1-1 -p 2",
            "-l 1-1 -p 2"
        ]
    );
}

#[tokio::test]
async fn a_port_that_reads_off_with_the_phone_still_connected_is_a_hub_that_did_not_cut() {
    let h = host(&[PHONE, "0103 off enable connect [18d1:4ee7 Google Pixel 7 0A1B2C3D]"]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    let e = err(t.untether(&d).await);
    assert_eq!(
        e,
        "pixel: hub 1-1 port 2: reads off but the phone is still on the bus 30 s after `uhubctl -a off` (uhubctl lists 1-1: `0103 off enable connect`): this hub does not cut the port; fix: use a hub that really switches per port (`lab hubs`, `ppps`)"
    );
    assert_eq!(d.clock().now(), Duration::from_secs(30), "bounded by BusWait::leave");
    assert_eq!(h.calls_of("uhubctl").len(), 2 + 31, "list, off, then one listing a second");
}

#[tokio::test]
async fn a_port_powered_again_after_the_cut_asks_for_repeat() {
    let h = host(&[PHONE, PHONE]);
    let e = err(tether(&h).untether(&phone(Some("0A1B2C3D"))).await);
    assert!(e.contains("has power again after `uhubctl -a off`") && e.contains("fix: `repeat = 10`"), "{e}");
}

#[tokio::test]
async fn a_phone_that_never_comes_back_is_an_error_after_the_limit_and_one_off_again_at_once() {
    let h = host(&[PHONE, OFF, "0101 power connect []"]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    t.untether(&d).await.unwrap();
    let e = err(t.retether(&d).await);
    assert!(e.starts_with("pixel: hub 1-1 port 2: USB serial 0A1B2C3D is not back on the bus 60 s after `uhubctl -a on` (uhubctl lists 1-1: `0101 power connect`)"), "{e}");
    assert_eq!(d.clock().now(), Duration::from_secs(60));

    let h = host(&[PHONE, OFF, OFF]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    t.untether(&d).await.unwrap();
    assert!(err(t.retether(&d).await).contains("is off again after `uhubctl -a on`"));
}

#[tokio::test]
async fn a_phone_not_on_the_port_is_not_cut_and_its_return_not_waited_for() {
    let h = host(&["0503 power highspeed enable connect [04e8:6860 SAMSUNG SAMSUNG_Android R58M12ABCDE]"]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    let e = err(t.untether(&d).await);
    assert!(
        e.contains(
            "USB serial 0A1B2C3D is not on this port (uhubctl lists 1-1: `0503 power highspeed enable connect`)"
        ),
        "{e}"
    );
    assert_eq!(h.calls_of("uhubctl"), ["-l 1-1 -p 2"], "nothing switched");
    t.retether(&d).await.unwrap();
    assert_eq!(h.calls_of("uhubctl")[1..], ["-l 1-1 -p 2 -a on"], "powered, nobody waited for");

    let h = host(&[OFF]);
    assert!(err(tether(&h).untether(&phone(Some("0A1B2C3D"))).await).contains("the port is off before the cut"));
}

#[tokio::test]
async fn without_a_serial_whatever_is_on_the_port_is_waited_for_and_an_empty_port_is_not() {
    let h = host(&[EMPTY]);
    let (t, d) = (tether(&h), phone(None));
    t.untether(&d).await.unwrap();
    t.retether(&d).await.unwrap();
    assert_eq!(h.calls_of("uhubctl"), ["-l 1-1 -p 2", "-l 1-1 -p 2 -a off", "-l 1-1 -p 2 -a on"]);

    let h = host(&[PHONE, OFF, PHONE]);
    let (t, d) = (tether(&h), phone(None));
    t.untether(&d).await.unwrap();
    t.retether(&d).await.unwrap();
    assert_eq!(h.calls_of("uhubctl").len(), 5);
}

#[tokio::test]
async fn a_uhubctl_tether_asks_whether_its_hub_port_cuts_vbus() {
    let t = tether(&host(&[EMPTY]));
    assert_eq!(t.cut_question(), "does hub 1-1 port 2 really cut VBUS?");
}

#[tokio::test]
async fn a_phone_uhubctl_cannot_name_is_cut_and_waited_for_as_whatever_device_is_there() {
    // Strings unreadable (no permission on the phone's device node): only its vid:pid.
    let unnamed = "0503 power highspeed enable connect [18d1:4ee7]";
    let h = host(&[unnamed, OFF, "0101 power connect []", unnamed]);
    let (t, d) = (tether(&h), phone(Some("0A1B2C3D")));
    t.untether(&d).await.unwrap();
    t.retether(&d).await.unwrap();
    assert_eq!(d.clock().now(), Duration::from_secs(1), "`connect []` is not back yet; `[18d1:4ee7]` is");
    assert_eq!(h.calls_of("uhubctl").len(), 6);
}
