//! Just enough of the zip format for an .ipa: read `Payload/<name>.app/Info.plist` out of
//! a staged package (stored or deflated entries, found through the central directory, as
//! installd and the idevice crate look for it), and write a small stored package for the
//! tests (`iphone ipa`).

use std::io::{self, Read};

use crate::phone::App;
use crate::profile::{self, Profile};

const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;

fn u16_at(b: &[u8], i: usize) -> Option<usize> {
    b.get(i..i + 2).map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
}

fn u32_at(b: &[u8], i: usize) -> Option<u32> {
    b.get(i..i + 4).map(|s| u32::from_le_bytes(s.try_into().unwrap()))
}

fn bad(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

/// `(name, bytes)` of every file entry.
fn entries(zip: &[u8]) -> io::Result<Vec<(String, Vec<u8>)>> {
    // The end record is the last 22 bytes plus a comment of up to 64 KiB.
    let end = (0..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(zip, i) == Some(END))
        .ok_or_else(|| bad("not a zip archive"))?;
    let count = u16_at(zip, end + 10).ok_or_else(|| bad("short end record"))?;
    let mut at = u32_at(zip, end + 16).ok_or_else(|| bad("short end record"))? as usize;
    let mut out = Vec::new();
    for _ in 0..count {
        if u32_at(zip, at) != Some(CENTRAL) {
            return Err(bad("bad central directory"));
        }
        let field = |o: usize| u16_at(zip, at + o).ok_or_else(|| bad("short central entry"));
        let (method, name_len, extra_len, comment_len) = (field(10)?, field(28)?, field(30)?, field(32)?);
        let size = u32_at(zip, at + 20).ok_or_else(|| bad("short central entry"))? as usize;
        let local = u32_at(zip, at + 42).ok_or_else(|| bad("short central entry"))? as usize;
        let name = String::from_utf8_lossy(zip.get(at + 46..at + 46 + name_len).ok_or_else(|| bad("short name"))?)
            .into_owned();
        at += 46 + name_len + extra_len + comment_len;
        if u32_at(zip, local) != Some(LOCAL) {
            return Err(bad("bad local header"));
        }
        let start = local + 30 + u16_at(zip, local + 26).unwrap_or(0) + u16_at(zip, local + 28).unwrap_or(0);
        let raw = zip.get(start..start + size).ok_or_else(|| bad("entry past the end"))?;
        let data = match method {
            0 => raw.to_vec(),
            8 => {
                let mut d = Vec::new();
                flate2::read::DeflateDecoder::new(raw).read_to_end(&mut d)?;
                d
            }
            m => return Err(bad(&format!("compression method {m}"))),
        };
        if !name.ends_with('/') {
            out.push((name, data));
        }
    }
    Ok(out)
}

/// The app's CFBundleIdentifier and versions from `Payload/*.app/Info.plist`.
pub fn bundle_info(zip: &[u8]) -> io::Result<App> {
    let (_, plist_bytes) = entries(zip)?
        .into_iter()
        .find(|(n, _)| {
            let parts: Vec<&str> = n.split('/').collect();
            parts.len() == 3 && parts[0] == "Payload" && parts[1].ends_with(".app") && parts[2] == "Info.plist"
        })
        .ok_or_else(|| bad("no Payload/*.app/Info.plist"))?;
    let info: plist::Dictionary = plist::from_bytes(&plist_bytes).map_err(|e| bad(&e.to_string()))?;
    let get = |k: &str| info.get(k).and_then(plist::Value::as_string).map(str::to_string);
    Ok(App {
        bundle_id: get("CFBundleIdentifier").ok_or_else(|| bad("Info.plist has no CFBundleIdentifier"))?,
        version: get("CFBundleVersion").unwrap_or_default(),
        short_version: get("CFBundleShortVersionString").unwrap_or_default(),
        executable: get("CFBundleExecutable"),
        profile: Profile::from_info(&info),
    })
}

/// A stored (uncompressed) zip of these files.
pub fn stored_zip(files: &[(&str, &[u8])]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in files {
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let offset = out.len() as u32;
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0]); // version needed, flags, stored, time
            v.extend_from_slice(&[0x21, 0]); // date 1980-01-01
            v.extend_from_slice(&crc.sum().to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(data.len() as u32).to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&[0, 0]); // extra length
        };
        out.extend_from_slice(&LOCAL.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
        central.extend_from_slice(&CENTRAL.to_le_bytes());
        central.extend_from_slice(&[20, 3]); // made by: version 2.0, Unix
        common(&mut central);
        central.extend_from_slice(&[0; 6]); // comment length, disk, internal and
        central.extend_from_slice(&[0, 0, 0xa4, 0x81]); // external attributes (0100644)
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let (cd_offset, cd_len) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    out.extend_from_slice(&END.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    let n = (files.len() as u16).to_le_bytes();
    out.extend_from_slice(&[n[0], n[1], n[0], n[1]]);
    out.extend_from_slice(&cd_len.to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out
}

/// An .ipa holding one app with this identity and behaviour (and a binary of `size`
/// bytes, for bulk).
pub fn make_ipa(bundle_id: &str, version: &str, size: usize, behaviour: Profile) -> Vec<u8> {
    let mut info: plist::Dictionary = [
        ("CFBundleExecutable", "App"),
        ("CFBundleIdentifier", bundle_id),
        ("CFBundleShortVersionString", version),
        ("CFBundleVersion", version),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), plist::Value::from(v)))
    .collect();
    info.insert(profile::INFO_KEY.into(), behaviour.to_info());
    let info = plist::Value::Dictionary(info);
    let binary: Vec<u8> = (0..size).map(|i| (i * 31 % 251) as u8).collect();
    stored_zip(&[("Payload/App.app/Info.plist", &crate::wire::xml(&info)), ("Payload/App.app/App", &binary)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_identity_comes_from_the_top_info_plist() {
        let behaviour = Profile { cpu_pct: 20.0, footprint_mb: 50.0, energy_cost: 12.0 };
        let app = bundle_info(&make_ipa("com.example.energy", "42", 1000, behaviour)).unwrap();
        assert_eq!(
            (app.bundle_id.as_str(), app.version.as_str(), app.short_version.as_str()),
            ("com.example.energy", "42", "42")
        );
        assert_eq!((app.executable.as_deref(), app.profile), (Some("App"), Some(behaviour)));
        // A nested framework's Info.plist is not the app's.
        let nested = stored_zip(&[("Payload/A.app/Frameworks/F.framework/Info.plist", b"<plist/>")]);
        assert!(bundle_info(&nested).unwrap_err().to_string().contains("no Payload"));
        assert!(bundle_info(b"not a zip").is_err());
    }

    #[test]
    fn deflated_entries_are_read() {
        use std::io::Write;
        let mut z = stored_zip(&[("Payload/A.app/Info.plist", b"")]);
        // Rebuild the one entry as deflate: method 8 at offset 8 (local) and 10 (central).
        let info = b"<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>CFBundleIdentifier</key><string>d.e.f</string></dict></plist>";
        let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(info).unwrap();
        let deflated = enc.finish().unwrap();
        let name = b"Payload/A.app/Info.plist";
        let mut local = z[..30].to_vec();
        local[8] = 8;
        local[18..22].copy_from_slice(&(deflated.len() as u32).to_le_bytes());
        local.extend_from_slice(name);
        local.extend_from_slice(&deflated);
        let central_at = 30 + name.len();
        let mut central = z[central_at..central_at + 46 + name.len()].to_vec();
        central[10] = 8;
        central[20..24].copy_from_slice(&(deflated.len() as u32).to_le_bytes());
        let mut end = z[z.len() - 22..].to_vec();
        end[16..20].copy_from_slice(&(local.len() as u32).to_le_bytes());
        z = [local, central, end].concat();
        assert_eq!(bundle_info(&z).unwrap().bundle_id, "d.e.f");
    }
}
