//! What a stand-in hub prints.

use super::{Reply, ScriptedTransport};

/// What `uhubctl -l LOCATION -p PORT -a off|on` prints for a hub that switched the port:
/// a stand-in hub for tests (the format of tests/fixtures/hubs/, uhubctl 2.x).
pub fn uhubctl_switch_output(location: &str, port: u32, on: bool) -> String {
    let hub = "2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps";
    let (before, after) = if on {
        ("0000 off", "0100 power")
    } else {
        ("0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 0A1B2C3D]", "0000 off")
    };
    format!(
        "Current status for hub {location} [{hub}]\n  Port {port}: {before}\nSent power {} request\nNew status for hub {location} [{hub}]\n  Port {port}: {after}\n",
        if on { "on" } else { "off" }
    )
}

/// What `uhubctl -l LOCATION -p PORT` prints for that hub with port `port` reading `status`
/// (`0503 power highspeed enable connect [18d1:4ee7 Google Pixel 7 0A1B2C3D]`, `0000 off`).
pub fn uhubctl_port_listing(location: &str, port: u32, status: &str) -> String {
    let hub = "2109:2817 VIA Labs, Inc. USB2.0 Hub, USB 2.10, 4 ports, ppps";
    format!("Current status for hub {location} [{hub}]\n  Port {port}: {status}\n")
}

/// Makes `host` answer for hub `location` port `port` as a hub with per-port switching:
/// `-a off|on` switch and say so, and the listing around a switch shows the port powered
/// with nothing uhubctl can name on it (so the tether switches without waiting).
pub fn answer_uhubctl_port(host: &ScriptedTransport, location: &str, port: u32) {
    let p = port.to_string();
    for (action, on) in [("off", false), ("on", true)] {
        host.on(
            &["uhubctl", "-l", location, "-p", &p, "-a", action],
            vec![Reply::ok(&uhubctl_switch_output(location, port, on))],
        );
    }
    host.on(
        &["uhubctl", "-l", location, "-p", &p],
        vec![Reply::ok(&uhubctl_port_listing(location, port, "0100 power"))],
    );
}
