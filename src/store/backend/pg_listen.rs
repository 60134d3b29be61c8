//! `LISTEN` on a PostgreSQL channel from a thread of its own: the async client's connection
//! is polled for its messages (the usual connection task drops notifications), and each
//! notification is passed on. The thread sleeps on the socket between notifications: no
//! timer, no wake-up. A lost session is said (`Heard::Lost`), then the thread connects
//! again with backoff and says `Heard::Again` (what was sent meanwhile was not heard).

use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedSender;
use tokio_postgres::AsyncMessage;

use super::conn::DbError;
use crate::config::PgUrl;

/// What a listener heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// A notification on the channel, with its payload (what it is about; empty: anything).
    Notified(String),
    /// The session ended (the server restarted, the network went away).
    Lost,
    /// Listening again after a lost session: anything may have changed.
    Again,
}

/// The longest pause between attempts to connect again.
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Listens on `channel` until `tx`'s receiver is gone. Returns once the first `LISTEN`
/// is in place (so nothing notified after this returns is missed), or its error.
pub fn listen(url: &PgUrl, channel: &'static str, tx: UnboundedSender<Heard>) -> Result<(), DbError> {
    let url = url.with_keepalives().named("lab-listen");
    let (ready_tx, ready) = std::sync::mpsc::sync_channel::<Result<(), DbError>>(1);
    std::thread::Builder::new()
        .name("lab-listen".into())
        .spawn(move || {
            let _ = super::pg_tls::on_own_runtime(async move {
                let mut ready = Some(ready_tx);
                let mut pause = Duration::from_millis(100);
                loop {
                    let session = session(&url, channel, &tx, &mut ready).await;
                    let Some(r) = ready.take() else {
                        // Heard before: it ended (or never began again).
                        if tx.is_closed() {
                            return;
                        }
                        if session.is_ok() {
                            pause = Duration::from_millis(100);
                        }
                        if tx.send(Heard::Lost).is_err() {
                            return;
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(BACKOFF_MAX);
                        continue;
                    };
                    // The first connection failed: the caller hears why.
                    let _ = r.send(session.map(|_| ()));
                    return;
                }
            });
        })
        .map_err(|e| DbError::Closed(format!("cannot start a listener's thread: {e}")))?;
    ready.recv().map_err(|_| DbError::Closed("a listener's thread ended at its start".into()))?
}

/// One session: connects, listens, passes notifications on until it ends. `ready` is
/// answered (and taken) once listening; a later session says `Again` instead.
async fn session(
    url: &PgUrl,
    channel: &'static str,
    tx: &UnboundedSender<Heard>,
    ready: &mut Option<std::sync::mpsc::SyncSender<Result<(), DbError>>>,
) -> Result<(), DbError> {
    match super::pg_tls::tls_config(url)? {
        None => {
            let (client, connection) = url.config.connect(tokio_postgres::NoTls).await?;
            pump(client, connection, channel, tx, ready).await
        }
        Some(tls) => {
            let (client, connection) = url.config.connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls)).await?;
            pump(client, connection, channel, tx, ready).await
        }
    }
}

async fn pump<S, T>(
    client: tokio_postgres::Client,
    mut connection: tokio_postgres::Connection<S, T>,
    channel: &'static str,
    tx: &UnboundedSender<Heard>,
    ready: &mut Option<std::sync::mpsc::SyncSender<Result<(), DbError>>>,
) -> Result<(), DbError>
where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let (msg_tx, mut messages) = tokio::sync::mpsc::unbounded_channel();
    // The connection is driven here, its messages kept: the client's `LISTEN` needs it
    // polled while it waits for its answer.
    let drive = async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(m) = stream.next().await {
            match m {
                Ok(AsyncMessage::Notification(n)) => {
                    if msg_tx.send(n.payload().to_string()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    };
    let listen = async {
        client.batch_execute(&format!("LISTEN {channel}")).await?;
        match ready.take() {
            Some(r) => drop(r.send(Ok(()))),
            None => {
                if tx.send(Heard::Again).is_err() {
                    return Ok(());
                }
            }
        }
        while let Some(payload) = messages.recv().await {
            if tx.send(Heard::Notified(payload)).is_err() {
                return Ok(());
            }
        }
        Ok::<_, DbError>(())
    };
    tokio::select! {
        _ = drive => Ok(()),
        r = listen => r,
    }
}
