//! The interface every operation offers to a platform.

use redlock_resp::{EncodeError, Reply};

use crate::handshake::SetupError;
use crate::report::ServerId;
use crate::round::{Transmit, Unsolicited};
use crate::time::Instant;

/// A sans-IO operation over N servers, driven by the platform like
/// quinn-proto's `Connection`:
///
/// 1. Send: call [`poll_transmit`](Operation::poll_transmit) until it returns
///    `None`, writing each buffer to its server (A2: everything is written
///    before anything is read).
/// 2. Wait for a reply or until [`poll_timeout`](Operation::poll_timeout).
/// 3. Feed what happened: [`handle_reply`](Operation::handle_reply) with each
///    parsed reply in the order the server sent them,
///    [`handle_connection_error`](Operation::handle_connection_error) when a
///    connection fails, [`handle_timeout`](Operation::handle_timeout) when the
///    deadline passes.
/// 4. Check [`poll_outcome`](Operation::poll_outcome), and go back to 1 until
///    [`is_finished`](Operation::is_finished).
///
/// The operation never reads a clock or touches a socket: `now` is a
/// parameter, and output goes into the caller's buffer.
///
/// A request's timeout runs from when `poll_transmit` hands it out, not from
/// when the operation was made: a platform that gets to send late (a thread
/// descheduled, a lock contended) still sends every request, and a request
/// is never timed out unsent. What is not sent yet has no deadline, so a
/// platform must drain `poll_transmit` before it waits.
pub trait Operation {
    /// What the operation ends with.
    type Output;

    /// Writes the next request into `buf` and says which server it is for,
    /// or `None` when nothing is to be sent now. On
    /// [`EncodeError::BufferTooSmall`] nothing is consumed: call again with a
    /// buffer of the size it names.
    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError>;

    /// A reply from `server`, in the order it sent them. RESP3 pushes are
    /// ignored. `Err` means the server answered a request this operation did
    /// not make: the stream is out of step, and the platform should close
    /// the connection (and then report it with `handle_connection_error`).
    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited>;

    /// The connection to `server` failed: its requests in flight are lost.
    fn handle_connection_error(&mut self, now: Instant, server: ServerId);

    /// `server` cannot be used: its connection's handshake failed (judged by
    /// [`handshake::judge`](crate::handshake::judge)) or it is the same
    /// server as another entry. Its requests in flight are lost, as with a
    /// connection error, and the report says why. The default treats it as
    /// a connection error.
    fn handle_setup_error(&mut self, now: Instant, server: ServerId, error: SetupError) {
        let _ = error;
        self.handle_connection_error(now, server);
    }

    /// `server`'s current incarnation (process) began at `started_at`: a
    /// (re)connect made while this operation runs learnt it from `INFO`,
    /// before any of the operation's requests went on that connection. Only
    /// an acquisition uses it (the restart guard, C2, judges each vote by the
    /// incarnation of the connection it came on); the default does nothing.
    fn set_incarnation(&mut self, server: ServerId, started_at: Instant) {
        let _ = (server, started_at);
    }

    /// Time has passed: per-request deadlines and retry waits are checked.
    fn handle_timeout(&mut self, now: Instant);

    /// When `handle_timeout` should be called next, if anything is awaited.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The outcome, once (later calls return `None`).
    fn poll_outcome(&mut self) -> Option<Self::Output>;

    /// True when the outcome is out and nothing is left to send.
    fn is_finished(&self) -> bool;
}
