//! `redlock-embedded` on the host: a [`Network`] of non-blocking std
//! sockets (mio's, for a connect that does not block) wrapped with
//! `embedded-io-adapters`, a clock over `std::time::Instant`, and the OS RNG,
//! so that the embedded client runs against real `redis-server` processes.

use core::net::SocketAddr;
use std::io;
use std::time::Instant as StdInstant;

use embedded_io::{ErrorKind, ErrorType, Read, ReadReady, Write};
use embedded_io_adapters::std::FromStd;
use redlock_embedded::{Clock, Instant, Link, Network};

/// A socket of [`StdNet`]: a mio stream behind `FromStd`, plus
/// `ReadReady` (which std has not) from a non-blocking `peek`.
pub struct Sock {
    io: FromStd<mio::net::TcpStream>,
    connected: bool,
}

impl core::fmt::Debug for Sock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sock")
            .field("stream", self.io.inner())
            .field("connected", &self.connected)
            .finish()
    }
}

impl ErrorType for Sock {
    type Error = io::Error;
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, io::Error> {
        self.io.read(buf)
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> Result<usize, io::Error> {
        self.io.write(buf)
    }
    fn flush(&mut self) -> Result<(), io::Error> {
        self.io.flush()
    }
}

impl ReadReady for Sock {
    fn read_ready(&mut self) -> Result<bool, io::Error> {
        let mut byte = [0u8; 1];
        match self.io.inner().peek(&mut byte) {
            // Data, or end of stream (a read returns 0 at once).
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// One non-blocking TCP socket per server address.
#[derive(Debug)]
pub struct StdNet {
    addrs: Vec<SocketAddr>,
    socks: Vec<Option<Sock>>,
    /// Connects started, per server (to see reconnects in tests).
    pub connects: Vec<usize>,
    /// Whether `link` reports a connection the peer closed as down (as a
    /// stack that saw the FIN does). Off: the client finds out only when it
    /// uses the connection.
    pub notice_close: bool,
}

impl StdNet {
    /// A network for `addrs` (server `i` is `addrs[i]`), nothing connected.
    pub fn new(addrs: &[SocketAddr]) -> StdNet {
        StdNet {
            addrs: addrs.to_vec(),
            socks: addrs.iter().map(|_| None).collect(),
            connects: vec![0; addrs.len()],
            notice_close: true,
        }
    }
}

impl Network for StdNet {
    type Socket<'s> = &'s mut Sock;

    fn connect(&mut self, server: usize) -> Result<(), ErrorKind> {
        let addr = *self.addrs.get(server).ok_or(ErrorKind::InvalidInput)?;
        self.connects[server] += 1;
        // mio's connect returns at once; `link` watches it finish.
        let stream = mio::net::TcpStream::connect(addr).map_err(|e| {
            self.socks[server] = None;
            embedded_io::Error::kind(&e)
        })?;
        let _ = stream.set_nodelay(true);
        self.socks[server] = Some(Sock {
            io: FromStd::new(stream),
            connected: false,
        });
        Ok(())
    }

    fn link(&mut self, server: usize) -> Link {
        let notice_close = self.notice_close;
        let Some(sock) = self.socks.get_mut(server).and_then(Option::as_mut) else {
            return Link::Down;
        };
        if sock.connected && !notice_close {
            return Link::Up;
        }
        if sock.connected {
            // The peer closed: a stack would show the connection closing.
            let mut byte = [0u8; 1];
            return match sock.io.inner().peek(&mut byte) {
                Ok(0) => Link::Down,
                Ok(_) => Link::Up,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Link::Up,
                Err(_) => Link::Down,
            };
        }
        let stream = sock.io.inner();
        if let Ok(Some(_)) | Err(_) = stream.take_error() {
            return Link::Down;
        }
        match stream.peer_addr() {
            Ok(_) => {
                sock.connected = true;
                Link::Up
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Link::Connecting,
            Err(_) => Link::Down,
        }
    }

    fn socket(&mut self, server: usize) -> Option<&mut Sock> {
        self.socks.get_mut(server).and_then(Option::as_mut)
    }

    fn close(&mut self, server: usize) {
        if let Some(slot) = self.socks.get_mut(server) {
            *slot = None;
        }
    }

    fn wait(&mut self, until: Instant) {
        // Polls every 100 µs: simple, and enough for tests.
        let now = StdClock::since_start();
        let left = until.as_micros().saturating_sub(now.as_micros()).min(100);
        std::thread::sleep(core::time::Duration::from_micros(left));
    }
}

/// Microseconds since the first use in this process.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdClock;

impl StdClock {
    fn since_start() -> Instant {
        static START: std::sync::OnceLock<StdInstant> = std::sync::OnceLock::new();
        let start = START.get_or_init(StdInstant::now);
        Instant::from_micros(start.elapsed().as_micros() as u64)
    }
}

impl Clock for StdClock {
    fn now(&self) -> Instant {
        StdClock::since_start()
    }
}

/// The operating system's RNG, as a `rand_core` crypto RNG.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsRng;

impl rand_core::TryRng for OsRng {
    type Error = getrandom::Error;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        getrandom::fill(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        getrandom::fill(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        getrandom::fill(dst)
    }
}

impl rand_core::TryCryptoRng for OsRng {}
