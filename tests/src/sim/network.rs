//! The network: one ordered connection per client and server, with
//! delays, spikes, resets and partitions; crashes and restarts are drawn
//! here too.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::collections::VecDeque;

use redlock_core::redlock_resp::{Reply, Status, parse_reply};
use redlock_core::{Instant, Operation, ServerId};

use super::client::State;
use super::watchdog::Holding;
use super::{Event, START, Sim};

#[derive(Debug, Default, Clone)]
pub(super) struct Conn {
    pub(super) epoch: u32,
    /// Last delivery time scheduled in each direction (TCP keeps order).
    pub(super) last_to_server: u64,
    pub(super) last_to_client: u64,
    /// Operation serial of each request sent and not yet answered.
    pub(super) pending_ops: VecDeque<u64>,
    /// The incarnation of the server this connection was opened to.
    pub(super) server_crashes: u64,
}

impl Sim {
    pub(super) fn schedule_faults(&mut self) {
        // Faults are drawn per millisecond over the expected run length.
        let horizon_ms =
            (self.sc.cycles as u64 + 2) * (self.sc.ttl_ms + self.sc.idle_ms.1 + 50) * 2;
        let crashing = self
            .sc
            .crashes
            .map_or(0, |c| c.only_first.min(self.sc.servers));
        for s in 0..self.sc.servers {
            let mut t = 0;
            while t < horizon_ms {
                t += 1;
                if self.sc.partition.0 > 0 && self.rng.chance(self.sc.partition.0) {
                    let until = START + (t + self.rng.range(1, self.sc.partition.1)) * 1_000;
                    self.push(START + t * 1_000, Event::Partition { server: s, until });
                }
                if let Some(c) = self.sc.crashes {
                    if s < crashing && self.rng.chance(c.per_ms_ppm) {
                        self.push(START + t * 1_000, Event::Crash { server: s });
                        let down = self.rng.range(c.down_ms.0, c.down_ms.1);
                        t += down;
                        self.push(START + t * 1_000, Event::Restart { server: s });
                    }
                }
            }
        }
    }

    pub(super) fn delay(&mut self) -> u64 {
        let mut d = self.rng.range(
            self.sc.delay_us.0,
            self.sc.delay_us.1.max(self.sc.delay_us.0),
        );
        if self.sc.spike.0 > 0 && self.rng.chance(self.sc.spike.0) {
            d += self.rng.range(0, self.sc.spike.1);
        }
        d
    }

    /// Resets the connection of `c` to `s`: in-flight bytes are lost and
    /// the client's operations hear of it.
    pub(super) fn reset(&mut self, c: usize, s: usize) {
        let conn = &mut self.conns[c][s];
        conn.epoch += 1;
        let had = !conn.pending_ops.is_empty();
        conn.pending_ops.clear();
        if had {
            let now = self.client_now(c);
            let client = &mut self.clients[c];
            match &mut client.state {
                State::Acquiring { op, .. } => op.handle_connection_error(now, ServerId(s as u8)),
                State::Releasing(op) => op.handle_connection_error(now, ServerId(s as u8)),
                State::Holding(Holding {
                    extending: Some((op, _)),
                    ..
                }) => op.handle_connection_error(now, ServerId(s as u8)),
                _ => {}
            }
            for (_, op) in &mut client.background {
                op.handle_connection_error(now, ServerId(s as u8));
            }
            let now = self.now;
            self.wake_at_real(c, now);
        }
    }

