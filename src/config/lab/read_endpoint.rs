//! `[lab] endpoint_bind` and `endpoint_url`: where the traffic endpoint listens and the
//! URL devices are given; and the rule that a phone is never given a loopback URL (a
//! phone on Wi-Fi cannot reach this machine's 127.0.0.1).

use std::net::SocketAddr;

use crate::config::syntax::address::{is_loopback_host, parse_host_port};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{DeviceSpec, LabEndpoint, Platform};

pub(crate) const ENDPOINT_KEYS: &[&str] = &["endpoint_bind", "endpoint_url"];

const PHONE_FIX: &str = "under [lab], set `endpoint_bind = \"0.0.0.0:8765\"` (every interface, a fixed port) and \
     `endpoint_url = \"http://<this machine's LAN address>:8765\"` (see docs/hosts.md, \"Phones reach the traffic endpoint\")";

/// Reads the endpoint keys of `[lab]`; `None` after reporting when any is wrong (then
/// phones are not checked against it, which would only repeat the problem).
pub(crate) fn read_lab_endpoint(t: &Table, p: &mut Problems) -> Option<LabEndpoint> {
    let before = p.len();
    let bind_field = t.get("endpoint_bind");
    let bind = bind_field.as_ref().and_then(|f| read_bind(f, p));
    let url_field = t.get("endpoint_url");
    let url = url_field.as_ref().and_then(|f| read_url(f, p));
    if p.len() != before {
        return None;
    }
    if let Some(uf) = &url_field {
        match (&bind_field, bind) {
            (None, _) => uf.problem(
                p,
                "`endpoint_url` needs `endpoint_bind`: without it the endpoint listens where the runbook says \
                 (a free port on 127.0.0.1 by default), not where the URL points",
                "add `endpoint_bind = \"0.0.0.0:PORT\"` under [lab], with the URL's port",
            ),
            (Some(bf), Some(b)) if b.port() == 0 => bf.problem(
                p,
                "port 0 picks a free port, which devices given `endpoint_url` could not know",
                format!(
                    "give it a fixed port, e.g. `endpoint_bind = \"{}\"`, and use that port in `endpoint_url`",
                    SocketAddr::new(b.ip(), 8765)
                ),
            ),
            _ => {}
        }
    }
    (p.len() == before).then_some(LabEndpoint { bind, url })
}

fn read_bind(f: &Field, p: &mut Problems) -> Option<SocketAddr> {
    let text = f.text(p)?;
    match text.parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            f.problem(
                p,
                format!("\"{text}\" is not an IP address and port"),
                "write `endpoint_bind = \"0.0.0.0:8765\"` (every interface) or this machine's LAN address and a port",
            );
            None
        }
    }
}

/// `http://HOST[:PORT]`, with at most a trailing `/`: trial URLs are `<url>/t/<token>`.
/// Returned without the trailing `/`.
fn read_url(f: &Field, p: &mut Problems) -> Option<String> {
    let text = f.text(p)?;
    let example = "write `endpoint_url = \"http://192.0.2.10:8765\"` (this machine's LAN address and the bound port)";
    let Some(rest) = text.strip_prefix("http://") else {
        let message = if text.starts_with("https://") {
            format!("\"{text}\": the traffic endpoint speaks plain HTTP")
        } else {
            format!("\"{text}\" is not an http:// URL")
        };
        f.problem(p, message, example);
        return None;
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains(['/', '?', '#']) {
        f.problem(p, format!("\"{text}\" has a path; trial URLs are <url>/t/<token>"), example);
        return None;
    }
    match parse_host_port(authority, Some(80)) {
        Ok((host, _)) if host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) => {
            f.problem(p, format!("\"{text}\": {host} is not an address a device can connect to"), example);
            None
        }
        Ok(_) => Some(text.trim_end_matches('/').to_string()),
        Err(why) => {
            f.problem(p, format!("\"{text}\" is not a valid URL: {why}"), example);
            None
        }
    }
}

/// Reports a phone that would be given a loopback URL, at its `platform` key.
pub(crate) fn check_phone_reaches(endpoint: &LabEndpoint, device: &DeviceSpec, t: &Table, p: &mut Problems) {
    let platform = device.platform();
    if !matches!(platform, Platform::Android | Platform::Ios) {
        return;
    }
    let Some((why, fix)) = loopback_reason(endpoint) else { return };
    if let Some(f) = t.get("platform") {
        let name = &device.name;
        f.problem(p, format!("{platform} device `{name}` would be given {why}, which a phone cannot reach"), fix);
    }
}

/// Whether phones would be given a loopback URL by this lab (they need `endpoint_url`).
pub fn phones_cannot_reach(endpoint: &LabEndpoint) -> bool {
    loopback_reason(endpoint).is_some()
}

/// Why devices would be given a loopback URL, and the fix; `None` when they would not.
fn loopback_reason(endpoint: &LabEndpoint) -> Option<(String, &'static str)> {
    let why = match (&endpoint.url, endpoint.bind) {
        (Some(url), _) => {
            let authority = url.trim_start_matches("http://");
            let loopback = parse_host_port(authority, Some(80)).is_ok_and(|(h, _)| is_loopback_host(&h));
            let fix = "set `endpoint_url` under [lab] to this machine's LAN address, e.g. \"http://192.0.2.10:8765\"";
            return loopback
                .then(|| (format!("the traffic endpoint at {url} (`endpoint_url`), a loopback address"), fix));
        }
        (None, None) => {
            "the lab sets no `endpoint_url`, and the runbook's endpoint listens on 127.0.0.1 by default".into()
        }
        (None, Some(b)) if b.ip().is_unspecified() => {
            format!(
                "`endpoint_bind = \"{b}\"` listens on every interface, but without `endpoint_url` devices are given 127.0.0.1"
            )
        }
        (None, Some(b)) if b.ip().is_loopback() => format!("`endpoint_bind = \"{b}\"` and no `endpoint_url`"),
        (None, Some(_)) => return None,
    };
    Some((format!("a loopback URL for the traffic endpoint ({why})"), PHONE_FIX))
}
