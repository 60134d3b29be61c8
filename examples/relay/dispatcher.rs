//! The two event-loop backends the audit compares: poll(2) on a short tick, and epoll(7).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub fd: RawFd,
    pub readable: bool,
    pub writable: bool,
}

pub trait Dispatcher {
    /// Watches `fd` for reading, and for writing when `write`.
    fn set(&mut self, fd: RawFd, write: bool) -> io::Result<()>;
    fn remove(&mut self, fd: RawFd);
    /// Waits for events, up to `timeout` (the next timer; `None`: no timer).
    fn wait(&mut self, timeout: Option<Duration>, out: &mut Vec<Ready>) -> io::Result<()>;
    fn name(&self) -> &'static str;
}

fn millis_up(d: Duration) -> libc::c_int {
    d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int
}

/// Like libevent's poll backend under aggressive timers: the fd array is rebuilt and
/// handed to poll(2) on every turn, and the wait never lasts longer than `tick`,
/// whether or not there is anything to do.
pub struct PollDispatcher {
    fds: BTreeMap<RawFd, bool>,
    tick: Duration,
}

impl PollDispatcher {
    pub fn new(tick: Duration) -> Self {
        PollDispatcher { fds: BTreeMap::new(), tick }
    }
}

impl Dispatcher for PollDispatcher {
    fn set(&mut self, fd: RawFd, write: bool) -> io::Result<()> {
        self.fds.insert(fd, write);
        Ok(())
    }

    fn remove(&mut self, fd: RawFd) {
        self.fds.remove(&fd);
    }

    fn wait(&mut self, timeout: Option<Duration>, out: &mut Vec<Ready>) -> io::Result<()> {
        let mut pfds: Vec<libc::pollfd> = self
            .fds
            .iter()
            .map(|(&fd, &write)| libc::pollfd {
                fd,
                events: libc::POLLIN | if write { libc::POLLOUT } else { 0 },
                revents: 0,
            })
            .collect();
        let wait = timeout.map_or(self.tick, |t| t.min(self.tick));
        // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, millis_up(wait)) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        for p in pfds.iter().filter(|p| p.revents != 0) {
            let err = p.revents & (libc::POLLERR | libc::POLLHUP) != 0;
            out.push(Ready {
                fd: p.fd,
                readable: p.revents & libc::POLLIN != 0 || err,
                writable: p.revents & libc::POLLOUT != 0,
            });
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "poll"
    }
}

/// epoll(7): sleeps until an fd is ready or the next real timer is due.
pub struct EpollDispatcher {
    epfd: RawFd,
    watched: BTreeMap<RawFd, bool>,
    events: Vec<libc::epoll_event>,
}

impl EpollDispatcher {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EpollDispatcher {
            epfd,
            watched: BTreeMap::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
        })
    }
}

impl Dispatcher for EpollDispatcher {
    fn set(&mut self, fd: RawFd, write: bool) -> io::Result<()> {
        if self.watched.get(&fd) == Some(&write) {
            return Ok(());
        }
        let flags = libc::EPOLLIN | if write { libc::EPOLLOUT } else { 0 };
        let mut ev = libc::epoll_event { events: flags as u32, u64: fd as u64 };
        let op = if self.watched.contains_key(&fd) { libc::EPOLL_CTL_MOD } else { libc::EPOLL_CTL_ADD };
        // SAFETY: valid epoll fd and event pointer.
        if unsafe { libc::epoll_ctl(self.epfd, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.watched.insert(fd, write);
        Ok(())
    }

    fn remove(&mut self, fd: RawFd) {
        if self.watched.remove(&fd).is_some() {
            // SAFETY: valid epoll fd; a null event is allowed for DEL.
            unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
        }
    }

    fn wait(&mut self, timeout: Option<Duration>, out: &mut Vec<Ready>) -> io::Result<()> {
        let ms = timeout.map_or(-1, millis_up);
        // SAFETY: `events` has room for `len` events.
        let n = unsafe { libc::epoll_wait(self.epfd, self.events.as_mut_ptr(), self.events.len() as libc::c_int, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        for ev in &self.events[..n as usize] {
            let flags = ev.events as libc::c_int;
            let err = flags & (libc::EPOLLERR | libc::EPOLLHUP) != 0;
            out.push(Ready {
                fd: ev.u64 as RawFd,
                readable: flags & libc::EPOLLIN != 0 || err,
                writable: flags & libc::EPOLLOUT != 0,
            });
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "epoll"
    }
}

impl Drop for EpollDispatcher {
    fn drop(&mut self) {
        // SAFETY: our own fd.
        unsafe { libc::close(self.epfd) };
    }
}
