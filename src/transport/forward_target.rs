//! Where a port forward leads on the host: a TCP port or a Unix socket.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The far end of a forward, as seen from the host: `tcp:HOST:PORT` or `unix:/PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ForwardTarget {
    /// A TCP port reached from the host (`127.0.0.1` is the host itself).
    Tcp { host: String, port: u16 },
    /// A Unix socket on the host, e.g. usbmuxd's `/var/run/usbmuxd`.
    Unix(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad forward target `{given}`: {why}; fix: write tcp:HOST:PORT (e.g. tcp:127.0.0.1:5037) or unix:/PATH \
     (e.g. unix:/var/run/usbmuxd)"
)]
pub struct ForwardTargetError {
    pub given: String,
    pub why: String,
}

impl FromStr for ForwardTarget {
    type Err = ForwardTargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| ForwardTargetError { given: s.to_string(), why: why.to_string() };
        if let Some(rest) = s.strip_prefix("tcp:") {
            let (host, port) = rest.rsplit_once(':').ok_or_else(|| bad("no port after the host"))?;
            // `[::1]:5037`: brackets keep an IPv6 address's colons apart from the port's.
            let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
                Some(v6) => v6,
                None if host.contains(':') => return Err(bad("an IPv6 address needs brackets: tcp:[::1]:PORT")),
                None => host,
            };
            if host.is_empty() {
                return Err(bad("no host before the port"));
            }
            let port: u16 = port.parse().map_err(|_| bad(&format!("port `{port}` is not a number from 1 to 65535")))?;
            if port == 0 {
                return Err(bad("port 0 cannot be connected to"));
            }
            Ok(ForwardTarget::Tcp { host: host.to_string(), port })
        } else if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(bad("a Unix socket path must be absolute"));
            }
            Ok(ForwardTarget::Unix(PathBuf::from(path)))
        } else {
            Err(bad("it must start with tcp: or unix:"))
        }
    }
}

impl fmt::Display for ForwardTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardTarget::Tcp { host, port } if host.contains(':') => write!(f, "tcp:[{host}]:{port}"),
            ForwardTarget::Tcp { host, port } => write!(f, "tcp:{host}:{port}"),
            ForwardTarget::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_back_the_same() {
        for s in ["tcp:127.0.0.1:5037", "tcp:adb-box.local:22", "tcp:[::1]:8080", "unix:/var/run/usbmuxd"] {
            let t: ForwardTarget = s.parse().unwrap();
            assert_eq!(t.to_string(), s);
        }
        assert_eq!(
            "tcp:localhost:5037".parse::<ForwardTarget>().unwrap(),
            ForwardTarget::Tcp { host: "localhost".into(), port: 5037 }
        );
        assert_eq!("tcp:[::1]:1".parse::<ForwardTarget>().unwrap(), ForwardTarget::Tcp { host: "::1".into(), port: 1 });
        assert_eq!("unix:/tmp/a b.sock".parse::<ForwardTarget>().unwrap(), ForwardTarget::Unix("/tmp/a b.sock".into()));
    }

    #[test]
    fn bad_targets_say_what_is_wrong_and_how_to_write_it() {
        let why = |s: &str| s.parse::<ForwardTarget>().unwrap_err().why;
        assert_eq!(why("127.0.0.1:5037"), "it must start with tcp: or unix:");
        assert_eq!(why("ssh:host:22"), "it must start with tcp: or unix:");
        assert_eq!(why("tcp:5037"), "no port after the host");
        assert_eq!(why("tcp::5037"), "no host before the port");
        assert_eq!(why("tcp:host:http"), "port `http` is not a number from 1 to 65535");
        assert_eq!(why("tcp:host:70000"), "port `70000` is not a number from 1 to 65535");
        assert_eq!(why("tcp:host:0"), "port 0 cannot be connected to");
        assert_eq!(why("tcp:::1:80"), "an IPv6 address needs brackets: tcp:[::1]:PORT");
        assert_eq!(why("unix:var/run/usbmuxd"), "a Unix socket path must be absolute");
        assert_eq!(why("unix:"), "a Unix socket path must be absolute");
        let msg = "usbmuxd".parse::<ForwardTarget>().unwrap_err().to_string();
        assert_eq!(
            msg,
            "bad forward target `usbmuxd`: it must start with tcp: or unix:; fix: write tcp:HOST:PORT \
             (e.g. tcp:127.0.0.1:5037) or unix:/PATH (e.g. unix:/var/run/usbmuxd)"
        );
    }
}
