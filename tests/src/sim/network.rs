//! The network: one ordered connection per client and server, with
//! delays, spikes, resets and partitions; crashes and restarts are drawn
//! here too.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use alloc::collections::VecDeque;

use redlock_core::handshake::Plan;
use redlock_core::redlock_resp::{Reply, Status, parse_reply};
use redlock_core::session::{
    Close, Credentials, Entry, Event as SessionEvent, Policy, Queue, Queued, Session,
    State as SessionState, encode_probe, encode_step,
};
use redlock_core::{Instant, Operation, ServerId};

use super::client::State;
use super::watchdog::Holding;
use super::{Event, START, Sim};

/// The requests a simulated connection's session awaits, tagged with the
/// serial of their operation.
#[derive(Debug, Default, Clone)]
pub struct SimOwed(VecDeque<Entry<u64>>);

impl Queue<u64> for SimOwed {
    fn push_back(&mut self, entry: Entry<u64>) -> Result<(), Entry<u64>> {
        if self.0.len() >= 64 {
            return Err(entry);
        }
        self.0.push_back(entry);
        Ok(())
    }
    fn pop_front(&mut self) -> Option<Entry<u64>> {
        self.0.pop_front()
    }
    fn front(&self) -> Option<&Entry<u64>> {
        self.0.front()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn for_each(&self, f: impl FnMut(&Entry<u64>)) {
        self.0.iter().for_each(f);
    }
}

/// The core's session of one simulated connection: it matches every reply
/// to its request (the simulation does not tell it), probes a connection
/// whose request is overdue, and decides when it is given up.
pub type SimSession = Session<u64, SimOwed>;

/// The tag of a probe's message (no operation has it).
const PROBE_OP: u64 = u64::MAX;

/// The session policy of the simulated clients.
const POLICY: Policy = Policy::DEFAULT;

#[derive(Debug, Clone)]
pub(super) struct Conn {
    pub(super) epoch: u32,
    /// Last delivery time scheduled in each direction (TCP keeps order).
    pub(super) last_to_server: u64,
    pub(super) last_to_client: u64,
    /// The core's session: it alone matches replies to requests.
    pub(super) session: SimSession,
    /// The incarnation of the server this connection was opened to.
    pub(super) server_crashes: u64,
}

impl Conn {
    pub(super) fn new(hook: Option<fn(&mut SimSession)>) -> Conn {
        let plan = Plan {
            // The simulated servers speak the scripts.
            commands: redlock_core::Commands::Scripts,
            auth: false,
            select: false,
            info_required: false,
        };
        let mut session = Session::new(plan, SimOwed::default());
        if let Some(hook) = hook {
            hook(&mut session);
        }
        Conn {
            epoch: 0,
            last_to_server: 0,
            last_to_client: 0,
            session,
            server_crashes: 0,
        }
    }

    /// True while a request of operation `serial` awaits its reply here.
    pub(super) fn owes(&self, serial: u64) -> bool {
        let mut owes = false;
        self.session.for_each_owed(|&t| owes |= t == serial);
        owes
    }
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
        self.close(c, s, Close::Io);
    }

    /// Closes the connection of `c` to `s` because of `why`: in-flight
    /// bytes are lost, and the operations whose requests the session says
    /// are lost hear of it.
    pub(super) fn close(&mut self, c: usize, s: usize, why: Close) {
        let now = self.client_now(c);
        let conn = &mut self.conns[c][s];
        conn.epoch += 1;
        let mut lost: Vec<u64> = Vec::new();
        conn.session.close(now, why, &POLICY, |tag| lost.push(tag));
        lost.dedup();
        if lost.is_empty() {
            return;
        }
        for serial in lost {
            self.connection_error(c, s, serial, now);
        }
        let now = self.now;
        self.wake_at_real(c, now);
    }

    /// Tells client `c`'s operation `serial` (running, or draining in the
    /// background) that its request to `s` is lost.
    fn connection_error(&mut self, c: usize, s: usize, serial: u64, now: Instant) {
        let server = ServerId(s as u8);
        let client = &mut self.clients[c];
        if let Some((_, op)) = client.background.iter_mut().find(|(k, _)| *k == serial) {
            op.handle_connection_error(now, server);
        } else if serial == client.op_serial {
            match &mut client.state {
                State::Acquiring { op, .. } => op.handle_connection_error(now, server),
                State::Releasing(op) => op.handle_connection_error(now, server),
                State::Holding(Holding {
                    extending: Some((op, _)),
                    ..
                }) => op.handle_connection_error(now, server),
                _ => {}
            }
        }
    }

    /// Opens the connection of `c` to `s` if it is down and its session
    /// allows (`urgent`: a release), with the session's handshake, judged
    /// by the session against the server's own answers (at once: the
    /// simulation does not delay the handshake). False if it stays down.
    fn open(&mut self, c: usize, s: usize, urgent: bool) -> bool {
        let now = self.client_now(c);
        let session = &self.conns[c][s].session;
        if session.state() != SessionState::Down {
            return true;
        }
        if !session.may_connect(now, urgent) || !self.servers[s].up {
            return false;
        }
        let real = self.now;
        let conn = &mut self.conns[c][s];
        conn.session.connecting(now, &POLICY);
        conn.session.connected(now, &POLICY);
        let mut buf = vec![0u8; 4096];
        while let Some((step, script)) = conn.session.poll_step() {
            let n = encode_step(&mut buf, step, script, &Credentials::NONE).unwrap();
            conn.session.step_written();
            let args = command_args(&buf[..n]);
            let reply = self.servers[s].execute(&args, real);
            let Ok(Status::Complete((reply, _))) = parse_reply(&reply) else {
                panic!("bad handshake reply bytes")
            };
            if conn.session.handle_reply(now, &reply, |_| None).is_err() {
                conn.session.close(now, Close::Io, &POLICY, |_| {});
                return false;
            }
        }
        conn.session.is_ready()
    }

