//! Connections: (re)connecting with backoff, writing the handshake, and
//! closing a connection that failed, in the background of operations.

use redlock_core::{Duration, Instant, ServerId};

use super::{Client, Driven};
use crate::conn::{Fail, Refusal, State};
use crate::net::{Clock, Link, Network};

impl<N, C, G, const SERVERS: usize, const IN: usize, const OUT: usize>
    Client<'_, N, C, G, SERVERS, IN, OUT>
where
    N: Network,
    C: Clock,
    G: rand_core::TryCryptoRng,
{
    /// Closes connection `i`. An operation with requests on it learns that
    /// they are lost (and, for a refused handshake, why).
    pub(super) fn fail(
        &mut self,
        i: usize,
        now: Instant,
        why: Fail,
        op: Option<&mut (dyn Driven + '_)>,
    ) {
        let Some(conn) = self.conns.get_mut(i) else {
            return;
        };
        let owed = conn.owes_op();
        // A connection that breaks soon after its handshake counts as a
        // failed attempt (with backoff): a server that accepts and then
        // drops every connection is not reconnected in a tight loop.
        let flapping = conn.state == State::Ready
            && now < conn.ready_at.saturating_add(self.options.connect_timeout);
        let attempt = flapping || matches!(conn.state, State::Connecting | State::Handshake);
        // An established connection that broke: reconnect at once.
        let mut wait = Duration::ZERO;
        if attempt {
            conn.failures = conn.failures.saturating_add(1);
            wait = conn.backoff(self.options.backoff_min, self.options.backoff_max);
        }
        conn.retry_at = now.saturating_add(wait);
        let refused = match why {
            Fail::Refused(e) => Some(e),
            Fail::Broken => None,
        };
        if let Some(e) = refused {
            conn.refused = Refusal::Some(e);
            rl_log!(warn, "redlock: server {} not used: {}", i, e);
        }
        conn.reset();
        self.net.close(i);
        if let Some(op) = op.filter(|_| owed) {
            op.lost(now, ServerId(i as u8), refused);
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
        conn.begin_connect(now.saturating_add(self.options.connect_timeout));
        if self.net.connect(i).is_err() {
            self.fail(i, now, Fail::Broken, op);
        }
    }

    /// Moves every connection one step, without waiting: a server down and
    /// past its backoff starts connecting, a connect that finished starts
    /// its handshake, the handshake is written as far as the buffer and
    /// the socket take, and a connection past its deadline fails. Returns
    /// the earliest deadline of a connection still being set up, and of one
    /// on its first attempt since it last worked.
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
            match (conn.state, link) {
                // A connection the stack saw close.
                (State::Ready, Link::Down) => {
                    self.fail(i, now, Fail::Broken, op.as_deref_mut());
                }
                (State::Connecting | State::Handshake, _) if now >= conn.deadline => {
                    rl_log!(warn, "redlock: server {} did not connect in time", i);
                    self.fail(i, now, Fail::Broken, op.as_deref_mut());
                    continue;
                }
                (State::Connecting | State::Handshake, Link::Down) => {
                    self.fail(i, now, Fail::Broken, op.as_deref_mut());
                    continue;
                }
                (State::Connecting, Link::Up) => conn.start_handshake(),
                _ => {}
            }
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            if conn.state == State::Down && now >= conn.retry_at {
                self.start_connect(i, now, op.as_deref_mut());
            }
            let Some(conn) = self.conns.get_mut(i) else {
                continue;
            };
            if conn.state == State::Handshake {
                if conn.pump_handshake(&creds).is_err() {
                    self.fail(i, now, Fail::Broken, op.as_deref_mut());
                    continue;
                }
                self.flush(i, op.as_deref_mut(), now);
            }
            if let Some(conn) = self.conns.get(i) {
                if matches!(conn.state, State::Connecting | State::Handshake) {
                    waiting = earliest(waiting, conn.deadline);
                    if conn.failures == 0 {
                        fresh = earliest(fresh, conn.deadline);
                    }
                }
            }
        }
        (waiting, fresh)
    }
}
