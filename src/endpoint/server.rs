//! The traffic endpoint: an HTTP/1.1 server (hyper) that answers every request the
//! same configured way and counts requests and bytes per trial token. A `POST` to
//! `/t/<token>/state` is the app's state report instead: kept (the latest per token and
//! moment), answered 204 (400 with the reason when malformed), and counted apart from
//! the workload's requests.
//!
//! It runs on a thread of its own with a single-threaded tokio runtime, so that the
//! lab can tell the endpoint's work (it wakes for every request the app sends) from its
//! own (which should be nothing during a soak): see `runner::footprint`.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use super::app_report::{AppReport, ReportAt};
use super::counts::{TokenCounts, TrafficCount, is_state_path, token_of};
use super::report_board::ReportBoard;
use crate::config::EndpointSettings;

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error(
        "traffic endpoint: cannot listen on {addr}: {source}; fix: set another `bind` under [endpoint] in the runbook, or `endpoint_bind` under [lab] when the lab sets it (port 0 picks a free port)"
    )]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("traffic endpoint: {what}: {source}")]
    Start { what: String, source: std::io::Error },
    #[error("traffic endpoint: `{value}` is not a valid Cache-Control value")]
    Header { value: String },
}

/// How every request is answered.
struct Answer {
    status: StatusCode,
    body: Bytes,
    cache_control: Option<HeaderValue>,
}

impl Answer {
    fn response(&self) -> Response<Full<Bytes>> {
        let mut r = Response::new(Full::new(self.body.clone()));
        *r.status_mut() = self.status;
        if let Some(v) = &self.cache_control {
            r.headers_mut().insert(CACHE_CONTROL, v.clone());
        }
        r
    }
}

/// A running endpoint. Stops when dropped.
pub struct Endpoint {
    addr: SocketAddr,
    public_url: Option<String>,
    counts: Arc<TokenCounts>,
    reports: Arc<ReportBoard>,
    tid: i32,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("addr", &self.addr).field("tid", &self.tid).finish()
    }
}

