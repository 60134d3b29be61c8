//! `pinger`: the control app of the host event-loop audit (runbooks/host-event-loop-audit.toml).
//!
//! Sends `GET <url>` every interval on one keep-alive HTTP/1.1 connection, on a fixed
//! schedule (request k goes out at start + k × interval, whatever the answers' latency),
//! and sleeps in between: about two wakeups per request.
//!
//! ```text
//! pinger [--url URL] [--interval 200ms] [--proxy http://HOST:PORT] [--cache]
//! ```
//!
//! - `--url`: where to send; default `$LAB_ENDPOINT_URL` (the lab gives every trial its own).
//! - `--interval`: default `$LAB_REQUEST_INTERVAL_MS` milliseconds, else 200 ms.
//! - `--proxy`: send through an HTTP forward proxy; default `$LAB_PROXY_URL` (the relay sets it).
//! - `--cache`: answer from a local cache while a cached answer is fresh, the way
//!   URLSession's default cache policy did in the seed's first, invalid run. Answers are
//!   cached unless they say `no-store` or `no-cache`, for `max-age` seconds (or, without
//!   it, for good).
//!
//! On SIGTERM it prints what it did (`sent N, from cache M, errors E`) and exits 0.
//! Uses only std and libc, so it builds the same as a cargo example of `lab` and as a
//! binary of the standalone `examples/host-apps` crate (how the runbook builds it, optimized).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

struct Args {
    url: String,
    interval: Duration,
    proxy: Option<String>,
    cache: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut url = std::env::var("LAB_ENDPOINT_URL").ok();
    let mut interval = match std::env::var("LAB_REQUEST_INTERVAL_MS") {
        Ok(ms) => {
            Duration::from_millis(ms.parse().map_err(|_| format!("LAB_REQUEST_INTERVAL_MS={ms} is not a number"))?)
        }
        Err(_) => Duration::from_millis(200),
    };
    let mut proxy = std::env::var("LAB_PROXY_URL").ok();
    let mut cache = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--url" => url = Some(value("--url")?),
            "--interval" => interval = parse_duration(&value("--interval")?)?,
            "--proxy" => proxy = Some(value("--proxy")?),
            "--cache" => cache = true,
            "-h" | "--help" => {
                return Err("usage: pinger [--url URL] [--interval 200ms] [--proxy http://HOST:PORT] [--cache]".into());
            }
            other => return Err(format!("unknown argument `{other}`; try --help")),
        }
    }
    let url = url.ok_or("no URL: pass --url or set LAB_ENDPOINT_URL")?;
    if interval.is_zero() {
        return Err("the interval must be more than 0".into());
    }
    Ok(Args { url, interval, proxy, cache })
}

/// `200ms`, `1s`, `1.5s`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("`{s}` is not a duration like 200ms or 1s");
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs_f64(secs))
}

/// `http://host:port/path` → (`host:port`, `/path`).
fn split_url(url: &str) -> Result<(String, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("`{url}` is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    Ok((authority, path.to_string()))
}

struct Answer {
    status: u16,
    cache_control: Option<String>,
    close: bool,
}

struct Client {
    /// Where the TCP connection goes: the origin, or the proxy.
    connect_to: String,
    /// The request line's target: a path, or the absolute URL for a proxy.
    target: String,
    host: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    /// One request; a kept-alive connection the server closed meanwhile is retried once
    /// on a new one (as HTTP clients do for idempotent requests).
    fn get(&mut self) -> std::io::Result<Answer> {
        let reused = self.conn.is_some();
        match self.get_once() {
            Err(e) if reused && e.kind() == std::io::ErrorKind::UnexpectedEof => self.get_once(),
            other => other,
        }
    }

    fn get_once(&mut self) -> std::io::Result<Answer> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.connect_to)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            self.conn = Some(BufReader::new(s));
        }
        let conn = self.conn.as_mut().expect("connected above");
        let req = format!("GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: lab-pinger\r\n\r\n", self.target, self.host);
        let result = conn.get_mut().write_all(req.as_bytes()).and_then(|_| read_answer(conn));
        match result {
            Ok(a) => {
                if a.close {
                    self.conn = None;
                }
                Ok(a)
            }
            Err(e) => {
                self.conn = None;
                Err(e)
            }
        }
    }
}