    pub(super) fn send(&mut self, c: usize, s: usize, bytes: Vec<u8>, op: u64) {
        if self.sc.reset_ppm > 0 && self.rng.chance(self.sc.reset_ppm) {
            self.conns[c][s].pending_ops.push_back(op);
            self.reset(c, s);
            return;
        }
        if !self.servers[s].up {
            // Connection refused.
            self.conns[c][s].pending_ops.push_back(op);
            self.reset(c, s);
            return;
        }
        // A (re)connection learns the server's incarnation (INFO server:
        // uptime_in_seconds, rounded down like Redis does).
        let server_crashes = self.servers[s].crashes_since;
        if self.conns[c][s].pending_ops.is_empty()
            && self.conns[c][s].server_crashes != server_crashes
        {
            self.conns[c][s].server_crashes = server_crashes;
        }
        if self.sc.config.restart_guard.is_some() {
            let uptime_s = (self.now - self.servers[s].started_real) / 1_000_000;
            let local = self.clients[c].clock.local(self.now);
            let started = Instant::from_micros(local.saturating_sub(uptime_s * 1_000_000));
            let client = &mut self.clients[c];
            client.servers.set_incarnation(ServerId(s as u8), started);
            // The running acquisitions hear of it too (a platform learns it on connect).
            if let State::Acquiring { op, .. } = &mut client.state {
                op.set_incarnation(ServerId(s as u8), started);
            }
            for (_, op) in &mut client.background {
                op.set_incarnation(ServerId(s as u8), started);
            }
        }
        let mut at = self.now + self.delay();
        at = at.max(self.partitioned_until[s]);
        let conn = &mut self.conns[c][s];
        at = at.max(conn.last_to_server);
        conn.last_to_server = at;
        conn.pending_ops.push_back(op);
        let epoch = conn.epoch;
        self.push(
            at,
            Event::Deliver {
                to_server: true,
                client: c,
                server: s,
                epoch,
                bytes,
                op,
            },
        );
    }

    pub(super) fn deliver_to_server(
        &mut self,
        c: usize,
        s: usize,
        epoch: u32,
        bytes: Vec<u8>,
        op: u64,
    ) {
        if epoch != self.conns[c][s].epoch || !self.servers[s].up {
            return;
        }
        let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(&bytes) else {
            panic!("the client sent bytes that do not parse as a command");
        };
        assert_eq!(used, bytes.len());
        let args: Vec<Vec<u8>> = a.iter().map(|r| r.as_bytes().unwrap().to_vec()).collect();
        let now = self.now;
        let reply = self.servers[s].execute(&args, now);
        if self.trace {
            let shown: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(&a[..a.len().min(12)]).into_owned())
                .collect();
            eprintln!(
                "{now} c{c} -> s{s} op{op} {shown:?} => {:?}",
                String::from_utf8_lossy(&reply)
            );
        }
        let mut at = self.now + self.delay();
        at = at.max(self.partitioned_until[s]);
        let conn = &mut self.conns[c][s];
        at = at.max(conn.last_to_client);
        conn.last_to_client = at;
        self.push(
            at,
            Event::Deliver {
                to_server: false,
                client: c,
                server: s,
                epoch,
                bytes: reply,
                op,
            },
        );
    }

    pub(super) fn deliver_to_client(
        &mut self,
        c: usize,
        s: usize,
        epoch: u32,
        bytes: Vec<u8>,
        op: u64,
    ) {
        if epoch != self.conns[c][s].epoch {
            return;
        }
        if self.trace {
            eprintln!(
                "{} s{s} -> c{c} op{op} {:?} current op{}",
                self.now,
                String::from_utf8_lossy(&bytes),
                self.clients[c].op_serial
            );
        }
        let front = self.conns[c][s].pending_ops.pop_front();
        assert_eq!(front, Some(op), "replies come back in order");
        let Ok(Status::Complete((reply, _))) = parse_reply(&bytes) else {
            panic!("bad reply bytes")
        };
        let now = self.client_now(c);
        let server = ServerId(s as u8);
        let client = &mut self.clients[c];
        // Replies go to the operation that sent the request, if it still runs.
        if let Some((_, bg)) = client
            .background
            .iter_mut()
            .find(|(serial, _)| *serial == op)
        {
            assert!(bg.handle_reply(now, server, reply).is_ok());
        } else if op == client.op_serial {
            let r = match &mut client.state {
                State::Acquiring { op, .. } => op.handle_reply(now, server, reply),
                State::Releasing(op) => op.handle_reply(now, server, reply),
                State::Holding(Holding {
                    extending: Some((op, _)),
                    ..
                }) => op.handle_reply(now, server, reply),
                _ => Ok(()),
            };
            assert!(r.is_ok(), "the core saw an unsolicited reply");
        }
        self.step(c);
    }
}