impl Endpoint {
    /// Binds (so a taken port is an error here, before any trial) and starts serving.
    pub fn start(settings: &EndpointSettings) -> Result<Endpoint, EndpointError> {
        let answer = Arc::new(Answer {
            status: StatusCode::from_u16(settings.status).map_err(|_| EndpointError::Start {
                what: format!("status {} is not an HTTP status", settings.status),
                source: std::io::Error::other("invalid status"),
            })?,
            body: Bytes::from(vec![b'x'; settings.body_bytes as usize]),
            cache_control: match &settings.cache_control {
                None => None,
                Some(v) => Some(HeaderValue::from_str(v).map_err(|_| EndpointError::Header { value: v.clone() })?),
            },
        });
        let listener = std::net::TcpListener::bind(settings.bind)
            .map_err(|source| EndpointError::Bind { addr: settings.bind, source })?;
        let start_err = |what: &str| {
            let what = what.to_string();
            move |source| EndpointError::Start { what, source }
        };
        listener.set_nonblocking(true).map_err(start_err("making the socket non-blocking"))?;
        let addr = listener.local_addr().map_err(start_err("reading the bound address"))?;
        let counts = Arc::new(TokenCounts::default());
        let reports = Arc::new(ReportBoard::default());
        let (stop_tx, stop_rx) = oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let shared = Shared { answer, counts: counts.clone(), reports: reports.clone() };
        let thread = std::thread::Builder::new()
            .name("lab-endpoint".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
                let rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let listener = match rt.block_on(async { tokio::net::TcpListener::from_std(listener) }) {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(nix::unistd::gettid().as_raw()));
                rt.block_on(serve(listener, Arc::new(shared), stop_rx));
            })
            .map_err(start_err("starting its thread"))?;
        let tid = ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("its thread ended before it was ready"))
            .and_then(|r| r)
            .map_err(start_err("starting its runtime"))?;
        let public_url = settings.public_url.as_ref().map(|u| u.trim_end_matches('/').to_string());
        Ok(Endpoint { addr, public_url, counts, reports, tid, stop: Some(stop_tx), thread: Some(thread) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL a trial's app sends its requests to: under the lab's `endpoint_url` when
    /// it has one, else at the address listened on (an endpoint listening on every
    /// interface is reached on loopback from this machine).
    pub fn url(&self, token: &str) -> String {
        if let Some(base) = &self.public_url {
            return format!("{base}/t/{token}");
        }
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}/t/{token}", SocketAddr::new(ip, self.addr.port()))
    }

    /// Everything counted for `token` so far.
    pub fn count(&self, token: &str) -> TrafficCount {
        self.counts.get(token)
    }

    /// The latest state report the app sent for `token` at `at`.
    pub fn app_report(&self, token: &str, at: ReportAt) -> Option<AppReport> {
        self.reports.get(token, at)
    }

    /// The state reports `token` received (good or malformed), apart from [`count`](Self::count).
    pub fn report_count(&self, token: &str) -> TrafficCount {
        self.counts.reports(token)
    }

    /// Drops what was kept for `token` (counts, reports) once its trial has read them, so
    /// a long campaign keeps only its trials in flight.
    pub fn forget(&self, token: &str) {
        self.counts.take(token);
        self.reports.forget(token);
    }

    /// Requests that named no token.
    pub fn unmatched(&self) -> TrafficCount {
        self.counts.unmatched()
    }

    /// The kernel thread id of the thread that serves, so its CPU time and wakeups can
    /// be told apart from the rest of the lab's.
    pub fn thread_id(&self) -> i32 {
        self.tid
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What every connection's handler shares.
struct Shared {
    answer: Arc<Answer>,
    counts: Arc<TokenCounts>,
    reports: Arc<ReportBoard>,
}

async fn serve(listener: tokio::net::TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        // A failed accept (out of file descriptors, a reset connection) loses one client, not the endpoint.
        let Ok((stream, _)) = accepted else { continue };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Full<Bytes>>, Infallible> {
    let head = head_len(&req);
    let path = req.uri().path();
    let token = token_of(path).map(str::to_string);
    let report = req.method() == Method::POST && is_state_path(path);
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let bytes = head + body.len() as u64;
    match token {
        None => {
            shared.counts.record(None, bytes);
            Ok(plain(StatusCode::NOT_FOUND, "no trial token: requests go to /t/<token>".into()))
        }
        Some(token) if report => {
            shared.counts.record_report(&token, bytes);
            Ok(match AppReport::parse(&body) {
                Ok(r) => {
                    shared.reports.put(&token, r);
                    plain(StatusCode::NO_CONTENT, String::new())
                }
                Err(why) => plain(StatusCode::BAD_REQUEST, why.to_string()),
            })
        }
        Some(token) => {
            shared.counts.record(Some(&token), bytes);
            Ok(shared.answer.response())
        }
    }
}

/// An answer of one line of text (none for 204).
fn plain(status: StatusCode, line: String) -> Response<Full<Bytes>> {
    let body = if line.is_empty() { Bytes::new() } else { Bytes::from(line + "\n") };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r
}

/// Size of the request head as HTTP/1.1 writes it (RFC 9112 §2.1): request line,
/// `name: value` lines, blank line. hyper parses the head away, so it is recomputed
/// from what was parsed; a client that pads separators with extra spaces sent a few
/// bytes more than counted.
fn head_len<B>(req: &Request<B>) -> u64 {
    const VERSION: usize = "HTTP/1.1".len();
    let line = req.method().as_str().len() + 1 + req.uri().to_string().len() + 1 + VERSION + 2;
    let headers: usize = req.headers().iter().map(|(n, v)| n.as_str().len() + 2 + v.as_bytes().len() + 2).sum();
    (line + headers + 2) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn raw_request(addr: SocketAddr, request: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn answers_as_configured_and_counts_the_bytes_received() {
        let settings = EndpointSettings {
            status: 203,
            body_bytes: 5,
            cache_control: Some("max-age=60".into()),
            ..EndpointSettings::default()
        };
        let ep = Endpoint::start(&settings).unwrap();
        let url = ep.url("tok-1");
        assert_eq!(url, format!("http://127.0.0.1:{}/t/tok-1", ep.addr().port()));
        let req = "GET /t/tok-1/x?y=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        let resp = raw_request(ep.addr(), req);
        assert!(resp.starts_with("HTTP/1.1 203 "), "{resp}");
        let lower = resp.to_ascii_lowercase();
        assert!(lower.contains("cache-control: max-age=60\r\n"), "{resp}");
        assert!(lower.contains("content-length: 5\r\n"), "{resp}");
        assert!(resp.ends_with("\r\n\r\nxxxxx"), "{resp}");
        assert_eq!(ep.count("tok-1"), TrafficCount { requests: 1, bytes: req.len() as u64 });

        let post = "POST /t/tok-1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd";
        raw_request(ep.addr(), post);
        assert_eq!(ep.count("tok-1"), TrafficCount { requests: 2, bytes: (req.len() + post.len()) as u64 });

        let stray = raw_request(ep.addr(), "GET /favicon.ico HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        assert!(stray.starts_with("HTTP/1.1 404"), "{stray}");
        assert_eq!(ep.unmatched().requests, 1);
        assert_eq!(ep.count("tok-1").requests, 2, "a request without a token counts for no trial");
        assert!(ep.thread_id() > 0);
    }

    fn post(addr: SocketAddr, path: &str, body: &str) -> String {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        raw_request(addr, &req)
    }

    #[test]
    fn state_reports_are_kept_latest_first_and_counted_apart_from_the_workload() {
        let ep = Endpoint::start(&EndpointSettings::default()).unwrap();
        let workload = "GET /t/tok-3/ping HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        raw_request(ep.addr(), workload);
        let launch = r#"{"v":1,"at":"launch","brightness_pct":50,"low_power":false,"thermal_state":"nominal"}"#;
        let resp = post(ep.addr(), "/t/tok-3/state", launch);
        assert!(resp.starts_with("HTTP/1.1 204 "), "{resp}");
        let got = ep.app_report("tok-3", ReportAt::Launch).unwrap();
        assert_eq!((got.brightness_pct, got.low_power), (Some(50.0), Some(false)));
        assert_eq!(ep.app_report("tok-3", ReportAt::End), None, "nothing was said at the end yet");

        post(ep.addr(), "/t/tok-3/state", r#"{"v":1,"at":"end","low_power":false}"#);
        post(ep.addr(), "/t/tok-3/state/", r#"{"v":1,"at":"end","low_power":true}"#);
        assert_eq!(ep.app_report("tok-3", ReportAt::End).unwrap().low_power, Some(true), "the latest report wins");
        assert_eq!(ep.app_report("tok-3", ReportAt::Launch).unwrap().low_power, Some(false), "per moment");

        let bad = post(ep.addr(), "/t/tok-3/state", r#"{"v":1,"at":"end","brightness_pct":0.4,"low_power":"yes"}"#);
        assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
        let reason = bad.split("\r\n\r\n").nth(1).unwrap();
        assert!(reason.starts_with("not a state report: invalid type: string \"yes\", expected a boolean"), "{reason}");
        assert_eq!(reason.lines().count(), 1, "{reason}");
        assert_eq!(
            ep.app_report("tok-3", ReportAt::End).unwrap().low_power,
            Some(true),
            "a bad report changes nothing"
        );

        assert_eq!(ep.count("tok-3").requests, 1, "only the workload's request is the workload's");
        assert_eq!(ep.report_count("tok-3").requests, 4, "the malformed report is counted with the reports");
        // A GET of the same path is the app's own traffic, answered as configured.
        let get = raw_request(ep.addr(), "GET /t/tok-3/state HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        assert!(get.starts_with("HTTP/1.1 200 "), "{get}");
        assert_eq!((ep.count("tok-3").requests, ep.report_count("tok-3").requests), (2, 4));
    }

    #[test]
    fn a_taken_port_is_a_clear_error() {
        let first = Endpoint::start(&EndpointSettings::default()).unwrap();
        let taken = EndpointSettings { bind: first.addr(), ..EndpointSettings::default() };
        let e = Endpoint::start(&taken).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with(&format!("traffic endpoint: cannot listen on {}", first.addr())), "{text}");
        assert!(text.contains("fix: set another `bind` under [endpoint]"), "{text}");
    }

    #[test]
    fn the_labs_url_is_what_devices_are_given() {
        let settings =
            EndpointSettings { public_url: Some("http://192.0.2.10:8765/".into()), ..EndpointSettings::default() };
        let ep = Endpoint::start(&settings).unwrap();
        assert_eq!(ep.url("tok-2"), "http://192.0.2.10:8765/t/tok-2");
        // It still listens where it was told and counts what reaches it there.
        let req = "GET /t/tok-2 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        raw_request(ep.addr(), req);
        assert_eq!(ep.count("tok-2").requests, 1);
    }
}
