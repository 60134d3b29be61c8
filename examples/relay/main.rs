//! `relay`: an HTTP forward proxy between an app and the network, with a choice of
//! event loop. It stands in for Envoy Mobile in the host event-loop audit
//! (runbooks/host-event-loop-audit.toml): the seed's finding was that libevent ran on
//! poll instead of kqueue and the event loop woke up far too often.
//!
//! ```text
//! relay --dispatcher poll|epoll [--listen 127.0.0.1:0] [--poll-tick 1ms]
//!       [--stats-flush 5s] [--dns-refresh 5s] -- CLIENT [ARGS...]
//! ```
//!
//! It listens, starts CLIENT with `LAB_PROXY_URL=http://<its address>` in its
//! environment (the pinger sends through it then), forwards the client's requests and
//! exits with the client's exit code when the client ends. CLIENT and the relay are one
//! app to the lab: one process tree, measured together.
//!
//! - `--dispatcher poll`: poll(2), never sleeping longer than `--poll-tick` (default
//!   1 ms) whether or not anything is due — libevent's poll backend under aggressive timers.
//! - `--dispatcher epoll`: epoll(7), sleeping until a socket is ready or a timer is due.
//! - `--stats-flush D`: every D, write the proxy's counters to stderr (Envoy's stats flush).
//! - `--dns-refresh D`: every D, resolve the upstreams again (Envoy's DNS refresh rate).
//!   Both default to 5 s, Envoy's defaults the seed's team tuned to 1 minute; `0s` turns one off.

mod dispatcher;
mod proxy;

use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use dispatcher::{Dispatcher, EpollDispatcher, PollDispatcher, Ready};
use proxy::Proxy;

struct Args {
    dispatcher: String,
    listen: String,
    poll_tick: Duration,
    stats_flush: Option<Duration>,
    dns_refresh: Option<Duration>,
    client: Vec<String>,
}

const USAGE: &str = "usage: relay --dispatcher poll|epoll [--listen 127.0.0.1:0] [--poll-tick 1ms] \
[--stats-flush 5s] [--dns-refresh 5s] -- CLIENT [ARGS...]";

fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("`{s}` is not a duration like 1ms, 5s or 1m");
    let i = s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
    let n: f64 = s[..i].parse().map_err(|_| bad())?;
    let secs = match &s[i..] {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(bad()),
    };
    Ok(Duration::from_secs_f64(secs))
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        dispatcher: String::new(),
        listen: "127.0.0.1:0".into(),
        poll_tick: Duration::from_millis(1),
        stats_flush: Some(Duration::from_secs(5)),
        dns_refresh: Some(Duration::from_secs(5)),
        client: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    let period = |d: Duration| (!d.is_zero()).then_some(d);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--dispatcher" => a.dispatcher = value("--dispatcher")?,
            "--listen" => a.listen = value("--listen")?,
            "--poll-tick" => a.poll_tick = parse_duration(&value("--poll-tick")?)?,
            "--stats-flush" => a.stats_flush = period(parse_duration(&value("--stats-flush")?)?),
            "--dns-refresh" => a.dns_refresh = period(parse_duration(&value("--dns-refresh")?)?),
            "--" => {
                a.client = it.by_ref().collect();
                break;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument `{other}`; {USAGE}")),
        }
    }
    if !matches!(a.dispatcher.as_str(), "poll" | "epoll") {
        return Err(format!("--dispatcher must be poll or epoll; {USAGE}"));
    }
    if a.client.is_empty() {
        return Err(format!("no client command after `--`; {USAGE}"));
    }
    if a.poll_tick.is_zero() {
        return Err("--poll-tick must be more than 0".into());
    }
    Ok(a)
}

/// A periodic timer of the loop.
struct Timer {
    name: &'static str,
    every: Duration,
    due: Instant,
}

/// An fd that becomes readable when the child exits (pidfd_open, Linux 5.3+), so the
/// loop needs no timer to notice it.
fn pidfd(child: &Child) -> Option<RawFd> {
    // SAFETY: plain syscall with a pid and flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    (fd >= 0).then_some(fd as RawFd)
}

fn run(a: Args) -> Result<ExitCode, String> {
    let listener = TcpListener::bind(&a.listen).map_err(|e| format!("cannot listen on {}: {e}", a.listen))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut d: Box<dyn Dispatcher> = match a.dispatcher.as_str() {
        "poll" => Box::new(PollDispatcher::new(a.poll_tick)),
        _ => Box::new(EpollDispatcher::new().map_err(|e| format!("epoll: {e}"))?),
    };
    let mut child = Command::new(&a.client[0])
        .args(&a.client[1..])
        .env("LAB_PROXY_URL", format!("http://{addr}"))
        .spawn()
        .map_err(|e| format!("cannot start the client `{}`: {e}", a.client[0]))?;
    let child_fd = pidfd(&child);
    d.set(listener.as_raw_fd(), false).map_err(|e| e.to_string())?;
    if let Some(fd) = child_fd {
        d.set(fd, false).map_err(|e| e.to_string())?;
    }
    eprintln!("relay: {} dispatcher on {addr}, client pid {}", d.name(), child.id());

    let now = Instant::now();
    let mut timers: Vec<Timer> = [("stats-flush", a.stats_flush), ("dns-refresh", a.dns_refresh)]
        .into_iter()
        .filter_map(|(name, every)| every.map(|every| Timer { name, every, due: now + every }))
        .collect();
    // Without a pidfd the child is looked at once a second.
    if child_fd.is_none() {
        timers.push(Timer { name: "child-check", every: Duration::from_secs(1), due: now + Duration::from_secs(1) });
    }
    let mut proxy = Proxy::new();
    let mut ready: Vec<Ready> = Vec::new();
    loop {
        let now = Instant::now();
        let next = timers.iter().map(|t| t.due).min();
        ready.clear();
        d.wait(next.map(|due| due.saturating_duration_since(now)), &mut ready).map_err(|e| format!("wait: {e}"))?;
        for r in &ready {
            if r.fd == listener.as_raw_fd() {
                while let Ok((s, _)) = listener.accept() {
                    if let Err(e) = proxy.accept(s, d.as_mut()) {
                        eprintln!("relay: accept: {e}");
                    }
                }
            } else if Some(r.fd) == child_fd {
                let status = child.wait().map_err(|e| e.to_string())?;
                eprintln!("relay: client ended ({status}); {:?}", proxy.stats);
                return Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8));
            } else if proxy.owns(r.fd) {
                proxy.ready(r.fd, r.readable || r.writable, d.as_mut());
            }
        }
        let now = Instant::now();
        for t in timers.iter_mut().filter(|t| t.due <= now) {
            match t.name {
                "stats-flush" => eprintln!("relay: stats {:?}", proxy.stats),
                "dns-refresh" => proxy.refresh_dns(),
                _ => {
                    if let Ok(Some(status)) = child.try_wait() {
                        eprintln!("relay: client ended ({status}); {:?}", proxy.stats);
                        return Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8));
                    }
                }
            }
            t.due += t.every;
            if t.due <= now {
                t.due = now + t.every;
            }
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("relay: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("relay: {e}");
            ExitCode::from(1)
        }
    }
}
