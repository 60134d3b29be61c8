//! lockdownd on port 62078: QueryType, GetValue, StartSession (TLS on the same stream,
//! the device certificate from `pair`), StopSession, StartService, Goodbye. Every reply
//! echoes `Request`; failures are `Error` in the phone's chosen form.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use plist::{Dictionary, Value};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::Server;
use crate::phone::{ErrorForm, Fault, Phone, table_to_plist};
use crate::wire::{self, dict, string};

const QUERY_TYPE_CAPTURE: &[u8] = include_bytes!("../../../tests/fixtures/devices/ios/lockdown_querytype_appium.bin");

/// Keys a real lockdownd answers before a session (the host reads ProductVersion first).
const OPEN_KEYS: &[&str] = &["ProductVersion", "ProductType", "BuildVersion", "DeviceClass", "UniqueDeviceID"];

/// The number libimobiledevice gives each error (`lockdownd_error_t`), for the integer form.
fn error_code(name: &str) -> i64 {
    match name {
        "GetProhibited" => -13,
        "PasswordProtected" => -17,
        "PairingDialogResponsePending" => -19,
        "InvalidHostID" => -21,
        "SessionInactive" => -23,
        "InvalidService" => -27,
        "MissingValue" => -12,
        _ => -256,
    }
}

pub fn error_reply(request: &str, name: &str, form: ErrorForm) -> Dictionary {
    match form {
        ErrorForm::String => dict([("Request", request.into()), ("Error", name.into())]),
        ErrorForm::Integer => dict([
            ("Request", request.into()),
            ("Error", Value::Integer(error_code(name).into())),
            ("ErrorString", name.into()),
        ]),
    }
}

/// The stream after Connect: plaintext, then TLS once a session starts.
enum Link {
    Plain(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ServerConnection, UnixStream>>),
    Gone,
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Tls(s) => s.read(buf),
            Link::Gone => Ok(0),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(buf),
            Link::Tls(s) => s.write(buf),
            Link::Gone => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Link::Plain(s) => s.flush(),
            Link::Tls(s) => s.flush(),
            Link::Gone => Ok(()),
        }
    }
}

/// After StopSession the host may shut its TLS down (libimobiledevice sends close_notify)
/// and go on in plaintext: skip whole TLS records until a plist frame starts. A frame
/// length starting 0x14..=0x17 0x03 would be over 300 MB, so the two cannot be confused.
fn read_after_tls(s: &mut UnixStream) -> io::Result<Option<Dictionary>> {
    loop {
        let mut head = [0u8; 4];
        if s.read(&mut head[..1])? == 0 {
            return Ok(None);
        }
        s.read_exact(&mut head[1..])?;
        if (0x14..=0x17).contains(&head[0]) && head[1] == 3 {
            let mut last = [0u8; 1];
            s.read_exact(&mut last)?;
            let len = u16::from_be_bytes([head[3], last[0]]) as usize;
            io::copy(&mut (&mut *s).take(len as u64), &mut io::sink())?;
            continue;
        }
        let mut body = vec![0; u32::from_be_bytes(head) as usize];
        s.read_exact(&mut body)?;
        return wire::parse(&body).map(Some);
    }
}

