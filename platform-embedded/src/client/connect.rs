//! Connections: what the core's sessions decide ((re)connects with backoff,
//! the handshake, giving a connection up), carried out on the network in
//! the background of operations.

use redlock_core::session::{Close, State};
use redlock_core::{Instant, ServerId};

use super::{Client, Driven};
use crate::net::{Clock, Link, Network};

impl<N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Client<'_, N, C, G, SERVERS, IN, OUT>
where
    N: Network,
    C: Clock,
    G: rand_core::TryCryptoRng,
{
    /// Closes connection `i` because of `why`. The running operation, if
    /// it had requests on it, learns that they are lost (and, for a refused
    /// handshake, why): then `true`.
    pub(super) fn fail(
        &mut self,
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
        self.net.close(i);
        match op.filter(|_| owed) {
            Some(op) => {
                op.lost(now, ServerId(i as u8), conn.session.refused());
                true
            }
            None => false,
        }
    }

    /// Before an operation: (re)connects the servers that are down and past
    /// their backoff, and waits until each is through its handshake or has
    /// failed (the connect timeout bounds it). A server whose last attempt
    /// failed is not waited for: it keeps connecting in the background, so
    /// that a server that never answers costs one connect timeout, not one
    /// per operation.
    pub(super) fn prepare(&mut self) {
        // Bounded whatever the servers do: the connects started now end by
        // then, and later ones go on in the background.
        let end = self
            .clock
            .now()
            .saturating_add(self.options.connect_timeout);
        // Never `Err`: only an operation's requests fail the loop.
        let _ = self.pump(None, end);
    }

    /// Starts connecting server `i`.
    #[inline(always)]
    pub(super) fn start_connect(
        &mut self,
        i: usize,
        now: Instant,
        op: Option<&mut (dyn Driven + '_)>,
    ) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        conn.clear_buffers();
        conn.session.connecting(now, &self.options);
        if self.net.connect(i).is_err() {
            self.fail(i, now, Close::Io, op);
        }
    }

    /// Moves every connection one step, without waiting: a connection the
    /// stack saw close, or past its session's deadline, is given up; a
    /// server down and past its backoff starts connecting, a connect that
    /// finished starts its handshake, and the handshake is written as far
    /// as the buffer and the socket take. Returns the earliest deadline of a
    /// connection still being set up, and of one on its first attempt since
    /// it last worked.
    pub(super) fn maintain(
        &mut self,
        now: Instant,
        mut op: Option<&mut (dyn Driven + '_)>,
    ) -> (Option<Instant>, Option<Instant>) {
        let earliest = |w: Option<Instant>, t: Instant| Some(w.map_or(t, |w: Instant| w.min(t)));
        let mut waiting: Option<Instant> = None;
        let mut fresh: Option<Instant> = None;
        for i in 0..SERVERS {
            let link = self.net.link(i);
            let creds = self.creds_of(i);
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            let state = conn.session.state();
            match (state, link) {
                // A connection the stack saw close.
                (State::Connecting | State::Handshake | State::Ready, Link::Down) => {
                    self.fail(i, now, Close::Io, op.as_deref_mut());
                    continue;
                }
                (State::Connecting, Link::Up) => conn.session.connected(now, &self.options),
                _ => {}
            }
            if let Some(why) = conn.session.handle_timeout(now) {
                if why == Close::ConnectTimeout {
                    rl_log!(warn, "redlock: server {} did not connect in time", i);
                }
                self.fail(i, now, why, op.as_deref_mut());
                continue;
            }
            if conn.session.may_connect(now, false) {
                self.start_connect(i, now, op.as_deref_mut());
            }
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            if conn.session.state() == State::Handshake {
                if conn.pump_handshake(&creds).is_err() {
                    self.fail(i, now, Close::Io, op.as_deref_mut());
                    continue;
                }
                self.flush(i, op.as_deref_mut(), now);
            }
            if let Some(conn) = self.conns.get(i) {
                if matches!(conn.session.state(), State::Connecting | State::Handshake) {
                    if let Some(deadline) = conn.session.poll_timeout() {
                        waiting = earliest(waiting, deadline);
                        if conn.session.failures() == 0 {
                            fresh = earliest(fresh, deadline);
                        }
                    }
                }
            }
        }
        (waiting, fresh)
    }
}
