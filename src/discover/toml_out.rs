//! Lab-file text for what `lab discover` found: `[[device]]` blocks to paste (`--toml`),
//! or a whole new `lab.toml` (`lab init`). Every value is written as a TOML string by
//! `toml_edit`, so a phone's name or model cannot break the file.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use super::finding::{FoundPhone, HostFindings, HubPlace};
use crate::config::{AdbServer, Host, HostKind, Lab, Platform, UsbmuxdAddress};

/// The traffic endpoint's port in a new lab file.
const ENDPOINT_PORT: u16 = 8765;

fn quoted(s: &str) -> String {
    toml_edit::Value::from(s).to_string().trim().to_string()
}

/// `iPhone 13 Pro` → `iphone-13-pro`.
fn slug(model: &str) -> String {
    let mut out = String::new();
    for c in model.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "phone".into() } else { out }
}

/// Where the phones' blocks point adb and usbmuxd when discovery used other than the defaults.
#[derive(Debug, Clone, Default)]
pub struct Reached {
    pub adb_server: Option<AdbServer>,
    pub usbmuxd: Option<UsbmuxdAddress>,
}

/// The names `lab` gives its devices and monitors: new ones must differ.
pub fn names_in(lab: &Lab) -> BTreeSet<String> {
    lab.devices.iter().map(|d| d.name.clone()).chain(lab.monitors.iter().map(|m| m.name.clone())).collect()
}

/// `[[device]]` blocks for every phone of `found` the lab does not have yet, named from
/// their model and a counter no name of `taken` has; a phone whose identity could not be
/// read gets a comment saying why instead.
pub fn device_blocks(found: &[HostFindings], taken: &BTreeSet<String>, reached: &Reached) -> String {
    let mut taken = taken.clone();
    let mut out = String::new();
    for p in found.iter().flat_map(|h| &h.phones).filter(|p| p.in_lab.is_none()) {
        if !p.describable() {
            let why = p.problems.first().map_or("its model and OS could not be read", String::as_str);
            let _ = writeln!(out, "# {} {} on {}: not written: {why}\n", platform_word(p.platform), p.id, p.host);
            continue;
        }
        let base = slug(p.model.as_deref().unwrap_or("phone"));
        let name = (1..).map(|i| format!("{base}-{i}")).find(|n| !taken.contains(n)).expect("a free name");
        taken.insert(name.clone());
        block(&mut out, p, &name, reached);
    }
    for m in found.iter().flat_map(|h| &h.monitors).filter(|m| m.in_lab.is_none()) {
        let name = (1..).map(|i| format!("{}-{i}", m.kind)).find(|n| !taken.contains(n)).expect("a free name");
        taken.insert(name.clone());
        let _ = writeln!(
            out,
            "# {} found on {} ({}). Wire it in place of one phone's battery, set that battery's\n\
             # voltage, uncomment, and add `monitor = {}` to that phone's [[device]]:",
            m.kind,
            m.host,
            m.detail,
            quoted(&name)
        );
        let _ = writeln!(
            out,
            "# [[monitor]]\n# name = {}\n# host = {}\n# kind = {}",
            quoted(&name),
            quoted(&m.host),
            quoted(&m.kind)
        );
        let key = if m.kind == "otii" { "address" } else { "serial" };
        let _ = writeln!(out, "# {key} = {}\n# voltage_v = 3.85\n", quoted(&m.address));
    }
    out
}

fn platform_word(p: Platform) -> &'static str {
    match p {
        Platform::Ios => "iPhone",
        Platform::Android => "Android phone",
        _ => "device",
    }
}