fn tls_config(server: &Server, udid: &str) -> io::Result<Option<Arc<rustls::ServerConfig>>> {
    let Some(pairing) = server.store.device_pairing(udid)? else { return Ok(None) };
    let bad = |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
    let cert = CertificateDer::from_pem_slice(pairing.device_certificate_pem.as_bytes()).map_err(|e| bad(&e))?;
    let key = PrivateKeyDer::from_pem_slice(pairing.device_private_key_pem.as_bytes()).map_err(|e| bad(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| bad(&e))?;
    Ok(Some(Arc::new(config)))
}

struct Session {
    id: Option<String>,
    after_tls: bool,
}

pub fn serve(stream: UnixStream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    let mut link = Link::Plain(stream);
    let mut session = Session { id: None, after_tls: false };
    loop {
        let request = match &mut link {
            Link::Plain(s) if session.after_tls => read_after_tls(s)?,
            other => wire::read_plist(other)?,
        };
        let Some(request) = request else { return Ok(()) };
        // The phone file is read per request: a test may change it mid-conversation.
        let Some(phone) = server.store.phone(udid)? else { return Ok(()) };
        let name = string(&request, "Request").unwrap_or_default();
        match name.as_str() {
            "QueryType" if phone.replay => {
                server.store.journal(udid, "lockdownd", "QueryType", serde_json::json!({"replay": true}));
                link.write_all(QUERY_TYPE_CAPTURE)?;
                link.flush()?;
            }
            "StartSession" => {
                let host_id = string(&request, "HostID").unwrap_or_default();
                server.store.journal(udid, "lockdownd", "StartSession", serde_json::json!({"HostID": host_id}));
                let refusal = start_session_refusal(server, &phone, &host_id)?;
                if let Some(error) = refusal {
                    wire::write_plist(&mut link, error_reply("StartSession", error, phone.error_form))?;
                    continue;
                }
                let Some(config) = tls_config(server, udid)? else { unreachable!("checked by the refusal") };
                let id = crate::pair::uuid_like(&format!("session {udid}"));
                let reply = dict([
                    ("Request", "StartSession".into()),
                    ("SessionID", id.clone().into()),
                    ("EnableSessionSSL", true.into()),
                ]);
                wire::write_plist(&mut link, reply)?;
                session.id = Some(id);
                let Link::Plain(plain) = std::mem::replace(&mut link, Link::Gone) else {
                    return Err(io::Error::other("StartSession inside a session"));
                };
                let conn = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
                link = Link::Tls(Box::new(rustls::StreamOwned::new(conn, plain)));
            }
            "StopSession" => {
                server.store.journal(udid, "lockdownd", "StopSession", serde_json::json!({}));
                wire::write_plist(&mut link, dict([("Request", "StopSession".into())]))?;
                session.id = None;
                if let Link::Tls(mut tls) = std::mem::replace(&mut link, Link::Gone) {
                    tls.conn.send_close_notify();
                    while tls.conn.wants_write() {
                        tls.conn.write_tls(&mut tls.sock)?;
                    }
                    link = Link::Plain(tls.sock);
                    session.after_tls = true;
                }
            }
            "Goodbye" => {
                server.store.journal(udid, "lockdownd", "Goodbye", serde_json::json!({}));
                let reply = dict([("Request", "Goodbye".into()), ("Result", "Success".into())]);
                wire::write_plist(&mut link, reply)?;
                return Ok(());
            }
            _ => {
                let reply = answer(server, &phone, &session, &name, &request)?;
                wire::write_plist(&mut link, reply)?;
            }
        }
    }
}

fn start_session_refusal(server: &Server, phone: &Phone, host_id: &str) -> io::Result<Option<&'static str>> {
    if phone.fault == Some(Fault::PasswordProtected) {
        return Ok(Some("PasswordProtected"));
    }
    let trusted =
        server.store.device_pairing(&phone.udid)?.is_some_and(|p| p.trusted_host_ids.iter().any(|h| h == host_id));
    Ok((!trusted || phone.fault == Some(Fault::Untrusted)).then_some("InvalidHostID"))
}

fn values(phone: &Phone) -> Dictionary {
    let mut d = dict([
        ("BuildVersion", phone.build_version.clone().into()),
        ("DeviceClass", "iPhone".into()),
        ("DeviceName", phone.device_name.clone().into()),
        ("ProductType", phone.product_type.clone().into()),
        ("ProductVersion", phone.product_version.clone().into()),
        ("UniqueDeviceID", phone.udid.clone().into()),
    ]);
    d.extend(table_to_plist(&phone.values));
    d
}

fn domain(phone: &Phone, name: &str) -> Option<Dictionary> {
    match name {
        "com.apple.mobile.battery" => Some(table_to_plist(&phone.battery)),
        "com.apple.security.mac.amfi" => Some(dict([("DeveloperModeStatus", phone.developer_mode.into())])),
        _ => None,
    }
}

