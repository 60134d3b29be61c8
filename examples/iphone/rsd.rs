//! RemoteServiceDiscovery on the tunnel's `serverRSDPort`: the host's `Handshake` message
//! (RemoteXPC, http2.rs) is answered on stream 1 with the phone's `Properties` and the
//! `Services` it runs, each `{Entitlement, Port (a string, as phones send it), Properties
//! {Features, ServiceVersion, UsesRemoteXPC}}` — the shape, keys and ports of the trusted
//! RSD capture in pymobiledevice3's `misc/RemoteXPC.md` (iOS 18.0), cut to the two CoreDevice
//! services the stand-in serves.

use std::io;
use std::sync::Arc;

use crate::Server;
use crate::http2::{ROOT, XpcConn};
use crate::tcp::Stream;
use crate::tunnel::{APP_SERVICE_PORT, DIAGNOSTICS_PORT};
use crate::xpc::{self, Xpc, dict};

pub const APP_SERVICE: &str = "com.apple.coredevice.appservice";
pub const DIAGNOSTICS: &str = "com.apple.coredevice.diagnosticsservice";
/// As the capture's `RemoteXPCVersionFlags` (and what hosts announce).
const REMOTE_XPC_VERSION_FLAGS: u64 = 0x0100_0000_0000_0006;
/// The capture's (iOS 18.0) protocol version.
const MESSAGING_PROTOCOL_VERSION: u64 = 5;

fn service(entitlement: &str, port: u16, features: &[&str]) -> Xpc {
    dict([
        ("Entitlement", entitlement.into()),
        ("Port", port.to_string().into()),
        (
            "Properties",
            dict([
                ("Features", Xpc::Array(features.iter().map(|f| (*f).into()).collect())),
                ("ServiceVersion", Xpc::Int64(1)),
                ("UsesRemoteXPC", true.into()),
            ]),
        ),
    ])
}

/// The handshake's answer for this phone.
pub fn handshake(server: &Server, udid: &str) -> io::Result<Xpc> {
    let p =
        server.store.phone(udid)?.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{udid} detached")))?;
    let serial = p.values.get("SerialNumber").and_then(|v| v.as_str()).unwrap_or(udid).to_string();
    let properties = dict([
        ("BuildVersion", p.build_version.clone().into()),
        ("DeviceClass", "iPhone".into()),
        ("HumanReadableProductVersionString", p.product_version.clone().into()),
        ("OSVersion", p.product_version.clone().into()),
        ("ProductName", "iPhone OS".into()),
        ("ProductType", p.product_type.clone().into()),
        ("RemoteXPCVersionFlags", Xpc::UInt64(REMOTE_XPC_VERSION_FLAGS)),
        ("SensitivePropertiesVisible", true.into()),
        ("SerialNumber", serial.into()),
        ("UniqueDeviceID", p.udid.clone().into()),
    ]);
    let services = dict([
        (
            APP_SERVICE,
            service(
                "com.apple.private.CoreDevice.canInstallCustomerContent",
                APP_SERVICE_PORT,
                &[crate::coredevice::LAUNCH, crate::coredevice::SIGNAL, crate::coredevice::LIST_PROCESSES],
            ),
        ),
        (
            DIAGNOSTICS,
            service(
                "com.apple.private.CoreDevice.canObtainDiagnostics",
                DIAGNOSTICS_PORT,
                &[crate::diagnostics::CAPTURE],
            ),
        ),
    ]);
    Ok(dict([
        ("MessageType", "Handshake".into()),
        ("MessagingProtocolVersion", Xpc::UInt64(MESSAGING_PROTOCOL_VERSION)),
        ("Properties", properties),
        ("Services", services),
        ("UUID", crate::pair::uuid_like(&format!("rsd {udid}")).to_lowercase().into()),
    ]))
}

pub fn serve(stream: Stream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    let Some(mut c) = XpcConn::accept(stream)? else { return Ok(()) };
    while let Some((_, m)) = c.next()? {
        let Some(body) = m.body else { continue };
        let kind = body.get("MessageType").and_then(Xpc::as_str).unwrap_or_default().to_string();
        let version = body.get("MessagingProtocolVersion").and_then(Xpc::as_i64);
        server.store.journal(udid, "rsd", &kind, serde_json::json!({"MessagingProtocolVersion": version}));
        if kind == "Handshake" {
            c.send(ROOT, xpc::ALWAYS_SET | xpc::DATA_PRESENT, Some(handshake(server, udid)?))?;
        }
    }
    Ok(())
}
