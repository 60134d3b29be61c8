//! Runs of the stand-in on described hubs, compared line for line with what uhubctl 2.x
//! printed on real hubs (outputs quoted in github.com/mvp/uhubctl's issues and pull
//! requests #541, #613), and what its loop does to the ports.

use super::*;
use crate::options;
use crate::state::tests::{device, hub};
use crate::state::{Hub, Speed};

#[derive(Default)]
struct Recorder {
    sleeps: Vec<u64>,
    commits: usize,
}

impl World for Recorder {
    fn sleep_ms(&mut self, ms: u64) {
        self.sleeps.push(ms);
    }
    fn commit(&mut self, state: &State) -> io::Result<()> {
        state.check().expect("a switched state is still a USB tree");
        self.commits += 1;
        Ok(())
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
    world: Recorder,
}

fn uhubctl(state: &mut State, args: &[&str]) -> Out {
    state.check().unwrap();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let o = options::parse("uhubctl", &args).unwrap();
    let (mut out, mut err, mut world) = (Vec::new(), Vec::new(), Recorder::default());
    let code = run(&o, state, &mut world, &mut out, &mut err).unwrap();
    Out { code, stdout: String::from_utf8(out).unwrap(), stderr: String::from_utf8(err).unwrap(), world }
}

fn text(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn named(mut h: Hub, id: &str, vendor: &str, product: &str) -> Hub {
    (h.id, h.vendor, h.product) = (id.into(), vendor.into(), product.into());
    h
}

fn pixel() -> crate::state::Device {
    device("18d1:4ee7", "Google", "Pixel 7", "2A111FDH200B4Z", Speed::High)
}

/// The hubs of the listing quoted in issue 12 (a USB2 hub with a Ledger, a USB 3.2 hub).
fn two_hubs() -> State {
    let mut usb2 = hub("3-1.1", "2.10", Switching::Ppps, 4);
    usb2.ports[0].device = Some(device("2c97:1015", "Ledger", "Nano S", "0001", Speed::Full));
    let mut usb3 = named(hub("2-2", "3.20", Switching::Ppps, 4), "0bda:0411", "Generic", "USB3.2 Hub");
    usb3.ports[3].device = Some(device("0bda:9210", "ULT-Best", "Best USB Device", "012938000FA5", Speed::High));
    State { hubs: vec![usb2, usb3] }
}

/// The Waveshare USB-HUB-3U-ETH of uhubctl pull request #541: ganged, a Realtek LAN inside.
fn waveshare() -> State {
    let mut h = named(hub("3-4", "2.00", Switching::Ganged, 4), "1a40:0101", "", "USB 2.0 Hub");
    h.ports[0].device = Some(device("0a5c:2763", "Broadcom", "BCM2708 Boot", "", Speed::Full));
    h.ports[3].device = Some(device("0bda:8152", "Realtek", "USB 10/100 LAN", "00E04C360150", Speed::High));
    State { hubs: vec![h] }
}

/// A VIA Labs USB 3 hub as in issue #613: its USB3 half listed first, a phone on the USB2 half.
fn via_pair() -> State {
    let usb3 = named(hub("2-1", "3.20", Switching::Ppps, 4), "2109:0822", "VIA Labs, Inc.", "USB3.1 Hub");
    let mut usb2 = named(hub("1-1", "2.10", Switching::Ppps, 4), "2109:2822", "VIA Labs, Inc.", "USB2.0 Hub");
    usb2.twin = Some("2-1".into());
    usb2.ports[1].device = Some(pixel());
    State { hubs: vec![usb3, usb2] }
}

#[test]
fn a_listing_is_uhubctls_for_the_described_hubs() {
    let out = uhubctl(&mut two_hubs(), &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(
        out.stdout,
        text(&[
            "Current status for hub 3-1.1 [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.10, 4 ports, ppps]",
            "  Port 1: 0103 power enable connect [2c97:1015 Ledger Nano S 0001]",
            "  Port 2: 0100 power",
            "  Port 3: 0100 power",
            "  Port 4: 0100 power",
            "Current status for hub 2-2 [0bda:0411 Generic USB3.2 Hub, USB 3.20, 4 ports, ppps]",
            "  Port 1: 02a0 power 5gbps Rx.Detect",
            "  Port 2: 02a0 power 5gbps Rx.Detect",
            "  Port 3: 02a0 power 5gbps Rx.Detect",
            "  Port 4: 0203 power 5gbps U0 enable connect [0bda:9210 ULT-Best Best USB Device 012938000FA5]",
        ])
    );
    assert_eq!((out.world.commits, out.world.sleeps.len()), (0, 0), "a listing changes nothing");
    let only = uhubctl(&mut two_hubs(), &["-l", "3-1.1", "-p", "1"]);
    assert_eq!(
        only.stdout,
        text(&[
            "Current status for hub 3-1.1 [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.10, 4 ports, ppps]",
            "  Port 1: 0103 power enable connect [2c97:1015 Ledger Nano S 0001]",
        ])
    );
}

#[test]
fn a_ganged_hub_needs_f_switches_whole_and_its_devices_come_back_unlisted_then_listed() {
    let mut s = waveshare();
    let refused = uhubctl(&mut s, &["-l", "3-4", "-a", "0"]);
    assert_eq!(refused.code, 1);
    assert_eq!(refused.stderr, "No compatible devices detected at location 3-4!\nRun with -h to get usage info.\n");
    assert!(refused.stdout.is_empty());

    let desc = "3-4 [1a40:0101 USB 2.0 Hub, USB 2.00, 4 ports, ganged]";
    let off = uhubctl(&mut s, &["-f", "-l", "3-4", "-a", "0"]);
    let (lan, boot) = ("[0bda:8152 Realtek USB 10/100 LAN 00E04C360150]", "[0a5c:2763 Broadcom BCM2708 Boot]");
    assert_eq!(
        off.stdout,
        text(&[
            &format!("Current status for hub {desc}"),
            &format!("  Port 1: 0103 power enable connect {boot}"),
            "  Port 2: 0100 power",
            "  Port 3: 0100 power",
            &format!("  Port 4: 0503 power highspeed enable connect {lan}"),
            "Sent power off request",
            &format!("New status for hub {desc}"),
            "  Port 1: 0000 off",
            "  Port 2: 0000 off",
            "  Port 3: 0000 off",
            "  Port 4: 0000 off",
        ])
    );
    assert_eq!(off.world.commits, 1);

    let on = uhubctl(&mut s, &["-f", "-l", "3-4", "-a", "1"]);
    assert_eq!(
        on.stdout,
        text(&[
            &format!("Current status for hub {desc}"),
            "  Port 1: 0000 off",
            "  Port 2: 0000 off",
            "  Port 3: 0000 off",
            "  Port 4: 0000 off",
            "Sent power on request",
            &format!("New status for hub {desc}"),
            "  Port 1: 0101 power connect []",
            "  Port 2: 0100 power",
            "  Port 3: 0100 power",
            "  Port 4: 0101 power connect []",
        ])
    );
    let later = uhubctl(&mut s, &["-f", "-l", "3-4"]);
    assert!(
        later.stdout.contains(&format!("  Port 4: 0503 power highspeed enable connect {lan}\n")),
        "{}",
        later.stdout
    );

    // One port named: still the whole gang.
    let one = uhubctl(&mut s, &["-f", "-l", "3-4", "-p", "2", "-a", "off"]);
    assert!(
        one.stdout.ends_with(
            "New status for hub 3-4 [1a40:0101 USB 2.0 Hub, USB 2.00, 4 ports, ganged]\n  Port 2: 0000 off\n"
        )
    );
    assert!(s.hubs[0].ports.iter().all(|p| !p.powered), "{:?}", s.hubs[0].ports);
}

#[test]
fn a_nops_hub_is_listed_only_with_f_and_switching_it_changes_nothing() {
    let mut s = State { hubs: vec![hub("1-2", "2.00", Switching::Nops, 2)] };
    assert_eq!(uhubctl(&mut s, &[]).code, 1, "no per-port hub: nothing compatible");
    let out = uhubctl(&mut s, &["-f", "-l", "1-2", "-a", "off"]);
    assert_eq!(out.code, 0);
    let new = out.stdout.split("Sent power off request\n").nth(1).unwrap();
    assert_eq!(
        new,
        text(&[
            "New status for hub 1-2 [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.00, 2 ports, nops]",
            "  Port 1: 0100 power",
            "  Port 2: 0100 power"
        ])
    );
    assert_eq!(out.world.commits, 0);
    let one_port_ganged = named(hub("1-3", "2.00", Switching::Ganged, 1), "05e3:0608", "", "USB2.0 Hub");
    let listed = uhubctl(&mut State { hubs: vec![one_port_ganged] }, &[]);
    assert!(
        listed.stdout.starts_with("Current status for hub 1-3 [05e3:0608 USB2.0 Hub, USB 2.00, 1 ports, ppps]\n"),
        "{}",
        listed.stdout
    );
}

#[test]
fn both_halves_of_a_usb3_hub_switch_together_unless_e() {
    let mut s = via_pair();
    let out = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "off"]);
    let (usb3, usb2) = (
        "2-1 [2109:0822 VIA Labs, Inc. USB3.1 Hub, USB 3.20, 4 ports, ppps]",
        "1-1 [2109:2822 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]",
    );
    assert_eq!(
        out.stdout,
        text(&[
            &format!("Current status for hub {usb3}"),
            "  Port 2: 02a0 power 5gbps Rx.Detect",
            "Sent power off request",
            &format!("New status for hub {usb3}"),
            "  Port 2: 00a0 off",
            &format!("Current status for hub {usb2}"),
            "  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]",
            "Sent power off request",
            &format!("New status for hub {usb2}"),
            "  Port 2: 0000 off",
        ])
    );
    assert_eq!(out.world.sleeps, [150], "the USB3 half's extra delay");
    assert!(!s.vbus(1, 2), "both halves off: no VBUS");
    assert!(s.vbus(1, 1) && s.hubs[0].ports[0].powered, "other ports untouched");

    let mut e = via_pair();
    let out = uhubctl(&mut e, &["-e", "-l", "1-1", "-p", "2", "-a", "off"]);
    assert!(!out.stdout.contains("hub 2-1"), "{}", out.stdout);
    assert!(!e.on_bus(1, 2) && e.vbus(1, 2), "-e: off the bus, still charging from the USB3 half");
    let back = uhubctl(&mut e, &["-l", "2-1", "-p", "2", "-a", "off"]);
    assert_eq!(back.code, 0, "the USB3 half's twin is listed, so it counts as one physical hub");
    assert!(!e.vbus(1, 2));

    let mut lone = State { hubs: vec![via_pair().hubs.remove(0)] };
    let out = uhubctl(&mut lone, &["-l", "2-1", "-a", "off"]);
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "No compatible devices detected at location 2-1!\nRun with -h to get usage info.\n"),
        "uhubctl counts USB2 hubs, or all with -e"
    );
    assert_eq!(uhubctl(&mut lone, &["-e", "-l", "2-1", "-a", "off"]).code, 0);
}

