//! The usbmuxd half: one host connection on the Unix socket. ListDevices, Listen,
//! ReadPairRecord, ReadBUID, Save/DeletePairRecord, and Connect, after which the socket
//! is that phone's port (lockdownd on 62078, or a port StartService gave).

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use plist::{Dictionary, Value};

use crate::Server;
use crate::phone::{Fault, Phone};
use crate::wire::{self, MuxFrame, dict, string};

pub const LOCKDOWN_PORT: u16 = 62078;
const LIST_DEVICES_CAPTURE: &[u8] = include_bytes!("../../../tests/fixtures/devices/ios/usbmux_listdevices_appium.bin");
const CONNECT_CAPTURE: &[u8] = include_bytes!("../../../tests/fixtures/devices/ios/usbmux_connect_result_appium.bin");
/// The phone in the appium captures.
pub const REPLAY_UDID: &str = "63c3d055c4f83e960e5980fa68be0fbf7d4ba74c";

// usbmuxd's Result numbers (usbmuxd-proto.h).
pub const RESULT_OK: u64 = 0;
pub const RESULT_BADCOMMAND: u64 = 1;
pub const RESULT_BADDEV: u64 = 2;
pub const RESULT_CONNREFUSED: u64 = 3;
pub const RESULT_BADVERSION: u64 = 6;

pub fn result(number: u64) -> Dictionary {
    dict([("MessageType", "Result".into()), ("Number", Value::Integer(number.into()))])
}

/// A phone as usbmuxd describes it (client.c create_device_attached_plist).
pub fn attached(device_id: u64, phone: &Phone) -> Dictionary {
    let id = Value::Integer(device_id.into());
    let props = dict([
        ("ConnectionSpeed", Value::Integer(480_000_000u64.into())),
        ("ConnectionType", "USB".into()),
        ("DeviceID", id.clone()),
        ("LocationID", Value::Integer((0x1442_3000 + device_id).into())),
        ("ProductID", Value::Integer(0x12a8u64.into())),
        ("SerialNumber", phone.udid.clone().into()),
    ]);
    dict([("DeviceID", id), ("MessageType", "Attached".into()), ("Properties", props.into())])
}

fn send(s: &mut UnixStream, tag: u32, d: Dictionary) -> io::Result<()> {
    s.write_all(&MuxFrame::plist(tag, wire::xml(&Value::Dictionary(d))).encode())?;
    s.flush()
}

fn number(d: &Dictionary, key: &str) -> Option<u64> {
    d.get(key).and_then(Value::as_unsigned_integer)
}

