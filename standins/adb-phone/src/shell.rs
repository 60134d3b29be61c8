//! The shell services. `shell,v2,…:CMD` speaks the shell protocol (AOSP
//! adb/shell_protocol.h): packets of [id u8][length u32 LE][data], ids 0 stdin, 1 stdout,
//! 2 stderr, 3 exit (one byte), 4 close-stdin, 5 window size. `shell:CMD` (no shell_v2)
//! and `exec:CMD` are raw: the stream is stdin one way and stdout with stderr the other,
//! and the exit status is lost, as on a phone without shell_v2.
//! An empty command runs what arrives on stdin, as `adb shell < script` does.

use std::io::{self, Read};

use crate::commands::{self, Io};
use crate::store::Store;
use crate::streams::Stream;

const ID_STDIN: u8 = 0;
const ID_STDOUT: u8 = 1;
const ID_STDERR: u8 = 2;
const ID_EXIT: u8 = 3;
const ID_CLOSE_STDIN: u8 = 4;

pub fn packet(id: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + data.len());
    out.push(id);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The host's stdin packets as a byte stream, ending at close-stdin.
struct V2Stdin<'a> {
    stream: &'a mut Stream,
    data: Vec<u8>,
    at: usize,
    eof: bool,
}

impl Read for V2Stdin<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.data.len() && !self.eof {
            let mut header = [0u8; 5];
            if self.stream.read_exact(&mut header).is_err() {
                self.eof = true;
                break;
            }
            let len = u32::from_le_bytes(header[1..5].try_into().unwrap()) as usize;
            let mut data = vec![0u8; len];
            self.stream.read_exact(&mut data)?;
            match header[0] {
                ID_STDIN => (self.data, self.at) = (data, 0),
                ID_CLOSE_STDIN => self.eof = true,
                _ => {} // window size changes and anything newer
            }
        }
        let n = buf.len().min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn script_or_stdin(command: &str, io: &mut Io) -> String {
    if command.trim().is_empty() { String::from_utf8_lossy(&io.stdin_bytes()).to_string() } else { command.to_string() }
}

pub fn serve_v2(mut stream: Stream, store: &Store, command: &str) {
    let (out, err, status) = {
        let mut stdin = V2Stdin { stream: &mut stream, data: Vec::new(), at: 0, eof: false };
        let mut io = Io { stdin: &mut stdin, out: Vec::new(), err: Vec::new() };
        let script = script_or_stdin(command, &mut io);
        let status = commands::run(store, &script, &mut io);
        (io.out, io.err, status)
    };
    let mut reply = Vec::new();
    if !out.is_empty() {
        reply.extend(packet(ID_STDOUT, &out));
    }
    if !err.is_empty() {
        reply.extend(packet(ID_STDERR, &err));
    }
    reply.extend(packet(ID_EXIT, &[(status & 0xff) as u8]));
    if stream.write_all(&reply).is_ok() {
        stream.close();
    }
}

pub fn serve_raw(mut stream: Stream, store: &Store, command: &str) {
    let output = {
        let mut io = Io { stdin: &mut stream, out: Vec::new(), err: Vec::new() };
        let script = script_or_stdin(command, &mut io);
        commands::run(store, &script, &mut io);
        let mut all = io.out;
        all.extend_from_slice(&io.err);
        all
    };
    if stream.write_all(&output).is_ok() {
        stream.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_packet_is_one_byte_of_status() {
        assert_eq!(packet(ID_EXIT, &[1]), vec![3, 1, 0, 0, 0, 1]);
        assert_eq!(packet(ID_STDOUT, b"ok\n")[..5], [1, 3, 0, 0, 0]);
    }
}
