//! The traffic endpoint under load on loopback: 10 000 requests from a real HTTP
//! client (hyper), 10 keep-alive connections, 10 trial tokens; every count exact.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use lab::config::EndpointSettings;
use lab::endpoint::{Endpoint, TrafficCount};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

const TOKENS: usize = 10;
const CONNECTIONS: usize = 10;
const PER_CONNECTION: usize = 1000;

/// A TCP stream that counts the bytes the client really wrote.
struct Counted {
    inner: TcpStream,
    written: Arc<AtomicU64>,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.written.fetch_add(*n as u64, Ordering::SeqCst);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn token(i: usize) -> String {
    format!("0{i:03}-this-host-load-r0-a0")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_requests_over_ten_tokens_are_counted_exactly() {
    let settings = EndpointSettings { body_bytes: 64, cache_control: Some("no-store".into()), ..Default::default() };
    let ep = Endpoint::start(&settings).unwrap();
    let addr = ep.addr();
    let written = Arc::new(AtomicU64::new(0));
    let started = std::time::Instant::now();

    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        let written = written.clone();
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let io = TokioIo::new(Counted { inner: stream, written });
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            let mut answered = 0usize;
            for i in 0..PER_CONNECTION {
                // Connection c sends token (c + i) mod 10: every token gets 1000 requests in all.
                let req = hyper::Request::get(format!("/t/{}", token((c + i) % TOKENS)))
                    .header("host", addr.to_string())
                    .header("x-request", format!("{c}-{i}"))
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                sender.ready().await.unwrap();
                let resp = sender.send_request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                assert_eq!(resp.headers()["cache-control"], "no-store");
                let body = resp.into_body().collect().await.unwrap().to_bytes();
                assert_eq!(body.len(), 64);
                answered += 1;
            }
            answered
        }));
    }
    let mut answered = 0;
    for t in tasks {
        answered += t.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(answered, CONNECTIONS * PER_CONNECTION);

    let counts: Vec<TrafficCount> = (0..TOKENS).map(|i| ep.count(&token(i))).collect();
    for (i, c) in counts.iter().enumerate() {
        assert_eq!(c.requests, (CONNECTIONS * PER_CONNECTION / TOKENS) as u64, "token {i}");
    }
    let bytes: u64 = counts.iter().map(|c| c.bytes).sum();
    assert_eq!(bytes, written.load(Ordering::SeqCst), "the endpoint's byte count is what the client wrote");
    assert_eq!(ep.unmatched(), TrafficCount::default());
    eprintln!(
        "endpoint load: {answered} requests over {CONNECTIONS} connections and {TOKENS} tokens in {:.2} s ({:.0} req/s)",
        elapsed.as_secs_f64(),
        answered as f64 / elapsed.as_secs_f64()
    );
}
