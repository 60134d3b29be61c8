//! What a stand-in hub prints.

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
