//! Lab-file text for what `lab discover` found: `[[device]]` blocks to paste (`--toml`),
//! or a whole new `lab.toml` (`lab init`). Every value is written as a one-line TOML string
//! with its quotes and control characters escaped, so a phone's name or model cannot break
//! the file.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use super::finding::{FoundPhone, HostFindings, HubPlace};
use crate::config::{AdbServer, Host, HostKind, Lab, Platform, UsbmuxdAddress, join_host_port};

/// The traffic endpoint's port in a new lab file.
const ENDPOINT_PORT: u16 = 8765;

/// Text for a `#` line: a newline or other control character in a phone's name or a
/// tool's message would end the comment and start TOML.
fn comment(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// `s` as a one-line TOML basic string (TOML 1.0, "String"): `"` and `\` escaped, control
/// characters as `\uXXXX`, so every value stays on its own line.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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

/// The names `lab` gives its devices and monitors, lowercased: new ones must differ, also in
/// more than case (the lab file refuses names that differ only in case).
pub fn names_in(lab: &Lab) -> BTreeSet<String> {
    lab.devices
        .iter()
        .map(|d| d.name.to_lowercase())
        .chain(lab.monitors.iter().map(|m| m.name.to_lowercase()))
        .collect()
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
            let _ = writeln!(
                out,
                "# {} {} on {}: not written: {}\n",
                platform_word(p.platform),
                comment(&p.id),
                comment(&p.host),
                comment(why)
            );
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
            "# {} found on {} ({}). Which phone it supplies, and that battery's voltage, are\n\
             # wiring: wire it in place of one phone's battery, set `voltage_v` to the battery's\n\
             # nominal voltage (its label), uncomment, and add `monitor = {}` to that phone's [[device]]:",
            m.kind,
            comment(&m.host),
            comment(&m.detail),
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
        let _ = writeln!(out, "# {key} = {}", quoted(&m.address));
        // The instrument's type as the Otii server names it (`Arc …`, `Ace …`).
        let detail = m.detail.to_ascii_lowercase();
        if let Some(model) = ["arc", "ace"].into_iter().find(|t| m.kind == "otii" && detail.starts_with(t)) {
            let _ = writeln!(out, "# model = \"{model}\"");
        }
        let _ = writeln!(out, "# voltage_v = …\n");
    }
    out
}

/// A lab-file block would be written for a phone of `found`.
pub fn has_phones(found: &[HostFindings]) -> bool {
    found.iter().flat_map(|h| &h.phones).any(|p| p.in_lab.is_none() && p.describable())
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
        HubPlace::Switching { location, port, .. } => format!(", hub {location} port {port}"),
        HubPlace::NotSwitching { location, port, .. } => format!(", hub {location} port {port} (cannot switch)"),
        HubPlace::Unknown { .. } => String::new(),
    };
    let _ = writeln!(
        out,
        "# {}, {}, found on {} ({}{})",
        comment(model),
        comment(p.os.as_deref().unwrap_or("?")),
        comment(&p.host),
        comment(&p.id),
        comment(&where_)
    );
    for problem in &p.problems {
        let _ = writeln!(out, "# not usable yet: {}", comment(problem));
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
        HubPlace::Switching { auto: true, .. } => "{ uhubctl = \"auto\" }".to_string(),
        HubPlace::Switching { location, port, .. } => {
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
                let _ = writeln!(out, "adb_server = {}", quoted(&join_host_port(&s.host, s.port)));
            }
        }
    }
    out.push('\n');
}

/// The traffic endpoint's URL at this machine's LAN address.
pub fn endpoint_url(lan: IpAddr) -> String {
    format!("http://{}", join_host_port(&lan.to_string(), ENDPOINT_PORT))
}

/// The two `[lab]` lines that let phones reach the traffic endpoint at `url` (they cannot
/// reach this machine's loopback): listen on every interface at the URL's port.
pub fn endpoint_lines(url: &str) -> String {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap_or_default();
    let port = crate::config::parse_host_port(authority, Some(80)).map_or(ENDPOINT_PORT, |(_, p)| p);
    format!("endpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = {}\n", quoted(url.trim_end_matches('/')))
}

