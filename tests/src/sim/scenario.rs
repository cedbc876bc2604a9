//! What varies between runs: the scenarios within the algorithm's
//! assumptions, and the knobs the negative controls turn.

use redlock_core::{Config, Duration, Retry};

use super::SimRng;
use super::network::SimSession;

/// Server crashes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crashes {
    /// Chance per million, per server and per millisecond, of a crash.
    pub per_ms_ppm: u64,
    /// Keys survive a restart (`appendfsync always`).
    pub persistent: bool,
    /// How long a crashed server stays down, in ms (range).
    pub down_ms: (u64, u64),
    /// Only the first this-many servers crash (a minority, for fault models
    /// that allow only that many data losses).
    pub only_first: usize,
}

/// Everything that varies between runs.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed of every random choice in the run.
    pub seed: u64,
    /// Number of servers.
    pub servers: usize,
    /// Number of clients, all on one resource.
    pub clients: usize,
    /// Lock cycles per client.
    pub cycles: usize,
    /// Lock ttl in ms.
    pub ttl_ms: u64,
    /// The core's configuration (fencing, guard, mutants, retries...).
    pub config: Config,
    /// One-way delay range in µs.
    pub delay_us: (u64, u64),
    /// Chance per million of a delay spike on a message, and its size in µs.
    pub spike: (u64, u64),
    /// Chance per million that sending a message resets its connection.
    pub reset_ppm: u64,
    /// Chance per million, per ms, of a partition of one server, and its length in ms.
    pub partition: (u64, u64),
    /// Server crashes, if any.
    pub crashes: Option<Crashes>,
    /// Clock rates are within ± this many parts per million.
    pub clock_ppm: u64,
    /// Clocks at the bound in the worst direction: servers fast, clients slow.
    pub clock_extreme: bool,
    /// Client pauses: chance per cycle (per million) and length range in ms.
    pub pause: (u64, (u64, u64)),
    /// Pauses may hit a client while it holds the lock (outside the assumptions).
    pub pause_while_holding: bool,
    /// A client uses the lock for this fraction of its validity (per mille range).
    pub hold_permille: (u64, u64),
    /// Idle time between a client's cycles, in ms.
    pub idle_ms: (u64, u64),
    /// Servers down for the whole run (liveness scenarios).
    pub down_from_start: usize,
    /// Holders keep their locks alive with a watchdog: they extend on the
    /// schedule of `redlock-std`'s (SPEC F2), so a hold may last several
    /// validities (`hold_permille` above 1,000).
    pub watchdog: bool,
    /// The configuration the extensions use, when not `config` (a negative
    /// control gives a broken variant to the extensions only).
    pub extend_config: Option<Config>,
    /// A broken client (outside the algorithm): its watchdog keeps trying
    /// until the validity ends, and counts a round that the core ended as
    /// expired (no majority before the validity ended) as an extension.
    pub late_extensions_count: bool,
    /// Bytes lost on a live connection (no reset), chances per million per
    /// message: a request lost before the server reads it, a reply lost
    /// after the server ran the request, a reply delivered twice, and a
    /// connection reset between a request the server ran and its reply.
    pub lose_request_ppm: u64,
    /// See `lose_request_ppm`.
    pub lose_reply_ppm: u64,
    /// See `lose_request_ppm`.
    pub duplicate_reply_ppm: u64,
    /// See `lose_request_ppm`.
    pub reset_before_reply_ppm: u64,
    /// Those four faults happen only before this many ms of simulated
    /// time; from then on (plus a settle time), checker 3 applies to them:
    /// every acquisition of the one client succeeds at its first attempt.
    pub losses_until_ms: Option<u64>,
    /// Called on every client's session with every server when it is made:
    /// a negative control breaks them (`Session::keep_out_of_step`).
    pub session_hook: Option<fn(&mut SimSession)>,
}

impl Scenario {
    pub(super) fn quiet(&self) -> bool {
        self.losses_until_ms.is_none()
            && self.reset_ppm == 0
            && self.partition.0 == 0
            && self.crashes.is_none()
            && self.pause.0 == 0
            && self.spike.0 == 0
    }

    /// Checker 3 applies: one client, a majority up, nothing else going wrong.
    pub(super) fn liveness_applies(&self) -> bool {
        let timeout = self
            .config
            .request_timeout_for(Duration::from_millis(self.ttl_ms))
            .as_micros();
        (self.quiet() || self.losses_until_ms.is_some())
            && self.clients == 1
            && self.down_from_start * 2 < self.servers
            && 2 * self.delay_us.1 < timeout
    }