pub fn serve(mut s: UnixStream, server: &Arc<Server>) -> io::Result<()> {
    while let Some(frame) = MuxFrame::read_from(&mut s)? {
        let tag = frame.tag;
        if frame.version != wire::MUX_VERSION_PLIST || frame.message != wire::MUX_MESSAGE_PLIST {
            // The old binary protocol is not spoken; libusbmuxd then retries with plists.
            send(&mut s, tag, result(RESULT_BADVERSION))?;
            continue;
        }
        let req = wire::parse(&frame.body)?;
        let kind = string(&req, "MessageType").unwrap_or_default();
        let phones = server.store.phones()?;
        match kind.as_str() {
            "ListDevices" => {
                server.store.journal("", "usbmuxd", "ListDevices", serde_json::json!({"tag": tag}));
                if phones.iter().any(|p| p.replay && p.udid == REPLAY_UDID) {
                    s.write_all(&wire::with_tag(LIST_DEVICES_CAPTURE, tag))?;
                    continue;
                }
                let list = phones.iter().zip(1..).map(|(p, id)| Value::Dictionary(attached(id, p))).collect();
                send(&mut s, tag, dict([("DeviceList", Value::Array(list))]))?;
            }
            "Listen" => {
                server.store.journal("", "usbmuxd", "Listen", serde_json::json!({}));
                send(&mut s, tag, result(RESULT_OK))?;
                for (p, id) in phones.iter().zip(1..) {
                    send(&mut s, 0, attached(id, p))?;
                }
            }
            "ReadBUID" => {
                server.store.journal("", "usbmuxd", "ReadBUID", serde_json::json!({}));
                send(&mut s, tag, dict([("BUID", server.store.system_buid()?.into())]))?;
            }
            "ReadPairRecord" => {
                let udid = string(&req, "PairRecordID").unwrap_or_default();
                server.store.journal(&udid, "usbmuxd", "ReadPairRecord", serde_json::json!({}));
                let not_paired = phones.iter().any(|p| p.udid == udid && p.fault == Some(Fault::NotPaired));
                match std::fs::read(server.store.pair_record_path(&udid)) {
                    Ok(bytes) if !not_paired => send(&mut s, tag, dict([("PairRecordData", Value::Data(bytes))]))?,
                    _ => send(&mut s, tag, result(RESULT_BADDEV))?, // ENOENT, as usbmuxd says it
                }
            }
            "SavePairRecord" => {
                let udid = string(&req, "PairRecordID").unwrap_or_default();
                server.store.journal(&udid, "usbmuxd", "SavePairRecord", serde_json::json!({}));
                let path = server.store.pair_record_path(&udid);
                std::fs::create_dir_all(path.parent().unwrap())?;
                let data = req.get("PairRecordData").and_then(Value::as_data).unwrap_or_default();
                std::fs::write(path, data)?;
                send(&mut s, tag, result(RESULT_OK))?;
            }
            "DeletePairRecord" => {
                let udid = string(&req, "PairRecordID").unwrap_or_default();
                server.store.journal(&udid, "usbmuxd", "DeletePairRecord", serde_json::json!({}));
                let _ = std::fs::remove_file(server.store.pair_record_path(&udid));
                send(&mut s, tag, result(RESULT_OK))?;
            }
            "Connect" => {
                let device_id = number(&req, "DeviceID").unwrap_or(0);
                // PortNumber is in network byte order (htons) inside the integer.
                let port = (number(&req, "PortNumber").unwrap_or(0) as u16).swap_bytes();
                let phone = device_id.checked_sub(1).and_then(|i| phones.get(i as usize));
                let udid = phone.map(|p| p.udid.clone()).unwrap_or_default();
                server.store.journal(
                    &udid,
                    "usbmuxd",
                    "Connect",
                    serde_json::json!({"DeviceID": device_id, "port": port}),
                );
                let Some(phone) = phone else {
                    send(&mut s, tag, result(RESULT_BADDEV))?;
                    continue;
                };
                let service = if port == LOCKDOWN_PORT { None } else { server.service_at(&udid, port) };
                if port != LOCKDOWN_PORT && service.is_none() {
                    send(&mut s, tag, result(RESULT_CONNREFUSED))?;
                    continue;
                }
                if phone.replay && port == LOCKDOWN_PORT {
                    s.write_all(&wire::with_tag(CONNECT_CAPTURE, tag))?;
                } else {
                    send(&mut s, tag, result(RESULT_OK))?;
                }
                return match service {
                    None => crate::lockdown::serve(s, server, &udid),
                    Some(service) => crate::services::serve(s, server, &udid, &service),
                };
            }
            other => {
                server.store.journal("", "usbmuxd", other, serde_json::json!({}));
                send(&mut s, tag, result(RESULT_BADCOMMAND))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attached_device_has_the_fields_of_the_appium_capture() {
        let capture = MuxFrame::read_from(&mut &LIST_DEVICES_CAPTURE[..]).unwrap().unwrap();
        let real = wire::parse(&capture.body).unwrap();
        let real = real["DeviceList"].as_array().unwrap()[0].as_dictionary().unwrap().clone();
        let phone: Phone = toml::from_str(&format!(
            "DeviceName=\"a\"\nProductType=\"b\"\nProductVersion=\"16.0\"\nBuildVersion=\"c\"\nUniqueDeviceID=\"{REPLAY_UDID}\"\n"
        ))
        .unwrap();
        let ours = attached(1, &phone);
        let keys = |d: &Dictionary| d.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ours), keys(&real));
        let (ours_p, real_p) =
            (ours["Properties"].as_dictionary().unwrap(), real["Properties"].as_dictionary().unwrap());
        assert_eq!(keys(ours_p), keys(real_p));
        for k in ["ConnectionType", "SerialNumber", "ProductID", "DeviceID", "ConnectionSpeed"] {
            assert_eq!(ours_p[k], real_p[k], "{k}");
        }
    }
}
