//! `adb devices -l`: the phones an adb server sees, each with its state and the
//! `key:value` fields adb prints after it (`usb:1-1 product:razor model:Nexus_7
//! device:flo transport_id:3`). What `lab discover` starts from.
//!
//! Format (adb's `transport.cpp`, `list_transports` with `-l`): a header line `List of
//! devices attached`, then per device `SERIAL<spaces>STATE[ FIELDS]`. The state is one
//! word (`device`, `offline`, `unauthorized`, `authorizing`, `bootloader`, `recovery`,
//! `sideload`, `rescue`, `host`, `connecting`), except `no permissions (…); see […]` whose
//! text has spaces of its own. Lines a starting server prints (`* daemon started
//! successfully`) are not devices.

use serde::Serialize;

/// A phone's state as adb reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AdbState {
    /// Usable.
    Device,
    /// The phone has not accepted this computer's key yet.
    Unauthorized,
    Offline,
    /// The host user may not open the USB device (udev rules), with adb's text.
    NoPermissions(String),
    /// Any other state word (`bootloader`, `recovery`, `authorizing`, …).
    Other(String),
}

/// One line of `adb devices -l`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdbEntry {
    pub serial: String,
    pub state: AdbState,
    /// The USB path (`1-1.2`) for a phone on USB; none over TCP or for an emulator.
    pub usb: Option<String>,
    pub product: Option<String>,
    /// adb's model, spaces written as `_` (`Nexus_7`).
    pub model: Option<String>,
    pub device: Option<String>,
    pub transport_id: Option<u64>,
}

/// Every device line of `text`, in order; other lines are skipped.
pub fn parse(text: &str) -> Vec<AdbEntry> {
    text.lines().filter_map(entry).collect()
}

fn entry(line: &str) -> Option<AdbEntry> {
    let line = line.trim_end();
    if line.is_empty() || line.starts_with('*') || line.starts_with("List of devices") || line.starts_with("adb ") {
        return None;
    }
    let (serial, rest) = line.split_once(|c: char| c.is_whitespace())?;
    let rest = rest.trim_start();
    let (state, fields) = if let Some(after) = rest.strip_prefix("no permissions") {
        // `no permissions (…); see [http://…]`, then the fields.
        let end = after.find(']').map(|i| i + 1).or_else(|| after.find(" usb:")).unwrap_or(after.len());
        (AdbState::NoPermissions(format!("no permissions{}", &after[..end]).trim().to_string()), &after[end..])
    } else {
        let (word, fields) = rest.split_once(' ').unwrap_or((rest, ""));
        let state = match word {
            "device" => AdbState::Device,
            "unauthorized" => AdbState::Unauthorized,
            "offline" => AdbState::Offline,
            "" => return None,
            other => AdbState::Other(other.to_string()),
        };
        (state, fields)
    };
    let mut e = AdbEntry {
        serial: serial.to_string(),
        state,
        usb: None,
        product: None,
        model: None,
        device: None,
        transport_id: None,
    };
    for token in fields.split_whitespace() {
        let Some((key, value)) = token.split_once(':') else { continue };
        let value = Some(value.to_string());
        match key {
            "usb" => e.usb = value,
            "product" => e.product = value,
            "model" => e.model = value,
            "device" => e.device = value,
            "transport_id" => e.transport_id = value.and_then(|v| v.parse().ok()),
            _ => {}
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_fields_and_lines_that_are_no_devices() {
        let text = "* daemon not running; starting now at tcp:5037\n* daemon started successfully\n\
List of devices attached\n\
R58M123ABC             device usb:1-1.2 product:beyond1lteeea model:SM_G973F device:beyond1 transport_id:3\n\
0a388e93               unauthorized usb:1-1.3 transport_id:4\n\
127.0.0.1:5555         offline transport_id:5\n\
HT4A1JT00235           no permissions (missing udev rules? user is in the plugdev group); see \
[http://developer.android.com/tools/device.html] usb:2-1 transport_id:6\n\
emulator-5554          bootloader\n\n";
        let got = parse(text);
        assert_eq!(got.len(), 5, "{got:#?}");
        assert_eq!(got[0].serial, "R58M123ABC");
        assert_eq!(got[0].state, AdbState::Device);
        assert_eq!(got[0].usb.as_deref(), Some("1-1.2"));
        assert_eq!(got[0].model.as_deref(), Some("SM_G973F"));
        assert_eq!(got[0].transport_id, Some(3));
        assert_eq!((got[1].state.clone(), got[1].usb.as_deref()), (AdbState::Unauthorized, Some("1-1.3")));
        assert_eq!((got[2].serial.as_str(), got[2].state.clone()), ("127.0.0.1:5555", AdbState::Offline));
        assert!(
            matches!(&got[3].state, AdbState::NoPermissions(t) if t.starts_with("no permissions (missing udev") && t.ends_with(".html]")),
            "{:?}",
            got[3].state
        );
        assert_eq!((got[3].usb.as_deref(), got[3].transport_id), (Some("2-1"), Some(6)));
        assert_eq!(got[4].state, AdbState::Other("bootloader".into()));
        assert!(parse("List of devices attached\n\n").is_empty());
        assert!(parse("").is_empty());
    }
}
