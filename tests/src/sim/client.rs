//! The simulated clients: each runs the real core's operations through
//! its cycles of acquire, hold, release.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::collections::VecDeque;

use redlock_core::{Acquire, Duration, Instant, Operation, Release, Servers};

use super::clock::Clock;
use super::watchdog::Holding;
use super::{Event, RESOURCE, START, Sim, Violation};

#[allow(clippy::large_enum_variant)] // one per simulated client
pub(super) enum State {
    Idle,
    Acquiring {
        op: Acquire<&'static [u8]>,
        started_real: u64,
    },
    Holding(Holding),
    Releasing(Release<&'static [u8]>),
    Finished,
}

pub(super) struct Client {
    pub(super) clock: Clock,
    pub(super) state: State,
    pub(super) cycles_left: usize,
    pub(super) op_serial: u64,
    pub(super) paused_until: u64,
    pub(super) servers: Servers,
    /// Drained releases of failed acquisitions still running (A5).
    pub(super) background: Vec<(u64, Acquire<&'static [u8]>)>,
    pub(super) wake_gen: u64,
    /// The generation of the sessions' timer (see `Event::Tend`).
    pub(super) tend_gen: u64,
    /// What arrived while paused, in arrival order.
    pub(super) inbox: VecDeque<Event>,
}

impl Sim {
    pub(super) fn wake_at_real(&mut self, c: usize, at: u64) {
        let client = &mut self.clients[c];
        client.wake_gen += 1;
        let generation = client.wake_gen;
        self.push(
            at,
            Event::Wake {
                client: c,
                generation,
            },
        );
    }

    pub(super) fn client_now(&self, c: usize) -> Instant {
        Instant::from_micros(self.clients[c].clock.local(self.now))
    }

    /// Drains an operation's transmits onto the network.
    pub(super) fn flush(&mut self, c: usize) {
        let now = self.client_now(c);
        let mut buf = vec![0u8; 1024];
        loop {
            let client = &mut self.clients[c];
            let serial = client.op_serial;
            let t = match &mut client.state {
                State::Acquiring { op, .. } => op.poll_transmit(now, &mut buf).unwrap(),
                State::Releasing(op) => op.poll_transmit(now, &mut buf).unwrap(),
                State::Holding(Holding {
                    extending: Some((op, _)),
                    ..
                }) => op.poll_transmit(now, &mut buf).unwrap(),
                _ => None,
            };
            let Some(t) = t else { break };
            self.send(c, t.server.index(), buf[..t.len].to_vec(), serial, t);
        }
        let mut i = 0;
        while i < self.clients[c].background.len() {
            let (serial, op) = &mut self.clients[c].background[i];
            let serial = *serial;
            match op.poll_transmit(now, &mut buf).unwrap() {
                Some(t) => self.send(c, t.server.index(), buf[..t.len].to_vec(), serial, t),
                None => i += 1,
            }
        }
        // A background op is done once nothing is left to send and no reply is awaited.
        let conns = &self.conns[c];
        self.clients[c]
            .background
            .retain(|(serial, _)| conns.iter().any(|k| k.owes(*serial)));
    }

