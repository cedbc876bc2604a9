//! The operation as the driving loop sees it: a trait object, so that the
//! loop is compiled once, not once per operation type.

use redlock_core::handshake::SetupError;
use redlock_core::redlock_resp::{EncodeError, Reply};
use redlock_core::{Instant, Operation, ServerId, Transmit, Unsolicited};

/// An operation, behind a trait object so that the loop that drives
/// operations is compiled once, not once per operation.
pub(crate) trait Driven {
    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError>;
    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited>;
    /// `server`'s requests are lost: its connection failed, or its
    /// handshake was `refused` (the operation's `handle_connection_error`
    /// or `handle_setup_error`).
    fn lost(&mut self, now: Instant, server: ServerId, refused: Option<SetupError>);
    fn handle_timeout(&mut self, now: Instant);
    fn set_incarnation(&mut self, server: ServerId, started_at: Instant);
    fn poll_timeout(&self) -> Option<Instant>;
    /// `true` when the outcome is out and nothing is left to send.
    fn done(&mut self) -> bool;
}

impl<O: Operation> Driven for O {
    fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit>, EncodeError> {
        Operation::poll_transmit(self, now, buf)
    }
    fn handle_reply(
        &mut self,
        now: Instant,
        server: ServerId,
        reply: Reply<'_>,
    ) -> Result<(), Unsolicited> {
        Operation::handle_reply(self, now, server, reply)
    }
    fn lost(&mut self, now: Instant, server: ServerId, refused: Option<SetupError>) {
        match refused {
            Some(error) => Operation::handle_setup_error(self, now, server, error),
            None => Operation::handle_connection_error(self, now, server),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        Operation::handle_timeout(self, now);
    }
    fn set_incarnation(&mut self, server: ServerId, started_at: Instant) {
        Operation::set_incarnation(self, server, started_at);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Operation::poll_timeout(self)
    }
    fn done(&mut self) -> bool {
        Operation::is_finished(self)
    }
}
