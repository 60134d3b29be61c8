//! `lab serve`'s connections, served by hyper's HTTP/1 connection with limits that
//! `axum::serve` does not set: a header-read timeout (hyper starts it whenever it waits
//! for a request, at the connection's start and after each answer, so it is also the idle
//! keep-alive timeout), and a connection limit. At the limit, accepting waits: connections
//! already open keep being answered, new ones wait in the kernel's queue until one closes,
//! which an idle one does within the header timeout. Closing new connections instead
//! would refuse the honest clients as readily as the flood. A request's body must arrive
//! within the header timeout too ([`body_in_time`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, watch};

/// What each connection is held to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub max_connections: usize,
}

/// Serves `app` on `listener` until `stop` turns true; then accepts nothing more, lets
/// each connection end once its request in progress is answered, and returns when all
/// have ended (a page's event stream never does: the caller bounds the wait).
pub async fn serve(listener: tokio::net::TcpListener, app: Router, limits: Limits, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&permits).acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors (or a connection reset before it was taken): wait
                    // a little instead of spinning; the connections open go on.
                    if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            _ = stop.wait_for(|s| *s) => break,
        };
        let _ = stream.set_nodelay(true);
        let app = TowerToHyperService::new(app.clone());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                hyper::service::Service::call(&app, req)
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            // A connection cut (a timeout, a reset) ends here; there is nobody to tell.
            tokio::select! {
                _ = conn.as_mut() => {}
                () = async { let _ = stop.wait_for(|s| *s).await; } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    // Every connection gives its permit back as it ends.
    let _ = permits.acquire_many(limits.max_connections as u32).await;
}

/// A request's body read whole within the header timeout before its route sees it (the
/// bodies are forms, small): one sent a byte at a time is cut (408) instead of holding
/// its connection, and one over `max_body_bytes` is refused (413).
pub async fn body_in_time(
    axum::extract::State(s): axum::extract::State<super::routes::Shared>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if matches!(*request.method(), hyper::Method::GET | hyper::Method::HEAD) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (limit, within) = (s.lab.serve.max_body_bytes as usize, s.lab.serve.header_timeout);
    let plain = |code: hyper::StatusCode, why: String| {
        (code, [(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")], why + "\n").into_response()
    };
    match tokio::time::timeout(within, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Ok(Err(_)) => plain(
            hyper::StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request's body is over {limit} bytes ([serve] max_body_bytes)"),
        ),
        Err(_) => plain(
            hyper::StatusCode::REQUEST_TIMEOUT,
            format!("the request's body did not arrive within {} s ([serve] header_timeout)", within.as_secs()),
        ),
    }
}

/// Connections the kernel holds for `accept` (Linux caps it at `net.core.somaxconn`): a
/// burst of clients beyond the usual 128 would have its connections dropped and retried a
/// second or more later.
const BACKLOG: u32 = 1024;

/// Listens on `addr` with a queue of [`BACKLOG`] connections.
pub fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// Raises this process's open-file limit to what `limits` needs (up to the hard limit),
/// and returns how many connections it can hold: fewer than asked when the hard limit is
/// lower (a few dozen descriptors are kept for the store, the listener and files).
pub fn fit_to_open_files(limits: Limits) -> Limits {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    const SPARE: u64 = 64;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return limits };
    let want = limits.max_connections as u64 + SPARE;
    let soft = if soft < want && setrlimit(Resource::RLIMIT_NOFILE, want.min(hard), hard).is_ok() {
        want.min(hard)
    } else {
        soft
    };
    Limits { max_connections: limits.max_connections.min(soft.saturating_sub(SPARE).max(1) as usize), ..limits }
}