#[test]
fn a_cycle_is_two_rounds_with_the_delay_between_and_the_device_unlisted_after() {
    let mut h = named(hub("1-1", "2.10", Switching::Ppps, 4), "2109:2813", "VIA Labs, Inc.", "USB2.0 Hub");
    h.ports[1].device = Some(pixel());
    let mut s = State { hubs: vec![h] };
    let out = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "cycle", "-d", "5"]);
    let desc = "1-1 [2109:2813 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]";
    assert_eq!(
        out.stdout,
        text(&[
            &format!("Current status for hub {desc}"),
            "  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]",
            "Sent power off request",
            &format!("New status for hub {desc}"),
            "  Port 2: 0000 off",
            &format!("Current status for hub {desc}"),
            "  Port 2: 0000 off",
            "Sent power on request",
            &format!("New status for hub {desc}"),
            // Back, not enumerated yet, and libusb's entry from the start no longer opens.
            "  Port 2: 0101 power connect [18d1:4ee7]",
        ])
    );
    assert_eq!((out.world.sleeps.as_slice(), out.world.commits), (&[5000][..], 2));
    assert!(s.hubs[0].ports[1].powered);

    let reset = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "on", "-R"]);
    assert!(reset.stdout.ends_with("  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]\nResetting hub...\nReset successful!\n"), "{}", reset.stdout);
    assert_eq!(reset.world.commits, 0, "already on: nothing sent");
}