    /// Checks the sessions of client `c`: a connection given up is closed,
    /// and a probe a session wants is sent.
    pub(super) fn tend_sessions(&mut self, c: usize) {
        let now = self.client_now(c);
        for s in 0..self.sc.servers {
            if let Some(why) = self.conns[c][s].session.handle_timeout(now) {
                self.close(c, s, why);
                continue;
            }
            if self.conns[c][s].session.poll_probe() {
                let mut buf = [0u8; 64];
                let n = encode_probe(&mut buf).unwrap();
                self.conns[c][s].session.probe_written(now, &POLICY);
                self.transmit(c, s, buf[..n].to_vec(), PROBE_OP);
            }
        }
    }

    /// When client `c`'s sessions want to be checked next (local clock).
    pub(super) fn sessions_due(&self, c: usize) -> Option<u64> {
        self.conns[c]
            .iter()
            .filter_map(|k| k.session.poll_timeout())
            .map(Instant::as_micros)
            .min()
    }

    /// Sends request `t` of operation `op` from `c` to `s`, through the
    /// connection's session.
    pub(super) fn send(
        &mut self,
        c: usize,
        s: usize,
        bytes: Vec<u8>,
        op: u64,
        t: redlock_core::Transmit,
    ) {
        let now = self.client_now(c);
        if !self.open(c, s, t.release) {
            // Connection refused, or in its backoff: the request is lost.
            self.connection_error(c, s, op, now);
            let real = self.now;
            self.wake_at_real(c, real);
            return;
        }
        match self.conns[c][s].session.push(now, op, t.deadline, &POLICY) {
            Ok(Queued::ProbeFirst) => {
                // An older request overdue: the probe goes first.
                let mut buf = [0u8; 64];
                let n = encode_probe(&mut buf).unwrap();
                self.transmit(c, s, buf[..n].to_vec(), PROBE_OP);
            }
            Ok(_) => {}
            Err(_) => {
                self.close(c, s, Close::Stuck);
                return;
            }
        }
        if self.sc.reset_ppm > 0 && self.rng.chance(self.sc.reset_ppm) {
            self.reset(c, s);
            return;
        }
        // A (re)connection learns the server's incarnation (INFO server:
        // uptime_in_seconds, rounded down like Redis does).
        let server_crashes = self.servers[s].crashes_since;
        if self.conns[c][s].server_crashes != server_crashes {
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
        self.transmit(c, s, bytes, op);
    }

    /// Puts `bytes` on the connection of `c` to `s`.
    fn transmit(&mut self, c: usize, s: usize, bytes: Vec<u8>, op: u64) {
        let mut at = self.now + self.delay();
        at = at.max(self.partitioned_until[s]);
        let conn = &mut self.conns[c][s];
        at = at.max(conn.last_to_server);
        conn.last_to_server = at;
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
        let losing = self
            .sc
            .losses_until_ms
            .is_some_and(|t| self.now < START + t * 1_000);
        if losing && self.rng.chance(self.sc.lose_request_ppm) {
            // Swallowed on a live connection: never run, never answered.
            return;
        }
        let args = command_args(&bytes);
        let now = self.now;
        let reply = self.servers[s].execute(&args, now);
        if losing && self.rng.chance(self.sc.lose_reply_ppm) {
            // Run, and its reply swallowed.
            return;
        }
        if losing && self.rng.chance(self.sc.reset_before_reply_ppm) {
            // Run, and the connection reset before the reply.
            self.reset(c, s);
            return;
        }
        let copies = if losing && self.rng.chance(self.sc.duplicate_reply_ppm) {
            2
        } else {
            1
        };
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
        for _ in 0..copies {
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
                    bytes: reply.clone(),
                    op,
                },
            );
        }
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
        let Ok(Status::Complete((reply, _))) = parse_reply(&bytes) else {
            panic!("bad reply bytes")
        };
        let now = self.client_now(c);
        let server = ServerId(s as u8);
        // The session says which request it answers (`op` is what the
        // simulation knows, and the client does not).
        let op = match self.conns[c][s].session.handle_reply(now, &reply, |_| None) {
            Ok(SessionEvent::Reply(tag)) => tag,
            Ok(_) => return self.step(c),
            Err(why) => {
                if self.trace {
                    eprintln!("{} c{c} s{s} op{op}: {why}", self.now);
                }
                self.close(c, s, why);
                return self.step(c);
            }
        };
        let client = &mut self.clients[c];
        // Replies go to the operation that sent the request, if it still runs.
        if let Some((_, bg)) = client
            .background
            .iter_mut()
            .find(|(serial, _)| *serial == op)
        {
            if bg.handle_reply(now, server, reply).is_err() {
                // Unsolicited (possible only once out of step): closed.
                self.close(c, s, Close::Unsolicited);
            }
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
            if r.is_err() {
                self.close(c, s, Close::Unsolicited);
            }
        }
        self.step(c);
    }
}

/// The arguments of a command's bytes.
fn command_args(bytes: &[u8]) -> Vec<Vec<u8>> {
    let Ok(Status::Complete((Reply::Aggregate(a), used))) = parse_reply(bytes) else {
        panic!("the client sent bytes that do not parse as a command");
    };
    assert_eq!(used, bytes.len());
    a.iter().map(|r| r.as_bytes().unwrap().to_vec()).collect()
}