fn answer(
    server: &Arc<Server>,
    phone: &Phone,
    session: &Session,
    name: &str,
    request: &Dictionary,
) -> io::Result<Dictionary> {
    let form = phone.error_form;
    let udid = phone.udid.as_str();
    Ok(match name {
        "QueryType" => {
            server.store.journal(udid, "lockdownd", "QueryType", serde_json::json!({}));
            dict([("Request", "QueryType".into()), ("Type", "com.apple.mobile.lockdown".into())])
        }
        "GetValue" => {
            let key = string(request, "Key");
            let dom = string(request, "Domain");
            server.store.journal(udid, "lockdownd", "GetValue", serde_json::json!({"Key": key, "Domain": dom}));
            let open = dom.is_none() && key.as_deref().is_some_and(|k| OPEN_KEYS.contains(&k));
            if session.id.is_none() && !open {
                return Ok(error_reply("GetValue", "SessionInactive", form));
            }
            if session.id.is_some() && phone.fault == Some(Fault::Locked) {
                return Ok(error_reply("GetValue", "GetProhibited", form));
            }
            let scope = match &dom {
                None => Some(values(phone)),
                Some(d) => domain(phone, d),
            };
            let value = match (scope, &key) {
                (None, _) => None,
                (Some(all), None) => Some(Value::Dictionary(all)),
                (Some(mut all), Some(k)) => all.remove(k),
            };
            let Some(value) = value else { return Ok(error_reply("GetValue", "MissingValue", form)) };
            let mut reply = dict([("Request", "GetValue".into())]);
            if let Some(d) = dom {
                reply.insert("Domain".into(), d.into());
            }
            if let Some(k) = key {
                reply.insert("Key".into(), k.into());
            }
            reply.insert("Value".into(), value);
            reply
        }
        "StartService" => {
            let service = string(request, "Service").unwrap_or_default();
            server.store.journal(udid, "lockdownd", "StartService", serde_json::json!({"Service": service}));
            if session.id.is_none() {
                return Ok(error_reply("StartService", "SessionInactive", form));
            }
            if !crate::services::offered(phone, &service) {
                return Ok(error_reply("StartService", "InvalidService", form));
            }
            let port = server.open_port(udid, &service);
            dict([
                ("Request", "StartService".into()),
                ("Service", service.into()),
                ("Port", Value::Integer(port.into())),
            ])
        }
        // A host with no record asks to pair; the phone shows its Trust dialog.
        "Pair" => {
            server.store.journal(udid, "lockdownd", "Pair", serde_json::json!({}));
            error_reply("Pair", "PairingDialogResponsePending", form)
        }
        other => {
            server.store.journal(udid, "lockdownd", other, serde_json::json!({}));
            error_reply(other, "InvalidRequest", form)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_come_in_both_forms() {
        let s = error_reply("StartSession", "InvalidHostID", ErrorForm::String);
        assert_eq!(string(&s, "Error").as_deref(), Some("InvalidHostID"));
        assert_eq!(string(&s, "Request").as_deref(), Some("StartSession"));
        let i = error_reply("GetValue", "GetProhibited", ErrorForm::Integer);
        assert_eq!(i.get("Error").and_then(Value::as_signed_integer), Some(-13));
        assert_eq!(string(&i, "ErrorString").as_deref(), Some("GetProhibited"));
    }

    #[test]
    fn tls_records_left_after_stop_session_are_skipped() {
        let (mut host, mut phone) = UnixStream::pair().unwrap();
        let mut bytes = vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x00]; // a close_notify alert
        bytes.extend(wire::plist_frame(&wire::xml(&Value::Dictionary(dict([("Request", "Goodbye".into())])))));
        host.write_all(&bytes).unwrap();
        drop(host);
        let got = read_after_tls(&mut phone).unwrap().unwrap();
        assert_eq!(string(&got, "Request").as_deref(), Some("Goodbye"));
        assert_eq!(read_after_tls(&mut phone).unwrap(), None);
    }
}
