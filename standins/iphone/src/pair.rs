//! `iphone pair`: what pairing a host with a phone leaves on both sides. The host gets
//! usbmuxd's record (`/var/lib/lockdown/<UDID>.plist`: the root, host and device
//! certificates and the root and host keys as PEM `<data>`, HostID, SystemBUID,
//! WiFiMACAddress, EscrowBag, UDID); the phone keeps its device certificate and key and
//! trusts the HostID. Keys are ECDSA P-256 (rcgen's default with ring, which cannot make
//! RSA keys); real records hold RSA-2048 keys, see docs/platforms/ios-standin.md.

use std::io;
use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair};
use sha2::{Digest, Sha256};

use crate::phone::{DevicePairing, Store};

fn err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// An upper-case UUID-shaped id (HostID, SystemBUID, SessionID), unique per call.
pub fn uuid_like(seed: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let h = hex::encode_upper(Sha256::digest(format!("{seed} {nanos} {} {n}", std::process::id())));
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

fn params(common_name: &str, ca: bool) -> io::Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    p.distinguished_name = dn;
    if ca {
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    Ok(p)
}

/// Makes the certificates, trusts the new HostID on the phone and writes the host's
/// record to DIR/pair/<UDID>.plist (and `out`). Returns the record's path.
pub fn pair(store: &Store, udid: &str, out: Option<&Path>) -> io::Result<std::path::PathBuf> {
    let root_key = KeyPair::generate().map_err(err)?;
    let root = CertifiedIssuer::self_signed(params("Root Certification Authority", true)?, root_key).map_err(err)?;
    let host_key = KeyPair::generate().map_err(err)?;
    let host = params("Host", false)?.signed_by(&host_key, &root).map_err(err)?;
    let device_key = KeyPair::generate().map_err(err)?;
    let device = params("Device", false)?.signed_by(&device_key, &root).map_err(err)?;

    let host_id = uuid_like(&format!("host {udid}"));
    let data = |s: String| plist::Value::Data(s.into_bytes());
    let record: plist::Dictionary = [
        ("DeviceCertificate", data(device.pem())),
        ("EscrowBag", plist::Value::Data(Sha256::digest(host_id.as_bytes()).to_vec())),
        ("HostCertificate", data(host.pem())),
        ("HostID", host_id.clone().into()),
        ("HostPrivateKey", data(host_key.serialize_pem())),
        ("RootCertificate", data(root.pem())),
        ("RootPrivateKey", data(root.key().serialize_pem())),
        ("SystemBUID", store.system_buid()?.into()),
        ("UDID", udid.into()),
        ("WiFiMACAddress", "f0:99:b6:00:00:01".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();

    let mut trusted = store.device_pairing(udid)?.map(|p| p.trusted_host_ids).unwrap_or_default();
    trusted.push(host_id);
    let device_side = DevicePairing {
        device_certificate_pem: device.pem(),
        device_private_key_pem: device_key.serialize_pem(),
        trusted_host_ids: trusted,
    };
    std::fs::create_dir_all(store.phones_dir())?;
    std::fs::write(store.device_pairing_path(udid), serde_json::to_vec_pretty(&device_side)?)?;

    let path = store.pair_record_path(udid);
    std::fs::create_dir_all(path.parent().unwrap())?;
    plist::to_file_xml(&path, &record).map_err(err)?;
    if let Some(out) = out {
        plist::to_file_xml(out, &record).map_err(err)?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairing_writes_a_record_with_every_key_and_the_phone_trusts_its_host() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let out = dir.path().join("copy.plist");
        let path = pair(&store, "U1", Some(&out)).unwrap();
        let record: plist::Dictionary = plist::from_file(&path).unwrap();
        for key in ["DeviceCertificate", "HostCertificate", "HostPrivateKey", "RootCertificate", "RootPrivateKey"] {
            let pem = String::from_utf8(record[key].as_data().unwrap().to_vec()).unwrap();
            assert!(pem.starts_with("-----BEGIN "), "{key}: {pem}");
        }
        let host_id = record["HostID"].as_string().unwrap();
        assert_eq!(host_id.len(), 36);
        assert_eq!(record["SystemBUID"].as_string(), Some(store.system_buid().unwrap().as_str()));
        let phone_side = store.device_pairing("U1").unwrap().unwrap();
        assert_eq!(phone_side.trusted_host_ids, vec![host_id.to_string()]);
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&path).unwrap());
        // A second host is trusted too; the first stays trusted.
        pair(&store, "U1", None).unwrap();
        assert_eq!(store.device_pairing("U1").unwrap().unwrap().trusted_host_ids.len(), 2);
    }
}
