//! Streams multiplexed on one transport (protocol.txt "STREAMS"): OPEN, OKAY, WRTE, CLSE.
//! Each service runs on its own thread with a [`Stream`]; the connection's reader thread
//! routes the host's packets to it through a channel.

use std::collections::HashMap;
use std::io::{self, Read};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use crate::wire::{A_CLSE, A_OKAY, A_WRTE, Message};

/// The writing half of a connection, shared by its streams.
pub struct Link {
    socket: Mutex<TcpStream>,
    /// The smaller of the host's and our maximum payload, fixed at CNXN.
    pub max_payload: Mutex<usize>,
}

impl Link {
    pub fn new(socket: TcpStream) -> Link {
        Link { socket: Mutex::new(socket), max_payload: Mutex::new(4096) }
    }

    pub fn send(&self, m: &Message) -> io::Result<()> {
        m.write_to(&mut *self.socket.lock().unwrap())
    }
}

/// What the reader thread hands a stream.
pub enum Event {
    Data(Vec<u8>),
    /// The host took our last WRTE.
    Okay,
    Closed,
}

/// The open streams of one connection, by our (local) id.
#[derive(Default)]
pub struct Streams {
    open: Mutex<HashMap<u32, Sender<Event>>>,
    next_id: Mutex<u32>,
}

impl Streams {
    /// Registers a stream the host opened with its id `remote`.
    pub fn open(self: &Arc<Self>, link: Arc<Link>, remote: u32) -> Stream {
        let local = {
            let mut next = self.next_id.lock().unwrap();
            *next += 1;
            *next
        };
        let (tx, rx) = channel();
        self.open.lock().unwrap().insert(local, tx);
        Stream { local, remote, link, events: rx, streams: Arc::clone(self), unread: Vec::new(), at: 0, eof: false }
    }

    /// Hands a packet from the host to stream `local`; false if there is no such stream.
    pub fn deliver(&self, local: u32, event: Event) -> bool {
        let closing = matches!(event, Event::Closed);
        let mut open = self.open.lock().unwrap();
        let delivered = open.get(&local).is_some_and(|tx| tx.send(event).is_ok());
        if closing {
            open.remove(&local);
        }
        delivered
    }

    /// The connection is gone: every stream sees the host close it.
    pub fn close_all(&self) {
        for (_, tx) in self.open.lock().unwrap().drain() {
            let _ = tx.send(Event::Closed);
        }
    }
}

/// One service's end of a stream: `Read` gives the host's bytes (acknowledging each WRTE
/// as it is taken), `write_all` sends WRTEs and waits for the host's OKAY after each.
pub struct Stream {
    pub local: u32,
    pub remote: u32,
    link: Arc<Link>,
    events: Receiver<Event>,
    streams: Arc<Streams>,
    unread: Vec<u8>,
    at: usize,
    eof: bool,
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the host closed the stream")
}

impl Stream {
    /// Tells the host we took the stream: OKAY(local, remote).
    pub fn accept(&self) -> io::Result<()> {
        self.link.send(&Message::new(A_OKAY, self.local, self.remote, Vec::new()))
    }

    pub fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        let max = *self.link.max_payload.lock().unwrap();
        while !data.is_empty() {
            let n = data.len().min(max);
            self.link.send(&Message::new(A_WRTE, self.local, self.remote, data[..n].to_vec()))?;
            data = &data[n..];
            loop {
                match self.events.recv() {
                    Ok(Event::Okay) => break,
                    Ok(Event::Data(d)) => self.take(d)?,
                    Ok(Event::Closed) | Err(_) => {
                        self.eof = true;
                        return Err(closed());
                    }
                }
            }
        }
        Ok(())
    }

    /// Keeps host data that came while we waited for an OKAY, and acknowledges it.
    fn take(&mut self, d: Vec<u8>) -> io::Result<()> {
        self.unread.drain(..self.at);
        self.at = 0;
        self.unread.extend_from_slice(&d);
        self.link.send(&Message::new(A_OKAY, self.local, self.remote, Vec::new()))
    }

    /// Ends the stream from our side: CLSE(local, remote).
    pub fn close(self) {
        self.streams.open.lock().unwrap().remove(&self.local);
        let _ = self.link.send(&Message::new(A_CLSE, self.local, self.remote, Vec::new()));
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.unread.len() {
            if self.eof {
                return Ok(0);
            }
            match self.events.recv() {
                Ok(Event::Data(d)) => self.take(d)?,
                Ok(Event::Okay) => {}
                Ok(Event::Closed) | Err(_) => self.eof = true,
            }
        }
        let n = buf.len().min(self.unread.len() - self.at);
        buf[..n].copy_from_slice(&self.unread[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
