//! Connections: what the core's sessions decide ((re)connects with backoff,
//! the handshake, giving a connection up), carried out on the network in
//! the background of operations.

use redlock_core::session::{Close, State};
use redlock_core::{Instant, ServerId};

use super::{Driven, Engine};
use crate::io::Io;
use crate::net::{Clock, Link};

impl<C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Engine<'_, C, G, SERVERS, IN, OUT>
where
    C: Clock,
    G: rand_core::TryCryptoRng,
{
    /// Closes connection `i` because of `why`. The running operation, if
    /// it had requests on it, learns that they are lost (and, for a refused
    /// handshake, why): then `true`.
    pub(super) fn fail(
        &mut self,
        net: &mut impl Io,
        i: usize,
        now: Instant,
        why: Close,
        op: Option<&mut (dyn Driven + '_)>,
    ) -> bool {
        let serial = self.serial;
        let Some(conn) = self.conns.get_mut(i) else {
            return false;
        };
        let mut owed = false;
        conn.session
            .close(now, why, &self.options, |tag| owed |= tag == serial);
        conn.clear_buffers();
        net.close(i);
        match op.filter(|_| owed) {
            Some(op) => {
                op.lost(now, ServerId(i as u8), conn.session.refused());
                true
            }
            None => false,
        }
    }

    /// Starts connecting server `i`. Out of line: it is called from two
    /// places.
    #[inline(never)]
    pub(super) fn start_connect(
        &mut self,
        net: &mut impl Io,
        i: usize,
        now: Instant,
        op: Option<&mut (dyn Driven + '_)>,
    ) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        conn.clear_buffers();
        conn.session.connecting(now, &self.options);
        if net.connect(i).is_err() {
            self.fail(net, i, now, Close::Io, op);
        }
    }

    /// Moves every connection one step, without waiting: a connection the
    /// stack saw close, or past its session's deadline, is given up; a
    /// server down and past its backoff starts connecting, a connect that
    /// finished starts its handshake, and the handshake is written as far
    /// as the buffer and the socket take. Returns the earliest deadline of
    /// a session: with an operation `op`, of any (a connect, a handshake, a
    /// request); without, of a connection still being set up on its first
    /// attempt since it last worked. The driving loop calls it before it
    /// sends, and again after it read (it then gives up the connections
    /// whose requests went unanswered before the operation times out).
    pub(super) fn maintain(
        &mut self,
        net: &mut impl Io,
        now: Instant,
        mut op: Option<&mut (dyn Driven + '_)>,
    ) -> Option<Instant> {
        // With an operation, every session's deadline counts; without, only
        // those of connections on their first attempt since they worked.
        let every = op.is_some();
        let mut next: Option<Instant> = None;
        for i in 0..SERVERS {
            let link = net.link(i);
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            let why = match (conn.session.state(), link) {
                // A connection the stack saw close.
                (State::Connecting | State::Handshake | State::Ready, Link::Down) => {
                    Some(Close::Io)
                }
                (State::Connecting, Link::Up) => {
                    conn.session.connected(now, &self.options);
                    None
                }
                _ => None,
            };
            // Past its deadline: a connect or handshake, or a request.
            if let Some(why) = why.or_else(|| conn.session.handle_timeout(now)) {
                if why == Close::ConnectTimeout {
                    rl_log!(warn, "redlock: server {} did not connect in time", i);
                }
                self.fail(net, i, now, why, op.as_deref_mut());
                continue;
            }
            if conn.session.may_connect(now, false) {
                self.start_connect(net, i, now, op.as_deref_mut());
            }
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            // The handshake written as far as the buffer and the socket
            // take it; or a request is overdue, and the session probes the
            // stream's step (written when the buffer has room; asked again
            // if not).
            if conn.session.state() == State::Handshake || conn.session.poll_probe() {
                let creds = self.creds.get(i).copied().unwrap_or_default();
                if conn.pump_session(&creds, now, &self.options).is_err() {
                    self.fail(net, i, now, Close::Io, op.as_deref_mut());
                    continue;
                }
                self.flush(net, i, op.as_deref_mut(), now);
            }
            let Some(conn) = self.conns.get(i) else {
                continue;
            };
            let counts = every || (conn.session.failures() == 0 && !conn.session.is_ready());
            if let Some(deadline) = conn.session.poll_timeout().filter(|_| counts) {
                next = Some(next.map_or(deadline, |n: Instant| n.min(deadline)));
            }
        }
        next
    }
}