fn block(out: &mut String, p: &FoundPhone, name: &str, reached: &Reached) {
    let model = p.model.as_deref().unwrap_or_default();
    let where_ = match &p.hub {
        HubPlace::Switching { location, port } => format!(", hub {location} port {port}"),
        HubPlace::NotSwitching { location, port, .. } => format!(", hub {location} port {port} (cannot switch)"),
        HubPlace::Unknown { .. } => String::new(),
    };
    let _ = writeln!(out, "# {model}, {}, found on {} ({}{where_})", p.os.as_deref().unwrap_or("?"), p.host, p.id);
    for problem in &p.problems {
        let _ = writeln!(out, "# not usable yet: {problem}");
    }
    let (platform, tag) = match p.platform {
        Platform::Ios => ("ios", "ios"),
        _ => ("android", "android"),
    };
    let _ = writeln!(
        out,
        "[[device]]\nname = {}\nhost = {}\nplatform = {}",
        quoted(name),
        quoted(&p.host),
        quoted(platform)
    );
    let _ = writeln!(out, "model = {}\nos = {}", quoted(model), quoted(p.os_short.as_deref().unwrap_or_default()));
    let _ = writeln!(out, "tags = [{}, \"phone\"]", quoted(tag));
    let tether = match &p.hub {
        // `auto` finds the port by the serial the lab file names; a Wi-Fi adb serial is none.
        HubPlace::Switching { .. } if p.platform == Platform::Ios || !p.id.contains(':') => {
            "{ uhubctl = \"auto\" }".to_string()
        }
        HubPlace::Switching { location, port } => {
            format!("{{ uhubctl = {{ location = {}, port = {port} }} }}", quoted(location))
        }
        _ => "\"manual\"".into(),
    };
    let _ = writeln!(out, "tether = {tether}");
    match p.platform {
        Platform::Ios => {
            let _ = writeln!(out, "[device.ios]\nudid = {}", quoted(&p.id));
            if let Some(u) = &reached.usbmuxd {
                let _ = writeln!(out, "usbmuxd = {}", quoted(&u.to_string()));
            }
        }
        _ => {
            let _ = writeln!(out, "[device.android]\nserial = {}", quoted(&p.id));
            if let Some(s) = &reached.adb_server {
                let _ = writeln!(out, "adb_server = {}", quoted(&host_port(&s.host, s.port)));
            }
        }
    }
    out.push('\n');
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// The two `[lab]` lines that let phones reach the traffic endpoint at `lan` (they cannot
/// reach this machine's loopback).
pub fn endpoint_lines(lan: IpAddr) -> String {
    format!(
        "endpoint_bind = \"0.0.0.0:{ENDPOINT_PORT}\"\nendpoint_url = {}\n",
        quoted(&format!("http://{}", host_port(&lan.to_string(), ENDPOINT_PORT)))
    )
}

/// A whole lab file: `[lab]` named `name`, the hosts, and a block for every phone found.
/// The endpoint pair is filled in from `lan` when a phone was found.
pub fn new_lab(name: &str, hosts: &[Host], found: &[HostFindings], lan: Option<IpAddr>, reached: &Reached) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `lab init`; every key is documented in docs/config.md.\n\n[lab]\nname = {}\n\
         artifacts = \"artifacts\"          # raw files of every trial go under here\n\
         store = \"artifacts/lab.db\"       # SQLite store: campaigns, trials, measurements",
        quoted(name)
    );
    let phones = found.iter().any(|h| !h.phones.is_empty());
    match (phones, lan) {
        (true, Some(ip)) => {
            out.push_str("# Phones reach the traffic endpoint over the LAN (docs/hosts.md).\n");
            out.push_str(&endpoint_lines(ip));
        }
        (true, None) => out.push_str(
            "# No LAN address was found: set these before a phone's campaign (docs/hosts.md).\n\
             # endpoint_bind = \"0.0.0.0:8765\"\n# endpoint_url = \"http://192.0.2.10:8765\"\n",
        ),
        (false, _) => {}
    }
    out.push('\n');
    for h in hosts {
        let _ = writeln!(out, "[[host]]\nname = {}", quoted(&h.name));
        if let HostKind::Ssh(s) = &h.kind {
            let _ = writeln!(out, "address = {}\nuser = {}", quoted(&s.address), quoted(&s.user));
            if let Some(id) = &s.identity {
                let _ = writeln!(out, "identity = {}", quoted(&id.display().to_string()));
            }
            let _ = writeln!(out, "known_hosts = {}", quoted(&s.known_hosts.display().to_string()));
        }
        out.push('\n');
    }
    out.push_str(&device_blocks(found, &BTreeSet::new(), reached));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_lab;
    use crate::discover::{FoundMonitor, PhoneState};
    use std::path::Path;

    fn phone(platform: Platform, id: &str, model: &str, hub: HubPlace) -> FoundPhone {
        FoundPhone {
            host: "local".into(),
            platform,
            id: id.into(),
            usb_serial: None,
            model: Some(model.into()),
            os: Some("Android 14 (SDK 34)".into()),
            os_short: Some(if platform == Platform::Ios { "iOS 17.4" } else { "Android 14" }.into()),
            label: None,
            state: PhoneState::Ready,
            hub,
            in_lab: None,
            problems: vec![],
        }
    }

    fn found() -> Vec<HostFindings> {
        let switching = HubPlace::Switching { location: "1-1".into(), port: 2 };
        let mut unreadable = phone(Platform::Android, "R58M", "x", HubPlace::Unknown { why: String::new() });
        (unreadable.model, unreadable.os_short, unreadable.state) = (None, None, PhoneState::Unauthorized);
        unreadable.problems.push("phone R58M is unauthorized; fix: accept".into());
        vec![HostFindings {
            host: "local".into(),
            unreachable: None,
            phones: vec![
                phone(Platform::Android, "3A1B2C", "Pixel 8", switching.clone()),
                phone(Platform::Android, "10.0.0.5:5555", "Pixel 8", switching.clone()),
                // A model name with TOML's own characters in it.
                phone(Platform::Android, "X1", "Tab \"S9\" = [5G]", HubPlace::Unknown { why: String::new() }),
                phone(Platform::Ios, "00008110-000A", "iPhone 15", switching),
                unreadable,
            ],
            monitors: vec![FoundMonitor {
                host: "local".into(),
                kind: "otii".into(),
                address: "127.0.0.1:1905".into(),
                detail: "Arc 5A1B (Arc)".into(),
                in_lab: None,
                problems: vec![],
            }],
            notes: vec![],
        }]
    }

    #[test]
    fn blocks_load_with_free_names_the_tether_each_port_allows_and_a_reason_for_what_is_left_out() {
        let taken: BTreeSet<String> = ["pixel-8-1".to_string()].into();
        let blocks = device_blocks(&found(), &taken, &Reached::default());
        let names: Vec<&str> = blocks.lines().filter_map(|l| l.strip_prefix("name = ")).collect();
        assert_eq!(names, ["\"pixel-8-2\"", "\"pixel-8-3\"", "\"tab-s9-5g-1\"", "\"iphone-15-1\""]);
        assert!(blocks.contains("serial = \"3A1B2C\"\n") && blocks.contains("tether = { uhubctl = \"auto\" }"));
        // Wi-Fi adb: the port written out; a phone on no hub: manual.
        assert!(blocks.contains("tether = { uhubctl = { location = \"1-1\", port = 2 } }"), "{blocks}");
        assert!(blocks.contains("tether = \"manual\""), "{blocks}");
        assert!(blocks.contains("# Android phone R58M on local: not written: phone R58M is unauthorized; fix: accept"));
        assert!(blocks.contains("# [[monitor]]\n# name = \"otii-1\""), "{blocks}");

        let lab = new_lab(
            "shelf",
            &[Host { name: "local".into(), kind: HostKind::Local }],
            &found(),
            Some("10.0.0.2".parse().unwrap()),
            &Reached::default(),
        );
        let parsed = parse_lab(&lab, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}\n{lab}"));
        assert_eq!(parsed.devices.len(), 4);
        let tab = parsed.devices.iter().find(|d| d.name == "tab-s9-5g-1").unwrap();
        assert_eq!((tab.model.as_str(), &tab.tether), ("Tab \"S9\" = [5G]", &crate::config::TetherSpec::Manual));
        assert_eq!(parsed.endpoint.url.as_deref(), Some("http://10.0.0.2:8765"));
        assert!(parsed.devices.iter().all(|d| d.host == "local"));
        // Without a LAN address the pair is left for the user, and the file still loads only
        // once they are set: it says so.
        let no_lan = new_lab(
            "shelf",
            &[Host { name: "local".into(), kind: HostKind::Local }],
            &found(),
            None,
            &Reached::default(),
        );
        assert!(no_lan.contains("# No LAN address was found"), "{no_lan}");
    }

    #[test]
    fn slugs_are_lowercase_words_joined_by_dashes() {
        assert_eq!(slug("iPhone 13 Pro"), "iphone-13-pro");
        assert_eq!(slug("SM-G991B"), "sm-g991b");
        assert_eq!(slug("  ***  "), "phone");
        assert_eq!(host_port("::1", 5037), "[::1]:5037");
    }
}