    /// Bytes lost on live connections: one client on 3 or 5 servers, a
    /// quiet network otherwise, requests and replies lost, replies
    /// duplicated and connections reset between a request and its reply
    /// during the first half of the run; checker 3 applies after it.
    pub fn losing_bytes(seed: u64) -> Scenario {
        let mut sc = Scenario::liveness(seed);
        let mut r = SimRng::new(seed ^ 0x5E55_1011);
        sc.servers = [3, 5][r.range(0, 1) as usize];
        sc.down_from_start = 0;
        sc.cycles = r.range(20, 40) as usize;
        sc.idle_ms = (0, r.range(1, 10));
        sc.lose_request_ppm = r.range(10_000, 50_000);
        sc.lose_reply_ppm = r.range(10_000, 50_000);
        sc.duplicate_reply_ppm = r.range(0, 20_000);
        sc.reset_before_reply_ppm = r.range(0, 5_000);
        let cycle_ms = sc.ttl_ms + sc.idle_ms.1;
        sc.losses_until_ms = Some(cycle_ms * sc.cycles as u64 / 3);
        sc
    }

    /// A liveness scenario: one client, no contention, a minority of servers
    /// down for the whole run, a quiet network with delays well under the
    /// request timeout.
    pub fn liveness(seed: u64) -> Scenario {
        let mut sc = Scenario::within_assumptions(seed);
        let mut r = SimRng::new(seed ^ 0xABCD);
        sc.clients = 1;
        sc.reset_ppm = 0;
        sc.partition = (0, 0);
        sc.crashes = None;
        sc.pause = (0, (0, 0));
        sc.spike = (0, 0);
        sc.delay_us = (20, 1_000);
        sc.ttl_ms = sc.ttl_ms.max(100);
        // The first fenced acquisition of a resource needs every server
        // (see the core's F1 repair rule): fenced runs have all servers up.
        sc.down_from_start = if sc.config.fencing {
            0
        } else {
            r.range(0, (sc.servers as u64 - 1) / 2) as usize
        };
        sc
    }
}

impl Scenario {
    /// A scenario within the algorithm's assumptions, varied by `seed`:
    /// delays, spikes, resets, partitions, crash-restarts (with persistence,
    /// or without it but restarted after more than the ttl), pauses outside
    /// the critical section, clock rates within the drift bound, fencing on
    /// or off, the restart guard on or off, and in half the runs holders
    /// that keep their locks with a watchdog for up to three validities
    /// (sometimes with an extension limit).
    pub fn within_assumptions(seed: u64) -> Scenario {
        let mut r = SimRng::new(seed);
        let servers = [1, 3, 3, 5, 5, 5, 7][r.range(0, 6) as usize];
        let ttl_ms = r.range(50, 400);
        let fencing = r.chance(400_000);
        let persistent = fencing || r.chance(500_000);
        // Without persistence, a restart is either delayed beyond the ttl, or
        // immediate with the client-side restart guard on.
        let guard = !persistent && r.chance(500_000);
        let crashes = r.chance(400_000).then_some(Crashes {
            per_ms_ppm: r.range(10, 200),
            persistent,
            down_ms: if persistent || guard {
                (1, 50)
            } else {
                (ttl_ms + 1, ttl_ms * 2)
            },
            only_first: servers,
        });
        let quiet = r.chance(250_000);
        let config = Config {
            restart_guard: guard.then_some(Duration::from_millis(ttl_ms)),
            fencing,
            retry: Retry {
                retries: r.range(0, 6) as u32,
                jitter: Duration::from_millis(r.range(1, 40)),
            },
            ..Config::DEFAULT
        };
        let mut sc = Scenario {
            seed,
            servers,
            clients: r.range(1, 5) as usize,
            cycles: r.range(2, 6) as usize,
            ttl_ms,
            config,
            delay_us: (r.range(20, 200), r.range(200, 3_000)),
            // A quarter of the runs have a quiet network (for checker 4).
            spike: if quiet {
                (0, 0)
            } else {
                (r.range(0, 20_000), r.range(1_000, ttl_ms * 2_000))
            },
            reset_ppm: if quiet { 0 } else { r.range(0, 20_000) },
            partition: if quiet {
                (0, 0)
            } else {
                (r.range(0, 300), r.range(1, ttl_ms))
            },
            crashes: if quiet { None } else { crashes },
            // Bounded drift: 0.25% each side; drift allowance is >= 1% + 2 ms.
            clock_ppm: r.range(0, 2_500),
            clock_extreme: false,
            pause: if quiet {
                (0, (0, 0))
            } else {
                (r.range(0, 300_000), (1, ttl_ms * 2))
            },
            pause_while_holding: false,
            hold_permille: (r.range(100, 500), r.range(500, 1_000)),
            idle_ms: (0, r.range(1, 30)),
            down_from_start: 0,
            watchdog: false,
            extend_config: None,
            late_extensions_count: false,
            lose_request_ppm: 0,
            lose_reply_ppm: 0,
            duplicate_reply_ppm: 0,
            reset_before_reply_ppm: 0,
            losses_until_ms: None,
            session_hook: None,
        };
        // Drawn last, so that the fields above are what they were before
        // clients had watchdogs.
        if r.chance(500_000) {
            sc.watchdog = true;
            sc.hold_permille.1 = r.range(1_000, 3_000);
            if r.chance(250_000) {
                sc.config.max_extensions = Some(r.range(1, 3) as u32);
            }
        }
        sc
    }
}
