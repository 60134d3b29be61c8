//! What a launched app does on the network: when its environment has `LAB_ENDPOINT_URL`
//! (an `http://host[:port]/path` URL) the stand-in sends real HTTP/1.1 GET requests there
//! every `LAB_REQUEST_INTERVAL_MS` (default 1000) until the pid is killed or
//! `LAB_DURATION_MS` has passed. One connection per request (`Connection: close`), so
//! every request is a whole TCP conversation the tap can show; the packets pcapd shows are
//! made from the bytes really sent and received (packets.rs), on the connection's real
//! IPv4 addresses and ports. The phone file's `hosts` resolve names first (the phone's
//! DNS on the lab's network), then the system; only IPv4 addresses are tried. A URL that does
//! not resolve, refuses or times out gives no traffic, only journal lines.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::Server;
use crate::packets;
use crate::processes::{Process, Processes};

pub const JOURNAL: &str = "workload";
const DEFAULT_INTERVAL_MS: u64 = 1000;
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// A response larger than this is read no further (the tap would show it, the test needs not).
const MAX_RESPONSE: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub host: String,
    pub port: u16,
    pub path: String,
    pub interval: Duration,
    pub duration: Option<Duration>,
}

fn env_ms(p: &Process, key: &str) -> Option<u64> {
    match p.env.get(key)? {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

impl Plan {
    /// The workload a process's environment asks for; `Err` for a URL the app could not use.
    pub fn of(p: &Process) -> Option<Result<Plan, String>> {
        let url = p.env.get("LAB_ENDPOINT_URL")?.as_str().unwrap_or_default().to_string();
        let interval =
            Duration::from_millis(env_ms(p, "LAB_REQUEST_INTERVAL_MS").unwrap_or(DEFAULT_INTERVAL_MS).max(1));
        let duration = env_ms(p, "LAB_DURATION_MS").map(Duration::from_millis);
        Some(parse_url(&url).map(|(host, port, path)| Plan { host, port, path, interval, duration }))
    }
}

fn parse_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs are modelled"))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().map_err(|_| format!("{url}: bad port"))?),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok((host.to_string(), port, path.to_string()))
}

/// What one request gave: the connection's addresses, the bytes both ways.
struct Exchange {
    app: SocketAddrV4,
    server: SocketAddrV4,
    request: Vec<u8>,
    response: Vec<u8>,
}

fn ipv4(a: SocketAddr) -> Option<SocketAddrV4> {
    match a {
        SocketAddr::V4(v4) => Some(v4),
        SocketAddr::V6(_) => None,
    }
}

/// Where the phone sends a request to `plan`'s host: the phone file's `hosts` first.
fn resolve(plan: &Plan, pinned: Option<&str>) -> io::Result<Vec<SocketAddr>> {
    if let Some(ip) = pinned {
        let ip: std::net::Ipv4Addr = ip
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("hosts: {ip} is not an IPv4 address")))?;
        return Ok(vec![SocketAddr::V4(SocketAddrV4::new(ip, plan.port))]);
    }
    Ok((plan.host.as_str(), plan.port).to_socket_addrs()?.filter(|a| ipv4(*a).is_some()).collect())
}

fn request_once(plan: &Plan, comm: &str, pinned: Option<&str>) -> io::Result<Exchange> {
    let addrs = resolve(plan, pinned)?;
    let addr = addrs.first().ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no IPv4 address"))?;
    let mut s = TcpStream::connect_timeout(addr, IO_TIMEOUT)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    let host = if plan.port == 80 { plan.host.clone() } else { format!("{}:{}", plan.host, plan.port) };
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {comm}/1.0 CFNetwork\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        plan.path
    )
    .into_bytes();
    s.write_all(&request)?;
    let mut response = Vec::new();
    // The server closes after its answer; a timeout keeps what came.
    if let Err(e) = (&mut s).take(MAX_RESPONSE).read_to_end(&mut response)
        && !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::ConnectionReset)
    {
        return Err(e);
    }
    let app = ipv4(s.local_addr()?).ok_or_else(|| io::Error::other("not IPv4"))?;
    let server = ipv4(s.peer_addr()?).ok_or_else(|| io::Error::other("not IPv4"))?;
    Ok(Exchange { app, server, request, response })
}

fn runs(server: &Server, udid: &str, pid: u64) -> bool {
    Processes::load(&server.store, udid).is_ok_and(|p| p.get(pid).is_some())
}

/// The packet records of one exchange, as the tap shows them.
fn records(x: &Exchange, pid: u64, comm: &str, n: u64) -> Vec<Vec<u8>> {
    // Initial sequence numbers from the pid and the request's index: fixed, yet unlike.
    let isn = ((pid as u32).wrapping_mul(2_654_435_761) ^ (n as u32) << 16, (n as u32).wrapping_mul(40_503));
    let now = SystemTime::now();
    packets::exchange(x.app, x.server, isn, &x.request, &x.response)
        .iter()
        .enumerate()
        .map(|(i, seg)| {
            let id = (n as u16).wrapping_mul(16).wrapping_add(i as u16);
            packets::record(seg.direction, pid as u32, comm, now, &seg.frame(id))
        })
        .collect()
}