#[test]
fn toggle_and_flash_follow_uhubctls_loop() {
    let mut s = State { hubs: vec![hub("1-1", "2.10", Switching::Ppps, 4)] };
    s.hubs[0].ports[0].powered = false;
    let out = uhubctl(&mut s, &["-l", "1-1", "-p", "1,2", "-a", "toggle"]);
    let powered: Vec<bool> = s.hubs[0].ports.iter().map(|p| p.powered).collect();
    assert_eq!(powered, [true, false, true, true], "each port flips");
    assert!(out.stdout.contains("Sent power off request\n"), "the last port's direction is printed: {}", out.stdout);

    let out = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "flash", "-d", "0.5"]);
    assert_eq!(out.world.sleeps, [500]);
    let sent: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("Sent")).collect();
    assert_eq!(sent, ["Sent power on request", "Sent power off request"], "flash: on, then off");
    assert!(!s.hubs[0].ports[1].powered);
}

#[test]
fn a_port_the_kernel_powers_again_turns_off_only_with_enough_repeats() {
    let mut h = hub("1-1", "2.10", Switching::Ppps, 4);
    h.ports[1].device = Some(pixel());
    h.ports[1].off_needs_repeat = 10;
    let mut s = State { hubs: vec![h] };
    let once = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "off"]);
    assert!(once.stdout.ends_with("Sent power off request\nNew status for hub 1-1 [0bda:5411 Generic 4-Port USB 2.0 Hub, USB 2.10, 4 ports, ppps]\n  Port 2: 0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 2A111FDH200B4Z]\n"), "{}", once.stdout);
    assert!(s.hubs[0].ports[1].powered);
    let repeated = uhubctl(&mut s, &["-l", "1-1", "-p", "2", "-a", "off", "-r", "10", "-w", "5"]);
    assert!(repeated.stdout.ends_with("  Port 2: 0000 off\n"), "{}", repeated.stdout);
    assert_eq!(repeated.world.sleeps, [5; 9], "-w between the ten requests");
    let mut plain = State { hubs: vec![hub("1-1", "2.10", Switching::Ppps, 4)] };
    assert_eq!(
        uhubctl(&mut plain, &["-l", "1-1", "-p", "1", "-a", "off", "-r", "0"]).world.commits,
        0,
        "-r 0 sends nothing"
    );
}

