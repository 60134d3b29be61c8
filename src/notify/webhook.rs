//! The webhook channel: the alert POSTed over plain HTTP/1.1, retried on trouble that
//! can pass (connection, timeout, 5xx, 429), never on an answer that will not change
//! (other 4xx, redirects, which are not followed).

use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::error::answer_text;
use super::{ANSWER_LIMIT, Delivery, NotifyError};

/// Where and how persistently to POST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `http://HOST[:PORT]/PATH`.
    pub url: String,
    /// For one whole try: connect, send, and read the answer.
    pub timeout: Duration,
    /// Tries at most (at least 1 is made).
    pub tries: u32,
    /// The wait before try k + 1 is `backoff[k - 1]`, the last one repeated.
    pub backoff: Vec<Duration>,
}

/// One try's answer: the status, and the first [`ANSWER_LIMIT`] bytes of the body.
struct Answer {
    status: hyper::StatusCode,
    body: String,
}

impl Webhook {
    /// 10 s per try, 3 tries, 1 s then 4 s between them: at most about 35 s.
    pub fn new(url: impl Into<String>) -> Webhook {
        Webhook {
            url: url.into(),
            timeout: Duration::from_secs(10),
            tries: 3,
            backoff: vec![Duration::from_secs(1), Duration::from_secs(4)],
        }
    }

    /// POSTs `body` (the alert's JSON) with `X-Lab-Alert-Id: alert_id`.
    pub async fn post(&self, alert_id: &str, body: &[u8]) -> Delivery {
        let target = match self.target(alert_id) {
            Ok(t) => t,
            Err(e) => return Delivery { sent: false, tries: 0, response: None, error: Some(e.to_string()) },
        };
        let body = Bytes::copy_from_slice(body);
        let mut tries = 0;
        loop {
            tries += 1;
            let answer = match tokio::time::timeout(self.timeout, self.try_once(&target, body.clone())).await {
                Ok(r) => r,
                Err(_) => Err(NotifyError::Timeout { url: self.url.clone(), after: self.timeout }),
            };
            let (response, result) = match answer {
                Ok(a) if a.status.is_success() => (Some(a.text()), Ok(())),
                Ok(a) => {
                    let e =
                        NotifyError::Status { url: self.url.clone(), status: a.status.as_u16(), body: a.body.clone() };
                    (Some(a.text()), Err(e))
                }
                Err(e) => (None, Err(e)),
            };
            match result {
                Ok(()) => return Delivery { sent: true, tries, response, error: None },
                Err(e) if !e.retryable() || tries >= self.tries.max(1) => {
                    return Delivery { sent: false, tries, response, error: Some(e.to_string()) };
                }
                Err(_) => {}
            }
            let k = (tries as usize - 1).min(self.backoff.len().saturating_sub(1));
            if let Some(wait) = self.backoff.get(k) {
                tokio::time::sleep(*wait).await;
            }
        }
    }

    /// The parsed URL and headers, checked before any try.
    fn target(&self, alert_id: &str) -> Result<Target, NotifyError> {
        let bad = |reason: &str| NotifyError::Url { url: self.url.clone(), reason: reason.to_string() };
        let uri: Uri = self.url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&format!("not a URL ({e})")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => return Err(bad("is HTTPS; the lab posts plain HTTP")),
            _ => return Err(bad("is not an http:// URL")),
        }
        let authority = uri.authority().ok_or_else(|| bad("has no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad("has credentials in it, which would be sent in the clear"));
        }
        // `[::1]` is written bracketed; the resolver wants it bare.
        let host = authority.host().trim_start_matches('[').trim_end_matches(']').to_string();
        let port = authority.port_u16().unwrap_or(80);
        let alert_id =
            HeaderValue::from_str(alert_id).map_err(|_| NotifyError::AlertId { alert_id: alert_id.to_string() })?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        Ok(Target { host, port, authority: authority.as_str().to_string(), path, alert_id })
    }

