//! A service's stream, whichever way the host reached it: a usbmuxd connection (a
//! UnixStream, the lockdown services) or a TCP connection inside the CoreDevice tunnel
//! (tcp.rs, the RSD services). Services that write from more than one thread (DVT's
//! pushes, pcapd's deliveries) take a second handle of the same stream.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub trait Duplex: Read + Write + Send + Sized + 'static {
    /// Another handle of the same connection; it ends when the last handle is dropped.
    fn try_clone(&self) -> io::Result<Self>;
    /// How long a write may wait for the host to read before it fails.
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Duplex for UnixStream {
    fn try_clone(&self) -> io::Result<Self> {
        UnixStream::try_clone(self)
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_write_timeout(self, timeout)
    }
}

impl Duplex for crate::tcp::Stream {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(self.handle())
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.set_window_wait(timeout);
        Ok(())
    }
}