#[test]
fn hubs_are_chosen_by_location_level_vendor_description_and_attached_device() {
    let mut other = named(hub("1-2", "2.10", Switching::Ppps, 4), "2109:2813", "VIA Labs, Inc.", "USB2.0 Hub");
    other.ports[2].device = Some(pixel());
    let mut s = State { hubs: vec![hub("1-1", "2.10", Switching::Ppps, 4), other] };
    let all = uhubctl(&mut s, &["-a", "off"]);
    assert_eq!(all.code, 1);
    assert_eq!(
        all.stderr,
        "Error: changing port state for multiple hubs at once is not supported.\nUse -l to limit operation to one hub!\n"
    );
    let headers = |o: &Out| {
        o.stdout
            .lines()
            .filter(|l| l.starts_with("Current"))
            .map(|l| l.split(' ').nth(4).unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(headers(&uhubctl(&mut s, &[])), ["1-1", "1-2"]);
    assert_eq!(headers(&uhubctl(&mut s, &["-n", "2109"])), ["1-2"]);
    assert_eq!(headers(&uhubctl(&mut s, &["-n", "0BDA:54"])), ["1-1"]);
    assert_eq!(headers(&uhubctl(&mut s, &["-H", "VIA Labs"])), ["1-2"]);
    assert_eq!(headers(&uhubctl(&mut s, &["-L", "2"])), ["1-1", "1-2"]);
    assert_eq!(uhubctl(&mut s, &["-L", "3"]).code, 1);
    assert_eq!(headers(&uhubctl(&mut s, &["-l", "1-2"])), ["1-2"]);

    // -s: the hub with the phone, only the phone's port.
    let out = uhubctl(&mut s, &["-s", "2A111FDH200B4Z", "-a", "off"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(headers(&out), ["1-2"]);
    assert!(out.stdout.ends_with("  Port 3: 0000 off\n") && !out.stdout.contains("Port 1"), "{}", out.stdout);
    assert!(!s.hubs[1].ports[2].powered && s.hubs[1].ports[0].powered);
    assert_eq!(uhubctl(&mut s, &["-s", "2A111FDH200B4Z"]).code, 1, "off the bus now: nothing matches");

    let nodesc = uhubctl(&mut s, &["-N", "-l", "1-2"]);
    assert!(
        nodesc.stdout.starts_with("Current status for hub 1-2 [2109:2813, USB 2.10, 4 ports, ppps]\n"),
        "{}",
        nodesc.stdout
    );
    let beyond = uhubctl(&mut s, &["-l", "1-2", "-p", "14", "-a", "off"]);
    assert_eq!(
        beyond.stdout.lines().filter(|l| l.starts_with("  Port")).count(),
        0,
        "a port the hub lacks lists nothing"
    );
}

#[test]
fn a_hub_below_a_port_is_that_ports_device_and_goes_with_its_power() {
    let root = named(hub("1", "2.00", Switching::Ppps, 2), "1d6b:0002", "Linux 6.1.0 ehci_hcd", "EHCI Host Controller");
    let mut below = named(hub("1-1", "2.10", Switching::Ppps, 4), "2109:2813", "VIA Labs, Inc.", "USB2.0 Hub");
    below.ports[1].device = Some(pixel());
    let mut s = State { hubs: vec![root, below] };
    let out = uhubctl(&mut s, &["-l", "1"]);
    assert_eq!(
        out.stdout.lines().nth(1),
        Some(
            "  Port 1: 0503 power highspeed enable connect [2109:2813 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps]"
        )
    );
    uhubctl(&mut s, &["-l", "1", "-p", "1", "-a", "off"]);
    assert!(!s.present(1) && !s.vbus(1, 2));
    let listed = uhubctl(&mut s, &[]);
    assert!(!listed.stdout.contains("hub 1-1"), "gone from the bus: {}", listed.stdout);
    assert_eq!(
        uhubctl(&mut s, &["-l", "1-1"]).stderr,
        "No compatible devices detected at location 1-1!\nRun with -h to get usage info.\n"
    );
}
