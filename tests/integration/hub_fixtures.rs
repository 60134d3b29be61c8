//! The uhubctl parser on real uhubctl output (tests/fixtures/hubs/, origins in
//! tests/fixtures/devices/SOURCES.md).

use lab::collect::hubs::uhubctl::{Block, Switching, parse};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("tests/fixtures/hubs/{name}")).unwrap()
}

#[test]
fn a_listing_of_two_cascaded_hubs_names_every_port_and_what_is_attached() {
    let l = parse(&fixture("uhubctl_listing_tplink_uh720.txt")).unwrap();
    let locations: Vec<&str> = l.hubs.iter().map(|h| h.location.as_str()).collect();
    assert_eq!(locations, ["3-1.1", "3-1"]);
    let inner = &l.hubs[0];
    assert_eq!(inner.device.vid_pid, "0bda:5411");
    assert_eq!(inner.device.name, "Generic 4-Port USB 2.0 Hub");
    assert_eq!((inner.device.usb.as_deref(), inner.device.ports), (Some("2.10"), Some(4)));
    assert_eq!(inner.device.switching, Some(Switching::Ppps));
    assert_eq!(inner.ports.len(), 4);
    assert!(inner.ports.iter().all(|p| p.powered));
    let p1 = inner.port(1).unwrap();
    assert_eq!((p1.status, p1.connected), (0x0103, true));
    assert_eq!(p1.words, ["power", "enable", "connect"]);
    assert_eq!(p1.device.as_ref().unwrap().name, "Ledger Nano S 0001");
    assert!(!inner.port(2).unwrap().connected && inner.port(2).unwrap().device.is_none());
    // The outer hub's port 1 holds the inner hub, described as a hub.
    let upstream = l.hubs[1].port(1).unwrap().device.as_ref().unwrap();
    assert_eq!((upstream.ports, upstream.switching), (Some(4), Some(Switching::Ppps)));
    assert_eq!(l.hubs[1].port(3).unwrap().device.as_ref().unwrap().name, "Logitech USB Receiver");
    // A device is found by its serial, printed last.
    let found: Vec<(&str, u32)> = l.find_serial("0001").iter().map(|(h, p)| (h.location.as_str(), p.number)).collect();
    assert_eq!(found, [("3-1.1", 1)]);
    assert!(l.find_serial("Receiver").len() == 1, "a device without serial ends with its product's word");
    assert!(l.find_serial("28031FDH2000ZV").is_empty());
}

#[test]
fn switching_a_ganged_hub_off_shows_every_port_off_in_the_new_status() {
    let l = parse(&fixture("uhubctl_off_waveshare_ganged.txt")).unwrap();
    assert_eq!(l.hubs.len(), 2);
    assert_eq!((l.hubs[0].block, l.hubs[1].block), (Block::Current, Block::New));
    assert_eq!(l.hubs[0].device.switching, Some(Switching::Ganged));
    let after = l.latest("3-4").unwrap();
    assert_eq!(after.block, Block::New);
    assert!(after.ports.iter().all(|p| !p.powered && p.status == 0 && p.words == ["off"]));
    assert!(l.hubs[0].port(4).unwrap().powered);
    let found: Vec<u32> = l.find_serial("00E04C360150").iter().map(|(_, p)| p.number).collect();
    assert_eq!(found, [4], "found in the current status, not in the new one where it is gone");
}

#[test]
fn a_usb3_hub_port_has_its_speed_and_link_state() {
    let l = parse(&fixture("uhubctl_listing_usb32_rx_detect.txt")).unwrap();
    let h = &l.hubs[0];
    assert_eq!((h.location.as_str(), h.device.usb.as_deref()), ("2-2", Some("3.20")));
    assert_eq!(h.port(1).unwrap().words, ["power", "5gbps", "Rx.Detect"]);
    let p4 = h.port(4).unwrap();
    assert_eq!((p4.status, p4.words.join(" ")), (0x0203, "power 5gbps U0 enable connect".to_string()));
    assert!(p4.device.as_ref().unwrap().has_serial("012938000FA5"));
    assert_eq!(p4.device.as_ref().unwrap().vid_pid, "0bda:9210");
}
