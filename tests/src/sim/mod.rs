//! A deterministic simulation of Redlock: N simulated Redis servers, a
//! simulated network and M clients running the real `redlock-core`, all
//! driven from one seed.
//!
//! - **Servers** keep keys with expiry on their own clocks (Redis' millisecond
//!   semantics), evaluate the product's scripts faithfully, answer `NOSCRIPT`
//!   for unknown digests, forget their script cache on restart, and keep or
//!   lose their data on restart (persistence on or off).
//! - **Network**: one TCP-like connection per client and server: messages
//!   are delayed (with occasional long spikes) but never reordered within a
//!   connection; connections reset (in-flight bytes are lost); servers can be
//!   partitioned (traffic is held until the partition heals); in the
//!   scenarios that lose bytes, a request or a reply can vanish from a live
//!   connection, or a reply come twice.
//! - **Clocks** of clients and servers run at rates within a drift bound
//!   (parts per million); clients can be paused (SIGSTOP-like: their clock
//!   runs, they do nothing).
//! - Every request and reply is encoded and parsed with `redlock-resp`.
//! - **Clients** cycle through acquire, hold, release; with a watchdog
//!   (`Scenario::watchdog`) a holder extends its lock on the schedule of
//!   `redlock-std`'s watchdog with the core's `Extend`, and stops using it as
//!   soon as the watchdog declares it lost.
//!
//! Checkers: (1) no two clients' lock uses overlap in real time, extended
//! holds included; (2) fencing tokens strictly increase in grant order; (3)
//! liveness: with a majority up and no contention, every acquisition
//! succeeds at the first attempt and every extension round succeeds; (4) no
//! key is left behind by a failed acquisition once stragglers settle; (5) no
//! client uses the lock after the end of the last validity the core gave it
//! (with (1): a holder's validity, extended parts included, never overlaps
//! another's until it releases); (6) an extension counts only before the
//! validity it extends ended, on the simulated clock; (7) in scenarios that
//! lose bytes on live connections (requests and replies swallowed, replies
//! doubled, resets between a request and its reply), once the faults ended
//! every connection is back in step: no session awaits a reply when the
//! run ends.
//!
//! Each client's connection to each server is driven by the core's
//! session (`redlock_core::session`): it alone matches replies to
//! requests, runs the handshake (judged against the simulated server's own
//! answers, without network delay), backs off, probes a connection whose
//! request is overdue and gives it up when it is out of step.
//!
//! Layout: `rng` (the seeded generator), `scenario` (what varies between
//! runs), `clock` (drifting clocks), `server` (the Redis model), `network`
//! (connections, delays, resets, partitions, crash schedules), `client` (the
//! simulated clients driving the core), `watchdog` (a held lock and its
//! extensions), `check` (the checkers and their report); this file holds the
//! event queue that runs them.

// Test support: a broken invariant of the simulation itself is a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check;
mod client;
mod clock;
mod network;
mod rng;
mod scenario;
mod server;
mod watchdog;

use alloc::collections::{BTreeMap, BinaryHeap, VecDeque};
use core::cmp::Reverse;

use redlock_core::Servers;

pub use check::{RunReport, Violation};
pub use network::{SimOwed, SimSession};
pub use rng::SimRng;
pub use scenario::{Crashes, Scenario};
pub use server::{Server, encode_args};

use client::{Client, State};
use clock::Clock;
use network::Conn;

const RESOURCE: &[u8] = b"res";

/// Simulated time starts here (µs), so that servers have been up a while.
const START: u64 = 100_000_000;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A message arrives (to the server, or back to the client).
    Deliver {
        to_server: bool,
        client: usize,
        server: usize,
        epoch: u32,
        bytes: Vec<u8>,
        op: u64,
    },
    /// A client timer (wake generation, to ignore superseded timers).
    Wake {
        client: usize,
        generation: u64,
    },
    /// A client's sessions want to be checked (a probe to send, a probe
    /// unanswered), whatever the client does meanwhile (idle, finished).
    Tend {
        client: usize,
        generation: u64,
    },
    Crash {
        server: usize,
    },
    Restart {
        server: usize,
    },
    Partition {
        server: usize,
        until: u64,
    },
    /// A paused client resumes and handles what arrived meanwhile.
    Resume {
        client: usize,
    },
    /// Checker 4: look for a failed acquisition's token.
    CheckLeftBehind {
        token: Vec<u8>,
        crashes: Vec<u64>,
    },
}

/// One simulation run.
#[allow(missing_debug_implementations)] // holds operations mid-flight; nothing useful to print
pub struct Sim {
    sc: Scenario,
    rng: SimRng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Event)>>,
    servers: Vec<Server>,
    partitioned_until: Vec<u64>,
    clients: Vec<Client>,
    conns: Vec<Vec<Conn>>,
    uses: Vec<(usize, u64, u64)>,
    grants: Vec<(u64, Option<u64>)>,
    report: RunReport,
    /// `SIM_TRACE=1`: print every command a server executes.
    trace: bool,
}