    async fn try_once(&self, t: &Target, body: Bytes) -> Result<Answer, NotifyError> {
        let addr = format!("{}:{}", t.host, t.port);
        let connect = |e: std::io::Error| NotifyError::Connect {
            url: self.url.clone(),
            addr: addr.clone(),
            message: e.to_string(),
        };
        let stream = TcpStream::connect((t.host.as_str(), t.port)).await.map_err(connect)?;
        let exchange = |e: hyper::Error| NotifyError::Exchange { url: self.url.clone(), message: e.to_string() };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(exchange)?;
        // The connection's task lives as long as this try: a timeout drops it too.
        let _conn = AbortOnDrop(tokio::spawn(conn));
        let req = Request::post(t.path.as_str())
            .header(HOST, t.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("lab/", env!("CARGO_PKG_VERSION")))
            .header("x-lab-alert-id", t.alert_id.clone())
            .body(Full::new(body))
            .map_err(|e| NotifyError::Url { url: self.url.clone(), reason: e.to_string() })?;
        let resp = sender.send_request(req).await.map_err(exchange)?;
        let status = resp.status();
        let body = read_bounded(resp.into_body()).await.map_err(exchange)?;
        Ok(Answer { status, body })
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Target {
    host: String,
    port: u16,
    /// As written (`host:port`), for the `Host` header.
    authority: String,
    path: String,
    alert_id: HeaderValue,
}

impl Answer {
    /// `200 OK`, and the body after a space when there is one.
    fn text(&self) -> String {
        if self.body.is_empty() { self.status.to_string() } else { format!("{} {}", self.status, self.body) }
    }
}

/// The first [`ANSWER_LIMIT`] bytes of a body; the rest is not read (the connection is
/// dropped with it), so a huge or endless answer costs nothing.
async fn read_bounded(mut body: hyper::body::Incoming) -> Result<String, hyper::Error> {
    let mut kept = Vec::new();
    while kept.len() < ANSWER_LIMIT {
        let Some(frame) = body.frame().await else { break };
        if let Ok(data) = frame?.into_data() {
            kept.extend_from_slice(&data);
        }
    }
    Ok(answer_text(&kept))
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use http_body_util::BodyExt;
    use hyper::body::Incoming;
    use hyper::{Response, StatusCode};
    use tokio::net::TcpListener;

    use super::*;

    /// What the test receiver saw of one request.
    #[derive(Debug, Clone)]
    struct Seen {
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
        }
    }

    /// A receiver on 127.0.0.1:0 answering the given statuses and bodies in turn (the
    /// last one repeated), recording every request.
    async fn receiver(answers: Vec<(u16, String)>) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(answers)));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (record, queue) = (record.clone(), queue.clone());
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (record, queue) = (record.clone(), queue.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await?.to_bytes().to_vec();
                        let headers = parts
                            .headers
                            .iter()
                            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_string()))
                            .collect();
                        let path = parts.uri.to_string();
                        record.lock().unwrap().push(Seen { method: parts.method.to_string(), path, headers, body });
                        let (status, text) = {
                            let mut q = queue.lock().unwrap();
                            if q.len() > 1 { q.pop_front().unwrap() } else { q[0].clone() }
                        };
                        let mut resp = Response::new(Full::new(Bytes::from(text)));
                        *resp.status_mut() = StatusCode::from_u16(status).unwrap();
                        Ok::<_, hyper::Error>(resp)
                    }
                });
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
            }
        });
        (addr, seen)
    }

    fn hook(addr: SocketAddr, tries: u32) -> Webhook {
        Webhook {
            url: format!("http://{addr}/hook/7?x=1"),
            timeout: Duration::from_secs(5),
            tries,
            backoff: vec![Duration::ZERO],
        }
    }

    const BODY: &[u8] = br#"{"schema_version":1,"alert_id":"weekly/2025-03-09T01:30:00Z"}"#;

    #[test]
    fn the_defaults_are_bounded_by_about_35_s() {
        let w = Webhook::new("http://127.0.0.1:9/hook");
        let worst = w.timeout * w.tries + w.backoff.iter().sum::<Duration>();
        assert_eq!((w.tries, worst), (3, Duration::from_secs(35)));
    }

    #[tokio::test]
    async fn a_503_is_retried_and_the_200_after_it_is_sent_with_the_headers_and_exact_body() {
        let (addr, seen) = receiver(vec![(503, "busy".into()), (200, "thanks".into())]).await;
        let d = hook(addr, 3).post("weekly/2025-03-09T01:30:00Z", BODY).await;
        assert_eq!(d, Delivery { sent: true, tries: 2, response: Some("200 OK thanks".into()), error: None });
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        for s in &seen {
            assert_eq!((s.method.as_str(), s.path.as_str()), ("POST", "/hook/7?x=1"));
            assert_eq!(s.body, BODY);
            assert_eq!(s.header("host"), Some(addr.to_string().as_str()));
            assert_eq!(s.header("content-type"), Some("application/json"));
            assert_eq!(s.header("user-agent"), Some(format!("lab/{}", env!("CARGO_PKG_VERSION")).as_str()));
            assert_eq!(s.header("x-lab-alert-id"), Some("weekly/2025-03-09T01:30:00Z"));
            assert_eq!(s.header("content-length"), Some(BODY.len().to_string().as_str()));
        }
    }

    #[tokio::test]
    async fn a_429_is_retried_until_the_tries_run_out() {
        let (addr, seen) = receiver(vec![(429, "slow down".into())]).await;
        let d = hook(addr, 3).post("a/b", BODY).await;
        assert_eq!((d.sent, d.tries, seen.lock().unwrap().len()), (false, 3, 3));
        assert_eq!(d.response.as_deref(), Some("429 Too Many Requests slow down"));
        assert!(d.error.unwrap().contains("answered 429: slow down"));
    }

    #[tokio::test]
    async fn a_400_is_not_retried_and_the_error_names_the_status_and_body() {
        let (addr, seen) = receiver(vec![(400, "missing field `kind`".into()), (200, String::new())]).await;
        let d = hook(addr, 3).post("a/b", BODY).await;
        assert_eq!((d.sent, d.tries, seen.lock().unwrap().len()), (false, 1, 1));
        let error = d.error.unwrap();
        assert_eq!(
            error,
            format!(
                "webhook http://{addr}/hook/7?x=1: answered 400: missing field `kind`; fix: look at the receiver's answer above and its logs"
            )
        );
    }

    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        let (addr, seen) = receiver(vec![(302, String::new())]).await;
        let d = hook(addr, 3).post("a/b", BODY).await;
        assert_eq!((d.sent, d.tries, seen.lock().unwrap().len()), (false, 1, 1));
        assert!(d.error.unwrap().contains("redirects are not followed"));
    }

    #[tokio::test]
    async fn the_answer_is_kept_to_4_kib() {
        let (addr, _) = receiver(vec![(200, "x".repeat(100_000))]).await;
        let d = hook(addr, 1).post("a/b", BODY).await;
        assert!(d.sent);
        assert_eq!(d.response.unwrap(), format!("200 OK {}", "x".repeat(ANSWER_LIMIT)));
    }

    #[tokio::test]
    async fn a_receiver_that_never_answers_times_out_on_every_try() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let held = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                held.lock().unwrap().push(stream);
            }
        });
        let w = Webhook { timeout: Duration::from_millis(200), ..hook(addr, 2) };
        let started = Instant::now();
        let d = w.post("a/b", BODY).await;
        let took = started.elapsed();
        assert_eq!((d.sent, d.tries, d.response), (false, 2, None));
        assert_eq!(accepted.lock().unwrap().len(), 2);
        assert!(d.error.unwrap().ends_with("no answer within 200ms; fix: make the receiver answer at once (queue the work) or check what holds the request"));
        assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "{took:?}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_tried_tries_times() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let d = hook(addr, 3).post("a/b", BODY).await;
        assert_eq!((d.sent, d.tries), (false, 3));
        let error = d.error.unwrap();
        assert!(error.starts_with(&format!("webhook http://{addr}/hook/7?x=1: cannot connect to {addr}: ")), "{error}");
        assert!(error.contains("fix: check that the receiver is running"), "{error}");
    }

    #[tokio::test]
    async fn https_and_other_schemes_are_refused_before_any_try() {
        for (url, why) in [
            ("https://hooks.example.com/x", "is HTTPS; the lab posts plain HTTP"),
            ("ftp://example.com/x", "is not an http:// URL"),
            ("http://user:pw@example.com/x", "has credentials in it"),
        ] {
            let d = Webhook::new(url).post("a/b", BODY).await;
            assert_eq!((d.sent, d.tries), (false, 0));
            let error = d.error.unwrap();
            assert!(error.starts_with(&format!("webhook {url}: {why}")), "{error}");
            assert!(error.contains("fix: write `webhook = \"http://HOST:PORT/PATH\"`"), "{error}");
        }
    }
}