/// A whole lab file: `[lab]` named `name`, the hosts, and a block for every phone found.
/// With a phone, the endpoint pair is written for `endpoint` (its URL): without one the
/// file would not load (a phone given loopback), so the caller must have one.
pub fn new_lab(
    name: &str,
    hosts: &[Host],
    found: &[HostFindings],
    endpoint: Option<&str>,
    reached: &Reached,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Written by `lab init`; every key is documented in docs/config.md.\n\n[lab]\nname = {}\n\
         artifacts = \"artifacts\"          # raw files of every trial go under here\n\
         store = \"artifacts/lab.db\"       # SQLite store: campaigns, trials, measurements",
        quoted(name)
    );
    if let Some(url) = endpoint.filter(|_| has_phones(found)) {
        out.push_str("# Phones reach the traffic endpoint over the LAN (docs/hosts.md).\n");
        out.push_str(&endpoint_lines(url));
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
        let switching = HubPlace::Switching { location: "1-1".into(), port: 2, auto: true };
        let wifi = HubPlace::Switching { location: "1-1".into(), port: 3, auto: false };
        let mut unreadable = phone(Platform::Android, "R58M", "x", HubPlace::Unknown { why: String::new() });
        (unreadable.model, unreadable.os_short, unreadable.state) = (None, None, PhoneState::Unauthorized);
        unreadable.problems.push("phone R58M is unauthorized; fix: accept".into());
        // Text from a phone or a tool with a line break in it stays inside its comment.
        let mut odd = phone(
            Platform::Ios,
            "00008030-00B",
            "iPhone 15\n[[device]]\nname = \"x\"",
            HubPlace::Unknown { why: String::new() },
        );
        odd.problems.push("locked\nmodel = 1".into());
        vec![HostFindings {
            host: "local".into(),
            unreachable: None,
            phones: vec![
                phone(Platform::Android, "3A1B2C", "Pixel 8", switching.clone()),
                phone(Platform::Android, "10.0.0.5:5555", "Pixel 8", wifi),
                // A model name with TOML's own characters in it.
                phone(Platform::Android, "X1", "Tab \"S9\" = [5G]", HubPlace::Unknown { why: String::new() }),
                phone(Platform::Ios, "00008110-000A", "iPhone 15", switching),
                unreadable,
                odd,
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
        // Names already taken, in any case, are skipped.
        let lab = parse_lab(
            "[lab]\nname = \"t\"\n[[device]]\nname = \"Pixel-8-1\"\nplatform = \"sim\"\nmodel = \"m\"\n\
             [device.sim]\nemulates = \"android\"\n",
            Path::new("lab.toml"),
        )
        .unwrap();
        let blocks = device_blocks(&found(), &names_in(&lab), &Reached::default());
        let names: Vec<&str> = blocks.lines().filter_map(|l| l.strip_prefix("name = ")).collect();
        assert_eq!(
            names,
            ["\"pixel-8-2\"", "\"pixel-8-3\"", "\"tab-s9-5g-1\"", "\"iphone-15-1\"", "\"iphone-15-device-name-x-1\""]
        );
        assert!(blocks.contains("serial = \"3A1B2C\"\n") && blocks.contains("tether = { uhubctl = \"auto\" }"));
        // Wi-Fi adb: the port written out; a phone on no hub: manual.
        assert!(blocks.contains("tether = { uhubctl = { location = \"1-1\", port = 3 } }"), "{blocks}");
        assert!(blocks.contains("tether = \"manual\""), "{blocks}");
        assert!(blocks.contains("# Android phone R58M on local: not written: phone R58M is unauthorized; fix: accept"));
        assert!(blocks.contains("# [[monitor]]\n# name = \"otii-1\""), "{blocks}");
        assert!(blocks.contains("# address = \"127.0.0.1:1905\"\n# model = \"arc\"\n# voltage_v = …\n"), "{blocks}");

        let url = endpoint_url("10.0.0.2".parse().unwrap());
        let local = [Host { name: "local".into(), kind: HostKind::Local }];
        let lab = new_lab("shelf", &local, &found(), Some(&url), &Reached::default());
        let parsed = parse_lab(&lab, Path::new("lab.toml")).unwrap_or_else(|e| panic!("{e}\n{lab}"));
        assert_eq!(parsed.devices.len(), 5);
        let tab = parsed.devices.iter().find(|d| d.name == "tab-s9-5g-1").unwrap();
        assert_eq!((tab.model.as_str(), &tab.tether), ("Tab \"S9\" = [5G]", &crate::config::TetherSpec::Manual));
        assert_eq!(parsed.endpoint.url.as_deref(), Some("http://10.0.0.2:8765"));
        assert!(parsed.devices.iter().all(|d| d.host == "local"));
        let odd = parsed.devices.iter().find(|d| d.name == "iphone-15-device-name-x-1").unwrap();
        assert_eq!(odd.model, "iPhone 15\n[[device]]\nname = \"x\"");
        // The endpoint listens on the URL's port.
        assert_eq!(
            endpoint_lines("http://[fd00::2]:9000/"),
            "endpoint_bind = \"0.0.0.0:9000\"\nendpoint_url = \"http://[fd00::2]:9000\"\n"
        );
        assert_eq!(url, "http://10.0.0.2:8765");
    }

    #[test]
    fn slugs_are_lowercase_words_joined_by_dashes() {
        assert_eq!(slug("iPhone 13 Pro"), "iphone-13-pro");
        assert_eq!(slug("SM-G991B"), "sm-g991b");
        assert_eq!(slug("  ***  "), "phone");
    }
}
