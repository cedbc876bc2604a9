//! What the platform supplies: a monotonic clock, and a network of one TCP
//! socket per server.

use embedded_io::{ErrorKind, Read, ReadReady, Write};
use redlock_core::Instant;

/// Monotonic time since any fixed point (boot, say), in microseconds.
///
/// It must never go backwards. Its resolution bounds how well validity is
/// measured: the core subtracts the elapsed time, so a coarse clock only
/// makes the lock look shorter, never longer, if `now` is read as the
/// *latest* tick (round up, not down).
pub trait Clock {
    /// The current time.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// The state of one server's connection, as the TCP stack sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Link {
    /// A connect was started and has not finished.
    Connecting,
    /// Established: bytes can be written.
    Up,
    /// Closed, refused, reset or never opened.
    Down,
}

/// One TCP socket per server, on whatever stack the board has (smoltcp,
/// embassy-net, a modem's AT firmware, std sockets in tests).
///
/// The client calls it from one thread, one operation at a time. Nothing in
/// it may block for long: [`connect`](Network::connect) only *starts* a
/// connection, and the client reads a socket only after
/// [`ReadReady::read_ready`] said so. The one place to wait is
/// [`wait`](Network::wait), which is also where a polled stack (smoltcp)
/// moves its packets.
pub trait Network {
    /// A socket, borrowed for one read or write (a wrapper around a handle
    /// into the stack's socket set is typical).
    ///
    /// `read` is called only after `read_ready` returned `true`, so it must
    /// not block then; it returns `Ok(0)` at end of stream. `write` is
    /// called only after [`write_ready`](Network::write_ready) returned
    /// `true`, and may accept part of the buffer.
    type Socket<'s>: Read + Write + ReadReady
    where
        Self: 's;

    /// Starts connecting to server `server` (an index into the client's
    /// server list), closing whatever connection it had. Must not block:
    /// the client follows it with [`link`](Network::link). `Err` when it
    /// cannot even start (no free socket, no route).
    fn connect(&mut self, server: usize) -> Result<(), ErrorKind>;

    /// The state of server `server`'s connection.
    fn link(&mut self, server: usize) -> Link;

    /// Server `server`'s socket, if it has one.
    fn socket(&mut self, server: usize) -> Option<Self::Socket<'_>>;

    /// Whether a `write` to `server`'s socket would accept at least one byte
    /// without blocking. Stacks with [`embedded_io::WriteReady`] answer it
    /// from there (smoltcp: `can_send`). The default, `true`, is for stacks
    /// that cannot tell; their `write` may then block while the send buffer
    /// is full (a lock client's requests are a few hundred bytes, so that
    /// happens only when a server stopped reading).
    fn write_ready(&mut self, server: usize) -> bool {
        let _ = server;
        true
    }

    /// Closes server `server`'s connection (the client will not use it
    /// until it calls [`connect`](Network::connect) again). Must not block.
    fn close(&mut self, server: usize);

    /// Nothing can progress until data arrives, a connection changes state,
    /// or `until` (client clock): let the stack run (poll the interface,
    /// sleep until an interrupt), and return by `until` at the latest. It may
    /// return early, and at worst (a stack with nothing to poll) return
    /// at once: the client then calls it again.
    fn wait(&mut self, until: Instant);
}
