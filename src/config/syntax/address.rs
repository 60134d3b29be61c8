//! `host:port` as lab.toml writes it (an adb server, a usbmuxd forward, the traffic
//! endpoint's URL), and whether a host is this machine's loopback.

use std::net::{IpAddr, Ipv6Addr};

use super::value_error::ValueError;

/// `host:port` or `[v6]:port`; with `default_port` the port may be left out. The host is
/// returned without brackets. `Err` says what is wrong, for a message.
pub fn parse_host_port(s: &str, default_port: Option<u16>) -> Result<(String, u16), ValueError> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']').ok_or(ValueError::UnclosedBracket)?;
        v6.parse::<Ipv6Addr>().map_err(|_| ValueError::NotIpv6 { text: v6.into() })?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(ValueError::AfterAddress { rest: after.into() }),
        };
        (v6, port)
    } else {
        match s.split_once(':') {
            Some((_, rest)) if rest.contains(':') => {
                return Err(ValueError::Ipv6WithoutBrackets);
            }
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if !s.starts_with('[') && !is_host_name(host) {
        return Err(ValueError::NotAHost { host: host.into() });
    }
    let port = match (port, default_port) {
        (Some(p), _) => {
            p.parse::<u16>().ok().filter(|&n| n > 0).ok_or_else(|| ValueError::BadPort { port: p.into() })?
        }
        (None, Some(d)) => d,
        (None, None) => return Err(ValueError::NoPort),
    };
    Ok((host.to_string(), port))
}

/// `host:port` as `parse_host_port` reads it back: an IPv6 address in brackets.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// A DNS name or an IPv4 address: letters, digits, `-` and `.`, not starting with `-` or `.`.
fn is_host_name(h: &str) -> bool {
    h.starts_with(|c: char| c.is_ascii_alphanumeric())
        && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// Whether `host` (as `parse_host_port` returns it) always means the machine it is used
/// on: 127.0.0.0/8, ::1 (also IPv4-mapped) and `localhost` names (RFC 6761).
pub fn is_loopback_host(host: &str) -> bool {
    let lower = host.to_ascii_lowercase();
    if lower == "localhost" || lower.ends_with(".localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_forms() {
        assert_eq!(parse_host_port("127.0.0.1:5037", None), Ok(("127.0.0.1".into(), 5037)));
        assert_eq!(parse_host_port("adb-1.lab:5037", None), Ok(("adb-1.lab".into(), 5037)));
        assert_eq!(parse_host_port("[::1]:27015", None), Ok(("::1".into(), 27015)));
        assert_eq!(parse_host_port("192.0.2.10", Some(80)), Ok(("192.0.2.10".into(), 80)));
        assert_eq!(parse_host_port("[fe80::1]", Some(80)), Ok(("fe80::1".into(), 80)));
        // Written back as it is read.
        assert_eq!(join_host_port("::1", 5037), "[::1]:5037");
        assert_eq!(join_host_port("adb-1.lab", 5037), "adb-1.lab:5037");
        assert_eq!(parse_host_port(&join_host_port("fe80::1", 27015), None), Ok(("fe80::1".into(), 27015)));
        for (bad, why) in [
            ("127.0.0.1", "no port"),
            ("127.0.0.1:0", "port `0` is not 1 to 65535"),
            ("127.0.0.1:70000", "port `70000` is not 1 to 65535"),
            ("::1:5037", "an IPv6 address goes in brackets"),
            ("[::1", "`[` without `]`"),
            ("[::1]x", "`x` after the address"),
            ("[zz]:1", "`zz` is not an IPv6 address"),
            ("my host:1", "`my host` is not a host name"),
            (":5037", "`` is not a host name"),
        ] {
            let e = parse_host_port(bad, None).unwrap_err();
            assert!(e.to_string().starts_with(why), "{bad}: {e}");
        }
    }

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost", "LocalHost", "a.localhost"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in ["192.0.2.10", "10.0.0.1", "fe80::1", "lab-mac.local", "localhost.example", "0.0.0.0"] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
