//! RemoteServiceDiscovery on the tunnel's `serverRSDPort`: the host's `Handshake` message
//! (RemoteXPC, http2.rs) is answered on stream 1 with the phone's `Properties` and the
//! `Services` it runs, each `{Entitlement, Port (a string, as phones send it), Properties}`
//! — the shape, keys, properties and ports of the trusted RSD capture in pymobiledevice3's
//! `misc/RemoteXPC.md` (iOS 18.0), cut to the services the stand-in serves: the two
//! CoreDevice services (`{Features, ServiceVersion, UsesRemoteXPC}`), Instruments'
//! dtservicehub (`{Features: [com.apple.dt.profile], version: 1}`, DTX on the stream) and the
//! pcapd shim (`{UsesRemoteXPC: false}`, shim.rs). What the developer image brings is listed
//! only while it is mounted (pymobiledevice3's docs: CoreDevice services "require both an
//! RSD tunnel and the Developer Disk Image").

use std::io;
use std::sync::Arc;

use crate::Server;
use crate::http2::{ROOT, XpcConn};
use crate::phone::Phone;
use crate::tcp::Stream;
use crate::tunnel::{APP_SERVICE_PORT, DIAGNOSTICS_PORT, DTSERVICEHUB_PORT, PCAPD_SHIM_PORT};
use crate::xpc::{self, Xpc, dict};

pub const APP_SERVICE: &str = "com.apple.coredevice.appservice";
pub const DIAGNOSTICS: &str = "com.apple.coredevice.diagnosticsservice";
pub const DTSERVICEHUB: &str = "com.apple.instruments.dtservicehub";
/// The services inside the tunnel, by port.
pub const PORTS: [(u16, &str); 4] = [
    (APP_SERVICE_PORT, APP_SERVICE),
    (DIAGNOSTICS_PORT, DIAGNOSTICS),
    (DTSERVICEHUB_PORT, DTSERVICEHUB),
    (PCAPD_SHIM_PORT, crate::shim::PCAPD),
];
/// As the capture's `RemoteXPCVersionFlags` (and what hosts announce).
const REMOTE_XPC_VERSION_FLAGS: u64 = 0x0100_0000_0000_0006;
/// The capture's (iOS 18.0) protocol version.
const MESSAGING_PROTOCOL_VERSION: u64 = 5;

/// Whether the phone runs `service` now: the lockdown shim always, the rest with the
/// developer image.
pub fn runs(phone: &Phone, service: &str) -> bool {
    service == crate::shim::PCAPD || crate::services::developer_services(phone)
}

fn features(names: &[&str]) -> Xpc {
    Xpc::Array(names.iter().map(|f| (*f).into()).collect())
}

fn core_device(features_: &[&str]) -> Xpc {
    dict([("Features", features(features_)), ("ServiceVersion", Xpc::Int64(1)), ("UsesRemoteXPC", true.into())])
}

/// A service's entry, by its name.
fn entry(name: &str) -> (&'static str, Xpc) {
    let (entitlement, properties) = match name {
        APP_SERVICE => (
            "com.apple.private.CoreDevice.canInstallCustomerContent",
            core_device(&[crate::coredevice::LAUNCH, crate::coredevice::SIGNAL, crate::coredevice::LIST_PROCESSES]),
        ),
        DIAGNOSTICS => {
            ("com.apple.private.CoreDevice.canObtainDiagnostics", core_device(&[crate::diagnostics::CAPTURE]))
        }
        DTSERVICEHUB => (
            "com.apple.private.dt.instruments.dtservicehub.client",
            dict([("Features", features(&["com.apple.dt.profile"])), ("version", Xpc::Int64(1))]),
        ),
        _ => ("com.apple.mobile.lockdown.remote.trusted", dict([("UsesRemoteXPC", false.into())])),
    };
    (entitlement, properties)
}

fn services(phone: &Phone) -> Xpc {
    Xpc::Dictionary(
        PORTS
            .iter()
            .filter(|(_, name)| runs(phone, name))
            .map(|(port, name)| {
                let (entitlement, properties) = entry(name);
                let e = dict([
                    ("Entitlement", entitlement.into()),
                    ("Port", port.to_string().into()),
                    ("Properties", properties),
                ]);
                (name.to_string(), e)
            })
            .collect(),
    )
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
    let services = services(&p);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn phone(extra: &str) -> Phone {
        toml::from_str(&format!(
            "DeviceName=\"a\"\nProductType=\"iPhone15,2\"\nProductVersion=\"17.5.1\"\nBuildVersion=\"21F90\"\n\
             UniqueDeviceID=\"U\"\n{extra}\n"
        ))
        .unwrap()
    }

    fn listed(p: &Phone) -> Vec<(String, Xpc)> {
        match services(p) {
            Xpc::Dictionary(d) => d,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn with_the_image_every_service_is_listed_on_its_own_port_as_the_capture_shapes_it() {
        let got = listed(&phone(""));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [APP_SERVICE, DIAGNOSTICS, DTSERVICEHUB, crate::shim::PCAPD]);
        let ports: Vec<&str> = got.iter().map(|(_, e)| e.get("Port").and_then(Xpc::as_str).unwrap()).collect();
        assert_eq!(ports, ["50056", "50063", "49664", "49614"]);
        let hub = &got[2].1;
        assert_eq!(
            hub.get("Entitlement").and_then(Xpc::as_str),
            Some("com.apple.private.dt.instruments.dtservicehub.client")
        );
        let props = hub.get("Properties").unwrap();
        assert_eq!(props.get("version").and_then(Xpc::as_i64), Some(1));
        assert!(props.get("UsesRemoteXPC").is_none(), "DTX, not RemoteXPC");
        let shim = &got[3].1;
        assert_eq!(shim.get("Entitlement").and_then(Xpc::as_str), Some("com.apple.mobile.lockdown.remote.trusted"));
        assert_eq!(shim.get("Properties").unwrap().to_json(), serde_json::json!({"UsesRemoteXPC": false}));
    }

    #[test]
    fn without_the_image_only_the_lockdown_shim_runs() {
        let p = phone("developer_image_mounted = false");
        let names: Vec<String> = listed(&p).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, [crate::shim::PCAPD]);
        assert!(!runs(&p, DTSERVICEHUB) && !runs(&p, APP_SERVICE) && runs(&p, crate::shim::PCAPD));
    }
}