impl Sim {
    /// Sets up a run of `sc`.
    pub fn new(sc: Scenario) -> Sim {
        let mut rng = SimRng::new(sc.seed.wrapping_mul(31).wrapping_add(7));
        let bound = sc.clock_ppm as i64;
        let clock = |rng: &mut SimRng, worst: i64| Clock {
            offset: rng.range(0, 1_000_000_000),
            ppm: if sc.clock_extreme {
                worst
            } else {
                rng.range(0, 2 * sc.clock_ppm) as i64 - bound
            },
        };
        let servers = (0..sc.servers)
            .map(|i| Server {
                clock: clock(&mut rng, bound),
                up: i >= sc.down_from_start,
                persistent: sc.crashes.is_some_and(|c| c.persistent),
                started_real: 0,
                data: BTreeMap::new(),
                scripts: Vec::new(),
                crashes_since: 0,
            })
            .collect();
        let clients = (0..sc.clients)
            .map(|_| Client {
                clock: clock(&mut rng, -bound),
                state: State::Idle,
                cycles_left: sc.cycles,
                op_serial: 0,
                paused_until: 0,
                servers: Servers::new(sc.servers).unwrap(),
                background: Vec::new(),
                wake_gen: 0,
                tend_gen: 0,
                inbox: VecDeque::new(),
            })
            .collect();
        let conns = (0..sc.clients)
            .map(|_| {
                (0..sc.servers)
                    .map(|_| Conn::new(sc.session_hook))
                    .collect()
            })
            .collect();
        Sim {
            partitioned_until: vec![0; sc.servers],
            sc,
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            servers,
            clients,
            conns,
            uses: Vec::new(),
            grants: Vec::new(),
            report: RunReport::default(),
            trace: std::env::var_os("SIM_TRACE").is_some(),
        }
    }

    fn push(&mut self, at: u64, ev: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, ev)));
    }

    /// Runs to the end and checks the invariants.
    pub fn run(mut self) -> RunReport {
        self.now = START;
        for c in 0..self.sc.clients {
            let at = START + self.rng.range(0, 5_000);
            self.wake_at_real(c, at);
        }
        self.schedule_faults();
        // Bounded: every client does a fixed number of cycles.
        let limit = START + 600_000_000u64;
        // A broken variant must fail the run, not hang it: a run handles
        // far fewer events than this (a timer that fires again and again at
        // one instant would never move the clock on).
        let mut budget = 2_000_000u64;
        while let Some(Reverse((at, _, ev))) = self.queue.pop() {
            self.now = at;
            if at > limit {
                break;
            }
            budget = budget.saturating_sub(1);
            if budget == 0 {
                self.report.violations.push(Violation::Stalled { at });
                break;
            }
            self.handle(ev);
            if self
                .clients
                .iter()
                .all(|c| matches!(c.state, State::Finished) && c.background.is_empty())
                && !self.queue.iter().any(|Reverse((_, _, e))| {
                    matches!(
                        e,
                        Event::CheckLeftBehind { .. } | Event::Deliver { .. } | Event::Tend { .. }
                    )
                })
            {
                break;
            }
        }
        self.report.end_us = self.now;
        self.check_in_step();
        self.check_overlaps();
        self.check_fences();
        self.report
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Deliver {
                to_server: true,
                client,
                server,
                epoch,
                bytes,
                op,
            } => self.deliver_to_server(client, server, epoch, bytes, op),
            Event::Deliver {
                to_server: false,
                client,
                ..
            }
            | Event::Wake { client, .. }
            | Event::Tend { client, .. }
                if self.clients[client].paused_until > self.now
                    || !self.clients[client].inbox.is_empty() =>
            {
                // A paused process reads nothing; it will, in order, on resume.
                self.clients[client].inbox.push_back(ev);
            }
            Event::Resume { client } => {
                if self.clients[client].paused_until > self.now {
                    return;
                }
                while let Some(ev) = self.clients[client].inbox.pop_front() {
                    self.handle_now(ev);
                }
            }
            ev @ (Event::Deliver {
                to_server: false, ..
            }
            | Event::Wake { .. }
            | Event::Tend { .. }) => self.handle_now(ev),
            Event::Crash { server } => {
                let s = &mut self.servers[server];
                s.up = false;
                s.crashes_since += 1;
                s.scripts.clear();
                if !s.persistent {
                    s.data.clear();
                }
                // Every connection to it breaks.
                for c in 0..self.sc.clients {
                    self.reset(c, server);
                }
            }
            Event::Restart { server } => {
                let s = &mut self.servers[server];
                s.up = true;
                s.started_real = self.now;
            }
            Event::Partition { server, until } => {
                self.partitioned_until[server] = self.partitioned_until[server].max(until);
            }
            Event::CheckLeftBehind { token, crashes } => self.check_left_behind(&token, &crashes),
        }
    }

    /// Handles a client event taken from its inbox (the pause is over).
    fn handle_now(&mut self, ev: Event) {
        match ev {
            Event::Deliver {
                to_server: false,
                client,
                server,
                epoch,
                bytes,
                op,
            } => self.deliver_to_client(client, server, epoch, bytes, op),
            Event::Wake { client, generation } => {
                if generation == self.clients[client].wake_gen {
                    self.step(client);
                }
            }
            Event::Tend { client, generation } => {
                if generation == self.clients[client].tend_gen {
                    self.tend_sessions(client);
                    self.schedule_tend(client);
                }
            }
            other => self.handle(other),
        }
    }
}

impl Sim {
    /// Checker 7: once every reply was delivered (the run ends with none
    /// on its way), a session in step awaits none; one that still does was
    /// kept out of step (a request or reply lost, never found).
    fn check_in_step(&mut self) {
        if self.sc.losses_until_ms.is_none()
            || self
                .queue
                .iter()
                .any(|Reverse((_, _, e))| matches!(e, Event::Deliver { .. }))
        {
            return;
        }
        for (client, conns) in self.conns.iter().enumerate() {
            for (server, conn) in conns.iter().enumerate() {
                let owed = conn.session.owed();
                if owed > 0 {
                    self.report.violations.push(Violation::OutOfStep {
                        client,
                        server,
                        owed,
                    });
                }
            }
        }
    }
}

/// Runs `sc` and returns what was found.
pub fn run(sc: Scenario) -> RunReport {
    Sim::new(sc).run()
}