    /// Advances client `c`'s state machine at the current time.
    pub(super) fn step(&mut self, c: usize) {
        // The sessions first: a connection given up tells its operations
        // before they time out.
        self.tend_sessions(c);
        let now = self.client_now(c);
        if let State::Acquiring { op, .. } = &mut self.clients[c].state {
            op.handle_timeout(now);
        }
        if let State::Releasing(op) = &mut self.clients[c].state {
            op.handle_timeout(now);
        }
        if let State::Holding(Holding {
            extending: Some((op, _)),
            ..
        }) = &mut self.clients[c].state
        {
            op.handle_timeout(now);
        }
        self.flush(c);
        let state = core::mem::replace(&mut self.clients[c].state, State::Idle);
        let next = match state {
            State::Idle => {
                if self.clients[c].cycles_left == 0 {
                    State::Finished
                } else {
                    self.clients[c].cycles_left -= 1;
                    self.maybe_pause(c, false);
                    self.clients[c].op_serial += 1;
                    let ttl = Duration::from_millis(self.sc.ttl_ms);
                    let servers = self.clients[c].servers;
                    let op = Acquire::new(
                        &self.sc.config,
                        &servers,
                        RESOURCE,
                        ttl,
                        None,
                        &mut self.rng,
                        now,
                    )
                    .unwrap();
                    self.clients[c].state = State::Acquiring {
                        op,
                        started_real: self.now,
                    };
                    return self.step(c);
                }
            }
            State::Acquiring {
                mut op,
                started_real,
            } => match op.poll_outcome() {
                None => State::Acquiring { op, started_real },
                Some(Ok(lock)) => {
                    // Checker 3's bound: four round trips (the fenced acquire
                    // and the fence write, each possibly NOSCRIPT then EVAL).
                    if self.liveness_applies(started_real)
                        && self.now - started_real > 4 * 2 * self.sc.delay_us.1 + 1_000
                    {
                        self.report.violations.push(Violation::NotLive {
                            client: c,
                            attempts: 1,
                        });
                    }
                    self.report.grants += 1;
                    self.grants.push((self.now, lock.fence()));
                    let permille = self
                        .rng
                        .range(self.sc.hold_permille.0, self.sc.hold_permille.1);
                    let hold = lock.validity().as_micros() * permille / 1_000;
                    if self.sc.pause_while_holding {
                        self.maybe_pause(c, true);
                    }
                    State::Holding(self.hold(lock, now.as_micros(), hold))
                }
                Some(Err(e)) => {
                    if self.trace {
                        eprintln!(
                            "{} c{c} op{} failed {:?} {:?}",
                            self.now,
                            self.clients[c].op_serial,
                            op.token(),
                            e
                        );
                    }
                    self.report.failures += 1;
                    if self.liveness_applies(started_real) {
                        self.report.violations.push(Violation::NotLive {
                            client: c,
                            attempts: e.attempts,
                        });
                    }
                    if self.sc.quiet() {
                        // Well within the ttl: a left-behind key would still be there.
                        let settle = self.sc.delay_us.1 * 4 + 1_000;
                        let crashes = self.servers.iter().map(|s| s.crashes_since).collect();
                        let token = op.token().as_bytes().to_vec();
                        self.push(self.now + settle, Event::CheckLeftBehind { token, crashes });
                    }
                    let serial = self.clients[c].op_serial;
                    if !op.is_finished() || self.conns[c].iter().any(|k| k.owes(serial)) {
                        self.clients[c].background.push((serial, op));
                        self.flush(c);
                    }
                    self.idle(c)
                }
            },
            State::Holding(h) => {
                let (next, again) = self.step_holding(c, h, now.as_micros());
                if again {
                    self.clients[c].state = next;
                    return self.step(c);
                }
                next
            }
            State::Releasing(mut op) => match op.poll_outcome() {
                None => State::Releasing(op),
                Some(_) => self.idle(c),
            },
            State::Finished => State::Finished,
        };
        self.clients[c].state = next;
        self.schedule_wake(c);
    }

    pub(super) fn idle(&mut self, c: usize) -> State {
        let ms = self.rng.range(self.sc.idle_ms.0, self.sc.idle_ms.1);
        let at = self.clients[c].clock.local(self.now) + ms * 1_000;
        self.clients[c].state = State::Idle;
        let real = self.clients[c].clock.real(at);
        self.wake_at_real(c, real);
        State::Idle
    }

    pub(super) fn maybe_pause(&mut self, c: usize, holding: bool) {
        if self.sc.pause.0 > 0 && self.rng.chance(self.sc.pause.0) {
            let (lo, hi) = self.sc.pause.1;
            let len = self.rng.range(lo, hi) * 1_000;
            // A pause while holding starts just after the grant.
            let start = self.now + if holding { 1 } else { 0 };
            let until = self.clients[c].paused_until.max(start + len);
            self.clients[c].paused_until = until;
            self.push(until, Event::Resume { client: c });
        }
    }

    /// Checker 3 applies to an operation that started at `started_real`:
    /// in a liveness scenario, and after the faults of a scenario that
    /// loses bytes have ended and settled (a connection out of step is
    /// found by its next request's probe, and replaced).
    pub(super) fn liveness_applies(&self, started_real: u64) -> bool {
        let settle = 2 * self.sc.ttl_ms * 1_000 + 100_000;
        self.sc.liveness_applies()
            && self
                .sc
                .losses_until_ms
                .is_none_or(|t| started_real > START + t * 1_000 + settle)
    }

    /// A timer for client `c`'s sessions, at the earliest time one wants
    /// to be checked.
    pub(super) fn schedule_tend(&mut self, c: usize) {
        let Some(local) = self.sessions_due(c) else {
            return;
        };
        let real = self.clients[c].clock.real(local).max(self.now);
        let client = &mut self.clients[c];
        client.tend_gen += 1;
        let generation = client.tend_gen;
        self.push(
            real,
            Event::Tend {
                client: c,
                generation,
            },
        );
    }

    pub(super) fn schedule_wake(&mut self, c: usize) {
        self.schedule_tend(c);
        let local = match &self.clients[c].state {
            State::Acquiring { op, .. } => op.poll_timeout().map(Instant::as_micros),
            State::Releasing(op) => op.poll_timeout().map(Instant::as_micros),
            State::Holding(h) => Some(h.wake_at()),
            State::Idle | State::Finished => return,
        };

        if let Some(local) = local {
            let real = self.clients[c].clock.real(local).max(self.now);
            self.wake_at_real(c, real);
        }
    }
}