/// Starts the workload of a process just launched, if its environment has one.
pub fn start(server: &Arc<Server>, udid: &str, p: &Process) {
    let Some(plan) = Plan::of(p) else { return };
    let pid = p.pid;
    let line = |more: serde_json::Value| {
        let mut l = serde_json::json!({"pid": pid, "url": p.env.get("LAB_ENDPOINT_URL")});
        l.as_object_mut().unwrap().extend(more.as_object().cloned().unwrap_or_default());
        l
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            server.store.journal(udid, JOURNAL, "error", line(serde_json::json!({"error": e})));
            return;
        }
    };
    server.store.journal(
        udid,
        JOURNAL,
        "start",
        line(serde_json::json!({"interval_ms": plan.interval.as_millis() as u64,
            "duration_ms": plan.duration.map(|d| d.as_millis() as u64)})),
    );
    let comm = if p.executable.is_empty() {
        p.bundle_id.rsplit('.').next().unwrap_or_default().to_string()
    } else {
        p.executable.clone()
    };
    let (server, udid) = (Arc::clone(server), udid.to_string());
    std::thread::spawn(move || {
        let began = Instant::now();
        let (mut requests, mut responses, mut failures) = (0u64, 0u64, 0u64);
        let mut last_error = String::new();
        let reason = loop {
            if !runs(&server, &udid, pid) {
                break "killed";
            }
            if plan.duration.is_some_and(|d| began.elapsed() >= d) {
                break "duration";
            }
            // The phone file is read again: a test may change its hosts while the app runs.
            let pinned = server.store.phone(&udid).ok().flatten().and_then(|p| p.hosts.get(&plan.host).cloned());
            match request_once(&plan, &comm, pinned.as_deref()) {
                Ok(x) => {
                    requests += 1;
                    responses += u64::from(!x.response.is_empty());
                    server.taps.deliver(&udid, &records(&x, pid, &comm, requests));
                }
                Err(e) => {
                    failures += 1;
                    // One line per kind of failure, not one per attempt.
                    if e.to_string() != last_error {
                        last_error = e.to_string();
                        server.store.journal(
                            &udid,
                            JOURNAL,
                            "error",
                            serde_json::json!({"pid": pid, "error": last_error}),
                        );
                    }
                }
            }
            // Fixed rate: the next request is due interval × n after the start.
            let due = plan.interval * (requests + failures) as u32;
            std::thread::sleep(due.saturating_sub(began.elapsed()));
        };
        server.store.journal(
            &udid,
            JOURNAL,
            "end",
            serde_json::json!({"pid": pid, "requests": requests, "responses": responses,
                "failures": failures, "reason": reason}),
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(env: serde_json::Value) -> Process {
        Process {
            pid: 1001,
            bundle_id: "com.x".into(),
            env: env.as_object().unwrap().clone(),
            args: vec![],
            suspended: false,
            executable: "X".into(),
            profile: Default::default(),
        }
    }

    #[test]
    fn the_environment_gives_the_plan() {
        let p = process(serde_json::json!({"LAB_ENDPOINT_URL": "http://127.0.0.1:8080/ping?a=1",
            "LAB_REQUEST_INTERVAL_MS": "250", "LAB_DURATION_MS": "3000"}));
        let plan = Plan::of(&p).unwrap().unwrap();
        assert_eq!((plan.host.as_str(), plan.port, plan.path.as_str()), ("127.0.0.1", 8080, "/ping?a=1"));
        assert_eq!((plan.interval, plan.duration), (Duration::from_millis(250), Some(Duration::from_secs(3))));
        let plain = Plan::of(&process(serde_json::json!({"LAB_ENDPOINT_URL": "http://example.com"}))).unwrap();
        let plain = plain.unwrap();
        assert_eq!(
            (plain.port, plain.path.as_str(), plain.interval, plain.duration),
            (80, "/", Duration::from_secs(1), None)
        );
        assert!(Plan::of(&process(serde_json::json!({"LAB_ENDPOINT_URL": "https://x"}))).unwrap().is_err());
        assert!(Plan::of(&process(serde_json::json!({"OTHER": "1"}))).is_none());
    }

    #[test]
    fn the_phones_hosts_come_before_the_systems_resolver() {
        let plan =
            Plan::of(&process(serde_json::json!({"LAB_ENDPOINT_URL": "http://lab.invalid:8080/"}))).unwrap().unwrap();
        assert_eq!(resolve(&plan, Some("127.0.0.1")).unwrap(), ["127.0.0.1:8080".parse::<SocketAddr>().unwrap()]);
        assert!(resolve(&plan, Some("::1")).unwrap_err().to_string().contains("not an IPv4 address"));
    }
}
