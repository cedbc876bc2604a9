//! Driving operations: their deadlines, connection errors and requests.

use super::*;

impl<J: Job> State<J> {
    /// The earliest deadline of any running operation or connect.
    pub(super) fn next_deadline(&self, epoch: StdInstant) -> Option<StdInstant> {
        let ops = bits(self.lead.active)
            .filter_map(|i| self.slots.get(i)?.deadline)
            .min()
            .map(|t| std_instant(epoch, t));
        // While a reactor leader holds its turn (or was not woken for what
        // was queued since), the requests queued meanwhile wait no longer
        // than the cork would let them.
        let held = if self.holding() {
            self.unsent_until(epoch)
        } else {
            None
        };
        [ops, self.session_deadline(), held]
            .into_iter()
            .flatten()
            .min()
    }

    /// A reactor leader holds its turn for the owners its last turns woke,
    /// or was not woken for the requests queued since (`submit` leaves
    /// that to the last of those owners): the requests wait for its next
    /// turn.
    pub(super) fn holding(&self) -> bool {
        self.lead.reactor.is_some()
            && self.lead.queued
            && (self.lead.held || self.lead.hold_for != 0)
    }

    /// When the first request queued and not written yet, on any
    /// connection, has waited its share of its time (see
    /// `Session::unsent_until`).
    pub(super) fn unsent_until(&self, epoch: StdInstant) -> Option<StdInstant> {
        self.conns
            .iter()
            .filter(|c| c.is_up() && c.has_unwritten())
            .filter_map(|c| c.session.unsent_until())
            .min()
            .map(|t| std_instant(epoch, t))
    }

    /// [`pump`](State::pump) for every running operation.
    pub(super) fn pump_all(&mut self, now: Instant) {
        for i in bits(self.lead.active) {
            self.pump(i, now);
        }
    }

    /// Lets the operation in `slot` take its connection errors and expired
    /// deadlines, queues what it wants to send, and marks it done once its
    /// outcome is out and nothing is left to send.
    pub(super) fn pump(&mut self, slot: usize, now: Instant) {
        let Some(s) = self.slots.get_mut(slot) else {
            return;
        };
        let serial = s.serial;
        if let Some(mut op) = s.op.take() {
            // Out of its slot while it sends, so that a connection failing
            // meanwhile can still be recorded for it (in `conn_errors`).
            let pumped = catch_unwind(AssertUnwindSafe(|| {
                self.drive(&mut op, slot, serial, now);
                let delivered = op.deliver(&mut self.slots[slot].cell);
                (delivered, op.is_finished(), op.poll_timeout())
            }));
            let s = &mut self.slots[slot];
            match pumped {
                Ok((delivered, finished, deadline)) => {
                    s.deadline = deadline;
                    s.done = delivered && finished;
                    // Dropped once done: later replies for it are stragglers.
                    if !s.done {
                        s.op = Some(op);
                    }
                }
                Err(payload) => s.poison(payload),
            }
        }
        let s = &mut self.slots[slot];
        if s.done {
            self.lead.active &= !bit(slot);
            if s.waiting {
                self.lead.to_wake |= bit(slot);
            }
            // A task's, on a reactor: not one the driver owns (adopted, or
            // its own: a release in the background, an extension), since a
            // reactor leader does not wait for the driver thread.
            if s.task && s.on_reactor {
                self.lead.hold_for |= bit(slot);
            }
        }
    }

    pub(super) fn drive(&mut self, op: &mut J, slot: usize, serial: u64, now: Instant) {
        loop {
            let errors = core::mem::take(&mut self.slots[slot].conn_errors);
            for server in bits(u64::from(errors)) {
                self.tell_down(op, server, now);
            }
            if op.poll_timeout().is_some_and(|d| now >= d) {
                op.handle_timeout(now);
            }
            self.transmit(op, slot, serial, now);
            // A connection that failed while sending: tell it, then go on.
            if self.slots[slot].conn_errors == 0 {
                break;
            }
        }
    }

    /// Queues what `op` wants to send.
    pub(super) fn transmit(&mut self, op: &mut J, slot: usize, serial: u64, now: Instant) {
        loop {
            let t = match op.poll_transmit(now, &mut self.scratch) {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(EncodeError::BufferTooSmall { needed }) => {
                    self.scratch.resize(needed, 0);
                    continue;
                }
                Err(_) => break,
            };
            let i = t.server.index();
            // A release is delivered even to a server in its reconnect
            // backoff: a key left there would block everyone until its ttl.
            if !self.ensure_connecting(i, t.release) {
                self.tell_down(op, i, now);
                continue;
            }
            let conn = &mut self.conns[i];
            let tag = Expect {
                slot: slot as u16,
                serial,
            };
            let bytes = &self.scratch[..t.len];
            match conn
                .session
                .push_with_replies(now, tag, t.deadline, t.replies, &self.policy)
            {
                Ok(queued @ (Queued::Write | Queued::ProbeFirst)) => {
                    // A request overdue on this connection: the probe goes
                    // first, so that the reply of a request the connection
                    // lost is never taken for this one's (SPEC C10).
                    if queued == Queued::ProbeFirst {
                        encode_growing(&mut conn.out, encode_probe);
                    }
                    // The operation is judged by the incarnation of the
                    // connection its request goes on (another call may
                    // have reconnected since the operation began).
                    if let Some(started) = conn.session.incarnation() {
                        op.set_incarnation(t.server, started);
                    }
                    conn.out.extend_from_slice(bytes);
                }
                // C1, fail closed: nothing but the handshake is written
                // before the core judged every handshake reply good.
                // Behind it, its INFO tells the operation the incarnation.
                Ok(Queued::Held) => {
                    conn.releases_held |= t.release;
                    conn.held.extend_from_slice(bytes);
                }
                Err((_, why)) => {
                    if why == Close::Stuck {
                        log::warn!("redlock: {} stopped answering", conn.url);
                        self.fail_because(i, why, None);
                    }
                    // Told once: through the slot's connection errors when
                    // it had other requests on the connection, else here.
                    let bit = 1u16.checked_shl(i as u32).unwrap_or(0);
                    if self.slots[slot].conn_errors & bit == 0 {
                        self.tell_down(op, i, now);
                    }
                }
            }
        }
    }
}