fn read_answer(conn: &mut BufReader<TcpStream>) -> std::io::Result<Answer> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if conn.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed"));
    }
    let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| bad("no status"))?;
    // HTTP/1.0 closes after the answer unless it says keep-alive.
    let mut close = line.starts_with("HTTP/1.0");
    let (mut length, mut cache_control) = (0usize, None);
    loop {
        line.clear();
        conn.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((name, value)) = l.split_once(':') else { return Err(bad("bad header")) };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().map_err(|_| bad("bad content-length"))?,
            "cache-control" => cache_control = Some(value.to_ascii_lowercase()),
            "connection" => close = !value.eq_ignore_ascii_case("keep-alive"),
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    conn.read_exact(&mut body)?;
    Ok(Answer { status, cache_control, close })
}

/// How long an answer may be reused, if at all (RFC 9111 §5.2.2, the parts that matter here).
fn freshness(a: &Answer) -> Option<Option<Duration>> {
    if a.status != 200 {
        return None;
    }
    let cc = a.cache_control.as_deref().unwrap_or("");
    let directives: Vec<&str> = cc.split(',').map(str::trim).collect();
    if directives.iter().any(|d| *d == "no-store" || *d == "no-cache") {
        return None;
    }
    let max_age = directives.iter().find_map(|d| d.strip_prefix("max-age=")?.parse::<u64>().ok());
    Some(max_age.map(Duration::from_secs))
}

/// Sleeps until `deadline` on the monotonic clock; returns early on a signal.
fn sleep_until(deadline: Instant) {
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    let d = deadline - now;
    let ts = libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long };
    // SAFETY: valid pointers; an interrupted sleep just returns (EINTR), which is wanted.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pinger: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    let (authority, path) = match split_url(&args.url) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("pinger: {e}");
            return ExitCode::from(2);
        }
    };
    let mut client = match &args.proxy {
        Some(p) => match split_url(p) {
            Ok((proxy, _)) => Client { connect_to: proxy, target: args.url.clone(), host: authority, conn: None },
            Err(e) => {
                eprintln!("pinger: proxy: {e}");
                return ExitCode::from(2);
            }
        },
        None => Client { connect_to: authority.clone(), target: path, host: authority, conn: None },
    };
    let (mut sent, mut from_cache, mut errors) = (0u64, 0u64, 0u64);
    // (stored at, fresh for); `None` inside: fresh for good.
    let mut cached: Option<(Instant, Option<Duration>)> = None;
    let mut start = Instant::now();
    let mut k: u32 = 0;
    while !STOP.load(Ordering::SeqCst) {
        let now = Instant::now();
        let fresh = cached.is_some_and(|(at, ttl)| ttl.is_none_or(|t| now.duration_since(at) < t));
        if args.cache && fresh {
            from_cache += 1;
        } else {
            sent += 1;
            match client.get() {
                Ok(answer) => {
                    if args.cache
                        && let Some(ttl) = freshness(&answer)
                    {
                        cached = Some((Instant::now(), ttl));
                    }
                }
                Err(e) => {
                    errors += 1;
                    // The first few errors explain themselves; after that, only the count.
                    if errors <= 3 {
                        eprintln!("pinger: request {sent}: {e}");
                    }
                }
            }
        }
        k += 1;
        let mut next = start + args.interval * k;
        // Far behind (the machine stalled): start the schedule again rather than burst.
        if Instant::now() > next + args.interval * 10 {
            (start, k) = (Instant::now(), 1);
            next = start + args.interval;
        }
        sleep_until(next);
    }
    println!("pinger: sent {sent}, from cache {from_cache}, errors {errors}");
    ExitCode::SUCCESS
}
