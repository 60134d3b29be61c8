//! Which of what was found the lab file already has: phones by adb serial or UDID on the
//! same host, monitors by their Otii address or Monsoon serial.

use super::finding::HostFindings;
use crate::config::{Lab, MonitorKind};
use crate::device::ios::same_udid;

/// Sets `in_lab` on every phone and monitor of `found` the lab has.
pub fn mark_in_lab(lab: &Lab, found: &mut [HostFindings]) {
    for h in found {
        for p in &mut h.phones {
            p.in_lab = lab
                .devices
                .iter()
                .filter(|d| d.host == h.host)
                .find(|d| {
                    let android =
                        d.android().is_some_and(|a| a.serial == p.id || Some(&a.serial) == p.usb_serial.as_ref());
                    android || d.ios().is_some_and(|i| same_udid(&i.udid, &p.id))
                })
                .map(|d| d.name.clone());
        }
        for m in &mut h.monitors {
            m.in_lab = lab
                .monitors
                .iter()
                .filter(|x| x.host == h.host)
                .find(|x| match &x.kind {
                    MonitorKind::Otii { address, .. } => address == &m.address && m.kind == "otii",
                    MonitorKind::Monsoon { serial, .. } => serial == &m.address && m.kind == "monsoon",
                    MonitorKind::Sim => false,
                })
                .map(|x| x.name.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Platform, parse_lab};
    use crate::discover::{FoundPhone, HubPlace, PhoneState};
    use std::path::Path;

    fn phone(host: &str, platform: Platform, id: &str, usb: Option<&str>) -> FoundPhone {
        FoundPhone {
            host: host.into(),
            platform,
            id: id.into(),
            usb_serial: usb.map(String::from),
            model: None,
            os: None,
            os_short: None,
            label: None,
            state: PhoneState::Ready,
            hub: HubPlace::Unknown { why: String::new() },
            in_lab: None,
            problems: vec![],
        }
    }

    #[test]
    fn phones_are_matched_by_serial_or_udid_on_their_own_host() {
        let lab = parse_lab(
            "[lab]\nname = \"t\"\nendpoint_bind = \"0.0.0.0:8765\"\nendpoint_url = \"http://10.0.0.2:8765\"\n[[host]]\nname = \"local\"\n\
             [[device]]\nname = \"pixel\"\nplatform = \"android\"\nmodel = \"P\"\n[device.android]\nserial = \"3A1B\"\n\
             [[device]]\nname = \"iph\"\nplatform = \"ios\"\nmodel = \"I\"\n[device.ios]\nudid = \"00008110000A\"\n",
            Path::new("lab.toml"),
        )
        .unwrap();
        let mut found = vec![HostFindings {
            host: "local".into(),
            unreachable: None,
            phones: vec![
                phone("local", Platform::Android, "10.0.0.5:5555", Some("3A1B")),
                phone("local", Platform::Ios, "00008110-000a", None),
                phone("local", Platform::Android, "OTHER", None),
            ],
            monitors: vec![],
            notes: vec![],
        }];
        let mut elsewhere = found[0].clone();
        elsewhere.host = "shelf-2".into();
        found.push(elsewhere);
        mark_in_lab(&lab, &mut found);
        let names = |h: &HostFindings| h.phones.iter().map(|p| p.in_lab.clone()).collect::<Vec<_>>();
        assert_eq!(names(&found[0]), [Some("pixel".into()), Some("iph".into()), None]);
        assert_eq!(names(&found[1]), [None, None, None]);
    }
}
